"""A sweep's results folder: written chunk by chunk, so that a killed sweep loses at most the call in
flight and a rerun computes only what is missing.

Layout::

    DIR/sweep.json        the normalised definition, its hash, every configuration (id, labels,
                          resolved parameters), the package versions that created the folder
    DIR/index.json        the finished chunks: name -> config id, seed positions [start, end), file
    DIR/chunks/<config id>_<start>-<end>.npz
                          one configuration's runs for the seeds at positions [start, end) of the
                          sweep's seed list: seeds, final_regret, curves, checkpoints, metric.<name>

Every file is written by :func:`write_atomic` (a temporary name in its folder, fsync, rename), chunk
first, index second: whatever moment a process dies, every file is whole, and a chunk missing from
the index is simply computed again (to the same numbers).  A chunk is identified by its
configuration and seed range, so a rerun with another chunk size keeps the finished chunks and fills
the gaps.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import time

import numpy as np

from fedpne_jax.core.result import versions
from fedpne_jax.experiments.sweep import Sweep, SweepError, SweepWriteError

SWEEP_FILE = "sweep.json"
INDEX_FILE = "index.json"
CHUNKS = "chunks"


def write_atomic(path: str, write) -> None:
    """``write(file object)`` to a temporary file next to ``path``, fsync, then rename it to ``path``.

    Every file of a results folder goes through here, so that no reader ever sees half a file.  If
    anything fails (a full disk, Ctrl-C), the temporary file is removed and ``path`` keeps its previous
    content; an OSError becomes a :class:`SweepWriteError` naming ``path`` (the command line reports
    it in one line, exit status 2)."""
    folder, name = os.path.split(os.fspath(path))
    tmp = os.path.join(folder, f".{name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.remove(tmp)
        except OSError:
            pass
        if isinstance(err, OSError) and not isinstance(err, SweepWriteError):
            raise SweepWriteError(f"cannot write {os.fspath(path)!r}: {err.strerror or err} (its previous "
                                  f"content, if any, is kept)", err.errno, os.fspath(path)) from err
        raise
    _sync_folder(folder or ".")


def _sync_folder(folder: str) -> None:
    """Make a rename durable: without fsync of the folder, a power cut can forget it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:       # some file systems cannot fsync a folder; the rename is still atomic
        pass
    finally:
        os.close(fd)


def write_json(path: str, data, compact: bool = False, allow_nan: bool = True) -> None:
    """``data`` as JSON, atomically.  ``allow_nan=False``: NaN/inf raise ValueError instead of being
    written as the non-standard tokens other JSON readers reject."""
    text = json.dumps(data, sort_keys=True, default=repr, allow_nan=allow_nan,
                      **({"separators": (",", ":")} if compact else {"indent": 1}))
    text = text.encode()
    write_atomic(path, lambda fh: fh.write(text))


def read_json(path: str):
    with open(path) as fh:
        return json.load(fh)


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


class Store:
    """The results folder of one sweep.  ``writer=False`` (processes other than 0 of a multi-host
    run) reads but never writes."""

    def __init__(self, path, sweep: Sweep, overwrite: bool = False, writer: bool = True):
        self.path = os.fspath(path)
        self.sweep = sweep
        self.writer = writer
        self.chunks: dict = {}
        self._lock = None
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
            self._open(overwrite)
        except BaseException:
            self.close()
            raise

    def _open(self, overwrite: bool) -> None:
        sweep, writer = self.sweep, self.writer
        sweep_file = os.path.join(self.path, SWEEP_FILE)
        if overwrite and writer and os.path.exists(sweep_file):
            for name in (SWEEP_FILE, INDEX_FILE):
                if os.path.exists(os.path.join(self.path, name)):
                    os.remove(os.path.join(self.path, name))
            shutil.rmtree(os.path.join(self.path, CHUNKS), ignore_errors=True)
        if os.path.exists(sweep_file):
            stored = read_json(sweep_file)
            if stored.get("hash") != sweep.hash:
                raise SweepError(self._mismatch(stored))
            self._warn_versions(stored)
            index_file = os.path.join(self.path, INDEX_FILE)
            if os.path.exists(index_file):
                index = read_json(index_file)
                if index.get("hash") != sweep.hash:
                    raise SweepError(f"results folder {self.path!r}: index.json belongs to another sweep definition")
                self.chunks = index["chunks"]
        elif writer:
            if os.path.isdir(self.path) and any(not n.startswith(".") for n in os.listdir(self.path)):
                raise SweepError(f"results folder {self.path!r} is not empty and holds no sweep; "
                                 f"choose a new or empty folder")
            os.makedirs(os.path.join(self.path, CHUNKS), exist_ok=True)
            write_json(sweep_file, self._describe())
            self._write_index()
        if writer:
            os.makedirs(os.path.join(self.path, CHUNKS), exist_ok=True)
            self._remove_temporaries()

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
        the cost linear in the number of calls)."""
        if not self.writer:
            return
        for config_id, start, end, part, extra in chunks:
            name = chunk_name(config_id, start, end)
            arrays = {k: np.asarray(part[k]) for k in ("seeds", "final_regret", "curves", "checkpoints")}
            arrays.update({f"metric.{k}": np.asarray(v) for k, v in part["metrics"].items()})
            relative = os.path.join(CHUNKS, name + ".npz")
            write_atomic(os.path.join(self.path, relative), lambda fh: np.savez(fh, **arrays))
            self.chunks[name] = dict(config=config_id, start=int(start), end=int(end), file=relative,
                                     algorithm=part["algorithm"], **(extra or {}))
        self._write_index()


def read_chunk(folder: str, entry: dict) -> dict:
    with np.load(os.path.join(folder, entry["file"])) as data:
        return {k: data[k] for k in data.files}
