"""fedpne-jax: Federated X-armed bandits (Fed-PNE, DP-Fed-PNE) as a batched JAX simulator."""
__version__ = "0.1.0"

from fedpne_jax.config import FedPNEConfig
from fedpne_jax.errors import CapacityError, ObjectiveError
from fedpne_jax.fedpne import run, run_batch, trace_count
from fedpne_jax.params import Params, Static, make_params
from fedpne_jax.result import RunResult

__all__ = ["FedPNEConfig", "run", "run_batch", "trace_count", "RunResult", "Params", "Static", "make_params",
           "CapacityError", "ObjectiveError", "__version__"]
