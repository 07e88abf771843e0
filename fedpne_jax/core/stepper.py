"""Ask/tell: any registered algorithm driven one step at a time by the caller, who evaluates the points.

``stepper(config, space)`` gives a :class:`Stepper` of pure functions over a :class:`State` pytree:
``init``, ``ask`` (a :class:`Query` of points (M, B, D) and counts (M, B)), ``tell`` (the mean of each
slot's pulls), ``recommend``, ``done`` and ``outputs``.  An algorithm opts in with its ``steps`` hook
(:class:`MakeSteps`), the rules of its ``run_single`` cut at the evaluation (:class:`Steps`), so a
noise-free run told the objective's values equals ``fp.run``'s bit for bit.  The step counter lives
in :class:`State` beside the algorithm's state, so that :func:`batch` can keep it unbatched and a
rule applied at some steps only stays a branch.  ``space`` is an :class:`objectives.Objective` or a
box ``(lo, hi)``.

The query, the book of regret with an Objective or a box, and the rest: docs/guides/ask-tell.md.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

import objectives
from fedpne_jax.core import checkpoints, executor, registry
from fedpne_jax.core.algorithm import check_inputs as check_pair
from fedpne_jax.core.errors import CapacityError
from fedpne_jax.core.run import check_inputs, resolve_objectives
from fedpne_jax.core.validation import is_real
from objectives.ordered import no_contraction

# State.error bits: a tell the pure functions could not refuse (the Optimizer refuses them on the host).
TOLD_STALE = 1        # a query of another step, or one already told
TOLD_DONE = 2         # asked or told after the run was done
TOLD_NONFINITE = 4    # NaN or inf (after the cast to the run's precision) told where a pull was asked


class Query(NamedTuple):
    points: jax.Array      # (M, B, D)
    counts: jax.Array      # (M, B) int32 pulls asked; 0 marks an empty slot
    step: jax.Array        # () int32 the step that asked it


class State(NamedTuple):
    step: jax.Array        # () int32 steps asked so far
    pending: jax.Array     # () bool: the last ask is not told yet
    error: jax.Array       # () int32 TOLD_* bits
    run: Any               # the algorithm's own state


class Steps(NamedTuple):
    """An algorithm's rules cut at the evaluation.  ``step`` is the index (from 0) of the step being
    asked or told; ``run`` the algorithm's state pytree."""
    init: Callable         # (key) -> run
    ask: Callable          # (step, run) -> (points (M, B, D), counts (M, B), run)
    tell: Callable         # (step, run, points, counts, values (M, B), valid) -> run; nothing is
                           # written unless ``valid`` (a gate, so that a stale tell costs no select)
    recommend: Callable    # (step, run) -> (D,)
    done: Callable         # (step, run) -> bool
    outputs: Callable      # (step, run) -> the algorithm's Outputs, as run_single returns them
    failed: Callable       # (run) -> bool: a table sized on the host overflowed (see Stepper.grown)
    slots: tuple           # (M, B) static
    privatize: Optional[Callable] = None   # (values, counts, key) -> values: the privacy noise a client
                                           # adds to its means before telling them (DP-Fed-PNE); None: none


@dataclasses.dataclass(frozen=True)
class Space:
    """What a stepper knows of the function it optimises: the box, f* when known, and the Objective
    when it was given one (its values then keep the book, as in ``fp.run``)."""
    lo: tuple
    hi: tuple
    f_star: Optional[float]
    num_clients: int
    objective: Any = None

    @property
    def dim(self) -> int:
        return len(self.lo)

    def f_star_as(self, dtype):
        return jnp.asarray(np.nan if self.f_star is None else self.f_star, dtype)

    def target_scale(self, dtype):
        """The targets' scale of the best-so-far measure (checkpoints.target_scale; 1 for a box)."""
        if self.objective is None:
            return jnp.ones((), dtype)
        return checkpoints.target_scale(self.objective, dtype)

    def centre_gap(self, dtype):
        """f* - f(centre): NaN for a box (nothing is known before the first value)."""
        if self.objective is None:
            return jnp.asarray(np.nan, dtype)
        return checkpoints.centre_gap(self.objective, dtype)


