"""Sweep folders under faults.  Bad definition files are refused, naming the file."""
import re

import pytest

import fedpne_jax as fp
from fedpne_jax.cli import main
from fedpne_jax.core import run as runs
from fedpne_jax.experiments import sweep as sweep_lib


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
