"""A sweep's results folder: written chunk by chunk, so that a killed sweep loses at most the call in
flight and a rerun computes only what is missing.

``DIR/sweep.json`` (the normalised definition and its hash), ``DIR/index.json`` (the finished
chunks) and ``DIR/chunks/<config id>_<start>-<end>.npz`` (one configuration's runs for a range of
seed positions, with its ``identity``).  Every file is written by :func:`write_atomic`, chunk first,
index second; opening a folder to resume it verifies every listed chunk against the index and the
sweep, sets aside (``*.rejected``) a bad one, and rebuilds a missing or damaged index from the
chunks that verify.

The layout and the rules in full: docs/guides/sweeps.md, section "Sweeps: fedpne sweep"
("Nothing lost").
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import time
import zipfile
from typing import TextIO

import numpy as np

from fedpne_jax.core import files
from fedpne_jax.core.result import versions
from fedpne_jax.experiments.sweep import Sweep, SweepError, SweepWriteError

SWEEP_FILE = "sweep.json"
INDEX_FILE = "index.json"
CHUNKS = "chunks"
IDENTITY = "identity"          # the npz member holding a chunk's index entry and sweep hash (JSON)
REJECTED = ".rejected"         # suffix of a chunk file set aside because it failed verification


def _plain(value):
    """NumPy scalars (a capacity, a timing) as the numbers they are, in a chunk's identity record."""
    if isinstance(value, np.generic):
        return value.item()
    return repr(value)


def write_atomic(path: str, write) -> None:
    """:func:`fedpne_jax.core.files.write_atomic`, a failure reported as a SweepWriteError (a SweepError)."""
    files.write_atomic(path, write, SweepWriteError)


def write_json(path: str, data, compact: bool = False, allow_nan: bool = True) -> None:
    files.write_json(path, data, compact, allow_nan, SweepWriteError)


def read_json(path: str):
    """A JSON file's content; a damaged file raises SweepError naming it."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except ValueError as err:        # JSONDecodeError, UnicodeDecodeError
        raise SweepError(f"{os.fspath(path)!r} is damaged: {err}") from None


def check_writable(path) -> None:
    """Refuse a results folder this process cannot create or write, before any work is done (else the
    first chunk, minutes or hours later, would fail)."""
    path = os.path.abspath(os.fspath(path))
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if probe == path and not os.path.isdir(path):
        raise SweepError(f"results folder {path!r} is a file")
    for folder in (probe, os.path.join(path, CHUNKS)):
        if os.path.isdir(folder) and not os.access(folder, os.W_OK | os.X_OK):
            where = "" if folder == path else f" ({folder!r} is not)"
            raise SweepWriteError(f"results folder {path!r} is not writable{where}", errno.EACCES, folder)


def chunk_name(config_id: str, start: int, end: int) -> str:
    return f"{config_id}_{start}-{end}"


class BadChunk(Exception):
    """A chunk that fails verification; ``reason`` completes the sentence "chunk FILE ..."."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def listed_file(entry) -> str | None:
    """The chunk file an index entry names, if the entry is well formed and the file lies in chunks/
    (a tampered index must not make the store set aside files elsewhere)."""
    if not isinstance(entry, dict):
        return None
    file, config, start, end = (entry.get(k) for k in ("file", "config", "start", "end"))
    if not (isinstance(file, str) and isinstance(config, str) and type(start) is int and type(end) is int):
        return None
    head, name = os.path.split(file)
    if head != CHUNKS or not name.endswith(".npz") or name.startswith("."):
        return None
    return file


