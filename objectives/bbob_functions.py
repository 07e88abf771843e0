"""The 24 noiseless BBOB functions of COCO (Hansen, Finck, Ros, Auger 2009) in plain JAX: COCO's
precision f_k(x) - f_opt of an instance (:func:`precision`), the reward (:class:`Reward`) and the
instance's arrays as evaluation data (:func:`device_arrays`); :class:`SharedReward` and
:func:`shared_arrays` let every function of a dimension share a program.

The pipelines follow COCO's C code (numbbo/coco, code-experiments/src/f_*.c, transform_*.c);
tests/test_bbob.py checks every function against COCO's own ``cocoex``.  The formulas are written
without cancellation so that float32 keeps its precision near x_opt.  The rewritten formulas, the
agreement with COCO and the batch invariance: docs/guides/paper-figures.md, section "The objectives in detail", "COCO's BBOB functions".
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from objectives.bbob_instances import MU0, SCHWEFEL_X, Instance, powers
from objectives.ordered import pairwise_mean, pairwise_sum


def _c(values, x):
    """A host constant in x's dtype."""
    return jnp.asarray(np.asarray(values, np.float64), x.dtype)


def mv(M, v):
    """M @ v as fixed-order sums over each row (also the f* search's product, see bbob_search)."""
    return pairwise_sum(M * v[None, :])


def _offset(d, x):
    """x - x_opt with x_opt carried as a rounded value plus its rounding error: x - x_opt_hi is exact
    near the optimum, so the float32 function is optimal at x_opt itself, not at x_opt rounded to
    float32 (for the ill-conditioned functions that moves the optimal value by 1e-7 to 1e-4)."""
    return (x - d["xopt"]) - d["xopt_lo"]


def _penalty(x):
    """sum max(0, |x_i| - 5)^2: COCO's boundary penalty (0 inside the box)."""
    return pairwise_sum(jnp.maximum(jnp.abs(x) - 5.0, 0.0) ** 2)


def _safe_log(a):
    return jnp.log(jnp.where(a > 0, a, 1.0))


def t_osz(v):
    """COCO's oscillation T_osz, written as |v| exp(0.049 (sin c1 + sin c2)) with c = 10 log|v|:
    equal to COCO's (exp(c + 0.49 (...)))^0.1 without overflowing exp(c) in float32."""
    a = jnp.abs(v)
    c = 10.0 * _safe_log(a)
    pos = a * jnp.exp(0.049 * (jnp.sin(c) + jnp.sin(0.79 * c)))
    neg = -a * jnp.exp(0.049 * (jnp.sin(0.55 * c) + jnp.sin(0.31 * c)))
    return jnp.where(v > 0, pos, jnp.where(v < 0, neg, jnp.zeros_like(v)))


def t_asy(v, beta):
    """COCO's asymmetry T_asy^beta: v_i^(1 + beta i / (D - 1) sqrt(v_i)) where v_i > 0."""
    D = v.shape[-1]
    slope = _c(beta * np.arange(D) / (D - 1.0), v)
    safe = jnp.where(v > 0, v, 1.0)
    return jnp.where(v > 0, jnp.exp((1.0 + slope * jnp.sqrt(safe)) * jnp.log(safe)), v)


def _rastrigin(z):
    """10 (D - sum cos 2 pi z) + sum z^2, as sum (20 sin^2(pi z) + z^2) (no cancellation near 0)."""
    return pairwise_sum(20.0 * jnp.sin(jnp.pi * z) ** 2 + z * z)


def _ellipsoid(z):
    return pairwise_sum(_c(powers(1e6, z.shape[-1]), z) * z * z)


def _rosenbrock(z):
    a = z[:-1] * z[:-1] - z[1:]
    b = z[:-1] - 1.0
    return pairwise_sum(100.0 * a * a + b * b)


def _f1(d, x):
    z = _offset(d, x)
    return pairwise_sum(z * z)


def _f2(d, x):
    return _ellipsoid(t_osz(_offset(d, x)))


def _f3(d, x):
    z = _c(powers(math.sqrt(10.0), x.shape[-1]), x) * t_asy(t_osz(_offset(d, x)), 0.2)
    return _rastrigin(z)


def _f4(d, x):
    D = x.shape[-1]
    v = t_osz(_offset(d, x))
    even = np.arange(D) % 2 == 0
    scale = _c(powers(math.sqrt(10.0), D), x) * jnp.where(jnp.asarray(even) & (v > 0), 10.0, 1.0)
    return _rastrigin(scale * v) + 100.0 * _penalty(x)