def make_space(space, num_clients: int, f_star=None, real: str = "float32") -> Space:
    """A :class:`Space` from an Objective or a box ``(lo, hi)`` (ValueError/TypeError naming ``space``
    or ``f_star``)."""
    if f_star is not None and (not is_real(f_star) or not np.isfinite(f_star)
                               or abs(float(f_star)) > float(np.finfo(real).max)):
        raise ValueError(f"f_star must be a finite number (in {real}, the run's precision), got {f_star!r}")
    if isinstance(space, objectives.Objective):
        objective = checkpoints.with_centre(space, real)
        star = objective.f_star if f_star is None else float(f_star)
        star = None if star is None or not np.isfinite(star) else float(star)
        return Space(tuple(objective.lo), tuple(objective.hi), star, objective.num_clients, objective)
    try:
        lo, hi = space
        lo = np.atleast_1d(np.asarray(lo, np.float64))
        hi = np.atleast_1d(np.asarray(hi, np.float64))
    except (TypeError, ValueError):
        raise TypeError(f"space must be an objectives.Objective or a box (lo, hi) of equal-length sequences, "
                        f"got {type(space).__name__} {space!r:.80}") from None
    if lo.ndim != 1 or lo.shape != hi.shape or lo.size == 0:
        raise ValueError(f"space: lo and hi must be non-empty 1-D sequences of one length, got shapes "
                         f"{lo.shape} and {hi.shape}")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo < hi)):
        raise ValueError(f"space: need finite lo < hi in every dimension, got lo={lo.tolist()}, hi={hi.tolist()}")
    return Space(tuple(float(v) for v in lo), tuple(float(v) for v in hi),
                 None if f_star is None else float(f_star), num_clients)


class BoxObjective:
    """What an algorithm's host-side hooks (make_static, tables, check) read of an objective, for a box:
    its bounds, dimension, f* and clients; it has no values."""

    def __init__(self, space: Space):
        self.name, self.lo, self.hi, self.num_clients = "box", space.lo, space.hi, space.num_clients
        self.f_star = np.nan if space.f_star is None else space.f_star
        self.data, self.centre_value, self.iterative = None, None, False

    @property
    def dim(self) -> int:
        return len(self.lo)

    def outside_unit_interval(self):
        return None


