"""Properties of ``fedpne sweep``'s command line, drawn: combinations of ``--grid``, ``--param``, the
list options (``--objectives``, ``--algorithms``, ``--clients``, ``--horizon``), ``--seeds``,
``--seed`` and the run options (``--memory-gb``, ``--chunk-runs``, ``--devices``), with or without a
definition file (JSON or TOML) whose keys the options override.  Every invalid one (a bad value, an
unknown or reserved key, a key given twice or both fixed and swept, a broken or missing file, no
input at all, an unknown option) exits 2 with a message naming the offending option or key, no
traceback, and no sweep.json written; every valid one exits 0 and writes the sweep the options and
the file describe, the options' values winning over the file's.

Valid sweeps reuse three programs: Fed-PNE on Garland and DoubleSine and HCT on Garland, M = 2,
T = 40, four checkpoints, two seeds and a grid of two Gaussian noise scales, so every call runs the
4 runs of one group.  The scale is data to both algorithms, where c, nu or rho would size HCT's
tables or Fed-PNE's depth tables and compile anew.  What varies is where each key is given, its
spelling, the order of the arguments, the seeds and the scales.
"""
import dataclasses
import json
import os
import re
import string
import tempfile

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import objectives
from fedpne_jax import cli
from fedpne_jax.core import registry
from fedpne_jax.experiments.load import load_sweep
from fedpne_jax.experiments.sweep import TOP_KEYS
from tests.support.helpers import cli_call as call

# No example database and no explain phase: Hypothesis writes neither into the working tree.
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None,
                phases=[p for p in Phase if p != Phase.explain])

OBJECTIVES = ["garland", "doublesine"]
ALGORITHMS = ["fedpne", "hct"]
NOISES = ["gaussian:0.05", "gaussian:0.1", "gaussian:0.2", "gaussian:0.3"]
CLIENTS, HORIZON, SEEDS, CHECKPOINTS = 2, 40, 2, 4
# What a file holds under a key the command line also gives: each would change the sweep (and
# most its programs), so a file value that wins over the option fails the checks of the result.
DECOYS = {"objectives": ["himmelblau"], "algorithms": ["hoo"], "clients": [3], "horizon": [60], "seeds": 5,
          "base_seed": 12345, "param:checkpoints": 8, "param:split": "longest", "param:precision": "float64",
          "grid:noise": ["uniform:0.3", "uniform:0.4"]}
# Read once: every look-up in registry.NAMES, a live view, lists the installed entry points again.
REGISTERED = tuple(registry.NAMES)
FIELDS = set().union(*({f.name for f in dataclasses.fields(registry.config_type(n))} for n in REGISTERED))


def _sweep_options() -> set:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return set(sub.choices["sweep"]._option_string_actions)


OPTIONS = _sweep_options()


