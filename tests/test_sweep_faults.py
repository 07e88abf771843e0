"""Sweep folders under faults: damaged, missing or foreign chunks, a damaged index or sweep.json, a full
disk, Ctrl-C, bad definition files and unwritable folders.  Every resume must end bit for bit equal
to the uninterrupted sweep, and every refusal must name the file at fault.

One clean sweep (3 configurations x 3 seeds, one run per chunk: the program tests/test_sweep.py
compiles too) is copied and damaged by each test, so a resume computes one or two runs."""
import errno
import json
import os
import re
import shutil
import zipfile

import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.cli import main
from fedpne_jax.core import run as runs
from fedpne_jax.experiments import store as store_lib
from fedpne_jax.experiments import sweep as sweep_lib
from fedpne_jax.experiments.sweep import SweepWriteError
from tests.support.read_only import read_only_folder
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


def flip_a_data_byte(path):
    """Change one byte of the curves' numbers, leaving the zip's structure whole: only its CRC notices."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("curves.npy")
    raw = bytearray(path.read_bytes())
    at = info.header_offset
    start = at + 30 + int.from_bytes(raw[at + 26:at + 28], "little") + int.from_bytes(raw[at + 28:at + 30], "little")
    raw[start + info.compress_size - 1] ^= 0xFF
    path.write_bytes(bytes(raw))


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


@pytest.mark.parametrize("inside", [False, True])
def test_unwritable_out_is_refused_before_computing(tmp_path, monkeypatch, inside):
    """A read-only --out folder, or one to be created in a read-only folder (a read-only mount where
    chmod does not stop this user: root)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    out = locked / "out" if inside else locked
    monkeypatch.setattr(runs, "run_pairs", lambda *a, **k: pytest.fail("a refused sweep computed"))
    with read_only_folder(locked):
        with pytest.raises(SweepWriteError, match=re.escape(f"results folder {str(out)!r} is not writable")):
            sweep(out)
    assert os.listdir(locked) == []


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


@pytest.mark.parametrize("damage, reason", [("delete", "is missing"), ("truncate", "is not an npz file"),
                                            ("flip", r"is unreadable \(BadZipFile: Bad CRC-32")])
def test_bad_chunk_is_named_by_the_loader_and_recomputed_by_a_resume(out, clean, damage, reason, capsys):
    bad = chunk(out, 1, 2)
    if damage == "delete":
        bad.unlink()
    elif damage == "truncate":
        bad.write_bytes(bad.read_bytes()[:200])
    else:
        flip_a_data_byte(bad)
    with pytest.raises(fp.SweepError, match=re.escape(f"chunk {str(bad)!r} ") + reason + ".*allow_partial=True"):
        fp.load_sweep(out)
    partial = fp.load_sweep(out, allow_partial=True)
    assert not partial.done[1, 2] and partial.done.sum() == RUNS - 1 and np.isnan(partial.final_regret[1, 2])
    assert str(bad) in capsys.readouterr().err
    report = sweep(out)
    err = capsys.readouterr().err
    assert f"rejected chunk {str(bad)!r}" in err and report.runs_before == RUNS - 1 and report.runs_computed == 1
    assert [file for file, _ in report.rejected] == [f"chunks/{bad.name}"] and "1 damaged" in report.summary()
    assert (damage == "delete") != os.path.exists(str(bad) + ".rejected")
    assert_same(out, clean)
    assert sweep(out).runs_computed == 0 and capsys.readouterr().err == ""


