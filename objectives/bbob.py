"""The 24 noiseless BBOB functions of COCO (Hansen, Finck, Ros, Auger 2009), as fedpne-jax objectives.

Each function f_k is defined on [-5, 5]^D with COCO's instances: for a function number k, a
dimension D and an instance number i, COCO derives the optimum x_opt, the optimal value f_opt, the
rotations R and Q and every other random ingredient (Gallagher's peaks, Schwefel's and Lunacek's
sign vectors, ...) from the bbob2009 legacy generators (a Park-Miller generator shuffled through a
32-slot table, Box-Muller normals, Gram-Schmidt rotations) seeded with k + 10000 i (3 + 10000 i for
f4, 17 + 10000 i for f18; f_opt from two normals of its own seeds).  :func:`instance` reproduces
them on the host in NumPy float64, once per (k, D, i).  The pipelines (which transformation wraps
which, which seed feeds which matrix, COCO's departures from the 2009 documentation) follow COCO's
C code (numbbo/coco, code-experiments/src/f_*.c, transform_*.c, suite_bbob.c,
suite_bbob_legacy_code.c); tests/test_bbob.py checks every function against COCO's own ``cocoex``.

fedpne-jax maximises, so the reward is -(f(x) - f_opt): the regret of a point is COCO's precision
f(x) - f_opt and f* = 0, attained at x_opt.  The reward is computed as -(f(x) - f_opt) directly,
never as f_opt - f(x): f_opt (up to 1000 in size) cancels analytically, so float32 keeps its
relative precision near the optimum, where regret is measured.  For the same reason the formulas
are rewritten without cancellation where an exact identity allows it (Rastrigin's
10 (D - sum cos 2 pi z) as 20 sum sin^2(pi z), Weierstrass' offset f0, Gallagher's 10 - 10 exp(-a)
as -10 expm1(-a), Katsuura's product as expm1 of a sum of log1p, Schwefel's 418.98 - z sin sqrt z
around its optimum, T_osz without the overflowing exp(log(x) / 0.1)), and x_opt is carried with
its float32 rounding error.  Agreement with COCO, |ours - COCO| / max(|COCO|, 1) over D = 1..40:
float64 at most 2e-12, 3e-10 for f16, f19, f23 (high-frequency terms); float32 at most 4e-5, and
1e-3 to 3e-3 for f16, f19, f23 (see tests/test_bbob.py).

The instance data are leaves of the objective's ``data`` (f_opt is not needed: it cancels), the
function number is static, so objectives that differ only in their instance share one compiled
program.  Reductions over coordinates use objectives.ordered, so a point's value does not depend
on its batch; matrix-vector products are written as such sums for the same reason.

D = 1 is accepted only for f1, f2, f10 and f11: the other functions divide by D - 1 (NaN in COCO)
or need pairs of coordinates (COCO asserts D > 1).

Heterogeneity: 'none', 'shift' and 'fourier' as for the synthetic functions (heterogeneity.py;
the global objective is exactly the BBOB reward, f* = 0), and 'instances' (beyond the paper):
client m sees COCO's instance i + m, its own reward -(f_{i+m}(x) - f_opt,{i+m}), and the global
objective is the clients' mean reward.  Its f* is not 0 (the clients' optima differ) and has no
closed form; :func:`instances_f_star` searches for it (see there for the method and its accuracy).
"""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from objectives.ordered import pairwise_mean, pairwise_sum

NUM_FUNCTIONS = 24
LO, HI = -5.0, 5.0
ONE_DIMENSIONAL = (1, 2, 10, 11)

NAMES = {
    1: "sphere", 2: "separable ellipsoid", 3: "Rastrigin", 4: "Bueche-Rastrigin", 5: "linear slope",
    6: "attractive sector", 7: "step ellipsoid", 8: "Rosenbrock", 9: "rotated Rosenbrock", 10: "ellipsoid",
    11: "discus", 12: "bent cigar", 13: "sharp ridge", 14: "different powers", 15: "rotated Rastrigin",
    16: "Weierstrass", 17: "Schaffer F7", 18: "ill-conditioned Schaffer F7", 19: "Griewank-Rosenbrock F8F2",
    20: "Schwefel x sin(sqrt|x|)", 21: "Gallagher 101 peaks", 22: "Gallagher 21 peaks", 23: "Katsuura",
    24: "Lunacek bi-Rastrigin",
}

