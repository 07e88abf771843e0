"""The tree skeleton (fedpne_jax.algorithms.trees: layout, partition, ranking, descent, refresh, book, rounds, policy, driver) with a toy policy of its own: every node is
evaluated once, in creation order, and once every node is evaluated the leaf with the best value is
expanded (greedy "expand the best leaf", DOO without its delta).  Against a plain Python model of
the same rule: the exact cells it picks (1-D, 2-D longest-side and random splits), the regret book
against NumPy cumulative sums at the checkpoint rounds, the capacity overflow flag (of expand and
of T-HOO's fused path update), the refresh schedule, parallel instances against separate runs, and
the table primitives (last_max and best_leaf's ties and mask, expand's one scatter, the tournament of leaves
against an argmax)."""
import dataclasses
from fractions import Fraction
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.algorithms.trees import descent, hoo
from fedpne_jax.algorithms.trees.descent import PathTables, chain, chain_loop, chain_scan, start_path
from fedpne_jax.algorithms.trees.driver import run
from fedpne_jax.algorithms.trees.layout import (
    BOX,
    CHILD,
    COUNT,
    DEPTH,
    GEN,
    MEAN,
    PARENT,
    B,
    U,
    as_bits,
    as_float,
    box_of,
    centre,
    make_spec,
)
from fedpne_jax.algorithms.trees.partition import expand, new_table
from fedpne_jax.algorithms.trees.policy import TreePolicy, TreeStatic, parallel
from fedpne_jax.algorithms.trees.ranking import best_leaf, last_max, tournament, tournament_pop
from fedpne_jax.algorithms.trees.refresh import prefix_sizes, refresh_all, rows_after_updates
from fedpne_jax.algorithms.trees.rounds import chunk_size, run_split_dims
from fedpne_jax.core import executor, registry
from fedpne_jax.core.errors import FLAG_CAPACITY
from objectives.objective import Objective

T = 60


class Params(NamedTuple):
    noise_scale: np.ndarray


def _toy_select(static, params, table, extra, t):
    node = jnp.minimum(t - 1, static.tree.capacity - 1)
    return node, centre(static.tree, table.rows[node])


def _toy_update(static, params, table, extra, last, t, active):
    spec = static.tree
    head = table.rows[last.choice].at[COUNT].set(1).at[MEAN].set(as_bits(spec, last.reward))
    table = table._replace(rows=table.rows.at[jnp.where(active, last.choice, spec.capacity)].set(head, mode="drop"))
    best, _ = best_leaf(spec, table, as_float(spec, table.rows[:, MEAN]))
    table, overflow = expand(spec, table, best, active & (t == table.size), last.split_u)
    return table, extra, overflow


TOY = TreePolicy(select=_toy_select, update=_toy_update, root_expanded=False)


def toy_run(static, params, objective, key):
    return run(static, params, objective, key, TOY)


def _vee(centre):
    def f(data, x):
        return -jnp.sum(jnp.abs(x - jnp.asarray(centre, x.dtype)))
    return Objective(name="vee", lo=(0.0,) * len(centre), hi=(1.0,) * len(centre), f_star=0.0, num_clients=1,
                     global_fn=f, local_fn=lambda data, x, m: f(data, x))


def _static(objective, split="longest", real="float64", capacity=T + 2, rounds=None):
    rounds = tuple(range(1, T + 1)) if rounds is None else tuple(rounds)
    return TreeStatic(horizon=T, checkpoint_rounds=rounds, noise_kind="none",
                      tree=make_spec(capacity, T, objective, split, real), real=real,
                      chunk=chunk_size(T), trace=True)


def _run(run_single, static, objective, seeds=(0,), params=None):
    params = Params(np.asarray(0.0, static.real)) if params is None else params
    out, _, _ = executor.execute(run_single, static, params, objective, 0, np.asarray(seeds))
    return out


