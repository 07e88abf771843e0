"""Objectives for fedpne-jax: the :class:`Objective` protocol, the built-in test functions and the
paper's real-world objectives.

``make_objective(name, num_clients, heterogeneity, seed, dim, amplitude, instance)`` builds a
registered objective; ``REGISTRY`` holds the synthetic test functions, ``REAL_REGISTRY`` the
real-world objectives, ``BBOB_REGISTRY`` COCO's 24 noiseless BBOB functions and ``OBJECTIVES`` all
of them; ``spec(name)`` and ``default_size(name)`` give an objective's defaults.  ``register(name,
factory)`` adds your own (so do installed entry points in the group ``fedpne_jax.objectives``,
imported the first time their name is looked up).  ``from_python`` and ``from_pyxab`` wrap NumPy
functions and PyXAB objectives (python.py).

This module only re-exports, so that ``import objectives`` is the one public face whatever file a
name lives in: the specs, registries, registration and lookup are in registry.py.  How to write or
bring your own: docs/guides/own-objective.md.
"""
from __future__ import annotations

from objectives import bbob as bbob
from objectives import covid as covid
from objectives import digits as digits
from objectives import landmine as landmine
from objectives import landmine_sklearn as landmine_sklearn
from objectives import synthetic as synthetic
from objectives.heterogeneity import DEFAULT_AMPLITUDE as DEFAULT_AMPLITUDE
from objectives.heterogeneity import HETEROGENEITIES as HETEROGENEITIES
from objectives.heterogeneity import client_shifts as client_shifts
from objectives.heterogeneity import fourier_perturbation as fourier_perturbation
from objectives.heterogeneity import heterogeneous_parts as heterogeneous_parts
from objectives.heterogeneity import heterogeneous_parts_on_base as heterogeneous_parts_on_base
from objectives.objective import Objective as Objective
from objectives.objective import averages as averages
from objectives.objective import mean_of_clients as mean_of_clients
from objectives.python import PythonObjectiveError as PythonObjectiveError
from objectives.python import from_python as from_python
from objectives.python import from_pyxab as from_pyxab
from objectives.registry import BBOB_REGISTRY as BBOB_REGISTRY
from objectives.registry import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from objectives.registry import OBJECTIVES as OBJECTIVES
from objectives.registry import REAL_REGISTRY as REAL_REGISTRY
from objectives.registry import REGISTRY as REGISTRY
from objectives.registry import default_heterogeneity as default_heterogeneity
from objectives.registry import default_seeds as default_seeds
from objectives.registry import default_size as default_size
from objectives.registry import make_objective as make_objective
from objectives.registry import register as register
from objectives.registry import spec as spec
from objectives.specs import REAL_HETEROGENEITIES as REAL_HETEROGENEITIES
from objectives.specs import BBOBSpec as BBOBSpec
from objectives.specs import Homogeneous as Homogeneous
from objectives.specs import RealSpec as RealSpec
from objectives.specs import Spec as Spec
from objectives.specs import UserSpec as UserSpec
from objectives.validation import is_int as is_int

# What ``from objectives import *`` gives; the names above that are not listed stay importable by name.
__all__ = ["Objective", "make_objective", "register", "UserSpec", "spec", "default_size", "default_seeds",
           "default_heterogeneity", "REGISTRY", "REAL_REGISTRY", "BBOB_REGISTRY", "OBJECTIVES", "HETEROGENEITIES",
           "REAL_HETEROGENEITIES", "DEFAULT_AMPLITUDE", "client_shifts", "fourier_perturbation", "from_python",
           "from_pyxab", "PythonObjectiveError", "averages", "mean_of_clients"]