@pytest.mark.parametrize("damage", ["truncate", "delete", "other-hash"])
def test_damaged_index_is_rebuilt_from_the_chunks(out, clean, damage, capsys):
    """With a chunk deleted too: the rebuilt index holds the chunks that verify, the resume computes
    only the deleted one, and the index ends equal to the clean sweep's."""
    text = (out / "index.json").read_text()
    if damage == "truncate":
        (out / "index.json").write_text(text[:len(text) // 2])
    elif damage == "delete":
        (out / "index.json").unlink()
    else:
        (out / "index.json").write_text(json.dumps({"hash": "0" * 64, "chunks": {}}))
    chunk(out, 2, 0).unlink()
    partial = fp.load_sweep(out, allow_partial=True)
    assert partial.done.sum() == RUNS - 1 and not partial.done[2, 0]
    assert str(out / "index.json") in capsys.readouterr().err
    with pytest.raises(fp.SweepError, match="1 of 9 runs missing"):
        fp.load_sweep(out)
    report = sweep(out)
    err = capsys.readouterr().err
    assert "index.json" in err and "rebuilt" in err and "8 chunk(s)" in err
    assert report.runs_before == RUNS - 1 and report.runs_computed == 1
    # The recomputed chunk's timings differ; what places every chunk does not.
    place = lambda chunks: {k: {f: e[f] for f in ("config", "start", "end", "file", "algorithm")}
                            for k, e in chunks.items()}
    assert place(index(out)) == place(index(clean))
    assert_same(out, clean)


@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_damaged_or_missing_sweep_file_is_rewritten(out, clean, capsys, damage):
    text = (out / "sweep.json").read_text()

    def spoil():
        if damage == "truncate":
            (out / "sweep.json").write_text(text[:100])
        else:
            (out / "sweep.json").unlink()

    spoil()
    problem = "' is damaged" if damage == "truncate" else "' is not a sweep results folder"
    with pytest.raises(fp.SweepError, match=re.escape(str(out / "sweep.json" if damage == "truncate" else out))
                       + problem):
        fp.load_sweep(out)
    # Its chunks record this definition: nothing is recomputed, both files are written again.
    report = sweep(out)
    assert report.runs_computed == 0 and "sweep.json" in capsys.readouterr().err
    assert json.loads((out / "sweep.json").read_text())["configs"] == json.loads(text)["configs"]
    assert_same(out, clean)
    # Chunks of another definition in a folder without a sound sweep.json: refused, nothing mixed.
    spoil()
    other = dict(definition(SEEDS), base_seed=4)
    with pytest.raises(fp.SweepError, match="sweep.json.*(damaged|missing).*another sweep definition.*new --out"):
        fp.run_sweep(other, out, chunk_runs=1, progress=False)


def test_overwrite_resumes_this_definitions_results(out, clean):
    """--overwrite discards another definition's results only: rerunning an interrupted sweep's own
    command, --overwrite included, computes what is missing and keeps what was done."""
    for config in range(3):
        chunk(out, config, 2).unlink()
    report = sweep(out, overwrite=True)
    assert report.runs_computed == 3 and report.runs_before == RUNS - 3
    assert_same(out, clean)
    assert sweep(out, overwrite=True).runs_computed == 0


@pytest.mark.parametrize("state", ["whole", "no sweep.json", "no sweep.json or index"])
def test_overwrite_discards_another_definition_with_or_without_its_sweep_file(out, clean, state):
    """Another definition's folder is discarded by --overwrite, also where its sweep.json is gone (a
    Ctrl-C while an overwrite removed it): its chunks say whose they are.  Without --overwrite it is
    refused, naming the option."""
    if state != "whole":
        (out / "sweep.json").unlink()
    if state == "no sweep.json or index":
        (out / "index.json").unlink()
    other = dict(definition(SEEDS), base_seed=4)
    with pytest.raises(fp.SweepError, match="another sweep definition.*--overwrite|--overwrite"):
        fp.run_sweep(other, out, chunk_runs=1, progress=False)
    report = fp.run_sweep(other, out, chunk_runs=1, progress=False, overwrite=True)
    assert report.runs_computed == RUNS and report.runs_before == 0
    mine = json.loads((out / "sweep.json").read_text())["hash"]
    assert mine == sweep_lib.load(other).hash != sweep_lib.load(definition(SEEDS)).hash
    assert {store_lib._recorded_hash(p) for p in (out / "chunks").iterdir()} == {mine}
    assert fp.load_sweep(out).complete


@pytest.mark.parametrize("command", ["plot", "report", "export"])
def test_an_unfinished_sweep_is_read_with_a_note_of_what_is_missing(out, command, tmp_path, capsys):
    """plot, report and export read an unfinished sweep's finished runs, and say on standard error
    how many are missing and that configurations without any are left out."""
    for start in range(SEEDS):
        chunk(out, 0, start).unlink()
    chunk(out, 1, 2).unlink()
    target = {"plot": ["--out", str(tmp_path / "f.png")], "report": ["--out", str(tmp_path / "r"), "--no-plots"],
              "export": ["--format", "csv", "--out", str(tmp_path / "runs.csv")]}[command]
    assert main([command, str(out), *target]) == 0
    assert (f"fedpne: note: {str(out)!r} is an unfinished sweep: {RUNS - SEEDS - 1} of {RUNS} runs are done, and 1 "
            f"of its 3 configurations have none, so they are left out") in capsys.readouterr().err


def test_a_finished_sweep_is_read_without_a_note(clean, tmp_path, capsys):
    assert main(["export", str(clean), "--format", "csv", "--out", str(tmp_path / "runs.csv")]) == 0
    assert "note" not in capsys.readouterr().err


def test_a_folder_with_only_an_empty_chunks_folder_is_new(tmp_path, clean):
    """A Ctrl-C between making the chunks folder and writing sweep.json leaves only that: the rerun
    starts the sweep there."""
    (tmp_path / "out" / "chunks").mkdir(parents=True)
    report = sweep(tmp_path / "out")
    assert report.runs_computed == RUNS
    assert_same(tmp_path / "out", clean)


def test_index_entry_outside_the_chunks_folder_is_dropped(out, clean, capsys):
    """A tampered entry never makes the store touch a file outside chunks/."""
    listed = json.loads((out / "index.json").read_text())
    name, entry = next(iter(listed["chunks"].items()))
    outside = out.parent / "precious.npz"
    outside.write_bytes(b"not a chunk")
    entry["file"] = os.path.join("..", "precious.npz")
    (out / "index.json").write_text(json.dumps(listed))
    with pytest.raises(fp.SweepError, match="malformed index entry"):
        fp.load_sweep(out)
    assert sweep(out).runs_computed == 1 and f"index entry {name!r}" in capsys.readouterr().err
    assert outside.read_bytes() == b"not a chunk"
    assert_same(out, clean)


def test_index_of_the_chunks_alone_with_repair(out, clean, capsys):
    """A chunk written but never indexed (killed between the two writes) is computed again by a plain
    resume, kept by repair=True."""
    listed = json.loads((out / "index.json").read_text())
    name = next(iter(listed["chunks"]))
    del listed["chunks"][name]
    (out / "index.json").write_text(json.dumps(listed))
    report = sweep(out, repair=True)
    assert report.runs_computed == 0 and "repair requested" in capsys.readouterr().err
    assert index(out) == index(clean)
    assert_same(out, clean)


def test_repair_from_the_command_line(out, clean, tmp_path, capsys):
    """fedpne sweep --repair does what run_sweep(repair=True) does."""
    listed = json.loads((out / "index.json").read_text())
    del listed["chunks"][next(iter(listed["chunks"]))]
    (out / "index.json").write_text(json.dumps(listed))
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(definition(SEEDS)))
    assert main(["sweep", str(path), "--out", str(out), "--chunk-runs", "1", "--no-progress", "--repair"]) == 0
    assert "repair requested" in capsys.readouterr().err
    assert index(out) == index(clean)


def test_chunk_copied_from_another_configuration_or_sweep_is_rejected(out, clean, tmp_path, capsys):
    shutil.copy(chunk(out, 0, 1), chunk(out, 1, 1))
    with pytest.raises(fp.SweepError, match=re.escape(str(chunk(out, 1, 1))) + ".*index lists it as configuration"):
        fp.load_sweep(out)
    # Configuration ids do not depend on base_seed: another sweep's chunk has the same name and seeds
    # (and the same program: no compilation).
    other = tmp_path / "other"
    fp.run_sweep(dict(definition(1), base_seed=4), other, chunk_runs=1, progress=False)
    foreign = chunk(out, 0, 0)
    shutil.copy(other / "chunks" / foreign.name, foreign)
    partial = fp.load_sweep(out, allow_partial=True)
    assert partial.done.sum() == RUNS - 2 and not partial.done[0, 0] and not partial.done[1, 1]
    err = capsys.readouterr().err
    assert f"{str(foreign)!r} belongs to another sweep definition" in err
    report = sweep(out)
    err = capsys.readouterr().err
    assert str(chunk(out, 1, 1)) in err and str(foreign) in err and report.runs_computed == 2
    assert_same(out, clean)


def test_chunk_without_identity_is_kept_through_its_index_entry(out, clean, capsys):
    """Folders written before chunks recorded their identity resume without recomputing; only a
    rebuild from the chunk files alone, which cannot place such a chunk, computes it again."""
    old = chunk(out, 2, 1)
    with np.load(old) as data:
        arrays = {k: data[k] for k in data.files if k != store_lib.IDENTITY}
    np.savez(old, **arrays)
    assert sweep(out).runs_computed == 0
    assert_same(out, clean)
    report = sweep(out, repair=True)
    assert report.runs_computed == 1 and "records no identity" in capsys.readouterr().err
    assert_same(out, clean)
