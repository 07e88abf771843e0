"""Properties of the Python API, on drawn calls: ``fp.make_config``, ``objectives.make_objective``,
``objectives.from_python``, ``fp.run`` and ``fp.load_sweep(...).find``.  Every invalid call (a value
of the wrong type, out of range, not finite, an unknown name, sides of a box that disagree) raises
TypeError or ValueError whose message names the argument, and ``fp.run`` refuses before anything is
traced; every valid call returns what it was asked for.

Runs are tiny and shape-stable: Fed-PNE (M = 2) and HCT on Garland, T = 40, four checkpoints, two
seeds, so each compiles once; the sweep that ``find`` reads (the same two, one configuration each)
is built once per module and runs those same two programs.
"""
import dataclasses
import functools
import math
import os
import re
import string
import subprocess
import sys

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import fedpne_jax as fp
import objectives
from fedpne_jax.algorithms.trees import sequool, stroquool
from fedpne_jax.core import executor, registry
from fedpne_jax.core.config import MAX_CLIENTS, MAX_HORIZON

# No example database and no explain phase: Hypothesis writes neither into the working tree.
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None,
                phases=[p for p in Phase if p != Phase.explain])

T, C, S = 40, 4, 2
SEED_MAX = 2**31 - 1
# Read once: every look-up in fp.ALGORITHMS, a live view, lists the installed entry points again.
ALGORITHMS = tuple(fp.ALGORITHMS)


