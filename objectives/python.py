"""Objectives written in plain Python / NumPy (and PyXAB objectives) for the JAX engine.

``from_python(fn, lo, hi, f_star, ...)`` wraps a NumPy-vectorised function ``fn(X) -> values`` (and
optionally the clients' ``local_fn``) as an :class:`objectives.Objective`; ``from_pyxab(obj, lo, hi,
...)`` wraps any object with PyXAB's interface.  Both evaluate on the host through
:func:`jax.pure_callback` (``vmap_method="expand_dims"``: one host call per evaluation site and
execution, whatever the batch), so they work under jit, vmap and sharding.  A failing call returns
NaN and warns; :func:`raise_pending` (through ``host_errors``) re-raises it as a
:class:`PythonObjectiveError`.  The function must be deterministic.

How many calls each algorithm makes, the client index, ``unique``, the errors and the dtypes:
docs/guides/own-objective.md, section "Python objectives in detail".
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import threading
import time
import warnings
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from objectives.errors import ObjectiveError
from objectives.objective import Objective, check_mean, probe_points
from objectives.validation import is_real


class PythonObjectiveError(ObjectiveError):
    """A Python objective raised, or returned values of the wrong shape or type."""


class _Host:
    """The host side of one Python objective: the functions, a lock, the calls made and the first
    failure of a run.  Compared by identity: the compiled program holds its callbacks, so two
    objectives share a program only when they share this state."""

    def __init__(self, name: str, fn: Callable, local_fn: Callable | None, num_clients: int, dim: int,
                 unique: bool, fn_label: str, local_label: str):
        self.name, self.fn, self.local_fn = name, fn, local_fn
        self.pairs = local_fn is not None and takes_clients(local_fn)
        self.num_clients, self.dim, self.unique = num_clients, dim, unique
        self.fn_label, self.local_label = fn_label, local_label
        self.lock = threading.Lock()
        # the first failure since the last check: (exception, label, points, first)
        self.failure: tuple[Exception, str, int, Any] | None = None
        self.failed_calls = 0
        self.reset_stats()

    def reset_stats(self) -> None:
        self.stats = dict(global_calls=0, local_calls=0, points=0, distinct_points=0, seconds=0.0)

    # ---------------------------------------------------------------- evaluation (raises on errors)
    def values(self, X: np.ndarray) -> np.ndarray:
        """fn on rows X (n, D) as float64 (n,); PythonObjectiveError on a bad result."""
        return _checked(self.fn(X), (X.shape[0],), self.name, self.fn_label)

    def local_columns(self, X: np.ndarray) -> np.ndarray:
        """local_fn on rows X as float64 (n, M)."""
        if self.local_fn is None:       # callers ask for columns only of objectives that have them
            raise TypeError(f"objective {self.name!r} has no local_fn")
        if self.pairs:
            n, M = X.shape[0], self.num_clients
            return self.local_pairs(np.repeat(X, M, axis=0), np.tile(np.arange(M), n)).reshape(n, M)
        return _checked(self.local_fn(X), (X.shape[0], self.num_clients), self.name, self.local_label)

    def local_pairs(self, X: np.ndarray, clients: np.ndarray) -> np.ndarray:
        """Client ``clients[i]``'s local objective at ``X[i]`` as float64 (n,) (the two-argument
        local_fn)."""
        assert self.local_fn is not None
        return _checked(self.local_fn(X, clients), (X.shape[0],), self.name, self.local_label)

    # --------------------------------------------------------------------------- callbacks
    def _distinct(self, x) -> tuple[np.ndarray, np.ndarray]:
        """(distinct rows as float64 (u, D), index of every point's row, shaped like the batch)."""
        X = np.asarray(x, np.float64).reshape(-1, self.dim)
        if not self.unique or X.shape[0] <= 1:
            return X, np.arange(X.shape[0]).reshape(np.shape(x)[:-1])
        U, inverse = np.unique(X, axis=0, return_inverse=True)
        return U, inverse.reshape(np.shape(x)[:-1])

    def _guarded(self, compute, rows: np.ndarray, label: str, nan_shape):
        """compute(rows), or NaN after recording the first failure of the run (see raise_pending)."""
        try:
            return compute(rows)
        except Exception as err:            # noqa: BLE001 (anything the user's function raises)
            if self.failure is None:
                warnings.warn(f"{_message(self.name, err, label)}; returning NaN for this call, and the run will "
                              f"report the error", RuntimeWarning, stacklevel=2)
                self.failure = (err, label, rows.shape[0], rows[0].copy() if rows.size else None)
            self.failed_calls += 1
            return np.full(nan_shape, np.nan)

    def global_callback(self, dtype):
        def callback(x):
            with self.lock:
                start = time.perf_counter()
                U, index = self._distinct(x)
                vals = self._guarded(self.values, U, self.fn_label, (U.shape[0],))
                self._count("global_calls", index.size, U.shape[0], start)
                return np.asarray(vals[index], dtype)
        return callback

    def local_callback(self, dtype):
        def callback(x, m):
            with self.lock:
                start = time.perf_counter()
                U, index = self._distinct(x)
                m = np.clip(np.asarray(m), 0, self.num_clients - 1)
                if self.local_fn is None:
                    # Every client sees fn: one value per point, broadcast over the clients.
                    vals = self._guarded(self.values, U, self.fn_label, (U.shape[0],))
                    out = np.broadcast_to(vals[index], np.broadcast_shapes(index.shape, m.shape))
                    rows = U.shape[0]
                elif self.pairs:
                    # Only the (point, client) pairs asked for, each once.
                    shape = np.broadcast_shapes(index.shape, m.shape)
                    # One integer per pair (row x M + client): a 1-D unique, far cheaper than one over rows.
                    pair = (np.broadcast_to(index, shape).astype(np.int64) * self.num_clients
                            + np.broadcast_to(m, shape)).ravel()
                    P, inverse = (np.unique(pair, return_inverse=True) if self.unique and pair.size > 1
                                  else (pair, np.arange(pair.size)))
                    vals = self._guarded(lambda X: self.local_pairs(X, P % self.num_clients), U[P // self.num_clients],
                                         self.local_label, (P.size,))
                    out, rows = vals[inverse.ravel()].reshape(shape), P.size
                else:
                    cols = self._guarded(self.local_columns, U, self.local_label, (U.shape[0], self.num_clients))
                    out, rows = cols[index, m], U.shape[0]
                self._count("local_calls", out.size, rows, start)
                return np.asarray(out, dtype)
        return callback

    def _count(self, site: str, points: int, distinct: int, start: float) -> None:
        s = self.stats
        s[site] += 1
        s["points"] += points
        s["distinct_points"] += distinct
        s["seconds"] += time.perf_counter() - start


def takes_clients(local_fn: Callable) -> bool:
    """Whether ``local_fn`` is the two-argument form ``local_fn(X, clients)``: it can be called with
    two positional arguments (a function whose signature Python cannot read is the one-argument
    form)."""
    try:
        inspect.signature(local_fn).bind(None, None)
    except TypeError:
        return False
    except ValueError:
        return False
    return True


def _checked(out, shape: tuple, name: str, label: str) -> np.ndarray:
    """``out`` as a float64 array of exactly ``shape``, else PythonObjectiveError naming it."""
    expected = f"expected a numeric array of shape {shape}"
    try:
        arr = np.asarray(out)
    except Exception as err:                # noqa: BLE001 (ragged lists and the like)
        raise PythonObjectiveError(f"objective {name!r}: {label} returned {type(out).__name__}, which is not an "
                                   f"array ({err}); {expected}") from None
    if arr.dtype.kind not in "biufO":
        raise PythonObjectiveError(f"objective {name!r}: {label} returned an array of dtype {arr.dtype} "
                                   f"(not numbers); {expected}")
    if arr.shape != shape:
        raise PythonObjectiveError(f"objective {name!r}: {label} returned shape {arr.shape}; {expected} "
                                   f"(one value per point{'' if len(shape) == 1 else ' and client'})")
    try:
        return arr.astype(np.float64)
    except (TypeError, ValueError) as err:
        raise PythonObjectiveError(f"objective {name!r}: {label} returned objects that do not convert to float "
                                   f"({err}); {expected}") from None


def _message(name: str, err: BaseException, label: str) -> str:
    """What failed, naming the objective (a PythonObjectiveError already does)."""
    if isinstance(err, PythonObjectiveError):
        return str(err)
    return f"objective {name!r}: {label} raised {type(err).__name__}: {err}"


# ------------------------------------------------------------------------------- JAX side
def _result_dtype(dtype, x):
    # Canonicalised at trace time: float64 values are float32 unless the run enables x64.
    return jax.dtypes.canonicalize_dtype(x.dtype if dtype is None else dtype)


@dataclasses.dataclass(frozen=True)
class PythonGlobal:
    """global_fn of a Python objective: one host call per batch of points."""
    host: _Host
    dtype: Any = np.float32
    # _probe compares fn with local_fn on the host, without the calls a check through JAX would add.
    checks_mean_on_host = True

    def __call__(self, data, x):
        dt = _result_dtype(self.dtype, x)
        return jax.pure_callback(self.host.global_callback(dt), jax.ShapeDtypeStruct(x.shape[:-1], dt), x,
                                 vmap_method="expand_dims")

    @staticmethod
    def host_errors(objective):
        return host_errors(objective)


@dataclasses.dataclass(frozen=True)
class PythonLocal:
    """local_fn of a Python objective.  The client index goes to the host with the point: under the
    engine's vmap over clients the point is unbatched and arrives once (expand_dims gives it a size-1
    client axis), so the host evaluates one row of local_fn for all M clients."""
    host: _Host
    dtype: Any = np.float32

    def __call__(self, data, x, m):
        dt = _result_dtype(self.dtype, x)
        m = jnp.asarray(m, jnp.int32)
        return jax.pure_callback(self.host.local_callback(dt), jax.ShapeDtypeStruct(x.shape[:-1] + m.shape, dt),
                                 x, m, vmap_method="expand_dims")

    @staticmethod
    def host_errors(objective):
        return host_errors(objective)


def _host_of(objective) -> _Host | None:
    for f in (getattr(objective, "global_fn", None), getattr(objective, "local_fn", None)):
        if isinstance(f, (PythonGlobal, PythonLocal)):
            return f.host
    return None


# ------------------------------------------------------------------------------ public API
def raise_pending(objective) -> None:
    """Raise the first failure of a Python objective's callbacks since the last check, as a
    :class:`PythonObjectiveError` naming the objective with the original message (its ``__cause__``
    is the original exception), and forget it.  Does nothing for other objectives or when no call
    failed, so the engine can call it after every run."""
    host = _host_of(objective)
    if host is None:
        return
    with host.lock:
        failure, calls = host.failure, host.failed_calls
        host.failure, host.failed_calls = None, 0
    if failure is None:
        return
    err, label, n, point = failure
    where = f" (in a call with {n} distinct point(s), the first x = {np.array2string(point, precision=6)})" \
        if point is not None else ""
    more = f"; {calls - 1} later call(s) failed too" if calls > 1 else ""
    message = f"{_message(host.name, err, label)}{where}{more}; no result was produced"
    raise PythonObjectiveError(message) from (None if isinstance(err, PythonObjectiveError) else err)


def clear_pending(objective) -> None:
    """Forget recorded failures (e.g. of an evaluation outside the engine) before a run."""
    host = _host_of(objective)
    if host is not None:
        with host.lock:
            host.failure, host.failed_calls = None, 0


@contextlib.contextmanager
def host_errors(objective):
    """``with host_errors(objective): <execute a run>``: forgets earlier failures on entry and raises
    the run's first failure on a normal exit (see :func:`raise_pending`); the engine enters it through
    :meth:`objectives.Objective.host_errors`."""
    clear_pending(objective)
    yield
    raise_pending(objective)


def stats(objective, reset: bool = False) -> dict:
    """Host calls of a Python objective so far: ``global_calls``, ``local_calls``, ``points`` (values
    returned to JAX), ``distinct_points`` (rows the Python functions evaluated) and ``seconds`` on
    the host.  Probe calls at construction are not counted."""
    host = _host_of(objective)
    if host is None:
        raise ValueError(f"objective {getattr(objective, 'name', objective)!r} is not a Python objective")
    with host.lock:
        out = dict(host.stats)
        if reset:
            host.reset_stats()
    return out


def _bound(name: str, side: str, value) -> np.ndarray:
    """A side of the box as a 1-D float64 array: a real number or a flat sequence of them (strings,
    booleans and nested sequences are refused, naming the side, rather than converted)."""
    items = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
    bad = [v for v in items if not is_real(v)]
    if bad or not items:
        got = f"an element {bad[0]!r:.40} ({type(bad[0]).__name__})" if bad else "an empty sequence"
        raise TypeError(f"objective {name!r}: {side} must be a real number or a sequence of real numbers, got {got}")
    return np.atleast_1d(np.asarray(value, np.float64))


def _box(name: str, lo, hi) -> tuple[tuple, tuple]:
    lo_a, hi_a = _bound(name, "lo", lo), _bound(name, "hi", hi)
    if lo_a.ndim != 1 or hi_a.ndim != 1:
        raise ValueError(f"objective {name!r}: lo and hi must be numbers or 1-D sequences, got lo={lo!r}, hi={hi!r}")
    # A number is the same bound in every dimension; two sequences of different lengths are a
    # mistake (which of the two is the dimension?), not a number to broadcast.
    if np.ndim(lo) == 0 and hi_a.size > 1:
        lo_a = np.full(hi_a.size, lo_a[0])
    if np.ndim(hi) == 0 and lo_a.size > 1:
        hi_a = np.full(lo_a.size, hi_a[0])
    if lo_a.size != hi_a.size:
        raise ValueError(f"objective {name!r}: lo and hi must have the same length (the dimension D), got "
                         f"lo of length {lo_a.size} ({lo!r}) and hi of length {hi_a.size} ({hi!r})")
    return tuple(float(v) for v in lo_a), tuple(float(v) for v in hi_a)


def from_python(fn: Callable, lo: Any, hi: Any, f_star: float, name: str = "python", num_clients: int = 1,
                local_fn: Callable | None = None, dtype=np.float32, probe: bool = True,
                unique: bool = True) -> Objective:
    """An :class:`Objective` from NumPy-vectorised Python functions.

    ``fn(X) -> values``: X of shape (n, D) float64, values of shape (n,): the global objective.
    ``local_fn(X, clients) -> (n,)``: client ``clients[i]``'s local objective at ``X[i]`` (int64
    client indices), called with only the pairs a run uses; or ``local_fn(X) -> (n, M)``: column m
    is client m's local objective at every point (a function that can take two positional
    arguments is the first form); None: every client sees ``fn``.  ``fn`` must be the mean of the
    clients' local objectives (checked on the probe points).
    ``lo``, ``hi``: the box (numbers or length-D sequences); ``f_star``: sup of fn over the box.
    ``dtype``: of the values returned to JAX (None: the points' dtype).  ``probe``: evaluate fn
    (and local_fn) once on a few points inside the box now and refuse a wrong shape or type
    before anything compiles.  ``unique``: evaluate only the distinct points of each call.
    See the module docstring for the cost model and how errors reach the user.
    """
    return _build(fn, lo, hi, f_star, name, num_clients, local_fn, dtype, probe, unique,
                  fn_label=_label(fn, "fn"), local_label=_label(local_fn, "local_fn"))


def _label(f, role: str) -> str:
    qual = getattr(f, "__qualname__", None) or type(f).__name__
    return f"{role} {qual}" if role == "fn" or f is not None else role


def _build(fn, lo, hi, f_star, name, num_clients, local_fn, dtype, probe, unique, fn_label, local_label) -> Objective:
    if not callable(fn):
        raise TypeError(f"objective {name!r}: fn must be callable, got {type(fn).__name__}")
    if local_fn is not None and not callable(local_fn):
        raise TypeError(f"objective {name!r}: local_fn must be callable or None, got {type(local_fn).__name__}")
    lo, hi = _box(name, lo, hi)
    if dtype is not None:
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"objective {name!r}: dtype must be a floating dtype (np.float32, 'float64') or None, "
                            f"got {dtype!r:.60}") from None
        if dtype.kind != "f":
            raise ValueError(f"objective {name!r}: dtype must be a floating dtype or None, got {dtype}")
    if isinstance(f_star, (np.floating, np.integer)):
        f_star = float(f_star)
    if isinstance(num_clients, bool) or not isinstance(num_clients, (int, np.integer)) or num_clients < 1:
        raise ValueError(f"objective {name!r}: num_clients must be an integer >= 1, got {num_clients!r}")
    host = _Host(name, fn, local_fn, int(num_clients), len(lo), bool(unique), fn_label, local_label)
    objective = Objective(name=name, lo=lo, hi=hi, f_star=f_star, num_clients=host.num_clients,
                          global_fn=PythonGlobal(host, dtype), local_fn=PythonLocal(host, dtype), data={})
    if probe:
        _probe(host, lo, hi)
    return objective


def _probe(host: _Host, lo, hi) -> None:
    X = probe_points(lo, hi)

    def run(evaluate, label):
        try:
            return evaluate(X)
        except PythonObjectiveError:
            raise
        except Exception as err:            # noqa: BLE001 (anything the user's function raises)
            raise PythonObjectiveError(f"{_message(host.name, err, label)} at the probe points {X.tolist()}") from err

    g = run(host.values, host.fn_label)
    local = run(host.local_columns, host.local_label) if host.local_fn is not None else None
    if local is not None:
        check_mean(host.name, X, g, local, global_label="fn", of=f"local_fn's {host.num_clients} columns")


class _PyXAB:
    """fn of a PyXAB-style object: ``obj.f`` on one point (a list of floats, as PyXAB's algorithms
    pass it), looped over the rows."""

    def __init__(self, obj, name: str):
        self.obj, self.name = obj, name

    def __call__(self, X):
        out = np.empty(X.shape[0])
        for i, row in enumerate(X):
            value = np.asarray(self.obj.f([float(v) for v in row]))
            if value.size != 1 or value.dtype.kind not in "biuf":
                raise PythonObjectiveError(f"objective {self.name!r}: {type(self.obj).__name__}.f returned "
                                           f"{value!r} at x = {row.tolist()}; expected one number per point")
            out[i] = value.reshape(())
        return out


def from_pyxab(obj: Any, lo: Any, hi: Any, f_star: float | None = None, name: str | None = None, num_clients: int = 1,
               dtype=np.float32, probe: bool = True, unique: bool = True) -> Objective:
    """An :class:`Objective` from an object with PyXAB's interface: ``obj.f(x)`` evaluates ONE point
    (a list of D floats) and ``obj.fmax`` is its maximum.  The host loops over the distinct points of
    each call.  Every client sees ``obj.f`` (PyXAB objectives are not federated).

    ``f_star``: default ``obj.fmax``.  Pass the true supremum when PyXAB's is not exact: PyXAB's
    Garland states ``fmax = 1`` while its maximum is 4 (pi/6)(1 - pi/6) = 0.99777 (at x = pi/6),
    which would add 0.0022 of regret to every round (``objectives.synthetic.GARLAND_F_STAR``).
    ``name``: default ``"pyxab-<class name>"``.  Other arguments as for :func:`from_python`.
    """
    if not callable(getattr(obj, "f", None)):
        raise TypeError(f"from_pyxab needs an object with a method f(x) (PyXAB's interface), got {type(obj).__name__}")
    name = name or f"pyxab-{type(obj).__name__.lower()}"
    if f_star is None:
        if not hasattr(obj, "fmax"):
            raise ValueError(f"objective {name!r}: {type(obj).__name__} has no fmax; pass f_star")
        f_star = obj.fmax
    return _build(_PyXAB(obj, name), lo, hi, f_star, name, num_clients, None, dtype, probe, unique,
                  fn_label=f"{type(obj).__name__}.f", local_label="local_fn")


__all__ = ["from_python", "from_pyxab", "raise_pending", "clear_pending", "host_errors", "stats",
           "PythonObjectiveError", "probe_points"]
