"""A Flower run's configuration: Flower's run config (flat keys) turned into the algorithm's config
and the space it runs on, as ``fedpne run`` turns its options into them.

Flower passes the run config to the ServerApp and to every ClientApp (``context.run_config``), so
both sides build the same configuration from it; every key is optional, and an empty string means
"not given".  Nothing here imports flwr: the command line uses it to check options before starting
any process.

The keys: docs/guides/flower.md, section "Inside the apps".
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from typing import Any, Optional

import objectives
from fedpne_jax.core import registry
from fedpne_jax.core.config import parse_noise
from fedpne_jax.core.optimizer import _to_json
from fedpne_jax.core.validation import is_seed

OPTION_KEYS = ("nu", "rho", "c", "c1", "delta", "k", "split", "noise", "pull", "sampling", "dp-epsilon",
               "dp-delta", "checkpoints", "capacity")
PROBLEM_KEYS = ("algorithm", "objective", "clients", "horizon", "seed", "seeds", "heterogeneity", "objective-seed", "dim",
                "instance", "amplitude", "set", "function", "lo", "hi", "f-star") + OPTION_KEYS
SERVER_KEYS = ("state", "output", "status", "resume", "client-timeout", "node-timeout", "on-client-loss", "poll",
               "crash-after-step")
ON_CLIENT_LOSS = ("stop", "continue")
# fedpne run's defaults (fedpne_jax.cli.DEFAULT_NOISE, DEFAULT_CHECKPOINTS; tests/test_flower.py checks
# they agree): the command line imports this module, so this module may not import it.
DEFAULT_NOISE = "gaussian:0.1"
DEFAULT_CHECKPOINTS = 100
DEFAULT_POLL = 0.02
DEFAULTS = {"algorithm": "fedpne", "objective": "garland", "seed": 0, "objective-seed": 0, "resume": True,
            "client-timeout": 300.0, "node-timeout": 300.0, "on-client-loss": "stop", "poll": DEFAULT_POLL,
            "crash-after-step": -1}


def given(run_config, key: str):
    """The run config's value of ``key``, None when absent or empty."""
    value = run_config.get(key, DEFAULTS.get(key))
    if isinstance(value, str) and value.strip() == "":
        return DEFAULTS.get(key)
    return value


def _int(run_config, key: str) -> Optional[int]:
    value = given(run_config, key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"run config {key!r}: expected an integer, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"run config {key!r}: expected an integer, got {value!r}") from None
    if not math.isfinite(number) or number != int(number):
        raise ValueError(f"run config {key!r}: expected an integer, got {value!r}")
    return int(number)


def _float(run_config, key: str, low: float = -math.inf, infinite: bool = False) -> Optional[float]:
    """``key``'s number, at least ``low``; NaN refused, and infinity unless ``infinite``."""
    value = given(run_config, key)
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"run config {key!r}: expected a number, got {value!r}") from None
    if math.isnan(number) or number < low or (math.isinf(number) and not infinite):
        bound = "" if low == -math.inf else f" >= {low:g}"
        raise ValueError(f"run config {key!r}: expected a {'' if infinite else 'finite '}number{bound}, got {value!r}")
    return number


TRUE, FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def _bool(run_config, key: str) -> bool:
    """``key`` as a yes/no: a bool, 0 or 1, or one of TRUE and FALSE in any case (a TOML file may hold
    "false" as a string, which a test of truth would read as yes)."""
    value = given(run_config, key)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if text in TRUE or text in FALSE:
        return text in TRUE
    raise ValueError(f"run config {key!r}: expected true or false, got {value!r}")


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """The ServerApp's own keys (SERVER_KEYS but the paths), checked."""
    resume: bool
    client_timeout: float       # seconds for a step's replies (inf: wait for ever)
    node_timeout: float         # seconds for the SuperNodes to join
    poll: float                 # seconds between two looks for replies
    on_client_loss: str
    crash_after_step: int       # tests: the server crashes after this step (-1: never)


