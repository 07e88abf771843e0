"""The ask/tell examples run as printed in their docstrings (smaller horizons), end to end."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*argv):
    out = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_resume_example_finishes_with_the_numbers_of_a_run_never_saved():
    stdout = _run("examples/ask_tell_resume.py", "--horizon", "300")
    assert "saved at step 150 of 300" in stdout and "same numbers" in stdout


def test_sklearn_example_tunes_four_clients_in_a_process_pool():
    pytest.importorskip("sklearn")
    # T = 200 makes the same 4 phases and recommendation as T = 600, with a third fewer fits.
    stdout = _run("examples/ask_tell_sklearn.py", "--horizon", "200", "--workers", "2")
    assert int(re.search(r"phases: (\d+)", stdout).group(1)) >= 3      # several phases of fits in the pool
    assert "recommendation: log10 C =" in stdout and stdout.count("validation AUC") == 4
    assert "same recommendation: True" in stdout
