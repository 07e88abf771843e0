"""Fed-PNE evaluates an iterative objective only at the rows a phase pulls, a block of rows at a time
(fedpne_jax/algorithms/fedpne/evaluation.py): the evaluations a run performs equal the pulled
(point, client) pairs of every phase rounded up to the block, counted independently by the NumPy
reference; the numbers do not depend on the capacity or the batch; closed-form objectives keep
evaluating every row.  Also the exact quotient that places a phase's checkpoints on its rows."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
import objectives
from fedpne_jax.algorithms.fedpne import evaluation
from fedpne_jax.algorithms.fedpne.engine import evaluation_run
from fedpne_jax.algorithms.fedpne.phase import row_quotient
from fedpne_jax.core import blocks
from fedpne_jax.core.config import MAX_HORIZON
from objectives import python as pyobj
from objectives import synthetic
from objectives.heterogeneity import GlobalOnly, Shifted
from objectives.objective import Objective
from tests.support import reference
from tests.support.helpers import make, reference_problem

M = 3
BLOCK = evaluation.BLOCK


def looped_garland(x):
    """Garland computed inside a one-trip while loop: the engine sees an iterative objective."""
    return jax.lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, synthetic.garland(x)),
                              (0, jnp.zeros((), x.dtype)))[1]


@pytest.fixture(scope="module")
def closed():
    return make("garland", M)


@pytest.fixture(scope="module")
def iterative(closed):
    """Garland with the closed-form objective's client shifts, named so that the reference knows it."""
    return Objective(name="garland", lo=closed.lo, hi=closed.hi, f_star=closed.f_star, num_clients=M,
                     global_fn=GlobalOnly(looped_garland), local_fn=Shifted(looped_garland), data=closed.data)


def test_objectives_are_classified_by_their_functions(closed, iterative):
    assert blocks.kind(closed) == "closed" and blocks.kind(iterative) == "iterative"
    for name in ("landmine", "digits"):
        assert blocks.kind(objectives.make_objective(name, 2)) == "iterative"
    host = pyobj.from_python(lambda X: reference.garland(X), 0.0, 1.0, synthetic.GARLAND_F_STAR, num_clients=M)
    assert blocks.kind(host) == "host"
    assert evaluation.block_rows(closed, 64) == evaluation.block_rows(host, 64) == 0
    assert evaluation.block_rows(iterative, 64) == BLOCK and evaluation.block_rows(iterative, 2) == 2


