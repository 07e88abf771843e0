"""The gate catches planted defects (scripts/mutation_check.py): each mutant of a copy of the package
fails at least one gate test other than the recorded behaviour fixture, and that test passes on an
unmutated copy.  Thorough tier only (about a minute on two cores: each mutant's tests up to its first
failure, then the failed ones on the unmutated copy)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_planted_defect_fails_a_gate_test():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "mutation_check.py"), "-x"],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from scripts.mutation_check import MUTANTS
    for mutant in MUTANTS:
        assert f"{mutant.name}: caught" in proc.stdout, proc.stdout
