"""Properties of sweep definitions, drawn: ``fedpne sweep FILE`` exits 2 with a one-line message and
no traceback for every invalid definition (a wrong type or value under any key, an unknown key,
objective or algorithm, a repeated grid value, a document that is not a table), and runs every
valid one (tiny horizons, one program per algorithm and shape) to exit 0."""
import contextlib
import io
import json
import os
import tempfile

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fedpne_jax import cli

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None,
                phases=[p for p in Phase if p != Phase.explain])


def sweep(definition) -> tuple[int, str]:
    """(exit status, stderr) of ``fedpne sweep`` on ``definition`` written as a JSON file; any
    exception but argparse's SystemExit fails the test, as the traceback a user would see."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "sweep.json")
        with open(path, "w") as fh:
            fh.write(definition if isinstance(definition, str) else json.dumps(definition))
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                code = cli.main(["sweep", path, "--out", os.path.join(folder, "out"), "--no-progress"])
            except SystemExit as exit_:
                code = exit_.code
        return code, err.getvalue()


@st.composite
def valid(draw):
    algorithm = draw(st.sampled_from(["fedpne", "hct"]))
    return {"objectives": [draw(st.sampled_from(["garland", "doublesine"]))], "algorithms": [algorithm],
            "clients": [2], "horizon": [40], "seeds": draw(st.integers(1, 3)),
            "base_seed": draw(st.integers(0, 2**31 - 1)),
            "params": {"checkpoints": 4, "noise": f"gaussian:{draw(st.sampled_from(['0.1', '0.2']))}"}}


@settings(max_examples=4, **SETTINGS)
@given(valid())
def test_every_valid_definition_runs(definition):
    code, err = sweep(definition)
    assert code == 0, err
    assert "Traceback" not in err


BASE = {"objectives": ["garland"], "algorithms": ["fedpne"], "clients": [2], "horizon": [40], "seeds": 2,
        "params": {"checkpoints": 4}}
BAD_VALUES = {
    "objectives": [[], ["nosuch"], [3], [{"name": "garland", "bogus": 1}]],
    "algorithms": [[], ["nosuch"], [None]],
    "clients": [[0], [-2], ["two"], [2.5], []],
    "horizon": [[0], ["10"], [1.5], [True], []],
    "seeds": [0, -1, "3", 2.5, [], [1, 1], [-1], True],
    "base_seed": [-1, "0", 2**40, 1.5],
    "params": [{"checkpoints": 0}, {"noise": "gaussian:-1"}, {"rho": 2.0}, {"nosuch": 1}, "x"],
    "grid": [{"c": []}, {"c": [0.1, 0.1]}, {"c": "0.1"}, {"nosuch": [1, 2]}, {"rho": [0.5, 1.5]}],
    "nosuch": [1],
}


@st.composite
def invalid(draw):
    kind = draw(st.sampled_from(["value", "document"]))
    if kind == "document":
        return draw(st.sampled_from(["", "null", "[]", "\"garland\"", "3", "{", "[1, 2]"]))
    key = draw(st.sampled_from(sorted(BAD_VALUES)))
    return dict(BASE, **{key: draw(st.sampled_from(BAD_VALUES[key]))})


@settings(max_examples=25, **SETTINGS)
@given(invalid())
def test_every_invalid_definition_is_refused_with_a_message(definition):
    code, err = sweep(definition)
    assert code == 2, (definition, err)
    assert err.startswith("fedpne: error: ") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
