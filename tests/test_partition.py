"""Fed-PNE's node geometry is exact where the float format allows, and is computed without a float
``pow`` (exp(e·log k) in each backend's own math library, so its last bit may differ between a CPU
and a GPU)."""
import re
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedpne_jax as fp
from fedpne_jax.algorithms.fedpne import partition
from fedpne_jax.algorithms.fedpne.plan import Tables, make_static
from tests.support.helpers import make


def _table(static, cells, levels):
    cap = static.capacity
    grid = np.zeros((cap, 1, static.words), np.int32)
    grid[: len(cells), 0, 0] = cells
    lev = np.zeros((cap, 1), np.int32)
    lev[: len(levels), 0] = levels
    return partition.NodeTable(jnp.asarray(grid), jnp.asarray(lev), jnp.zeros((cap, 2), jnp.uint32),
                               jnp.int32(len(cells)))


@pytest.mark.parametrize("k", [2, 3, 5])
def test_centres_and_widths_are_the_exact_values_rounded_once(k):
    """Every node of depth e with 2k^e <= 2^24 (numerators exact in float32) (each cell index, or 200 of them, at each depth): its
    centre and width on [0, 1] equal (2a + 1) / (2 k^e) and k^-e rounded once to float32."""
    rows = [(a, e) for e in range(1, 40) if 2 * k ** e <= 2**24
            for a in (range(k ** e) if k ** e <= 200 else np.linspace(0, k ** e - 1, 200).astype(int))]
    config = fp.FedPNEConfig(num_clients=1, horizon=100, k=k, split="longest")
    objective = make("garland", 1)
    static = make_static(config, objective, Tables(capacity=len(rows), depth=40))
    table = _table(static, [a for a, _ in rows], [e for _, e in rows])
    centre = np.asarray(jax.jit(lambda t: partition.centres(static, t, 0.0, 1.0))(table))[:, 0]
    lower, width = (np.asarray(x)[:, 0] for x in jax.jit(lambda t: partition.lower_and_width(static, t, 0.0, 1.0))(table))
    # Fraction -> double -> float32 is one rounding: 53 >= 2 x 24 + 2 bits makes double rounding innocuous.
    exact = lambda q: np.float32(float(q))  # noqa: E731
    assert [centre[i] for i in range(len(rows))] == [exact(Fraction(2 * a + 1, 2 * k ** e)) for a, e in rows]
    assert [lower[i] for i in range(len(rows))] == [exact(Fraction(a, k ** e)) for a, e in rows]
    assert [width[i] for i in range(len(rows))] == [exact(Fraction(1, k ** e)) for _, e in rows]


def test_geometry_compiles_to_no_float_power():
    config = fp.FedPNEConfig(num_clients=1, horizon=100, k=3)
    static = make_static(config, make("garland", 1), Tables(capacity=8, depth=40))
    table = _table(static, [0, 1, 2], [1, 1, 1])
    fn = jax.jit(lambda t: (partition.centres(static, t, 0.0, 1.0), partition.lower_and_width(static, t, 0.0, 1.0)))
    hlo = fn.lower(table).compile().as_text()
    assert re.findall(r"= \S+ power\(", hlo) == []
    assert re.findall(r"= \S+ (?:exponential|log)\(", hlo) == []
