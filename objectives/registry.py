"""The objective registry: the registries of built-in objectives (``REGISTRY``, ``REAL_REGISTRY``,
``BBOB_REGISTRY``, all in ``OBJECTIVES``), registration of your own (:func:`register`, installed
entry points) and lookup by name (:func:`spec`, :func:`make_objective` and the defaults).

The entries are the spec classes of :mod:`objectives.specs`, each of which builds its own
objectives, so :func:`make_objective` checks only what every objective shares (num_clients, seed).
The package's ``__init__`` re-exports the public names.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import re
from typing import Callable

from objectives import bbob, covid, digits, landmine, landmine_sklearn, synthetic
from objectives.objective import Objective
from objectives.specs import BBOBSpec, ObjectiveSpec, RealSpec, Spec, UserSpec, box_dim
from objectives.validation import MAX_CLIENTS, check_seed, is_int


def _build_landmine(num_clients, key):
    return landmine.make_data(num_clients, key), landmine.F_STAR


def _build_covid(num_clients, key):
    regions = covid.choose_regions(num_clients, key)
    return covid.make_data(regions), covid.dense_f_star(regions)


def _build_digits(num_clients, key):
    return digits.make_data(num_clients, key), digits.F_STAR


REGISTRY: dict[str, Spec] = {
    "garland": Spec(synthetic.garland, 0.0, 1.0, synthetic.GARLAND_F_STAR, 1, True,
                    "x(1-x)(4-sqrt|sin 60x|); Azar et al. 2014, PyXAB"),
    "doublesine": Spec(synthetic.double_sine, 0.0, 1.0, 0.0, 1, True,
                       "DoubleSine rho1=0.3, rho2=0.8, tmax=0.5; Grill et al. 2015, PyXAB"),
    "himmelblau": Spec(synthetic.himmelblau, -5.0, 5.0, 0.0, 2, True,
                       "Himmelblau / 890 (PyXAB's normalisation)"),
    "ackley": Spec(synthetic.ackley, -1.0, 1.0, 0.0, 2, False, "negated Ackley function"),
    "rastrigin": Spec(synthetic.rastrigin, -1.0, 1.0, 0.0, 2, False, "negated Rastrigin function"),
}

REAL_REGISTRY: dict[str, RealSpec] = {
    "landmine": RealSpec(
        _build_landmine, landmine.local, landmine.global_, landmine.LO, landmine.HI, "1 (the paper's choice)",
        # Each evaluation trains an SVM (20-60 per second on 2 CPU cores); Fed-PNE evaluates only the
        # rows a phase pulls, so a 500-round run of 4 clients takes about 1 s per seed.
        max_clients=landmine.NUM_FIELDS, default_clients=4, default_horizon=500, default_seeds=4,
        source="Landmine data (Liu, Liao, Carin 2007), one field per client; AUC of an RBF SVM (Dai et al. 2020)",
        domain="(C, gamma) in [1e-4, 10] x [0.01, 10]"),
    # The same problem with scikit-learn's SVC on the host (the svm extra), for checking the JAX solver
    # and as an example of a Python objective; about 3 ms per (point, client) on one core.
    "landmine-sklearn": RealSpec(
        None, None, None, landmine.LO, landmine.HI, "1 (the paper's choice)",
        max_clients=landmine.NUM_FIELDS, default_clients=4, default_horizon=500, default_seeds=4,
        source="as landmine, with scikit-learn's SVC(kernel='rbf', C, gamma) evaluated on the host (svm extra)",
        domain="(C, gamma) in [1e-4, 10] x [0.01, 10]", make=landmine_sklearn.make_objective),
    "covid": RealSpec(
        _build_covid, covid.local, covid.global_, covid.LO, covid.HI,
        "dense search of the global objective + 1e-5",
        max_clients=covid.NUM_REGIONS, default_clients=covid.NUM_REGIONS, default_horizon=10_000, default_seeds=100,
        source="SEIR with vaccination (coronaSEIR, Wiecek et al. 2022), one region per client",
        domain="dosage x in [0, 1]"),
    "digits": RealSpec(
        _build_digits, digits.local, digits.global_, digits.LO, digits.HI, "1 (the paper's choice)",
        # Each evaluation trains an MLP for 500 SGD steps (about 200-350 per second).
        max_clients=digits.MAX_CLIENTS, default_clients=5, default_horizon=300, default_seeds=8,
        source="UCI 8x8 digits (scikit-learn copy), label-skewed shards; test accuracy of a 64-unit MLP",
        domain="(batch size, learning rate, weight decay) in [1, 100] x [1e-6, 1] x [1e-6, 0.5]"),
}

BBOB_REGISTRY: dict[str, BBOBSpec] = {
    f"bbob-f{k}": BBOBSpec(k, f"COCO's noiseless BBOB f{k}, {bbob.NAMES[k]} (Hansen et al. 2009), instances as in COCO")
    for k in range(1, bbob.NUM_FUNCTIONS + 1)
}

# Every objective by name; register() adds to it, so it is the one registry lookups read.
OBJECTIVES: dict[str, ObjectiveSpec] = {**REGISTRY, **REAL_REGISTRY, **BBOB_REGISTRY}
ENTRY_POINT_GROUP = "fedpne_jax.objectives"


def register(name: str, factory: Callable, **defaults) -> UserSpec:
    """Register ``factory(num_clients=M, **options) -> Objective`` as objective ``name``.

    ``defaults``: any of UserSpec's fields (default_clients, default_horizon, default_seeds,
    default_dim, default_heterogeneity, heterogeneities, source).  Registering the same factory with
    the same defaults again does nothing; another under a taken name raises ValueError naming it."""
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"objective name must be a non-empty string without surrounding spaces, got {name!r}")
    if not callable(factory):
        raise TypeError(f"objective {name!r}: factory must be callable, got {type(factory).__name__}")
    fields = {f.name for f in dataclasses.fields(UserSpec)} - {"factory", "kind", "fixed_dim"}
    unknown = sorted(set(defaults) - fields)
    if unknown:
        raise ValueError(f"objective {name!r}: unknown default(s) {', '.join(unknown)}; the defaults are "
                         f"{', '.join(sorted(fields))}")
    try:
        new = UserSpec(factory=factory, **defaults)
    except ValueError as err:
        raise ValueError(f"objective {name!r}: {err}") from None
    existing = OBJECTIVES.get(name)
    if existing is not None:
        if isinstance(existing, UserSpec) and existing == new:
            return existing
        raise ValueError(f"objective name {name!r} is already registered"
                         f"{'' if isinstance(existing, UserSpec) else ' (a built-in objective)'}; give yours another name")
    OBJECTIVES[name] = new
    return new


def _from_entry_point(name: str) -> None:
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            try:
                factory = ep.load()
            except Exception as err:
                raise ValueError(f"objective {name!r}: entry point {ep.value!r} in group {ENTRY_POINT_GROUP!r} "
                                 f"could not be loaded: {type(err).__name__}: {err}") from err
            if name not in OBJECTIVES:          # its module may have registered it on import
                register(name, factory)
            return


def spec(name: str) -> ObjectiveSpec:
    """The registry entry of ``name`` (synthetic, real, BBOB, or registered from outside)."""
    if not isinstance(name, str):
        raise TypeError(f"objective name must be a string such as 'garland', got {type(name).__name__} {name!r:.60}")
    if isinstance(name, str) and name not in OBJECTIVES:
        _from_entry_point(name)
    if name not in OBJECTIVES:
        number = re.fullmatch(r"bbob-f(\d+)", name) if isinstance(name, str) else None
        if number:
            k = int(number.group(1))
            hint = f"write it as 'bbob-f{k}'" if 1 <= k <= bbob.NUM_FUNCTIONS else f"got function number {k}"
            raise ValueError(f"objective {name!r}: the BBOB function number must be 1 to {bbob.NUM_FUNCTIONS} "
                             f"('bbob-f1' ... 'bbob-f{bbob.NUM_FUNCTIONS}'); {hint}")
        named = sorted(n for n in OBJECTIVES if n not in BBOB_REGISTRY)
        raise ValueError(f"objective must be one of {named} or 'bbob-f1' ... 'bbob-f{bbob.NUM_FUNCTIONS}' (or one "
                         f"registered with objectives.register or an installed plugin), got {name!r}")
    return OBJECTIVES[name]


def default_size(name: str) -> tuple[int, int]:
    """(M, T): the number of clients and the horizon ``fedpne run`` uses for this objective."""
    s = spec(name)
    return s.default_clients, s.default_horizon


def default_seeds(name: str) -> int:
    """A number of runs that finishes in about a minute on 2 CPU cores (100 for the cheap objectives)."""
    return spec(name).default_seeds


def default_heterogeneity(name: str, noise_kind: str | None = None) -> str | None:
    """The heterogeneity an objective gets when none is asked for.  Bernoulli rewards need values in
    [0, 1], which the synthetic functions' client shifts leave: with ``noise_kind`` 'bernoulli' they
    get 'none'.  None only for a registered objective without a default (its factory's own)."""
    return spec(name).heterogeneity_for(noise_kind)


def make_objective(name: str, num_clients: int = 1, heterogeneity: str | None = None, seed: int = 0,
                   dim: int | None = None, amplitude: float | None = None, instance: int | None = None,
                   shared_with=None) -> Objective:
    """A registered objective for ``num_clients`` clients.

    ``heterogeneity``: None gives the objective's default ('shift' for the synthetic and BBOB
    functions, 'intrinsic' for the real ones).  Synthetic and BBOB functions take 'none', 'shift' or
    'fourier' (``amplitude``, default 0.1, scales the zero-sum Fourier perturbations); real
    objectives take 'intrinsic' or 'none'.  ``seed`` keys the heterogeneity (shifts, Fourier
    features) and the real objectives' choice of fields / regions / shards: it is part of the
    problem instance, so every run of a batch sees the same local objectives, as in the paper's
    experiments.

    BBOB functions ('bbob-f1' ... 'bbob-f24', any dim >= 2, dim 1 for f1, f2, f10, f11) take COCO's
    ``instance`` number (default 1; refused for the other objectives) and a fourth heterogeneity,
    'instances': client m sees COCO's instance ``instance + m`` (instances 1..M by default) and
    the global objective is the clients' mean reward, whose f* is found by a search (see
    :func:`objectives.bbob.instances_f_star`).

    ``shared_with``: names of BBOB functions, or of synthetic functions on the box of ``name``, ``name``
    among them.  The objective is then built to share one compiled program with every objective of
    the same dimension built with the same names: the function is picked by a switch over them
    (:class:`objectives.bbob.SharedReward`, :class:`objectives.synthetic.SharedFunction`) instead of
    being compiled in.  A study of several functions then compiles once per algorithm and dimension
    instead of once per function; each run costs up to a third more time.  Compiled apart from what
    surrounds it, a function's products and sums may round differently (an FMA or not), so values
    agree with the objective built alone within 2 float32 ulps (8 for Gallagher's f21 and f22).  The
    heterogeneity 'instances' ignores it.
    """
    s = spec(name)
    # NumPy integers are accepted wherever Python ones are, and become Python ints here.
    if not is_int(num_clients) or not 1 <= num_clients <= MAX_CLIENTS:
        raise ValueError(f"num_clients must be an integer in [1, 2^20], got {num_clients!r}")
    seed = check_seed(seed)
    if shared_with is None:
        return s.build_objective(name, int(num_clients), heterogeneity, seed, dim, amplitude, instance)
    names = _shared_names(name, shared_with)
    if isinstance(s, BBOBSpec):
        return s.build_objective(name, int(num_clients), heterogeneity, seed, dim, amplitude, instance,
                                 shared_with=_shared_bbob(name, names))
    if isinstance(s, Spec):
        return s.build_objective(name, int(num_clients), heterogeneity, seed, dim, amplitude, instance,
                                 shared_with=_shared_synthetic(name, names, box_dim(s, name, dim, instance)))
    raise ValueError(f"shared_with applies to the BBOB and synthetic objectives, not to objective {name!r}")


def _shared_names(name: str, names) -> list:
    """``shared_with`` as a list of names that includes ``name`` (see :func:`make_objective`)."""
    try:
        # Listed once: an iterator read twice would be empty the second time.
        listed = None if isinstance(names, str) else list(names)
    except TypeError:
        listed = None
    if listed is None or not all(isinstance(n, str) for n in listed):
        raise ValueError(f"shared_with must be a list of objective names (BBOB functions, or synthetic functions "
                         f"on one box), got {names!r}")
    for other in listed:
        try:
            spec(other)
        except ValueError as err:
            raise ValueError(f"shared_with: {err}") from None
    if name not in listed:
        raise ValueError(f"shared_with must name the objective itself, {name!r}, got {listed!r}")
    return listed


def _shared_bbob(name: str, names: list) -> tuple:
    """The sorted BBOB function numbers of ``names``."""
    numbers = set()
    for other in names:
        s = spec(other)
        if not isinstance(s, BBOBSpec):
            raise ValueError(f"shared_with: the BBOB objective {name!r} shares programs with BBOB objectives only "
                             f"('bbob-f1' ... 'bbob-f{bbob.NUM_FUNCTIONS}'), got {other!r}")
        numbers.add(s.function)
    return tuple(sorted(numbers))


def _shared_synthetic(name: str, names: list, dim: int) -> tuple:
    """The functions of the synthetic objectives ``names``, in the order of their names: each must be
    defined on the box of ``name`` in its dimension (the switch's branches take one point shape)."""
    own = REGISTRY[name]
    for other in names:
        s = spec(other)
        fits = isinstance(s, Spec) and (s.lo, s.hi) == (own.lo, own.hi) and (not s.fixed_dim or s.default_dim == dim)
        if not fits:
            raise ValueError(f"shared_with: the synthetic objective {name!r} shares programs with synthetic objectives "
                             f"on its box [{own.lo:g}, {own.hi:g}]^{dim} only, got {other!r}")
    return tuple(REGISTRY[n].fn for n in sorted(set(names)))
