"""A plain-Python POO (Grill, Valko and Munos 2015), the oracle of fedpne_jax.algorithms.trees.poo,
over the steppable HCT, T-HOO and VHCT instances of tests/support/reference_bases.py.

``pyxab=False``: Algorithm 1 of the paper, as a loop over its evaluations: n = 0, N = 1 and the
instance (numax, rhomax); while N < (1/2) D_max ln(n / ln n) (the printed ">=" never ends), start
the instances rhomax^(2N/(2i+1)), i = 1..N, each evaluated n/N times in turn, then n <- 2n, N <- 2N;
evaluate every instance once; n <- n + N; until T evaluations.  mu[s] is a running mean; the output
is the j-th evaluation of the first argmax s* (j = floor(u n_s*), in row order), u given.  T-HOO's n
is the instance's own number of evaluations (a dry run of the loop counts them first).

``pyxab=True``: PyXAB 0.3.0's ``POO.pull`` and ``receive_reward`` line by line (N = n = 2, phase =
1, its V_reward weights, ``get_last_point``), T-HOO's n = T, HCT's and VHCT's PyXAB re-expansion.

Random split dimensions are injected: ``root_dims[k]`` for instance k's root, ``split_dims[t]`` for
the expansion of round t.
"""
from __future__ import annotations

import itertools

import numpy as np

from tests.support import reference_bases as rb
from tests.support.reference_hct import RefRun, longest_dim


def _ratio(n: int) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(n / np.log(n)) if n > 0 else -np.inf


def paper_order(T: int, rhomax: float):
    """(the instance of each of the T evaluations, the rho of every instance started) of Algorithm 1."""
    dmax = np.log(2) / np.log(1 / rhomax)
    rhos = [rhomax]

    def evaluations():
        n, N = 0, 1
        while True:
            while N < 0.5 * dmax * _ratio(n):
                for i in range(1, N + 1):
                    rhos.append(rhomax ** (2 * N / (2 * i + 1)))
                    yield from [len(rhos) - 1] * (n // N)
                n, N = 2 * n, 2 * N
            yield from range(len(rhos))
            n += N

    order = list(itertools.islice(evaluations(), T))
    return order, rhos[:max(order) + 1]


def poo(name: str, dim: int, T: int, *, base: str, numax=1.0, rhomax=0.9, pyxab=False, split="random",
        root_dims=None, split_dims=None, u=0.5, instances=0, noise="none", sigma=0.0, rng=None,
        checkpoints=10, events=None) -> RefRun:
    budget = rb.Budget(name, T, noise, sigma, rng, checkpoints)
    lo, hi = np.full(dim, float(budget.lo)), np.full(dim, float(budget.hi))
    dim_at = rb.splitter(dim, split, split_dims)

    def root(k):
        if dim == 1:
            return 0
        return longest_dim(rb.Node(lo, hi, 0)) if split == "longest" else int(root_dims[k])

    made: list = []
    if not pyxab:
        order, rhos = paper_order(T, rhomax)
        own = np.bincount(order, minlength=len(rhos))
        mu, count = [0.0] * len(rhos), [0] * len(rhos)
        for t, k in enumerate(order, 1):
            if k == len(made):
                made.append(rb.make(base, lo, hi, root(k), nu=numax, rho=rhos[k], n=int(own[k]), pyxab=False))
            inst = made[k]
            r = budget.evaluate(inst.pull())
            inst.receive(r, dim_at(t))
            count[k] += 1
            mu[k] += (r - mu[k]) / count[k]
        best = rb.first_argmax(mu)
        recommendation = made[best].evaluated_point(u)
    else:
        recommendation = _pyxab(budget, made, base, lo, hi, root, dim_at, numax, rhomax, T)
    nodes = sum(len(m.rows) for m in made) + 3 * max(0, instances - len(made))
    for m in made:
        if events is not None:
            events.update(m.events)
    return RefRun(points=np.array(budget.points), curve=budget.curve(), final_regret=budget.regret,
                  recommendation=recommendation, nodes=nodes, depth=max(m.depth for m in made),
                  reexpansions=sum(m.events["regrown"] for m in made))


def _pyxab(budget, made, base, lo, hi, root, dim_at, numax, rhomax, T):
    """PyXAB's POO: pull and receive_reward as written, over the budget."""
    Dmax = np.log(2) / np.log(1 / rhomax)
    N, n, phase, counter = 2, 2, 1, 0
    V_reward: list = []
    algo_counter = None
    for t in range(1, T + 1):
        creating = N <= 0.5 * Dmax * np.log(n / np.log(n))
        if creating:
            if counter == 0:
                rho = rhomax ** (2 * N / (2 * phase + 1))
                made.append(rb.make(base, lo, hi, root(len(made)), nu=numax, rho=rho, n=T, pyxab=True))
                V_reward.append(0)
            algo = made[-1]
        else:
            algo = made[algo_counter]
        reward = budget.evaluate(algo.pull())
        algo.receive(reward, dim_at(t))
        if creating:
            V_reward[-1] = (V_reward[-1] * counter + reward) / (counter + 1)
            counter += 1
            if counter >= np.ceil(n / N):
                counter = 0
                phase += 1
            if phase >= N:
                n, N, phase, counter, algo_counter = 2 * n, 2 * N, 0, 0, 0
        else:
            w = np.ceil(n / N)
            V_reward[algo_counter] = (V_reward[algo_counter] * w + reward) / (w + 1)
            algo_counter += 1
            if algo_counter == len(made):
                algo_counter = 0
                n = n + N
    return made[int(np.argmax(np.array(V_reward)))].peek().centre
