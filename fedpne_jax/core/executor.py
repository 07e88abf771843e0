"""Batched execution shared by every algorithm: runs vmapped, sharded over devices, compiled once per shape.

``execute`` vmaps an algorithm's ``run_single(static, params, objective, key)`` over seed keys,
compiles it ahead of time once per (function, static, argument shapes, devices) and runs it under
the precision's x64 setting.  Seed i uses the key fold_in(key(base_seed), i), so its numbers do not
depend on which or how many seeds run beside it, nor on the devices (:mod:`fedpne_jax.core.sharding`).
With ``grid_index`` the params carry a leading grid axis and run j uses grid point
``grid_index[j]``: every grid point shares one compiled program.

Memory: :func:`memory` (XLA's analysis of a call's program), :func:`fit_runs` (the runs per call
that keep it under a budget, the rule the sweep runner applies too), :func:`output_shapes` (what one
run returns, traced, never compiled) and :func:`available_memory` (what the host has left); see
docs/guides/hosts.md, section "Devices".
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import Callable

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from fedpne_jax.core import checkpoints, host_devices, portability, sharding
from fedpne_jax.core.validation import SEED_MAX, is_int, is_seed


def seed_key(base_seed: int, seed: int):
    """The key of seed index ``seed``: fold_in(key(base_seed), seed)."""
    return jax.random.fold_in(jax.random.key(base_seed), seed)


_TRACES = [0]
_COMPILE_SECONDS = [0.0]


def trace_count() -> int:
    """How many batched programs have been traced in this process (tests use it to catch recompiles)."""
    return _TRACES[0]


def compile_seconds() -> float:
    """Seconds spent compiling batched programs in this process."""
    return _COMPILE_SECONDS[0]


# One run, traced once per (run_single, static, argument shapes): output_shapes' trace is the one the
# batched program vmaps (XLA inlines the call, so the program is unchanged), instead of a second trace
# of the whole run for every program compiled.
_one_run = jax.jit(lambda run_single, static, params, objective, key: run_single(static, params, objective, key),
                   static_argnums=(0, 1))


# The runs' keys as uint32 words, derived in a program of their own that every algorithm's shares:
# inside each program, the key derivation's hash was about a fourteenth of its compile time.
_seed_words = jax.jit(jax.vmap(lambda base_seed, i: jax.random.key_data(seed_key(base_seed, i)), in_axes=(None, 0)))


def run_key_words(base_seed: int, seed_ids) -> np.ndarray:
    """(S, 2) uint32: the key words of seed indices ``seed_ids`` (:func:`seed_key`).  The indices are
    padded to a power of two, so that one program serves every seed count up to it instead of one
    program per count (each a compile of about 0.15 s); a run's words do not depend on the others."""
    ids = np.asarray(seed_ids, np.int32).reshape(-1)
    padded = np.zeros(1 << max(ids.size - 1, 0).bit_length(), np.int32)
    padded[:ids.size] = ids
    return np.asarray(_seed_words(np.int32(base_seed), padded))[:ids.size]


def batch(run_single: Callable, static, params, objective, seed_words, grid_index=None):
    """``run_single`` for every run, run j with the key of words ``seed_words[j]`` (see
    :func:`seed_key`), vmapped; with ``grid_index``, run j reads grid point ``grid_index[j]`` of the
    stacked ``params``."""
    _TRACES[0] += 1
    keys = jax.random.wrap_key_data(seed_words)
    if grid_index is None:
        return jax.vmap(lambda key: _one_run(run_single, static, params, objective, key))(keys)

    def one(g, key):
        return _one_run(run_single, static, jax.tree.map(lambda p: p[g], params), objective, key)

    return jax.vmap(one)(grid_index, keys)


def _sharded_batch(run_single, static, mesh, params, objective, seed_words, grid_index):
    """``batch`` with the run axis split over ``mesh``: each device runs the plain vmapped program on
    its block.  check_vma=False: run states start from constants, which shard_map would otherwise
    reject as unvarying loop carries."""
    runs, whole = PartitionSpec(sharding.AXIS), PartitionSpec()
    local = lambda p, o, w, g: batch(run_single, static, p, o, w, g)
    return jax.shard_map(local, mesh=mesh, in_specs=(whole, whole, runs, runs), out_specs=runs,
                         check_vma=False)(params, objective, seed_words, grid_index)


