"""Command-line input that used to be merged, defaulted or reported misleadingly is refused with a
message naming the options involved (exit status 2), and byte counts print in readable units."""
import json
import os

import pytest

from fedpne_jax.cli import main
from fedpne_jax.core.executor import format_bytes


@pytest.mark.parametrize("args,message", [
    (["--grid", "c=0.1,0.2", "--grid", "c=0.3"], "--grid c=0.1,0.2 and --grid c=0.3 both set c"),
    (["--param", "c=0.1", "--grid", "c=0.2,0.3"], "--param c=0.1 and --grid c=0.2,0.3 both set c"),
    (["--param", "rho=0.5", "--param", "rho=0.7"], "--param rho=0.5 and --param rho=0.7 both set rho"),
])
def test_sweep_refuses_a_key_given_twice(tmp_path, capsys, args, message):
    assert main(["sweep", "--out", str(tmp_path / "s"), "--objectives", "garland", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


def test_sweep_without_a_file_or_objectives_is_refused(tmp_path, capsys):
    assert main(["sweep", "--out", str(tmp_path / "s")]) == 2
    assert "give a sweep file (TOML or JSON) or at least --objectives" in capsys.readouterr().err


def test_objective_seed_is_named(capsys):
    assert main(["run", "--objective-seed", "-1", "--horizon", "10"]) == 2
    assert "--objective-seed must be an integer in [0, 2^31 - 1], got -1" in capsys.readouterr().err


def test_help_params_lists_the_algorithm_fields(capsys):
    assert main(["run", "--algorithm", "gpucb", "--help-params"]) == 0
    out = capsys.readouterr().out
    for field in ("horizon", "lengthscale", "lam", "delta"):
        assert f"\n  {field} " in out


def test_byte_counts_print_in_readable_units():
    assert format_bytes(2 * 2**30) == "2 GiB"             # was "2.05e+03 MiB"
    assert format_bytes(int(1e-9 * 2**30)) == "1 byte"     # --memory-gb 1e-9: was "0.00 MiB"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 * 2**40) == "3 TiB" and format_bytes(0) == "0 bytes"


def test_output_to_standard_output_keeps_the_summary_apart(capfd):
    assert main(["run", "--horizon", "40", "--clients", "2", "--seeds", "2", "--output", "-"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["algorithm"] == "fedpne"               # stdout holds the JSON alone
    assert "Fed-PNE on garland" in err and "wrote" not in out + err


def test_short_runs_default_to_one_checkpoint_per_round(tmp_path):
    path = tmp_path / "r.json"
    assert main(["run", "--algorithm", "hoo", "--horizon", "30", "--seeds", "1", "--output", str(path)]) == 0
    assert json.loads(path.read_text())["checkpoints"] == list(range(1, 31))


def test_a_huge_bbob_dimension_is_refused_naming_dim(capsys):
    assert main(["run", "--objective", "bbob-f7", "--dim", "100000", "--horizon", "10"]) == 2
    err = capsys.readouterr().err
    assert "dim: BBOB functions are built here for dim <= 1000" in err and "74.5 GiB each" in err


@pytest.mark.parametrize("text, value", [("10000", 10000), ("10_000", 10000), ("1e4", 10000), ("2.5e3", 2500)])
def test_a_count_may_be_written_in_any_exact_spelling(text, value):
    from fedpne_jax.cli import build_parser
    args = build_parser().parse_args(["run", "--horizon", text, "--seeds", text])
    assert args.horizon == value and args.seeds == value
    # Every count of the command lines, one parser (fedpne_jax.cli.common.whole_number).
    args = build_parser().parse_args(["run", "--dim", text, "--instance", text, "--seed", text, "--k", text,
                                      "--objective-seed", text])
    assert (args.dim, args.instance, args.seed, args.k, args.objective_seed) == (value,) * 5
    assert build_parser().parse_args(["sweep", "--seed", text, "--out", "s"]).seed == value
    assert build_parser().parse_args(["report", "x", "--budgets", f"{text},{text}"]).budgets == [value, value]


@pytest.mark.parametrize("argv, prog, says", [
    (["run", "--horizon", "1.5"], "fedpne run", "argument --horizon: '1.5' is not a whole number"),
    (["run", "--seeds", "1e-3"], "fedpne run", "argument --seeds: '1e-3' is not a whole number"),
    (["sweep", "--chunk-runs", "many"], "fedpne sweep", "argument --chunk-runs: 'many' is not a whole number"),
    (["run", "--no-such-option"], "fedpne", "unrecognized arguments: --no-such-option"),
])
def test_a_bad_command_line_is_refused_in_one_line(argv, prog, says, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert err == f"{prog}: error: {says} ({prog} --help lists the options)\n"


def test_resuming_a_plugin_sweep_without_its_plugin_names_the_plugin(tmp_path, capsys):
    """The folder's definition records the plugin its algorithms came from: the refusal says which,
    instead of only listing the built-in algorithms."""
    folder = tmp_path / "sweep"
    folder.mkdir()
    plugin = str(tmp_path / "my_algorithms.py")
    (folder / "sweep.json").write_text(json.dumps({"definition": {"plugins": [plugin]}}))
    code = main(["sweep", "--objectives", "garland", "--algorithms", "random-search", "--horizon", "100",
                 "--seeds", "2", "--out", str(folder)])
    err = capsys.readouterr().err
    assert code == 2 and "got 'random-search'" in err
    assert f"the sweep in {folder} was made with --plugin {plugin}: give the same to resume it" in err


@pytest.mark.parametrize("args,message", [
    (["--nodes-per-executor", "0"], "--nodes-per-executor must be at least 1, got 0"),
    (["--nodes-per-executor", "2", "--isolation", "subprocess"], "--nodes-per-executor shares warm executors"),
    (["--nodes-per-executor", "2", "--simulation"], "--nodes-per-executor shares warm executors"),
    (["--timeout", "0"], "--timeout must be a positive number of seconds, got 0.0"),
    (["--timeout", "-5"], "--timeout must be a positive number of seconds, got -5.0"),
    # The run config's checks, named as the options (flower/spec.py), and the objective's own.
    (["--client-timeout", "nan"], "--client-timeout: expected a number of seconds > 0 (inf: no limit), got nan"),
    (["--node-timeout", "0"], "--node-timeout: expected a number of seconds > 0 (inf: no limit), got 0.0"),
    (["--clients", "0"], "num_clients (M) must be an integer in [1,"),
    (["--horizon", "0"], "horizon (T) must be an integer in [1,"),
    (["--seed", "-1"], "--seed: expected an integer in [0, 2^32), got -1"),
    (["--objective-seed", "-1"], "--objective-seed: expected an integer in [0, 2^31 - 1], got -1"),
    (["--amplitude", "nan"], "--amplitude: expected a finite number, got nan"),
    (["--heterogeneity", "bogus"], "heterogeneity must be one of ('none', 'shift', 'fourier'), got 'bogus'"),
    (["--function", "m:f", "--lo", "0,nan", "--hi", "1,1"], "--lo: expected finite numbers, got '0,nan'"),
    (["--function", "m:f", "--lo", "1,0", "--hi", "0,1"], "the box needs 'lo' < 'hi' in every dimension"),
])
def test_flower_local_refuses_before_starting_a_process(tmp_path, capsys, args, message):
    """Refused by name before any SuperLink or SuperNode starts (the working folder stays empty)."""
    work = tmp_path / "work"
    assert main(["flower", "local", "--clients", "3", "--horizon", "10", "--workdir", str(work), *args]) == 2, \
        capsys.readouterr().err
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not work.exists()


def test_an_output_that_would_overwrite_an_input_is_refused(tmp_path, capsys):
    """plot and export refuse to write over what they read: a result file, a file inside a sweep
    folder (its index), or either through a symlink; a figure goes to no '-' and no FIFO."""
    result, sweep = tmp_path / "r.json", tmp_path / "sweep"
    result.write_text("{}")
    sweep.mkdir()
    (sweep / "index.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(result)
    os.mkfifo(tmp_path / "fifo")
    cases = [(["plot", str(result), "--out", str(result)], f"--out: '{result}' is the input '{result}'"),
             (["export", str(result), "--out", str(result)], f"--out: '{result}' is the input"),
             (["export", str(result), "--out", str(tmp_path / "link.json")], "link.json' is the input"),
             (["export", str(sweep), "--out", str(sweep / "index.json")], f"is inside the input '{sweep}'"),
             (["plot", str(sweep), "--out", str(sweep / "new.png")], "is inside the input"),
             (["plot", str(result), "--out", "-"], "--out: '-' (standard output) is not an output of this command"),
             (["export", str(result), "--out", str(tmp_path / "x.csv") + "/"], "x.csv/' is a folder; give a file name"),
             (["plot", str(result), "--out", str(tmp_path / "fifo")], "fifo' is a FIFO; a figure is written to a file")]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
    assert result.read_text() == "{}" and (sweep / "index.json").read_text() == "{}"


def test_an_empty_sweep_file_path_is_refused_and_a_json_file_read_in_any_case(tmp_path, capsys):
    """An unset variable in `fedpne sweep "$F"` would otherwise run the default sweep, hours of work."""
    assert main(["sweep", "", "--out", str(tmp_path / "s")]) == 2
    assert "sweep: the sweep file's path is empty" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()
    upper = tmp_path / "def.JSON"
    upper.write_text(json.dumps({"objectives": ["nosuch"]}))
    assert main(["sweep", str(upper), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "nosuch" in err and "Invalid statement" not in err, err       # read as JSON, not TOML


def test_an_amplitude_that_makes_the_objective_inf_is_refused(capsys):
    """Up to MAX_AMPLITUDE the Fourier clients' values stay finite in float32; above it, refused."""
    import jax.numpy as jnp
    import numpy as np

    import objectives
    from objectives.heterogeneity import MAX_AMPLITUDE
    largest = objectives.make_objective("garland", num_clients=3, heterogeneity="fourier", amplitude=MAX_AMPLITUDE)
    assert np.isfinite(np.asarray(largest.local_values(jnp.linspace(0.0, 1.0, 33)[:, None]))).all()
    assert main(["run", "--heterogeneity", "fourier", "--amplitude", "1e31", "--horizon", "10", "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert "amplitude must be a finite number in [0, 1e+30], got 1e+31" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["run"], ["sweep", "--objectives", "garland", "--out", "s"], ["reproduce", "fig3", "--quick"]])
def test_memory_gb_beyond_any_machine_is_refused_when_the_command_line_is_read(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for value in ("1e300", "2e9", "nan", "-1"):
        with pytest.raises(SystemExit) as stop:
            main([*command, "--memory-gb", value])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert f"--memory-gb: must be a number of GiB per device in (0, 2^30], got '{value}'" in err, err
    assert list(tmp_path.iterdir()) == []          # no plan, folder or worker before the refusal


@pytest.mark.parametrize("options, says", [
    (["--coordinator", "notaport", "--num-processes", "1", "--process-id", "0"],
     "--distributed: --coordinator must be HOST:PORT with a port in 1..65535, got 'notaport'"),
    (["--coordinator", "localhost:abc", "--num-processes", "1", "--process-id", "0"],   # crashed JAX's C++
     "--coordinator must be HOST:PORT with a port in 1..65535, got 'localhost:abc'"),
    (["--coordinator", "localhost:70000", "--num-processes", "1", "--process-id", "0"], "a port in 1..65535"),
    (["--num-processes", "0"], "--distributed: --num-processes must be at least 1, got 0"),
    (["--coordinator", "localhost:1234", "--num-processes", "2", "--process-id", "2"],
     "--process-id must be in 0 .. --num-processes - 1, got 2"),
])
def test_bad_multi_host_options_are_refused_before_jax_starts(options, says, capsys):
    assert main(["run", "--distributed", *options, "--horizon", "10", "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err


@pytest.mark.parametrize("marker", ["sweep.json", "index.json", "REPORT.md"])
def test_reproduce_refuses_another_commands_folder(marker, tmp_path, capsys):
    (tmp_path / marker).write_text("{}")
    assert main(["reproduce", "fig3", "--quick", "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"--out: '{tmp_path}' is a" in err and f"(it holds {marker})" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [marker]     # nothing written beside it
