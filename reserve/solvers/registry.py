"""One registry from method names to estimators, used by ``reserve select`` and the benchmarks.

Method names are the ``reserve select --method`` spellings (``ttk``, ``ttk-mip``, ...); the
paper's column names (``TTK-FD``, ``TTK-MIP``, ...) are aliases of the same entries, so the
benchmarks and the command line build exactly the same estimators. What each method supports
is declared once, in :data:`reserve.methods.CAPABILITIES` (re-exported here); the registry
refuses what a method does not declare, and :func:`chosen_C` reports the C a fitted
estimator used.
"""

from __future__ import annotations

from typing import Any

from reserve.errors import InvalidInputError
from reserve.methods import (
    CAPABILITIES,
    METHODS,
    Capabilities,
    capabilities,
    check_model,
    methods_with,
    quoted,
)

__all__ = [
    "CAPABILITIES",
    "METHODS",
    "PAPER_NAMES",
    "TTK_METHODS",
    "Capabilities",
    "canonical_method",
    "capabilities",
    "chosen_C",
    "fixed_model",
    "make_estimator",
]

#: The paper's column names and the method each one is.
PAPER_NAMES: dict[str, str] = {
    "TTK-FD": "ttk",
    "TTK-MIP": "ttk-mip",
    "SVM": "svm",
    "TSVM": "tsvm",
    "SVMPerf": "svmperf",
    "TopPush": "toppush",
    "AATP": "aatp",
}

#: Methods that take a money budget themselves (TTK's knapsack), as declared in
#: :data:`CAPABILITIES`.
TTK_METHODS: frozenset[str] = frozenset(methods_with("money_budget"))


def canonical_method(name: str) -> str:
    """The registry's spelling of ``name`` (a method or a paper column name).

    Examples
    --------
    >>> canonical_method("TTK-FD")
    'ttk'
    >>> canonical_method("svm")
    'svm'
    """
    method = PAPER_NAMES.get(name, name)
    if method not in METHODS:
        raise InvalidInputError(
            f"method={name!r} is not a method; choose from {', '.join(METHODS)} "
            f"(or a paper column name: {', '.join(PAPER_NAMES)})"
        )
    return method


