"""The command line under faults: outputs that cannot be written (checked before the run; a full
disk after it), Ctrl-C, statistics of one seed, options given twice.  Every fault ends in a
message and exit status 2 (130 for Ctrl-C), never in a traceback or a lost or corrupted result."""
import builtins
import errno
import json
import os

import numpy as np
import pytest

from fedpne_jax.core.result import RunResult

OLD = '{"old": "result"}\n'


class _FullFile:
    """A file on a full disk: the first ``room`` bytes go in, then ENOSPC (as a real write raises
    it: no file name)."""

    def __init__(self, fh, room):
        self._fh, self._room = fh, room

    def write(self, data):
        if len(data) > self._room:
            self._fh.write(data[:self._room])
            self._room = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= len(data)
        return self._fh.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()

    def __getattr__(self, name):
        return getattr(self._fh, name)


@pytest.fixture
def full_disk(monkeypatch):
    """``full_disk(folder, room=100)``: files opened for writing under ``folder`` hold at most
    ``room`` bytes before ENOSPC."""
    real_open = builtins.open

    def fill(folder, room=100, match=""):
        folder = os.path.abspath(folder)

        def fake_open(file, mode="r", *args, **kwargs):
            fh = real_open(file, mode, *args, **kwargs)
            path = os.path.abspath(file) if isinstance(file, (str, os.PathLike)) else ""
            if any(m in mode for m in "wax+") and path.startswith(folder + os.sep) and match in path:
                return _FullFile(fh, room)
            return fh

        monkeypatch.setattr(builtins, "open", fake_open)

    return fill


def _leftovers(folder):
    return [n for n in os.listdir(folder) if ".tmp" in n]


def small_result(seeds=3):
    curves = np.cumsum(np.arange(seeds * 4, dtype=float).reshape(seeds, 4), axis=1)
    return RunResult(algorithm="fedpne", config={"horizon": 40, "num_clients": 2}, objective="garland",
                     seeds=np.arange(seeds), base_seed=0, checkpoints=np.array([10, 20, 30, 40]), curves=curves,
                     final_regret=curves[:, -1], metrics={"phases": np.ones(seeds, np.int64)},
                     compile_seconds=0.1, run_seconds=0.1)


# ------------------------------------------------------------------- RunResult.write_json is atomic

@pytest.mark.parametrize("failure", ["write", "fsync"])
def test_write_json_on_a_full_disk_keeps_the_old_file(failure, tmp_path, full_disk, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text(OLD)
    if failure == "write":
        full_disk(tmp_path)
    else:         # the data fit in the page cache; the disk refuses them at fsync
        def fsync(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError) as err:
        small_result().write_json(str(path))
    assert err.value.errno == errno.ENOSPC
    assert path.read_text() == OLD
    assert _leftovers(tmp_path) == []


def test_write_json_replaces_the_old_file_whole(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(OLD)
    small_result().write_json(path)
    assert json.loads(path.read_text())["per_seed"]["final_regret"] == small_result().final_regret.tolist()
    assert _leftovers(tmp_path) == []