def names(name: str, text: str) -> bool:
    """``name`` appears in ``text`` as a whole word (so 'lo' is not found in 'float', nor 'fn' in
    'local_fn')."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text) is not None


def refused(call, *wanted):
    """The TypeError or ValueError ``call()`` raises, whose message names one of ``wanted``; any other
    exception propagates, failing the test."""
    try:
        value = call()
    except (TypeError, ValueError) as err:
        assert any(names(w, str(err)) for w in wanted), (wanted, type(err).__name__, str(err))
        return err
    raise AssertionError(f"accepted, returning {type(value).__name__}: expected an error naming {wanted}")


class Opaque:
    """An object that is no number, string, sequence or function."""

    def __repr__(self):
        return "Opaque()"


# Nothing any parameter of any algorithm could mean.
NONSENSE = st.sampled_from([Opaque(), {}, 1j, b"x", "zz-not-a-choice", math.nan, math.inf, -math.inf])
NOT_INT = st.one_of(st.floats(allow_nan=True), st.text(max_size=4), st.booleans(), st.none(), st.just([1]))
# (None is no number either, but means the default where a parameter is optional.)
NOT_REAL = st.one_of(st.text(max_size=4), st.booleans(), st.just([0.5]), st.just(1j),
                     st.sampled_from([math.nan, math.inf, -math.inf]))

# ------------------------------------------------------------------------------ make_config

VALID_NOISE = st.one_of(st.sampled_from(["none", "bernoulli", "gaussian", "uniform"]),
                        st.builds(lambda kind, scale: f"{kind}:{scale!r}", st.sampled_from(["gaussian", "uniform",
                                                                                            "Gaussian"]),
                                  st.floats(0.0, 100.0)))


# T >= 8: GPO and PCT at their default rhomax need T >= 2N (N = 4 at T = 8); StroquOOL T >= 68;
# SequOOL and StroquOOL build their schedules on the host, up to 10^7 rounds.  (Their refusals
# outside these ranges are tests/test_gpo.py's, test_sequool.py's and test_stroquool.py's.)
HORIZONS = {"sequool": (8, sequool.MAX_HORIZON), "stroquool": (stroquool.min_horizon(), stroquool.MAX_HORIZON)}


@settings(max_examples=40, **SETTINGS)
@given(name=st.sampled_from(list(ALGORITHMS)), data=st.data())
def test_make_config_builds_every_algorithm_from_valid_shared_values(name, data):
    horizon = data.draw(st.integers(*HORIZONS.get(name, (8, MAX_HORIZON))))
    checkpoints = data.draw(st.integers(1, min(horizon, 500)))
    noise = data.draw(VALID_NOISE)
    try:
        config = fp.make_config(name, horizon=horizon, checkpoints=checkpoints, noise=noise)
    except ValueError as err:
        # HCT's family keeps a node table of at most hct.MAX_ROWS rows, which only horizons of
        # hundreds of millions of rounds outgrow (at T = 1.9e9, VPCT's instance of rho = 0.8975).
        assert "node table would need" in str(err) and "horizon" in str(err) and horizon > 10**8, err
        return
    assert type(config) is registry.config_type(name)
    assert (config.horizon, config.checkpoints, config.noise) == (horizon, checkpoints, noise)
    rounds = np.asarray(config.checkpoint_rounds)
    assert rounds.size == checkpoints and rounds[-1] == horizon and np.all(np.diff(rounds) > 0)


@st.composite
def fedpne_values(draw):
    values = dict(num_clients=draw(st.integers(1, MAX_CLIENTS)), horizon=draw(st.integers(2, 10**6)),
                  k=draw(st.integers(2, 256)), rho=draw(st.floats(0.01, 0.99)), nu=draw(st.floats(0.01, 10.0)),
                  c=draw(st.one_of(st.none(), st.floats(0.01, 10.0))), c1=draw(st.floats(1.0, 100.0)),
                  delta=draw(st.one_of(st.none(), st.floats(0.01, 1.0))),
                  split=draw(st.sampled_from(["random", "longest"])), pull=draw(st.sampled_from(["centre", "uniform"])),
                  precision=draw(st.sampled_from(["float32", "float64"])), checkpoints=1)
    if draw(st.booleans()):
        values.update(dp_epsilon=draw(st.floats(0.1, 10.0)), dp_delta=draw(st.floats(1e-6, 0.5)))
    values["capacity"] = draw(st.one_of(st.none(), st.integers(values["k"], 2**22)))
    # NumPy scalars are accepted wherever Python numbers are.
    for key in ("num_clients", "k"):
        if draw(st.booleans()):
            values[key] = np.int64(values[key])
    return values


@st.composite
def hct_values(draw):
    return dict(horizon=draw(st.integers(1, 10**5)), rho=draw(st.floats(0.1, 0.9)), nu=draw(st.floats(0.1, 10.0)),
                c=draw(st.floats(0.05, 1.0)), delta=draw(st.floats(0.001, 1.0)),
                expand=draw(st.sampled_from(["leaf", "pyxab"])), checkpoints=1)


@settings(max_examples=40, **SETTINGS)
@given(st.one_of(fedpne_values().map(lambda v: ("fedpne", v)), hct_values().map(lambda v: ("hct", v))))
def test_make_config_keeps_every_valid_value_of_fedpne_and_hct(drawn):
    name, values = drawn
    config = fp.make_config(name, **values)
    for key, value in values.items():
        assert getattr(config, key) == value, key
    resolved = config.resolved()
    if name == "fedpne":
        assert config.dp == ("dp_epsilon" in values)
        assert resolved["delta"] == (values["delta"] if values["delta"] is not None else 1 / values["num_clients"])
        if values["c"] is not None:
            assert resolved["c"] == values["c"]


@settings(max_examples=25, **SETTINGS)
@given(st.one_of(st.text(max_size=12).filter(lambda n: n not in ALGORITHMS), st.integers(), st.none(),
                 st.lists(st.sampled_from(list(ALGORITHMS)), max_size=2), st.just(b"fedpne")))
def test_make_config_refuses_an_unknown_algorithm_naming_it(name):
    err = refused(lambda: fp.make_config(name, horizon=T), "algorithm")
    assert repr(name) in str(err)


@settings(max_examples=25, **SETTINGS)
@given(name=st.sampled_from(list(ALGORITHMS)), key=st.text(min_size=1, max_size=12))
def test_make_config_refuses_an_unknown_parameter_naming_it(name, key):
    fields = {f.name for f in dataclasses.fields(registry.config_type(name))}
    if key in fields:
        key += "_x"
    err = refused(lambda: fp.make_config(name, horizon=T, checkpoints=C, **{key: 1}), repr(key))
    assert all(names(f, str(err)) for f in fields), "the message lists the parameters there are"


@st.composite
def nonsense_field(draw):
    name = draw(st.sampled_from(list(ALGORITHMS)))
    field = draw(st.sampled_from([f.name for f in dataclasses.fields(registry.config_type(name))]))
    return name, field, draw(NONSENSE)


@settings(max_examples=60, **SETTINGS)
@given(nonsense_field())
def test_make_config_refuses_a_nonsense_value_of_any_parameter_naming_it(drawn):
    name, field, value = drawn
    refused(lambda: fp.make_config(name, **dict({"horizon": T, "checkpoints": C}, **{field: value})), field)


POSITIVE = st.one_of(st.floats(max_value=0.0), NOT_REAL, st.none())           # a parameter that must be > 0
OPTIONAL_POSITIVE = st.one_of(st.floats(max_value=0.0), NOT_REAL)
UNIT_OPEN = st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0), NOT_REAL, st.none())
UNIT_HALF_OPEN = st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0, exclude_min=True), NOT_REAL)
UNKNOWN_WORD = st.text(alphabet=string.ascii_letters, max_size=8)
OUT_OF_RANGE = {
    "fedpne": {
        "num_clients": st.one_of(st.integers(max_value=0), st.integers(min_value=MAX_CLIENTS + 1), NOT_INT),
        "horizon": st.one_of(st.integers(max_value=0), st.integers(min_value=MAX_HORIZON + 1), NOT_INT),
        "k": st.one_of(st.integers(max_value=1), st.integers(min_value=257), NOT_INT),
        "rho": UNIT_OPEN, "nu": POSITIVE, "c": OPTIONAL_POSITIVE, "c1": POSITIVE, "delta": UNIT_HALF_OPEN,
        "checkpoints": st.one_of(st.integers(max_value=0), st.integers(min_value=T + 1), NOT_INT),
        "capacity": st.one_of(st.integers(max_value=1), st.integers(min_value=2**22 + 1), NOT_INT.filter(
            lambda v: v is not None)),
        "split": UNKNOWN_WORD.filter(lambda w: w not in ("random", "longest")),
        "pull": UNKNOWN_WORD.filter(lambda w: w not in ("centre", "uniform")),
        "sampling": UNKNOWN_WORD.filter(lambda w: w not in ("auto", "aggregate", "client", "explicit")),
        "precision": UNKNOWN_WORD.filter(lambda w: w not in ("float32", "float64")),
        "noise": UNKNOWN_WORD.filter(lambda w: w.lower() not in ("gaussian", "bernoulli", "uniform", "none")),
    },
    "hct": {
        "nu": POSITIVE, "rho": UNIT_OPEN, "c": POSITIVE, "delta": st.one_of(UNIT_HALF_OPEN, st.none()),
        "expand": UNKNOWN_WORD.filter(lambda w: w not in ("leaf", "pyxab")),
        "horizon": st.one_of(st.integers(max_value=0), st.integers(min_value=MAX_HORIZON + 1), NOT_INT),
        "checkpoints": st.one_of(st.integers(max_value=0), st.integers(min_value=T + 1), NOT_INT),
    },
}


@st.composite
def out_of_range(draw):
    name = draw(st.sampled_from(sorted(OUT_OF_RANGE)))
    field = draw(st.sampled_from(sorted(OUT_OF_RANGE[name])))
    base = {"horizon": T, "checkpoints": C} if field != "horizon" else {"checkpoints": 1}
    return name, field, dict(base, **{field: draw(OUT_OF_RANGE[name][field])})


@settings(max_examples=60, **SETTINGS)
@given(out_of_range())
def test_make_config_refuses_a_value_out_of_range_or_of_the_wrong_type_naming_it(drawn):
    name, field, values = drawn
    refused(lambda: fp.make_config(name, **values), field)


@settings(max_examples=15, **SETTINGS)
@given(epsilon=st.one_of(st.none(), st.floats(0.1, 10.0)), delta=st.one_of(st.none(), st.floats(1e-6, 0.5)))
def test_make_config_refuses_half_of_the_dp_pair_naming_the_missing_half(epsilon, delta):
    values = {k: v for k, v in (("dp_epsilon", epsilon), ("dp_delta", delta)) if v is not None}
    if len(values) != 1:
        assert fp.make_config("fedpne", horizon=T, checkpoints=C, **values).dp == bool(values)
        return
    missing = "dp_delta" if "dp_epsilon" in values else "dp_epsilon"
    refused(lambda: fp.make_config("fedpne", horizon=T, checkpoints=C, **values), missing)


# --------------------------------------------------------------------------- make_objective

SYNTHETIC = sorted(objectives.REGISTRY)


@st.composite
def objective_call(draw):
    # A few shapes: each new one compiles the construction's check of the clients' mean.
    name = draw(st.sampled_from(["garland", "doublesine", "ackley"]))
    spec = objectives.spec(name)
    dim = draw(st.sampled_from([None, spec.default_dim])) if spec.fixed_dim else \
        draw(st.one_of(st.none(), st.integers(1, 2)))
    heterogeneity = draw(st.sampled_from([None, "none", "shift", "fourier"]))
    kwargs = dict(num_clients=draw(st.integers(1, 2)), heterogeneity=heterogeneity,
                  seed=draw(st.one_of(st.integers(0, SEED_MAX), st.integers(0, SEED_MAX).map(np.int32))), dim=dim)
    if heterogeneity == "fourier" and draw(st.booleans()):
        kwargs["amplitude"] = draw(st.floats(0.0, 1.0))
    return name, kwargs


@settings(max_examples=8, **SETTINGS)
@given(objective_call())
def test_make_objective_builds_every_valid_call(drawn):
    name, kwargs = drawn
    obj = objectives.make_objective(name, **kwargs)
    spec = objectives.spec(name)
    assert isinstance(obj, objectives.Objective) and obj.name == name
    assert obj.num_clients == kwargs["num_clients"] and obj.dim == (kwargs["dim"] or spec.default_dim)
    assert obj.lo == (float(spec.lo),) * obj.dim and obj.hi == (float(spec.hi),) * obj.dim
    # The seed keys the problem instance: the same call builds the same one, another seed another
    # (the clients' shifts or perturbations; one client has none, 'none' none at all).
    again = objectives.make_objective(name, **kwargs)
    assert again._static_fields() == obj._static_fields()
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(obj.data), _leaves(again.data)))
    heterogeneity = kwargs["heterogeneity"] or spec.default_heterogeneity
    if heterogeneity == "none":
        assert _leaves(obj.data) == []
    elif obj.num_clients > 1 and kwargs.get("amplitude") != 0.0:
        other = objectives.make_objective(name, **dict(kwargs, seed=(int(kwargs["seed"]) + 1) % (SEED_MAX + 1)))
        assert not all(np.array_equal(a, b) for a, b in zip(_leaves(obj.data), _leaves(other.data)))


def _leaves(tree):
    return [np.asarray(leaf) for leaf in jax.tree.leaves(tree)]


BAD_OBJECTIVE_ARGS = {
    "num_clients": st.one_of(st.integers(max_value=0), NOT_INT),
    "seed": st.one_of(st.integers(max_value=-1), st.integers(min_value=SEED_MAX + 1), NOT_INT.filter(
        lambda v: v is not None), st.none()),
    "dim": st.one_of(st.integers(max_value=0), NOT_INT.filter(lambda v: v is not None)),
    "heterogeneity": st.one_of(st.text(max_size=10).filter(lambda h: h not in ("none", "shift", "fourier")),
                               st.integers(), st.just(["shift"])),
    "instance": st.integers(-5, 5),
}


@st.composite
def bad_objective_call(draw):
    name = draw(st.sampled_from(SYNTHETIC))
    kind = draw(st.sampled_from(sorted(BAD_OBJECTIVE_ARGS) + ["fixed dim", "amplitude"]))
    if kind == "fixed dim":
        name = draw(st.sampled_from([n for n in SYNTHETIC if objectives.spec(n).fixed_dim]))
        dim = draw(st.integers(1, 6).filter(lambda d: d != objectives.spec(name).default_dim))
        return name, {"dim": dim}, "dim"
    if kind == "amplitude":
        heterogeneity = draw(st.sampled_from([None, "none", "shift", "fourier"]))
        amplitude = draw(st.one_of(st.floats(max_value=-1e-9), NOT_REAL)) if heterogeneity == "fourier" \
            else draw(st.floats(0.0, 1.0))
        return name, {"num_clients": 2, "heterogeneity": heterogeneity, "amplitude": amplitude}, "amplitude"
    return name, {kind: draw(BAD_OBJECTIVE_ARGS[kind])}, kind


@settings(max_examples=50, **SETTINGS)
@given(bad_objective_call())
def test_make_objective_refuses_a_bad_argument_naming_it(drawn):
    name, kwargs, argument = drawn
    refused(lambda: objectives.make_objective(name, **kwargs), argument)


@settings(max_examples=20, **SETTINGS)
@given(st.text(max_size=12).filter(lambda n: n not in objectives.OBJECTIVES))
def test_make_objective_refuses_an_unknown_name_naming_it(name):
    err = refused(lambda: objectives.make_objective(name), "objective")
    assert repr(name) in str(err)


@settings(max_examples=20, **SETTINGS)
@given(st.one_of(st.integers(), st.none(), st.just(b"garland"), st.lists(st.sampled_from(SYNTHETIC), max_size=2),
                 st.dictionaries(st.sampled_from(SYNTHETIC), st.integers(), max_size=1), st.just({"garland"})))
def test_make_objective_refuses_a_name_that_is_no_string_naming_objective(name):
    refused(lambda: objectives.make_objective(name), "objective", "name")


def test_make_objective_refuses_more_clients_than_any_machine_holds_without_crashing(tmp_path):
    # In a process of its own: the allocation this asks for can abort the interpreter.
    code = ("import objectives\n"
            "try:\n"
            "    objectives.make_objective('garland', num_clients=2**40)\n"
            "except (TypeError, ValueError) as err:\n"
            "    print('refused:', err)\n"
            "else:\n"
            "    print('accepted')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    detail = (proc.returncode, proc.stdout[-500:], proc.stderr[-1500:])
    assert proc.returncode == 0, detail
    assert proc.stdout.startswith("refused:") and names("num_clients", proc.stdout), detail


# ------------------------------------------------------------------------------ from_python

def _fn(centre):
    centre = np.asarray(centre, np.float64)
    return lambda X: -np.sum((X - centre) ** 2, axis=1)


@st.composite
def box(draw):
    """(lo, hi as given, the box they mean as tuples of floats)."""
    D = draw(st.integers(1, 4))
    number = st.one_of(st.floats(-1e3, 1e3), st.integers(-1000, 1000))
    widths = draw(st.lists(st.floats(1e-3, 1e3), min_size=D, max_size=D))
    side = draw(st.sampled_from(["sequences", "lo a number", "hi a number"]))
    if side == "lo a number":
        lo = draw(number)
        lo_full = [float(lo)] * D
        hi_full = [float(lo) + w for w in widths]
        hi = draw(_sequence(hi_full))
    elif side == "hi a number":
        hi = draw(number)
        hi_full = [float(hi)] * D
        lo_full = [float(hi) - w for w in widths]
        lo = draw(_sequence(lo_full))
    else:
        lo_full = [float(v) for v in draw(st.lists(number, min_size=D, max_size=D))]
        hi_full = [a + w for a, w in zip(lo_full, widths)]
        lo, hi = draw(_sequence(lo_full)), draw(_sequence(hi_full))
    return lo, hi, tuple(lo_full), tuple(hi_full)


def _sequence(values):
    return st.sampled_from([list(values), tuple(values), np.asarray(values, np.float64)])


@settings(max_examples=25, **SETTINGS)
@given(box(), st.integers(1, 3), st.booleans())
def test_from_python_builds_every_valid_box(drawn, clients, with_local):
    lo, hi, lo_full, hi_full = drawn
    assert all(a < b for a, b in zip(lo_full, hi_full))        # widths >= 1e-3 survive the rounding
    centre = [(a + b) / 2 for a, b in zip(lo_full, hi_full)]
    fn = _fn(centre)
    offsets = np.arange(clients) - (clients - 1) / 2           # zero-sum: fn stays the clients' mean
    local_fn = (lambda X: fn(X)[:, None] + offsets) if with_local else None
    obj = objectives.from_python(fn, lo, hi, 0.0, num_clients=clients, local_fn=local_fn)
    assert (obj.lo, obj.hi, obj.dim, obj.num_clients, obj.f_star) == (lo_full, hi_full, len(lo_full), clients, 0.0)
    assert float(obj.value(np.asarray(centre))) == pytest.approx(0.0, abs=1e-6)


def _replace(values, index, new):
    out = list(values)
    out[index] = new
    return out


@settings(max_examples=20, **SETTINGS)
@given(st.integers(1, 4), st.integers(1, 4), st.data())
def test_from_python_refuses_sides_of_different_lengths_naming_both(n_lo, n_hi, data):
    if n_lo == n_hi:
        n_hi += 1
    lo = data.draw(_sequence([0.0] * n_lo))
    hi = data.draw(_sequence([1.0] * n_hi))
    err = refused(lambda: objectives.from_python(_fn([0.5]), lo, hi, 0.0), "lo")
    assert names("hi", str(err))


@settings(max_examples=20, **SETTINGS)
@given(box(), st.data())
def test_from_python_refuses_a_side_not_below_the_other_naming_them(drawn, data):
    _, _, lo_full, hi_full = drawn
    d = data.draw(st.integers(0, len(lo_full) - 1))
    hi = _replace(hi_full, d, lo_full[d] - data.draw(st.floats(0.0, 10.0)))
    refused(lambda: objectives.from_python(_fn(lo_full), list(lo_full), hi, 0.0), "lo", "hi")


@settings(max_examples=20, **SETTINGS)
@given(box(), st.sampled_from(["lo", "hi"]), st.sampled_from([math.nan, math.inf, -math.inf]), st.data())
def test_from_python_refuses_a_bound_that_is_not_finite_naming_its_side(drawn, side, value, data):
    _, _, lo_full, hi_full = drawn
    d = data.draw(st.integers(0, len(lo_full) - 1))
    sides = {"lo": list(lo_full), "hi": list(hi_full)}
    sides[side] = _replace(sides[side], d, value)
    refused(lambda: objectives.from_python(_fn(lo_full), sides["lo"], sides["hi"], 0.0), side)


NOT_A_NUMBER = st.sampled_from(["a", "", "0.5", "nan", None, Opaque(), 1j, {}, [], True, False, b"1"])


@settings(max_examples=30, **SETTINGS)
@given(box(), st.sampled_from(["lo", "hi"]), NOT_A_NUMBER, st.booleans(), st.data())
def test_from_python_refuses_a_bound_that_is_not_a_number_naming_its_side(drawn, side, value, whole, data):
    _, _, lo_full, hi_full = drawn
    sides = {"lo": list(lo_full), "hi": list(hi_full)}
    if whole:
        sides[side] = value
    else:
        sides[side] = _replace(sides[side], data.draw(st.integers(0, len(lo_full) - 1)), value)
    refused(lambda: objectives.from_python(_fn(lo_full), sides["lo"], sides["hi"], 0.0), side)


BAD_PYTHON_ARGS = {
    "f_star": st.one_of(NOT_REAL, st.none()),
    "num_clients": st.one_of(st.integers(max_value=0), NOT_INT),
    "fn": st.sampled_from([None, 3, "fn", [1], Opaque()]),
    "local_fn": st.sampled_from([3, "fn", [1], Opaque()]),
}


@settings(max_examples=30, **SETTINGS)
@given(st.sampled_from(sorted(BAD_PYTHON_ARGS)), st.data())
def test_from_python_refuses_a_bad_argument_naming_it(argument, data):
    kwargs = dict(fn=_fn([0.5]), lo=0.0, hi=1.0, f_star=0.0)
    kwargs[argument] = data.draw(BAD_PYTHON_ARGS[argument])
    refused(lambda: objectives.from_python(**kwargs), argument)


@settings(max_examples=15, **SETTINGS)
@given(st.sampled_from([np.int32, "int64", bool, "bogus", 3, Opaque(), "complex64"]))
def test_from_python_refuses_a_dtype_that_is_not_floating_naming_it(dtype):
    refused(lambda: objectives.from_python(_fn([0.5]), 0.0, 1.0, 0.0, dtype=dtype), "dtype")


# ----------------------------------------------------------------------------------- fp.run

CONFIGS = {"fedpne": fp.make_config("fedpne", num_clients=2, horizon=T, checkpoints=C),
           "hct": fp.make_config("hct", horizon=T, checkpoints=C)}


@functools.cache
def garland(which: str):
    """Garland as a name builds it for the configuration: M = 2 for Fed-PNE, one client for HCT."""
    return objectives.make_objective("garland", num_clients=2 if which == "fedpne" else 1)


VALID_SEEDS = st.one_of(
    st.sampled_from([S, np.int64(S)]),
    st.lists(st.integers(0, SEED_MAX), min_size=S, max_size=S, unique=True).flatmap(
        lambda ids: st.sampled_from([ids, tuple(ids), np.asarray(ids, np.int64), np.asarray(ids, np.int32)])),
    st.integers(0, SEED_MAX - S).map(lambda a: range(a, a + S)))


@settings(max_examples=10, **SETTINGS)
@given(which=st.sampled_from(sorted(CONFIGS)), by_name=st.booleans(), seeds=VALID_SEEDS,
       base_seed=st.one_of(st.integers(0, SEED_MAX), st.integers(0, SEED_MAX).map(np.int64)))
def test_run_returns_the_seeds_it_was_asked_for(which, by_name, seeds, base_seed):
    config = CONFIGS[which]
    objective = "garland" if by_name else garland(which)
    result = fp.run(config, objective, seeds=seeds, base_seed=base_seed)
    ids = list(range(int(seeds))) if np.ndim(seeds) == 0 else [int(i) for i in seeds]
    assert result.seeds.tolist() == ids and result.base_seed == base_seed
    assert result.final_regret.shape == (S,) and result.curves.shape == (S, C)
    assert np.isfinite(result.final_regret).all() and result.objective == "garland"
    # Seed i's numbers do not depend on the seed beside it, nor on its place in the batch.
    swapped = fp.run(config, garland(which), seeds=ids[::-1], base_seed=base_seed)
    np.testing.assert_array_equal(swapped.final_regret, result.final_regret[::-1])
    np.testing.assert_array_equal(swapped.curves, result.curves[::-1])


BAD_SEEDS = st.one_of(
    st.integers(max_value=0), st.integers(min_value=2**31 + 1).map(int),
    st.lists(st.integers(0, SEED_MAX), min_size=1, max_size=3).map(lambda ids: ids + ids[:1]),     # repeated
    st.lists(st.integers(max_value=-1), min_size=1, max_size=2), st.lists(st.integers(min_value=SEED_MAX + 1),
                                                                          min_size=1, max_size=2),
    st.sampled_from([[], (), 2.5, None, True, "3", "", [1.5, 2.0], ["1", "2"], [[1, 2]], Opaque(), np.zeros((2, 2),
                                                                                                          int)]))
BAD_BASE_SEEDS = st.one_of(st.integers(max_value=-1), st.integers(min_value=SEED_MAX + 1), NOT_INT,
                           st.just(np.float64(1.0)))
BAD_OBJECTIVES = st.one_of(st.text(max_size=10).filter(lambda n: n not in objectives.OBJECTIVES),
                           st.sampled_from([3, None, b"garland", ["garland"], {"name": "garland"}, 1.5, Opaque()]))
BAD_CONFIGS = st.sampled_from([None, "fedpne", {"horizon": T}, 3, Opaque()])
BAD_MEMORY = st.one_of(st.floats(max_value=0.0), st.sampled_from([math.nan, math.inf, "1", True]))


@st.composite
def bad_run(draw):
    which = draw(st.sampled_from(sorted(CONFIGS)))
    kwargs = {"config": CONFIGS[which], "objective": draw(st.sampled_from(["garland", garland(which)])), "seeds": S}
    argument = draw(st.sampled_from(["seeds", "base_seed", "objective", "config", "memory_gb"]))
    kwargs[argument] = draw({"seeds": BAD_SEEDS, "base_seed": BAD_BASE_SEEDS, "objective": BAD_OBJECTIVES,
                             "config": BAD_CONFIGS, "memory_gb": BAD_MEMORY}[argument])
    return kwargs, argument


@settings(max_examples=60, **SETTINGS)
@given(bad_run())
def test_run_refuses_a_bad_argument_naming_it_before_anything_is_traced(drawn):
    kwargs, argument = drawn
    traces = executor.trace_count()
    rest = {k: v for k, v in kwargs.items() if k not in ("config", "objective")}
    refused(lambda: fp.run(kwargs["config"], kwargs["objective"], **rest), argument)
    assert executor.trace_count() == traces


@settings(max_examples=4, **SETTINGS)
@given(st.sampled_from([1, 3]))
def test_run_refuses_an_objective_of_other_clients_naming_it(clients):
    traces = executor.trace_count()
    other = objectives.make_objective("garland", num_clients=clients)
    refused(lambda: fp.run(CONFIGS["fedpne"], other, seeds=S), "objective", "num_clients")
    assert executor.trace_count() == traces


# ------------------------------------------------------------------------- load_sweep().find

# Fed-PNE and HCT as CONFIGS has them: their programs are those of the runs above.
LABELS = [{"objective": "garland", "algorithm": "fedpne", "num_clients": 2, "horizon": T},
          {"objective": "garland", "algorithm": "hct", "num_clients": None, "horizon": T}]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    definition = {"objectives": ["garland"], "algorithms": ["fedpne", "hct"], "clients": [2], "horizon": [T],
                  "seeds": S, "params": {"checkpoints": C}}
    fp.run_sweep(definition, out, progress=False)
    return fp.load_sweep(out)


def test_load_sweep_reads_the_labels_the_sweep_was_built_with(sweep):
    assert sweep.configs == LABELS and sweep.complete


LABEL_VALUES = st.one_of(st.sampled_from(["garland", "doublesine", "fedpne", "hct", 2, 2.0, 3, T, T + 1.0, None,
                                          True, np.int64(2)]),
                         st.text(max_size=6), st.lists(st.integers(), max_size=2))


@settings(max_examples=30, **SETTINGS)
@given(st.dictionaries(st.sampled_from(sorted(LABELS[0])), LABEL_VALUES, max_size=3))
def test_find_returns_the_configurations_whose_labels_equal_the_values_given(sweep, labels):
    expected = [i for i, row in enumerate(LABELS) if all(row[k] == v for k, v in labels.items())]
    assert sweep.find(**labels) == expected


@settings(max_examples=25, **SETTINGS)
@given(unknown=st.dictionaries(st.text(alphabet=string.ascii_letters + string.digits + "_", max_size=8)
                               .filter(lambda k: k not in LABELS[0]), LABEL_VALUES,
                               min_size=1, max_size=2),
       known=st.dictionaries(st.sampled_from(sorted(LABELS[0])), LABEL_VALUES, max_size=2))
def test_find_refuses_an_unknown_label_naming_it(sweep, unknown, known):
    err = refused(lambda: sweep.find(**known, **unknown), *map(repr, unknown))
    message = str(err)
    assert all(repr(k) in message for k in unknown)
    # The message lists the labels the sweep has, after the unknown ones.
    said_unknown = message.split(";")[0]
    assert not any(repr(k) in said_unknown for k in known)


@settings(max_examples=10, **SETTINGS)
@given(st.one_of(st.text(alphabet=string.ascii_letters, min_size=1, max_size=8).map(lambda n: f"/nonexistent/{n}"),
                 st.just("")))
def test_load_sweep_refuses_a_folder_that_holds_no_sweep_naming_it(path):
    err = refused(lambda: fp.load_sweep(path), repr(path))
    assert isinstance(err, fp.SweepError)


@settings(max_examples=10, **SETTINGS)
@given(st.sampled_from([None, 3, 1.5, ["results"], Opaque()]))
def test_load_sweep_refuses_a_path_of_the_wrong_type_naming_it(path):
    refused(lambda: fp.load_sweep(path), "path")
