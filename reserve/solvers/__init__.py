"""Solvers: arrays in, arrays out; no geographic imports (STYLE principle 3).

The estimators, the method registry, and the few array helpers other stages use (ranking within
a budget, the transductive input check, the hinge objective) are public here; the modules whose
names start with ``_`` are this package's own.
"""

from reserve.solvers._base import budget_select, top_k
from reserve.solvers._qp import hinge_objective
from reserve.solvers._validation import check_transductive
from reserve.solvers.aatp import AATP
from reserve.solvers.auto import AutoTTK
from reserve.solvers.boundary import Boundary, calibrate_penalty
from reserve.solvers.budget import Budget
from reserve.solvers.constraints import Constraints
from reserve.solvers.ensemble import MapMean, describe_members
from reserve.solvers.features import FEATURE_MAPS, ForestScore
from reserve.solvers.multi import MultiSVM, MultiTTK
from reserve.solvers.problem import SelectionProblem, cells_for_budget
from reserve.solvers.registry import METHODS, TTK_METHODS, canonical_method, make_estimator
from reserve.solvers.search import (
    TransductiveSearchCV,
    TransductiveSplit,
    at_standard_effort,
    fold_k,
)
from reserve.solvers.svm import SVM
from reserve.solvers.svmperf import SVMPerf
from reserve.solvers.targets import SpeciesPlan, plan_species, reachable
from reserve.solvers.toppush import TopPush
from reserve.solvers.tsvm import TSVM
from reserve.solvers.ttk import TTK

__all__ = [
    "AATP",
    "FEATURE_MAPS",
    "METHODS",
    "SVM",
    "TSVM",
    "TTK",
    "TTK_METHODS",
    "AutoTTK",
    "Boundary",
    "Budget",
    "Constraints",
    "ForestScore",
    "MapMean",
    "MultiSVM",
    "MultiTTK",
    "SVMPerf",
    "SelectionProblem",
    "SpeciesPlan",
    "TopPush",
    "TransductiveSearchCV",
    "TransductiveSplit",
    "at_standard_effort",
    "budget_select",
    "calibrate_penalty",
    "canonical_method",
    "cells_for_budget",
    "check_transductive",
    "describe_members",
    "fold_k",
    "hinge_objective",
    "make_estimator",
    "plan_species",
    "reachable",
    "top_k",
]