# Schwefel's optimum per coordinate (COCO's constant) and the Lunacek centre mu0.
_SCHWEFEL_X = 4.2096874637
_SCHWEFEL_F = 418.9828872724339
_MU0 = 2.5


def check_function(function) -> int:
    if isinstance(function, bool) or not isinstance(function, (int, np.integer)) \
            or not 1 <= function <= NUM_FUNCTIONS:
        raise ValueError(f"function: the BBOB function number must be an integer from 1 to {NUM_FUNCTIONS}, "
                         f"got {function!r}")
    return int(function)


MAX_DIM = 1000     # COCO's suites go to 40 (bbob) and 640 (bbob-largescale)


def check_dim(function: int, dim) -> int:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    if dim > MAX_DIM:
        # The instance's rotations are D x D matrices built with exactly rounded host sums (O(D^3)),
        # and every evaluation multiplies by them: D = 10^5 would need 80 GB per matrix.
        raise ValueError(f"dim: BBOB functions are built here for dim <= {MAX_DIM} (their rotation matrices "
                         f"have dim^2 entries: {8 * int(dim) ** 2 / 2**30:.3g} GiB each at dim={dim}), got {dim}")
    if dim == 1 and function not in ONE_DIMENSIONAL:
        raise ValueError(f"dim: BBOB f{function} ({NAMES[function]}) needs dim >= 2 (COCO defines only "
                         f"f{', f'.join(map(str, ONE_DIMENSIONAL))} in one dimension), got 1")
    return int(dim)


def check_instance(instance) -> int:
    # Checked against cocoex up to 10^9 - 1; COCO's generator casts seed / 127773 to a 32-bit int.
    if isinstance(instance, bool) or not isinstance(instance, (int, np.integer)) or not 1 <= instance < 10**9:
        raise ValueError(f"instance must be an integer >= 1 (COCO's instance number), got {instance!r}")
    return int(instance)


# ------------------------------------------------------------------ COCO's bbob2009 random generators


def legacy_uniform(n: int, seed: int) -> np.ndarray:
    """COCO's bbob2009_unif: n uniforms in (0, 1) from a Park-Miller generator (16807, 2^31 - 1,
    Schrage's factorisation) read through a 32-slot shuffle table warmed up by 40 draws.  Integer
    arithmetic, so the numbers are exactly COCO's."""
    seed = max(abs(int(seed)), 1)
    table = [0] * 32

    def step(s):
        t = s // 127773
        s = 16807 * (s - t * 127773) - 2836 * t
        return s + 2147483647 if s < 0 else s

    for i in range(39, -1, -1):
        seed = step(seed)
        if i < 32:
            table[i] = seed
    current = table[0]
    out = np.empty(n, np.float64)
    for i in range(n):
        seed = step(seed)
        slot = current // 67108865
        current = table[slot]
        table[slot] = seed
        out[i] = current / 2.147483647e9
    out[out == 0.0] = 1e-99
    return out


def legacy_gauss(n: int, seed: int) -> np.ndarray:
    """COCO's bbob2009_gauss: Box-Muller on 2n legacy uniforms (first half radii, second half angles)."""
    u = legacy_uniform(2 * n, seed)
    g = np.array([math.sqrt(-2.0 * math.log(u[i])) * math.cos(2.0 * math.pi * u[n + i]) for i in range(n)])
    g[g == 0.0] = 1e-99
    return g


def _dot(a, b) -> float:
    """a . b correctly rounded (math.fsum), so the same on every processor: numpy's dot and @ call
    the BLAS kernel picked for the processor, whose summation order differs between processors."""
    return math.fsum(np.asarray(a, np.float64) * np.asarray(b, np.float64))


def _matmul(*matrices) -> np.ndarray:
    """The product of the matrices (or a final vector), each entry a correctly rounded :func:`_dot`."""
    out = np.asarray(matrices[0], np.float64)
    for m in matrices[1:]:
        m = np.asarray(m, np.float64)
        if m.ndim == 1:
            out = np.array([_dot(row, m) for row in out])
        else:
            out = np.array([[_dot(row, col) for col in m.T] for row in out])
    return out


def legacy_rotation(seed: int, dim: int) -> np.ndarray:
    """COCO's bbob2009_compute_rotation: D^2 legacy normals filled column-major, then modified
    Gram-Schmidt on the columns.  Row i, column j is COCO's B[i][j]; the transformation is z = B x."""
    b = legacy_gauss(dim * dim, seed).reshape(dim, dim).T.copy()
    for i in range(dim):
        for j in range(i):
            b[:, i] -= _dot(b[:, i], b[:, j]) * b[:, j]
        b[:, i] /= math.sqrt(_dot(b[:, i], b[:, i]))
    return b


