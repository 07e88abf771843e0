"""Read-only folders and unprivileged users for the file-safety tests, as any user, root included.

chmod does not stop root (CI runs as root), so there a folder is made read-only by a read-only bind
mount of it onto itself: writes fail with EROFS and os.access(W_OK) says no, for root too.  A test
that needs a permission check (EACCES) runs its body in a forked child that has dropped to the
unprivileged ``nobody`` user.  Neither is skipped: where neither works the test fails, naming why.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import tempfile
import traceback

NOBODY = 65534


@contextlib.contextmanager
def read_only_folder(folder):
    """``folder`` read-only for this process, whoever it runs as; writable again afterwards."""
    folder = os.fspath(folder)
    os.chmod(folder, 0o555)
    mounted = False
    try:
        if os.access(folder, os.W_OK):            # root: the mode does not stop it
            for cmd in (["mount", "--bind", folder, folder], ["mount", "-o", "remount,bind,ro", folder]):
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode:
                    if mounted:
                        subprocess.run(["umount", folder], capture_output=True)
                    raise AssertionError(f"cannot make {folder!r} read-only for this user (root): "
                                         f"{' '.join(cmd)}: {proc.stderr.strip()}")
                mounted = True
            assert not os.access(folder, os.W_OK), f"the read-only mount of {folder!r} is writable"
        yield folder
    finally:
        if mounted:
            subprocess.run(["umount", folder], check=True, capture_output=True)
        os.chmod(folder, 0o755)


@contextlib.contextmanager
def shared_folder():
    """A fresh folder that another user can reach (pytest's tmp_path lies in root's private folder)."""
    with tempfile.TemporaryDirectory(prefix="fedpne-shared-") as path:
        os.chmod(path, 0o755)
        yield path


def as_nobody(fn):
    """``fn()``'s return value, computed in a forked child running as the unprivileged ``nobody``
    (uid/gid 65534), where permission bits apply; an exception it raises is raised here (pickled),
    with the child's traceback as its note.  This process keeps its user.  A user other than root runs
    ``fn`` itself: permission bits apply to it already."""
    if os.geteuid() != 0:
        return fn()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # the child: never returns into pytest
        status = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            try:
                payload = (True, fn())
            except BaseException as exc:           # handed to the parent, which raises it
                exc.__traceback__ = None
                payload = (False, (exc, traceback.format_exc()))
            with os.fdopen(write, "wb") as fh:
                pickle.dump(payload, fh)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and data, f"the child running as nobody failed (status {status})"
    ok, value = pickle.loads(data)
    if ok:
        return value
    exc, text = value
    exc.add_note(f"raised as nobody:\n{text}")
    raise exc
