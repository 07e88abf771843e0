"""VPCT: GPO (gpo.py) over VHCT (vhct.py), as PyXAB 0.3.0's VPCT (algos/VPCT.py, parameters numax and
rhomax; ``pyxab=True``: PyXAB's GPO rules over PyXAB's VHCT).  Everything is gpo.py's, including the
compiled program: a VPCT run and a GPO run with base='vhct' and the same fields share it.
"""
from __future__ import annotations

import dataclasses

from fedpne_jax.algorithms.trees import gpo
from fedpne_jax.core.algorithm import Style


@dataclasses.dataclass(frozen=True)
class VPCTConfig(gpo.WrapperConfig):
    """VPCT's parameters: GPO's without ``base`` (always VHCT, with its defaults c = 0.1, delta = 0.01,
    bound = 1)."""

    @property
    def base_name(self) -> str:
        return "vhct"


make_static = gpo.make_static
make_params = gpo.make_params

ALGORITHM = dataclasses.replace(gpo.ALGORITHM, name="vpct", config_type=VPCTConfig,
                                styles=(("vpct", Style("VPCT", "#bd9e39", "3")),))
run_single = ALGORITHM.run_single
