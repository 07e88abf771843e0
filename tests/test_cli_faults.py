"""The command line under faults: outputs that cannot be written (checked before the run; a full
disk after it), Ctrl-C, statistics of one seed, options given twice.  Every fault ends in a
message and exit status 2 (130 for Ctrl-C), never in a traceback or a lost or corrupted result."""
import builtins
import errno
import json
import os

import numpy as np
import pytest

from fedpne_jax import cli
from fedpne_jax.cli import main
from fedpne_jax.core.result import RunResult
from fedpne_jax.paper import studies, summary
from fedpne_jax.paper.reproduce import TIMING, reproduce
from tests.support.read_only import read_only_folder
from tests.support.tiny_studies import tiny_studies

# One tiny shape for every run here, so that the whole file compiles Fed-PNE once.
TINY = ["--horizon", "50", "--clients", "2", "--seeds", "1", "--checkpoints", "5"]
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


# ------------------------------------------------------------------------ fedpne run --output

@pytest.fixture
def no_run(monkeypatch):
    """Fail the test if a run starts: output paths are checked before computing."""
    def run(*args, **kwargs):
        raise AssertionError("the run started although its output cannot be written")
    monkeypatch.setattr(cli.run, "run", run)


@pytest.mark.parametrize("output, message", [
    ("", "--output: the path is empty"),
    ("{tmp}", "--output: '{tmp}' is a folder; give a file name"),
    ("{tmp}/file.txt/r.json", "--output: the folder of '{tmp}/file.txt/r.json' is a file"),
    ("{tmp}/missing/r.json", "--output: the folder of '{tmp}/missing/r.json' does not exist"),
])
def test_run_refuses_an_unwritable_output_before_running(output, message, tmp_path, no_run, capsys):
    (tmp_path / "file.txt").write_text("x")
    assert main(["run", "--output", output.format(tmp=tmp_path)]) == 2
    assert f"fedpne: error: {message.format(tmp=tmp_path)}" in capsys.readouterr().err


def _deny_writes(monkeypatch, denied):
    """os.access as a read-only ``denied`` path answers it, even for root (who ignores chmod)."""
    real = os.access

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and os.path.abspath(path) == os.path.abspath(denied):
            return False
        return real(path, mode, *args, **kwargs)
    monkeypatch.setattr(os, "access", access)


@pytest.mark.parametrize("argv, denied, message", [
    (["run", "--output", "{tmp}/ro/r.json"], "{tmp}/ro", "--output: the folder of '{tmp}/ro/r.json' is not writable"),
    (["run", "--output", "{tmp}/old.json"], "{tmp}/old.json", "--output: '{tmp}/old.json' is read-only"),
    (["plot", "x.json", "--out", "{tmp}/ro/x.png"], "{tmp}/ro", "--out: the folder of '{tmp}/ro/x.png' is not writable"),
    (["reproduce", "fig3", "--out", "{tmp}/ro"], "{tmp}/ro", "--out: '{tmp}/ro' is not writable"),
    (["reproduce", "fig3", "--out", "{tmp}/ro/new/results"], "{tmp}/ro",
     "--out: '{tmp}/ro/new/results' cannot be created: '{tmp}/ro' is not writable"),
    (["sweep", "--out", "{tmp}/ro/s", "--objectives", "garland"], "{tmp}/ro",
     "--out: '{tmp}/ro/s' cannot be created: '{tmp}/ro' is not writable"),
])
def test_read_only_outputs_are_refused(argv, denied, message, tmp_path, no_run, monkeypatch, capsys):
    os.makedirs(tmp_path / "ro")
    (tmp_path / "old.json").write_text(OLD)
    _deny_writes(monkeypatch, denied.format(tmp=tmp_path))
    monkeypatch.setattr(cli.reproduce, "reproduce", lambda *a, **k: pytest.fail("reproduce started"))
    monkeypatch.setattr(cli.sweep, "run_sweep", lambda *a, **k: pytest.fail("the sweep started"))
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    assert f"fedpne: error: {message.format(tmp=tmp_path)}" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["run", "--output", "{ro}/r.json"], ["reproduce", "fig3", "--out", "{ro}/results"],
                                  ["sweep", "--out", "{ro}/s", "--objectives", "garland"]])
