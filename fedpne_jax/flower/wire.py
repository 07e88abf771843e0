"""The messages between the Fed-PNE server and its clients, and the checks every reply passes.

A query (server -> client ``m``, Flower message type ``query``) holds a ``fedpne`` ConfigRecord
(``run``, ``step``, ``phase``, ``partition``) and a ``query`` ArrayRecord (``points`` (K, D) and
``counts`` (K,), only the slots with a count > 0; (S, K, D) and (S, K) for S seeds, the slots any
seed asks); a reply echoes ``fedpne`` and holds ``reply`` (``means`` (K,) or (S, K)).
:func:`check_reply` refuses, naming the client, a reply that is an error, lacks a record or key,
answers another run, step or partition, or holds means of the wrong shape, or non-finite ones.

The records in full: docs/guides/flower.md, section "Inside the apps".
"""
from __future__ import annotations

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

# Flower 1.42 (the flower extra pins it): where the wire objects of a message's records are listed
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

QUERY = "query"
HELLO, EVALUATE = "hello", "evaluate"


class ReplyError(ValueError):
    """A client's reply that is refused; the message names the client."""


def query_content(run: str, step: int, phase: str, partition: int, points=None, counts=None) -> RecordDict:
    records: dict[str, ArrayRecord | MetricRecord | ConfigRecord] = {
        "fedpne": ConfigRecord({"run": run, "step": int(step), "phase": phase, "partition": int(partition)})}
    if points is not None:
        records["query"] = ArrayRecord({"points": Array(np.ascontiguousarray(points)),
                                        "counts": Array(np.ascontiguousarray(counts, np.int64))})
    return RecordDict(records)


def reply_content(run: str, step: int, partition: int, means=None, **extra) -> RecordDict:
    header = {"run": run, "step": int(step), "partition": int(partition), **extra}
    records: dict[str, ArrayRecord | MetricRecord | ConfigRecord] = {"fedpne": ConfigRecord(header)}
    if means is not None:
        records["reply"] = ArrayRecord({"means": Array(np.ascontiguousarray(means, np.float64))})
    return RecordDict(records)


def read_query(message: Message) -> tuple[dict, np.ndarray | None, np.ndarray | None]:
    content = message.content
    header = dict(content["fedpne"])
    if "query" not in content:
        return header, None, None
    arrays = content["query"]
    return header, _numpy(arrays, "points"), _numpy(arrays, "counts")


def _numpy(record: ArrayRecord | MetricRecord | ConfigRecord, key: str) -> np.ndarray:
    """``record[key]`` as a NumPy array; TypeError if it is not an Array (a record of another kind)."""
    value = record[key]
    if not isinstance(value, Array):
        raise TypeError(f"{key!r} is a {type(value).__name__}, not an Array")
    return value.numpy()


def who(partition, node_id) -> str:
    return f"client {partition} (node {node_id})" if partition is not None else f"node {node_id}"


def check_reply(message: Message, run: str, step: int, partition, node_id, shape: tuple | None) -> np.ndarray | dict:
    """The means of a reply to an evaluate query (``shape``: the query's counts'), or the header of a
    hello's reply (``shape`` None); ReplyError naming the client otherwise."""
    name = who(partition, node_id)
    if message.has_error():
        error = message.error
        raise ReplyError(f"{name} replied with an error at step {step}: code {error.code}: {error.reason}")
    content = message.content
    if "fedpne" not in content:
        raise ReplyError(f"{name}: its reply to step {step} has no 'fedpne' record (records: {sorted(content)})")
    header = dict(content["fedpne"])
    for key in ("run", "step", "partition"):
        if key not in header:
            raise ReplyError(f"{name}: its reply to step {step} lacks the key {key!r}")
    if header["run"] != run:
        raise ReplyError(f"{name}: its reply is for run {header['run']!r}, not this run {run!r}")
    if header["step"] != step:
        raise ReplyError(f"{name}: its reply is for step {header['step']!r}, not the pending step {step}")
    if shape is None:
        if "partitions" not in header:
            raise ReplyError(f"{name}: its hello lacks the key 'partitions'")
        return header
    if header["partition"] != partition:
        raise ReplyError(f"{name}: its reply names partition {header['partition']!r}, not {partition}")
    if "reply" not in content or "means" not in content["reply"]:
        raise ReplyError(f"{name}: its reply to step {step} has no 'means' (records: {sorted(content)})")
    try:
        means = np.asarray(_numpy(content["reply"], "means"), np.float64)
    except (ValueError, TypeError) as err:
        raise ReplyError(f"{name}: its means at step {step} are not an array of numbers ({err})") from None
    if means.shape != tuple(shape):
        raise ReplyError(f"{name}: its means at step {step} have shape {means.shape}, not {tuple(shape)}")
    bad = ~np.isfinite(means)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ReplyError(f"{name}: {int(bad.sum())} of its {means.size} means at step {step} are NaN or infinite "
                         f"(first at slot {first[0] if len(first) == 1 else first})")
    return means


def payload_bytes(message: Message) -> int:
    """The bytes of a message's content as Flower sends it: its records deflated into Flower's wire
    objects (the HTTP and metadata envelope not counted)."""
    return int(sum(len(obj.deflate()) for obj in get_all_nested_objects(message.content).values()))