def legacy_xopt(seed: int, dim: int) -> np.ndarray:
    """COCO's bbob2009_compute_xopt: uniform on a 1e-4 grid of [-4, 4), 0 replaced by -1e-5."""
    x = 8.0 * np.floor(1e4 * legacy_uniform(dim, seed)) / 1e4 - 4.0
    x[x == 0.0] = -1e-5
    return x


def legacy_fopt(function: int, instance: int) -> float:
    """COCO's bbob2009_compute_fopt: a ratio of two legacy normals, rounded to 0.01, clipped to +-1000."""
    base = {4: 3, 18: 17}.get(function, function)
    seed = base + 10000 * instance
    g1, g2 = legacy_gauss(1, seed)[0], legacy_gauss(1, seed + 1)[0]
    return min(1000.0, max(-1000.0, math.floor(100.0 * 100.0 * g1 / g2 + 0.5) / 100.0))


def _powers(base: float, dim: int) -> np.ndarray:
    """base^(i / (D - 1)) for i = 0..D-1 (1 when D = 1, where COCO's loops never use it)."""
    if dim == 1:
        return np.ones(1)
    return base ** (np.arange(dim) / (dim - 1.0))


# ------------------------------------------------------------------------------------- instances


@dataclasses.dataclass(frozen=True)
class Instance:
    """One COCO problem (function, dim, instance) on the host, float64.

    ``arrays`` are what the evaluation reads (the objective's data); ``x_opt`` and ``f_opt`` are
    COCO's optimum and optimal value (f_opt is reported, not used: the reward is computed as
    -(f(x) - f_opt) without it)."""
    function: int
    dim: int
    instance: int
    x_opt: np.ndarray
    f_opt: float
    arrays: dict


def instance(function: int, dim: int, instance_number: int) -> Instance:
    """COCO's instance ``instance_number`` of BBOB function ``function`` in dimension ``dim``."""
    function = check_function(function)
    dim = check_dim(function, dim)
    instance_number = check_instance(instance_number)
    return _instance(function, dim, instance_number)


@functools.lru_cache(maxsize=256)
def _instance(k: int, D: int, inst: int) -> Instance:
    seed = k + 10000 * inst
    arrays: dict = {}
    if k in (1, 2, 3, 10, 11, 14):
        x_opt = legacy_xopt(seed, D)
        arrays["xopt"] = x_opt
        if k in (10, 11, 14):
            arrays["R"] = legacy_rotation(seed + 1000000, D)
    elif k == 4:
        x_opt = legacy_xopt(3 + 10000 * inst, D)
        x_opt[::2] = np.abs(x_opt[::2])            # in COCO's legacy code, not in the 2009 documentation
        arrays["xopt"] = x_opt
    elif k == 5:
        sign = np.where(legacy_xopt(seed, D) < 0.0, -1.0, 1.0)
        arrays["sign"] = sign
        x_opt = 5.0 * sign
    elif k in (6, 13, 23):
        x_opt = legacy_xopt(seed, D)
        cond = {6: 10.0, 13: 10.0, 23: 100.0}[k]
        arrays["xopt"] = x_opt
        arrays["M"] = _matmul(legacy_rotation(seed + 1000000, D), np.diag(_powers(math.sqrt(cond), D)),
                              legacy_rotation(seed, D))
    elif k == 7:
        x_opt = legacy_xopt(seed, D)
        arrays.update(xopt=x_opt, R=legacy_rotation(seed, D), Q=legacy_rotation(seed + 1000000, D))
    elif k == 8:
        x_opt = 0.75 * legacy_xopt(seed, D)
        arrays["xopt"] = x_opt
    elif k in (9, 19):
        R = legacy_rotation(seed, D)
        arrays["R"] = R
        # z = s R x + 1/2 (s = max(1, sqrt(D) / 8)) is optimal at z = 1.
        x_opt = _matmul(R.T, np.full(D, 0.5)) / max(1.0, math.sqrt(D) / 8.0)
    elif k == 12:
        x_opt = legacy_xopt(seed + 1000000, D)      # COCO's bent cigar draws x_opt from the rotation's seed
        arrays.update(xopt=x_opt, R=legacy_rotation(seed + 1000000, D))
    elif k in (15, 16):
        x_opt = legacy_xopt(seed, D)
        rot1 = legacy_rotation(seed + 1000000, D)
        cond = 10.0 if k == 15 else 0.01
        arrays.update(xopt=x_opt, R=rot1, M=_matmul(rot1, np.diag(_powers(math.sqrt(cond), D)), legacy_rotation(seed, D)))
    elif k in (17, 18):
        seed = 17 + 10000 * inst                  # f18 reuses f17's seed
        x_opt = legacy_xopt(seed, D)
        cond = 10.0 if k == 17 else 1000.0
        arrays.update(xopt=x_opt, R=legacy_rotation(seed + 1000000, D),
                      M=_matmul(np.diag(_powers(math.sqrt(cond), D)), legacy_rotation(seed, D)))
    elif k == 20:
        sign = np.where(legacy_uniform(D, seed) < 0.5, -1.0, 1.0)
        arrays["sign"] = sign
        x_opt = 0.5 * _SCHWEFEL_X * sign
    elif k in (21, 22):
        x_opt, arrays = _gallagher(seed, D, 101 if k == 21 else 21)
    elif k == 24:
        sign = np.where(legacy_gauss(D, seed) < 0.0, -1.0, 1.0)
        arrays.update(sign=sign, R=legacy_rotation(seed, D), Q=legacy_rotation(seed + 1000000, D))
        x_opt = 0.5 * _MU0 * sign
    else:                                           # pragma: no cover - check_function guards
        raise AssertionError(k)
    for a in arrays.values():
        a.setflags(write=False)
    x_opt = np.array(x_opt, np.float64)
    x_opt.setflags(write=False)
    return Instance(k, D, inst, x_opt, legacy_fopt(k, inst), arrays)


