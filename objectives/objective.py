"""The objective protocol shared by every algorithm of fedpne-jax.

An objective is a frozen pytree: its box and functions are static, its optimum ``f_star`` and its
``data`` are leaves, so a batch of objectives can be vmapped without recompiling.  The federated
problem has M local objectives f_1..f_M (``local_fn(data, x, m)``) and the global objective
f = (1/M) sum_m f_m (``global_fn(data, x)``, exactly that mean), on one point x of shape (D,).
Construction checks the signatures, the shapes (:meth:`Objective.check_shapes`) and the mean
(:func:`check_mean`, at :data:`PROBE_POINTS` points to :data:`MEAN_RTOL`) unless global_fn computes
it itself (:func:`averages`).

In full: docs/guides/own-objective.md, section "The Objective value".
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import inspect
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from objectives.ordered import pairwise_sum
from objectives.validation import is_int, is_real

PROBE_POINTS = 3
# float32 values of a mean of M terms differ from the exact mean by a few ulps of the largest term
# (about 1e-7 relative); 1e-5 leaves two orders of margin for that and still refuses any real
# mismatch, such as a global_fn that is the sum or the first client's value.
MEAN_RTOL = 1e-5


@dataclasses.dataclass(frozen=True)
class Objective:
    """A federated objective.  Build one with :func:`objectives.make_objective` or directly.

    Every field but ``data`` and ``f_star`` is static: part of the pytree's structure, compared by
    value, except ``name``, which every structure holds as equal (lo, hi, f_star and num_clients
    are stored as Python numbers; NumPy scalars are accepted).
    Inside a traced function ``f_star`` is a scalar array.

    Attributes:
      name: used in results and error messages.
      lo, hi: the box X = prod_d [lo_d, hi_d] (tuples of floats, length D).
      f_star: sup of the global objective over the box (used for regret).
      num_clients: M.
      global_fn: ``(data, x) -> f(x)``, x of shape (D,).
      local_fn: ``(data, x, m) -> f_m(x)`` for client index m (an int32 scalar, possibly traced).
      data: any pytree of arrays the functions read.
    """

    name: str
    lo: tuple
    hi: tuple
    f_star: float
    num_clients: int
    global_fn: Callable[[Any, jax.Array], jax.Array]
    local_fn: Callable[[Any, jax.Array, jax.Array], jax.Array]
    data: Any = None

    def __post_init__(self):
        set_ = lambda field, value: object.__setattr__(self, field, value)
        set_("lo", _bounds(self.name, "lo", self.lo))
        set_("hi", _bounds(self.name, "hi", self.hi))
        if len(self.lo) != len(self.hi) or len(self.lo) == 0:
            raise ValueError(f"objective {self.name!r}: lo and hi must be non-empty and of equal length, "
                             f"got lo={self.lo}, hi={self.hi}")
        for d, (a, b) in enumerate(zip(self.lo, self.hi)):
            if not (np.isfinite(a) and np.isfinite(b) and a < b):
                raise ValueError(f"objective {self.name!r}: lo must be < hi in every dimension "
                                 f"(dimension {d}: lo={a}, hi={b})")
        if not (is_real(self.f_star) and np.isfinite(self.f_star)):
            raise ValueError(f"objective {self.name!r}: f_star must be a finite number, got {self.f_star!r}")
        set_("f_star", float(self.f_star))
        if not is_int(self.num_clients) or self.num_clients < 1:
            raise ValueError(f"objective {self.name!r}: num_clients must be an integer >= 1, "
                             f"got {self.num_clients!r}")
        set_("num_clients", int(self.num_clients))
        for label, call, count in _CALLS:
            _check_signature(self.name, label, call, getattr(self, label), count)
        _check_data(self.name, self.data)
        self.check_shapes()
        self._check_mean()

    def check_shapes(self) -> None:
        """ValueError naming the objective and the function unless global_fn and local_fn return one
        number (shape ()) for one point of shape (D,): checked abstractly (jax.eval_shape) at the box
        centre, so nothing is computed; the engine reshapes their values and would otherwise fail with
        a raw reshape error, or broadcast silently."""
        key = (self._static_fields(), _avals(self.data))
        if key in _SHAPES_CHECKED:
            return
        centre = jnp.asarray([(a + b) / 2 for a, b in zip(self.lo, self.hi)], jnp.result_type(float))
        for label, call, args in (("global_fn", _CALLS[0][1], (self.data, centre)),
                                  ("local_fn", _CALLS[1][1], (self.data, centre, jnp.int32(0)))):
            out = jax.eval_shape(getattr(self, label), *args)
            if not (isinstance(out, jax.ShapeDtypeStruct) and out.shape == () and out.dtype.kind in "iuf"):
                got = (f"shape {tuple(out.shape)} of dtype {out.dtype}" if isinstance(out, jax.ShapeDtypeStruct)
                       else f"{type(out).__name__} {jax.tree.map(lambda a: a.shape, out)}")
                raise ValueError(f"objective {self.name!r}: {call} must return one number (shape ()) for a point x "
                                 f"of shape ({self.dim},); at the box centre it returns {got}")
        _SHAPES_CHECKED.add(key)

    def _check_mean(self) -> None:
        """global_fn against the mean of local_fn at the probe points (see :func:`check_mean`).
        Skipped when the data are being traced (no values to compare), for functions that run the
        same check on the host themselves (objectives.python, whose probe would count as calls), and
        where global_fn is the mean of this local_fn by construction (:func:`averages`)."""
        leaves = jax.tree.leaves(self.data)
        if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves) \
                or getattr(self.global_fn, "checks_mean_on_host", False) \
                or getattr(self.global_fn, "averages", None) is self.local_fn:
            return
        key = (self._static_fields(), _fingerprint(leaves))
        if key in _MEAN_CHECKED:
            return
        X = probe_points(self.lo, self.hi)
        g, local = _probe_values(self, jnp.asarray(X, jnp.result_type(float)))
        check_mean(self.name, X, np.asarray(g, np.float64), np.asarray(local, np.float64))
        _MEAN_CHECKED.add(key)

    def host_errors(self):
        """The context every execution of a run on this objective is wrapped in.  Functions that run on
        the host (objectives.python) provide ``host_errors(objective)``: failures recorded before are
        forgotten on entry and the run's first failure is raised on exit; others need nothing."""
        for fn in (self.global_fn, self.local_fn):
            hook = getattr(fn, "host_errors", None)
            if hook is not None:
                return hook(self)
        return contextlib.nullcontext()

    def outside_unit_interval(self) -> str | None:
        """Why local values may leave [0, 1], which Bernoulli rewards need, or None: f* outside (0, 1],
        or what the local functions add to the global values (their ``outside_unit_interval(data)``,
        e.g. the clients' shifts)."""
        if not 0.0 < self.f_star <= 1.0:
            return f"has f* = {self.f_star}"
        hook = getattr(self.local_fn, "outside_unit_interval", None)
        return None if hook is None else hook(self.data)

    def _static_fields(self) -> tuple:
        return tuple(getattr(self, f) for f in _STATIC)

    @property
    def dim(self) -> int:
        return len(self.lo)

    def _check_points(self, x) -> jax.Array:
        x = jnp.asarray(x, dtype=jnp.result_type(float))   # float64 under jax.enable_x64
        if x.ndim == 0 or x.shape[-1] != self.dim:
            raise ValueError(f"objective {self.name!r}: points must have last dimension D={self.dim}, "
                             f"got shape {tuple(x.shape)}")
        return x

    def value(self, x) -> jax.Array:
        """Global objective f at points of shape (..., D); returns shape (...)."""
        x = self._check_points(x)
        flat = x.reshape(-1, self.dim)
        out = jax.vmap(lambda p: _traced_once(self.global_fn, self.data, p))(flat)
        return out.reshape(x.shape[:-1])

    def local_values(self, x) -> jax.Array:
        """All clients' local objectives at points of shape (..., D); returns shape (..., M)."""
        x = self._check_points(x)
        flat = x.reshape(-1, self.dim)
        clients = jnp.arange(self.num_clients, dtype=jnp.int32)
        per_point = lambda p: jax.vmap(lambda m: _traced_once(self.local_fn, self.data, p, m))(clients)
        out = jax.vmap(per_point)(flat)
        return out.reshape(x.shape[:-1] + (self.num_clients,))

    def values_and_locals(self, x) -> tuple:
        """(global values (...), local values (..., M)) at points of shape (..., D).  Where global_fn
        is marked as ``combine`` of local_fn's values (:func:`averages`), the global values are
        combined from the local ones, with the same bits, and each (point, client) is evaluated once:
        otherwise an algorithm's program holds the training of a model-training objective twice (XLA
        merged the two copies' work, but compiling them cost a tenth more, 0.5 s, per program)."""
        combine = self.combine
        local = self.local_values(x)
        if combine is None:
            return self.value(x), local
        flat = local.reshape(-1, self.num_clients)
        g = jax.vmap(lambda v: _traced_once(combine, self.data, v))(flat)
        return g.reshape(local.shape[:-1]), local

    @property
    def combine(self) -> Callable | None:
        """global_fn's combination of the M local values (:func:`averages`), or None."""
        if getattr(self.global_fn, "averages", None) is not self.local_fn:
            return None
        return getattr(self.global_fn, "combine", None)

    def local(self, x, m) -> jax.Array:
        """Client m's local objective at one point x of shape (D,) (traceable; used by the engine)."""
        return _traced_once(self.local_fn, self.data, x, m)

    def global_value(self, x) -> jax.Array:
        """The global objective at one point x of shape (D,) (traceable; used by the engine)."""
        return _traced_once(self.global_fn, self.data, x)

    @property
    def centre_value(self):
        """The global objective at the box centre as the engine computed it for a run (see
        :meth:`with_centre_value`), or None."""
        return getattr(self, "_centre_value", None)

    def with_centre_value(self, value) -> Objective:
        """This objective carrying ``value``, its global value at the box centre, as a leaf.  The engine
        computes it in one small program per objective structure and precision
        (fedpne_jax.core.checkpoints.with_centre) and every algorithm's program reads it: compiled into
        each program, the evaluation of an objective that trains a model was a fifth of that program's
        compile time."""
        return _unflatten(_structure(self), (self.data, self.f_star, value))


