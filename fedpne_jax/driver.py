"""Batched execution shared by every algorithm: S seeds vmapped, compiled once per shape.

An algorithm provides ``run_single(static, params, objective, key) -> outputs`` (a pytree of arrays,
one run).  ``execute`` vmaps it over seed keys, compiles it ahead of time once per (function, static,
argument shapes) and runs it under the precision's x64 setting.  Seed i uses the key
fold_in(key(base_seed), i), so its numbers do not depend on which or how many seeds run beside it.
"""
from __future__ import annotations

import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np


def seed_key(base_seed: int, seed: int):
    """The key of seed index ``seed``: fold_in(key(base_seed), seed)."""
    return jax.random.fold_in(jax.random.key(base_seed), seed)


_TRACES = [0]


def trace_count() -> int:
    """How many batched programs have been traced in this process (tests use it to catch recompiles)."""
    return _TRACES[0]


def batch(run_single: Callable, static, params, objective, base_seed, seed_ids):
    """``run_single`` for every seed of ``seed_ids``, vmapped."""
    _TRACES[0] += 1
    keys = jax.vmap(lambda i: seed_key(base_seed, i))(seed_ids)
    return jax.vmap(run_single, in_axes=(None, None, None, 0))(static, params, objective, keys)


_jitted = jax.jit(batch, static_argnums=(0, 1))
_compiled: dict = {}


def _real(static) -> str:
    return getattr(static, "real", "float32")


def device_args(params, base_seed, seed_ids):
    """The dynamic arguments as device arrays (inside the run's x64 setting)."""
    return jax.tree.map(jnp.asarray, params), jnp.int32(base_seed), jnp.asarray(seed_ids, jnp.int32)


def executable(run_single, static, params, objective, base_seed, seed_ids):
    """(AOT-compiled batch for these shapes, compile seconds); compiled at most once per process."""
    leaves, treedef = jax.tree.flatten((params, objective))
    signature = (run_single, static, treedef,
                 tuple((np.shape(x), np.asarray(x).dtype.str) for x in leaves), np.shape(seed_ids))
    if signature not in _compiled:
        start = time.perf_counter()
        exe = _jitted.lower(run_single, static, params, objective, base_seed, seed_ids).compile()
        _compiled[signature] = (exe, time.perf_counter() - start)
        return _compiled[signature]
    return _compiled[signature][0], 0.0


def execute(run_single, static, params, objective, base_seed: int, seed_ids: np.ndarray):
    """(outputs as numpy with a leading seed axis, compile seconds, run seconds)."""
    # float64 runs trace, compile and execute with 64-bit types enabled for this call only.
    with jax.enable_x64(_real(static) == "float64"):
        params, base, ids = device_args(params, base_seed, seed_ids)
        if jax.config.jax_disable_jit:
            start = time.perf_counter()
            out = batch(run_single, static, params, objective, base, ids)
            return jax.tree.map(np.asarray, out), 0.0, time.perf_counter() - start
        exe, compile_s = executable(run_single, static, params, objective, base, ids)
        start = time.perf_counter()
        out = jax.block_until_ready(exe(params, objective, base, ids))
        return jax.tree.map(np.asarray, out), compile_s, time.perf_counter() - start


def memory(run_single, static, params, objective, seeds: int):
    """XLA's memory statistics of the program running ``seeds`` seeds (compiling it if needed)."""
    with jax.enable_x64(_real(static) == "float64"):
        params, base, ids = device_args(params, 0, np.arange(seeds))
        exe, _ = executable(run_single, static, params, objective, base, ids)
        return exe.memory_analysis()


def seed_ids(seeds) -> np.ndarray:
    """Seed indices from a count S (0..S-1) or a sequence of int32 indices >= 0."""
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {seeds}")
        return np.arange(int(seeds), dtype=np.int64)
    try:
        ids = np.asarray(list(seeds))
    except TypeError:
        raise ValueError(f"seeds must be a count >= 1 or a sequence of seed indices, got {seeds!r}") from None
    if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer) or np.any(ids < 0) \
            or np.any(ids > 2**31 - 1):
        raise ValueError(f"seeds must be a count >= 1 or a non-empty sequence of int32 seed indices >= 0, "
                         f"got {seeds!r}")
    return ids.astype(np.int64)


def check_base_seed(base_seed) -> int:
    if isinstance(base_seed, bool) or not isinstance(base_seed, (int, np.integer)) \
            or not (0 <= base_seed <= 2**31 - 1):
        raise ValueError(f"base_seed must be an int in [0, 2^31 - 1], got {base_seed!r}")
    return int(base_seed)
