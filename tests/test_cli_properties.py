"""Properties of ``fedpne run``'s command line, on drawn argument lists: every invalid one (a number
out of range, a value of the wrong type, an unknown option, a parameter given twice, a bad noise
string, an unknown objective or algorithm) exits 2 with a message and no traceback; every valid one
runs and exits 0.

Valid runs draw from a few shapes (M, T, seeds); rho, c, nu, k, checkpoints and the noise kind
change the compiled program, so they keep one value, while the seeds, the noise scale, c1, delta
and the spelling of the options (option or --set, order, explicit defaults) vary: the file
compiles Fed-PNE once per shape.
"""
import json
import math
import os
import string
import tempfile

from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

import objectives
from fedpne_jax import cli
from fedpne_jax.core import registry
from fedpne_jax.core.config import NOISE_KINDS
from tests.support.helpers import cli_call as call

SHAPES = [(1, 20, 1), (2, 100, 2), (3, 200, 3)]        # (clients M, horizon T, seeds)
CHECKPOINTS = 5
# No example database and no explain phase: Hypothesis writes neither into the working tree.
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None,
                phases=[p for p in Phase if p != Phase.explain])


def _run_options() -> set:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return set(sub.choices["run"]._option_string_actions)


OPTIONS = _run_options()
FIELDS = {f for f in registry.config_type("fedpne").__dataclass_fields__}


# ------------------------------------------------------------------------------------ valid runs

def _number(x: float) -> str:
    return repr(float(x))


@st.composite
def valid_run(draw):
    """(argv, (M, T, S), whether to add --output)."""
    M, T, S = draw(st.sampled_from(SHAPES))

    def either(option, field, value):
        return draw(st.sampled_from([[option, str(value)], [f"{option}={value}"], ["--set", f"{field}={value}"]]))

    parts = [either("--clients", "num_clients", M), either("--horizon", "horizon", T), ["--seeds", str(S)],
             either("--checkpoints", "checkpoints", CHECKPOINTS)]
    kind = draw(st.sampled_from(["gaussian", "Gaussian", "GAUSSIAN"]))
    c1_value, delta_value = draw(st.floats(0.01, 100.0)), draw(st.floats(0.01, 1.0))
    scale = draw(st.one_of(st.none(), st.floats(0.0, 1.0)))
    optional = {
        "noise": either("--noise", "noise", kind if scale is None else f"{kind}:{_number(scale)}"),
        "c1": either("--c1", "c1", _number(c1_value)),
        "delta": either("--delta", "delta", _number(delta_value)),
        "seed": ["--seed", str(draw(st.integers(0, 2**31 - 1)))],
        "objective-seed": ["--objective-seed", str(draw(st.integers(0, 2**31 - 1)))],
        # Explicit defaults: the same program as leaving them out.
        "rho": either("--rho", "rho", 0.5), "c": either("--c", "c", 0.1), "nu": either("--nu", "nu", 1),
        "k": either("--k", "k", 2), "split": either("--split", "split", "random"),
        "pull": either("--pull", "pull", "centre"), "sampling": either("--sampling", "sampling", "auto"),
        "algorithm": ["--algorithm", "fedpne"], "objective": ["--objective", "garland"],
        "heterogeneity": ["--heterogeneity", "shift"], "devices": ["--devices", draw(st.sampled_from(["all", "1"]))],
    }
    chosen = draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=len(optional)))
    # Valid also means L = log(c1 T / delta) > 0, with the paper's defaults c1 = 1 and delta = 1/M
    # (App. E): a small c1 with a short horizon is refused (tests/test_errors.py checks how).
    c1 = c1_value if "c1" in chosen else 1.0
    delta = delta_value if "delta" in chosen else 1.0 / M
    assume(c1 * T / delta > 1.0)
    parts += [optional[name] for name in chosen]
    argv = ["run"] + [a for part in draw(st.permutations(parts)) for a in part]
    return argv, (M, T, S), draw(st.booleans())