@functools.partial(jax.jit, static_argnums=0)
def _traced_once(fn, *args):
    """``fn(*args)``, traced once per function and argument shapes however many sites of a program
    call it: an objective that trains a model is hundreds of thousands of operations, and tracing
    it again at every site was a third to a half of the tracing of such a program.  XLA inlines the call, so
    the program is the one the sites would make alone."""
    return fn(*args)


_STATIC = ("name", "lo", "hi", "num_clients", "global_fn", "local_fn")
# How the engine calls each function: (field, call, argument count).
_CALLS = (("global_fn", "global_fn(data, x)", 2), ("local_fn", "local_fn(data, x, m)", 3))
_SHAPES_CHECKED: set = set()
_MEAN_CHECKED: set = set()


def mean_of_clients(data, values):
    """The clients' mean as landmine and digits take it, a ``combine`` for :func:`averages`: a
    fixed-order sum of the M values (shape (..., M)) times 1/M.  Their values are multiples of a power
    of two (2^-16, 1/64), so the sum is exact and the mean the same in any batch."""
    return pairwise_sum(values) * (1.0 / values.shape[-1])


def averages(local_fn: Callable, combine: Callable | None = None) -> Callable[[Callable], Callable]:
    """Marks a global function that returns the mean of ``local_fn`` over the clients by
    construction (it evaluates ``local_fn`` for every client and averages), so that an objective
    built from the pair skips the probe check of that identity: for an objective that trains a model
    per evaluation, the probe trains 2 M models per point, longer than the runs of a quick study.
    The objectives' own tests hold such a pair to the identity.

    ``combine(data, values)``, where given, is how the global function turns the M local values
    (shape (M,)) of a point into its value: it must be exactly what the global function computes
    after evaluating ``local_fn`` for every client (call it there, so that the rule is written
    once).  Where an algorithm needs both the global and the local values of the same points,
    :meth:`Objective.values_and_locals` then evaluates the local ones only."""
    def mark(global_fn: Callable) -> Callable:
        global_fn.averages = local_fn      # type: ignore[attr-defined]  # a function attribute, read by getattr
        if combine is not None:
            global_fn.combine = combine    # type: ignore[attr-defined]
        return global_fn
    return mark