_jitted = jax.jit(batch, static_argnums=(0, 1))
_jitted_sharded = jax.jit(_sharded_batch, static_argnums=(0, 1, 2))
_compiled: dict = {}
# LLVM maps every compiled program's code into the process (about 360 mappings for a small Fed-PNE
# program, more for one that trains a model), and Linux ends a process that asks for more than
# vm.max_map_count mappings (65,530 by default): a full `fedpne reproduce all` compiled about 200
# programs in one process and died with "LLVM compilation error: Cannot allocate memory".  So the
# least recently used half of the programs is dropped once the process holds three quarters of that
# many mappings (or MAX_PROGRAMS programs where mappings cannot be counted); a later call with a
# dropped shape compiles it again.
MAX_PROGRAMS = 128


def _mappings() -> tuple[int, int] | None:
    """(memory mappings this process holds, the most it may hold), or None off Linux."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f), limit
    except (OSError, ValueError):
        return None


def _room_for_programs() -> bool:
    found = _mappings()
    if found is None:
        return len(_compiled) < MAX_PROGRAMS
    held, limit = found
    return held < limit * 3 // 4


def drop_programs(keep: int = 0) -> None:
    """Forget all but the ``keep`` most recently used compiled programs, here and in JAX's own
    caches, so that the others' code is unmapped."""
    for signature in list(_compiled)[: max(0, len(_compiled) - keep)]:
        del _compiled[signature]
    jax.clear_caches()


def _centre_slot(objective, static):
    """``objective`` with a stand-in for the centre value execute gives it (checkpoints.with_centre):
    the same program signature and trace, for memory and output_shapes, without evaluating the
    objective (a host call, or a model trained, for nothing)."""
    return objective.with_centre_value(np.zeros((), _real(static)))


def _real(static) -> str:
    """The run's precision: its static's ``real`` field where it names one (a number's ``real`` does not)."""
    real = getattr(static, "real", "float32")
    return real if real in ("float32", "float64") else "float32"


def device_args(params, base_seed, seed_ids, grid_index=None, mesh=None, objective=None):
    """The dynamic arguments (params, the runs' key words, grid indices, objective) as device arrays
    (inside the run's x64 setting): on the default device, or, with a mesh, as global arrays (params
    and objective data replicated, runs split)."""
    words = run_key_words(base_seed, seed_ids)
    if mesh is None:
        grid = None if grid_index is None else np.asarray(grid_index, np.int32)
        # One device_put for the whole tree: per-leaf jnp.asarray costs more than a small run.
        return jax.device_put((jax.tree.map(np.asarray, params), words, grid)) + (objective,)
    whole, runs = NamedSharding(mesh, PartitionSpec()), NamedSharding(mesh, PartitionSpec(sharding.AXIS))
    replicate = lambda tree: jax.tree.map(lambda x: sharding.put(x, whole), tree)
    grid = None if grid_index is None else sharding.put(np.asarray(grid_index, np.int32), runs)
    return replicate(params), sharding.put(words, runs), grid, replicate(objective)


def _devices(devices, runs: int | None = None):
    selected = sharding.select_devices(devices)
    if runs is not None:
        selected = host_devices.share(selected, runs)
    return selected, (sharding.mesh(selected) if len(selected) > 1 else None)


def _context(static, selected, mesh):
    """What a program is traced, compiled and run under: float64 runs with 64-bit types enabled for
    this call only; one device as the default device.  output_shapes traces under it too, so that its
    trace of one run is the one the program reuses (JAX's tracing cache is keyed on the context)."""
    stack = contextlib.ExitStack()
    stack.enter_context(jax.enable_x64(_real(static) == "float64"))
    if mesh is None:
        stack.enter_context(jax.default_device(selected[0]))
    return stack


def _dtype(x) -> str:
    # Read from the array itself: np.asarray would copy a device array back to the host.
    return np.dtype(x.dtype).str if hasattr(x, "dtype") else np.asarray(x).dtype.str


