"""fedpne-jax: Federated X-armed bandits (Fed-PNE, DP-Fed-PNE) and their baselines as a batched JAX
simulator.

    import fedpne_jax as fp
    import objectives

    config = fp.make_config("fedpne", num_clients=10, horizon=10_000)      # or fp.FedPNEConfig(...)
    result = fp.run(config, objectives.make_objective("garland", 10), seeds=1000)

``fp.ALGORITHMS`` is a live view of every registered algorithm's name; ``fp.register`` adds one
(``fp.Algorithm``, with a config derived from ``fp.BaselineConfig``); ``fp.run`` and
``fp.run_grid`` run any of them (the algorithm is the configuration's type); ``fp.run_sweep`` and
``fp.load_sweep`` run and read resumable sweeps; ``fp.stepper`` (pure ask/tell functions) and
``fp.Optimizer`` (a Python loop, with save and load) drive any of them one step at a time.  The layout: core/ (executor, sharding, registry, noise, sums, results, errors),
algorithms/ (fedpne, trees, arms, gp), experiments/ (sweeps and their storage), paper/ (figures).
"""
from fedpne_jax import algorithms as _builtin_algorithms  # noqa: F401  (registers the built-in algorithms)
from fedpne_jax.algorithms.fedpne.config import FedPNEConfig
from fedpne_jax.core.algorithm import Algorithm, Style
from fedpne_jax.core.compile_cache import enable as enable_compile_cache
from fedpne_jax.core.config import BaselineConfig
from fedpne_jax.core.diagnostics import LARGE_TABLE, DegenerateRunWarning
from fedpne_jax.core.errors import CapacityError, MissingExtra, ObjectiveError
from fedpne_jax.core.grid import product as grid_product
from fedpne_jax.core.host_devices import enable as enable_host_devices
from fedpne_jax.core.measures import Measures
from fedpne_jax.core.optimizer import Ask, Optimizer
from fedpne_jax.core.registry import NAMES as ALGORITHMS
from fedpne_jax.core.registry import PluginError, load_plugin, make_config, register
from fedpne_jax.core.result import RunResult
from fedpne_jax.core.run import run, run_grid
from fedpne_jax.core.sharding import set_default_devices, use_devices
from fedpne_jax.core.stepper import Query, Stepper, stepper
from fedpne_jax.core.version import __version__
from fedpne_jax.experiments.export import export
from fedpne_jax.experiments.load import SweepResults, load_sweep
from fedpne_jax.experiments.report import report
from fedpne_jax.experiments.runner import run_sweep
from fedpne_jax.experiments.sweep import SweepError

__all__ = ["ALGORITHMS", "register", "load_plugin", "Algorithm", "BaselineConfig", "Style", "Measures", "PluginError",
           "make_config", "FedPNEConfig", "run", "run_grid", "stepper", "Stepper", "Query", "Optimizer", "Ask", "grid_product", "RunResult",
           "run_sweep", "load_sweep", "SweepResults", "report", "export", "CapacityError", "ObjectiveError", "SweepError", "MissingExtra",
           "DegenerateRunWarning", "LARGE_TABLE",
           "set_default_devices", "use_devices", "enable_compile_cache", "enable_host_devices", "__version__"]