def model(centre, horizon, split_dim):
    """The toy rule in plain Python: cells are (lo, hi, depth) with float corners, evaluated in creation
    order; ties go to the cell created last.  ``split_dim(t, lo, hi)``: the dimension of the expansion
    made in round t.  Returns (points of rounds 1..T + 1, cells, deepest depth)."""
    f = lambda x: -sum(abs(a - b) for a, b in zip(x, centre))
    cells, values, expanded, points = [([0.0] * len(centre), [1.0] * len(centre), 0)], [], [], []
    for t in range(1, horizon + 2):
        lo, hi, _ = cells[t - 1]
        points.append([(a + b) / 2 for a, b in zip(lo, hi)])
        if t > horizon:
            break
        values.append(f(points[-1]))
        expanded.append(False)
        if t == len(cells):
            best = max((i for i in range(len(cells)) if not expanded[i]), key=lambda i: (values[i], i))
            lo, hi, depth = cells[best]
            d = split_dim(t, lo, hi)
            mid = (lo[d] + hi[d]) / 2
            cells.append((lo, hi[:d] + [mid] + hi[d + 1:], depth + 1))
            cells.append((lo[:d] + [mid] + lo[d + 1:], hi, depth + 1))
            expanded[best] = True
    return np.asarray(points), len(cells), max(depth for _, _, depth in cells)


def longest(t, lo, hi):
    sides = [Fraction(b) - Fraction(a) for a, b in zip(lo, hi)]
    return max(range(len(sides)), key=lambda i: (sides[i], -i))


def assert_model_run(out, i, centre, split_dim):
    points, nodes, depth = model(centre, T, split_dim)
    np.testing.assert_array_equal(out.points[i], points[:T])
    np.testing.assert_array_equal(out.recommendation[i], points[T])     # round T + 1's selection
    assert (out.nodes[i], out.depth[i], out.flags[i]) == (nodes, depth, 0)
    return depth


def assert_book(out, i, objective, rounds):
    """The curve is the NumPy cumulative sum of f* - f(x_t) read at the checkpoint rounds."""
    values = np.asarray(objective.value(out.points[i]))
    regret = np.cumsum(np.asarray(objective.f_star, values.dtype) - values, dtype=values.dtype)
    np.testing.assert_array_equal(out.curve[i], regret[np.asarray(rounds) - 1])
    assert out.final_regret[i] == regret[-1]


def test_expand_the_best_leaf_picks_the_predicted_cells_in_1d():
    objective = _vee((0.3,))
    rounds = (1, 2, 2, 7, 30, 30, 59, 60)             # shared rounds copy the first checkpoint's value
    out = _run(toy_run, _static(objective, rounds=rounds), objective)
    np.testing.assert_array_equal(out.points[0, :11, 0], [0.5, 0.25, 0.75, 0.125, 0.375, 0.3125, 0.4375, 0.28125,
                                                          0.34375, 0.265625, 0.296875])
    assert assert_model_run(out, 0, (0.3,), lambda t, lo, hi: 0) >= 10      # it zooms in on 0.3
    with jax.enable_x64(True):
        assert_book(out, 0, objective, rounds)


def test_longest_side_split_in_2d():
    objective = _vee((0.3, 0.7))
    out = _run(toy_run, _static(objective), objective)
    assert_model_run(out, 0, (0.3, 0.7), longest)
    assert len(set(out.points[0, :, 0])) > 4 and len(set(out.points[0, :, 1])) > 4


def test_random_split_follows_the_rounds_uniforms():
    """The node expanded in round t splits along run_split_dims(...)[t] (the root too: it is expanded
    in round 1's update)."""
    objective = _vee((0.3, 0.7))
    static = _static(objective, split="random")
    seeds = [0, 1, 2]
    out = _run(toy_run, static, objective, seeds)
    for i, seed in enumerate(seeds):
        dims = run_split_dims(executor.seed_key(0, seed), T, static.chunk, 2, "float64")
        assert_model_run(out, i, (0.3, 0.7), lambda t, lo, hi, dims=dims: int(dims[t]))
    assert len({tuple(p) for p in out.points[:, 5]}) > 1       # the seeds' partitions differ