def executable(run_single, static, params, objective, seed_words, grid_index=None, devices=None):
    """(AOT-compiled batch for these shapes and devices, compile seconds); compiled once and kept
    while the process has room for its code (see MAX_PROGRAMS)."""
    devices = devices or (jax.devices()[0],)
    mesh = sharding.mesh(devices) if len(devices) > 1 else None
    leaves, treedef = jax.tree.flatten((params, objective))
    signature = (run_single, static, treedef,
                 tuple((np.shape(x), _dtype(x)) for x in leaves), np.shape(seed_words),
                 grid_index is None, tuple((d.process_index, d.id) for d in devices))
    if signature not in _compiled:
        start = time.perf_counter()
        if mesh is None:
            lowered = _jitted.lower(run_single, static, params, objective, seed_words, grid_index)
        else:
            lowered = _jitted_sharded.lower(run_single, static, mesh, params, objective, seed_words, grid_index)
        _compiled[signature] = (lowered.compile(compiler_options=portability.COMPILER_OPTIONS),
                                time.perf_counter() - start)
        _COMPILE_SECONDS[0] += _compiled[signature][1]
        if not _room_for_programs():
            drop_programs(keep=len(_compiled) // 2)
        return _compiled[signature]
    _compiled[signature] = _compiled.pop(signature)         # the most recently used, last
    return _compiled[signature][0], 0.0


def execute(run_single, static, params, objective, base_seed: int, seed_ids: np.ndarray, *,
            grid_index=None, devices=None, pad_to: int | None = None):
    """(outputs as numpy with a leading seed axis, compile seconds, run seconds).

    ``grid_index``: per run, the grid point of the stacked ``params`` it uses.  ``devices``: a spec
    for :func:`fedpne_jax.core.sharding.select_devices` (default: the process default, all devices).
    ``pad_to``: compute at least this many runs (the extra ones repeat the last run and are dropped),
    so that calls of different sizes share one compiled program.
    """
    n = len(seed_ids)
    selected, mesh = _devices(devices, max(n, pad_to or 0))     # as memory() sized the padded call
    size = sharding.padded_size(n, len(selected), pad_to)
    ids = sharding.pad(seed_ids, size)
    grid = None if grid_index is None else sharding.pad(grid_index, size)
    with _context(static, selected, mesh):
        objective = checkpoints.with_centre(objective, _real(static))
        if jax.config.jax_disable_jit:  # type: ignore[attr-defined]  # a runtime flag attribute
            p, w, g, o = device_args(params, base_seed, ids, grid, None, objective)
            start = time.perf_counter()
            with objective.host_errors():
                out = batch(run_single, static, p, o, w, g)
            return jax.tree.map(lambda a: np.asarray(a)[:n], out), 0.0, time.perf_counter() - start
        p, w, g, o = device_args(params, base_seed, ids, grid, mesh, objective)
        exe, compile_s = executable(run_single, static, p, o, w, g, selected)
        start = time.perf_counter()
        # A Python objective's exception is kept on the host while the program runs (the call
        # returns NaN) and raised here with its own message, before the flags are read.
        with objective.host_errors():
            out = jax.block_until_ready(exe(p, o, w, g))
        run_s = time.perf_counter() - start
        return jax.tree.map(lambda a: sharding.gather(a)[:n], out), compile_s, run_s


DEFAULT_MEMORY_GB = 2.0     # per device, for one call's XLA buffers (the sweeps' default as well)


def format_bytes(n: float) -> str:
    """A byte count in the largest unit that keeps it >= 1 (bytes, KiB, MiB, GiB, TiB), 3 significant
    digits: 2 GiB prints as "2 GiB", not "2.05e+03 MiB", and one byte as "1 byte", not "0.00 MiB"."""
    n = float(n)
    if n < 1024:
        return f"{n:.0f} byte{'s' if n != 1 else ''}"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024.0
        if n < 1024 or unit == "TiB":
            return f"{n:.3g} {unit}"
    raise AssertionError("unreachable")


def memory(run_single, static, params, objective, seeds: int, *, grid: bool = False, devices=None):
    """XLA's memory statistics of the program running ``seeds`` runs (compiling it if needed); with
    several devices, the statistics of one device's share.  ``grid``: params are stacked (see execute).
    The program is the one :func:`execute` then runs for that many runs (same signature, same device)."""
    selected, mesh = _devices(devices, seeds)
    size = sharding.padded_size(seeds, len(selected))
    grid_index = np.zeros(size, np.int32) if grid else None
    with _context(static, selected, mesh):
        p, w, g, o = device_args(params, 0, np.arange(size), grid_index, mesh, _centre_slot(objective, static))
        exe, _ = executable(run_single, static, p, o, w, g, selected)
        return exe.memory_analysis()


def memory_bytes(stats) -> int:
    """One number for a memory analysis: arguments + outputs + temporaries (an upper bound: outputs may
    alias arguments), or XLA's peak where it reports a larger one."""
    total = stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes
    return int(max(getattr(stats, "peak_memory_in_bytes", 0) or 0, total))


def fit_runs(total: int, budget: int, devices: int, measure: Callable[[int], int],
             plan: Callable[[int], int] | None = None) -> tuple[int, int]:
    """(R, bytes per device): how many runs one call takes so that XLA's memory analysis of its
    program fits ``budget`` bytes per device.  ``measure(R)`` gives the bytes of the program for R
    runs (compiling it: the program that fits is the one the calls then run).  All ``total`` runs are
    tried in one call first, then R shrinks in proportion (memory grows about linearly with the runs;
    5 % margin) until it fits, at least one run per device; bytes above the budget mean even that
    does not fit.  ``plan(limit)``: the R a caller makes of a limit (default: rounded up to a multiple
    of the device count)."""
    plan = plan or (lambda limit: sharding.padded_size(limit, devices))
    limit = total
    for _ in range(12):
        R = plan(limit)
        need = measure(R)
        if need <= budget or R <= devices:
            break
        limit = max(devices, min(int(R * budget / need * 0.95), R - devices))
    return R, need


_OUTPUT_SHAPES: dict = {}


def output_shapes(run_single, static, params, objective, devices=None, runs: int | None = None):
    """What one run returns, as a pytree of jax.ShapeDtypeStruct: traced abstractly
    (jax.eval_shape), never compiled, once per signature; the program :func:`execute` then compiles
    for a call of ``runs`` runs on ``devices`` reuses the trace."""
    objective = _centre_slot(objective, static)
    leaves, treedef = jax.tree.flatten((params, objective))
    signature = (run_single, static, treedef, tuple((np.shape(x), _dtype(x)) for x in leaves))
    if signature not in _OUTPUT_SHAPES:
        with _context(static, *_devices(devices, runs)):
            _OUTPUT_SHAPES[signature] = jax.eval_shape(_one_run, run_single, static, params, objective,
                                                       seed_key(0, 0))
    return _OUTPUT_SHAPES[signature]


def available_memory() -> int | None:
    """Bytes of host memory available now (Linux's MemAvailable, else free pages), None if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


MAX_SEEDS = SEED_MAX + 1


def seed_count(seeds) -> int:
    """How many runs ``seeds`` asks for (see :func:`seed_ids`), validated without building the
    indices of a count, which may be far too many to hold."""
    if is_int(seeds):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {seeds}")
        return int(seeds)
    return int(seed_ids(seeds).size)


def seed_ids(seeds, distinct: bool = True) -> np.ndarray:
    """Seed indices from a count S (0..S-1) or a sequence of int32 indices >= 0; with ``distinct``
    each index at most once (a repeated seed would count one run twice in every statistic)."""
    if is_int(seeds):
        count = seed_count(seeds)
        if count > MAX_SEEDS:
            raise ValueError(f"seeds must be at most 2^31 (seed indices are int32), got {count}")
        return np.arange(count, dtype=np.int64)
    if isinstance(seeds, (str, bytes, bytearray, dict, set, frozenset)):
        # each would iterate into "seed indices" (characters, byte values, keys, an unordered set)
        raise ValueError(f"seeds must be a count >= 1 or a list of seed indices, got {type(seeds).__name__} "
                         f"{seeds!r:.60}")
    try:
        ids = np.asarray(list(seeds))
    except TypeError:
        raise ValueError(f"seeds must be a count >= 1 or a sequence of seed indices, got {seeds!r}") from None
    if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer) or np.any(ids < 0) \
            or np.any(ids > SEED_MAX):
        raise ValueError(f"seeds must be a count >= 1 or a non-empty sequence of int32 seed indices >= 0, "
                         f"got {seeds!r}")
    if distinct:
        values, counts = np.unique(ids, return_counts=True)
        if np.any(counts > 1):
            repeated = values[counts > 1]
            raise ValueError(f"seeds must be distinct: seed(s) {repeated[:10].tolist()}"
                             f"{' ...' if repeated.size > 10 else ''} appear more than once, and every statistic "
                             f"over seeds would count their runs twice")
    return ids.astype(np.int64)


def check_base_seed(base_seed) -> int:
    if not is_seed(base_seed):
        raise ValueError(f"base_seed must be an int in [0, 2^31 - 1], got {base_seed!r}")
    return int(base_seed)