def _gallagher(seed: int, D: int, peaks: int):
    """Gallagher's peaks as COCO builds them: the rotation from the seed; peak i > 0 has height
    1.1 + 8 (i - 1) / (P - 2) and condition 1000^(rank / (P - 2)), its axis scales a random
    permutation of condition^(j / (D - 1) - 1/2) (the global peak has condition sqrt(1000) for 101
    peaks, 1000 for 21); centres uniform in [-c, b - c]^D, the global one shrunk by 0.8."""
    b, c = (10.0, 5.0) if peaks == 101 else (9.8, 4.9)
    R = legacy_rotation(seed, D)
    order = np.argsort(legacy_uniform(peaks - 1, seed), kind="stable")
    condition = np.empty(peaks)
    condition[0] = math.sqrt(1000.0) if peaks == 101 else 1000.0
    condition[1:] = 1000.0 ** (order / (peaks - 2.0))
    height = np.empty(peaks)
    height[0] = 10.0
    height[1:] = np.arange(peaks - 1) / (peaks - 2.0) * 8.0 + 1.1
    scales = np.empty((peaks, D))
    for i in range(peaks):
        perm = np.argsort(legacy_uniform(D, seed + 1000 * i), kind="stable")
        scales[i] = condition[i] ** (perm / (D - 1.0) - 0.5)
    u = legacy_uniform(D * peaks, seed).reshape(peaks, D)
    raw = b * u - c
    centres = _matmul(raw, R.T)                              # centre of peak i in rotated coordinates: R y_i
    centres[0] *= 0.8
    x_opt = 0.8 * raw[0]
    return x_opt, {"R": R, "centres": centres, "scales": scales, "height": height, "gap": 10.0 - height}


# --------------------------------------------------------------------------------- JAX evaluation


def _c(values, x):
    """A host constant in x's dtype."""
    return jnp.asarray(np.asarray(values, np.float64), x.dtype)


def _mv(M, v):
    """M @ v as fixed-order sums over each row."""
    return pairwise_sum(M * v[None, :])


def _mm(A, B):
    """A @ B as fixed-order sums (an XLA dot runs a kernel picked for the processor)."""
    return pairwise_sum(A[:, None, :] * B.T[None, :, :])


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
    return pairwise_sum(_c(_powers(1e6, z.shape[-1]), z) * z * z)


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
    z = _c(_powers(math.sqrt(10.0), x.shape[-1]), x) * t_asy(t_osz(_offset(d, x)), 0.2)
    return _rastrigin(z)


def _f4(d, x):
    D = x.shape[-1]
    v = t_osz(_offset(d, x))
    even = np.arange(D) % 2 == 0
    scale = _c(_powers(math.sqrt(10.0), D), x) * jnp.where(jnp.asarray(even) & (v > 0), 10.0, 1.0)
    return _rastrigin(scale * v) + 100.0 * _penalty(x)


