"""Outputs that are not regular files: a symbolic link, a FIFO, a character device and ``-``
(standard output).  Each receives the bytes in place, and stays what it was: a rename over it
would replace the link, the FIFO or the device by a regular file."""
import errno
import io
import json
import os
import re
import signal
import stat
import sys
import threading
import time

import pytest

from fedpne_jax.core.files import WriteError, write_atomic, write_json
from tests.support.read_only import as_nobody, shared_folder

DATA = {"b": [1, 2.5], "a": "x"}
TEXT = json.dumps(DATA, sort_keys=True, indent=1).encode()

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")


def test_symlink_target_is_updated_and_the_link_kept(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to("real.json")
    write_json(str(link), DATA)
    assert link.is_symlink() and os.readlink(link) == "real.json"
    assert target.read_bytes() == TEXT
    assert sorted(os.listdir(tmp_path)) == ["link.json", "real.json"]


def test_symlink_into_another_folder_writes_there(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "links").mkdir()
    link = tmp_path / "links" / "out.json"
    link.symlink_to(tmp_path / "data" / "out.json")
    write_atomic(str(link), lambda fh: fh.write(b"abc"))
    assert (tmp_path / "data" / "out.json").read_bytes() == b"abc"
    assert link.is_symlink() and os.listdir(tmp_path / "links") == ["out.json"]
    assert os.listdir(tmp_path / "data") == ["out.json"]      # no temporary left in either folder


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to("new.json")
    assert not link.exists()
    write_json(str(link), DATA)
    assert link.is_symlink() and (tmp_path / "new.json").read_bytes() == TEXT


def test_chain_of_links_writes_the_final_target(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("c")
    write_atomic(str(tmp_path / "a"), lambda fh: fh.write(b"xyz"))
    assert (tmp_path / "c").read_bytes() == b"xyz"
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()


def test_symlink_loop_is_refused_and_kept(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    with pytest.raises(WriteError, match=re.escape(f"cannot write {str(loop)!r}: ")) as caught:
        write_atomic(str(loop), lambda fh: fh.write(b"x"))
    assert caught.value.errno == errno.ELOOP and caught.value.filename == str(loop)
    assert loop.is_symlink() and os.readlink(loop) == "loop" and os.listdir(tmp_path) == ["loop"]


def test_failed_write_through_a_link_keeps_the_target(tmp_path):
    target = tmp_path / "real.json"
    target.write_bytes(b"before")
    link = tmp_path / "link.json"
    link.symlink_to(target)

    def full_disk(fh):
        fh.write(b"{")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(WriteError, match=re.escape(f"cannot write {str(link)!r} (the file {str(target)!r} it "
                                                   f"links to): No space left on device")) as caught:
        write_atomic(str(link), full_disk)
    assert caught.value.filename == str(link)
    assert target.read_bytes() == b"before" and link.is_symlink()
    assert sorted(os.listdir(tmp_path)) == ["link.json", "real.json"]


@needs_fifo
@pytest.mark.parametrize("writer", ["write_json", "write_atomic"])
def test_fifo_reader_receives_the_bytes(tmp_path, writer):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    if writer == "write_json":
        write_json(str(fifo), DATA)
        expected = TEXT
    else:
        expected = bytes(range(256)) * 3
        write_atomic(str(fifo), lambda fh: fh.write(expected))
    reader.join(timeout=10)
    assert not reader.is_alive()
    assert received == [expected]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["out.fifo"]


@needs_fifo
def test_fifo_waits_for_a_reader_that_comes_later(tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received = []

    def late_reader():
        time.sleep(0.5)
        received.append(fifo.read_bytes())

    reader = threading.Thread(target=late_reader, daemon=True)
    reader.start()
    write_json(str(fifo), DATA)
    reader.join(timeout=10)
    assert received == [TEXT]


@needs_fifo
@pytest.mark.parametrize("handler", ["counting", "default"])
def test_ctrl_c_ends_the_wait_for_a_fifo_reader(tmp_path, handler):
    """With nobody reading, a SIGINT ends the wait: a handler that only counts it (as the command line's
    does while a result is written) still sees it, and the write fails with EINTR naming the FIFO;
    Python's own handler raises KeyboardInterrupt.  Either way the FIFO stays a FIFO."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    seen = []
    previous = signal.signal(signal.SIGINT, (lambda signum, frame: seen.append(signum)) if handler == "counting"
                             else signal.default_int_handler)
    try:
        timer = threading.Timer(0.3, signal.raise_signal, (signal.SIGINT,))
        timer.start()
        expected = (WriteError, "interrupted while waiting for a reader") if handler == "counting" \
            else (KeyboardInterrupt, None)
        with pytest.raises(expected[0], match=expected[1]) as caught:
            write_json(str(fifo), DATA)
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    if handler == "counting":
        assert seen == [signal.SIGINT] and caught.value.errno == errno.EINTR and caught.value.filename == str(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["out.fifo"]


@needs_fifo
def test_symlink_to_a_fifo_writes_the_fifo(tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_json(str(link), DATA)
    reader.join(timeout=10)
    assert received == [TEXT]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()


@needs_fifo
def test_failure_building_the_content_writes_nothing_to_a_fifo(tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)

    def broken(fh):
        fh.write(b"half")
        raise ValueError("not serialisable")

    # The FIFO is never opened (an open for writing would block until a reader comes).
    with pytest.raises(ValueError, match="not serialisable"):
        write_atomic(str(fifo), broken)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["out.fifo"]


def device(tmp_path, name):
    """A character device like /dev/<name>: a fresh node in tmp_path where this user may create one
    (root: a writer that renamed over the real one would replace it for the whole system), else the
    real one (which such a user could not replace: /dev is not writable)."""
    real = f"/dev/{name}"
    if not os.path.exists(real):
        pytest.skip(f"no {real}")
    path = tmp_path / name
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.stat(real).st_rdev)
    except (OSError, AttributeError):
        return real
    return str(path)


def test_dev_null_stays_a_character_device(tmp_path):
    null = device(tmp_path, "null")
    before = os.stat(null)
    write_json(null, DATA)
    write_atomic(null, lambda fh: fh.write(b"x" * 1000))
    after = os.lstat(null)
    assert stat.S_ISCHR(after.st_mode)
    assert (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert os.listdir(os.path.dirname(null)) == ["null"] or null == "/dev/null"


def test_dev_full_raises_write_error_naming_it_and_stays_a_device(tmp_path):
    full = device(tmp_path, "full")
    with pytest.raises(WriteError, match=re.escape(f"cannot write {full!r}: No space left on device")) as caught:
        write_json(full, DATA)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == full
    assert isinstance(caught.value.__cause__, OSError)
    assert stat.S_ISCHR(os.lstat(full).st_mode)
    assert os.listdir(os.path.dirname(full)) == ["full"] or full == "/dev/full"


def test_custom_error_type_through_a_link_to_a_device(tmp_path):
    class Custom(WriteError):
        pass

    full = device(tmp_path, "full")
    link = tmp_path / "link"
    link.symlink_to(full)
    with pytest.raises(Custom, match=re.escape(f"cannot write {str(link)!r} (the file {full!r} it links to): "
                                               f"No space left on device")):
        write_atomic(str(link), lambda fh: fh.write(b"x"), Custom)
    assert link.is_symlink() and stat.S_ISCHR(os.lstat(full).st_mode)


@needs_fifo
def test_unopenable_special_file_raises_write_error_naming_it():
    """A FIFO this user may not open: root's mode bits do not stop it, so there the write runs in a
    child process as the unprivileged nobody (tests/support/read_only.py)."""
    with shared_folder() as folder:
        fifo = os.path.join(folder, "out.fifo")
        os.mkfifo(fifo, 0o400)

        def write():
            try:
                write_json(fifo, DATA)
            except WriteError as caught:
                return type(caught).__name__, str(caught), caught.errno, caught.filename
            return None

        raised = as_nobody(write)
        assert raised == ("WriteError", f"cannot write {fifo!r}: Permission denied", errno.EACCES, fifo)
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(folder) == ["out.fifo"]


def test_dash_writes_standard_output(capfdbinary, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_json("-", DATA)
    write_atomic("-", lambda fh: fh.write(b"\x00\xffraw"))
    assert capfdbinary.readouterr().out == TEXT + b"\x00\xffraw"
    assert os.listdir(tmp_path) == []            # no file named '-'


def test_dash_keeps_the_order_of_earlier_prints(capsysbinary):
    print("first", end="|")
    write_json("-", [1])
    print("|last")
    assert capsysbinary.readouterr().out == b"first|" + json.dumps([1], indent=1).encode() + b"|last\n"


def test_dash_failure_is_a_write_error(monkeypatch):
    class Closed:
        def flush(self):
            pass

        class buffer:
            @staticmethod
            def write(data):
                raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

            flush = staticmethod(lambda: None)

    monkeypatch.setattr(sys, "stdout", Closed())
    with pytest.raises(WriteError, match=re.escape("cannot write '-' (standard output): Broken pipe")) as caught:
        write_json("-", DATA)
    assert caught.value.errno == errno.EPIPE and caught.value.filename == "-"


def test_regular_file_is_still_replaced_atomically(tmp_path):
    path = tmp_path / "run.json"
    path.write_bytes(b"old")
    inode = os.stat(path).st_ino
    write_json(str(path), DATA)
    assert path.read_bytes() == TEXT and not path.is_symlink()
    assert os.stat(path).st_ino != inode            # a new file renamed in, not the old one rewritten
    assert os.listdir(tmp_path) == ["run.json"]


def test_dash_on_a_text_only_stdout(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    write_json("-", DATA)
    assert out.getvalue() == TEXT.decode()
    with pytest.raises(WriteError, match=re.escape("cannot write '-' (standard output): standard output takes "
                                                   "text only here, and this output is binary")):
        write_atomic("-", lambda fh: fh.write(b"\x89PNG\xff"))
    assert out.getvalue() == TEXT.decode()