def _f5(d, x):
    # sum 5 |s_i| - s_i z_i with s_i = sign_i 10^(i/(D-1)), as sum |s_i| (5 - sign_i z_i): exact at x_opt.
    # z_i = x_i, except x_opt_i where x_opt_i x_i >= 25 (beyond the optimal face the slope is flat).
    return pairwise_sum(_c(powers(10.0, x.shape[-1]), x) * (5.0 - jnp.minimum(d["sign"] * x, 5.0)))


def _f6(d, x):
    z = mv(d["M"], _offset(d, x))
    s = pairwise_sum(jnp.where(d["xopt"] * z > 0, 1e4, 1.0) * z * z)
    return t_osz(s) ** 0.9


def _f7(d, x):
    D = x.shape[-1]
    z = _c(powers(math.sqrt(10.0), D), x) * mv(d["R"], _offset(d, x))
    # COCO rounds with floor(v + 0.5); |v| > 0.5 to integers, the rest to tenths.
    rounded = jnp.where(jnp.abs(z) > 0.5, jnp.floor(z + 0.5), jnp.floor(10.0 * z + 0.5) / 10.0)
    zz = mv(d["Q"], rounded)
    core = pairwise_sum(_c(powers(100.0, D), x) * zz * zz)
    return 0.1 * jnp.maximum(1e-4 * jnp.abs(z[0]), core) + _penalty(x)


def _f8(d, x):
    scale = max(1.0, math.sqrt(x.shape[-1]) / 8.0)
    return _rosenbrock(scale * _offset(d, x) + 1.0)


def _f9(d, x):
    scale = max(1.0, math.sqrt(x.shape[-1]) / 8.0)
    return _rosenbrock(scale * mv(d["R"], x) + 0.5)


def _f10(d, x):
    return _ellipsoid(t_osz(mv(d["R"], _offset(d, x))))


def _f11(d, x):
    z = t_osz(mv(d["R"], _offset(d, x)))
    w = np.ones(x.shape[-1])
    w[0] = 1e6
    return pairwise_sum(_c(w, x) * z * z)


def _f12(d, x):
    z = mv(d["R"], t_asy(mv(d["R"], _offset(d, x)), 0.5))
    w = np.full(x.shape[-1], 1e6)
    w[0] = 1.0
    return pairwise_sum(_c(w, x) * z * z)


def _f13(d, x):
    z = mv(d["M"], _offset(d, x))
    rest = pairwise_sum(z[1:] * z[1:])
    return z[0] * z[0] + 100.0 * jnp.sqrt(rest)


def _f14(d, x):
    D = x.shape[-1]
    z = jnp.abs(mv(d["R"], _offset(d, x)))
    expo = _c(2.0 + 4.0 * np.arange(D) / (D - 1.0), x)
    terms = jnp.where(z > 0, jnp.exp(expo * _safe_log(z)), 0.0)
    return jnp.sqrt(pairwise_sum(terms))


def _f15(d, x):
    z = mv(d["M"], t_asy(t_osz(mv(d["R"], _offset(d, x))), 0.2))
    return _rastrigin(z)


_WEIERSTRASS_K = 12


def _f16(d, x):
    # COCO: 10 (mean_i sum_k a_k cos(2 pi b_k (z_i + 1/2)) - f0)^3 with a_k = 2^-k, b_k = 3^k and
    # f0 = sum_k a_k cos(pi b_k) = -sum_k a_k (b_k odd).  Each term minus its share of f0 is
    # a_k (1 - cos(2 pi b_k z_i)) = 2 a_k sin^2(pi b_k z_i): the same value, without cancellation.
    D = x.shape[-1]
    z = mv(d["M"], t_osz(mv(d["R"], _offset(d, x))))
    k = np.arange(_WEIERSTRASS_K)
    a, b = _c(2.0 * 0.5 ** k, x), _c(3.0 ** k, x)
    terms = a[None, :] * jnp.sin(jnp.pi * b[None, :] * z[:, None]) ** 2          # (D, K)
    s = pairwise_sum(pairwise_sum(terms)) / D
    return 10.0 * s ** 3 + 10.0 / D * _penalty(x)


def _schaffers(d, x):
    z = mv(d["M"], t_asy(mv(d["R"], _offset(d, x)), 0.5))
    s = z[:-1] * z[:-1] + z[1:] * z[1:]
    safe = jnp.where(s > 0, s, 1.0)
    root4 = jnp.where(s > 0, jnp.exp(0.25 * jnp.log(safe)), 0.0)
    root10 = jnp.where(s > 0, jnp.exp(0.1 * jnp.log(safe)), 0.0)
    terms = root4 * (1.0 + jnp.sin(50.0 * root10) ** 2)
    return pairwise_mean(terms) ** 2 + 10.0 * _penalty(x)