def test_capacity_overflow_raises_the_flag():
    objective = _vee((0.3,))
    full = _run(toy_run, _static(objective, capacity=5, real="float32"), objective)
    assert full.flags[0] & FLAG_CAPACITY and full.nodes[0] == 5
    static = _static(objective, capacity=T + 1, real="float32")      # T + 1 rows: just enough
    fits = _run(toy_run, static, objective)
    assert fits.flags[0] == 0
    assert_book(fits, 0, objective, static.checkpoint_rounds)        # float32: a float32 cumulative sum


def test_capacity_overflow_of_the_fused_path_update():
    """T-HOO's table is sized so that it cannot overflow; one too small must say so."""
    objective = _vee((0.3,))
    config = hoo.HOOConfig(horizon=T, noise="none", checkpoints=6, depth_limit=T)
    static = hoo.make_static(config, objective)
    assert static.tree.capacity == 3 + 2 * T
    params = hoo.make_params(config)
    assert _run(hoo.run_single, static, objective, params=params).flags[0] == 0
    small = dataclasses.replace(static, tree=dataclasses.replace(static.tree, capacity=9))
    out = _run(hoo.run_single, small, objective, params=params)
    assert out.flags[0] & FLAG_CAPACITY and out.nodes[0] == 9


def test_a_path_longer_than_its_buffer_raises_the_flag():
    """T-HOO's paths reach depth 6 in 60 rounds here (the depth-7 nodes are the children of the last
    one): buffers of 7 rows hold them, of 6 do not."""
    objective = _vee((0.3,))
    config = hoo.HOOConfig(horizon=T, noise="none", checkpoints=6, depth_limit=T)
    static, params = hoo.make_static(config, objective), hoo.make_params(config)
    assert static.tree.path_rows == start_path(static.tree.height) < static.tree.height + 1
    flags, depth = {}, {}
    for rows in (6, 7):
        short = dataclasses.replace(static, tree=dataclasses.replace(static.tree, path=rows))
        out = _run(hoo.run_single, short, objective, params=params)
        flags[rows], depth[rows] = out.flags[0] & FLAG_CAPACITY, out.depth[0]
    assert depth[7] == 7 and not flags[7] and flags[6]


@pytest.mark.parametrize("name,fields", [("hct", dict(rho=0.9)), ("hct", dict(rho=0.9, expand="pyxab")),
                                         ("vhct", dict(rho=0.9)), ("hoo", dict(rho=0.9)),
                                         ("pct", dict(rhomax=0.9))])
def test_runs_whose_paths_outgrow_the_first_buffers_are_rerun_with_the_same_numbers(monkeypatch, name, fields):
    """Buffers of 3 rows: most runs outgrow them and are rerun with the whole height bound; every run
    equals a run that started with the whole bound."""
    objective = objectives.make_objective("garland", num_clients=1, heterogeneity="none")
    config = fp.make_config(name, horizon=400, noise="gaussian:0.1", **fields)
    algorithm = registry.get(name)
    whole = algorithm.make_static(config, objective, PathTables(whole=True))
    want, _, _ = executor.execute(algorithm.run_single, whole, algorithm.make_params(config, None), objective, 0,
                                  np.arange(8))
    monkeypatch.setattr(descent, "start_path", lambda height: min(height + 1, 3))
    with pytest.raises(fp.CapacityError, match="rerun with grow=True"):
        fp.run(config, objective, seeds=8, grow=False)
    got = fp.run(config, objective, seeds=8)
    np.testing.assert_array_equal(got.final_regret, want.final_regret)
    np.testing.assert_array_equal(got.curves, want.curve)
    np.testing.assert_array_equal(got.depth, want.depth)
    assert want.depth.max() >= 3