def server_settings(run_config) -> ServerSettings:
    """The server's keys of a Flower run config (ValueError naming the key): the command line checks
    them before starting any process, the ServerApp before its run."""
    timeouts = []
    for key in ("client-timeout", "node-timeout"):
        try:
            seconds = _float(run_config, key, low=0.0, infinite=True)
        except ValueError:
            seconds = None
        if not seconds:         # None, 0, or refused above
            raise ValueError(f"run config {key!r}: expected a number of seconds > 0 (inf: no limit), "
                             f"got {given(run_config, key)!r}")
        timeouts.append(seconds)
    on_loss = str(given(run_config, "on-client-loss")).strip()
    if on_loss not in ON_CLIENT_LOSS:
        raise ValueError(f"run config 'on-client-loss': {on_loss!r} is not one of {ON_CLIENT_LOSS}")
    crash_after = _int(run_config, "crash-after-step")
    poll = _float(run_config, "poll", low=0.0)
    return ServerSettings(_bool(run_config, "resume"), timeouts[0], timeouts[1],
                          DEFAULT_POLL if poll is None else poll,
                          on_loss, -1 if crash_after is None else crash_after)


def _floats(run_config, key: str) -> Optional[tuple]:
    value = given(run_config, key)
    if value is None:
        return None
    items = value if isinstance(value, (list, tuple)) else str(value).replace(";", ",").split(",")
    try:
        numbers = tuple(float(v) for v in items)
    except (TypeError, ValueError):
        raise ValueError(f"run config {key!r}: expected numbers separated by commas, got {value!r}") from None
    if not all(math.isfinite(v) for v in numbers):
        raise ValueError(f"run config {key!r}: expected finite numbers, got {value!r}")
    return numbers