def names(name: str, text: str) -> bool:
    """``name`` appears in ``text`` as a whole word (so 'lo' is not found in 'float', nor '--seed'
    in '--seeds')."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text) is not None


# ------------------------------------------------------------------------------ writing a file

def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)                 # a TOML basic string is JSON's escaping
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {value!r}")


def to_toml(definition: dict) -> str:
    """The definitions drawn here as TOML: top-level keys first, then one table per dict."""
    plain = [f"{k} = {_toml_value(v)}" for k, v in definition.items() if not isinstance(v, dict)]
    tables = [f"\n[{k}]\n" + "\n".join(f"{kk} = {_toml_value(vv)}" for kk, vv in v.items())
              for k, v in definition.items() if isinstance(v, dict)]
    return "\n".join(plain) + "\n" + "\n".join(tables) + "\n"


@dataclasses.dataclass
class Case:
    """A command line in parts: ``file`` (a definition dict, raw text, or None for no file),
    written as ``fmt``; ``cli``: logical key (an option, 'param:KEY', 'grid:KEY') -> its arguments."""
    file: object
    fmt: str
    cli: dict
    out: bool = True

    def argv(self, folder: str, order) -> tuple[list, str]:
        """The argument list, its parts in ``order`` (logical keys, with 'file' and 'out'), and the
        results folder it names."""
        out = os.path.join(folder, "out")
        parts = dict(self.cli)
        if self.out:
            parts["out"] = ["--out", out]
        if self.file is not None:
            path = os.path.join(folder, f"sweep.{self.fmt}")
            text = self.file if isinstance(self.file, str) else \
                json.dumps(self.file) if self.fmt == "json" else to_toml(self.file)
            with open(path, "w") as fh:
                fh.write(text)
            parts["file"] = [path]
        keys = [k for k in order if k in parts] + [k for k in parts if k not in order]
        return ["sweep"] + [a for k in keys for a in parts[k]] + ["--no-progress"], out


def _list_option(option: str, values, eq: bool) -> list:
    text = ",".join(str(v) for v in values)
    return [f"{option}={text}"] if eq else [option, text]


# -------------------------------------------------------------------------------- valid sweeps

@dataclasses.dataclass
class Expected:
    objectives: list
    algorithms: list
    noise: list
    seeds: list
    base_seed: int


@st.composite
def valid_case(draw):
    algs = draw(st.one_of(st.none(), st.lists(st.sampled_from(ALGORITHMS), min_size=1, max_size=2, unique=True)))
    # HCT on Garland only: a fourth program would cost the file a quarter of its time.
    objs = ["garland"] if algs and "hct" in algs else \
        draw(st.lists(st.sampled_from(OBJECTIVES), min_size=1, max_size=2, unique=True))
    noises = draw(st.lists(st.sampled_from(NOISES), min_size=2, max_size=2, unique=True))
    base_seed = draw(st.one_of(st.none(), st.integers(0, 2**31 - 1)))
    use_file = draw(st.booleans())
    # A list of seed indices has no option: only a file gives one.
    seeds = draw(st.one_of(st.just(SEEDS), st.lists(st.integers(0, 2**31 - 1), min_size=2, max_size=2,
                                                     unique=True))) if use_file else SEEDS
    values = {"objectives": objs, "algorithms": algs, "clients": [CLIENTS], "horizon": [HORIZON], "seeds": seeds,
              "base_seed": base_seed, "param:checkpoints": CHECKPOINTS, "grid:noise": noises,
              # Explicit defaults: the same programs as leaving them out.
              "param:split": draw(st.sampled_from([None, "random"])),
              "param:precision": draw(st.sampled_from([None, "float32"]))}
    file: dict = {}
    cli_parts: dict = {}
    for key, value in values.items():
        if value is None:
            continue
        in_file = use_file and (isinstance(value, list) and key == "seeds" or draw(st.booleans()))
        if in_file:
            _put(file, key, value, draw)
            continue
        cli_parts[key] = _spell(key, value, draw)
        if use_file and draw(st.booleans()):
            _put(file, key, DECOYS[key], draw)
    if use_file and not file:
        file["clients"] = DECOYS["clients"]     # an empty file is refused; a decoy the options override
        cli_parts["clients"] = _spell("clients", [CLIENTS], draw)
    order = draw(st.permutations(sorted(cli_parts) + ["file", "out"]))
    case = Case(file if use_file else None, draw(st.sampled_from(["json", "toml"])), cli_parts)
    expected = Expected(objs, algs or ["fedpne"], noises, list(range(seeds)) if isinstance(seeds, int) else seeds,
                        base_seed or 0)
    return case, list(order), expected


def _put(file: dict, key: str, value, draw) -> None:
    if key.startswith(("param:", "grid:")):
        table, name = key.split(":")
        file.setdefault("params" if table == "param" else "grid", {})[name] = value
    elif key == "objectives":
        # A name, or a table naming it: the same objective.
        file[key] = [draw(st.sampled_from([v, {"name": v}])) for v in value]
    elif key in ("clients", "horizon") and len(value) == 1 and draw(st.booleans()):
        file[key] = value[0]                    # one value may be given without its list
    else:
        file[key] = value


def _spell(key: str, value, draw) -> list:
    eq = draw(st.booleans())
    if key in ("objectives", "algorithms", "clients", "horizon"):
        return _list_option("--" + key, value, eq)
    if key == "seeds":
        return ["--seeds", str(value)]
    if key == "base_seed":
        return ["--seed", str(value)]
    table, name = key.split(":")
    text = f"{name}={','.join(map(str, value)) if table == 'grid' else value}"
    return [f"--{table}={text}"] if eq else [f"--{table}", text]


@settings(max_examples=6, **SETTINGS)
@given(valid_case())
def test_every_valid_sweep_command_line_runs_and_writes_its_sweep(drawn):
    case, order, want = drawn
    with tempfile.TemporaryDirectory() as folder:
        argv, out = case.argv(folder, order)
        code, stdout, err = call(argv)
        assert code == 0, (argv, case.file, err)
        assert "Traceback" not in err
        res = load_sweep(out)
        # The order is the documented one: objective, algorithm, then the grid (given order).
        rows = [(o, a, n) for o in want.objectives for a in want.algorithms for n in want.noise]
        assert res.configs == [{"objective": o, "algorithm": a, "num_clients": CLIENTS if a == "fedpne" else None,
                                "horizon": HORIZON, "noise": n} for o, a, n in rows], (argv, case.file)
        assert f"{len(rows)} configurations" in stdout
        assert res.complete and res.seeds.tolist() == want.seeds
        assert res.definition["base_seed"] == want.base_seed
        assert res.final_regret.shape == (len(rows), SEEDS) and np.isfinite(res.final_regret).all()
        assert res.checkpoints.shape == (len(rows), CHECKPOINTS)
        for resolved, (_, _, noise) in zip(res.resolved, rows):
            assert resolved["noise_kind"] == "gaussian" and resolved["noise_scale"] == float(noise.split(":")[1])
            assert resolved["horizon"] == HORIZON and resolved["split"] == "random"
            assert resolved["precision"] == "float32"


# ------------------------------------------------------------------------------ invalid sweeps
# A breakage is (keys of the valid case's options to remove, options to add, changes to the file,
# names of which at least one must appear in the message).

def _parses(kind, text) -> bool:
    try:
        kind(text)
        return True
    except ValueError:
        return False


def _registered(token: str) -> bool:
    """Whether the list options could take ``token`` for a name: a number, a boolean or none is no
    name, and a registered one is not unknown."""
    value = registry.parse_value(token)
    return not isinstance(value, str) or value in objectives.OBJECTIVES or value in REGISTERED


TOKENS = st.text(alphabet=string.ascii_lowercase + string.digits + "-_", min_size=0, max_size=10)
BAD_COUNTS = {"clients": ["0", "-1", "1.5", "abc", "none", "true", "", "2,2", "2,0", ","],
              "horizon": ["0", "-40", "40.5", "x", "null", "false", "", "40,40", "40,-1"]}


@st.composite
def bad_list(draw):
    key = draw(st.sampled_from(sorted(BAD_COUNTS)))
    return [key], [[f"--{key}={draw(st.sampled_from(BAD_COUNTS[key]))}"]], {}, [key]


@st.composite
def bad_names(draw):
    key = draw(st.sampled_from(["objectives", "algorithms"]))
    good = OBJECTIVES if key == "objectives" else ALGORITHMS
    kind = draw(st.sampled_from(["unknown", "repeated", "not a name"]))
    if kind == "unknown":
        token = draw(TOKENS.filter(lambda t: not _registered(t)))
        items = draw(st.permutations([token] + draw(st.lists(st.sampled_from(good), max_size=1))))
        wanted = [repr(token)]
    elif kind == "repeated":
        items, wanted = [draw(st.sampled_from(good))] * 2, [key]
    else:
        items, wanted = [draw(st.sampled_from(["3", "1.5", "none", "true"]))], [key, key[:-1]]
    return [key], [[f"--{key}={','.join(items)}"]], {}, wanted


@st.composite
def bad_count(draw):
    option = draw(st.sampled_from(["--seeds", "--seed"]))
    value = draw(st.one_of(
        st.integers(max_value=0 if option == "--seeds" else -1).map(str),
        st.integers(min_value=2**31 + (1 if option == "--seeds" else 0)).map(str),
        st.text(alphabet=string.ascii_letters + string.digits + ".-", max_size=6).filter(lambda t: not _parses(int, t))))
    key = "seeds" if option == "--seeds" else "base_seed"
    return [key], [[f"{option}={value}"]], {}, [option, key]


BAD_PARAM_VALUES = {
    "rho": ["0", "1", "1.5", "-0.5", "nan", "abc", "none"], "nu": ["0", "-1", "inf", "abc"],
    "delta": ["0", "1.5", "-1", "abc"], "noise": ["bogus", "gaussian:-1", "gaussian:abc", "bernoulli:0.1", "3"],
    "checkpoints": ["0", "-1", "41", "1.5", "abc"], "split": ["bogus", "1"], "precision": ["float16", "none"],
}


def _free_key(key: str) -> bool:
    return key not in FIELDS and key not in ("horizon", "num_clients")


@st.composite
def bad_param(draw):
    kind = draw(st.sampled_from(["malformed", "unknown key", "reserved key", "bad value"]))
    if kind == "malformed":
        item = draw(st.sampled_from(["c", "=0.1", " =1", "", "rho"]))
        return [], [[f"--param={item}"]], {}, ["--param"]
    if kind == "unknown key":
        key = draw(st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=10).filter(_free_key))
        return [], [[f"--param={key}=1"]], {}, [repr(key)]
    if kind == "reserved key":
        key = draw(st.sampled_from(["horizon", "num_clients"]))
        return [], [["--param", f"{key}=3"]], {}, [key]
    # Not noise, which the valid sweeps' file may sweep: --param on a key the file sweeps is the
    # subject of test_a_key_fixed_and_swept_across_file_and_options_is_never_resolved_silently.
    key = draw(st.sampled_from(sorted(set(BAD_PARAM_VALUES) - {"noise"})))
    return [], [[f"--param={key}={draw(st.sampled_from(BAD_PARAM_VALUES[key]))}"]], {}, [key]


@st.composite
def bad_grid(draw):
    kind = draw(st.sampled_from(["malformed", "repeated value", "unknown key", "reserved key", "bad value"]))
    if kind == "malformed":
        return [], [[f"--grid={draw(st.sampled_from(['c', '=0.1,0.2', ' =1,2', '']))}"]], {}, ["--grid"]
    if kind == "repeated value":
        key, text = draw(st.sampled_from([("rho", "0.5,0.5"), ("nu", "1,1.0"), ("noise", "gaussian:0.1,gaussian:0.1"),
                                          ("split", "random,random")]))
        return [], [["--grid", f"{key}={text}"]], {}, [key]
    if kind == "unknown key":
        key = draw(st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=10).filter(_free_key))
        return [], [["--grid", f"{key}=1,2"]], {}, [repr(key)]
    if kind == "reserved key":
        key = draw(st.sampled_from(["horizon", "num_clients"]))
        return [], [["--grid", f"{key}=20,30"]], {}, [key]
    key = draw(st.sampled_from(sorted(BAD_PARAM_VALUES)))
    # One bad value beside a good one: every configuration is checked before any runs.
    good = {"rho": "0.5", "nu": "1", "delta": "0.5", "noise": "gaussian:0.1", "checkpoints": "4", "split": "random",
            "precision": "float32"}[key]
    bad = draw(st.sampled_from([v for v in BAD_PARAM_VALUES[key] if v != good]))
    values = draw(st.permutations([good, bad]))
    return [], [["--grid", f"{key}={','.join(values)}"]], {}, [key]


@st.composite
def given_twice(draw):
    key, fixed, swept = draw(st.sampled_from([("rho", "0.5", "0.25,0.75"), ("nu", "1", "0.5,2"),
                                              ("delta", "0.5", "0.05,0.5")]))
    second = draw(st.sampled_from([("--param", fixed), ("--grid", swept)]))
    first = draw(st.sampled_from([("--param", fixed), ("--grid", swept)]))
    items = draw(st.permutations([[first[0], f"{key}={first[1]}"], [second[0], f"{key}={second[1]}"]]))
    return [], list(items), {}, [key]


@st.composite
def no_input(draw):
    if draw(st.booleans()):
        return ["objectives", "file"], [], {}, ["--objectives"]
    return ["out"], [], {}, ["--out"]


BROKEN_FILES = ["", "null", "[]", "\"garland\"", "3", "{", "[1, 2]", "{}", "true"]


@st.composite
def bad_file(draw):
    kind = draw(st.sampled_from(["missing", "broken", "unknown key", "bad value"]))
    if kind == "missing":
        return ["file"], [["/nonexistent-fedpne-folder/sweep.json"]], {}, ["'/nonexistent-fedpne-folder/sweep.json'"]
    if kind == "broken":
        return [], [], {"text": draw(st.sampled_from(BROKEN_FILES))}, ["FILE"]
    if kind == "unknown key":
        key = draw(st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=10)
                   .filter(lambda k: k not in TOP_KEYS and k not in REGISTERED))
        return [], [], {"set": {key: 1}}, [repr(key)]
    key, value = draw(st.sampled_from([("clients", [0]), ("clients", ["two"]), ("horizon", [1.5]), ("horizon", []),
                                       ("seeds", 0), ("seeds", [1, 1]), ("seeds", "2"), ("base_seed", -1),
                                       ("base_seed", 2**40), ("objectives", ["nosuch"]), ("algorithms", [None]),
                                       ("objectives", [])]))
    # The option that would override the file's value is left out.
    return [key], [], {"set": {key: value}}, [key, key.rstrip("s")]


@st.composite
def bad_device_option(draw):
    option = draw(st.sampled_from(["--memory-gb", "--chunk-runs", "--devices"]))
    if option == "--memory-gb":
        # (inf: in EDGES, tried every time.)
        value = draw(st.one_of(st.sampled_from(["nan", "-inf", "abc", ""]),
                               st.floats(max_value=0.0, allow_infinity=False).map(repr)))
    elif option == "--chunk-runs":
        value = draw(st.one_of(st.integers(max_value=0).map(str), st.sampled_from(["x", "1.5", ""])))
    else:
        value = draw(st.one_of(st.sampled_from(["0", "-1", "abc", "", "1.5", "alll"]),
                               st.integers(min_value=jax.device_count() + 1, max_value=10**6).map(str)))
    return [], [[f"{option}={value}"]], {}, [option, option[2:].replace("-", "_")]


def _unknown(name: str) -> bool:
    # argparse takes an unambiguous prefix for the option it abbreviates.
    return not any(known.startswith("--" + name) for known in OPTIONS)


@st.composite
def unknown_option(draw):
    name = draw(st.text(alphabet=string.ascii_lowercase + "-", min_size=1, max_size=12)
                .filter(lambda n: n[0].isalpha() and _unknown(n)))
    return [], [[f"--{name}" + draw(st.sampled_from(["", "=1"]))]], {}, [f"--{name}"]


BREAKAGES = {"list value": bad_list(), "names": bad_names(), "count": bad_count(), "param": bad_param(),
             "grid": bad_grid(), "given twice": given_twice(), "no input": no_input(), "file": bad_file(),
             "device option": bad_device_option(), "unknown option": unknown_option()}


@st.composite
def invalid_case(draw):
    case, order, _ = draw(valid_case())
    kind = draw(st.sampled_from(sorted(BREAKAGES)))
    remove, add, file_change, wanted = draw(BREAKAGES[kind])
    for key in remove:
        case.cli.pop(key, None)
        if key == "file":
            case.file = None
        if key == "out":
            case.out = False
    for i, part in enumerate(add):
        case.cli[f"broken:{i}"] = part
    if "text" in file_change:
        case.file = file_change["text"]
    if "set" in file_change:
        case.file = dict(case.file) if isinstance(case.file, dict) else {}
        case.file.update(file_change["set"])
        if None in file_change["set"].values() or [None] in file_change["set"].values():
            case.fmt = "json"                   # TOML has no null
    order = order + [k for k in case.cli if k.startswith("broken:")]
    return case, order, kind, wanted


def refused(case: Case, order: list, kind: str, wanted: list) -> None:
    """``case`` exits 2, its message's last line naming one of ``wanted``, with no traceback and no
    results folder."""
    with tempfile.TemporaryDirectory() as folder:
        argv, out = case.argv(folder, order)
        code, _, err = call(argv)
        assert code == 2, (kind, argv, case.file, err)
        assert "Traceback" not in err and err.strip(), (kind, argv, err)
        last = err.strip().splitlines()[-1]
        assert last.startswith(("fedpne: error: ", "fedpne sweep: error: ")), (kind, argv, err)
        path = os.path.join(folder, f"sweep.{case.fmt}")
        wanted = [repr(path) if w == "FILE" else w for w in wanted]
        assert any(names(w, last) for w in wanted), (kind, argv, case.file, wanted, last)
        # Refused before anything runs: no results folder holds the refused definition.
        assert not os.path.exists(os.path.join(out, "sweep.json")), (kind, argv)


@settings(max_examples=40, **SETTINGS)
@given(invalid_case())
def test_every_invalid_sweep_command_line_is_refused_naming_what_is_wrong(drawn):
    refused(*drawn)


# The edges of the options' ranges, every one tried (Hypothesis exhausts a small sampled_from);
# the drawn command lines above reach each of them only now and then.
EDGES = ([("--memory-gb", v) for v in ["nan", "inf", "-inf", "0", "-0.0", "-1e300", "1e300", "2e9", "abc", ""]]
         + [("--chunk-runs", v) for v in ["0", "-1", "1.5", "x"]]
         + [("--devices", v) for v in ["0", "-1", str(jax.device_count() + 1), "1.5", "abc", ""]]
         + [("--seeds", v) for v in ["0", "-1", str(2**31 + 1), "1.5"]]
         + [("--seed", v) for v in ["-1", str(2**31), "1.5"]])


@settings(max_examples=len(EDGES) + 10, **SETTINGS)
@given(st.sampled_from(EDGES))
def test_every_edge_value_of_an_option_is_refused_naming_it(edge):
    option, value = edge
    parts = {"objectives": ["--objectives", "garland"], "clients": ["--clients", "2"], "horizon": ["--horizon", "40"],
             "param:checkpoints": ["--param", "checkpoints=4"], "edge": [f"{option}={value}"]}
    key = {"--seed": "base_seed"}.get(option, option[2:].replace("-", "_"))
    refused(Case(None, "json", parts), list(parts) + ["out"], option, [option, key])


# ------------------------------------------------------------- a file's key and an option's key
# README: "--param / --grid / list options override a file's keys", and the command line refuses a
# key both fixed and swept.  So a key fixed by --param that the file sweeps (or swept by --grid that
# the file fixes) is refused naming it, or runs the option's values: never the file's silently.

WHERE = ["file sweeps, --param fixes", "file fixes, --grid sweeps", "file fixes and sweeps"]


@st.composite
def file_and_option(draw, where: str):
    grid = draw(st.lists(st.sampled_from(NOISES), min_size=2, max_size=2, unique=True))
    fixed = draw(st.sampled_from(NOISES))
    definition = {"objectives": ["garland"], "clients": [CLIENTS], "horizon": [HORIZON], "seeds": SEEDS,
                  "params": {"checkpoints": CHECKPOINTS}}
    options: list = []
    if where == "file sweeps, --param fixes":
        definition["grid"] = {"noise": grid}
        options = ["--param", f"noise={fixed}"]
    elif where == "file fixes, --grid sweeps":
        definition["params"]["noise"] = fixed
        options = ["--grid", "noise=" + ",".join(grid)]
    else:
        definition["params"]["noise"] = fixed
        definition["grid"] = {"noise": grid}
    return definition, draw(st.sampled_from(["json", "toml"])), options, grid, fixed


@pytest.mark.parametrize("where", WHERE)
@settings(max_examples=2, **SETTINGS)
@given(data=st.data())
def test_a_key_fixed_and_swept_across_file_and_options_is_never_resolved_silently(where, data):
    definition, fmt, options, grid, fixed = data.draw(file_and_option(where))
    with tempfile.TemporaryDirectory() as folder:
        case = Case(definition, fmt, {"options": options})
        argv, out = case.argv(folder, ["file", "options", "out"])
        code, _, err = call(argv)
        assert "Traceback" not in err
        if code == 2 or where == "file fixes and sweeps":
            # Inside one file neither can override the other: refused, as on the command line.
            assert code == 2 and names("noise", err.strip().splitlines()[-1]), (where, definition, code, err)
            return
        assert code == 0, (where, err)
        ran = [r["noise"] for r in load_sweep(out).resolved]
        wanted = [fixed] if where == "file sweeps, --param fixes" else grid
        assert ran == wanted, (where, definition, options, ran)