def make_estimator(
    name: str,
    *,
    k: int,
    C: float = 1.0,
    budget: float | None = None,
    n_species: int = 1,
    random_state: int | None = None,
    time_limit: float = 60.0,
    fit_time_limit: float | None = None,
    polish: bool = True,
    model: str = "linear",
    Cs: tuple[float, ...] | None = None,
    n_jobs: int | None = None,
    effort_columns: tuple[int, ...] | None = None,
) -> Any:
    """A fresh, unfitted estimator for method ``name``.

    Parameters
    ----------
    name : str
        A method (:data:`METHODS`) or a paper column name (:data:`PAPER_NAMES`).
    k : int
        Cells to select (with a money ``budget``: the cells the budget buys at the median
        cost, used by the baselines).
    C : float, default=1.0
        Loss weight.
    budget : float or None, default=None
        A money budget, for the methods declaring ``money_budget`` (the others rank the
        cells, and the caller walks the ranking within the budget).
    n_species : int, default=1
        With more than one (methods declaring ``several_species``):
        :class:`~reserve.solvers.MultiSVM` when the species' scores are summed, else
        :class:`~reserve.solvers.MultiTTK`.
    random_state : int or None, default=None
        Seed of every method: it breaks a tie at the cell budget's cut
        (:func:`reserve.solvers.ties.rank_selection`; AutoTTK's own rule), and seeds what
        else a method draws.
    time_limit : float, default=60.0
        Seconds per exact (MIP) solve.
    fit_time_limit : float or None, default=None
        Seconds of TSVM's CCCP loop (``None``: no limit).
    polish : bool, default=True
        Whether ``ttk`` polishes FD's solution (``False`` is the cheap CV estimator).
    model : str, default="linear"
        Feature map of a method declaring ``feature_maps``: ``"linear"`` is the paper's TTK;
        ``"auto"`` or a map of :data:`reserve.methods.FEATURE_MAPS` gives
        :class:`~reserve.solvers.AutoTTK` (``"auto"`` compares
        :data:`~reserve.solvers.auto.AUTO_MODELS` by cross-validation).
    Cs : tuple of float or None, default=None
        With ``model != "linear"``: the values of ``C`` compared (default
        :data:`~reserve.solvers.auto.AUTO_CS`; ``C`` is then not used).
    n_jobs : int or None, default=None
        With ``model != "linear"``: processors for the cross-validation folds and the final
        fits (same result).
    effort_columns : tuple of int or None, default=None
        With ``model != "linear"``: the columns holding survey effort covariates; the
        cross-validation scores its held-out folds at the standard effort
        (:class:`~reserve.solvers.AutoTTK`).

    Returns
    -------
    estimator
        An sklearn estimator with ``fit(X, y)`` and ``selected_``.

    Raises
    ------
    InvalidInputError
        An unknown method or model, or what the method does not declare (a money budget,
        several species, a feature map; see :data:`CAPABILITIES`).

    Examples
    --------
    >>> make_estimator("TTK-FD", k=5, C=2.0, random_state=0)
    TTK(C=2.0, k=5, random_state=0)
    """
    method, model = canonical_method(name), check_model(model)
    _check_asked(method, capabilities(method), budget=budget, n_species=n_species, model=model)
    if model != "linear":
        return _auto(
            model,
            k=k,
            Cs=Cs,
            budget=budget,
            random_state=random_state,
            n_jobs=n_jobs,
            effort_columns=effort_columns,
        )
    if n_species > 1:
        return _several_species(method, k=k, C=C, time_limit=time_limit, random_state=random_state)
    # budget= only when given, so a cell-budget run builds the same estimator as always
    money = {} if budget is None else {"budget": budget}
    return _ONE_SPECIES[method](
        k=k,
        C=C,
        random_state=random_state,
        time_limit=time_limit,
        fit_time_limit=fit_time_limit,
        polish=polish,
        **money,
    )


def _check_asked(
    method: str, caps: Capabilities, *, budget: float | None, n_species: int, model: str
) -> None:
    """Refuse what ``method`` does not declare: a money budget, several species, a map."""
    asked = (
        ("money_budget", budget is not None, f"budget={budget!r} (a money budget)"),
        ("several_species", n_species > 1, f"n_species={n_species}"),
        ("feature_maps", model != "linear", f"model={model!r}"),
    )
    for capability, wanted, what in asked:
        if wanted and not getattr(caps, capability):
            raise InvalidInputError(
                f"{what} needs method {quoted(methods_with(capability))} (received method "
                f"{method!r}); pass one of those methods"
            )
    if n_species > 1 and (model != "linear" or budget is not None):
        what = f"model={model!r}" if model != "linear" else f"budget={budget!r} (money)"
        raise InvalidInputError(
            f"{what} is for one species (received n_species={n_species}); pass model "
            "'linear' and a number of cells for several species"
        )


def _ttk(**kw: Any) -> Any:
    from reserve.solvers.ttk import TTK

    return TTK(
        k=kw["k"],
        C=kw["C"],
        solver="fd",
        polish=kw["polish"],
        random_state=kw["random_state"],
        **_money(kw),
    )


def _ttk_exact(mip_solver: str) -> Any:
    def build(**kw: Any) -> Any:
        from reserve.solvers.ttk import TTK

        return TTK(
            k=kw["k"],
            C=kw["C"],
            solver="mip",
            mip_solver=mip_solver,
            time_limit=kw["time_limit"],
            random_state=kw["random_state"],
            **_money(kw),
        )

    return build


def _money(kw: dict[str, Any]) -> dict[str, Any]:
    return {"budget": kw["budget"]} if "budget" in kw else {}


def _tsvm(**kw: Any) -> Any:
    from reserve.solvers.tsvm import TSVM

    return TSVM(
        k=kw["k"], C=kw["C"], max_time=kw["fit_time_limit"], random_state=kw["random_state"]
    )


