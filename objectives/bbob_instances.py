"""COCO's BBOB problem set on the host: the function numbers, names and box, the checks of a
(function, dim, instance) triple, and COCO's bbob2009 legacy generator of instances.

For a function number k, a dimension D and an instance number i, COCO derives the optimum x_opt,
the optimal value f_opt, the rotations R and Q and every other random ingredient (Gallagher's
peaks, Schwefel's and Lunacek's sign vectors, ...) from the bbob2009 legacy generators (a
Park-Miller generator shuffled through a 32-slot table, Box-Muller normals, Gram-Schmidt rotations)
seeded with k + 10000 i (3 + 10000 i for f4, 17 + 10000 i for f18; f_opt from two normals of its
own seeds).  :func:`instance` reproduces them in NumPy float64, once per (k, D, i): in integer
arithmetic and correctly rounded sums, so the instances are COCO's on every processor.  Which seed
feeds which matrix follows COCO's C code (numbbo/coco, code-experiments/src/f_*.c, suite_bbob.c,
suite_bbob_legacy_code.c), including its departures from the 2009 documentation.

D = 1 is accepted only for f1, f2, f10 and f11: the other functions divide by D - 1 (NaN in COCO)
or need pairs of coordinates (COCO asserts D > 1).
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

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

# Schwefel's optimum per coordinate (COCO's constant) and the Lunacek centre mu0: an instance's x_opt
# is built from them here, and bbob_functions measures the distance to that optimum with them.
SCHWEFEL_X = 4.2096874637
MU0 = 2.5


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


# Checked against cocoex up to 10^9 - 1; COCO's generator casts seed / 127773 to a 32-bit int.
MAX_INSTANCE = 10**9 - 1


def check_instance(instance) -> int:
    if isinstance(instance, bool) or not isinstance(instance, (int, np.integer)) or not 1 <= instance <= MAX_INSTANCE:
        raise ValueError(f"instance must be an integer in [1, {MAX_INSTANCE}] (COCO's instance number), "
                         f"got {instance!r}")
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


def powers(base: float, dim: int) -> np.ndarray:
    """base^(i / (D - 1)) for i = 0..D-1 (1 when D = 1, where COCO's loops never use it): the
    conditioning of COCO's matrices here and of the functions' diagonal scalings in bbob_functions."""
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
    return cached_instance(function, dim, instance_number)


@functools.lru_cache(maxsize=256)
def cached_instance(k: int, D: int, inst: int) -> Instance:
    """:func:`instance` without its checks, for callers that pass numbers already checked (the f*
    search); one cache, so an instance is generated once however it is asked for."""
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
        arrays["M"] = _matmul(legacy_rotation(seed + 1000000, D), np.diag(powers(math.sqrt(cond), D)),
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
        arrays.update(xopt=x_opt, R=rot1, M=_matmul(rot1, np.diag(powers(math.sqrt(cond), D)), legacy_rotation(seed, D)))
    elif k in (17, 18):
        seed = 17 + 10000 * inst                  # f18 reuses f17's seed
        x_opt = legacy_xopt(seed, D)
        cond = 10.0 if k == 17 else 1000.0
        arrays.update(xopt=x_opt, R=legacy_rotation(seed + 1000000, D),
                      M=_matmul(np.diag(powers(math.sqrt(cond), D)), legacy_rotation(seed, D)))
    elif k == 20:
        sign = np.where(legacy_uniform(D, seed) < 0.5, -1.0, 1.0)
        arrays["sign"] = sign
        x_opt = 0.5 * SCHWEFEL_X * sign
    elif k in (21, 22):
        x_opt, arrays = _gallagher(seed, D, 101 if k == 21 else 21)
    elif k == 24:
        sign = np.where(legacy_gauss(D, seed) < 0.0, -1.0, 1.0)
        arrays.update(sign=sign, R=legacy_rotation(seed, D), Q=legacy_rotation(seed + 1000000, D))
        x_opt = 0.5 * MU0 * sign
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