class Log(NamedTuple):
    updates: jax.Array        # () active updates so far
    at_refresh: jax.Array     # (8,) updates done when refresh k ran (-1: never)


def _log_update(static, params, table, extra, last, t, active):
    return table, extra._replace(updates=extra.updates + active), jnp.bool_(False)


def _log_refresh(static, params, k, table, extra):
    return table, extra._replace(at_refresh=extra.at_refresh.at[k].set(extra.updates))


def _log_recommend(static, params, table, extra, last):
    # The driver's final state is no output: the log comes back as the recommendation.
    return jnp.concatenate([extra.at_refresh, extra.updates[None]]).astype(last.point.dtype)


LOG = TreePolicy(select=_toy_select, update=_log_update, refresh=_log_refresh, recommend=_log_recommend,
                 init=lambda static, params, table, key: Log(jnp.int32(0), jnp.full((8,), -1, jnp.int32)))


def log_run(static, params, objective, key):
    return run(static, params, objective, key, LOG)


def test_refresh_runs_between_the_selection_and_the_update_of_round_two_to_the_k():
    objective = _vee((0.3,))
    log = _run(log_run, _static(objective, real="float32"), objective).recommendation[0]
    # T = 60: refreshes at rounds 1, 2, 4, 8, 16, 32, each after the updates of rounds 1 .. 2^k - 1.
    np.testing.assert_array_equal(log, [0, 1, 3, 7, 15, 31, -1, -1, T])


def _key_recommend(static, params, table, extra, last):
    return extra.astype(last.point.dtype)


KEYED = TreePolicy(select=_toy_select, update=lambda static, params, table, extra, last, t, active:
                   (table, extra, jnp.bool_(False)), recommend=_key_recommend,
                   init=lambda static, params, table, key: jax.random.key_data(key))


def test_init_is_given_the_runs_key():
    """A policy that draws its own random numbers (VROOM) gets each run's key, seed i's being
    fold_in(key(base_seed), i)."""
    objective = _vee((0.3, 0.6))
    out = _run(lambda static, params, objective, key: run(static, params, objective, key, KEYED),
               _static(objective), objective, seeds=(0, 5))
    for i, seed in enumerate((0, 5)):
        np.testing.assert_array_equal(out.recommendation[i], np.asarray(jax.random.key_data(executor.seed_key(0, seed)),
                                                                        np.float64))


def test_best_leaf_breaks_ties_towards_the_last_row_and_honours_its_mask():
    objective = _vee((0.3,))
    spec = make_spec(9, 4, objective, "longest", "float32")
    table = new_table(spec, objective.lo, objective.hi, jax.random.key(0))        # rows 0 (root), 1, 2
    table, overflow = expand(spec, table, 1, True, 0.0)                      # rows 3, 4 under row 1
    assert not overflow and int(table.size) == 5 and int(table.height) == 2
    score = jnp.asarray([9.0, 9.0, 5.0, 5.0, 1.0, 7.0, 7.0, 7.0, 7.0])         # rows 0, 1: not leaves; 5..: free
    assert [int(v) for v in best_leaf(spec, table, score)] == [3, 5]
    depth = table.rows[:, DEPTH]
    assert [int(v) for v in best_leaf(spec, table, score, depth == 2)] == [3, 5]
    assert [int(v) for v in best_leaf(spec, table, score, depth == 1)] == [2, 5]
    assert int(best_leaf(spec, table, score, depth == 3)[0]) == -1


def _numpy_last_max(score, where):
    rows = np.flatnonzero(where)
    if rows.size == 0:
        return -1, -np.inf
    top = score[rows].max()
    return int(rows[score[rows] == top][-1]), top


