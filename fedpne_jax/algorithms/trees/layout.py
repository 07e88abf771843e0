"""The node table's layout: one padded integer array, a node per row.

A run's tree is a (capacity, 10 + 2D) array whose rows [0, size) are live, so that reading or
writing a node is one gather or one scatter.  The columns (:data:`CHILD` .. :data:`PARENT`, then
the box from :data:`BOX`) hold the lower child's row (the upper child is the next row; -1 for a
leaf), the node's count, its two children's B (kept in the parent, so that a descent step reads one
short slice), its generation, mean, U and B, and then what is fixed when the node is created: its
depth, its parent and its box's corners.  Floats are stored as their bits (int32 rows hold float32
values, int64 rows float64), so every value is stored exactly.

:class:`TreeSpec` is the host-decided shape of a run's table (part of an algorithm's static key),
:class:`Table` the table with its size and height; :func:`as_float` and :func:`as_bits` convert a
column, :func:`box_of` and :func:`centre` read a node's box and point.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from fedpne_jax.core.split import longest_dims

MAX_HEIGHT = 2048          # deepest tree a B-descent may need (path buffers hold height + 1 rows)

# Columns of a row.  A descent step reads the first DESCENT columns; a round's update of a path
# writes the first DYNAMIC (the rest is written once, when the node is created).
CHILD, COUNT, B0, B1, GEN, MEAN, U, B, DEPTH, PARENT = range(10)
DESCENT, DYNAMIC = 4, 8
BOX = 10          # lower corner BOX .. BOX + D - 1, upper corner BOX + D .. BOX + 2D - 1


@dataclasses.dataclass(frozen=True)
class TreeSpec:
    """Host-decided shape of a run's tree (part of an algorithm's static key)."""

    capacity: int          # rows; sized by the algorithm so that it cannot overflow
    height: int            # deepest depth a node can reach
    dim: int
    split: str
    longest_dims: tuple    # split='longest': dimension per depth 0..height (empty otherwise)
    real: str              # 'float32' or 'float64'
    path: int = 0          # rows of a descent's path buffers, at most height + 1 (0: height + 1)

    @property
    def path_rows(self) -> int:
        return self.path or self.height + 1

    @property
    def dtype(self):
        return jnp.dtype(self.real)

    @property
    def itype(self):
        return jnp.dtype(jnp.int32 if self.real == "float32" else jnp.int64)

    @property
    def width(self) -> int:
        return BOX + 2 * self.dim


class Table(NamedTuple):
    rows: jax.Array     # (N, 10 + 2D) integer rows (see the module docstring)
    size: jax.Array     # () int32 rows in use
    height: jax.Array   # () int32 deepest depth in use


def as_float(spec: TreeSpec, bits):
    return jax.lax.bitcast_convert_type(bits, spec.dtype)


def as_bits(spec: TreeSpec, values):
    return jax.lax.bitcast_convert_type(jnp.asarray(values, spec.dtype), spec.itype)


def box_of(spec: TreeSpec, row):
    """(2, D) lower and upper corner of a row (or (..., 2, D) of rows)."""
    return as_float(spec, row[..., BOX:]).reshape(row.shape[:-1] + (2, spec.dim))


def centre(spec: TreeSpec, row):
    box = box_of(spec, row)
    return (box[..., 0, :] + box[..., 1, :]) / 2


def make_spec(capacity: int, height: int, objective, split: str, real: str, path: Optional[int] = None) -> TreeSpec:
    """``path``: rows of the descents' path buffers (default height + 1, the most a path can need)."""
    dims = longest_dims(objective.lo, objective.hi, 2, height) if split == "longest" and objective.dim > 1 else ()
    rows = height + 1 if path is None else min(int(path), height + 1)
    return TreeSpec(capacity=int(capacity), height=int(height), dim=objective.dim, split=split, longest_dims=dims,
                    real=real, path=0 if rows == height + 1 else rows)


def check_height(height: int, what: str) -> None:
    if height > MAX_HEIGHT:
        raise ValueError(f"{what}: the tree could reach depth {height} (at most {MAX_HEIGHT})")