def _f5(d, x):
    # sum 5 |s_i| - s_i z_i with s_i = sign_i 10^(i/(D-1)), as sum |s_i| (5 - sign_i z_i): exact at x_opt.
    # z_i = x_i, except x_opt_i where x_opt_i x_i >= 25 (beyond the optimal face the slope is flat).
    return pairwise_sum(_c(_powers(10.0, x.shape[-1]), x) * (5.0 - jnp.minimum(d["sign"] * x, 5.0)))


def _f6(d, x):
    z = _mv(d["M"], _offset(d, x))
    s = pairwise_sum(jnp.where(d["xopt"] * z > 0, 1e4, 1.0) * z * z)
    return t_osz(s) ** 0.9


def _f7(d, x):
    D = x.shape[-1]
    z = _c(_powers(math.sqrt(10.0), D), x) * _mv(d["R"], _offset(d, x))
    # COCO rounds with floor(v + 0.5); |v| > 0.5 to integers, the rest to tenths.
    rounded = jnp.where(jnp.abs(z) > 0.5, jnp.floor(z + 0.5), jnp.floor(10.0 * z + 0.5) / 10.0)
    zz = _mv(d["Q"], rounded)
    core = pairwise_sum(_c(_powers(100.0, D), x) * zz * zz)
    return 0.1 * jnp.maximum(1e-4 * jnp.abs(z[0]), core) + _penalty(x)


def _f8(d, x):
    scale = max(1.0, math.sqrt(x.shape[-1]) / 8.0)
    return _rosenbrock(scale * _offset(d, x) + 1.0)


def _f9(d, x):
    scale = max(1.0, math.sqrt(x.shape[-1]) / 8.0)
    return _rosenbrock(scale * _mv(d["R"], x) + 0.5)


def _f10(d, x):
    return _ellipsoid(t_osz(_mv(d["R"], _offset(d, x))))


def _f11(d, x):
    z = t_osz(_mv(d["R"], _offset(d, x)))
    w = np.ones(x.shape[-1])
    w[0] = 1e6
    return pairwise_sum(_c(w, x) * z * z)


def _f12(d, x):
    z = _mv(d["R"], t_asy(_mv(d["R"], _offset(d, x)), 0.5))
    w = np.full(x.shape[-1], 1e6)
    w[0] = 1.0
    return pairwise_sum(_c(w, x) * z * z)


def _f13(d, x):
    z = _mv(d["M"], _offset(d, x))
    rest = pairwise_sum(z[1:] * z[1:])
    return z[0] * z[0] + 100.0 * jnp.sqrt(rest)


def _f14(d, x):
    D = x.shape[-1]
    z = jnp.abs(_mv(d["R"], _offset(d, x)))
    expo = _c(2.0 + 4.0 * np.arange(D) / (D - 1.0), x)
    terms = jnp.where(z > 0, jnp.exp(expo * _safe_log(z)), 0.0)
    return jnp.sqrt(pairwise_sum(terms))


def _f15(d, x):
    z = _mv(d["M"], t_asy(t_osz(_mv(d["R"], _offset(d, x))), 0.2))
    return _rastrigin(z)


_WEIERSTRASS_K = 12


def _f16(d, x):
    # COCO: 10 (mean_i sum_k a_k cos(2 pi b_k (z_i + 1/2)) - f0)^3 with a_k = 2^-k, b_k = 3^k and
    # f0 = sum_k a_k cos(pi b_k) = -sum_k a_k (b_k odd).  Each term minus its share of f0 is
    # a_k (1 - cos(2 pi b_k z_i)) = 2 a_k sin^2(pi b_k z_i): the same value, without cancellation.
    D = x.shape[-1]
    z = _mv(d["M"], t_osz(_mv(d["R"], _offset(d, x))))
    k = np.arange(_WEIERSTRASS_K)
    a, b = _c(2.0 * 0.5 ** k, x), _c(3.0 ** k, x)
    terms = a[None, :] * jnp.sin(jnp.pi * b[None, :] * z[:, None]) ** 2          # (D, K)
    s = pairwise_sum(pairwise_sum(terms)) / D
    return 10.0 * s ** 3 + 10.0 / D * _penalty(x)


