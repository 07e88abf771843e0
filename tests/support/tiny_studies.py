"""The paper's sensitivity and arms studies shrunk to seconds, for the tests of `fedpne reproduce`
that need real sweeps but not the paper's numbers (tests/test_reproduce.py, test_interrupt.py,
test_cli_faults.py)."""
from __future__ import annotations

import dataclasses

from fedpne_jax.paper import studies


def tiny_studies(seeds: int = 2, arms=(10,), c=(0.1, 0.2)) -> dict:
    """{'sensitivity', 'arms'} -> their Study at T = 50 with ``seeds`` seeds: Fed-PNE at each of
    ``c`` (rho = 0.5), Fed1-UCB at each count of ``arms`` (each count its own program)."""
    size = studies.Size((50,), seeds, (2,))
    return {"sensitivity": dataclasses.replace(studies.STUDIES["sensitivity"], quick=size,
                                               grid={"fedpne": {"c": tuple(c), "rho": (0.5,)}}),
            "arms": dataclasses.replace(studies.STUDIES["arms"], quick=size,
                                        quick_grid={"fed1ucb": {"arms": tuple(arms)}})}
