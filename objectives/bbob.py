"""The 24 noiseless BBOB functions of COCO (Hansen, Finck, Ros, Auger 2009), as fedpne-jax objectives:
one namespace, ``objectives.bbob``, over the four modules that implement them.

fedpne-jax maximises the reward -(f_k(x) - f_opt), so the regret of a point is COCO's precision and
f* = 0.  The modules: bbob_instances (numbers, names, box, COCO's bbob2009 instance generator),
bbob_functions (the functions in plain JAX), bbob_federated (the heterogeneity 'instances') and
bbob_search (its f*).  tests/test_bbob.py checks every function against COCO's own ``cocoex``; the
private ``_dot`` and ``_matmul`` are re-exported because tests/test_portability.py checks them here.

Why four modules, and what each holds: docs/guides/paper-figures.md, section "The objectives in detail", "COCO's BBOB functions".
"""
from __future__ import annotations

from objectives.bbob_federated import HETEROGENEITIES as HETEROGENEITIES
from objectives.bbob_federated import InstanceLocal as InstanceLocal
from objectives.bbob_federated import InstanceMean as InstanceMean
from objectives.bbob_federated import stacked_arrays as stacked_arrays
from objectives.bbob_functions import Reward as Reward
from objectives.bbob_functions import SharedReward as SharedReward
from objectives.bbob_functions import device_arrays as device_arrays
from objectives.bbob_functions import precision as precision
from objectives.bbob_functions import shared_arrays as shared_arrays
from objectives.bbob_functions import t_asy as t_asy
from objectives.bbob_functions import t_osz as t_osz
from objectives.bbob_instances import HI as HI
from objectives.bbob_instances import LO as LO
from objectives.bbob_instances import MAX_DIM as MAX_DIM
from objectives.bbob_instances import MAX_INSTANCE as MAX_INSTANCE
from objectives.bbob_instances import NAMES as NAMES
from objectives.bbob_instances import NUM_FUNCTIONS as NUM_FUNCTIONS
from objectives.bbob_instances import ONE_DIMENSIONAL as ONE_DIMENSIONAL
from objectives.bbob_instances import Instance as Instance
from objectives.bbob_instances import _dot as _dot
from objectives.bbob_instances import _matmul as _matmul
from objectives.bbob_instances import check_dim as check_dim
from objectives.bbob_instances import check_function as check_function
from objectives.bbob_instances import check_instance as check_instance
from objectives.bbob_instances import instance as instance
from objectives.bbob_instances import legacy_fopt as legacy_fopt
from objectives.bbob_instances import legacy_gauss as legacy_gauss
from objectives.bbob_instances import legacy_rotation as legacy_rotation
from objectives.bbob_instances import legacy_uniform as legacy_uniform
from objectives.bbob_instances import legacy_xopt as legacy_xopt
from objectives.bbob_search import SEARCH_EVALUATIONS as SEARCH_EVALUATIONS
from objectives.bbob_search import SEARCH_STARTS as SEARCH_STARTS
from objectives.bbob_search import SEARCH_STEPS as SEARCH_STEPS
from objectives.bbob_search import instances_f_star as instances_f_star
from objectives.bbob_search import sample_points as sample_points
from objectives.bbob_search import search as search