@dataclasses.dataclass(frozen=True)
class Problem:
    """What both sides build from the run config."""
    algorithm: str
    config: Any                 # the algorithm's config
    num_clients: int            # the SuperNodes the run needs: M, or 1 for a centralised algorithm
    objective_args: Optional[dict]   # make_objective's arguments (a registered objective), else None
    function: Optional[str]     # module:function (a client's own objective), else None
    box: Optional[tuple]        # (lo, hi) with a function
    f_star: Optional[float]
    seed: int
    seeds: Optional[int] = None     # S lock-stepped runs (seed indices 0..S-1 of ``seed``); None: one run

    def objective(self):
        """The registered objective (None with a function)."""
        if self.objective_args is None:
            return None
        return objectives.make_objective(**self.objective_args)

    def space(self):
        """What the stepper runs on: the Objective, or the box (lo, hi)."""
        return self.box if self.objective_args is None else self.objective()

    def fingerprint(self) -> str:
        """A short digest of the problem: a state file of another problem is never resumed."""
        fields = {f.name: _to_json(getattr(self.config, f.name)) for f in dataclasses.fields(self.config) if f.init}
        text = json.dumps({"algorithm": self.algorithm, "config": fields, "objective": self.objective_args,
                           "function": self.function, "box": self.box, "f_star": self.f_star, "seed": self.seed,
                           **({"seeds": self.seeds} if self.seeds is not None else {})},
                          sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def problem(run_config) -> Problem:
    """The :class:`Problem` of a Flower run config (ValueError naming the key)."""
    unknown = sorted(set(run_config) - set(PROBLEM_KEYS) - set(SERVER_KEYS))
    if unknown:
        raise ValueError(f"run config: unknown key(s) {', '.join(map(repr, unknown))}; known: "
                         f"{', '.join(PROBLEM_KEYS + SERVER_KEYS)}")
    algorithm = str(given(run_config, "algorithm"))
    if algorithm not in registry.names():
        raise ValueError(f"run config 'algorithm': {algorithm!r} is not registered ({', '.join(registry.names())})")
    options = {}
    for key in OPTION_KEYS:
        value = given(run_config, key)
        if value is not None:
            parsed = registry.parse_value(value) if isinstance(value, str) else value
            options[key.replace("-", "_")] = value if parsed is None and key == "noise" else parsed
    for field, (item, value) in registry.parse_settings(
            [s for s in str(given(run_config, "set") or "").replace(",", ";").split(";") if s.strip()],
            option="run config 'set'").items():
        if field in options:
            raise ValueError(f"run config: {field} is set both as a key and in 'set' ({item}); give it once")
        options[field] = value
    seed = _int(run_config, "seed")
    if seed is None or not 0 <= seed < 2**32:   # None: a run config that holds None itself ("" is the default, 0)
        raise ValueError(f"run config 'seed': expected an integer in [0, 2^32), got {given(run_config, 'seed')!r}")
    seeds = _int(run_config, "seeds")
    if seeds is not None and seeds < 1:
        raise ValueError(f"run config 'seeds': expected a count >= 1, got {seeds}")
    seeds = None if seeds == 1 else seeds       # one run, as fedpne run --seeds 1 (its state and result the same)
    function = given(run_config, "function")
    horizon = _int(run_config, "horizon")
    # 0 is a count the config refuses by name, not "not given".
    clients = _int(run_config, "clients")
    f_star = _float(run_config, "f-star")
    if function is not None:
        function = str(function)
        if ":" not in function:
            raise ValueError(f"run config 'function': expected module:function, got {function!r}")
        lo, hi = _floats(run_config, "lo"), _floats(run_config, "hi")
        if lo is None or hi is None or len(lo) != len(hi):
            raise ValueError("run config: a 'function' needs 'lo' and 'hi', its box, of one length (\"a,b\")")
        if not all(a < b for a, b in zip(lo, hi)):
            raise ValueError(f"run config: the box needs 'lo' < 'hi' in every dimension, got lo={lo}, hi={hi}")
        if clients is None or horizon is None:
            raise ValueError("run config: a 'function' needs 'clients' and 'horizon'")
        options["horizon"] = horizon
        config = make_config(algorithm, options, clients)
        return Problem(algorithm, config, _askers(config, clients), None, function, (lo, hi), f_star, seed, seeds)
    name = str(given(run_config, "objective"))
    noise_kind = parse_noise(options.get("noise", DEFAULT_NOISE))[0]
    heterogeneity = given(run_config, "heterogeneity") or objectives.default_heterogeneity(name, noise_kind)
    default_clients, default_horizon = objectives.default_size(name)
    clients = clients if clients is not None else options.get("num_clients", default_clients)
    options["horizon"] = horizon if horizon is not None else options.get("horizon", default_horizon)
    config = make_config(algorithm, options, clients)
    amplitude = _float(run_config, "amplitude")
    objective_seed = _int(run_config, "objective-seed")
    if not is_seed(objective_seed):
        raise ValueError(f"run config 'objective-seed': expected an integer in [0, 2^31 - 1], "
                         f"got {given(run_config, 'objective-seed')!r}")
    args = {"name": name, "num_clients": clients, "heterogeneity": heterogeneity,
            "seed": objective_seed, "dim": _int(run_config, "dim"),
            "instance": _int(run_config, "instance")}
    if amplitude is not None:
        args["amplitude"] = amplitude
    return Problem(algorithm, config, _askers(config, clients), args, None, None, f_star, seed, seeds)


def make_config(algorithm: str, options: dict, num_clients: int):
    """The algorithm's config as ``fedpne run`` makes it (fedpne_jax.cli.run_config): its defaults, but
    the command line's noise and checkpoints, and M where the algorithm has clients."""
    options = dict(options)
    options.setdefault("noise", DEFAULT_NOISE)
    options.setdefault("checkpoints", min(DEFAULT_CHECKPOINTS, options["horizon"]))
    if "num_clients" in {f.name for f in dataclasses.fields(registry.config_type(algorithm))}:
        options["num_clients"] = num_clients
    return registry.make_config(algorithm, **options)


def _askers(config, clients: int) -> int:
    """The clients the stepper asks: M for a federated algorithm, one (the global objective's
    evaluator) for a centralised one."""
    return clients if getattr(config, "num_clients", None) is not None else 1


def default_paths(problem: Problem) -> tuple[str, str]:
    """(state, result) paths of a run given neither: ``$FEDPNE_FLOWER_DIR`` (else the user's cache
    folder, fedpne-jax/flower) / state-<fingerprint>.fpne and result-<fingerprint>.json, so that the
    same problem and seed submitted again resumes its run."""
    folder = os.environ.get("FEDPNE_FLOWER_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "fedpne-jax", "flower")
    os.makedirs(folder, exist_ok=True)
    tag = problem.fingerprint()
    return os.path.join(folder, f"state-{tag}.fpne"), os.path.join(folder, f"result-{tag}.json")


def run_config_of(options: dict) -> dict:
    """A Flower run config (TOML-ready: no None) from {key: value} with None for "not given"."""
    return {k: ("" if v is None else v) for k, v in options.items()}