@settings(max_examples=10, **SETTINGS)
@given(valid_run())
def test_every_valid_command_line_runs(case):
    argv, (M, T, S), write = case
    with tempfile.TemporaryDirectory() as folder:
        output = os.path.join(folder, "r.json")
        code, out, err = call(argv + (["--output", output] if write else []))
        assert code == 0, (argv, err)
        assert f"M={M} T={T} seeds={S}" in out and "final per-client regret" in out, (argv, out)
        assert ("± n/a" in out) == (S == 1)
        if write:
            with open(output) as fh:
                data = json.load(fh)
            assert data["config"]["num_clients"] == M and data["config"]["horizon"] == T
            assert len(data["per_seed"]["final_regret"]) == S and len(data["checkpoints"]) == CHECKPOINTS
            assert all(v is None for v in data["regret_std"]) == (S == 1)


# --------------------------------------------------------------------------------- invalid runs

INT_RANGES = {      # option: strategies of values outside its range
    "--horizon": [st.integers(max_value=0), st.integers(min_value=2**31)],
    "--clients": [st.integers(max_value=0), st.integers(min_value=2**20 + 1)],
    "--seeds": [st.integers(max_value=0), st.integers(min_value=2**31 + 1)],
    "--checkpoints": [st.integers(max_value=0)],
    "--seed": [st.integers(max_value=-1), st.integers(min_value=2**31)],
    "--objective-seed": [st.integers(max_value=-1), st.integers(min_value=2**31)],
    "--k": [st.integers(max_value=1), st.integers(min_value=257)],
    "--capacity": [st.integers(max_value=1)],
    "--dim": [st.integers(max_value=0), st.integers(min_value=2)],          # garland is 1-D
}
NOT_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
FLOAT_RANGES = {
    "--rho": [st.floats(max_value=0.0), st.floats(min_value=1.0), NOT_FINITE],
    "--nu": [st.floats(max_value=0.0), NOT_FINITE],
    "--c": [st.floats(max_value=0.0), NOT_FINITE],
    "--c1": [st.floats(max_value=0.0), NOT_FINITE],
    "--delta": [st.floats(max_value=0.0), st.floats(min_value=1.0, exclude_min=True), NOT_FINITE],
    "--dp-epsilon": [st.floats(max_value=0.0), NOT_FINITE],
    "--dp-delta": [st.floats(max_value=0.0), st.floats(min_value=1.0), NOT_FINITE],
}


def _parses(kind, text) -> bool:
    try:
        kind(text)
        return True
    except ValueError:
        return False


WORDS = st.text(alphabet=string.ascii_letters + string.digits + "-_.:,/ ", min_size=0, max_size=12)


@st.composite
def out_of_range(draw):
    if draw(st.booleans()):
        option = draw(st.sampled_from(sorted(INT_RANGES)))
        value = str(draw(st.one_of(*INT_RANGES[option])))
    else:
        option = draw(st.sampled_from(sorted(FLOAT_RANGES)))
        value = repr(draw(st.one_of(*FLOAT_RANGES[option])))
    return [f"{option}={value}"]          # '=': a value such as -1e+300 is not taken for an option


@st.composite
def wrong_type(draw):
    option = draw(st.sampled_from(sorted(INT_RANGES) + sorted(FLOAT_RANGES)))
    kind = int if option in INT_RANGES else float
    text = draw(WORDS.filter(lambda t: not _parses(kind, t)))
    if draw(st.booleans()):
        return [f"{option}={text}"]
    field = {"--clients": "num_clients"}.get(option, option[2:].replace("-", "_"))
    if field not in FIELDS:
        return [f"{option}={text}"]
    # Through --set a text is parsed as a number, a boolean or none where it can be ('none' is
    # valid where None means the default), so these texts stay invalid.
    return ["--set", f"{field}={draw(st.sampled_from(['abc', 'true', '1x', '[1]', '']))}"]


def _unknown(name: str) -> bool:
    option = "--" + name
    # argparse takes an unambiguous prefix for the option it abbreviates.
    return not any(known.startswith(option) for known in OPTIONS)


