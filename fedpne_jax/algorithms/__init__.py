"""The built-in algorithms, registered in :mod:`fedpne_jax.core.registry` when this package is
imported (``import fedpne_jax`` does): one folder per family, one module per algorithm."""
from fedpne_jax.algorithms.arms import fed1ucb, fnucb
from fedpne_jax.algorithms.fedpne import ALGORITHM as FEDPNE
from fedpne_jax.algorithms.gp import bbo, bo, gpucb, kernelts
from fedpne_jax.algorithms.trees import (
    doo,
    gpo,
    hct,
    hoo,
    pct,
    poo,
    sequool,
    soo,
    stosoo,
    stroquool,
    vhct,
    vpct,
    vroom,
    zooming,
)
from fedpne_jax.core.registry import register

BUILTIN = (FEDPNE, hct.ALGORITHM, hoo.ALGORITHM, fed1ucb.ALGORITHM, kernelts.ALGORITHM, gpucb.ALGORITHM,
           bo.ALGORITHM, bbo.ALGORITHM, fnucb.ALGORITHM, doo.ALGORITHM,
           soo.ALGORITHM, stosoo.ALGORITHM, vhct.ALGORITHM, poo.ALGORITHM, gpo.ALGORITHM, pct.ALGORITHM,
           sequool.ALGORITHM, stroquool.ALGORITHM, vpct.ALGORITHM, zooming.ALGORITHM,
           vroom.ALGORITHM)
for _algorithm in BUILTIN:
    register(_algorithm)

__all__ = ["BUILTIN"]