def _f19(d, x):
    # COCO: 10 + 10 / (D - 1) sum (s_i / 4000 - cos s_i), written with 1 - cos s = 2 sin^2(s / 2).
    scale = max(1.0, math.sqrt(x.shape[-1]) / 8.0)
    z = scale * mv(d["R"], x) + 0.5
    a = z[:-1] * z[:-1] - z[1:]
    b = 1.0 - z[:-1]
    s = 100.0 * a * a + b * b
    return 10.0 * pairwise_mean(s / 4000.0 + 2.0 * jnp.sin(0.5 * s) ** 2)


# Schwefel's optimal z = 100 * 2 |x_opt_i| and C - z* sin(sqrt z*) (about 1e-13, float64 on the host).
_SCHWEFEL_F = 418.9828872724339             # COCO's constant C of f20
_SCHWEFEL_Z = 100.0 * SCHWEFEL_X
_SCHWEFEL_C0 = _SCHWEFEL_F - _SCHWEFEL_Z * math.sin(math.sqrt(_SCHWEFEL_Z))


def _f20(d, x):
    # COCO: 0.01 (penalty + C - mean_i z_i sin sqrt|z_i|), C = 418.98...  Near the optimum z_i = z* + u_i
    # and C - z sin sqrt z is a difference of two numbers near 419: in float32 that alone is 6e-7 of
    # regret at x_opt.  For z > 0 it is computed as c0 - (u sin sqrt z + z* (sin sqrt z - sin sqrt z*))
    # with sin a - sin b = 2 cos((a + b) / 2) sin((a - b) / 2) and sqrt z - sqrt z* = u / (sqrt z + sqrt z*):
    # the same value, whose rounding scales with u instead of with 419.
    D = x.shape[-1]
    two_abs_xopt = SCHWEFEL_X                     # 2 |x_opt_i| for every i
    xh = 2.0 * d["sign"] * x
    zh = xh.at[1:].add(0.25 * (xh[:-1] - two_abs_xopt))
    u = 100.0 * _c(powers(math.sqrt(10.0), D), x) * (zh - two_abs_xopt)
    z = u + _SCHWEFEL_Z
    penalty = pairwise_sum(jnp.maximum(jnp.abs(z) - 500.0, 0.0) ** 2)
    root = jnp.sqrt(jnp.abs(z))
    root_opt = math.sqrt(_SCHWEFEL_Z)
    half_gap = 0.5 * u / (root + root_opt)
    near = _SCHWEFEL_C0 - (u * jnp.sin(root) + _SCHWEFEL_Z * 2.0 * jnp.cos(root_opt + half_gap) * jnp.sin(half_gap))
    far = _SCHWEFEL_F - z * jnp.sin(root)
    return 0.01 * (penalty + pairwise_mean(jnp.where(z > 0, near, far)))


def _gallagher_value(d, x):
    # COCO: 10 - max(0, max_i w_i exp(-a_i / (2D))), then T_osz and squared.  Written as
    # min(10, min_i (10 - w_i) - w_i expm1(-a_i / (2D))) so the global peak (w = 10) has no cancellation.
    D = x.shape[-1]
    y = mv(d["R"], x)
    diff = y[None, :] - d["centres"]
    a = pairwise_sum(d["scales"] * diff * diff)
    g = jnp.minimum(jnp.min(d["gap"] - d["height"] * jnp.expm1(-0.5 / D * a)), 10.0)
    return t_osz(g) ** 2 + _penalty(x)


def _f23(d, x):
    D = x.shape[-1]
    z = mv(d["M"], _offset(d, x))
    p = _c(2.0 ** np.arange(1, 33), x)
    v = p[None, :] * z[:, None]                     # exact: scaling by powers of two
    # |v - round(v)| is the distance to the nearest integer whatever the tie rule, so rint (exact in
    # float32 even where v + 0.5 is not) gives COCO's |v - floor(v + 0.5)|.
    t = pairwise_sum(jnp.abs(v - jnp.round(v)) / p[None, :])
    i = _c(np.arange(1, D + 1), x)
    log_prod = pairwise_sum(jnp.log1p(i * t))
    return 10.0 / D ** 2 * jnp.expm1(10.0 / D ** 1.2 * log_prod) + _penalty(x)


