"""The objective specs: for each kind of objective, its box, its defaults and how it is built.

Each spec class builds its own objectives (``build_objective``) and picks its own default
heterogeneity (``heterogeneity_for``), so that :func:`objectives.registry.make_objective` checks only
what every objective shares and a new kind of objective is a new spec class, not another branch of a
chain of kinds: :class:`Spec` (the synthetic test functions), :class:`RealSpec` (the real-world
objectives), :class:`BBOBSpec` (COCO's BBOB functions) and :class:`UserSpec` (objectives registered
from outside); :class:`ObjectiveSpec` is what they all offer.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, ClassVar, Protocol

import jax
import jax.numpy as jnp

from objectives import bbob, synthetic
from objectives.heterogeneity import HETEROGENEITIES, heterogeneous_parts, heterogeneous_parts_on_base
from objectives.objective import Objective
from objectives.validation import is_int

# The real objectives' clients differ by construction (their own data / region), so they have their
# own heterogeneity kinds: 'intrinsic' (client m's own objective) and 'none' (every client sees the
# global objective).  'shift' and 'fourier' would add offsets that take AUC, accuracy or
# 1 - infection share outside [0, 1]; they are refused.
REAL_HETEROGENEITIES = ("intrinsic", "none")


class ObjectiveSpec(Protocol):
    """What every registry entry offers: the defaults that the command line, sweeps and
    :func:`default_size` read without building anything, and the building itself."""

    @property
    def kind(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def default_dim(self) -> int | None: ...
    @property
    def fixed_dim(self) -> bool: ...
    @property
    def default_clients(self) -> int: ...
    @property
    def default_horizon(self) -> int: ...
    @property
    def default_seeds(self) -> int: ...
    @property
    def max_clients(self) -> int | None: ...
    @property
    def default_heterogeneity(self) -> str | None: ...
    @property
    def heterogeneities(self) -> tuple: ...

    def heterogeneity_for(self, noise_kind: str | None) -> str | None:
        """The heterogeneity used when none is asked for, under rewards of ``noise_kind``."""
        ...

    def build_objective(self, name: str, num_clients: int, heterogeneity: str | None, seed: int,
                        dim: int | None, amplitude: float | None, instance: int | None) -> Objective:
        """The objective ``name`` for ``num_clients`` clients (num_clients and seed already checked,
        Python ints); heterogeneity None means the spec's default."""
        ...


def _problem_key(seed: int) -> jax.Array:
    """The key of the problem instance (heterogeneity, the real objectives' choice of data): the same
    for every run of a batch, so all runs see the same local objectives."""
    return jax.random.fold_in(jax.random.key(seed), 0)


def box_dim(s: Spec | RealSpec | BBOBSpec, name: str, dim, instance) -> int:
    """The dimension of a built-in objective, after refusing an ``instance`` it has no use for: the
    checks the built-in specs share, in the order make_objective has always made them (so an
    argument with several faults reports the same one)."""
    if instance is not None and not s.takes_instance:
        raise ValueError(f"instance applies to the BBOB objectives ('bbob-f1' ... 'bbob-f{bbob.NUM_FUNCTIONS}') "
                         f"only, not to objective {name!r}")
    if dim is None:
        dim = s.default_dim
    if not is_int(dim) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    dim = int(dim)
    if s.fixed_dim and dim != s.default_dim:
        raise ValueError(f"dim: objective {name!r} is defined in dimension {s.default_dim} only, got {dim}")
    return dim