@dataclasses.dataclass(frozen=True, eq=False)
class Stepper:
    """The pure ask/tell functions of one configuration on one space (see the module docstring)."""
    config: Any
    algorithm: Any
    static: Any
    params: Any
    space: Space
    steps: Steps
    tables: Any = None
    host: Any = None           # what the host-side hooks read as the objective

    @property
    def slots(self) -> tuple:
        return self.steps.slots

    @property
    def dim(self) -> int:
        return self.space.dim

    @property
    def real(self) -> str:
        real = getattr(self.static, "real", "float32")
        return real if real in ("float32", "float64") else "float32"

    def x64(self):
        """The context the functions must be traced and run under (float64 configurations)."""
        return jax.enable_x64(self.real == "float64")

    def key(self, seed: int = 0, base_seed: int = 0):
        """The key ``fp.run(config, ..., base_seed=base_seed)`` gives seed index ``seed``."""
        return executor.seed_key(base_seed, seed)

    def init(self, key) -> State:
        with self.x64():
            return State(jnp.int32(0), jnp.bool_(False), jnp.int32(0), self.steps.init(key))

    def ask(self, state: State):
        """The query of the next step.  After ``done`` it is empty (every count 0) and flagged."""
        with self.x64():
            finished = self.steps.done(state.step, state.run)
            points, counts, run = self.steps.ask(state.step, state.run)
            counts = jnp.where(finished, 0, counts).astype(jnp.int32)
            error = state.error | jnp.where(finished, TOLD_DONE, 0)
            return Query(points, counts, state.step), State(state.step, jnp.bool_(True), error, run)

    def tell(self, state: State, query: Query, values) -> State:
        """``state`` after the step's values ((M, B) real numbers; ValueError at trace time for another
        shape).  A query that is not the pending one (told twice, of another step) changes nothing but
        the error bits (TOLD_STALE): the algorithm's writes are gated, not selected, so a stale tell
        costs what a good one does.  NaN or inf where a pull was asked is told, and flagged
        (TOLD_NONFINITE): the run's numbers are then not to be used."""
        with self.x64():
            dtype = jnp.result_type(query.points)
            values = jnp.asarray(values)
            # Shapes are static: a wrong one is refused when the function is traced, not broadcast.
            if values.shape != query.counts.shape:
                raise ValueError(f"tell: values must have the query's shape {query.counts.shape} (counts), "
                                 f"got {values.shape}")
            if not (jnp.issubdtype(values.dtype, jnp.floating) or jnp.issubdtype(values.dtype, jnp.integer)):
                raise TypeError(f"tell: values must be real numbers, got dtype {values.dtype}")
            asked = query.counts > 0
            values = values.astype(dtype)      # a value too large for float32 becomes inf here
            finite = ~jnp.any(asked & ~jnp.isfinite(values))
            values = jnp.where(asked, values, jnp.zeros((), dtype))
            fits = state.pending & (query.step == state.step)
            run = self.steps.tell(state.step, state.run, query.points, query.counts, values, fits)
            # A non-finite value is told and flagged, not refused: refusing it would hold back one
            # seed's step while batch() shares the step counter among the seeds.
            error = state.error | jnp.where(fits, 0, TOLD_STALE) | jnp.where(fits & ~finite, TOLD_NONFINITE, 0)
            return State(jnp.where(fits, state.step + 1, state.step), state.pending & ~fits, error, run)

    def recommend(self, state: State):
        with self.x64():
            return self.steps.recommend(state.step, state.run)

    def done(self, state: State):
        with self.x64():
            return self.steps.done(state.step, state.run)

    def failed(self, state: State):
        """Whether a table sized on the host overflowed: the run must be replayed on :meth:`grown`."""
        with self.x64():
            return self.steps.failed(state.run)

    def grown(self) -> Stepper:
        """This stepper with the larger tables the algorithm's ``grow`` hook gives after an overflow
        (CapacityError when it may not grow further).  Results do not depend on table sizes, so the
        same told values replayed on it give the same run."""
        if self.algorithm.grow is None:
            raise CapacityError(f"algorithm {self.algorithm.name!r}: its tables cannot grow (an overflow is a bug)")
        tables = self.algorithm.grow(self.tables, np.ones(1, bool), True, np.zeros(1, np.int64))
        return _build(self.config, self.algorithm, self.space, self.host, tables)

    def outputs(self, state: State):
        """What ``fp.run``'s ``run_single`` returns for this run (meaningful once ``done``)."""
        with self.x64():
            return self.steps.outputs(state.step, state.run)

    def evaluate(self, query: Query, key=None):
        """Values of ``query`` from the space's Objective, as the simulator's clients see it: client
        m's local objective at its points (the global one for a centralised algorithm), and, when
        ``key`` is given, the mean of ``counts`` pulls under the configuration's noise, then the
        clients' privacy noise where the algorithm has one (``Steps.privatize``).  NaN in empty
        slots."""
        objective = self.space.objective
        if objective is None:
            raise ValueError("evaluate: the space is a box, which has no values; pass an objectives.Objective")
        with self.x64():
            points, counts = query.points, query.counts
            m, b, d = points.shape
            if self.algorithm.federated:
                f = jax.vmap(lambda xs, c: jax.vmap(lambda x: objective.local(x, c))(xs))(points, jnp.arange(m))
            else:
                f = jax.vmap(objective.global_value)(points.reshape(-1, d)).reshape(m, b)
            f = f.astype(points.dtype)
            if key is not None:
                privatize = self.steps.privatize
                if privatize is not None:
                    key, private = jax.random.split(key)
                f = mean_of_pulls(self.config.noise_kind, getattr(self.config, "noise_scale", 0.0), f, counts, key)
                if privatize is not None:
                    f = privatize(f, counts, private)
            return jnp.where(counts > 0, f, jnp.nan)