def _f24(d, x):
    D = x.shape[-1]
    s = 1.0 - 0.5 / (math.sqrt(D + 20.0) - 4.1)
    mu1 = -math.sqrt((MU0 * MU0 - 1.0) / s)
    xh = 2.0 * d["sign"] * x
    z = mv(d["Q"], _c(powers(10.0, D), x) * mv(d["R"], xh - MU0))
    near = pairwise_sum((xh - MU0) ** 2)
    far = D + s * pairwise_sum((xh - mu1) ** 2)
    return jnp.minimum(near, far) + 20.0 * pairwise_sum(jnp.sin(jnp.pi * z) ** 2) + 1e4 * _penalty(x)


_PRECISION = {
    1: _f1, 2: _f2, 3: _f3, 4: _f4, 5: _f5, 6: _f6, 7: _f7, 8: _f8, 9: _f9, 10: _f10, 11: _f11, 12: _f12,
    13: _f13, 14: _f14, 15: _f15, 16: _f16, 17: _schaffers, 18: _schaffers, 19: _f19, 20: _f20,
    21: _gallagher_value, 22: _gallagher_value, 23: _f23, 24: _f24,
}


def _in_dtype_of(x, data: dict) -> dict:
    """The instance's arrays in x's float type (the function number, if any, left out)."""
    return {k: jnp.asarray(v).astype(x.dtype) for k, v in data.items() if k != "function"}


def precision(function: int, data: dict, x):
    """COCO's f(x) - f_opt for one point x of shape (D,) (plain JAX; data: the instance's arrays)."""
    return _PRECISION[function](_in_dtype_of(x, data), x)


@dataclasses.dataclass(frozen=True)
class Reward:
    """-(f_k(x) - f_opt) of the instance whose arrays are passed as data: a hashable callable, so
    objectives built alike compare equal and share a compiled program."""
    function: int

    def __call__(self, data, x):
        return -precision(self.function, data, x)


# f21's peak count, the most of any function: shared_arrays pads f22's 21 peaks to it.
_PEAKS = 101


@dataclasses.dataclass(frozen=True)
class SharedReward:
    """-(f_k(x) - f_opt) for any k of ``functions``, read from the data (:func:`shared_arrays`) by a
    switch over those functions: the BBOB objectives of one dimension built with the same tuple then
    have the same program, so a study of several functions compiles once per algorithm and dimension.
    The number must not be batched (a batched switch computes every branch), which is why the
    heterogeneity 'instances', whose data are stacked over clients, keeps :class:`Reward`."""
    functions: tuple

    def __call__(self, data, x):
        branch = np.zeros(len(_PRECISION) + 1, np.int32)
        branch[list(self.functions)] = np.arange(len(self.functions))
        index = jnp.asarray(branch)[data["function"]]
        return -jax.lax.switch(index, [_PRECISION[k] for k in self.functions], _in_dtype_of(x, data), x)


def shared_arrays(inst: Instance) -> dict:
    """:func:`device_arrays` of the instance padded to the arrays every function reads, plus its number
    (``function``, int32) for :class:`SharedReward`.  The padding leaves each function's value as it
    is: arrays a function does not read are zeros, and f22's extra peaks have height 0 and gap +inf, so
    they never attain the minimum over peaks."""
    dtype = jnp.result_type(float)
    D = inst.dim
    own = device_arrays(inst)
    shapes = {"xopt": (D,), "xopt_lo": (D,), "sign": (D,), "M": (D, D), "R": (D, D), "Q": (D, D),
              "centres": (_PEAKS, D), "scales": (_PEAKS, D), "height": (_PEAKS,), "gap": (_PEAKS,)}
    out = {"function": jnp.int32(inst.function)}
    for key, shape in shapes.items():
        fill = np.inf if key == "gap" else 0.0
        padded = np.full(shape, fill)
        if key in own:
            value = np.asarray(own[key], np.float64)
            padded[tuple(slice(0, n) for n in value.shape)] = value
        out[key] = jnp.asarray(padded, dtype)
    return out


def device_arrays(inst: Instance) -> dict:
    """The instance's arrays as JAX arrays of the default float type (float32, float64 under x64);
    x_opt also as its rounding error ``xopt_lo`` (see ``_offset``)."""
    dtype = jnp.result_type(float)
    out = {k: jnp.asarray(v, dtype) for k, v in inst.arrays.items()}
    if "xopt" in out:
        out["xopt_lo"] = jnp.asarray(inst.arrays["xopt"] - np.asarray(out["xopt"], np.float64), dtype)
    return out

