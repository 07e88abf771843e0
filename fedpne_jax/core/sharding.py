"""Which devices run a batch, and how its run axis is laid out over them.

A batch of runs (seeds, or (grid point, seed) pairs) is one axis.  With several devices that axis is
padded to a multiple of the device count and split into equal contiguous blocks with ``shard_map``
over a 1-D :class:`jax.sharding.Mesh` (axis ``"runs"``, ``AxisType.Auto``): every device runs the
same vmapped program on its block, exactly the program a single device runs on a batch of that
size, so a run's numbers do not depend on the devices (a run's key depends on its seed index only).
With one device nothing is sharded and nothing is padded.

Multi-host: after ``jax.distributed.initialize(...)`` in every process, ``jax.devices()`` lists the
devices of all processes and the mesh spans them, ordered by process, so process p computes one
contiguous share of the runs (:func:`process_share`) on its own devices; the results are gathered
to every process (``multihost_utils.process_allgather``), so every process sees the whole batch and
takes the same decisions (node-table growth, which chunk comes next).  All processes must make the
same calls in the same order, as in any JAX multi-controller program.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any

import jax
import numpy as np

from fedpne_jax.core.validation import is_int

AXIS = "runs"
_DEFAULT = ["all"]


def select_devices(spec=None) -> tuple:
    """The devices of a device spec: None (the process default, see :func:`use_devices`), ``"all"``,
    a count N, or a sequence of :class:`jax.Device`.

    With several processes N counts devices in total and takes N / process_count from every process,
    so every process keeps a share of the work.
    """
    if spec is None:
        spec = _DEFAULT[0]
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text == "all":
            return _ordered(jax.devices())
        try:
            spec = int(text)
        except ValueError:
            raise ValueError(f"devices must be 'all' or a positive integer, got {spec!r}") from None
    if is_int(spec):
        n, available = int(spec), _ordered(jax.devices())
        if not 1 <= n <= len(available):
            raise ValueError(f"devices must be between 1 and the {len(available)} visible device(s), got {n}")
        processes = jax.process_count()
        if n % processes:
            raise ValueError(f"devices={n} must be a multiple of the {processes} processes (each process "
                             f"contributes the same number of devices)")
        per = n // processes
        return tuple(d for p in range(processes) for d in [x for x in available if x.process_index == p][:per])
    try:
        devices = tuple(spec)
    except TypeError:
        raise ValueError(f"devices must be 'all', a positive integer or a list of devices, got {spec!r}") from None
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise ValueError(f"devices must be 'all', a positive integer or a non-empty list of devices, got {spec!r}")
    return _ordered(devices)


def _ordered(devices) -> tuple:
    # Process-major order gives every process one contiguous block of runs.
    return tuple(sorted(devices, key=lambda d: (d.process_index, d.id)))


def set_default_devices(spec) -> None:
    """The devices that runs use when they are not given any (initially ``"all"``); every algorithm's
    runs go through :mod:`fedpne_jax.core.executor`, so this shards baselines as well."""
    select_devices(spec)     # refuse a bad spec now rather than at the next run
    _DEFAULT[0] = spec


@contextlib.contextmanager
def use_devices(spec):
    """``with use_devices(2): ...`` runs everything inside on the first 2 devices."""
    previous = _DEFAULT[0]
    set_default_devices(spec)
    try:
        yield
    finally:
        _DEFAULT[0] = previous


@functools.lru_cache(maxsize=None)
def mesh(devices: tuple) -> jax.sharding.Mesh:
    """A 1-D mesh over ``devices``.  Auto axis types: jax.make_mesh's default (Explicit) rejects loop
    carries that start from constants, which every run's state does."""
    return jax.sharding.Mesh(np.asarray(devices, dtype=object), (AXIS,),
                             axis_types=(jax.sharding.AxisType.Auto,))


def padded_size(runs: int, devices: int, pad_to: int | None = None) -> int:
    """Runs actually computed for a batch of ``runs``: at least ``pad_to`` (so equal calls share one
    compiled program), rounded up to a multiple of the device count (equal blocks per device)."""
    size = max(int(runs), int(pad_to or 0))
    return -(-size // devices) * devices


def pad(ids: np.ndarray, size: int) -> np.ndarray:
    """``ids`` extended to ``size`` entries by repeating the last one: padded runs are real, valid runs
    whose results are dropped, so they can neither fail nor raise."""
    ids = np.asarray(ids)
    if ids.shape[0] == size:
        return ids
    return np.concatenate([ids, np.repeat(ids[-1:], size - ids.shape[0], axis=0)])


def process_share(padded_runs: int, devices: tuple, process_index: int) -> range:
    """Positions of the (padded) run axis that process ``process_index`` computes: its devices' blocks,
    which are contiguous because the mesh is ordered by process."""
    block = padded_runs // len(devices)
    mine = [i for i, d in enumerate(devices) if d.process_index == process_index]
    if not mine:
        return range(0)
    return range(mine[0] * block, (mine[-1] + 1) * block)


def put(x, sharding):
    """A global array from a host array that every process holds in full (the same in every process):
    each process fills its own devices' shards, which also works across hosts."""
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


def gather(x) -> np.ndarray:
    """The whole of a (possibly multi-host) array as numpy on every process."""
    if jax.process_count() > 1 and not x.is_fully_addressable:
        from jax.experimental import multihost_utils
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def initialize(coordinator: str | None = None, num_processes: int | None = None,
               process_id: int | None = None) -> None:
    """``jax.distributed.initialize`` with the given arguments (all None: detected from the cluster
    environment, e.g. SLURM or Open MPI).  Must run before anything touches a device."""
    if coordinator is not None:
        host, _, port = coordinator.rpartition(":")
        # JAX's own parse of a bad address fails in C++ (an IndexError, or a crash for a port "abc").
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"coordinator must be HOST:PORT with a port in 1..65535, got {coordinator!r}")
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"num_processes must be at least 1, got {num_processes}")
    if process_id is not None and (process_id < 0 or (num_processes is not None and process_id >= num_processes)):
        raise ValueError(f"process_id must be in 0 .. num_processes - 1, got {process_id}")
    kwargs: dict[str, Any] = {k: v for k, v in dict(coordinator_address=coordinator, num_processes=num_processes,
                                    process_id=process_id).items() if v is not None}
    try:
        jax.distributed.initialize(**kwargs)
    except (ValueError, RuntimeError) as err:
        raise ValueError(f"jax.distributed.initialize: {err} (give the coordinator, the number of processes and "
                         f"this process's id, or run under a cluster manager JAX detects: SLURM, Open MPI)") from None