def test_last_max_is_the_last_largest_masked_row_at_every_size():
    """Powers of two and sizes between, values drawn from a few levels so that ties are common,
    random masks, one all-masked case and -inf scores; under vmap as the policies call it."""
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 5, 8, 13, 31, 33, 64, 70):
        score = rng.choice(np.array([-np.inf, -1.0, 0.0, 0.5, 2.0], np.float32), size=(6, n))
        where = rng.random((6, n)) < 0.7
        where[0] = False
        rows, tops = jax.jit(jax.vmap(last_max))(jnp.asarray(score), jnp.asarray(where))
        for i in range(6):
            row, top = _numpy_last_max(score[i], where[i])
            assert int(rows[i]) == row, (n, i)
            if row >= 0:
                assert float(tops[i]) == top
    row, top = last_max(jnp.asarray([3.0, 1.0, 3.0]))                     # no mask
    assert int(row) == 2 and float(top) == 3.0


def test_expand_writes_the_children_and_the_callers_row_in_one_scatter():
    objective = _vee((0.3,))
    spec = make_spec(5, 4, objective, "longest", "float32")
    table = new_table(spec, objective.lo, objective.hi, jax.random.key(0))       # rows 0 (root), 1, 2
    mark = lambda row, value: table.rows[row].at[COUNT].set(value)
    out, overflow = expand(spec, table, 1, True, 0.0, also=(2, mark(2, 7), True),
                           child_u=lambda kids: jnp.asarray([0.25, 0.5]))
    assert not overflow and (int(out.size), int(out.height)) == (5, 2)
    assert [int(out.rows[r, CHILD]) for r in range(5)] == [1, 3, -1, -1, -1]
    assert int(out.rows[1, GEN]) == 1 and int(out.rows[2, COUNT]) == 7
    assert [int(out.rows[r, PARENT]) for r in (3, 4)] == [1, 1]
    np.testing.assert_array_equal(as_float(spec, out.rows[3:5, U]), [0.25, 0.5])
    np.testing.assert_array_equal(box_of(spec, out.rows[3:5])[:, :, 0], [[0.0, 0.25], [0.25, 0.5]])
    # The caller's row for the expanded node itself travels as node_row (``also`` would clash).
    same, _ = expand(spec, table, 1, True, 0.0, node_row=mark(1, 9), also=(1, mark(1, 8), True))
    assert int(same.rows[1, COUNT]) == 9 and int(same.rows[1, CHILD]) == 3
    full, overflow = expand(spec, out, 2, True, 0.0, also=(0, out.rows[0].at[COUNT].set(4), True))
    assert overflow and int(full.size) == 5 and int(full.rows[2, CHILD]) == -1
    assert int(full.rows[0, COUNT]) == 4                                     # ``also`` is still written
    nothing, overflow = expand(spec, out, 2, False, 0.0)
    assert not overflow and np.array_equal(nothing.rows, out.rows) and int(nothing.size) == 5


def test_tournament_pop_matches_an_argmax_with_last_row_ties():
    """Random scores (with ties) set and best rows taken, against NumPy: the best is the last row
    with the largest score after each set, and a taken row is gone."""
    objective = _vee((0.3,))
    spec = make_spec(11, 4, objective, "longest", "float32")               # P = 16: padded rows stay -inf
    pop = jax.jit(lambda tour, row, value, take: tournament_pop(spec, tour, row, value, True, take))
    tour, scores = tournament(spec), np.full(11, -np.inf, np.float32)
    rng = np.random.default_rng(0)
    for step in range(60):
        row, value, take = int(rng.integers(11)), np.float32(rng.integers(4)), bool(rng.random() < 0.4)
        tour, best = pop(tour, row, value, take)
        scores[row] = value
        want = int(np.flatnonzero(scores == scores.max())[-1])
        assert int(best) == want, step
        if take:
            scores[want] = -np.inf
    assert int(tour.nodes[1, 1]) == int(np.flatnonzero(scores == scores.max())[-1])


class Parallel(NamedTuple):
    instances: hoo.HOOParams      # stacked: a leading (2,) axis
    noise_scale: np.ndarray


def _alternate(static, params, t):
    return (t - 1) % 2


PARALLEL = parallel(hoo.POLICY, _alternate)


