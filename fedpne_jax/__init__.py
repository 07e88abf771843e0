"""fedpne-jax: Federated X-armed bandits (Fed-PNE, DP-Fed-PNE) as a batched JAX simulator."""
__version__ = "0.1.0"

from fedpne_jax.config import FedPNEConfig
from fedpne_jax.errors import CapacityError, ObjectiveError
from fedpne_jax.fedpne import run, run_batch, run_grid, trace_count
from fedpne_jax.grid import product as grid_product
from fedpne_jax.load import SweepResults, load_sweep
from fedpne_jax.params import Params, Static, make_params
from fedpne_jax.result import RunResult
from fedpne_jax.runner import run_sweep
from fedpne_jax.sharding import set_default_devices, use_devices
from fedpne_jax.sweep import SweepError

__all__ = ["FedPNEConfig", "run", "run_batch", "run_grid", "grid_product", "trace_count", "RunResult", "Params",
           "Static", "make_params", "CapacityError", "ObjectiveError", "run_sweep", "load_sweep", "SweepResults",
           "SweepError", "set_default_devices", "use_devices", "__version__"]
