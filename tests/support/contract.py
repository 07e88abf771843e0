"""Every registered algorithm with a small configuration, and parameters it must refuse by name
(tests/test_contract.py)."""
M = 3
# A small, quick configuration of each algorithm, and parameters that must be refused by name.
CONTRACT = {
    "fedpne": (dict(num_clients=M, horizon=2000, checkpoints=6), [("rho", 1.5), ("k", 1), ("c", -0.1)]),
    "hct": (dict(horizon=300, checkpoints=6), [("rho", 1.5), ("nu", 0.0), ("delta", 2.0)]),
    "hoo": (dict(horizon=300, checkpoints=6), [("rho", 0.0), ("nu", -1.0)]),
    "doo": (dict(horizon=300, checkpoints=6), [("delta", "cubic"), ("gamma", 1.0), ("c", 0.0)]),
    "soo": (dict(horizon=300, checkpoints=6), [("h_max", -1), ("pyxab", "yes"), ("h_max", 6)]),
    "stosoo": (dict(horizon=300, checkpoints=6), [("k", 0), ("h_max", -1), ("delta", 0.0), ("pyxab", "yes"),
                                                  ("h_max", 5)]),
    "vhct": (dict(horizon=300, checkpoints=6), [("rho", 1.5), ("bound", 0.0), ("delta", 2.0), ("pyxab", "yes")]),
    "poo": (dict(horizon=300, checkpoints=6), [("rhomax", 1.5), ("numax", 0.0), ("base", "doo"), ("pyxab", "yes")]),
    "gpo": (dict(horizon=300, checkpoints=6), [("rhomax", 0.0), ("numax", -1.0), ("base", "soo"), ("pyxab", 1)]),
    "pct": (dict(horizon=300, checkpoints=6), [("rhomax", 1.5), ("numax", 0.0), ("pyxab", "no")]),
    "fed1ucb": (dict(num_clients=M, horizon=2000, checkpoints=6, arms=16), [("kappa", 0.0), ("arms", 0)]),
    "fnucb": (dict(num_clients=M, horizon=40, checkpoints=6, arms=8), [("width", 0), ("lr", -1.0)]),
    "kernelts": (dict(horizon=60, checkpoints=6, num_candidates=32), [("lengthscale", 0.0), ("lam", -1.0)]),
    "gpucb": (dict(horizon=60, checkpoints=6, num_candidates=32), [("B", -1.0), ("delta", 1.5)]),
    "bo": (dict(horizon=40, checkpoints=6, num_candidates=32), [("xi", -1.0), ("initial", -1)]),
    "bbo": (dict(num_clients=M, horizon=40, checkpoints=6, num_candidates=32), [("lengthscale", -2.0)]),
}
COMMON_BAD = [("horizon", 0), ("checkpoints", 0), ("noise", "gaussian:-1")]