def parallel_run(static, params, objective, key):
    return run(static, params, objective, key, PARALLEL)


def test_parallel_instances_are_independent_runs_on_their_rounds():
    """Two T-HOO instances (rho = 0.3 and 0.8) taking turns over 2T rounds: instance i's points are
    those of a T-HOO run of its own over T rounds (noise-free, so the uniforms they share do not
    matter in 1-D), and the tables' sizes add up."""
    objective = _vee((0.3,))
    configs = [hoo.HOOConfig(horizon=T // 2, rho=rho, noise="none", checkpoints=5, precision="float64")
               for rho in (0.3, 0.8)]
    height = max(c.height for c in configs)
    stacked = [hoo.make_params(c)._replace(smooth=np.asarray([c.nu * c.rho ** h for h in range(height + 1)]))
               for c in configs]
    params = Parallel(jax.tree.map(lambda *a: np.stack(a), *stacked), np.asarray(0.0))
    static = TreeStatic(horizon=T, checkpoint_rounds=tuple(range(1, T + 1)), noise_kind="none",
                        tree=make_spec(max(c.capacity for c in configs), height, objective, "random",
                                       "float64"),
                             real="float64", chunk=chunk_size(T), trace=True, instances=2)
    out = _run(parallel_run, static, objective, params=params)
    alone = [_run(hoo.run_single, dataclasses.replace(hoo.make_static(c, objective), trace=True), objective,
                  params=hoo.make_params(c)) for c in configs]
    for i, single in enumerate(alone):
        np.testing.assert_array_equal(out.points[0, i::2], single.points[0])
    assert not np.array_equal(alone[0].points[0], alone[1].points[0])
    np.testing.assert_array_equal(out.recommendation[0], alone[0].recommendation[0])   # round T + 1: instance 0
    assert out.nodes[0] == alone[0].nodes[0] + alone[1].nodes[0] and out.flags[0] == 0
    assert out.depth[0] == max(alone[0].depth[0], alone[1].depth[0])
    with jax.enable_x64(True):
        assert_book(out, 0, objective, static.checkpoint_rounds)


def _chain_numpy(is_last, at_node, u, sib):
    """The B chain step by step, from the deepest row up: -inf below the node, at_node at it,
    min(U, max(B below, sibling's B)) above."""
    out, cur = np.empty_like(u), np.float32(-np.inf)
    for j in reversed(range(u.shape[0])):
        cur = at_node[j] if is_last[j] else min(u[j], max(cur, sib[j]))
        out[j] = cur
    return out


def test_the_b_chain_by_loop_and_by_scan_equals_the_step_by_step_chain():
    """Both ways of computing B along a path (the CPU's loop, the scan used elsewhere), at every
    path length, with ties and infinities among the values, alone and vmapped: bit for bit."""
    rng = np.random.default_rng(7)
    h, runs = 34, 64
    pick = lambda *shape: rng.choice(np.float32([-np.inf, np.inf, 0.25, 0.5, 0.75, 1.0]), shape)
    u, sib, at_node = pick(runs, h), pick(runs, h), pick(runs, h)
    noisy = rng.random((runs, h)) < 0.5
    u = np.where(noisy, rng.random((runs, h)).astype(np.float32), u)
    last = rng.integers(0, h, runs)
    last[:h] = np.arange(h)
    is_last = np.arange(h)[None, :] == last[:, None]
    want = np.stack([_chain_numpy(*(a[r] for a in (is_last, at_node, u, sib))) for r in range(runs)])
    for fn in (chain_loop, chain_scan, chain):
        got = np.asarray(jax.jit(jax.vmap(fn))(is_last, at_node, u, sib))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=fn.__name__)
        one = fn(*(jnp.asarray(a[3]) for a in (is_last, at_node, u, sib)))
        np.testing.assert_array_equal(np.asarray(one).view(np.uint32),
                                      want[3].view(np.uint32), err_msg=fn.__name__)