def verify_chunk(folder: str, relative: str, sweep_hash: str, seeds: np.ndarray, config_ids,
                 listed: dict | None = None) -> tuple[dict, dict]:
    """(arrays, index entry) of the chunk file ``relative`` if it is whole and is what it should be:
    its recorded identity names this sweep (``sweep_hash``), a configuration of ``config_ids`` and the
    seed range of ``listed`` (its index entry, when it has one), and it holds those seeds.  Reads every
    array, so that a damaged byte anywhere fails the zip's CRC check.  Raises :class:`BadChunk`.

    A chunk written before chunks recorded their identity is accepted only through an index entry
    (``listed``), checked by its seeds alone; a scan without the index cannot place it."""
    path = os.path.join(folder, relative)
    if not os.path.isfile(path):
        raise BadChunk("is missing")
    # np.load takes what is not a zip for a pickle and would blame pickling.
    if not zipfile.is_zipfile(path):
        raise BadChunk("is not an npz file (truncated or overwritten)")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    # A damaged zip or .npy fails in many ways (BadZipFile, ValueError, EOFError, OSError, zlib.error,
    # struct.error, ...): every one means the same here.
    except Exception as err:
        raise BadChunk(f"is unreadable ({type(err).__name__}: {err})") from None
    if IDENTITY in arrays:
        try:
            identity = json.loads(str(arrays.pop(IDENTITY)))
            config, start, end = identity["config"], identity["start"], identity["end"]
            recorded_hash = identity["sweep"]
        except (ValueError, TypeError, KeyError):
            raise BadChunk("has an unreadable identity record") from None
        if recorded_hash != sweep_hash:
            raise BadChunk(f"belongs to another sweep definition (hash {str(recorded_hash)[:12]}..., this sweep's "
                           f"is {sweep_hash[:12]}...)")
        if listed is not None and (config, start, end) != (listed["config"], listed["start"], listed["end"]):
            raise BadChunk(f"holds configuration {config}, seed positions {start}..{end}, but the index lists it as "
                           f"configuration {listed['config']}, positions {listed['start']}..{listed['end']}")
        entry = {k: v for k, v in identity.items() if k != "sweep"}
        entry["file"] = relative
    elif listed is not None:
        config, start, end, entry = listed["config"], listed["start"], listed["end"], dict(listed)
    else:
        raise BadChunk("records no identity (written by an older fedpne_jax), so it cannot be placed without "
                       "its index entry")
    if config not in config_ids:
        raise BadChunk(f"holds configuration {config}, which this sweep does not have")
    if not (type(start) is int and type(end) is int and 0 <= start < end <= seeds.size):
        raise BadChunk(f"holds seed positions {start}..{end}, outside this sweep's {seeds.size} seeds")
    missing = [k for k in ("seeds", "final_regret", "curves", "checkpoints") if k not in arrays]
    if missing:
        raise BadChunk(f"lacks {', '.join(missing)}")
    if not np.array_equal(arrays["seeds"], seeds[start:end]):
        raise BadChunk(f"holds other seeds than positions {start}..{end}")
    n = end - start
    if arrays["final_regret"].shape != (n,) or arrays["curves"].ndim != 2 or arrays["curves"].shape[0] != n \
            or any(v.shape[:1] != (n,) for k, v in arrays.items() if k.startswith("metric.")):
        raise BadChunk(f"has arrays of another length than its {n} seeds")
    return arrays, entry


def scan_chunks(folder: str, sweep_hash: str, seeds: np.ndarray, config_ids) -> tuple[dict, list]:
    """(index, rejected) rebuilt from the chunk files alone: every chunk that verifies, keyed by its
    name as :meth:`Store.write_chunks` keys it, and ``(file, reason)`` for those that do not.  Of chunks
    that overlap (two runs with different chunk sizes), the first by start is kept: their numbers are
    the same."""
    found, rejected = [], []
    chunk_folder = os.path.join(folder, CHUNKS)
    names = sorted(os.listdir(chunk_folder)) if os.path.isdir(chunk_folder) else []
    for name in names:
        if name.startswith(".") or not name.endswith(".npz"):
            continue
        relative = os.path.join(CHUNKS, name)
        try:
            found.append(verify_chunk(folder, relative, sweep_hash, seeds, config_ids)[1])
        except BadChunk as bad:
            rejected.append((relative, bad.reason))
    index: dict = {}
    taken: dict = {}
    for entry in sorted(found, key=lambda e: (e["config"], e["start"], -e["end"])):
        ranges = taken.setdefault(entry["config"], [])
        if any(a < entry["end"] and entry["start"] < b for a, b in ranges):
            continue
        ranges.append((entry["start"], entry["end"]))
        index[chunk_name(entry["config"], entry["start"], entry["end"])] = entry
    return index, rejected


def read_index(folder: str, sweep_hash: str) -> tuple[dict | None, str | None]:
    """(chunks, None) from a sound index.json; (None, what is wrong) for a missing or damaged one."""
    path = os.path.join(folder, INDEX_FILE)
    if not os.path.exists(path):
        return None, "is missing"
    try:
        with open(path) as fh:
            index = json.load(fh)
    except (ValueError, OSError) as err:
        return None, f"is damaged ({err})"
    if not isinstance(index, dict) or not isinstance(index.get("chunks"), dict):
        return None, "is damaged (not an index)"
    if index.get("hash") != sweep_hash:
        return None, "belongs to another sweep definition"
    return index["chunks"], None


