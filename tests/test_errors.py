"""Bad input raises ValueError naming the parameter, before anything is compiled; objectives that
return NaN/inf or unusable values are reported, never averaged into a result."""
import jax.numpy as jnp
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.cli import main
from fedpne_jax.core import executor

BAD = [
    (dict(num_clients=0), "num_clients"),
    (dict(num_clients=2.5), "num_clients"),
    (dict(horizon=0), "horizon"),
    (dict(horizon=2**31), "horizon"),
    (dict(rho=0.0), "rho"),
    (dict(rho=1.0), "rho"),
    (dict(nu=0.0), "nu"),
    (dict(c=0.0), "c "),
    (dict(c=-1.0), "c "),
    (dict(c1=0.0), "c1"),
    (dict(delta=0.0), "delta"),
    (dict(delta=1.5), "delta"),
    (dict(k=1), "k "),
    (dict(split="middle"), "split"),
    (dict(noise="laplace:0.1"), "noise"),
    (dict(noise="gaussian:-1"), "noise scale"),
    (dict(noise="bernoulli:0.2"), "noise"),
    (dict(pull="corner"), "pull"),
    (dict(sampling="fast"), "sampling"),
    (dict(sampling="aggregate", noise="bernoulli"), "sampling"),
    (dict(sampling="client", pull="uniform", noise="none"), "sampling"),
    (dict(dp_epsilon=0.0, dp_delta=0.1), "dp_epsilon"),
    (dict(dp_epsilon=1.0, dp_delta=0.0), "dp_delta"),
    (dict(dp_epsilon=1.0, dp_delta=1.0), "dp_delta"),
    (dict(dp_epsilon=1.0), "dp_delta"),
    (dict(checkpoints=0), "checkpoints"),
    (dict(capacity=1), "capacity"),
    (dict(precision="float16"), "precision"),
    (dict(num_clients=1, horizon=1), "c1*T/delta"),
    (dict(num_clients=2**21), "num_clients"),
    (dict(k=1000), "k "),
    (dict(capacity=2**30), "capacity"),
    (dict(c=1e-200), "c, nu, c1 and delta"),
    (dict(nu=1e-200), "c, nu, c1 and delta"),
    (dict(c1=1.7e308), "c, nu, c1 and delta"),
    (dict(delta=5e-324), "c, nu, c1 and delta"),
    (dict(dp_epsilon=1e-200, dp_delta=0.1), "dp_epsilon"),
    (dict(noise="gaussian:1e30"), "noise scale"),
]


@pytest.mark.parametrize("kwargs,name", BAD)
def test_bad_config_names_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name.replace("*", r"\*")):
        fp.FedPNEConfig(**kwargs)


def test_bad_objective_inputs():
    with pytest.raises(ValueError, match="objective must be one of"):
        objectives.make_objective("sphere", 3)
    with pytest.raises(ValueError, match="heterogeneity"):
        objectives.make_objective("garland", 3, heterogeneity="scale")
    with pytest.raises(ValueError, match="dim"):
        objectives.make_objective("garland", 3, dim=2)
    with pytest.raises(ValueError, match="f_star must be a finite number"):
        objectives.Objective(name="box", lo=(0.0,), hi=(1.0,), f_star=float("nan"), num_clients=1,
                             global_fn=lambda d, x: x[0], local_fn=lambda d, x, m: x[0])
    with pytest.raises(ValueError, match="lo must be < hi"):
        objectives.Objective(name="box", lo=(1.0,), hi=(0.0,), f_star=0.0, num_clients=1,
                             global_fn=lambda d, x: x[0], local_fn=lambda d, x, m: x[0])
    garland = objectives.make_objective("garland", 3)
    with pytest.raises(ValueError, match="last dimension D=1"):
        garland.value(jnp.zeros((4, 2)))


def test_run_checks_before_compiling():
    # checkpoints=13 appears in no other test: a check that ran only after compiling would trace anew.
    traces = executor.trace_count()
    with pytest.raises(ValueError, match="num_clients"):
        fp.run(fp.FedPNEConfig(num_clients=4, checkpoints=13), objectives.make_objective("garland", 3))
    cfg = fp.FedPNEConfig(num_clients=3, checkpoints=13)
    garland = objectives.make_objective("garland", 3)
    with pytest.raises(ValueError, match="seeds"):
        fp.run(cfg, garland, seeds=0)
    with pytest.raises(ValueError, match="seeds"):
        fp.run(cfg, garland, seeds=[-1])
    with pytest.raises(ValueError, match="base_seed"):
        fp.run(cfg, garland, base_seed=-2)
    with pytest.raises(ValueError, match="seeds"):
        fp.run(cfg, garland, seeds=3.0)
    with pytest.raises(ValueError, match="bernoulli"):
        fp.run(fp.FedPNEConfig(num_clients=1, noise="bernoulli", checkpoints=13), _nan_objective(1, f_star=2.0))
    with pytest.raises(ValueError, match="heterogeneity 'none'"):
        fp.run(cfg.replace(noise="bernoulli"), garland)
    with pytest.raises(ValueError, match="raise c or lower rho"):
        fp.run(cfg.replace(rho=0.99), garland)
    assert executor.trace_count() == traces


def _nan_objective(M, f_star=1.0):
    def f(data, x):
        return jnp.where(x[0] > 0.6, jnp.nan, x[0])
    return objectives.Objective(name="holey", lo=(0.0,), hi=(1.0,), f_star=f_star, num_clients=M,
                                global_fn=f, local_fn=lambda d, x, m: f(d, x))


@pytest.mark.parametrize("kw", [dict(sampling="aggregate"), dict(sampling="client"),
                                dict(noise="none", pull="uniform")])
def test_nan_from_objective_is_reported(kw):
    with pytest.raises(fp.ObjectiveError, match="objective 'holey' returned NaN or inf"):
        fp.run(fp.FedPNEConfig(num_clients=2, horizon=2000, capacity=16, **kw), _nan_objective(2), seeds=3)


def test_bernoulli_values_outside_unit_interval_are_reported():
    def f(data, x):
        return 2.0 * x[0] - 0.5           # leaves [0, 1] near both ends, f* = 1 passes the host check
    obj = objectives.Objective(name="ramp", lo=(0.0,), hi=(1.0,), f_star=1.0, num_clients=2,
                               global_fn=f, local_fn=lambda d, x, m: f(d, x))
    with pytest.raises(fp.ObjectiveError, match="objective 'ramp' returned values outside \\[0, 1\\]"):
        fp.run(fp.FedPNEConfig(num_clients=2, horizon=2000, noise="bernoulli", capacity=16), obj, seeds=2)


def test_cli_reports_bad_input(capsys):
    assert main(["run", "--clients", "3", "--rho", "1.5"]) == 2
    assert "rho must be < 1" in capsys.readouterr().err
    assert main(["run", "--objective", "sphere"]) == 2
    assert "objective must be one of" in capsys.readouterr().err
