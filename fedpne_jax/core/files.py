"""Files written for every result the package writes (run JSON, sweep chunks and index, figure data
and PNG, SUMMARY.md, timing, benchmarks).

A regular file (or a new one) is written atomically: a temporary file in the same folder, fsync,
then a rename, so a reader never sees half a file and a failed write (a full disk, Ctrl-C) leaves
the previous content in place and no temporary file behind.

A rename replaces the directory entry, not what it names, so it must only ever land on a regular
file.  Hence a symbolic link is followed and its target written (atomically, in the target's
folder; the link stays a link), and a character device (/dev/null, /dev/full, a terminal), a FIFO
or any other existing file that is neither regular nor a folder is written through, in place,
where its reader or driver expects the bytes.  The path ``-`` means standard output, as on most
command lines (a file of that name is ``./-``).  Those streams cannot be written atomically; their
content is built in memory first, so a failure while it is built writes nothing.
"""
from __future__ import annotations

import errno as errnos
import io
import json
import os
import signal
import stat
import sys
import time

STDOUT = "-"


class WriteError(OSError):
    """A file could not be written (disk full, read-only folder, ...); the message names the path."""

    def __init__(self, message: str, errno: int | None = None, filename: str | None = None):
        super().__init__(message)
        self.errno, self.strerror, self.filename = errno, message, filename

    def __str__(self) -> str:
        return self.strerror or ""


def write_atomic(path: str, write, error: type = WriteError) -> None:
    """``write(file object)`` to ``path``; an OSError becomes ``error`` (a :class:`WriteError`)
    naming ``path``.

    A regular or new file: to a temporary file next to it, fsync, then renamed to it; if anything
    fails, the temporary file is removed and ``path`` keeps its previous content.  A symbolic link:
    the same for the file it points to (created if missing), the link left in place.  ``-``: the
    bytes go to standard output.  An existing file that is neither regular nor a folder (a
    character device, a FIFO, ...): opened and written in place.  Streams receive the bytes only
    once ``write`` has produced them all."""
    path = os.fspath(path)
    if path == STDOUT:
        _write_stream(path, None, write, error)
        return
    target = os.path.realpath(path)
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as err:
        raise _error(error, path, target, err) from err
    if mode is not None and stat.S_ISLNK(mode):
        # realpath leaves a link it cannot resolve (a loop) in place; a rename would replace it.
        loop = OSError(errnos.ELOOP, os.strerror(errnos.ELOOP), path)
        raise _error(error, path, target, loop) from loop
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        _write_stream(path, target, write, error)
        return
    # A folder falls through: the rename then fails, and it is reported like any failed write.
    folder, name = os.path.split(target)
    tmp = os.path.join(folder, f".{name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as err:
        try:
            os.remove(tmp)
        except OSError:
            pass
        if isinstance(err, OSError) and not isinstance(err, WriteError):
            raise _error(error, path, target, err, kept=True) from err
        raise
    _sync_folder(folder or ".")


# How often a FIFO is tried while it has no reader.
FIFO_POLL_SECONDS = 0.05


def _open_fifo(target: str) -> int:
    """The writing end of FIFO ``target`` once a reader has it open.  The wait polls, rather than
    block in open(): a Ctrl-C handler that does not raise (the command line's, which lets a result
    be written first) would leave a blocked open waiting for ever.  A SIGINT while waiting is passed
    to the handler there was, and then ends the wait with EINTR, so the caller can keep the result
    elsewhere."""
    interrupted = []

    def on_interrupt(signum, frame):
        interrupted.append(signum)
        if callable(previous):
            previous(signum, frame)

    try:
        previous = signal.signal(signal.SIGINT, on_interrupt)
        restore = True
    except ValueError:          # not the main thread: no handler can be set, and none is needed
        previous, restore = None, False
    try:
        while True:
            try:
                fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as err:
                if err.errno != errnos.ENXIO:          # ENXIO: no reader yet
                    raise
                if interrupted:
                    raise OSError(errnos.EINTR, "interrupted while waiting for a reader") from None
                time.sleep(FIFO_POLL_SECONDS)
                continue
            os.set_blocking(fd, True)
            return fd
    finally:
        if restore:
            signal.signal(signal.SIGINT, previous)


def _write_stream(path: str, target: str | None, write, error: type) -> None:
    """Standard output (``target`` None) or a device or FIFO, written in place."""
    buffer = io.BytesIO()
    try:
        write(buffer)
        data = buffer.getvalue()
        if target is None:
            # Text printed earlier may still sit in sys.stdout's text buffer; it must come out first.
            sys.stdout.flush()
            out = getattr(sys.stdout, "buffer", None)
            if out is None:        # a text-only stream (a notebook's, a test's capture)
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    raise OSError(errnos.EINVAL, "standard output takes text only here, and this "
                                  "output is binary") from None
                sys.stdout.write(text)
                sys.stdout.flush()
            else:
                out.write(data)
                out.flush()
            return
        # No fsync: devices and FIFOs refuse it (EINVAL), and there is nothing on disk to make durable.
        opened = _open_fifo(target) if stat.S_ISFIFO(os.stat(target).st_mode) else os.open(target, os.O_WRONLY)
        with open(opened, "wb") as fh:
            fh.write(data)
            fh.flush()
    except OSError as err:
        if isinstance(err, WriteError):
            raise
        raise _error(error, path, target, err) from err


def _error(error: type, path: str, target: str | None, err: OSError, kept: bool = False) -> WriteError:
    where = repr(path) + (" (standard output)" if target is None else "")
    if target is not None and os.path.islink(path) and target != os.path.abspath(path):
        where += f" (the file {target!r} it links to)"
    reason = err.strerror or str(err) or type(err).__name__
    # Only an atomic write can promise this; a stream may have received part of the bytes.
    tail = " (its previous content, if any, is kept)" if kept else ""
    return error(f"cannot write {where}: {reason}{tail}", err.errno, path)


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
    """``data`` as JSON, written as :func:`write_atomic` writes (``-``: standard output).
    ``allow_nan=False``: NaN/inf raise ValueError instead of being written as the non-standard
    tokens other JSON readers reject."""
    text = json.dumps(data, sort_keys=True, default=repr, allow_nan=allow_nan,
                      **({"separators": (",", ":")} if compact else {"indent": 1}))
    write_atomic(path, lambda fh: fh.write(text.encode()), error)
