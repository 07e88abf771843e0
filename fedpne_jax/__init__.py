"""fedpne-jax: Federated X-armed bandits (Fed-PNE, DP-Fed-PNE) as a batched JAX simulator."""
__version__ = "0.1.0"

from fedpne_jax.core.config import FedPNEConfig
from fedpne_jax.core.errors import CapacityError, ObjectiveError
from fedpne_jax.algorithms.fedpne.engine import run, run_batch, run_grid, trace_count
from fedpne_jax.core.grid import product as grid_product
from fedpne_jax.experiments.load import SweepResults, load_sweep
from fedpne_jax.algorithms.fedpne.plan import Params, Static, make_params
from fedpne_jax.core.result import RunResult
from fedpne_jax.experiments.runner import run_sweep
from fedpne_jax.core.sharding import set_default_devices, use_devices
from fedpne_jax.experiments.sweep import SweepError

__all__ = ["FedPNEConfig", "run", "run_batch", "run_grid", "grid_product", "trace_count", "RunResult", "Params",
           "Static", "make_params", "CapacityError", "ObjectiveError", "run_sweep", "load_sweep", "SweepResults",
           "SweepError", "set_default_devices", "use_devices", "__version__"]
