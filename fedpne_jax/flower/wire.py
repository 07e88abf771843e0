"""The messages between the Fed-PNE server and its clients, and the checks every reply passes.

Every message holds one ConfigRecord, ``fedpne``: a query (server -> client ``m``, Flower message
type ``query``) has ``run``, ``step``, ``phase`` and ``partition``, and for an evaluation ``points``
(K, D) and ``counts`` (K,), only the slots with a count > 0 ((S, K, D) and (S, K) for S seeds, the
slots any seed asks); a reply has ``run``, ``step``, ``partition`` and ``means`` (K,) or (S, K).
The arrays are NumPy's ``.npy`` bytes.  :func:`check_reply` refuses, naming the client, a reply that
is an error, lacks the record or a key, answers another run, step or partition, or holds means that
are not an array of real numbers, of the wrong shape, or non-finite.

The records in full, and why one record: docs/guides/flower.md, section "Inside the apps".
"""
from __future__ import annotations

import io
import math

import numpy as np
from flwr.app import ConfigRecord, Message, RecordDict

# Flower 1.42 (the flower extra pins it): where the wire objects of a message's records are listed
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

QUERY = "query"
HELLO, EVALUATE = "hello", "evaluate"


class ReplyError(ValueError):
    """A client's reply that is refused; the message names the client."""


def encode(array) -> bytes:
    """``array`` as ``.npy`` bytes (its dtype and shape included)."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def decode(header: dict, key: str) -> np.ndarray:
    """``header[key]`` as an array; ValueError if it is not ``.npy`` bytes of real numbers.  The
    header is read before anything is allocated, and the data must fill exactly what it declares: a
    few bytes from a faulty or hostile client must not ask for terabytes."""
    value = header[key]
    if not isinstance(value, bytes):
        raise ValueError(f"{key!r} is a {type(value).__name__}, not .npy bytes")
    buffer = io.BytesIO(value)
    try:
        version = np.lib.format.read_magic(buffer)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(buffer)
    except Exception as err:       # any malformed header: numpy raises ValueError, EOFError, SyntaxError...
        raise ValueError(f"{key!r} is not .npy bytes ({err})") from None
    if not (np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)):
        raise ValueError(f"{key!r} holds {dtype}, not real numbers")
    count, offset = math.prod(shape), buffer.tell()
    if min(shape, default=0) < 0 or count * dtype.itemsize != len(value) - offset:
        raise ValueError(f"{key!r} declares shape {shape} of {dtype} ({count * dtype.itemsize} bytes) "
                         f"but holds {len(value) - offset} bytes")
    return np.frombuffer(value, dtype, count, offset).reshape(shape, order="F" if fortran else "C").copy()


def query_content(run: str, step: int, phase: str, partition: int, points=None, counts=None) -> RecordDict:
    header: dict = {"run": run, "step": int(step), "phase": phase, "partition": int(partition)}
    if points is not None:
        header.update(points=encode(points), counts=encode(np.asarray(counts, np.int64)))
    return RecordDict({"fedpne": ConfigRecord(header)})


def reply_content(run: str, step: int, partition: int, means=None, **extra) -> RecordDict:
    header = {"run": run, "step": int(step), "partition": int(partition), **extra}
    if means is not None:
        header["means"] = encode(np.asarray(means, np.float64))
    return RecordDict({"fedpne": ConfigRecord(header)})


def read_query(message: Message) -> tuple[dict, np.ndarray | None, np.ndarray | None]:
    header = dict(message.content["fedpne"])
    if "points" not in header or "counts" not in header:
        return header, None, None
    points, counts = decode(header, "points"), decode(header, "counts")
    del header["points"], header["counts"]
    return header, points, counts


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
    if "means" not in header:
        raise ReplyError(f"{name}: its reply to step {step} has no 'means' (keys: {sorted(header)})")
    try:
        means = np.asarray(decode(header, "means"), np.float64)
    except ValueError as err:       # decode lets only integer and floating arrays through
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
