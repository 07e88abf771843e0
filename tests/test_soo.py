"""SOO (fedpne_jax.algorithms.trees.soo) against the plain Python reference
(tests/support/reference_soo.py) and PyXAB's own SOO: the same evaluated points without noise, in
1-D and 2-D, for the paper's rule and PyXAB's, both splits; the same regret and depth
statistically with noise; invalid parameters are refused.

Noise-free runs use 'gaussian:0' so that they share a program with the noisy ones, in float64
(PyXAB's arithmetic).  T = 700 spans five rebuilds of the sorted leaves (every 128 rounds), so the
exact comparisons cover candidates from the sorted leaves and from those evaluated since; a rebuild
alone is checked against a NumPy sort.
"""

import jax
import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.trees import soo
from fedpne_jax.algorithms.trees.rounds import run_split_dims
from fedpne_jax.core import executor
from tests.support import reference_soo
from tests.support.helpers import assert_same_distribution, assert_same_tree_run, pyxab_run, traced_tree_run

T = 700
SEEDS = 200


def run(config, objective, seeds):
    return traced_tree_run(soo, config, objective, seeds)


def assert_same_run(out, i, ref, pyxab):
    """The reference's run; PyXAB's rule creates a level's children ahead of their evaluation, so its
    node count is compared with the evaluated points' (plus at most one expansion)."""
    if not pyxab:
        return assert_same_tree_run(out, i, ref)
    np.testing.assert_array_equal(out.points[i], ref.points)
    np.testing.assert_array_equal(out.recommendation[i], ref.recommendation)
    np.testing.assert_allclose(out.curve[i], ref.curve, rtol=2e-5)
    assert len(ref.points) + 1 <= out.nodes[i] <= len(ref.points) + 2 and out.flags[i] == 0


def reference(config, name, dim, split_dims=None, **kw):
    return reference_soo.soo(name, dim, config.horizon, h_max=config.h_max, pyxab=config.pyxab, split=config.split,
                             checkpoints=config.checkpoints,
                             split_dim_fn=None if split_dims is None else (lambda r: _dim(split_dims, r)), **kw)


def _dim(split_dims, r):
    """The run's split dimension for the children at rows r, r + 1.  PyXAB's rule creates children
    ahead of their evaluation, beyond row T too; those are never evaluated, and any dimension does."""
    return int(split_dims[r]) if r < len(split_dims) else 0


@pytest.mark.parametrize("pyxab", [False, True])
def test_noise_free_garland_evaluates_the_reference_points(garland, pyxab):
    config = soo.SOOConfig(horizon=T, noise="gaussian:0", checkpoints=10, pyxab=pyxab, precision="float64")
    out, _ = run(config, garland, [0, 7])
    ref = reference(config, "garland", 1)
    for i in range(2):                # one dimension and no noise: every seed is the same run
        assert_same_run(out, i, ref, pyxab)
    # PyXAB's rule fills the tree level by level: its first 511 points are the centres of depths
    # 0..8.  The paper's sweeps go deeper around the maxima.
    centres = {(2 * j + 1) / 2 ** (h + 1) for h in range(9) for j in range(2 ** h)}
    assert (set(out.points[0, :511, 0].tolist()) == centres) == pyxab
    assert (ref.depth > 20) == (not pyxab)


@pytest.mark.parametrize("pyxab,split,h_max", [(False, "random", 100), (False, "longest", 4), (True, "random", 100)])
def test_noise_free_himmelblau_evaluates_the_reference_points(himmelblau, pyxab, split, h_max):
    """h_max = 4 stops the paper's sweeps at depth 4 (so the run fills depths 0..5: 63 nodes)."""
    horizon = 63 if h_max == 4 else 400
    config = soo.SOOConfig(horizon=horizon, noise="gaussian:0", checkpoints=10, pyxab=pyxab, split=split, h_max=h_max,
                           precision="float64")
    seeds = [0, 5]
    out, static = run(config, himmelblau, seeds)
    for i, seed in enumerate(seeds):
        dims = run_split_dims(executor.seed_key(0, seed), horizon, static.chunk, 2, "float64")
        assert_same_run(out, i, reference(config, "himmelblau", 2, dims), pyxab)
    assert (split == "longest") == np.array_equal(out.points[0], out.points[1])    # random partitions differ
    if h_max == 4:
        assert out.depth[0] == 5 and len({tuple(p) for p in out.points[0]}) == 63


def test_garland_evaluates_pyxabs_own_soo_points(garland):
    """PyXAB 0.3.0's SOO with its BinaryPartition (1-D: no random dimension) on the same values."""
    SOO = pytest.importorskip("PyXAB.algos.SOO").SOO
    config = soo.SOOConfig(horizon=T, noise="gaussian:0", checkpoints=10, pyxab=True, precision="float64")
    out, _ = run(config, garland, [0, 7])      # the seeds of the noise-free test above: its program
    points, last = pyxab_run(SOO(n=T, h_max=100, domain=[[0.0, 1.0]]), garland, T)
    np.testing.assert_array_equal(out.points[0], points)
    np.testing.assert_array_equal(out.recommendation[0], last)


@pytest.mark.parametrize("pyxab", [False, True])
def test_noisy_regret_and_depth_equal_the_reference_statistically(garland, pyxab):
    config = soo.SOOConfig(horizon=300, noise="gaussian:0.1", checkpoints=10, pyxab=pyxab)
    res = fp.run(config, garland, seeds=SEEDS)
    rng = np.random.default_rng(11)
    refs = [reference(config, "garland", 1, noise="gaussian", sigma=0.1, rng=rng) for _ in range(SEEDS)]
    assert_same_distribution(res.final_regret, [r.final_regret for r in refs], "final regret")
    assert res.final_regret.std() > 0
    depths = [r.depth for r in refs]
    if np.std(depths) > 0 or res.depth.std() > 0:
        assert_same_distribution(res.depth, depths, "depth")
    else:                             # PyXAB's rule: the depth is the level count, whatever the noise
        assert set(res.depth.tolist()) == set(depths)
    assert res.config["capacity"] == 302 and np.all(res.nodes <= 302)