class _Name:
    """The name in an objective's pytree structure.  Every name compares equal to every other: the
    name enters no computation, so objectives that differ only in name (the BBOB functions of one
    dimension, see objectives.bbob_functions.SharedReward) share one compiled program."""
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other) -> bool:
        return isinstance(other, _Name)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return repr(self.text)


def _structure(objective: Objective) -> tuple:
    return (_Name(objective.name),) + objective._static_fields()[1:]


def _flatten(objective: Objective):
    return (objective.data, objective.f_star, objective.centre_value), _structure(objective)


def _flatten_with_keys(objective: Objective):
    return (((jax.tree_util.GetAttrKey("data"), objective.data), (jax.tree_util.GetAttrKey("f_star"), objective.f_star),
             (jax.tree_util.GetAttrKey("centre_value"), objective.centre_value)),
            _structure(objective))


def _unflatten(static: tuple, children) -> Objective:
    # Not through __init__: a rebuilt objective (inside jit, vmap, a tree map) was checked when it was
    # first built, and its data may be tracers or placeholders that no check can evaluate.
    objective = object.__new__(Objective)
    static = (static[0].text,) + tuple(static[1:])
    for field, value in zip(_STATIC, static):
        object.__setattr__(objective, field, value)
    object.__setattr__(objective, "data", children[0])
    object.__setattr__(objective, "f_star", children[1])
    if children[2] is not None:
        object.__setattr__(objective, "_centre_value", children[2])
    return objective


jax.tree_util.register_pytree_with_keys(Objective, _flatten_with_keys, _unflatten, _flatten)


@jax.jit
def _probe_values(objective: Objective, X):
    return objective.value(X), objective.local_values(X)


