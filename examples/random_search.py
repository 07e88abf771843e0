"""Uniform random search as a fedpne-jax plugin: every round evaluates a uniform point of the box.

    fedpne run --plugin examples/random_search.py --algorithm random-search --horizon 1000
    fp.run(RandomSearchConfig(horizon=1000), objectives.make_objective("garland"), seeds=100)

Importing this file registers the algorithm; from then on it runs through fp.run, fp.run_grid,
sweeps (plugins = ["examples/random_search.py"]) and the command line like a built-in one.
Its expected cumulative regret after t rounds is t (f* - mean of f over the box).
"""
import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import fedpne_jax as fp
from fedpne_jax.core.errors import FLAG_NONFINITE
from objectives.ordered import inclusive_scan


@dataclasses.dataclass(frozen=True)
class RandomSearchConfig(fp.BaselineConfig):
    """horizon, noise and checkpoints come from BaselineConfig (validated there)."""


class Params(NamedTuple):            # dynamic hyper-parameters: data, so grids share one program
    noise_scale: np.ndarray


class Outputs(NamedTuple):           # curve, final_regret and flags are required; the rest are metrics
    curve: jax.Array
    final_regret: jax.Array
    flags: jax.Array
    recommendation: jax.Array


def check(config, objective):
    if config.noise_kind not in ("gaussian", "none"):
        raise ValueError(f"noise: random-search observes gaussian noise or none, got {config.noise!r}")


def make_static(config, objective, tables=None):
    # Everything that decides the compiled program's shapes, hashable.
    return config.horizon, objective.dim, tuple(config.checkpoint_rounds), config.noise_kind


def make_params(config, tables=None):
    return Params(noise_scale=np.float32(config.noise_scale))


def run_single(static, params, objective, key):
    horizon, dim, rounds, noise_kind = static
    point_key, noise_key = jax.random.split(key)
    lo, hi = jnp.asarray(objective.lo, jnp.float32), jnp.asarray(objective.hi, jnp.float32)
    x = lo + (hi - lo) * jax.random.uniform(point_key, (horizon, dim))
    f = objective.value(x)
    regret = inclusive_scan(objective.f_star - f)          # fixed-order prefix sums: batch-independent
    y = f + params.noise_scale * jax.random.normal(noise_key, (horizon,)) if noise_kind == "gaussian" else f
    flags = jnp.where(jnp.all(jnp.isfinite(f)), 0, FLAG_NONFINITE).astype(jnp.int32)
    return Outputs(curve=regret[jnp.asarray(rounds) - 1], final_regret=regret[-1], flags=flags,
                   recommendation=x[jnp.argmax(y)])


ALGORITHM = fp.register(fp.Algorithm(
    name="random-search", config_type=RandomSearchConfig, make_static=make_static, make_params=make_params,
    run_single=run_single, metrics=("recommendation",), check=check,
    styles=(("random-search", fp.Style("Random search", "#17becf", "v")),)))
