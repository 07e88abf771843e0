"""fedpne-jax: Federated X-armed bandits (Fed-PNE, DP-Fed-PNE) and their baselines as a batched JAX
simulator.

    import fedpne_jax as fp
    import objectives

    config = fp.make_config("fedpne", num_clients=10, horizon=10_000)      # or fp.FedPNEConfig(...)
    result = fp.run(config, objectives.make_objective("garland", 10), seeds=1000)

``fp.ALGORITHMS`` names every registered algorithm; ``fp.run`` and ``fp.run_grid`` run any of them
(the algorithm is the configuration's type); ``fp.run_sweep`` and ``fp.load_sweep`` run and read
resumable sweeps.  The layout: core/ (executor, sharding, registry, noise, sums, results, errors),
algorithms/ (fedpne, trees, arms, gp), experiments/ (sweeps and their storage), paper/ (figures).
"""
from fedpne_jax.algorithms.fedpne.config import FedPNEConfig
from fedpne_jax.core.errors import CapacityError, MissingExtra, ObjectiveError
from fedpne_jax.core.grid import product as grid_product
from fedpne_jax.core.registry import NAMES as ALGORITHMS
from fedpne_jax.core.registry import make_config
from fedpne_jax.core.result import RunResult
from fedpne_jax.core.run import run, run_grid
from fedpne_jax.core.sharding import set_default_devices, use_devices
from fedpne_jax.core.version import __version__
from fedpne_jax.experiments.load import SweepResults, load_sweep
from fedpne_jax.experiments.runner import run_sweep
from fedpne_jax.experiments.sweep import SweepError

__all__ = ["ALGORITHMS", "make_config", "FedPNEConfig", "run", "run_grid", "grid_product", "RunResult",
           "run_sweep", "load_sweep", "SweepResults", "CapacityError", "ObjectiveError", "SweepError", "MissingExtra",
           "set_default_devices", "use_devices", "__version__"]
