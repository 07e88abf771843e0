"""Fed-PNE and DP-Fed-PNE (Algorithms 1-2 and Appendix D of the paper) as a registered algorithm.

config.py holds the user's configuration, plan.py the host tables derived from it (and the node
table's growth), partition.py the node table, phase.py one phase, sampling.py the rewards,
engine.py one whole run, and steps.py the phases one at a time for ask/tell.
"""
from fedpne_jax.algorithms.fedpne import engine, plan, steps
from fedpne_jax.algorithms.fedpne.config import FedPNEConfig
from fedpne_jax.core.algorithm import Algorithm, Style


def check(config: FedPNEConfig, objective) -> None:
    plan.plan(config).check()


ALGORITHM = Algorithm(
    name="fedpne", config_type=FedPNEConfig, make_static=plan.make_static, make_params=plan.make_params,
    run_single=engine.run_single, metrics=engine.METRICS, federated=True, check=check, tables=plan.tables,
    grow=plan.grow, describe=engine.describe, steps=steps.steps,
    styles=(("fedpne", Style("Fed-PNE", "#d62728", "o")), ("dp-fedpne", Style("Fed-PNE (DP)", "#ff7f0e", "D"))))

__all__ = ["ALGORITHM", "FedPNEConfig"]
