"""PCT, the Parallel Confidence Tree of Shang, Kaufmann and Valko (ALT 2019): GPO (gpo.py) over HCT,
as PyXAB 0.3.0's PCT (algos/PCT.py, parameters numax and rhomax; ``pyxab=True``: PyXAB's GPO
rules).  Everything is gpo.py's, including the compiled program: a PCT run and a GPO run with
base='hct' and the same fields share it.
"""
from __future__ import annotations

import dataclasses

from fedpne_jax.algorithms.trees import gpo
from fedpne_jax.core.algorithm import Style


@dataclasses.dataclass(frozen=True)
class PCTConfig(gpo.WrapperConfig):
    """PCT's parameters: GPO's without ``base`` (always HCT, with its defaults c = 0.1, delta = 0.01)."""

    @property
    def base_name(self) -> str:
        return "hct"


make_static = gpo.make_static
make_params = gpo.make_params

ALGORITHM = dataclasses.replace(gpo.ALGORITHM, name="pct", config_type=PCTConfig,
                                styles=(("pct", Style("PCT", "#e7ba52", "+")),))
run_single = ALGORITHM.run_single