def _check_signature(name: str, label: str, call: str, fn, count: int) -> None:
    """TypeError naming the function unless it can be called with ``count`` positional arguments.
    Without this a wrong arity surfaces from deep inside a trace as a bare TypeError that names
    neither the objective nor the function.  A callable whose signature Python cannot read (some
    builtins and C extensions) is left to the shape check, which calls it."""
    if not callable(fn):
        raise TypeError(f"objective {name!r}: {label} must be a function called as {call}, "
                        f"got {type(fn).__name__} {_short(fn)}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*range(count))
    except TypeError as err:
        what = getattr(fn, "__qualname__", None) or type(fn).__name__
        raise TypeError(f"objective {name!r}: {label} is called as {call}, but {what}{signature} cannot take "
                        f"those {count} arguments ({err})") from None


def _check_data(name: str, data) -> None:
    """TypeError unless every leaf of ``data`` is an array or a number: the functions receive data
    traced by JAX, which has no abstract value for a string or an arbitrary object (it would fail
    later with an error about static arguments that names neither ``data`` nor the objective)."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(data)[0]:
        if isinstance(leaf, jax.Array) or _is_number(leaf):
            continue
        if isinstance(leaf, np.ndarray) and leaf.dtype.kind in "biufc":
            continue
        where = f" at data{jax.tree_util.keystr(path)}" if path else ""
        kind = f"an array of dtype {leaf.dtype}" if isinstance(leaf, np.ndarray) else type(leaf).__name__
        raise TypeError(f"objective {name!r}: data must be a pytree (dicts, lists, tuples, None) of arrays or "
                        f"numbers, which JAX can trace; got {kind}{where}: {_short(leaf)}")


def _is_number(value) -> bool:
    return isinstance(value, (bool, int, float, complex, np.bool_, np.number))


def _short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _bounds(name: str, field: str, values) -> tuple:
    """A box side as a tuple of Python floats (static fields must hash and compare by value, and NumPy
    scalars are accepted wherever Python numbers are)."""
    try:
        items = list(values)
    except TypeError:
        raise ValueError(f"objective {name!r}: {field} must be a sequence of numbers, got {values!r}") from None
    if not all(is_real(v) for v in items):
        raise ValueError(f"objective {name!r}: {field} must be a sequence of numbers, got {values!r}")
    return tuple(float(v) for v in items)


def _avals(tree) -> tuple:
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, tuple((np.shape(x), str(getattr(x, "dtype", type(x).__name__))) for x in leaves)


def _fingerprint(leaves) -> tuple:
    """A key for data values: equal data need not be checked twice (built-in objectives are rebuilt
    alike many times, and a check of the real ones trains models)."""
    digest = hashlib.sha1()
    for leaf in leaves:
        arr = np.asarray(leaf)
        digest.update(f"{arr.shape}{arr.dtype}".encode())
        digest.update(np.ascontiguousarray(arr).tobytes())
    return len(leaves), digest.hexdigest()


def probe_points(lo, hi, count: int = PROBE_POINTS) -> np.ndarray:
    """``count`` fixed points inside the box: its centre, then points of a fixed random draw."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    u = np.random.default_rng(0).uniform(0.1, 0.9, size=(count, lo.size))
    u[0] = 0.5
    return lo + u * (hi - lo)


def check_mean(name: str, points, global_values, local_values, global_label: str = "global_fn",
               local_label: str = "local_fn", of: str | None = None) -> None:
    """ValueError unless the global values (n,) are the mean of the local values (n, M) at ``points``
    (n, D), to MEAN_RTOL relative to max(1, |f|, max_m |f_m|); points where either is NaN or inf are
    skipped (a run reports those through its flags).  ``of`` describes the local values in the
    message (default: local_fn over the M clients)."""
    g = np.asarray(global_values, np.float64)
    local = np.asarray(local_values, np.float64)
    mean = local.mean(axis=1)
    finite = np.isfinite(g) & np.isfinite(mean)
    scale = np.maximum(1.0, np.maximum(np.abs(g), np.max(np.abs(local), axis=1, initial=0.0, where=np.isfinite(local))))
    bad = (np.abs(g - mean) > MEAN_RTOL * scale) & finite
    if np.any(bad):
        i = int(np.argmax(bad))
        of = of or f"{local_label} over the {local.shape[1]} clients"
        raise ValueError(f"objective {name!r}: {global_label} must be the mean of {of} (the global objective is "
                         f"(1/M) sum_m f_m, and the engine samples the server's mean from {global_label} alone); "
                         f"at x = {np.asarray(points)[i].tolist()} {global_label} gives {float(g[i])!r} but the mean of "
                         f"{local_label} is {float(mean[i])!r} (tolerance {MEAN_RTOL:g} x max(1, |f|, max_m |f_m|))")
