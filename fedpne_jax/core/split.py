"""The longest-side split rule of a tree partition, shared by Fed-PNE and the centralized trees.

Every node of one depth has been split the same number of times along each dimension (the rule is
deterministic), so one dimension per depth describes the whole partition.  Exact rational arithmetic
makes ties (lowest index wins) reliable for any k and box.
"""
from __future__ import annotations

from fractions import Fraction

SPLITS = ("random", "longest")     # a random dimension per node (PyXAB's BinaryPartition), or this rule


def longest_dims(lo, hi, k: int, depth: int) -> tuple[int, ...]:
    """Split dimension of the nodes at depths 0..depth: the longest side, lowest index on ties."""
    widths = [Fraction(float(b)) - Fraction(float(a)) for a, b in zip(lo, hi)]
    levels = [0] * len(widths)
    dims = []
    for _ in range(depth + 1):
        sides = [w / Fraction(k) ** e for w, e in zip(widths, levels)]
        d = max(range(len(sides)), key=lambda i: (sides[i], -i))
        dims.append(d)
        levels[d] += 1
    return tuple(dims)
