"""Sweep folders under faults: a full disk, Ctrl-C, bad definition files and unwritable folders.  Every
resume must end bit for bit equal to the uninterrupted sweep, and every refusal must name the file
at fault.

One clean sweep (3 configurations x 3 seeds, one run per chunk: the program tests/test_sweep.py
compiles too) is copied and damaged by each test, so a resume computes one or two runs."""
import errno
import json
import os
import re
import shutil

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.cli import main
from fedpne_jax.core import run as runs
from fedpne_jax.experiments import store as store_lib
from fedpne_jax.experiments import sweep as sweep_lib
from fedpne_jax.experiments.sweep import SweepWriteError
from tests.test_sweep import definition

SEEDS = 3
RUNS = 3 * SEEDS


def sweep(out, **options):
    return fp.run_sweep(definition(SEEDS), out, chunk_runs=1, progress=False, **options)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "out"
    report = sweep(out)
    assert report.runs_computed == RUNS and report.chunks_written == RUNS
    return out


@pytest.fixture
def out(clean, tmp_path):
    copy = tmp_path / "out"
    shutil.copytree(clean, copy, ignore=shutil.ignore_patterns(".lock"))
    return copy


def index(folder) -> dict:
    return json.loads((folder / "index.json").read_text())["chunks"]


def chunk(folder, config: int, start: int):
    """The file of configuration ``config``'s chunk at seed position ``start``."""
    ids = [c["id"] for c in json.loads((folder / "sweep.json").read_text())["configs"]]
    return folder / "chunks" / f"{ids[config]}_{start}-{start + 1}.npz"


def assert_same(folder, clean):
    a, b = fp.load_sweep(folder), fp.load_sweep(clean)
    assert a.complete and a.algorithms == b.algorithms
    for x, y in [(a.curves, b.curves), (a.final_regret, b.final_regret), (a.checkpoints, b.checkpoints)]:
        np.testing.assert_array_equal(x, y)
    assert a.metrics.keys() == b.metrics.keys()
    for name in b.metrics:
        np.testing.assert_array_equal(a.metrics[name], b.metrics[name])


def no_temporaries(folder) -> bool:
    return not [p for p in folder.rglob("*") if ".tmp-" in p.name]