def _lists_order(depth, value, row):
    """Indices in the lists' order: by depth, then the larger value, then the later row."""
    return np.lexsort((-row, -value, depth))


_REBUILDS: dict = {}


@pytest.mark.parametrize("k,seed", [(1, 0), (2, 1), (5, 2), (17, 3), (23, 4)])
def test_a_rebuild_merges_the_new_leaves_into_the_sorted_ones(garland, k, seed):
    """A rebuild (the old sorted leaves less the expanded heads of each depth, merged with the new
    list) equals a NumPy sort of the same leaves by depth, value and row, with ties of value and
    stale entries past the leaves and in the new list's empty slots."""
    config = soo.SOOConfig(horizon=3000, checkpoints=10)
    static = soo.make_static(config, garland)
    cap, H, R = static.tree.capacity, static.tree.height + 1, soo.REBUILD
    made = k * R - 1
    rng = np.random.default_rng(seed)
    n_old = 0 if k == 1 else int(rng.integers(1, (made - R) // 2 + 1))
    n_new = int(rng.integers(1, R + 1))
    rows = rng.permutation(made)[: n_old + n_new].astype(np.int32)
    depth = rng.integers(0, 6, n_old + n_new).astype(np.int32)
    value = rng.choice(np.float32([0.0, 0.25, 0.5, 1.0]), n_old + n_new)     # many ties, broken by row
    old = _lists_order(depth[:n_old], value[:n_old], rows[:n_old])
    a_depth, a_value, a_row = depth[:n_old][old], value[:n_old][old], rows[:n_old][old]
    start = np.searchsorted(a_depth, np.arange(H + 1)).astype(np.int32)
    head = np.array([rng.integers(0, start[d + 1] - start[d] + 1) for d in range(H)], np.int32)
    pad = lambda x, fill, n=cap: np.concatenate([x, np.full(n - len(x), fill, x.dtype)])
    slots = rng.permutation(R)[:n_new]
    new_row, new_depth = np.full(R, -1, np.int32), rng.integers(0, 6, R).astype(np.int32)
    new_value = rng.random(R).astype(np.float32)                               # stale where the row is -1
    new_row[slots], new_depth[slots], new_value[slots] = rows[n_old:], depth[n_old:], value[n_old:]
    lists = soo._init(static, None, None, None)._replace(
        sorted_value=pad(a_value, -np.inf), sorted_row=pad(a_row, -1), sorted_depth=pad(a_depth, H),
        start=start, head=head, new_value=new_value, new_row=new_row, new_depth=new_depth,
        new_best=np.zeros(H, np.int32))
    if static not in _REBUILDS:        # one program for every case
        _REBUILDS[static] = jax.jit(lambda kk, ls: soo._rebuild(static, None, kk, None, ls))
    _, got = _REBUILDS[static](np.int32(k), lists)
    expanded = np.concatenate([np.arange(start[d], start[d] + head[d]) for d in range(H)]).astype(int)
    keep = np.setdiff1d(np.arange(n_old), expanded)
    m_depth = np.concatenate([a_depth[keep], depth[n_old:]])
    m_value = np.concatenate([a_value[keep], value[n_old:]])
    m_row = np.concatenate([a_row[keep], rows[n_old:]])
    order = _lists_order(m_depth, m_value, m_row)
    np.testing.assert_array_equal(got.sorted_depth, pad(m_depth[order], H))
    np.testing.assert_array_equal(got.sorted_value, pad(m_value[order], -np.inf))
    np.testing.assert_array_equal(got.sorted_row, pad(m_row[order], -1))
    starts = np.searchsorted(m_depth[order], np.arange(H + 1))
    np.testing.assert_array_equal(got.start, starts)
    firsts = np.array([m_row[order][starts[d]] if starts[d] < starts[d + 1] else -1 for d in range(H)])
    np.testing.assert_array_equal(got.kept_row, firsts)
    np.testing.assert_array_equal(got.kept_value[firsts >= 0], m_value[order][starts[:-1][firsts >= 0]])
    assert np.all(np.asarray(got.head) == 0) and np.all(np.asarray(got.new_row) == -1)
    assert np.all(np.asarray(got.new_best) == -1)


def test_h_max_bounds_the_horizon():
    assert soo.SOOConfig(horizon=63, h_max=4, checkpoints=9).most_evaluations == 63
    with pytest.raises(ValueError, match=r"horizon: SOO with h_max=4 evaluates at most 63 nodes, got horizon=64"):
        soo.SOOConfig(horizon=64, h_max=4, checkpoints=8)
    with pytest.raises(ValueError, match=r"horizon: PyXAB's SOO with h_max=4 evaluates at most 31 nodes"):
        soo.SOOConfig(horizon=32, h_max=4, pyxab=True, checkpoints=8)


@pytest.mark.parametrize("field,value", [
    ("h_max", -1), ("h_max", 2.5), ("h_max", True), ("pyxab", "yes"), ("pyxab", 1), ("split", "middle"),
    ("precision", "float16"), ("horizon", 0), ("noise", "poisson")])
def test_invalid_parameters_name_themselves(field, value):
    with pytest.raises(ValueError, match=field):
        soo.SOOConfig(**{field: value})