def test_every_point_of_a_set_gives_the_values_of_one_call_in_as_many_trips_as_points(closed, iterative):
    x = jnp.asarray(np.random.default_rng(3).uniform(size=(7, 1)), jnp.float32)
    trips = []

    def counted(p):
        jax.debug.callback(lambda: trips.append(1))
        return iterative.values_and_locals(p)

    for objective in (closed, iterative):
        want = jax.jit(objective.values_and_locals)(x)
        got = jax.jit(lambda p, o=objective: blocks.every_point(o, o.values_and_locals, p))(x)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    jax.block_until_ready(jax.jit(lambda p: blocks.every_point(iterative, counted, p))(x))
    assert len(trips) == -(-7 // blocks.POINTS_PER_TRIP)
    trips.clear()
    jax.block_until_ready(jax.jit(lambda p: blocks.every_point(closed, counted, p))(x))
    assert len(trips) == 1


def test_every_point_is_one_call_on_a_gpu(iterative):
    """Lowered for CUDA (no GPU needed), the loop over the points is gone: one while loop fewer."""
    from jax import export
    x = jnp.zeros((7, 1), jnp.float32)
    f = jax.jit(lambda p: blocks.every_point(iterative, iterative.values_and_locals, p))
    loops = {p: export.export(f, platforms=[p])(x).mlir_module().count("stablehlo.while") for p in ("cpu", "cuda")}
    assert loops["cpu"] == loops["cuda"] + 1


def test_an_iterative_objective_starts_with_the_table_a_first_overflow_would_give(closed, iterative):
    from fedpne_jax.algorithms.fedpne import plan
    config = fp.FedPNEConfig(num_clients=M, horizon=500)
    small = plan.tables([config], closed)
    assert plan.tables([config]) == small
    assert plan.tables([config], iterative) == small._replace(capacity=plan.GROWTH * small.capacity)
    fixed = fp.FedPNEConfig(num_clients=M, horizon=500, capacity=24)
    assert plan.tables([fixed], iterative).capacity == plan.tables([fixed], closed).capacity == 24


def pulled_per_phase(config, objective):
    """(nodes the NumPy reference pulls in each phase, the last one cut at T included; its result).
    With centre pulls the reference evaluates f once per pulled node (a point of shape (D,)) and,
    after a phase that completes, every client at all of the phase's nodes at once (points
    (|K|, D)): the batch calls delimit the phases."""
    calls = []

    def counted(x):
        calls.append(np.ndim(x))
        return reference.garland(x)

    prob = dataclasses.replace(reference_problem(objective), f=counted)
    ref = reference.fedpne(prob, config.horizon, k=config.k, split=config.split, nu=config.nu, rho=config.rho,
                           c=config.c, c1=config.c1, delta=config.delta, noise="none",
                           checkpoints=config.checkpoints)
    phases, current = [], 0
    for ndim in calls:
        if ndim == 1:
            current += 1
        else:
            phases.append(current)
            current = 0
    if current:
        phases.append(current)
    assert len(phases) == ref.phases + (current > 0)
    return phases, ref


@pytest.mark.parametrize("sampling,local", [("aggregate", False), ("client", True), ("explicit", True)])
def test_evaluations_are_the_pulled_rows_rounded_to_the_block(sampling, local, iterative):
    # T = 2900 cuts the last phase after some of its nodes: its rows are counted as pulled, not all.
    config = fp.FedPNEConfig(num_clients=M, horizon=2900, noise="none", sampling=sampling, split="longest",
                             checkpoints=9)
    phases, ref = pulled_per_phase(config, iterative)
    assert len(phases) >= 4 and any(n % BLOCK for n in phases)      # rounding matters here
    run = evaluation_run(config, iterative, seeds=2)
    out = run["outputs"]
    np.testing.assert_array_equal(out.phases, ref.phases)
    rows = sum(-(-n // BLOCK) * BLOCK for n in phases)
    for seed in range(2):                   # noise-free, longest split: both seeds are the same run
        assert out.evaluations[seed].tolist() == [rows, rows if local else 0, 0, len(phases)]
    assert run["global_points"].tolist() == [rows] * 2
    assert run["local_pairs"].tolist() == [rows * M if local else 0] * 2
    assert run["total"].tolist() == [rows * M * (2 if local else 1)] * 2
    sites = 2 if local else 1
    assert run["every_row_total"].tolist() == [len(phases) * run["capacity"] * M * sites] * 2
    assert run["capacity"] > BLOCK * -(-max(phases) // BLOCK)           # rows were skipped


def test_a_global_combined_from_the_local_values_is_not_evaluated_again(iterative):
    """An objective whose global function is marked as the combination of its local values
    (objectives.averages with combine) is evaluated at the local site only, and makes the same run
    as the same functions unmarked, which evaluate both sites."""
    local = iterative.local_fn
    mean = objectives.mean_of_clients
    clients = jnp.arange(M, dtype=jnp.int32)

    def plain(data, x):
        return mean(data, jax.vmap(lambda m: local(data, x, m))(clients))

    @objectives.averages(local, combine=mean)
    def marked(data, x):
        return mean(data, jax.vmap(lambda m: local(data, x, m))(clients))

    config = fp.FedPNEConfig(num_clients=M, horizon=2900, noise="gaussian:0.1", sampling="client", split="longest",
                             checkpoints=9)
    runs = {}
    for label, fn in (("plain", plain), ("marked", marked)):
        objective = dataclasses.replace(iterative, global_fn=fn)
        assert (objective.combine is not None) == (label == "marked")
        runs[label] = evaluation_run(config, objective, seeds=2)
    plain_out, marked_out = runs["plain"]["outputs"], runs["marked"]["outputs"]
    for field in ("final_regret", "curve", "phases", "uploads", "recommendation", "simple_curve", "flags"):
        np.testing.assert_array_equal(getattr(marked_out, field), getattr(plain_out, field), err_msg=field)
    e = plain_out.evaluations
    assert (e[:, 0] == e[:, 1]).all() and (e[:, 0] > 0).all()
    np.testing.assert_array_equal(marked_out.evaluations, e * np.array([0, 1, 1, 1]))
    np.testing.assert_array_equal(runs["marked"]["total"], e[:, 1] * M)
    np.testing.assert_array_equal(runs["plain"]["total"], 2 * e[:, 1] * M)
    np.testing.assert_array_equal(runs["marked"]["every_row_total"], e[:, 3] * runs["marked"]["capacity"] * M)


def test_closed_form_objectives_evaluate_every_row(closed):
    config = fp.FedPNEConfig(num_clients=M, horizon=2900, noise="none", sampling="client", split="longest",
                             checkpoints=9)
    phases, _ = pulled_per_phase(config, closed)
    run = evaluation_run(config, closed, seeds=2)
    every = len(phases) * run["capacity"]
    assert run["eval_block"] == 0
    assert run["outputs"].evaluations.tolist() == [[every, every, 0, len(phases)]] * 2
    np.testing.assert_array_equal(run["total"], run["every_row_total"])
    np.testing.assert_array_equal(run["outputs"].final_regret, fp.run(config, closed, seeds=2).final_regret)


# The runs of test_numbers_do_not_depend_on_capacity_or_batch: per sampler, its options, a first
# capacity one or two doublings below what the runs need (64 and 32 rows), and a roomy one above the
# grown table (a larger one compiles for longer).
GROWN = [(dict(noise="gaussian:0.3", sampling="client", split="random", k=3), 32, 256),
         (dict(noise="uniform:0.3"), 8, 64)]


def grown_config(kw):
    return fp.FedPNEConfig(num_clients=M, horizon=1500, checkpoints=7, **kw)


def test_both_paths_make_the_same_run(iterative):
    """Every row evaluated in one call, or the pulled rows in blocks: the same phases, nodes and
    recommendation; regret to the last bit but one (an FMA XLA may form only on the first path)."""
    # The client sampler's roomy runs of the capacity test: the blocks' path is their program.
    kw, _, roomy = GROWN[0]
    config = grown_config(kw).replace(capacity=roomy)
    blocks, every = evaluation_run(config, iterative, seeds=3), evaluation_run(config, iterative, seeds=3, eval_block=0)
    a, b = blocks["outputs"], every["outputs"]
    for name in ("phases", "uploads", "depth", "recommendation", "max_active", "flags"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_allclose(a.final_regret, b.final_regret, rtol=1e-6)
    np.testing.assert_allclose(a.curve, b.curve, rtol=1e-6)
    assert np.all(blocks["total"] < every["total"])


@pytest.mark.parametrize("kw,first,capacity", GROWN)
def test_numbers_do_not_depend_on_capacity_or_batch(kw, first, capacity, iterative):
    config = grown_config(kw)
    grown = fp.run(config.replace(capacity=first), iterative, seeds=3, base_seed=2)
    roomy = fp.run(config.replace(capacity=capacity), iterative, seeds=3, base_seed=2)
    alone = fp.run(config.replace(capacity=capacity), iterative, seeds=[1], base_seed=2)
    assert first < grown.capacity < capacity                 # the table did grow
    for other, rows in ((grown, slice(None)), (alone, [1])):
        np.testing.assert_array_equal(other.final_regret, roomy.final_regret[rows])
        np.testing.assert_array_equal(other.curves, roomy.curves[rows])
        for name, value in other.metrics.items():
            np.testing.assert_array_equal(value, roomy.metrics[name][rows])


def test_row_quotient_is_exact_over_its_range():
    """offset // n through float32 and one correction, at the edges where a float quotient rounds
    the wrong way: every remainder 0, 1 and n - 1, quotients up to 2^22, n up to the largest T + 1."""
    rng = np.random.default_rng(0)
    T = MAX_HORIZON
    n = np.concatenate([[1, 2, 3, 7, 2**16 + 1, 2**24 - 1, 2**24 + 1, 2**30, T + 1],
                        rng.integers(1, 2**31 - 1, 400), rng.integers(1, 4096, 400)]).astype(np.int64)
    q = np.minimum(rng.integers(0, 2**22 + 1, n.size), (2**31 - 1) // n - 1)
    q[:9] = np.minimum(2**22, (2**31 - 1) // n[:9] - 1)
    offsets, ns = [], []
    for r in (0, 1, -1):
        o = q * n + np.where(r >= 0, r, n - 1)
        keep = (o >= 0) & (o < 2**31) & (o // n <= 2**22)
        offsets.append(o[keep]), ns.append(n[keep])
    offset, n = np.concatenate(offsets), np.concatenate(ns)
    got = jax.jit(jax.vmap(row_quotient))(jnp.asarray(offset, jnp.int32), jnp.asarray(n, jnp.int32))
    np.testing.assert_array_equal(np.asarray(got), offset // n)
    assert (offset // n).max() == 2**22 and n.max() == T + 1
    rounded = np.floor(np.float32(offset) / np.float32(n)).astype(np.int64)
    assert np.any(rounded > offset // n) and np.any(rounded < offset // n)     # both corrections are needed