@dataclasses.dataclass(frozen=True)
class Spec:
    """A synthetic test function: f(x) on [lo, hi]^D."""
    fn: Callable
    lo: float
    hi: float
    f_star: float
    default_dim: int
    fixed_dim: bool
    source: str
    default_clients: int = 10
    default_horizon: int = 10_000
    default_seeds: int = 100
    max_clients: int | None = None
    default_heterogeneity: str = "shift"
    heterogeneities: tuple = HETEROGENEITIES
    kind: str = "synthetic"
    takes_instance: ClassVar[bool] = False

    def heterogeneity_for(self, noise_kind: str | None) -> str:
        # Bernoulli rewards need values in [0, 1], which the client shifts leave.
        return "none" if noise_kind == "bernoulli" else self.default_heterogeneity

    def build_objective(self, name: str, num_clients: int, heterogeneity: str | None, seed: int,
                        dim: int | None, amplitude: float | None, instance: int | None,
                        shared_with: tuple = ()) -> Objective:
        """``shared_with``: the functions (this one among them) of :class:`objectives.synthetic.SharedFunction`."""
        heterogeneity = self.default_heterogeneity if heterogeneity is None else heterogeneity
        dim = box_dim(self, name, dim, instance)
        key = _problem_key(seed)
        lo, hi = (float(self.lo),) * dim, (float(self.hi),) * dim
        if shared_with:
            base = {"function": jnp.int32(shared_with.index(self.fn))}
            global_fn, local_fn, data = heterogeneous_parts_on_base(
                heterogeneity, synthetic.SharedFunction(shared_with), base, num_clients, key, lo=lo, hi=hi,
                amplitude=amplitude)
        else:
            global_fn, local_fn, data = heterogeneous_parts(heterogeneity, self.fn, num_clients, key, lo=lo, hi=hi,
                                                            amplitude=amplitude)
        return Objective(name=name, lo=lo, hi=hi, f_star=float(self.f_star), num_clients=num_clients,
                         global_fn=global_fn, local_fn=local_fn, data=data)


@dataclasses.dataclass(frozen=True)
class Homogeneous:
    """heterogeneity 'none' for a real objective: every client's local objective is the global one."""
    global_fn: Callable

    def __call__(self, data, x, m):
        return self.global_fn(data, x)


@dataclasses.dataclass(frozen=True)
class RealSpec:
    """A real-world objective with a fixed box, intrinsic client heterogeneity and a data builder.

    ``build(num_clients, key) -> (data, f_star)``; ``local``/``global_`` are module-level functions
    (hashable, so objectives built alike share one compiled program).  An objective evaluated on the
    host has ``make(num_clients, key, heterogeneity) -> Objective`` instead (build, local and
    global_ None): it builds its own functions (see objectives.python).
    """
    build: Callable | None
    local: Callable | None
    global_: Callable | None
    lo: tuple
    hi: tuple
    f_star: str                   # how f* is set, for the README / results
    max_clients: int
    default_clients: int
    default_horizon: int
    default_seeds: int
    source: str
    domain: str
    default_heterogeneity: str = "intrinsic"
    heterogeneities: tuple = REAL_HETEROGENEITIES
    kind: str = "real"
    make: Callable | None = None
    takes_instance: ClassVar[bool] = False

    @property
    def default_dim(self) -> int:
        return len(self.lo)

    fixed_dim = True

    def heterogeneity_for(self, noise_kind: str | None) -> str:
        return self.default_heterogeneity

    def build_objective(self, name: str, num_clients: int, heterogeneity: str | None, seed: int,
                        dim: int | None, amplitude: float | None, instance: int | None) -> Objective:
        heterogeneity = self.default_heterogeneity if heterogeneity is None else heterogeneity
        box_dim(self, name, dim, instance)
        key = _problem_key(seed)
        if heterogeneity not in self.heterogeneities:
            unit = "field" if name.startswith("landmine") else "region" if name == "covid" else "data shard"
            raise ValueError(f"heterogeneity: objective {name!r} has intrinsic client heterogeneity (each client "
                             f"its own {unit}); "
                             f"use one of {self.heterogeneities}, got {heterogeneity!r}")
        if amplitude is not None:
            raise ValueError(f"amplitude applies to heterogeneity 'fourier' of the synthetic functions only, "
                             f"not to objective {name!r}")
        if num_clients > self.max_clients:
            raise ValueError(f"num_clients: objective {name!r} has at most {self.max_clients} clients, "
                             f"got {num_clients}")
        if self.make is not None:
            return self.make(num_clients, key, heterogeneity)
        if self.build is None or self.local is None or self.global_ is None:
            raise TypeError(f"objective {name!r}: a real objective's spec needs build, local and global_, or make")
        data, f_star = self.build(num_clients, key)
        local_fn = self.local if heterogeneity == "intrinsic" else Homogeneous(self.global_)
        return Objective(name=name, lo=tuple(float(v) for v in self.lo), hi=tuple(float(v) for v in self.hi),
                         f_star=float(f_star), num_clients=num_clients, global_fn=self.global_, local_fn=local_fn,
                         data=data)


