"""A damaged or hand-edited ``fedpne run --output`` file is refused by ``fedpne plot``, ``report`` and
``export`` before anything is computed: exit status 2 and one line naming the file and the field,
never a traceback (fedpne_jax.experiments.load.check_run); the files ``fedpne run`` writes, older
ones included, are still read."""
import copy
import json
import math

import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.cli import main
from fedpne_jax.experiments import load

COMMANDS = ("plot", "report", "export")


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """The content of a real result file: a tiny T-HOO run (T = 20, 4 checkpoints, 2 seeds)."""
    result = fp.run(fp.make_config("hoo", horizon=20, checkpoints=4),
                    objectives.make_objective("garland", num_clients=1), seeds=2)
    path = tmp_path_factory.mktemp("result") / "run.json"
    result.write_json(path)
    return json.loads(path.read_text())


def _write(tmp_path, data, name="run.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def _argv(command, path, tmp_path):
    if command == "plot":
        return ["plot", path, "--out", str(tmp_path / "out.png")]
    if command == "report":
        return ["report", path, "--out", str(tmp_path / "report"), "--no-plots"]
    return ["export", path, "--out", str(tmp_path / "runs.csv")]


def _set(*keys_and_value):
    *keys, value = keys_and_value

    def damage(data):
        node = data
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value(node[keys[-1]]) if callable(value) else value
    return damage


def _delete(*keys):
    def damage(data):
        node = data
        for key in keys[:-1]:
            node = node[key]
        del node[keys[-1]]
    return damage


def _ragged(rows):
    return [rows[0], rows[1][:-1]]


def _string_in_row(rows):
    return [[rows[0][0], "x", *rows[0][2:]], rows[1]]


# (what is damaged, the damage, the field the message names)
DAMAGE = [
    ("checkpoints null", _set("checkpoints", None), "checkpoints"),
    ("checkpoints a string", _set("checkpoints", "5,10"), "checkpoints"),
    ("checkpoints empty", _set("checkpoints", []), "checkpoints"),
    ("checkpoints not increasing", _set("checkpoints", lambda c: c[::-1]), "checkpoints"),
    ("checkpoint zero", _set("checkpoints", lambda c: [0, *c[1:]]), "checkpoints"),
    ("checkpoint fractional", _set("checkpoints", lambda c: [c[0] + 0.5, *c[1:]]), "checkpoints"),
    ("checkpoint past the horizon", _set("checkpoints", lambda c: [*c[:-1], c[-1] + 1]), "checkpoints"),
    ("checkpoints one short", _set("checkpoints", lambda c: c[:-1]), "per_seed.curves[0]"),
    ("config a string", _set("config", "x"), "config"),
    ("config missing", _delete("config"), "config"),
    ("config.horizon a string", _set("config", "horizon", "20"), "config.horizon"),
    ("config.num_clients zero", _set("config", "num_clients", 0), "config.num_clients"),
    ("config.dim negative", _set("config", "dim", -1), "config.dim"),
    ("config.objective a number", _set("config", "objective", 3), "config.objective"),
    ("algorithm a number", _set("algorithm", 5), "algorithm"),
    ("algorithm empty", _set("algorithm", ""), "algorithm"),
    ("algorithm missing", _delete("algorithm"), "algorithm"),
    ("per_seed null", _set("per_seed", None), "per_seed"),
    ("curves missing", _delete("per_seed", "curves"), "per_seed.curves"),
    ("curves empty", _set("per_seed", "curves", []), "per_seed.curves"),
    ("curves a number", _set("per_seed", "curves", 3.0), "per_seed.curves"),
    ("curves one-dimensional", _set("per_seed", "curves", lambda r: r[0]), "per_seed.curves[0]"),
    ("curves ragged", _set("per_seed", "curves", _ragged), "per_seed.curves[1]"),
    ("curve value a string", _set("per_seed", "curves", _string_in_row), "per_seed.curves[0][1]"),
    ("curve value null", _set("per_seed", "curves", lambda r: [[None] * len(r[0]), r[1]]), "per_seed.curves[0][0]"),
    ("curve value true", _set("per_seed", "curves", lambda r: [r[0], [True] * len(r[1])]), "per_seed.curves[1][0]"),
    ("final regret a string", _set("per_seed", "final_regret", lambda f: ["x", *f[1:]]), "per_seed.final_regret[0]"),
    ("final regret one short", _set("per_seed", "final_regret", lambda f: f[:-1]), "per_seed.final_regret"),
    ("seeds one short", _set("seeds", lambda s: s[:-1]), "seeds"),
    ("seeds strings", _set("seeds", lambda s: [str(v) for v in s]), "seeds[0]"),
    ("base_seed a string", _set("base_seed", "0"), "base_seed"),
]

# Fields only report and export read: plot draws the file as before.
DAMAGE_TO_MEASURES = [
    ("best_curve one row", _set("per_seed", "best_curve", lambda r: r[:1]), "per_seed.best_curve"),
    ("best_curve value a string", _set("per_seed", "best_curve", _string_in_row), "per_seed.best_curve[0][1]"),
    ("simple_curve ragged", _set("per_seed", "simple_curve", _ragged), "per_seed.simple_curve[1]"),
    ("hits one target short", _set("per_seed", "hits", lambda r: [r[0][:-1], r[1]]), "per_seed.hits[0]"),
    ("hits fractional", _set("per_seed", "hits", lambda r: [[0.5] + r[0][1:], r[1]]), "per_seed.hits[0][0]"),
    ("target_scale null", _set("per_seed", "target_scale", None), "per_seed.target_scale"),
    ("horizon missing", _delete("config", "horizon"), "config.horizon"),
]


def _refused(command, path, field, tmp_path, capsys):
    capsys.readouterr()
    assert main(_argv(command, path, tmp_path)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("fedpne: error: ") and err.count("\n") == 1, err
    assert repr(path) in err and field in err, err
    assert not any(p.name in ("out.png", "report", "runs.csv") for p in tmp_path.iterdir())


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("what, damage, field", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_field_is_refused_naming_the_file_and_field(valid, command, what, damage, field, tmp_path,
                                                              capsys):
    data = copy.deepcopy(valid)
    damage(data)
    _refused(command, _write(tmp_path, data), field, tmp_path, capsys)


@pytest.mark.parametrize("command", ("report", "export"))
@pytest.mark.parametrize("what, damage, field", DAMAGE_TO_MEASURES, ids=[d[0] for d in DAMAGE_TO_MEASURES])
def test_damaged_measures_are_refused_where_they_are_read(valid, command, what, damage, field, tmp_path, capsys):
    data = copy.deepcopy(valid)
    damage(data)
    _refused(command, _write(tmp_path, data), field, tmp_path, capsys)


@pytest.mark.parametrize("what, damage, field", DAMAGE_TO_MEASURES[:3], ids=[d[0] for d in DAMAGE_TO_MEASURES[:3]])
def test_plot_does_not_read_the_measures(valid, what, damage, field, tmp_path, capsys):
    data = copy.deepcopy(valid)
    damage(data)
    assert main(_argv("plot", _write(tmp_path, data), tmp_path)) == 0


@pytest.mark.parametrize("command", COMMANDS)
def test_the_undamaged_file_is_read_by_every_command(valid, command, tmp_path, capsys):
    path = _write(tmp_path, valid)
    assert main(_argv(command, path, tmp_path)) == 0, capsys.readouterr().err
    if command == "export":
        rows = (tmp_path / "runs.csv").read_text().splitlines()
        assert len(rows) == 1 + len(valid["seeds"]) * len(valid["checkpoints"])
    assert load.read_run(path, measures=True) == valid


@pytest.mark.parametrize("command", COMMANDS)
def test_a_partial_file_is_read_with_a_note_that_says_so(valid, command, tmp_path, capsys):
    """The seeds a run finished before Ctrl-C (``partial``) are read, and the command says they are
    only those; a whole run's file gets no note."""
    path = _write(tmp_path, dict(valid, partial=True))
    assert main(_argv(command, path, tmp_path)) == 0
    assert f"fedpne: note: {path!r} holds the 2 seed(s) that finished before its run was interrupted" \
        in capsys.readouterr().err
    assert main(_argv(command, _write(tmp_path, dict(valid, partial=False), "whole.json"), tmp_path)) == 0
    assert "note" not in capsys.readouterr().err


@pytest.fixture(scope="module")
def cli_file(tmp_path_factory):
    """A file written by ``fedpne run --output`` itself."""
    out = tmp_path_factory.mktemp("cli") / "r.json"
    assert main(["run", "--algorithm", "hoo", "--objective", "garland", "--horizon", "20", "--checkpoints", "4",
                 "--seeds", "2", "--output", str(out)]) == 0
    return str(out)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_written_by_fedpne_run_is_read(cli_file, command, tmp_path, capsys):
    assert main(_argv(command, cli_file, tmp_path)) == 0, capsys.readouterr().err


def test_older_and_legitimate_variants_are_still_read(valid, tmp_path, capsys):
    """No simple regret, seeds or base seed (older files), integral floats, a partial run's one seed,
    NaN regret (a box without f*), Fed-PNE's pull='uniform' (no best-so-far: NaN, hits -1)."""
    variants = []
    old = copy.deepcopy(valid)
    for key in ("seeds", "base_seed", "style", "versions", "regret_mean", "regret_std", "timing", "partial"):
        old.pop(key, None)
    del old["per_seed"]["simple_curve"], old["per_seed"]["final_regret"]
    variants.append(old)
    floats = copy.deepcopy(valid)
    floats["checkpoints"] = [float(c) for c in floats["checkpoints"]]
    floats["config"]["horizon"] = 20.0
    variants.append(floats)
    one = copy.deepcopy(valid)
    one["seeds"], one["partial"] = one["seeds"][:1], True
    for key in ("curves", "final_regret", "best_curve", "simple_curve", "hits", "target_scale"):
        one["per_seed"][key] = one["per_seed"][key][:1]
    variants.append(one)
    uniform = copy.deepcopy(valid)
    uniform["per_seed"]["best_curve"] = [[math.nan] * 4] * 2
    uniform["per_seed"]["hits"] = [[-1] * 51] * 2
    variants.append(uniform)
    for i, data in enumerate(variants):
        path = _write(tmp_path, data, f"v{i}.json")
        for command in COMMANDS:
            out = tmp_path / f"{command}{i}"
            out.mkdir()
            assert main(_argv(command, path, out)) == 0, (i, command, capsys.readouterr().err)
    nan = copy.deepcopy(valid)
    nan["config"]["f_star"] = None
    for key in ("curves", "best_curve", "simple_curve"):
        nan["per_seed"][key] = [[math.nan] * 4] * 2
    nan["per_seed"]["final_regret"] = [math.nan] * 2
    path = _write(tmp_path, nan, "nan.json")
    assert load.read_run(path, measures=True)["config"]["f_star"] is None
    for command in ("report", "export"):           # (a figure refuses NaN: fedpne_jax.plotting.series.stats)
        out = tmp_path / f"nan-{command}"
        out.mkdir()
        assert main(_argv(command, path, out)) == 0, capsys.readouterr().err
    # A figure refuses NaN (fedpne_jax.plotting.series.stats), naming the file that holds it.
    assert main(_argv("plot", path, tmp_path)) == 2
    err = capsys.readouterr().err
    assert f"{path!r}: a figure's data hold NaN or inf" in err and "Traceback" not in err, err


def test_a_plot_only_file_is_still_plotted(tmp_path, capsys):
    """What tests/test_plots.py writes: algorithm, config, checkpoints and the curves alone."""
    data = {"algorithm": "fedpne", "config": {"objective": "garland", "num_clients": 10, "horizon": 30},
            "checkpoints": [10, 20, 30], "per_seed": {"curves": [[1.0, 2.0, 3.0], [1.5, 2.5, 3.5]]}}
    path = _write(tmp_path, data)
    assert main(_argv("plot", path, tmp_path)) == 0
    capsys.readouterr()
    assert main(_argv("report", path, tmp_path)) == 2
    assert "has no best_curve, hits, target_scale: it was written before" in capsys.readouterr().err


@pytest.mark.parametrize("content, message", [
    ("[1, 2, 3]", "is not a result of 'fedpne run --output' (it holds an array, not a JSON object)"),
    ('{"algorithm": "fedpne", "checkpoints": [1], "per_seed": {}}',
     "is not a result of 'fedpne run --output' (no config, per_seed.curves)"),
    ("[" * 100000, "is not a JSON file"),
])
def test_what_is_not_a_result_says_so(content, message, tmp_path, capsys):
    path = tmp_path / "x.json"
    path.write_text(content)
    for command in COMMANDS:
        assert main(_argv(command, str(path), tmp_path)) == 2
        err = capsys.readouterr().err
        assert repr(str(path)) in err and message in err and "Traceback" not in err, err
