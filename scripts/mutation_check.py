"""Plants known defects in a copy of the package and shows that the gate catches each one.

For every mutant: copy fedpne_jax/, objectives/, tests/ and pyproject.toml to a temporary folder,
replace one exact piece of source (which must occur exactly once), and run gate tests there
(pytest without --thorough, tests/test_behaviour.py never among them: the recorded fixture fails on
any change, so it would also keep a bug present when it was recorded).  Then the tests that failed
run on an unmutated copy: a mutant is caught when at least one gate test fails on it and passes
without it.  The script exits 1 when a mutant survives, when pytest cannot run the unmutated copy,
or when a defect's source text is gone (the package moved on: update MUTANTS).

    python scripts/mutation_check.py                 # every mutant, on the tests named in TESTS
    python scripts/mutation_check.py --whole-gate    # every gate test but the fixture (minutes each)
    python scripts/mutation_check.py -k dp-zeroed    # one mutant
    python scripts/mutation_check.py -x              # each mutant's tests stop at their first failure

tests/test_mutation.py runs it with -x in the thorough tier.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COPIED = ("fedpne_jax", "objectives", "tests", "pyproject.toml")
FIXTURE = "tests/test_behaviour.py"
SAMPLING = "fedpne_jax/algorithms/fedpne/sampling.py"
CONFIG = "fedpne_jax/algorithms/fedpne/config.py"


@dataclass(frozen=True)
class Mutant:
    name: str
    why: str
    path: str
    old: str
    new: str


MUTANTS = (
    Mutant("scale-as-variance", "the Gaussian noise's scale used as its variance (sigma = 0.5: twice the variance)",
           SAMPLING, "var = var + params.noise_scale ** 2", "var = var + params.noise_scale"),
    Mutant("dp-zeroed", "DP-Fed-PNE's privacy noise removed from the rewards",
           SAMPLING, "var = var + params.dp_var", "var = var + 0.0 * params.dp_var"),
    Mutant("wrong-noise-kind", "uniform noise U[-a, a] drawn as Gaussian noise of scale a",
           "fedpne_jax/core/noise.py", "r = values + no_contraction(scale * (2.0 * u_noise - 1.0))",
           "r = values + no_contraction(scale * standard_normal(u_noise))"),
    Mutant("wrong-dp-scale", "sigma_dp^2 = log(1.25 / delta) / eps^2, half Appendix D's",
           CONFIG, "return 2.0 * math.log(1.25 / self.dp_delta) / self.dp_epsilon ** 2",
           "return math.log(1.25 / self.dp_delta) / self.dp_epsilon ** 2"),
    Mutant("dropped-client", "the server's mean of the per-client sampler leaves out client 0",
           SAMPLING, "return Estimate(server_mean(client_means), regret,",
           "return Estimate(server_mean(client_means[:, 1:]), regret,"),
    Mutant("wrong-confidence-width", "the elimination's confidence width c sqrt(2 L / (M n)), sqrt(2) too wide",
           "fedpne_jax/algorithms/fedpne/plan.py", "conf = [config.c_value * math.sqrt(L / (M * ni)) for ni in n]",
           "conf = [config.c_value * math.sqrt(2 * L / (M * ni)) for ni in n]"),
    Mutant("wrong-default-c", "the default confidence constant c = 0.12 instead of the paper's 0.1",
           CONFIG, "DEFAULT_C = 0.1\n", "DEFAULT_C = 0.12\n"),
)

# Gate tests that between them should catch every mutant: the direct checks of the reward model and
# of DP's parameters, and Fed-PNE's noise-free runs against the NumPy reference.
TESTS = ("tests/test_rewards.py", "tests/test_dp.py", "tests/test_exact.py")


def copy_tree(dest: str) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis")
    for name in COPIED:
        src = os.path.join(ROOT, name)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(dest, name), ignore=ignore)
        else:
            shutil.copy2(src, os.path.join(dest, name))


def apply(dest: str, mutant: Mutant) -> None:
    path = os.path.join(dest, mutant.path)
    with open(path) as fh:
        text = fh.read()
    count = text.count(mutant.old)
    if count != 1:
        raise SystemExit(f"{mutant.name}: {mutant.path} holds its source text {count} times, not once: "
                         f"update MUTANTS ({mutant.old!r})")
    with open(path, "w") as fh:
        fh.write(text.replace(mutant.old, mutant.new))


def run_gate(dest: str, tests, workers: int, first: bool = False) -> tuple[int, list[str], float]:
    """(pytest's exit status, the failed node ids, seconds) of the gate tests ``tests`` in ``dest``."""
    env = dict(os.environ, PYTHONPATH=dest, PYTHONDONTWRITEBYTECODE="1")
    env.pop("FEDPNE_THOROUGH", None)
    # The caller's pytest options (a plugin on its own path, -x, -k) are not the gate's.
    env.pop("PYTEST_ADDOPTS", None)
    # The copy is first on sys.path: the editable install's finder comes after the path finder.
    check = subprocess.run([sys.executable, "-c", "import fedpne_jax, objectives; print(fedpne_jax.__file__); "
                            "print(objectives.__file__)"], cwd=dest, env=env, capture_output=True, text=True)
    if check.returncode or any(not f.startswith(dest) for f in check.stdout.split()):
        raise SystemExit(f"the copy in {dest} is not the package imported there: {check.stdout}{check.stderr}")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "--ignore", FIXTURE, *tests]
    if first:
        cmd.append("-x")
    if workers > 1:
        cmd += ["-n", str(workers), "--dist", "loadfile"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    failed = sorted(set(re.findall(r"^FAILED (\S+)", proc.stdout, re.M)))
    if proc.returncode not in (0, 1) or (proc.returncode == 1) != bool(failed):
        sys.stdout.write(proc.stdout[-4000:] + proc.stderr[-4000:])
    return proc.returncode, failed, seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", dest="only", action="append", help="run only this mutant (repeatable)")
    parser.add_argument("--whole-gate", action="store_true", help="run every gate test but the fixture")
    parser.add_argument("-n", dest="workers", type=int, default=1, help="pytest-xdist workers")
    parser.add_argument("-x", dest="first", action="store_true",
                        help="stop each mutant's tests at the first failure (enough to show it caught)")
    args = parser.parse_args(argv)
    tests = ("tests",) if args.whole_gate else TESTS
    mutants = [m for m in MUTANTS if not args.only or m.name in args.only]
    if args.only and len(mutants) != len(args.only):
        parser.error(f"unknown mutant among {args.only}; known: {[m.name for m in MUTANTS]}")
    caught_by: dict = {}
    with tempfile.TemporaryDirectory(prefix="fedpne-mutants-") as tmp:
        for mutant in mutants:
            dest = os.path.join(tmp, mutant.name)
            copy_tree(dest)
            apply(dest, mutant)
            code, failed, seconds = run_gate(dest, tests, args.workers, args.first)
            caught_by[mutant.name] = failed if code == 1 else []
            print(f"{mutant.name}: {len(failed)} failed ({mutant.why}; {seconds:.0f} s)", flush=True)
            for test in failed:
                print(f"    {test}")
            shutil.rmtree(dest)
        # The control: a test that fails on a mutant shows the defect only if it passes without it.
        failing = sorted({test for failed in caught_by.values() for test in failed})
        broken: list = []
        if failing:
            clean = os.path.join(tmp, "clean")
            copy_tree(clean)
            code, broken, seconds = run_gate(clean, failing, args.workers)
            print(f"unmutated, the {len(failing)} tests that failed: exit {code}, {len(broken)} failed, "
                  f"{seconds:.0f} s", flush=True)
            if code not in (0, 1):
                return 1
            for test in broken:
                print(f"    fails unmutated too: {test}")
    survived = []
    for mutant in mutants:
        shown = [test for test in caught_by[mutant.name] if test not in broken]
        print(f"{mutant.name}: {'caught' if shown else 'SURVIVED'}")
        if not shown:
            survived.append(mutant.name)
    if survived:
        print("survived:", ", ".join(survived))
        return 1
    print(f"all {len(mutants)} mutants caught by the gate without {FIXTURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
