"""Every registered algorithm with a small configuration, and parameters it must refuse by name
(tests/test_contract.py)."""
from tests.support.behaviour import BASELINES, FEDPNE, RECORDED_SHAPE

# The algorithms the recorded runs cover run the recorded configuration (tests/support/behaviour.py:
# same objective, seed count and options), so that the two test files share its compiled program.
_RECORDED = {"fedpne": {**RECORDED_SHAPE["fedpne"], **FEDPNE["aggregate"]},
             **{name: {**RECORDED_SHAPE["baseline"], **kw} for name, kw in BASELINES.items() if "-" not in name}}
_SMALL = dict(horizon=300, checkpoints=6, noise="gaussian:0.2")
# A small, quick configuration of each algorithm, and parameters that must be refused by name.
CONTRACT = {
    "fedpne": (_RECORDED["fedpne"], [("rho", 1.5), ("k", 1), ("c", -0.1)]),
    "hct": (_RECORDED["hct"], [("rho", 1.5), ("nu", 0.0), ("delta", 2.0)]),
    "hoo": (_RECORDED["hoo"], [("rho", 0.0), ("nu", -1.0)]),
    "doo": (_SMALL, [("delta", "cubic"), ("gamma", 1.0), ("c", 0.0)]),
    "soo": (_SMALL, [("h_max", -1), ("pyxab", "yes"), ("h_max", 6)]),
    "stosoo": (_SMALL, [("k", 0), ("h_max", -1), ("delta", 0.0), ("pyxab", "yes"), ("h_max", 5)]),
    "vhct": (_SMALL, [("rho", 1.5), ("bound", 0.0), ("delta", 2.0), ("pyxab", "yes")]),
    "poo": (_SMALL, [("rhomax", 1.5), ("numax", 0.0), ("base", "doo"), ("pyxab", "yes")]),
    "gpo": (_SMALL, [("rhomax", 0.0), ("numax", -1.0), ("base", "soo"), ("pyxab", 1)]),
    "pct": (_SMALL, [("rhomax", 1.5), ("numax", 0.0), ("pyxab", "no")]),
    "vpct": (_SMALL, [("rhomax", 1.5), ("numax", 0.0), ("pyxab", "no")]),
    "zooming": (_SMALL, [("nu", 0.0), ("rho", 1.0)]),
    "vroom": (_SMALL, [("horizon", 1), ("h_max", 0), ("b", 0.0), ("f_max", -1.0)]),
    "stroquool": (_SMALL, [("horizon", 67), ("split", "middle")]),
    "sequool": (_SMALL, [("split", "middle"), ("precision", "float16")]),
    "fed1ucb": (_RECORDED["fed1ucb"], [("kappa", 0.0), ("arms", 0)]),
    "fnucb": (_RECORDED["fnucb"], [("width", 0), ("lr", -1.0)]),
    "kernelts": (_RECORDED["kernelts"], [("lengthscale", 0.0), ("lam", -1.0)]),
    "gpucb": (_RECORDED["gpucb"], [("B", -1.0), ("delta", 1.5)]),
    "bo": (_RECORDED["bo"], [("xi", -1.0), ("initial", -1)]),
    "bbo": (_RECORDED["bbo"], [("lengthscale", -2.0)]),
}
COMMON_BAD = [("horizon", 0), ("checkpoints", 0), ("noise", "gaussian:-1")]
