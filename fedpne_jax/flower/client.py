"""A Fed-PNE client as a Flower ``ClientApp``: it evaluates its own local objective and uploads means.

The client is the SuperNode whose node config has ``partition-id`` m (and ``num-partitions`` M).
For each query (:mod:`fedpne_jax.flower.wire`) it evaluates, at each asked point, as many pulls as
asked and replies with their means: a registered objective's ``objective.local(x, m)`` with the
configuration's observation noise from the client's own key, or the user function of run config
``function`` = ``module:function``.  With DP-Fed-PNE (``dp-epsilon``) it adds the privacy noise of
Appendix D to its means before they leave.

The keys, the noise and how a user function is called: docs/guides/flower.md, section "Inside the apps".
"""
from __future__ import annotations

import importlib
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fedpne_jax.algorithms.fedpne.steps import privatize
from fedpne_jax.core import compile_cache, registry
from fedpne_jax.core.stepper import mean_of_pulls
from fedpne_jax.flower import spec, wire

app = ClientApp()
CLIENT_SALT = 0x464C5752      # keeps the clients' keys apart from the server's fold_in(key(seed), i)
_LOCAL: dict = {}             # (problem, partition) -> the compiled local objective, for a process that stays


def partition_of(context: Context) -> tuple[int, int]:
    config = context.node_config
    if "partition-id" not in config:
        raise ValueError("this SuperNode has no partition-id in its node config "
                         "(flower-supernode --node-config \"partition-id=0 num-partitions=M\")")
    return int(config["partition-id"]), int(config.get("num-partitions", -1))


@app.query()
def query(msg: Message, context: Context) -> Message:
    header, points, counts = wire.read_query(msg)
    partition, partitions = partition_of(context)
    run, step = header["run"], int(header["step"])
    if header["phase"] == wire.HELLO:
        return Message(wire.reply_content(run, step, partition, partitions=partitions), reply_to=msg)
    if int(header["partition"]) != partition:
        raise ValueError(f"a query for partition {header['partition']} reached partition {partition}")
    if points is None or counts is None:
        raise ValueError(f"the evaluate query of step {step} lacks 'points' or 'counts'")
    started = time.time()
    run_config = dict(context.run_config)
    if points.ndim == 3:        # S seeds: each seed's asked slots, with that seed's key (0 where it asks none)
        means = np.zeros(counts.shape)
        for index in range(counts.shape[0]):
            live = counts[index] > 0
            if live.any():
                means[index, live] = evaluate(run_config, partition, step, points[index, live], counts[index, live],
                                              index)
    else:
        means = evaluate(run_config, partition, step, points, counts)
    # Where a step's time goes: the evaluation, and the process's life so far (Flower starts one per
    # message: its start and imports are the rest).
    return Message(wire.reply_content(run, step, partition, means, handler_seconds=time.time() - started,
                                      process_seconds=process_age()), reply_to=msg)


def process_age() -> float:
    """Seconds since this process started (Linux /proc; -1 elsewhere)."""
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return -1.0


def client_key(seed: int, partition: int, step: int, index: int = 0):
    """The key of a client's draws at a step, for seed index ``index`` of base seed ``seed``: index 0
    keeps a one-run run's key, so that seed 0 of S lock-stepped runs is that run."""
    key = jax.random.fold_in(jax.random.key(seed), CLIENT_SALT)
    key = jax.random.fold_in(jax.random.fold_in(key, partition), step)
    return key if index == 0 else jax.random.fold_in(key, index)


def load_function(ref: str):
    module, _, name = ref.partition(":")
    try:
        target = importlib.import_module(module)
    except ImportError as err:
        raise ValueError(f"function {ref!r}: cannot import {module!r} ({err})") from None
    for part in name.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(f"function {ref!r}: {module!r} has no {name!r}") from None
    return target


def function_means(function, partition: int, points: np.ndarray, counts: np.ndarray) -> np.ndarray:
    points = np.asarray(points, np.float64)
    if getattr(function, "deterministic", False):
        return np.asarray(function(partition, points), np.float64)
    sums = np.zeros(len(points))
    for j in range(int(counts.max(initial=0))):
        live = counts > j
        sums[live] += np.asarray(function(partition, points[live]), np.float64)
    return sums / np.maximum(counts, 1)


def evaluate(run_config: dict, partition: int, step: int, points: np.ndarray, counts: np.ndarray,
             index: int = 0) -> np.ndarray:
    """The client's means at ``points`` of ``counts`` pulls each, for seed index ``index``."""
    problem = spec.problem(run_config)
    config = problem.config
    noise_key, private_key = jax.random.split(client_key(problem.seed, partition, step, index))
    x64 = points.dtype == np.float64
    with jax.enable_x64(x64):
        if problem.function is not None:
            means = jnp.asarray(function_means(load_function(problem.function), partition, points, counts),
                                points.dtype)
        else:
            compile_cache.enable()
            key = (problem.fingerprint(), partition, x64)
            if key not in _LOCAL:
                objective = problem.objective()
                _LOCAL.clear()
                if registry.get(problem.algorithm).federated:
                    _LOCAL[key] = jax.jit(jax.vmap(lambda x: objective.local(x, partition)))
                else:       # a centralised algorithm's one client observes the global objective, as in fp.run
                    _LOCAL[key] = jax.jit(jax.vmap(objective.global_value))
            local = _LOCAL[key]
            values = local(jnp.asarray(points)).astype(points.dtype)
            means = mean_of_pulls(config.noise_kind, getattr(config, "noise_scale", 0.0), values,
                                  jnp.asarray(counts, jnp.int32), noise_key)
        if getattr(config, "dp", False):
            means = privatize(config, means, jnp.asarray(counts, jnp.int32), private_key)
        return np.asarray(means, np.float64)