def _baseline(module: str, name: str) -> Any:
    def build(**kw: Any) -> Any:
        import importlib

        cls = getattr(importlib.import_module(module), name)
        return cls(k=kw["k"], C=kw["C"], random_state=kw["random_state"])

    return build


#: How each method's one-species estimator is built (keyword arguments of make_estimator).
_ONE_SPECIES = {
    "ttk": _ttk,
    "ttk-mip": _ttk_exact("auto"),
    "ttk-bnb": _ttk_exact("bnb"),
    "svm": _baseline("reserve.solvers.svm", "SVM"),
    "tsvm": _tsvm,
    "svmperf": _baseline("reserve.solvers.svmperf", "SVMPerf"),
    "toppush": _baseline("reserve.solvers.toppush", "TopPush"),
    "aatp": _baseline("reserve.solvers.aatp", "AATP"),
}


def _several_species(
    method: str, *, k: int, C: float, time_limit: float, random_state: int | None
) -> Any:
    """MultiSVM (a ranking by the summed scores) or MultiTTK (FD, or the exact MIP)."""
    from reserve.solvers.multi import MultiSVM, MultiTTK

    caps = CAPABILITIES[method]
    if caps.species_score == "sum":
        return MultiSVM(k=k, C=C, random_state=random_state)
    solver = "mip" if caps.exact else "fd"
    return MultiTTK(k=k, C=C, solver=solver, time_limit=time_limit, random_state=random_state)


def _auto(
    model: str,
    *,
    k: int,
    Cs: tuple[float, ...] | None,
    budget: float | None,
    random_state: int | None,
    n_jobs: int | None = None,
    effort_columns: tuple[int, ...] | None = None,
) -> Any:
    """:class:`~reserve.solvers.AutoTTK` for ``model`` (a feature map, or ``"auto"``)."""
    from reserve.solvers.auto import AUTO_CS, AUTO_MODELS, AutoTTK

    models = AUTO_MODELS if model == "auto" else (model,)
    return AutoTTK(
        k=k,
        budget=budget,
        models=models,
        Cs=tuple(Cs) if Cs else AUTO_CS,
        random_state=random_state,
        n_jobs=n_jobs,
        effort_columns=effort_columns,
    )


def chosen_C(estimator: Any, source: str = "given") -> tuple[float, str]:
    """The C a fitted estimator selected with, and how it was chosen.

    An estimator that searches C itself (a feature map's cross-validation: ``best_params_``)
    reports the C it chose, ``"cv"`` when it compared several values and ``"given"`` when it
    was given one; any other estimator reports its own ``C`` with ``source`` (``"given"``,
    or ``"cv"`` when the caller chose it by cross-validation before the fit).

    Parameters
    ----------
    estimator : estimator
        A fitted estimator of :func:`make_estimator`.
    source : str, default="given"
        How the C of an estimator without its own search was chosen.

    Returns
    -------
    C : float
    source : str

    Examples
    --------
    >>> chosen_C(make_estimator("svm", k=3, C=2.0))
    (2.0, 'given')
    """
    best = getattr(estimator, "best_params_", None)
    if best is None:
        return float(estimator.C), source
    searched = {p["C"] for p in estimator.cv_results_["params"]}
    return float(best["C"]), "cv" if len(searched) > 1 else "given"


def fixed_model(estimator: Any) -> Any:
    """An unfitted copy of a fitted ``estimator`` that refits its chosen model as it is.

    A model choice (AutoTTK) refits with the feature maps, ``C`` and class weights it chose
    (its ``refit_params``: no new search); any other estimator is cloned as it is.

    Examples
    --------
    >>> fixed_model(make_estimator("svm", k=3, C=2.0)).C
    2.0
    """
    from sklearn.base import clone

    chosen = getattr(estimator, "refit_params", None)
    return clone(estimator) if chosen is None else clone(estimator).set_params(**chosen())
