"""``fp.Optimizer``: ask/tell from a plain Python loop, for one run or S lock-stepped runs, with save and load.

    opt = fp.Optimizer(config, space, seeds=None)      # seeds=S: S independent runs side by side
    while not opt.done:
        q = opt.ask()                  # q.points (M, B, D), q.counts (M, B) (a leading S axis with seeds)
        opt.tell(q, values)            # values: the means of the asked pulls, NaN in empty slots
    opt.recommendation; opt.result(); opt.save("run.fpne"); fp.Optimizer.load("run.fpne")

It holds a :class:`fedpne_jax.core.stepper.Stepper`'s state on the device and calls its functions,
compiled once, over the seeds (stepper.batch: the step counter shared).  Seed i runs with the key
``fp.run`` gives seed index i, so a noise-free run told the objective's values is ``fp.run``'s.
Every bad call is refused on the host, before the state changes.  The told values are kept (S x
steps x M x B numbers): a table sized on the host that overflows is grown through the algorithm's
``grow`` hook and the run replayed on it, in one compiled scan; results do not depend on the sizes.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import stat
import uuid
import zipfile
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

import objectives
from fedpne_jax.core import executor, registry
from fedpne_jax.core import stepper as stepper_lib
from fedpne_jax.core.algorithm import describe
from fedpne_jax.core.errors import CapacityError
from fedpne_jax.core.files import write_atomic
from fedpne_jax.core.result import RunResult
from fedpne_jax.core.version import __version__

FORMAT = "fedpne-asktell"
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True, eq=False)
class Ask:
    """One step's query: ``points`` (M, B, D) and ``counts`` (M, B) int (0: an empty slot), with a
    leading seed axis when the optimizer runs several seeds.  ``step`` and the optimizer's ``run_id``
    let ``tell`` refuse a query told twice, out of order or to another optimizer."""
    points: np.ndarray
    counts: np.ndarray
    step: int
    run_id: str


class Optimizer:
    def __init__(self, config, space, seeds: Optional[int] = None, base_seed: int = 0, f_star=None):
        if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, (int, np.integer)) or seeds < 1):
            raise ValueError(f"seeds must be None (one run) or a count >= 1, got {seeds!r}")
        if isinstance(base_seed, bool) or not isinstance(base_seed, (int, np.integer)) or not 0 <= base_seed < 2**32:
            raise ValueError(f"base_seed must be an integer in [0, 2^32), got {base_seed!r}")
        self._config, self._space_arg, self._f_star = config, space, f_star
        self.seeds, self.base_seed = seeds, int(base_seed)
        self._stepper = stepper_lib.stepper(config, space, f_star)
        self.run_id = uuid.uuid4().hex
        self._values: list = []       # told values, one (S, M, B) array a step
        self._compile()
        self._state = self._fresh()
        self._finished: Optional[bool] = None      # done, as the last tell found it (None: not known)
        self._asked: Optional[Ask] = None

    # ------------------------------------------------------------ the compiled functions

    def _compile(self):
        s = self._stepper
        key = _program_key(s, self._space_arg)
        if key not in _PROGRAMS:
            while len(_PROGRAMS) >= _KEEP:
                _PROGRAMS.pop(next(iter(_PROGRAMS)))
            _PROGRAMS[key] = (s, _programs(s))
        # An optimizer of the same configuration, space and tables reuses the compiled programs.
        self._stepper, (self._init, self._ask, self._tell, self._recommend, self._done, self._outputs,
                        self._failed, self._replay) = _PROGRAMS[key][0], _PROGRAMS[key][1]

    def _keys(self):
        return jax.random.wrap_key_data(executor.run_key_words(self.base_seed, np.arange(self.runs)))

    def _fresh(self):
        with self._stepper.x64():
            return self._init(self._keys())

    @property
    def runs(self) -> int:
        return 1 if self.seeds is None else int(self.seeds)

    @property
    def stepper(self) -> stepper_lib.Stepper:
        return self._stepper

    @property
    def step(self) -> int:
        """Steps told so far."""
        return int(self._state.step)

    @property
    def done(self) -> bool:
        """Every run is done (with seeds, a finished run's queries are empty until all are)."""
        if self._finished is None:
            with self._stepper.x64():
                self._finished = bool(np.all(np.asarray(self._done(self._state))))
        return self._finished

    @property
    def recommendation(self) -> np.ndarray:
        """(D,), or (S, D) with seeds: the algorithm's recommendation now."""
        with self._stepper.x64():
            x = np.asarray(self._recommend(self._state))
        return x[0] if self.seeds is None else x

    # ------------------------------------------------------------ ask and tell

    def ask(self) -> Ask:
        if self.done:
            raise ValueError("ask: the run is done (Optimizer.done is True); read result() or recommendation")
        if self._asked is not None:
            return self._asked        # asking again before telling gives the same query
        while True:
            with self._stepper.x64():
                query, state, failed = self._ask(self._state)
            self._state = state
            if not bool(failed):
                break
            # The ask itself outgrew a table (Fed-PNE expands its tree before a phase): its query is
            # empty.  The told steps are replayed on the grown tables and the step asked again.
            self._grow_and_replay()
        points, counts = np.asarray(query.points), np.asarray(query.counts)
        if self.seeds is None:
            points, counts = points[0], counts[0]
        self._asked = Ask(points, counts, self.step, self.run_id)
        self._query = query
        return self._asked

    def tell(self, query: Ask, values) -> None:
        if not isinstance(query, Ask):
            raise TypeError(f"query must be the Ask that ask() returned, got {type(query).__name__}")
        if query.run_id != self.run_id:
            raise ValueError("query: it was asked by another optimizer")
        if self._asked is None or query.step != self._asked.step:
            told = query.step < self.step
            raise ValueError(f"query: step {query.step} was {'already told' if told else 'not asked'}; "
                             f"the pending step is {self.step if self._asked is not None else 'none (call ask)'}")
        if query is not self._asked:
            raise ValueError("query: not the pending query object (was it copied or rebuilt?)")
        values = self._check_values(query.counts, values)
        batched = values if self.seeds is not None else values[None]
        with self._stepper.x64():
            # One program a step: the tell, whether a table overflowed and whether every run is done.
            state, failed, finished = self._tell(self._state, self._query, jnp.asarray(batched,
                                                                                       self._query.points.dtype))
            self._values.append(batched.astype(np.float64))
            self._state = state
            self._asked, self._query = None, None
            failed, self._finished = jax.device_get((failed, finished))
            self._finished = bool(self._finished)
            if failed:
                self._finished = None
                self._grow_and_replay()

    def _check_values(self, counts: np.ndarray, values) -> np.ndarray:
        try:
            raw: Optional[np.ndarray] = np.asarray(values)
        except (TypeError, ValueError):       # a ragged nesting of sequences
            raw = None
        # Only real numbers: a complex value would lose its imaginary part, and a string or a bool
        # would be converted, without a word.
        if raw is None or raw.dtype.kind not in "fiu":
            got = type(values).__name__ + ("" if raw is None else f" of {raw.dtype}")
            raise TypeError(f"values must be an array of real numbers of shape {counts.shape}, got {got}")
        values = raw.astype(np.float64)
        if values.shape != counts.shape:
            raise ValueError(f"values must have the query's shape {counts.shape} (counts), got {values.shape}")
        used = counts > 0
        real = self._stepper.real
        with np.errstate(over="ignore"):
            bad = used & ~np.isfinite(values.astype(real))      # as the run will hold them
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"values: {int(bad.sum())} asked slot(s) hold NaN or inf (in {real}, the run's "
                             f"precision), e.g. at {where}: {values[where]!r}")
        extra = ~used & ~np.isnan(values)
        if extra.any():
            where = tuple(int(i) for i in np.argwhere(extra)[0])
            raise ValueError(f"values: slot {where} has count 0 (nothing was asked there) but holds "
                             f"{values[where]!r}; leave empty slots NaN")
        return values

    def _told(self) -> np.ndarray:
        """(steps, S, M, B) every told value, NaN-padded to the current slot count: a grown table has
        more slots, and its rows keep their indices (rows are created in order), so a step told
        before the growth is the same step with empty slots added."""
        width = self._stepper.slots[-1]
        return np.stack([np.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, width - v.shape[-1])], constant_values=np.nan)
                         for v in self._values])

    def _grow_and_replay(self):
        """Grow the overflowing tables and replay every told step on them (same numbers)."""
        try:
            self._stepper = self._stepper.grown()
        except CapacityError as err:
            raise CapacityError(f"ask/tell: a table outgrew its largest size at step {self.step}: {err}") from None
        self._compile()
        self._replay_all()

    def _replay_all(self):
        """The state after every told step, from a fresh one (growing tables as needed)."""
        with self._stepper.x64():
            state = self._fresh()
            if self._values:
                state = self._replay(state, jnp.asarray(self._told(), self._stepper.real))
            failed = bool(np.any(np.asarray(self._failed(state))))
        if failed:
            self._grow_and_replay()
        else:
            self._state = state
            self._finished = None

    # ------------------------------------------------------------ results

    def outputs(self):
        """The algorithm's Outputs of every run (numpy, a leading seed axis), as fp.run computes them."""
        with self._stepper.x64():
            return jax.tree.map(np.asarray, self._outputs(self._state))

    def result(self) -> RunResult:
        """A RunResult like fp.run's (regret where f* is known: a registered objective or ``f_star``;
        for a box without it the curves are NaN and the metrics hold the recommendations)."""
        s = self._stepper
        out = self.outputs()
        name, resolved, metrics = describe(s.algorithm, s.config, s.tables, out)
        return RunResult.build(name, resolved, s.host, np.arange(self.runs), self.base_seed,
                               s.config.checkpoint_rounds, out.curve, out.final_regret, metrics, 0.0, 0.0,
                               partial=not self.done)

    # ------------------------------------------------------------ save and load

    def _header(self) -> dict:
        s = self._stepper
        space = s.space
        fields = {f.name: _to_json(getattr(self._config, f.name)) for f in dataclasses.fields(self._config) if f.init}
        return {"format": FORMAT, "version": FORMAT_VERSION, "package": __version__, "algorithm": s.algorithm.name,
                "config": fields, "seeds": self.seeds, "base_seed": self.base_seed, "step": self.step,
                "run_id": self.run_id, "pending": self._asked is not None,
                "space": {"lo": list(space.lo), "hi": list(space.hi), "f_star": space.f_star,
                          "clients": space.num_clients,
                          "objective": None if space.objective is None else space.objective.name},
                "f_star": self._f_star}

    def save(self, path) -> None:
        """Write the run to ``path`` atomically.  A pending ask is not kept as a query: the loaded run
        asks it again (the same query)."""
        path = os.fspath(path)
        leaves = [np.asarray(jax.random.key_data(x) if _is_key(x) else x) for x in jax.tree.leaves(self._state)]
        arrays = {f"leaf{i}": a for i, a in enumerate(leaves)}
        arrays["told"] = (self._told() if self._values
                          else np.zeros((0, self.runs) + self._stepper.slots, np.float64))
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)  # type: ignore[arg-type]
        payload = buffer.getvalue()
        header = json.dumps(self._header(), sort_keys=True).encode()
        digest = hashlib.sha256(header + payload).hexdigest()

        def write(file):
            with zipfile.ZipFile(file, "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr("header.json", header)
                z.writestr("state.npz", payload)
                z.writestr("sha256", digest)
        write_atomic(path, write)

    @classmethod
    def load(cls, path, space=None) -> Optimizer:
        """The run saved at ``path``, ready to continue bit for bit.  ``space``: the Objective it ran on,
        when it was not a box (default: the registered objective of that name, verified against the
        file).  A damaged, foreign or mismatched file is refused by name (ValueError)."""
        path = os.fspath(path)
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            raise ValueError(f"{path}: no such file") from None
        except OSError as err:
            raise ValueError(f"{path}: cannot read it ({err.strerror})") from None
        if not stat.S_ISREG(mode):      # a folder, or a FIFO that would wait for a writer
            raise ValueError(f"{path}: not a regular file (a saved ask/tell run is a file)")
        try:
            with zipfile.ZipFile(path) as z:
                names = set(z.namelist())
                if not {"header.json", "state.npz", "sha256"} <= names:
                    raise ValueError(f"{path}: not a saved ask/tell run (members {sorted(names)})")
                header_bytes, payload, digest = z.read("header.json"), z.read("state.npz"), z.read("sha256")
        except (zipfile.BadZipFile, EOFError) as err:
            raise ValueError(f"{path}: not a saved ask/tell run, or damaged ({err})") from None
        except OSError as err:
            raise ValueError(f"{path}: cannot read it ({err.strerror})") from None
        if hashlib.sha256(header_bytes + payload).hexdigest() != digest.decode(errors="replace"):
            raise ValueError(f"{path}: checksum mismatch: the file is damaged")
        header = json.loads(header_bytes)
        if header.get("format") != FORMAT:
            raise ValueError(f"{path}: not a saved ask/tell run (format {header.get('format')!r})")
        if header.get("version") != FORMAT_VERSION:
            raise ValueError(f"{path}: format version {header.get('version')} is not {FORMAT_VERSION}, "
                             f"which this fedpne-jax {__version__} reads")
        name = header["algorithm"]
        if name not in registry.names():
            raise ValueError(f"{path}: algorithm {name!r} is not registered here")
        try:
            config = registry.config_type(name)(**{k: _from_json(v) for k, v in header["config"].items()})
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: its {name} configuration is refused here: {err}") from None
        saved = header["space"]
        space = _space_for(path, saved, space, config)
        opt = cls(config, space, seeds=header["seeds"], base_seed=header["base_seed"], f_star=header["f_star"])
        with np.load(io.BytesIO(payload)) as data:
            leaves = [data[f"leaf{i}"] for i in range(len(data.files) - 1)]
            told = data["told"]
        # The told values are replayed (growing any table that overflows, as the saved run did) and the
        # state they give must be the saved one, bit for bit: a file whose state does not follow from its
        # values, or a space or configuration other than the run's, is refused.
        # A run saved after a table grew told its values at the grown width: the loaded run starts on
        # the tables it had (grown as it grew them), since a narrower one cannot hold those values.
        while told.ndim == 4 and opt._stepper.slots[-1] < told.shape[-1]:
            try:
                opt._stepper = opt._stepper.grown()
            except CapacityError:
                raise ValueError(f"{path}: its told values are {told.shape[-1]} slots wide, more than this "
                                 f"configuration's tables reach") from None
            opt._compile()
        opt._values = list(told)
        opt._replay_all()
        compared = opt._state
        while header.get("pending"):    # saved between an ask and its tell: the ask is made again,
            with opt._stepper.x64():    # on grown tables where it outgrew one, as ask() does
                _, compared, failed = opt._ask(jax.tree.map(jnp.copy, opt._state))
            if not bool(failed):
                break
            opt._grow_and_replay()
        mine = [np.asarray(jax.random.key_data(b) if _is_key(b) else b) for b in jax.tree.leaves(compared)]
        if len(mine) != len(leaves) or any(a.shape != b.shape or a.dtype != b.dtype or
                                           not np.array_equal(a, b, equal_nan=True) for a, b in zip(leaves, mine)):
            raise ValueError(f"{path}: its state is not what its told values give on this configuration and space "
                             f"(was it saved from another space? pass the Objective it ran on as space=)")
        opt.run_id = header["run_id"]
        if opt.step != header["step"]:
            raise ValueError(f"{path}: the state is at step {opt.step}, the header says {header['step']}")
        return opt


_PROGRAMS: dict = {}
_KEEP = 16


def _program_key(s: stepper_lib.Stepper, space_arg) -> tuple:
    # An Objective is keyed by identity (its data are arrays); the entry's stepper holds it, so the id
    # stays its own.  A registered objective's name builds equal objectives.
    objective = id(space_arg) if isinstance(space_arg, objectives.Objective) else (
        space_arg if isinstance(space_arg, str) else None)
    return (type(s.config), s.config, repr(s.tables), s.space.lo, s.space.hi, s.space.f_star, s.space.num_clients,
            objective)


def _programs(s: stepper_lib.Stepper) -> tuple:
    init, ask, tell, recommend, done, outputs, failed = stepper_lib.batch(s)

    def replay(state, values):
        def body(st, v):
            q, st = ask(st)
            return tell(st, q, v), None
        return jax.lax.scan(body, state, values)[0]

    def tell_step(state, query, values):
        state = tell(state, query, values)
        return state, jnp.any(failed(state)), jnp.all(done(state))

    # ask and tell replace the state they are given, so its buffers are donated (reused in place).
    def ask_step(state):
        query, state = ask(state)
        return query, state, jnp.any(failed(state))

    return (jax.jit(init), jax.jit(ask_step, donate_argnums=0), jax.jit(tell_step, donate_argnums=0),
            jax.jit(recommend),
            jax.jit(done), jax.jit(outputs), jax.jit(failed), jax.jit(replay))


def _space_for(path: str, saved: dict, space, config):
    if saved["objective"] is None:
        if space is not None:
            raise ValueError(f"space: {path} ran on a box, which it holds; pass no space")
        return (saved["lo"], saved["hi"])
    if space is None:
        try:
            space = objectives.make_objective(saved["objective"], num_clients=saved["clients"])
        except (ValueError, TypeError, KeyError):
            raise ValueError(f"space: {path} ran on objective {saved['objective']!r}, which is not a registered "
                             f"objective here; pass it as space=") from None
    if not isinstance(space, objectives.Objective):
        raise TypeError(f"space must be the objectives.Objective {path} ran on, got {type(space).__name__}")
    mine = {"lo": list(map(float, space.lo)), "hi": list(map(float, space.hi)), "clients": space.num_clients,
            "objective": space.name}
    theirs = {k: saved[k] for k in mine}
    if mine != theirs:
        raise ValueError(f"space: {path} ran on {theirs}, not on {mine}")
    return space


def _is_key(x) -> bool:
    return jnp.issubdtype(jnp.result_type(x), jax.dtypes.prng_key)


def _to_json(value: Any):
    """A configuration field as JSON that _from_json turns back into the same value (tuples kept)."""
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (tuple, list)):
        items = [_to_json(v) for v in value]
        return {"__tuple__": items} if isinstance(value, tuple) else items
    raise TypeError(f"cannot save a configuration field of type {type(value).__name__}")


def _from_json(value):
    if isinstance(value, dict) and set(value) == {"__tuple__"}:
        return tuple(_from_json(v) for v in value["__tuple__"])
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value