@dataclasses.dataclass(frozen=True)
class BBOBSpec:
    """A noiseless BBOB function of COCO: reward -(f_k(x) - f_opt) on [-5, 5]^D, f* = 0 (regret is
    COCO's precision).  ``make_objective`` picks COCO's instance (``instance``, default 1)."""
    function: int
    source: str
    lo: float = bbob.LO
    hi: float = bbob.HI
    f_star: float = 0.0
    default_dim: int = 2
    fixed_dim: bool = False
    default_clients: int = 10
    default_horizon: int = 10_000
    default_seeds: int = 100
    max_clients: int | None = None
    default_heterogeneity: str = "shift"
    heterogeneities: tuple = bbob.HETEROGENEITIES
    kind: str = "bbob"
    takes_instance: ClassVar[bool] = True

    def heterogeneity_for(self, noise_kind: str | None) -> str:
        return self.default_heterogeneity

    def build_objective(self, name: str, num_clients: int, heterogeneity: str | None, seed: int,
                        dim: int | None, amplitude: float | None, instance: int | None,
                        shared_with: tuple = ()) -> Objective:
        heterogeneity = self.default_heterogeneity if heterogeneity is None else heterogeneity
        dim = box_dim(self, name, dim, instance)
        key = _problem_key(seed)
        k = self.function
        dim = bbob.check_dim(k, dim)
        instance = 1 if instance is None else bbob.check_instance(instance)
        if heterogeneity not in self.heterogeneities:
            raise ValueError(f"heterogeneity of objective {name!r} must be one of {self.heterogeneities}, "
                             f"got {heterogeneity!r}")
        lo, hi = (float(self.lo),) * dim, (float(self.hi),) * dim
        if heterogeneity == "instances":
            if amplitude is not None:
                raise ValueError(f"amplitude applies to heterogeneity 'fourier' only, "
                                 f"got heterogeneity {heterogeneity!r}")
            one = bbob.Reward(k)
            if instance + num_clients - 1 > bbob.MAX_INSTANCE:
                raise ValueError(f"instance: heterogeneity 'instances' gives client m COCO's instance {instance} + m, "
                                 f"and {instance} + {num_clients - 1} is over {bbob.MAX_INSTANCE}")
            numbers = list(range(instance, instance + num_clients))
            data = {"base": bbob.stacked_arrays([bbob.instance(k, dim, i) for i in numbers])}
            f_star = 0.0 if num_clients == 1 else bbob.instances_f_star(k, dim, numbers)[0]
            return Objective(name=name, lo=lo, hi=hi, f_star=f_star, num_clients=num_clients,
                             global_fn=bbob.InstanceMean(one), local_fn=bbob.InstanceLocal(one), data=data)
        base = bbob.device_arrays(bbob.instance(k, dim, instance))
        reward: Callable = bbob.Reward(k)
        if shared_with:
            reward, base = bbob.SharedReward(shared_with), bbob.shared_arrays(bbob.instance(k, dim, instance))
        global_fn, local_fn, data = heterogeneous_parts_on_base(heterogeneity, reward, base, num_clients, key,
                                                                lo=lo, hi=hi, amplitude=amplitude)
        return Objective(name=name, lo=lo, hi=hi, f_star=float(self.f_star), num_clients=num_clients,
                         global_fn=global_fn, local_fn=local_fn, data=data)