@pytest.mark.parametrize("name, text, message", [
    ("array.json", "[1, 2]", "got an array"),
    ("string.json", '"garland"', "got a string"),
    ("null.json", "null", "got null"),
    ("empty.json", "", "Expecting value"),
    ("object.json", "{}", "defines nothing"),
    ("empty.toml", "", "defines nothing"),
    ("comment.toml", "# objectives = ['garland']\n", "defines nothing"),
])
def test_bad_definition_file_is_refused_naming_it(tmp_path, monkeypatch, capsys, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    monkeypatch.setattr(runs, "run_pairs", lambda *a, **k: pytest.fail("a refused sweep computed"))
    with pytest.raises(fp.SweepError, match=re.escape(f"sweep file {str(path)!r}") + f".*{message}"):
        sweep_lib.load(str(path))
    with pytest.raises(fp.SweepError, match=re.escape(f"sweep file {str(path)!r}")):
        fp.run_sweep(str(path), tmp_path / "out", progress=False)
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert f"sweep file {str(path)!r}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fail", ["write", "replace"])
def test_failed_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path, monkeypatch, fail):
    path = tmp_path / "index.json"
    store_lib.write_json(str(path), {"old": 1})
    before = path.read_bytes()

    def full_disk(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if fail == "replace":
        monkeypatch.setattr(os, "replace", full_disk)
        write = lambda fh: fh.write(b"{}")
    else:
        write = lambda fh: (fh.write(b"{"), full_disk())
    with pytest.raises(SweepWriteError, match=re.escape(f"cannot write {str(path)!r}: No space left")) as caught:
        store_lib.write_atomic(str(path), write)
    assert isinstance(caught.value, OSError) and isinstance(caught.value, fp.SweepError)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["index.json"]


@pytest.mark.parametrize("target", [".npz", "index.json"])
def test_full_disk_during_a_sweep(out, clean, monkeypatch, capsys, target):
    """The failing file is named, the command line exits 2 without a traceback, the folder keeps its
    previous files and no temporary, and a rerun with space again finishes the sweep."""
    lost = chunk(out, 0, 2)
    listed = json.loads((out / "index.json").read_text())
    del listed["chunks"][lost.stem]
    (out / "index.json").write_text(json.dumps(listed))
    lost.unlink()
    before = (out / "index.json").read_bytes()
    replace = os.replace

    def full_disk(src, dst):
        if str(dst).endswith(target):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        replace(src, dst)

    monkeypatch.setattr(os, "replace", full_disk)
    failing = re.escape(f"cannot write '{out}") + f".*{re.escape(target)}': No space left"
    with pytest.raises(SweepWriteError, match=failing):
        sweep(out)
    definition_file = out.parent / "sweep-definition.json"
    definition_file.write_text(json.dumps(definition(SEEDS)))
    assert main(["sweep", str(definition_file), "--out", str(out), "--chunk-runs", "1", "--no-progress"]) == 2
    assert "fedpne: error: cannot write" in capsys.readouterr().err
    assert (out / "index.json").read_bytes() == before and no_temporaries(out)
    monkeypatch.setattr(os, "replace", replace)
    assert sweep(out).runs_computed == 1
    assert_same(out, clean)


@pytest.mark.parametrize("where", ["run", "index write"])
def test_ctrl_c_keeps_the_finished_chunks_and_a_valid_index(clean, tmp_path, monkeypatch, where):
    out = tmp_path / "out"
    if where == "run":
        run_pairs, calls = runs.run_pairs, []

        def interrupted(*args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                raise KeyboardInterrupt
            return run_pairs(*args, **kwargs)

        monkeypatch.setattr(runs, "run_pairs", interrupted)
    else:
        # The index is written when the folder is created and after each call: Ctrl-C during the
        # rename of the third write, after the second call's chunk is on disk but not yet indexed.
        replace, writes = os.replace, []

        def interrupted(src, dst):
            if str(dst).endswith("index.json"):
                writes.append(1)
                if len(writes) == 3:
                    raise KeyboardInterrupt
            replace(src, dst)

        monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sweep(out)
    monkeypatch.undo()
    assert len(index(out)) == 1 and no_temporaries(out)
    assert fp.load_sweep(out, allow_partial=True).done.sum() == 1
    report = sweep(out)
    assert report.runs_before == 1 and report.runs_computed == RUNS - 1
    assert_same(out, clean)


def _read_only(folder) -> bool:
    """Make ``folder`` read-only; False where that does not stop this process (root)."""
    folder.chmod(0o555)
    if os.access(folder, os.W_OK):
        folder.chmod(0o755)
        return False
    return True


@pytest.mark.parametrize("inside", [False, True])
def test_unwritable_out_is_refused_before_computing(tmp_path, monkeypatch, inside):
    """A read-only --out folder, or one to be created in a read-only folder."""
    locked = tmp_path / "locked"
    locked.mkdir()
    if not _read_only(locked):
        pytest.skip("chmod does not stop this user (root) from writing")
    out = locked / "out" if inside else locked
    monkeypatch.setattr(runs, "run_pairs", lambda *a, **k: pytest.fail("a refused sweep computed"))
    try:
        with pytest.raises(SweepWriteError, match=re.escape(f"results folder {str(out)!r} is not writable")):
            sweep(out)
    finally:
        locked.chmod(0o755)


def test_unwritable_out_refusal_without_chmod(tmp_path, monkeypatch):
    """The same refusal where chmod cannot show it (as root): os.access says no."""
    locked = tmp_path / "locked"
    locked.mkdir()
    access = os.access
    monkeypatch.setattr(os, "access", lambda p, *a, **k: False if os.fspath(p) == str(locked) else access(p, *a, **k))
    monkeypatch.setattr(runs, "run_pairs", lambda *a, **k: pytest.fail("a refused sweep computed"))
    for out in (locked, locked / "out"):
        with pytest.raises(SweepWriteError, match=re.escape(f"results folder {str(out)!r} is not writable")) as caught:
            sweep(out)
        assert caught.value.errno == errno.EACCES
    assert os.listdir(locked) == []
