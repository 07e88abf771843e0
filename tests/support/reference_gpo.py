"""A plain-Python GPO (Shang, Kaufmann and Valko 2019, Algorithm 5), the oracle of
fedpne_jax.algorithms.trees.gpo (and pct), over the steppable HCT, T-HOO and VHCT instances of
tests/support/reference_bases.py.

``pyxab=False``: N = ceil((1/2) D_max ln((T/2) / ln(T/2))), L = floor(T / (2N)); for i = 1..N run a
fresh instance (numax, rhomax^(2N/(2i+1))) for L evaluations (T-HOO's n = L), take the point its
next pull would select, evaluate it L times (running mean V[i]); then evaluate the first argmax
x_i* until T, and recommend it.

``pyxab=True``: PyXAB 0.3.0's ``GPO.pull`` and ``receive_reward`` line by line (its phase and
counter, goodx, V_x and V_reward, ``get_last_point``), T-HOO's n = T, HCT's and VHCT's PyXAB re-expansion.

Random split dimensions are injected: ``root_dims[0]`` for the first instance's root,
``split_dims[t]`` for the expansion of round t and, under the paper's rule, the root of the instance
that starts in round t + 1.
"""
from __future__ import annotations

import numpy as np

from tests.support import reference_bases as rb
from tests.support.reference_hct import RefRun, longest_dim


def sizes(T: int, rhomax: float):
    """(N as PyXAB's float, L)."""
    dmax = np.log(2) / np.log(1 / rhomax)
    N = np.ceil(0.5 * dmax * np.log((T / 2) / np.log(T / 2)))
    return N, int(np.floor(T / (2 * N)))


def gpo(name: str, dim: int, T: int, *, base: str, numax=1.0, rhomax=0.9, pyxab=False, split="random",
        root_dims=None, split_dims=None, noise="none", sigma=0.0, rng=None, checkpoints=10, events=None) -> RefRun:
    budget = rb.Budget(name, T, noise, sigma, rng, checkpoints)
    lo, hi = np.full(dim, float(budget.lo)), np.full(dim, float(budget.hi))
    dim_at = rb.splitter(dim, split, split_dims)

    def root(t):
        """The root's dimension of an instance starting in round t + 1."""
        if dim == 1:
            return 0
        if split == "longest":
            return longest_dim(rb.Node(lo, hi, 0))
        return int(root_dims[0]) if t == 0 else int(split_dims[t])

    N, L = sizes(T, rhomax)
    run = _pyxab if pyxab else _paper
    made, recommendation = run(budget, base, lo, hi, root, dim_at, numax, rhomax, T, N, L)
    for m in made:
        if events is not None:
            events.update(m.events)
    return RefRun(points=np.array(budget.points), curve=budget.curve(), final_regret=budget.regret,
                  recommendation=recommendation, nodes=len(made[-1].rows), depth=made[-1].depth,
                  reexpansions=sum(m.events["regrown"] for m in made))


def _paper(budget, base, lo, hi, root, dim_at, numax, rhomax, T, N, L):
    xs, V, made = [], [], []
    for i in range(1, int(N) + 1):
        inst = rb.make(base, lo, hi, root(budget.t), nu=numax, rho=rhomax ** (2 * N / (2 * i + 1)), n=L, pyxab=False)
        made.append(inst)
        for _ in range(L):
            r = budget.evaluate(inst.pull())
            inst.receive(r, dim_at(budget.t))
        x = inst.peek().centre
        v = 0.0
        for j in range(L):
            v += (budget.evaluate(x) - v) / (j + 1)
        xs.append(x)
        V.append(v)
    best = xs[rb.first_argmax(V)]
    while budget.t < T:
        budget.evaluate(best)
    return made, best


def _pyxab(budget, base, lo, hi, root, dim_at, numax, rhomax, T, N, hpl):
    """PyXAB's GPO: pull and receive_reward as written, over the budget."""
    phase, counter, goodx = 1, 0, None
    V_x: list = []
    V_reward: list = []
    made: list = []
    for t in range(1, T + 1):
        # pull
        if phase > N:
            point = goodx
        else:
            if counter == 0:
                rho = rhomax ** (2 * N / (2 * phase + 1))
                made.append(rb.make(base, lo, hi, root(0), nu=numax, rho=rho, n=T, pyxab=True))
                curr = made[-1]
            if counter < hpl:
                point = curr.pull()
                goodx = point
            elif counter == hpl:
                point = goodx
                V_x.append(point)
                V_reward.append(0)
            else:
                point = goodx
            if counter >= 2 * hpl:
                phase += 1
                counter = 0
        reward = budget.evaluate(point)
        # receive_reward
        if phase > N:
            pass
        elif phase == N:
            goodx = V_x[int(np.argmax(np.array(V_reward)))]
        else:
            if counter < hpl:
                curr.receive(reward, dim_at(t))
            else:
                V_reward[phase - 1] = (V_reward[phase - 1] * (counter - hpl) + reward) / (counter - hpl + 1)
        counter += 1
    return made, V_x[int(np.argmax(np.array(V_reward)))]