def _recorded_hash(path: str) -> str | None:
    """The sweep hash a chunk file records; '' when it records none; None when unreadable."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if IDENTITY not in data.files:
                return ""
            return str(json.loads(str(data[IDENTITY]))["sweep"])
    except Exception:     # damaged: no evidence either way (as in verify_chunk)
        return None


def _say(message: str) -> None:
    print(f"fedpne: {message}", file=sys.stderr)


class Store:
    """The results folder of one sweep.  ``writer=False`` (processes other than 0 of a multi-host
    run) reads but never writes, and trusts the index that process 0 verified before they open it.
    ``repair=True`` rebuilds the index from the chunk files even when it looks sound (chunks written
    but never indexed are then kept too)."""

    def __init__(self, path, sweep: Sweep, overwrite: bool = False, writer: bool = True, repair: bool = False):
        self.path = os.fspath(path)
        self.sweep = sweep
        self.writer = writer
        self.chunks: dict = {}
        self.rejected: list = []      # (file, reason) of every chunk set aside while opening
        self._lock: TextIO | None = None
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise SweepError(f"results folder {self.path!r} is a file")
        if writer:
            check_writable(self.path)
            try:
                os.makedirs(self.path, exist_ok=True)
            except OSError as err:
                raise SweepWriteError(f"cannot create results folder {self.path!r}: {err.strerror or err}",
                                      err.errno, self.path) from None
            self._take_lock()
        try:
            self._open(overwrite, repair)
        except BaseException:
            self.close()
            raise

    @property
    def _ids(self) -> set:
        return {e.id for e in self.sweep.entries}

    def _open(self, overwrite: bool, repair: bool) -> None:
        sweep, writer = self.sweep, self.writer
        sweep_file = os.path.join(self.path, SWEEP_FILE)
        stored, problem = self._stored()
        if overwrite and writer and self._holds_another(stored, problem):
            # The description goes last: a Ctrl-C part way leaves a folder that still says whose chunks
            # it holds, and the same command discards the rest.
            shutil.rmtree(os.path.join(self.path, CHUNKS), ignore_errors=True)
            for name in (INDEX_FILE, SWEEP_FILE):
                if os.path.exists(os.path.join(self.path, name)):
                    os.remove(os.path.join(self.path, name))
            stored, problem = None, None
        if stored is not None:
            if stored["hash"] != sweep.hash:
                raise SweepError(self._mismatch(stored))
            self._warn_versions(stored)
        if not writer:
            if problem:
                raise SweepError(problem)
            if stored is not None:
                chunks, index_problem = read_index(self.path, sweep.hash)
                if chunks is None and index_problem != "is missing":
                    raise SweepError(f"{os.path.join(self.path, INDEX_FILE)!r} {index_problem}")
                self.chunks = chunks or {}
            return
        rebuild = "repair requested" if repair else None
        if stored is None:
            if not self._claim(problem):
                os.makedirs(os.path.join(self.path, CHUNKS), exist_ok=True)
                write_json(sweep_file, self._describe())
                self._write_index()
                return
            _say(f"{problem or repr(sweep_file) + ' is missing'}; the chunks in {self.path!r} record this sweep's "
                 f"definition, so it is written again from it")
            write_json(sweep_file, self._describe())
            rebuild = rebuild or f"{SWEEP_FILE} was rewritten"
        os.makedirs(os.path.join(self.path, CHUNKS), exist_ok=True)
        self._remove_temporaries()
        chunks, index_problem = read_index(self.path, sweep.hash)
        if rebuild is None and chunks is not None:
            self._verify(chunks)
        else:
            self._rebuild(rebuild or f"{os.path.join(self.path, INDEX_FILE)!r} {index_problem}")

    def _stored(self) -> tuple[dict | None, str | None]:
        """sweep.json's description, or None and what is wrong with it (None too where it is missing)."""
        sweep_file = os.path.join(self.path, SWEEP_FILE)
        if not os.path.exists(sweep_file):
            return None, None
        try:
            stored = read_json(sweep_file)
        except SweepError as err:
            return None, str(err)
        if not isinstance(stored, dict) or not isinstance(stored.get("hash"), str):
            return None, f"{sweep_file!r} is damaged (not a sweep description)"
        return stored, None

    def _recorded(self) -> set:
        """The definition hashes that the folder's chunks and index record."""
        chunk_folder = os.path.join(self.path, CHUNKS)
        files = sorted(n for n in os.listdir(chunk_folder) if n.endswith(".npz") and not n.startswith(".")) \
            if os.path.isdir(chunk_folder) else []
        recorded = {_recorded_hash(os.path.join(chunk_folder, n)) for n in files} - {None}
        index = os.path.join(self.path, INDEX_FILE)
        if os.path.exists(index):
            try:
                recorded.add(read_json(index).get("hash"))
            except (SweepError, OSError, AttributeError):
                pass
        return recorded

    def _holds_another(self, stored: dict | None, problem: str | None) -> bool:
        """Whether the folder holds results of another definition, or results whose definition cannot be
        read, which --overwrite discards; this sweep's own are resumed, with or without it."""
        if stored is not None:
            return stored["hash"] != self.sweep.hash
        recorded = self._recorded()
        if problem is None and not recorded and not os.path.isdir(os.path.join(self.path, CHUNKS)):
            return False                # nothing of a sweep's here (a new folder, or one _claim refuses)
        return recorded != {self.sweep.hash}

    def _claim(self, problem: str | None) -> bool:
        """For a folder without a sound sweep.json: False if it is new (empty), True if its chunks show
        that it holds this sweep; refuse anything else rather than mix two definitions' results."""
        names = [n for n in os.listdir(self.path) if not n.startswith(".")] if os.path.isdir(self.path) else []
        if names == [CHUNKS] and not os.listdir(os.path.join(self.path, CHUNKS)):
            names = []                  # made just before a Ctrl-C, with nothing in it yet
        recorded = self._recorded()
        if problem is None and not names:
            return False
        if recorded == {self.sweep.hash}:
            return True
        if problem is None and not recorded:
            raise SweepError(f"results folder {self.path!r} is not empty and holds no sweep; "
                             f"choose a new or empty folder")
        if problem is not None and not recorded:
            return True     # nothing to mix up: no chunk that records a sweep (the rebuild rejects the rest)
        what = ("chunks of another sweep definition" if recorded - {self.sweep.hash, ""}
                else "chunks that do not record their sweep (written by an older fedpne_jax)")
        raise SweepError(f"{problem or repr(os.path.join(self.path, SWEEP_FILE)) + ' is missing'}, and the folder "
                         f"holds {what}: use a new --out folder, or --overwrite to discard them")

    def _rebuild(self, reason: str) -> None:
        self.chunks, rejected = scan_chunks(self.path, self.sweep.hash, self.sweep.seed_ids, self._ids)
        for file, why in rejected:
            self._reject(file, why)
        _say(f"{reason}: rebuilt {os.path.join(self.path, INDEX_FILE)!r} from the {len(self.chunks)} chunk(s) "
             f"that verify")
        self._write_index()

    def _verify(self, listed: dict) -> None:
        """Keep the listed chunks that verify; set the others aside and drop them from the index, so
        that the rerun computes their runs again instead of failing on them later."""
        ids, seeds = self._ids, self.sweep.seed_ids
        kept = {}
        for name, entry in listed.items():
            file = listed_file(entry)
            if file is None:
                _say(f"index entry {name!r} of {os.path.join(self.path, INDEX_FILE)!r} is malformed; dropped")
                continue
            try:
                verify_chunk(self.path, file, self.sweep.hash, seeds, ids, listed=entry)
            except BadChunk as bad:
                self._reject(file, bad.reason)
            else:
                kept[name] = entry
        if len(kept) != len(listed):
            self.chunks = kept
            self._write_index()
        else:
            self.chunks = listed

    def _reject(self, file: str, reason: str) -> None:
        path = os.path.join(self.path, file)
        self.rejected.append((file, reason))
        if not os.path.exists(path):
            _say(f"rejected chunk {path!r}: it {reason}; its runs are computed again")
            return
        try:
            os.replace(path, path + REJECTED)
        except OSError as err:
            raise SweepWriteError(f"cannot set aside the rejected chunk {path!r}: {err.strerror or err}",
                                  err.errno, path) from None
        _say(f"rejected chunk {path!r}: it {reason}; moved to {path + REJECTED!r}, its runs are computed again")

    def _take_lock(self) -> None:
        """Refuse a second process writing the same folder at the same time (two writers would each
        rewrite the index without the other's chunks).  The lock dies with its process, so a killed
        sweep never leaves the folder locked."""
        import fcntl
        try:
            self._lock = open(os.path.join(self.path, ".lock"), "w")
        except OSError as err:
            raise SweepWriteError(f"results folder {self.path!r} is not writable: {err.strerror or err}",
                                  err.errno, self.path) from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            self._lock = None
            raise SweepError(f"results folder {self.path!r} is being written by another fedpne sweep") from None

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _describe(self) -> dict:
        return {"format": self.sweep.definition["format"], "hash": self.sweep.hash,
                "definition": self.sweep.definition, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "versions": versions(),
                "configs": [{"index": e.index, "id": e.id, "algorithm": e.algorithm, "labels": e.labels,
                             "objective": e.objective, "config": e.config.resolved()} for e in self.sweep.entries]}

    def _mismatch(self, stored: dict) -> str:
        old = stored.get("definition", {})
        new = self.sweep.definition
        changed = sorted(k for k in set(old) | set(new) if json.dumps(old.get(k), sort_keys=True)
                         != json.dumps(new.get(k), sort_keys=True))
        return (f"results folder {self.path!r} holds a different sweep (its definition differs in: "
                f"{', '.join(changed) or 'numbers'}); results of two definitions are never mixed: "
                f"use a new --out folder, or --overwrite to discard the old results")

    def _warn_versions(self, stored: dict) -> None:
        old, new = stored.get("versions", {}), versions()
        if old.get("fedpne_jax") != new["fedpne_jax"] or old.get("jax") != new["jax"]:
            print(f"fedpne: warning: {self.path!r} was started with fedpne_jax {old.get('fedpne_jax')}, "
                  f"jax {old.get('jax')}; this is fedpne_jax {new['fedpne_jax']}, jax {new['jax']}: "
                  f"chunks computed now may differ in the last bits", file=sys.stderr)

    def _remove_temporaries(self) -> None:
        for folder in (self.path, os.path.join(self.path, CHUNKS)):
            for name in os.listdir(folder):
                if name.startswith(".") and ".tmp-" in name:
                    try:
                        os.remove(os.path.join(folder, name))
                    except OSError:
                        pass

    def _write_index(self) -> None:
        write_json(os.path.join(self.path, INDEX_FILE), {"hash": self.sweep.hash, "chunks": self.chunks}, compact=True)

    def covered(self, config_id: str) -> list[tuple[int, int]]:
        """Seed-position ranges [start, end) of a configuration's finished chunks, sorted."""
        return sorted((c["start"], c["end"]) for c in self.chunks.values() if c["config"] == config_id)

    def write_chunks(self, chunks) -> None:
        """Finished chunks, each ``(config id, start, end, part, extra index fields)`` for seed positions
        [start, end), ``part`` a dict of seeds, final_regret, curves, checkpoints, metrics (a dict) and
        algorithm: every npz first, then the index once (one index write per call, not per chunk, keeps
        the cost linear in the number of calls).  Each npz records its own index entry and the sweep's
        hash, so that it can be verified and the index rebuilt from the chunks alone."""
        if not self.writer:
            return
        for config_id, start, end, part, extra in chunks:
            name = chunk_name(config_id, start, end)
            relative = os.path.join(CHUNKS, name + ".npz")
            entry = dict(config=config_id, start=int(start), end=int(end), file=relative,
                         algorithm=part["algorithm"], **(extra or {}))
            # Through JSON once, so that the index holds exactly what the chunk records.
            entry = json.loads(json.dumps(entry, default=_plain))
            arrays = {k: np.asarray(part[k]) for k in ("seeds", "final_regret", "curves", "checkpoints")}
            arrays.update({f"metric.{k}": np.asarray(v) for k, v in part["metrics"].items()})
            arrays[IDENTITY] = np.asarray(json.dumps(dict(entry, sweep=self.sweep.hash), sort_keys=True))
            write_atomic(os.path.join(self.path, relative), lambda fh, arrays=arrays: np.savez(fh, **arrays))
            self.chunks[name] = entry
        self._write_index()