def _schaffers(d, x):
    z = _mv(d["M"], t_asy(_mv(d["R"], _offset(d, x)), 0.5))
    s = z[:-1] * z[:-1] + z[1:] * z[1:]
    safe = jnp.where(s > 0, s, 1.0)
    root4 = jnp.where(s > 0, jnp.exp(0.25 * jnp.log(safe)), 0.0)
    root10 = jnp.where(s > 0, jnp.exp(0.1 * jnp.log(safe)), 0.0)
    terms = root4 * (1.0 + jnp.sin(50.0 * root10) ** 2)
    return pairwise_mean(terms) ** 2 + 10.0 * _penalty(x)


def _f19(d, x):
    # COCO: 10 + 10 / (D - 1) sum (s_i / 4000 - cos s_i), written with 1 - cos s = 2 sin^2(s / 2).
    scale = max(1.0, math.sqrt(x.shape[-1]) / 8.0)
    z = scale * _mv(d["R"], x) + 0.5
    a = z[:-1] * z[:-1] - z[1:]
    b = 1.0 - z[:-1]
    s = 100.0 * a * a + b * b
    return 10.0 * pairwise_mean(s / 4000.0 + 2.0 * jnp.sin(0.5 * s) ** 2)


# Schwefel's optimal z = 100 * 2 |x_opt_i| and C - z* sin(sqrt z*) (about 1e-13, float64 on the host).
_SCHWEFEL_Z = 100.0 * _SCHWEFEL_X
_SCHWEFEL_C0 = _SCHWEFEL_F - _SCHWEFEL_Z * math.sin(math.sqrt(_SCHWEFEL_Z))


def _f20(d, x):
    # COCO: 0.01 (penalty + C - mean_i z_i sin sqrt|z_i|), C = 418.98...  Near the optimum z_i = z* + u_i
    # and C - z sin sqrt z is a difference of two numbers near 419: in float32 that alone is 6e-7 of
    # regret at x_opt.  For z > 0 it is computed as c0 - (u sin sqrt z + z* (sin sqrt z - sin sqrt z*))
    # with sin a - sin b = 2 cos((a + b) / 2) sin((a - b) / 2) and sqrt z - sqrt z* = u / (sqrt z + sqrt z*):
    # the same value, whose rounding scales with u instead of with 419.
    D = x.shape[-1]
    two_abs_xopt = _SCHWEFEL_X                     # 2 |x_opt_i| for every i
    xh = 2.0 * d["sign"] * x
    zh = xh.at[1:].add(0.25 * (xh[:-1] - two_abs_xopt))
    u = 100.0 * _c(_powers(math.sqrt(10.0), D), x) * (zh - two_abs_xopt)
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
    y = _mv(d["R"], x)
    diff = y[None, :] - d["centres"]
    a = pairwise_sum(d["scales"] * diff * diff)
    g = jnp.minimum(jnp.min(d["gap"] - d["height"] * jnp.expm1(-0.5 / D * a)), 10.0)
    return t_osz(g) ** 2 + _penalty(x)


def _f23(d, x):
    D = x.shape[-1]
    z = _mv(d["M"], _offset(d, x))
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
    mu1 = -math.sqrt((_MU0 * _MU0 - 1.0) / s)
    xh = 2.0 * d["sign"] * x
    z = _mv(d["Q"], _c(_powers(10.0, D), x) * _mv(d["R"], xh - _MU0))
    near = pairwise_sum((xh - _MU0) ** 2)
    far = D + s * pairwise_sum((xh - mu1) ** 2)
    return jnp.minimum(near, far) + 20.0 * pairwise_sum(jnp.sin(jnp.pi * z) ** 2) + 1e4 * _penalty(x)


_PRECISION = {
    1: _f1, 2: _f2, 3: _f3, 4: _f4, 5: _f5, 6: _f6, 7: _f7, 8: _f8, 9: _f9, 10: _f10, 11: _f11, 12: _f12,
    13: _f13, 14: _f14, 15: _f15, 16: _f16, 17: _schaffers, 18: _schaffers, 19: _f19, 20: _f20,
    21: _gallagher_value, 22: _gallagher_value, 23: _f23, 24: _f24,
}


def precision(function: int, data: dict, x):
    """COCO's f(x) - f_opt for one point x of shape (D,) (plain JAX; data: the instance's arrays)."""
    d = {k: jnp.asarray(v).astype(x.dtype) for k, v in data.items()}
    return _PRECISION[function](d, x)


@dataclasses.dataclass(frozen=True)
class Reward:
    """-(f_k(x) - f_opt) of the instance whose arrays are passed as data: a hashable callable, so
    objectives built alike compare equal and share a compiled program."""
    function: int

    def __call__(self, data, x):
        return -precision(self.function, data, x)