@dataclasses.dataclass(frozen=True)
class UserSpec:
    """An objective registered with :func:`register`: ``factory(num_clients=M, **options)`` returns an
    :class:`Objective`.  Of make_objective's options (heterogeneity, seed, dim, amplitude, instance)
    the factory receives those its signature names (or all, with ``**kwargs``)."""
    factory: Callable
    source: str = "registered"
    default_dim: int | None = None
    default_clients: int = 10
    default_horizon: int = 10_000
    default_seeds: int = 100
    default_heterogeneity: str | None = None
    heterogeneities: tuple = ()          # () : whatever the factory accepts
    max_clients: int | None = None
    fixed_dim: bool = False
    kind: str = "user"

    def __post_init__(self):
        # Checked when registered, so that a bad default is named as the plugin's, not met later as
        # a run's bad horizon or client count.
        for field in ("default_clients", "default_horizon", "default_seeds"):
            value = getattr(self, field)
            if not is_int(value) or value < 1:
                raise ValueError(f"{field} must be an integer >= 1, got {value!r}")
        for field in ("default_dim", "max_clients"):
            value = getattr(self, field)
            if value is not None and (not is_int(value) or value < 1):
                raise ValueError(f"{field} must be None or an integer >= 1, got {value!r}")
        if self.max_clients is not None and self.default_clients > self.max_clients:
            raise ValueError(f"default_clients={self.default_clients} is more than max_clients={self.max_clients}")
        if not isinstance(self.heterogeneities, tuple) or not all(isinstance(h, str) for h in self.heterogeneities):
            raise ValueError(f"heterogeneities must be a tuple of names, got {self.heterogeneities!r}")
        if self.default_heterogeneity is not None and self.heterogeneities \
                and self.default_heterogeneity not in self.heterogeneities:
            raise ValueError(f"default_heterogeneity {self.default_heterogeneity!r} is not one of "
                             f"heterogeneities {self.heterogeneities}")
        params = self._parameters()
        if params is not None and "num_clients" not in params \
                and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            raise ValueError(f"the factory must take num_clients= (it is called as factory(num_clients=M, ...)); "
                             f"its parameters are {', '.join(params) or 'none'}")

    def _parameters(self):
        try:
            return inspect.signature(self.factory).parameters
        except (TypeError, ValueError):                 # a callable without a signature: give it everything
            return None

    def heterogeneity_for(self, noise_kind: str | None) -> str | None:
        return self.default_heterogeneity

    def build_objective(self, name: str, num_clients: int, heterogeneity: str | None, seed: int,
                        dim: int | None, amplitude: float | None, instance: int | None) -> Objective:
        # An option the factory does not name is refused only when it is set: left at its default
        # (None, seed 0) it asks for nothing the factory could ignore.
        heterogeneity = self.default_heterogeneity if heterogeneity is None else heterogeneity
        if self.heterogeneities and heterogeneity is not None and heterogeneity not in self.heterogeneities:
            raise ValueError(f"heterogeneity of {name!r} must be one of {self.heterogeneities}, got {heterogeneity!r}")
        if self.max_clients is not None and num_clients > self.max_clients:
            raise ValueError(f"objective {name!r} has at most {self.max_clients} clients, got num_clients={num_clients}")
        options = dict(heterogeneity=heterogeneity, seed=seed, dim=dim, amplitude=amplitude, instance=instance)
        params = self._parameters()
        open_kwargs = params is None or any(p.kind == p.VAR_KEYWORD for p in params.values())
        given = {}
        for key, value in options.items():
            if params is None or open_kwargs or key in params:
                given[key] = value
            elif value is not None and not (key == "seed" and value == 0):
                raise ValueError(f"objective {name!r} takes no {key} (its factory's parameters are "
                                 f"{', '.join(params)})")
        if self.default_dim is not None and given.get("dim", 0) is None:
            given["dim"] = self.default_dim
        objective = self.factory(num_clients=num_clients, **given)
        if not isinstance(objective, Objective):
            raise TypeError(f"objective {name!r}: its factory returned {type(objective).__name__}, not an "
                            f"objectives.Objective")
        if objective.num_clients != num_clients:
            raise ValueError(f"objective {name!r}: its factory built {objective.num_clients} clients, "
                             f"asked for num_clients={num_clients}")
        if given.get("dim") is not None and objective.dim != given["dim"]:
            raise ValueError(f"objective {name!r}: its factory built a {objective.dim}-D objective, asked for "
                             f"dim={given['dim']}")
        return objective
