"""Files written atomically, for every result the package writes (run JSON, sweep chunks and index,
figure data and PNG, SUMMARY.md, timing, benchmarks): a temporary file in the same folder, fsync,
then a rename, so a reader never sees half a file and a failed write (a full disk, Ctrl-C) leaves
the previous content in place and no temporary file behind.
"""
from __future__ import annotations

import json
import os


class WriteError(OSError):
    """A file could not be written (disk full, read-only folder, ...); the message names the path."""

    def __init__(self, message: str, errno: int | None = None, filename: str | None = None):
        super().__init__(message)
        self.errno, self.strerror, self.filename = errno, message, filename

    def __str__(self) -> str:
        return self.strerror


def write_atomic(path: str, write, error: type = WriteError) -> None:
    """``write(file object)`` to a temporary file next to ``path``, fsync, then rename it to ``path``.
    If anything fails, the temporary file is removed and ``path`` keeps its previous content; an
    OSError becomes ``error`` (a :class:`WriteError`) naming ``path``."""
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
        if isinstance(err, OSError) and not isinstance(err, WriteError):
            raise error(f"cannot write {os.fspath(path)!r}: {err.strerror or err} (its previous "
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


def write_json(path: str, data, compact: bool = False, allow_nan: bool = True, error: type = WriteError) -> None:
    """``data`` as JSON, atomically.  ``allow_nan=False``: NaN/inf raise ValueError instead of being
    written as the non-standard tokens other JSON readers reject."""
    text = json.dumps(data, sort_keys=True, default=repr, allow_nan=allow_nan,
                      **({"separators": (",", ":")} if compact else {"indent": 1}))
    write_atomic(path, lambda fh: fh.write(text.encode()), error)