def device_arrays(inst: Instance) -> dict:
    """The instance's arrays as JAX arrays of the default float type (float32, float64 under x64);
    x_opt also as its rounding error ``xopt_lo`` (see ``_offset``)."""
    dtype = jnp.result_type(float)
    out = {k: jnp.asarray(v, dtype) for k, v in inst.arrays.items()}
    if "xopt" in out:
        out["xopt_lo"] = jnp.asarray(inst.arrays["xopt"] - np.asarray(out["xopt"], np.float64), dtype)
    return out


# ------------------------------------------------------------------------------ federated objectives

HETEROGENEITIES = ("none", "shift", "fourier", "instances")


@dataclasses.dataclass(frozen=True)
class InstanceLocal:
    """heterogeneity 'instances': client m's reward on its own instance (row m of the stacked arrays)."""
    reward: Reward

    def __call__(self, data, x, m):
        return self.reward(jax.tree_util.tree_map(lambda a: a[m], data["base"]), x)


@dataclasses.dataclass(frozen=True)
class InstanceMean:
    """heterogeneity 'instances': the global objective, the clients' mean reward (fixed-order mean)."""
    reward: Reward

    def __call__(self, data, x):
        return pairwise_mean(jax.vmap(lambda d: self.reward(d, x))(data["base"]))


def stacked_arrays(instances) -> dict:
    """The device arrays of several instances of one (function, dim), stacked along a leading axis."""
    per = [device_arrays(i) for i in instances]
    return {k: jnp.stack([p[k] for p in per]) for k in per[0]}


# ------------------------------------------------------------- f* of the 'instances' heterogeneity

SEARCH_EVALUATIONS = 2 ** 20                     # client evaluations of the sampling stage
SEARCH_STARTS = 128
SEARCH_STEPS = 150
_LINE = 2.0 ** np.arange(2, -13, -1)            # trial multiples of the quasi-Newton step
_RANDOM_TRIALS = 8


def instances_f_star(function: int, dim: int, instances) -> tuple[float, np.ndarray]:
    """(f*, x*) of heterogeneity 'instances': the largest mean reward over ``instances`` that
    :func:`search` finds, in float64 on the host, once per (function, dim, instances) and kept in
    memory (nothing is cached on disk).

    Method: candidates are the clients' optima, their mean and 2^20 / M sample points (a regular
    grid for D <= 2, uniform points beyond, M the number of instances); the best 128 are refined by
    150 steps of an elitist quasi-Newton ascent with random trial moves.  f* is a value the
    objective attains, so it is never above the true supremum; how far below, measured with M = 3
    (instances 1-3):

    * D = 2: at least the maximum of a 1201 x 1201 grid for all 24 functions (above it for 22 of
      them, by up to 1.3 for f23, whose narrow peaks the grid misses);
    * D = 5: against a search with 4x the samples and starts and twice the steps, equal (to 1e-7
      relative) for f1, f2, f5, f6, f8-f14, f20-f22; 1-8 % of |f*| lower for f3, f4, f7, f15, f17,
      f18, f24 and 12-32 % for f16, f19, f23 (Weierstrass, Griewank-Rosenbrock, Katsuura).

    On the multimodal functions in D >= 5 regret is therefore measured against a value that can be
    below the true f*, and a run that finds a better point shows negative regret."""
    return _instances_f_star(int(function), int(dim), tuple(int(i) for i in instances))


