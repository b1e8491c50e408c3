"""What each selection method supports, declared once: the methods of ``reserve select``.

Every method of ``--method`` is declared here with its :class:`Capabilities` (money budgets,
several species, a boundary penalty, an exact solve, feature maps, a time limit, and how
several species' scores combine into one ranking). The option checks
(:class:`reserve.config.SelectOptions`), the result tables and the estimator registry
(:mod:`reserve.solvers.registry`) read these declarations; none of them tests a method's
name.

This module imports nothing heavy, so that the command line can list the methods and check
the options before it loads the solvers. :mod:`reserve.solvers.registry` builds the
estimators of the methods declared here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, Literal

from reserve.errors import InvalidInputError

__all__ = [
    "CAPABILITIES",
    "FEATURE_MAPS",
    "METHODS",
    "MODELS",
    "Capabilities",
    "capabilities",
    "check_method",
    "check_model",
    "methods_with",
    "quoted",
]


@dataclass(frozen=True)
class Capabilities:
    """What one method supports.

    Attributes
    ----------
    money_budget : bool
        The estimator takes a money budget itself (``fit(..., cost=)`` with ``budget=``: a
        knapsack). The other methods rank the cells, and the ranking is walked within the
        budget (:func:`reserve.solvers.budget_select`).
    several_species : bool
        Selects for several species at once (``--species A --species B``).
    boundary : bool
        Takes a boundary penalty (``--boundary-penalty``) in its objective.
    exact : bool
        Solves TTK to proven optimality (within ``time_limit``).
    feature_maps : bool
        Learns through a feature map (``--model`` other than ``linear``) on one species.
    time_limit : bool
        Honours ``--time-limit`` (seconds per exact fit).
    polish : bool
        A local search polishes the heuristic's solution (``polish=False`` gives the cheaper
        estimator that cross-validation may fit).
    species_score : {"max", "sum"}
        How several species' scores make one cell's score for the ranking: the best species'
        (TTK's positives: a cell counts for the species it is best for) or their sum
        (``MultiSVM`` ranks by the sum).
    """

    money_budget: bool = False
    several_species: bool = False
    boundary: bool = False
    exact: bool = False
    feature_maps: bool = False
    time_limit: bool = False
    polish: bool = False
    species_score: Literal["max", "sum"] = "max"

    def combine_species(self, per_species: Any) -> Any:
        """One score per row of ``per_species`` (n, S): their max or sum, as declared.

        Examples
        --------
        >>> import numpy as np
        >>> Capabilities(species_score="sum").combine_species(np.array([[1.0, 2.0]]))
        array([3.])
        """
        if self.species_score == "sum":
            return per_species.sum(axis=1)
        return per_species.max(axis=1)


_TTK = {"money_budget": True, "boundary": True}
_EXACT = {**_TTK, "exact": True, "time_limit": True}

#: Every method of ``reserve select --method``, in the order the command line lists them,
#: with what it supports.
CAPABILITIES: dict[str, Capabilities] = {
    "ttk": Capabilities(**_TTK, several_species=True, feature_maps=True, polish=True),
    "ttk-mip": Capabilities(**_EXACT, several_species=True),
    "ttk-bnb": Capabilities(**_EXACT),
    "svm": Capabilities(several_species=True, species_score="sum"),
    "tsvm": Capabilities(),
    "svmperf": Capabilities(),
    "toppush": Capabilities(),
    "aatp": Capabilities(),
}

#: Method names, in the order the command line lists them.
METHODS: tuple[str, ...] = tuple(CAPABILITIES)

#: The feature maps a method with ``feature_maps`` learns through (``linear``: the paper's
#: TTK on the standardised features); :mod:`reserve.solvers.features` implements them.
FEATURE_MAPS: tuple[str, ...] = ("linear", "spline", "interactions", "rbf", "stack", "forest")

#: Values of ``model=`` / ``--model``: ``auto`` (the map and C chosen by cross-validation)
#: or one feature map.
MODELS: tuple[str, ...] = ("auto", *FEATURE_MAPS)

_CAPABILITY_NAMES = frozenset(f.name for f in fields(Capabilities)) - {"species_score"}


def quoted(names: Iterable[str]) -> str:
    """``'a'``, ``'a' or 'b'``, ``'a', 'b' or 'c'``: names for a message.

    Examples
    --------
    >>> quoted(["ttk", "ttk-mip", "ttk-bnb"])
    "'ttk', 'ttk-mip' or 'ttk-bnb'"
    """
    q = [repr(n) for n in names]
    return q[0] if len(q) == 1 else f"{', '.join(q[:-1])} or {q[-1]}"


def methods_with(capability: str) -> tuple[str, ...]:
    """The methods declaring ``capability`` (a boolean field of :class:`Capabilities`).

    Examples
    --------
    >>> methods_with("several_species")
    ('ttk', 'ttk-mip', 'svm')
    """
    if capability not in _CAPABILITY_NAMES:
        raise ValueError(f"{capability!r} is not a capability; one of {sorted(_CAPABILITY_NAMES)}")
    return tuple(m for m, caps in CAPABILITIES.items() if getattr(caps, capability))


def check_method(value: Any) -> str:
    """``value`` as a method name (stripped, lower case), or a one-line refusal.

    Examples
    --------
    >>> check_method(" SVM ")
    'svm'
    """
    m = str(value).strip().lower()
    if m not in CAPABILITIES:
        raise InvalidInputError(f"method={value!r} is unknown; choose one of {', '.join(METHODS)}")
    return m


def check_model(value: Any) -> str:
    """``value`` as a model name (stripped, lower case): ``auto`` or a feature map.

    The one check of ``model=``: the options and the estimator registry both call it.

    Examples
    --------
    >>> check_model("Spline")
    'spline'
    """
    m = str(value).strip().lower()
    if m not in MODELS:
        raise InvalidInputError(f"model={value!r} is unknown; choose one of {', '.join(MODELS)}")
    return m


def capabilities(method: str) -> Capabilities:
    """The declared :class:`Capabilities` of ``method``.

    Examples
    --------
    >>> capabilities("ttk-mip").exact
    True
    """
    return CAPABILITIES[check_method(method)]