def test_chmod_read_only_folder(argv, tmp_path, no_run, capsys):
    """A folder the file system refuses to write: chmod 555, or for root (whom the mode does not
    stop) a read-only mount."""
    ro = tmp_path / "ro"
    ro.mkdir()
    with read_only_folder(ro):
        assert main([a.format(ro=ro) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "not writable" in err and str(ro) in err and "Traceback" not in err
    assert os.listdir(ro) == []


@pytest.mark.parametrize("argv, message", [
    (["reproduce", "fig3", "--out", "{tmp}/file.txt"], "--out: '{tmp}/file.txt' is a file, not a folder"),
    (["reproduce", "fig3", "--out", "{tmp}/file.txt/results"],
     "--out: '{tmp}/file.txt/results' cannot be created: '{tmp}/file.txt' is a file"),
    (["reproduce", "fig3", "--out", ""], "--out: the path is empty"),
    (["sweep", "--out", "{tmp}/file.txt", "--objectives", "garland"], "--out: '{tmp}/file.txt' is a file, not a folder"),
])
def test_output_folders_that_are_files_are_refused(argv, message, tmp_path, monkeypatch, capsys):
    (tmp_path / "file.txt").write_text("x")
    monkeypatch.setattr(cli.reproduce, "reproduce", lambda *a, **k: pytest.fail("reproduce started"))
    monkeypatch.setattr(cli.sweep, "run_sweep", lambda *a, **k: pytest.fail("the sweep started"))
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    assert f"fedpne: error: {message.format(tmp=tmp_path)}" in capsys.readouterr().err


def test_a_full_disk_after_the_run_keeps_the_result_in_a_fallback_file(tmp_path, full_disk, monkeypatch, capsys):
    out, cwd = tmp_path / "out", tmp_path / "cwd"
    out.mkdir()
    cwd.mkdir()
    (out / "r.json").write_text(OLD)
    monkeypatch.chdir(cwd)
    full_disk(out)
    assert main(["run", *TINY, "--output", str(out / "r.json")]) == 2
    captured = capsys.readouterr()
    assert f"fedpne: error: --output: could not write '{out / 'r.json'}': No space left on device" in captured.err
    assert (out / "r.json").read_text() == OLD and _leftovers(out) == []
    kept = [n for n in os.listdir(cwd) if n.startswith("fedpne-result-") and n.endswith(".json")]
    assert len(kept) == 1 and f"the result is kept in {cwd / kept[0]}" in captured.err
    data = json.loads((cwd / kept[0]).read_text())
    assert data["algorithm"] == "fedpne" and data["config"]["horizon"] == 50
    assert "final per-client regret" in captured.out


def test_the_fallback_goes_to_the_temporary_folder_when_the_working_directory_is_full(
        tmp_path, full_disk, monkeypatch, capsys):
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    tmp.mkdir()
    monkeypatch.chdir(out)
    monkeypatch.setattr(cli.run.tempfile, "gettempdir", lambda: str(tmp))
    (out / "fedpne-result-x.json").write_text(OLD)
    full_disk(out)
    assert main(["run", *TINY, "--output", "r.json"]) == 2
    err = capsys.readouterr().err
    assert "could not write the result to" in err and "either: No space left on device" in err
    kept = os.listdir(tmp)
    assert len(kept) == 1 and f"the result is kept in {tmp / kept[0]}" in err
    assert json.loads((tmp / kept[0]).read_text())["config"]["num_clients"] == 2
    assert _leftovers(out) == [] and not os.path.exists(out / "r.json")


def test_a_full_disk_during_a_sweep_is_a_message_naming_the_folder(tmp_path, full_disk, capsys):
    out = tmp_path / "sweep"
    full_disk(out, match=os.sep + "chunks" + os.sep)        # the definition fits, the first chunk does not
    rc = main(["sweep", "--out", str(out), "--objectives", "garland", "--clients", "2", "--horizon", "50",
               "--seeds", "1", "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err
    # The store's writer names the very file it could not write.
    assert f"fedpne: error: cannot write '{out}{os.sep}chunks{os.sep}" in err and "No space left on device" in err
    assert "Traceback" not in err
    assert json.loads((out / "index.json").read_text())["chunks"] == {}       # the folder stays valid


# ---------------------------------------------------------------------------------------- Ctrl-C

def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("argv, patched, message", [
    (["run", "--output", "{tmp}/r.json"], "run", "fedpne: interrupted; no result was written"),
    (["sweep", "--out", "{tmp}/s", "--objectives", "garland"], "run_sweep",
     "fedpne: interrupted; finished chunks are kept, rerun the same command to resume"),
    (["reproduce", "fig3", "--out", "{tmp}/results"], "reproduce",
     "fedpne: interrupted; finished chunks are kept, rerun the same command to resume"),
])
def test_ctrl_c_exits_130_with_a_message(argv, patched, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli.COMMANDS[argv[0]], patched, _interrupt)
    assert main([a.format(tmp=tmp_path) for a in argv]) == cli.EXIT_INTERRUPTED == 130
    assert capsys.readouterr().err.strip() == message
    assert not os.path.exists(tmp_path / "r.json")
    assert "130 interrupted (Ctrl-C)" in cli.build_parser().format_help()


# ------------------------------------------------------------------------------------ statistics

def test_one_seed_has_no_standard_deviation(tmp_path, capsys):
    out = tmp_path / "one.json"
    assert main(["run", *TINY, "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "± n/a (mean ± std over seeds)" in text
    data = json.loads(out.read_text())
    assert data["regret_std"] == [None] * 5 and len(data["regret_mean"]) == 5
    one = small_result(seeds=1)
    assert np.isnan(one.regret_std).all() and np.isnan(one.final_std)
    two = small_result(seeds=2)
    assert two.final_std == pytest.approx(two.final_regret.std(ddof=1)) and np.isfinite(two.regret_std).all()
    assert summary._fmt(3.0, None) == "3 ± n/a" and summary._fmt(3.0, float("nan")) == "3 ± n/a"


@pytest.mark.parametrize("argv, message", [
    (["--horizon", "50", "--set", "horizon=100"], "--horizon 50 and --set horizon=100 both set horizon; give it once"),
    (["--rho", "0.6", "--set", "rho=0.7"], "--rho 0.6 and --set rho=0.7 both set rho; give it once"),
    (["--noise", "none", "--set", "noise=gaussian:0.2"], "--noise none and --set noise=gaussian:0.2 both set noise"),
    (["--checkpoints", "5", "--set", "checkpoints=6"], "--checkpoints 5 and --set checkpoints=6 both set checkpoints"),
    (["--dp-epsilon", "1", "--set", "dp-epsilon=2"], "--dp-epsilon 1.0 and --set dp-epsilon=2 both set dp_epsilon"),
    (["--clients", "2", "--set", "num_clients=3"], "--clients 2 and --set num_clients=3 both set num_clients"),
    (["--set", "kappa=1", "--set", "kappa=2"], "--set kappa=1 and --set kappa=2 both set kappa; give it once"),
])
def test_a_parameter_given_twice_is_refused(argv, message, no_run, capsys):
    assert main(["run", *argv]) == 2
    assert f"fedpne: error: {message}" in capsys.readouterr().err


def test_set_alone_still_sets_the_parameter(tmp_path):
    out = tmp_path / "r.json"
    assert main(["run", "--clients", "2", "--seeds", "1", "--set", "horizon=50", "--set", "checkpoints=5",
                 "--set", "noise=gaussian:0.3", "--output", str(out)]) == 0
    config = json.loads(out.read_text())["config"]
    assert config["horizon"] == 50 and config["checkpoints"] == 5 and config["noise"] == "gaussian:0.3"


def test_overwrite_restarts_a_studys_time(tmp_path, monkeypatch):
    monkeypatch.setitem(studies.STUDIES, "sensitivity", tiny_studies()["sensitivity"])
    out = str(tmp_path / "results")
    timing = os.path.join(out, "quick", TIMING)
    quiet = dict(out=out, quick=True, progress=False, plot=False, log=lambda *_: None)
    reproduce("sensitivity", **quiet)
    first = json.load(open(timing))["sensitivity"]
    assert 0 < first < 600
    # An earlier session's (made-up, long) time: a rerun with nothing to compute keeps it...
    with open(timing, "w") as fh:
        json.dump({"sensitivity": 1e6}, fh)
    reproduce("sensitivity", **quiet)
    assert json.load(open(timing))["sensitivity"] == 1e6
    # ...and so does --overwrite, which discards only another definition's results: this study's are
    # resumed, with nothing to compute...
    reproduce("sensitivity", overwrite=True, **quiet)
    assert json.load(open(timing))["sensitivity"] == 1e6
    # ...while a changed study, discarded and computed again, starts its time afresh.
    monkeypatch.setitem(studies.STUDIES, "sensitivity", tiny_studies(c=(0.1, 0.3))["sensitivity"])
    reproduce("sensitivity", overwrite=True, **quiet)
    assert json.load(open(timing))["sensitivity"] < 600