@functools.lru_cache(maxsize=64)
def _instances_f_star(k: int, D: int, insts: tuple) -> tuple[float, np.ndarray]:
    problems = [_instance(k, D, i) for i in insts]
    with jax.enable_x64(True):
        data = {"base": stacked_arrays(problems)}
        f_star, x_star = search(InstanceMean(Reward(k)), data, D, np.stack([p.x_opt for p in problems]),
                                samples=max(2 ** 14, SEARCH_EVALUATIONS // len(problems)))
    # Every client's reward is at most 0, so is their mean (float64 rounding aside).
    return min(f_star, 0.0), x_star


def sample_points(D: int, samples: int, seed: int = 0) -> np.ndarray:
    """The sampling stage's points: a regular grid of about ``samples`` points in one or two
    dimensions (cell centres), uniform random points beyond."""
    if D <= 2:
        n = int(samples ** (1.0 / D))
        axis = LO + (np.arange(n) + 0.5) * (HI - LO) / n
        return np.stack(np.meshgrid(*[axis] * D, indexing="ij"), -1).reshape(-1, D)
    return np.random.default_rng(seed).uniform(LO, HI, (samples, D))


def search(g, data, D: int, anchors: np.ndarray, samples: int, seed: int = 0) -> tuple[float, np.ndarray]:
    """Maximise g(data, x) over [-5, 5]^D: sampling, then multistart elitist quasi-Newton ascent.

    Candidates: the anchors (each client's optimum), their mean and :func:`sample_points`.  The best
    ``SEARCH_STARTS`` candidates (anchors always among them) are refined for ``SEARCH_STEPS`` steps;
    each step tries the BFGS direction H grad at the step lengths ``_LINE`` (clipped to the box) and
    ``_RANDOM_TRIALS`` Gaussian moves of an adaptive radius (for the non-smooth functions: steps,
    plateaus, Katsuura's fractal), keeps the best trial if it improves (elitist: the value never
    decreases) and updates the BFGS matrix with every accepted move of positive curvature.
    Returns the best value and point; deterministic (fixed seed)."""
    anchors = np.vstack([anchors, anchors.mean(axis=0, keepdims=True)])
    points = sample_points(D, samples, seed)
    value = jax.jit(jax.vmap(lambda x: g(data, x)))
    chunk = 8192
    vals = np.concatenate([np.asarray(value(jnp.asarray(points[i:i + chunk]))) for i in range(0, len(points), chunk)])
    vals = np.where(np.isfinite(vals), vals, -np.inf)
    order = np.argsort(-vals, kind="stable")[:max(SEARCH_STARTS - len(anchors), 0)]
    starts = np.vstack([anchors, points[order]])
    keys = jax.random.split(jax.random.key(seed), starts.shape[0])
    best_x, best_v = _ascend(g, data, jnp.asarray(starts), keys)
    best_v = np.asarray(best_v)
    i = int(np.argmax(best_v))
    return float(best_v[i]), np.asarray(best_x[i])


@functools.partial(jax.jit, static_argnums=0)
def _ascend(g, data, starts, keys):
    D = starts.shape[-1]
    fg = jax.value_and_grad(lambda x: g(data, x))
    line = jnp.asarray(_LINE)

    def finite(v, grad):
        ok = jnp.isfinite(v) & jnp.all(jnp.isfinite(grad))
        return jnp.where(ok, v, -jnp.inf), jnp.where(ok, grad, 0.0)

    def one(x0, key):
        v0, g0 = finite(*fg(x0))

        def step(carry, key):
            x, v, grad, H, radius = carry
            direction = _mv(H, grad)
            trials = jnp.clip(x[None, :] + line[:, None] * direction[None, :], LO, HI)
            noise = jax.random.normal(key, (_RANDOM_TRIALS, D)) * radius / jnp.sqrt(D)
            trials = jnp.concatenate([trials, jnp.clip(x[None, :] + noise, LO, HI)])
            tv = jax.vmap(lambda t: g(data, t))(trials)
            tv = jnp.where(jnp.isfinite(tv), tv, -jnp.inf)
            j = jnp.argmax(tv)
            better = tv[j] > v
            x_new = jnp.where(better, trials[j], x)
            v_new, g_new = finite(*fg(x_new))
            v_new = jnp.where(better, v_new, v)
            g_new = jnp.where(better, g_new, grad)
            # BFGS on -g: s = x_new - x, y = grad - g_new.
            s, y = x_new - x, grad - g_new
            sy = pairwise_sum(s * y)
            use = better & (sy > 1e-12 * jnp.sqrt(pairwise_sum(s * s) * pairwise_sum(y * y)) + 1e-300)
            rho = 1.0 / jnp.where(use, sy, 1.0)
            eye = jnp.eye(D)
            H_new = _mm(_mm(eye - rho * jnp.outer(s, y), H), eye - rho * jnp.outer(y, s)) + rho * jnp.outer(s, s)
            H = jnp.where(use, H_new, H)
            moved = jnp.max(jnp.abs(s))
            radius = jnp.where(better, jnp.maximum(radius, 2.0 * moved), 0.5 * radius)
            radius = jnp.clip(radius, 1e-12, HI - LO)
            return (x_new, v_new, g_new, H, radius), None

        init = (x0, v0, g0, jnp.eye(D), jnp.asarray(1.0, x0.dtype))
        (x, v, *_), _ = jax.lax.scan(step, init, jax.random.split(key, SEARCH_STEPS))
        return x, v

    return jax.vmap(one)(starts, keys)