def _numpy_refresh(rows, size, u_of):
    """U of the credited rows (+inf otherwise) and B bottom-up over rows [0, size), from the table's
    columns alone."""
    count, child = rows[:size, COUNT], rows[:size, CHILD]
    mean = rows[:size, MEAN].view(np.float32)
    u = np.where(count > 0, u_of(mean, np.maximum(count, 1), rows[:size, DEPTH], np.arange(size)),
                 np.inf).astype(np.float32)
    b = u.copy()
    for r in np.argsort(-rows[:size, DEPTH], kind="stable"):        # deepest first
        if child[r] >= 0:
            b[r] = min(u[r], max(b[child[r]], b[child[r] + 1]))
    return u, b


def test_a_refresh_bounded_by_the_rows_in_use_equals_a_whole_table_pass():
    """refresh_all with ``live`` recomputes only a prefix (prefix_sizes) of the table: U and B
    of every row of the tree equal a NumPy recomputation and the whole-table pass, bit for bit, at
    every k whose bound (rows_after_updates) holds the tree; rows past the prefix keep their
    stale values (rows a previous tree left, which nothing reaches)."""
    rng = np.random.default_rng(3)
    objective = _vee((0.3, 0.6))
    capacity = 300
    spec = make_spec(capacity, 40, objective, "random", "float32")
    assert prefix_sizes(capacity) == (17, 257, 300)
    stale = rng.integers(-1, capacity - 1, (capacity, BOX)).astype(np.int32)
    m2 = rng.random(capacity).astype(np.float32)

    def u_fn(mean, count, depth, second):
        return mean + 0.5 ** depth.astype(mean.dtype) + jnp.sqrt(second / count.astype(mean.dtype))

    def refresh(table, k):
        live = rows_after_updates(k)
        return refresh_all(spec, table, u_fn, live=live, per_row=(jnp.asarray(m2),)), live

    bounded = jax.jit(refresh)
    whole = jax.jit(lambda table: refresh_all(spec, table, u_fn, per_row=(jnp.asarray(m2),)))
    grow = jax.jit(lambda table, node, u: expand(spec, table, node, True, u))
    for k, updates in ((0, 0), (1, 1), (2, 3), (3, 7), (5, 31), (6, 63), (7, 127), (8, 140)):
        table = new_table(spec, objective.lo, objective.hi, jax.random.key(k))
        rows = np.asarray(table.rows).copy()
        rows[3:, :BOX] = stale[3:]                       # a previous tree's rows past the root's
        table = table._replace(rows=jnp.asarray(rows))
        for _ in range(updates):                               # one expansion an update
            leaves = np.flatnonzero(np.asarray(table.rows)[:int(table.size), CHILD] < 0)
            table, overflow = grow(table, np.int32(rng.choice(leaves)), np.float32(rng.random()))
            assert not overflow
        size = int(table.size)
        rows = np.asarray(table.rows).copy()
        rows[:size, COUNT] = rng.integers(0, 3, size)
        rows[:size, MEAN] = rng.random(size).astype(np.float32).view(np.int32)
        table = table._replace(rows=jnp.asarray(rows))
        out, live = bounded(table, np.int32(k))
        assert size <= int(live) == 2 ** (k + 1) + 1
        got = np.asarray(out.rows)
        want_u, want_b = _numpy_refresh(rows, size, lambda mean, count, depth, r: (
            mean + np.float32(0.5) ** depth.astype(np.float32) + np.sqrt(m2[r] / count.astype(np.float32))))
        np.testing.assert_array_equal(got[:size, U].view(np.uint32), want_u.view(np.uint32))
        np.testing.assert_array_equal(got[:size, B].view(np.uint32), want_b.view(np.uint32))
        np.testing.assert_array_equal(got[:size], np.asarray(whole(table).rows)[:size])
        prefix = next(m for m in prefix_sizes(capacity) if m >= min(int(live), capacity))
        np.testing.assert_array_equal(got[prefix:], rows[prefix:])