@st.composite
def unknown_option(draw):
    name = draw(st.text(alphabet=string.ascii_lowercase + "-", min_size=1, max_size=12).filter(_unknown))
    if draw(st.booleans()):
        return [f"--{name}"] + draw(st.sampled_from([[], ["1"], ["x"]]))
    key = name.strip("-") or "x"
    return ["--set", f"{key}=1"] if key.replace("-", "_") not in FIELDS else ["--set", f"{key}x_=1"]


CONFLICTS = {       # field: (option, a valid value of it)
    "horizon": ("--horizon", "20"), "checkpoints": ("--checkpoints", "5"), "rho": ("--rho", "0.5"),
    "c": ("--c", "0.1"), "nu": ("--nu", "1"), "c1": ("--c1", "1"), "delta": ("--delta", "0.5"),
    "k": ("--k", "2"), "noise": ("--noise", "gaussian:0.1"), "num_clients": ("--clients", "2"),
    "split": ("--split", "random"), "pull": ("--pull", "centre"),
}


@st.composite
def conflict(draw):
    field = draw(st.sampled_from(sorted(CONFLICTS)))
    option, value = CONFLICTS[field]
    other = draw(st.sampled_from([value, value + "0" if field not in ("split", "pull", "noise") else value]))
    given = [[option, value], ["--set", f"{field}={other}"]]
    if draw(st.booleans()):           # or the same key twice through --set
        given = [["--set", f"{field}={value}"], ["--set", f"{field}={other}"]]
    return [a for part in draw(st.permutations(given)) for a in part]


@st.composite
def bad_noise(draw):
    scaled = draw(st.sampled_from(["gaussian", "uniform", "Gaussian"]))
    noise = draw(st.one_of(
        WORDS.filter(lambda t: t.partition(":")[0].strip().lower() not in NOISE_KINDS),
        st.builds(lambda k, s: f"{k}:{s}", st.just(scaled), st.one_of(
            st.floats(max_value=-1e-9).map(repr), NOT_FINITE.map(repr),
            WORDS.filter(lambda t: t.strip() and not _parses(float, t)))),
        st.builds(lambda k, s: f"{k}:{s}", st.sampled_from(["bernoulli", "none"]),
                  st.text(alphabet=string.digits + ".", min_size=1, max_size=4)),
    ))
    return draw(st.sampled_from([[f"--noise={noise}"], ["--set", f"noise={noise}"]]))


@st.composite
def unknown_name(draw):
    name = draw(st.text(alphabet=string.ascii_lowercase + string.digits + "-", min_size=0, max_size=12))
    if draw(st.booleans()):
        return [f"--objective={name}"] if name not in objectives.OBJECTIVES else ["--objective=" + name + "-x"]
    return [f"--algorithm={name}"] if name not in registry.NAMES else ["--algorithm=" + name + "-x"]


BREAKAGES = {"out of range": out_of_range(), "wrong type": wrong_type(), "unknown option": unknown_option(),
             "given twice": conflict(), "bad noise": bad_noise(), "unknown name": unknown_name()}


@st.composite
def invalid_run(draw):
    argv, _, _ = draw(valid_run())
    kind = draw(st.sampled_from(sorted(BREAKAGES)))
    # Last: an option given twice takes its last value, so the breakage is the one that counts.
    return argv + draw(BREAKAGES[kind]), kind


@settings(max_examples=40, **SETTINGS)
@given(invalid_run())
def test_every_invalid_command_line_is_refused_with_a_message(case):
    argv, kind = case
    code, out, err = call(argv)
    assert code == 2, (kind, argv, code, out, err)
    assert "Traceback" not in err and err.strip(), (kind, argv, err)
    last = err.strip().splitlines()[-1]
    assert last.startswith(("fedpne: error: ", "fedpne run: error: ")), (kind, argv, err)
    if kind == "given twice":
        assert "both set" in last, (argv, err)
