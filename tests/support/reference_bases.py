"""Steppable plain-Python HCT, VHCT and T-HOO instances with PyXAB's rules, and a budget of
evaluations: what tests/support/reference_poo.py and reference_gpo.py drive.  They share no code with
the JAX package: nodes are reference_hct's (VHCT: reference_vhct's) Python objects, B is recomputed
over the whole tree after every update (as PyXAB does), and the formulas are reference_hct's,
reference_vhct's and reference_hoo's.

An instance follows PyXAB's two calls: ``pull()`` selects a node and remembers it, ``receive(r,
dim)`` credits the remembered node (HCT, VHCT) or path (T-HOO) and may expand it along ``dim(node)``.
A ``receive`` without a new ``pull`` credits the last pull again, and a ``pull`` without ``receive``
changes nothing but the memory, as in PyXAB (its GPO does both).  ``peek()`` is the node the next
pull would select.  Its clock is PyXAB's HCT/VHCT ``iteration``: 1 + the rewards received.

VHCT keeps every node's rewards, its variance (reference_vhct's rule: the paper's, or PyXAB's
max(np.var, 1e-3) under ``pyxab``) and U with the Bernstein term.  Under ``pyxab`` a pull stores the
tau of every node its selection passes (PyXAB computes it in ``optTraverse``), the expansion test
reads the pulled node's stored tau (the variance before the reward), and internal nodes re-expand;
otherwise tau is recomputed after the reward and only leaves expand.  ``peek`` stores nothing.

``rows``: the instance's nodes in the order of the JAX table's rows (creation order; a re-expanded
node's new children take its old children's places), ``pulls`` per node: its evaluations, for the
paper POO's random evaluated point.  ``events`` counts pulls, rewards received, those received
without a new pull ("again") and re-expansions ("regrown").
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from tests.support.reference import FUNCTIONS
from tests.support.reference_hct import Node, all_nodes, backward_b, best_child, checkpoint_rounds, make_children, noisy
from tests.support.reference_hoo import default_depth_limit
from tests.support.reference_vhct import MIN_VARIANCE
from tests.support.reference_vhct import Node as VNode
from tests.support.reference_vhct import children as vhct_children


class Instance:
    def __init__(self, lo, hi, root_dim: int):
        self.root = self.new_node(np.asarray(lo, float).copy(), np.asarray(hi, float).copy())
        self.root.children = self.new_children(self.root, root_dim)
        self.rows = [self.root, *self.root.children]
        self.depth = 1
        self.last = None
        self.waiting = False         # pulled, no reward received since
        self.events: Counter = Counter()

    def new_node(self, lo, hi) -> Node:
        return Node(lo, hi, 0)

    def new_children(self, node: Node, d: int) -> list:
        return make_children(node, d)

    def grow(self, node: Node, d: int) -> None:
        old = node.children
        node.children = self.new_children(node, d)
        if old is None:
            self.rows.extend(node.children)
        else:
            at = next(i for i, n in enumerate(self.rows) if n is old[0])
            self.rows[at:at + 2] = node.children
            self.events["regrown"] += 1
        self.depth = max(self.depth, node.depth + 1)

    def choose(self) -> Node:
        """The node a pull selects (``peek``'s, unless the selection leaves a trace)."""
        return self.peek()

    def pull(self):
        node = self.choose()
        self.last = node
        node.pulls = getattr(node, "pulls", 0) + 1
        self.events["pulls"] += 1
        self.waiting = True
        return node.centre

    def received(self) -> None:
        self.events["received"] += 1
        self.events["again"] += not self.waiting
        self.waiting = False

    def evaluated_point(self, u: float):
        """The j-th evaluated point, j = floor(u n), evaluations in row order."""
        counts = [getattr(n, "pulls", 0) for n in self.rows]
        total = sum(counts)
        j = min(math.floor(u * total), total - 1)
        seen = 0
        for node, k in zip(self.rows, counts):
            seen += k
            if seen > j:
                return node.centre
        raise AssertionError("no evaluated point")


class HCT(Instance):
    """reference_hct's rules, one round at a time."""

    def __init__(self, lo, hi, root_dim, *, nu, rho, c=0.1, delta=0.01, expand="leaf"):
        super().__init__(lo, hi, root_dim)
        self.nu, self.rho, self.c, self.delta, self.expand = nu, rho, c, delta, expand
        self.c1 = (rho / (3 * nu)) ** (1 / 8)
        self.iteration = 1

    @staticmethod
    def tplus(t):
        return 1 << (t - 1).bit_length()

    def tau(self, h, t):
        if h == 0:
            return 0
        dt = min(0.5, self.c1 * self.delta / self.tplus(t))
        return math.ceil(self.c ** 2 * math.log(1 / dt) * self.rho ** (-2 * h) / self.nu ** 2)

    def u_value(self, n, t):
        if n.count == 0:
            return math.inf
        conf = self.c ** 2 * math.log(1 / min(1.0, self.c1 * self.delta / self.tplus(t)))
        return n.mean + self.nu * self.rho ** n.depth + math.sqrt(conf / n.count)

    def peek(self):
        node, t = self.root, self.iteration
        while node.children is not None and node.count >= self.tau(node.depth, t):
            node = best_child(node)
        return node

    def credit(self, node, reward):
        node.credit(reward)

    def grows(self, node, t) -> bool:
        return node.count >= self.tau(node.depth, t) and (node.children is None or self.expand == "pyxab")

    def receive(self, reward, dim):
        """Every U and B at t = t+, then credit, U and B; expand under the instance's rule."""
        self.received()
        t, node = self.iteration, self.last
        if t == self.tplus(t):
            for n in all_nodes(self.root):
                n.u = self.u_value(n, t)
            backward_b(self.root)
        self.credit(node, reward)
        node.u = self.u_value(node, t)
        backward_b(self.root)
        if self.grows(node, t):
            self.grow(node, dim(node))
        self.iteration += 1


class VHCT(Instance):
    """reference_vhct's rules (PyXAB's with ``pyxab``), one round at a time."""

    def __init__(self, lo, hi, root_dim, *, nu, rho, c=0.1, delta=0.01, bound=1.0, pyxab=False):
        self.pyxab = pyxab
        self.floor = MIN_VARIANCE if pyxab else 0.0
        super().__init__(lo, hi, root_dim)
        self.nu, self.rho, self.c, self.delta, self.bound = nu, rho, c, delta, bound
        self.c1 = (rho / (3 * nu)) ** (1 / 8)
        self.iteration = 1

    def new_node(self, lo, hi) -> VNode:
        return VNode(lo, hi, 0)

    def new_children(self, node, d: int) -> list:
        return vhct_children(node, d, self.floor)

    tplus = staticmethod(HCT.tplus)

    def log_term(self, t, cap):
        return math.log(1 / min(cap, self.c1 * self.delta / self.tplus(t)))

    def tau(self, n, t):
        h = n.depth
        if h == 0:
            return 0
        V, L, b, nu, rho, c = n.variance, self.log_term(t, 0.5), self.bound, self.nu, self.rho, self.c
        if self.pyxab:
            return np.ceil((V + 3 * b * nu * rho ** h + V * np.sqrt(1 + 6 * b * nu * rho ** h / V))
                           * (c ** 2 * L * rho ** (-2 * h) / nu ** 2))
        r = nu * rho ** h
        return math.ceil(c ** 2 * L / r ** 2 * (V + 3 * b * r + math.sqrt(V ** 2 + 6 * b * r * V)))

    def u_value(self, n, t):
        if n.count == 0:
            return math.inf
        V, L, c = n.variance, self.log_term(t, 1.0), self.c
        ucb = math.sqrt(c ** 2 * 2 * V * L / n.count) + 3 * self.bound * c ** 2 * L / n.count
        return n.mean + ucb + self.nu * (self.rho ** n.depth)

    def credit(self, n, r):
        n.credit(r)
        n.rewards.append(r)
        if self.pyxab:
            n.variance = max(np.var(np.array(n.rewards)), self.floor)
        else:
            n.variance = sum((x - n.mean) ** 2 for x in n.rewards) / len(n.rewards)

    def select(self, store: bool):
        """From the root, to the child with the larger B while count >= tau; ``store``: keep each
        passed node's tau for the expansion test (PyXAB's ``optTraverse``)."""
        node, t = self.root, self.iteration
        while True:
            tau = self.tau(node, t)
            if store:
                node.tau = tau
            if node.children is None or node.count < tau:
                return node
            node = best_child(node)

    def peek(self):
        return self.select(store=False)

    def choose(self):
        return self.select(store=True)

    def grows(self, node, t) -> bool:
        threshold = node.tau if self.pyxab else self.tau(node, t)
        return node.count >= threshold and (node.children is None or self.pyxab)

    receive = HCT.receive


class HOO(Instance):
    """reference_hoo's T-HOO rules with horizon n, one round at a time."""

    def __init__(self, lo, hi, root_dim, *, nu, rho, n):
        super().__init__(lo, hi, root_dim)
        self.nu, self.rho = nu, rho
        self.limit = default_depth_limit(n, nu, rho)
        self.explore = 2 * math.log(n)
        self.iteration = 1

    def peek(self):
        node = self.root
        while node.children is not None:
            node = best_child(node)
        return node

    def pull(self):
        node = self.peek()
        path, n = [], node
        while n is not None:
            path.append(n)
            n = n.parent
        self.path = path
        return super().pull()

    def receive(self, reward, dim):
        self.received()
        node = self.last
        for n in self.path:
            n.credit(reward)
        for n in all_nodes(self.root):
            if n.count > 0:
                n.u = n.mean + math.sqrt(self.explore / n.count) + self.nu * self.rho ** n.depth
        if node.depth <= self.limit:
            self.grow(node, dim(node))
        backward_b(self.root)
        self.iteration += 1


def make(base: str, lo, hi, root_dim, *, nu, rho, n, pyxab):
    """An instance of ``base`` with (nu, rho); ``n``: T-HOO's horizon; ``pyxab``: HCT re-expands, VHCT
    follows PyXAB's rules."""
    if base == "hct":
        return HCT(lo, hi, root_dim, nu=nu, rho=rho, expand="pyxab" if pyxab else "leaf")
    if base == "vhct":
        return VHCT(lo, hi, root_dim, nu=nu, rho=rho, pyxab=pyxab)
    return HOO(lo, hi, root_dim, nu=nu, rho=rho, n=n)


class Spent(Exception):
    """The budget of evaluations is used up."""


@dataclass
class Budget:
    """T evaluations of a named objective: the points, the regret and its curve, the rewards."""

    name: str
    T: int
    noise: str = "none"
    sigma: float = 0.0
    rng: object = None
    checkpoints: int = 10
    points: list = field(default_factory=list)
    regret: float = 0.0
    curve_at: dict = field(default_factory=dict)

    def __post_init__(self):
        self.f, self.lo, self.hi, self.f_star = FUNCTIONS[self.name]

    @property
    def t(self) -> int:
        return len(self.points)

    def evaluate(self, x) -> float:
        if self.t == self.T:
            raise Spent
        value = float(self.f(x))
        self.points.append(np.asarray(x, float))
        self.regret += self.f_star - value
        self.curve_at[self.t] = self.regret
        return noisy(value, self.noise, self.sigma, self.rng)

    def curve(self) -> np.ndarray:
        return np.array([self.curve_at[r] for r in checkpoint_rounds(self.T, self.checkpoints)])


def splitter(dim: int, split: str, split_dims):
    """dim_at(t)(node): the split dimension of the expansion in round t (``split_dims[t]`` under
    'random', the longest side under 'longest', 0 in one dimension)."""
    from tests.support.reference_hct import longest_dim

    def at(t):
        if dim == 1:
            return lambda node: 0
        if split == "longest":
            return longest_dim
        return lambda node: int(split_dims[t])
    return at


def first_argmax(values) -> int:
    return int(np.argmax(np.asarray(values, float)))