def mean_of_pulls(kind: str, scale, values, counts, key):
    """The mean of ``counts`` independent noisy pulls at each of ``values`` (exact in distribution):
    Gaussian noise as one normal of variance scale^2 / n, Bernoulli rewards as Binomial(n, f) / n,
    uniform noise U[-a, a] as the mean of n uniforms (drawn up to the largest count)."""
    n = jnp.maximum(counts, 1)
    dtype = values.dtype
    if kind == "gaussian":
        z = jax.random.normal(key, values.shape, dtype)
        return values + no_contraction(jnp.asarray(scale, dtype) * z / jnp.sqrt(n.astype(dtype)))
    if kind == "bernoulli":
        return jax.random.binomial(key, n.astype(dtype), jnp.clip(values, 0, 1), dtype=dtype) / n.astype(dtype)
    if kind == "uniform":
        top = int(np.max(np.asarray(counts))) if not isinstance(counts, jax.core.Tracer) else None
        if top is None:
            raise ValueError("evaluate: uniform noise needs concrete counts (call it outside jit)")
        u = jax.random.uniform(key, (max(top, 1),) + values.shape, dtype, -scale, scale)
        used = jnp.arange(max(top, 1))[(slice(None),) + (None,) * values.ndim] < counts
        return values + jnp.sum(jnp.where(used, u, 0), axis=0) / n.astype(dtype)
    return values


def stepper(config, space, f_star=None) -> Stepper:
    """The ask/tell functions of ``config`` (any registered configuration) on ``space`` (an
    Objective, a registered objective's name, or a box ``(lo, hi)``); ``f_star``: the optimum's value
    for a box (or to override an Objective's)."""
    algorithm = registry.for_config(config)
    if algorithm.steps is None:
        raise ValueError(f"algorithm {algorithm.name!r} has no ask/tell steps (its Algorithm has no steps= hook; "
                         f"see fedpne_jax.core.stepper)")
    clients = getattr(config, "num_clients", 1)
    real = getattr(config, "precision", "float32")
    if isinstance(space, str):
        space = resolve_objectives([config], space)[0]
    host: Any
    if isinstance(space, objectives.Objective):
        check_inputs(config, space)
        made = make_space(space, clients, f_star, real)
        host = space
    else:
        made = make_space(space, clients, f_star, real)
        host = BoxObjective(made)
        check_pair(algorithm, config, host)
    return _build(config, algorithm, made, host, algorithm.initial_tables([config], host))


def _build(config, algorithm, space: Space, host, tables) -> Stepper:
    static = algorithm.make_static(config, host, tables)
    real = getattr(static, "real", "float32")
    with jax.enable_x64(real == "float64"):
        params = jax.tree.map(jnp.asarray, algorithm.make_params(config, tables))
        steps = algorithm.steps(static, params, space)
    return Stepper(config, algorithm, static, params, space, steps, tables, host)


# vmap's in_axes and out_axes as pytrees of the State and Query shape (None: unbatched).
STATE_AXES: Any = State(None, None, 0, 0)  # type: ignore[arg-type]
QUERY_AXES: Any = Query(0, 0, None)  # type: ignore[arg-type]


def batch(stepper_: Stepper) -> tuple:
    """(init, ask, tell, recommend, done, outputs, failed) over a leading seed axis, for lock-stepped runs
    (every run asked and told together): the step counter stays unbatched, so that a rule applied at
    some steps only is a branch (see the module docstring).  ``init`` takes (S,) keys."""
    s = stepper_
    init = jax.vmap(s.init, out_axes=STATE_AXES)
    failed = jax.vmap(s.failed, in_axes=(STATE_AXES,))
    ask = jax.vmap(s.ask, in_axes=(STATE_AXES,), out_axes=(QUERY_AXES, STATE_AXES))
    tell = jax.vmap(s.tell, in_axes=(STATE_AXES, QUERY_AXES, 0), out_axes=STATE_AXES)
    recommend = jax.vmap(s.recommend, in_axes=(STATE_AXES,))
    done = jax.vmap(s.done, in_axes=(STATE_AXES,))
    outputs = jax.vmap(s.outputs, in_axes=(STATE_AXES,))
    return init, ask, tell, recommend, done, outputs, failed
