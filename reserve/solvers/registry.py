"""One registry from method names to estimators, used by ``reserve select`` and the benchmarks.

Method names are the ``reserve select --method`` spellings (``ttk``, ``ttk-mip``, ...); the
paper's column names (``TTK-FD``, ``TTK-MIP``, ...) are aliases of the same entries, so the
benchmarks and the command line build exactly the same estimators.
"""

from __future__ import annotations

from typing import Any

from reserve.errors import InvalidInputError

#: Method names, in the order the command line lists them.
METHODS: tuple[str, ...] = (
    "ttk",
    "ttk-mip",
    "ttk-bnb",
    "svm",
    "tsvm",
    "svmperf",
    "toppush",
    "aatp",
)

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

#: Methods that solve TTK (they take a money budget, a time limit and a seed).
TTK_METHODS: frozenset[str] = frozenset({"ttk", "ttk-mip", "ttk-bnb"})


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
        A money budget; TTK methods only (the baselines are walked within it by the caller).
    n_species : int, default=1
        With more than one: :class:`~reserve.solvers.MultiTTK` (``ttk``, ``ttk-mip``) or
        :class:`~reserve.solvers.MultiSVM` (``svm``).
    random_state : int or None, default=None
        Seed of the TTK methods.
    time_limit : float, default=60.0
        Seconds per exact (MIP) solve.
    fit_time_limit : float or None, default=None
        Seconds of TSVM's CCCP loop (``None``: no limit).
    polish : bool, default=True
        Whether ``ttk`` polishes FD's solution (``False`` is the cheap CV estimator).
    model : str, default="linear"
        Feature map of ``ttk``: ``"linear"`` is the paper's TTK; ``"auto"`` or a map of
        :data:`reserve.solvers.features.FEATURE_MAPS` gives :class:`~reserve.solvers.AutoTTK`
        (``"auto"`` compares :data:`~reserve.solvers.auto.AUTO_MODELS` by cross-validation).
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

    Examples
    --------
    >>> make_estimator("TTK-FD", k=5, C=2.0, random_state=0)
    TTK(C=2.0, k=5, random_state=0)
    """
    method = canonical_method(name)
    if model != "linear":
        return _auto(method, model, k=k, C=C, Cs=Cs, budget=budget, n_species=n_species,
                     random_state=random_state, n_jobs=n_jobs,
                     effort_columns=effort_columns)  # fmt: skip
    return _linear(method, k=k, C=C, budget=budget, n_species=n_species,
                   random_state=random_state, time_limit=time_limit,
                   fit_time_limit=fit_time_limit, polish=polish)  # fmt: skip


def _linear(method: str, *, k: int, C: float, budget: float | None, n_species: int,
            random_state: int | None, time_limit: float, fit_time_limit: float | None,
            polish: bool) -> Any:  # fmt: skip
    """The paper's linear estimator of ``method`` (several species: MultiTTK / MultiSVM)."""
    from reserve.solvers.aatp import AATP
    from reserve.solvers.multi import MultiSVM, MultiTTK
    from reserve.solvers.svm import SVM
    from reserve.solvers.svmperf import SVMPerf
    from reserve.solvers.toppush import TopPush
    from reserve.solvers.tsvm import TSVM
    from reserve.solvers.ttk import TTK

    if n_species > 1:
        if method == "svm":
            return MultiSVM(k=k, C=C)
        solver = "fd" if method == "ttk" else "mip"
        return MultiTTK(k=k, C=C, solver=solver, time_limit=time_limit, random_state=random_state)
    # budget= only when given, so a cell-budget run builds the same estimator as always
    money = {} if budget is None else {"budget": budget}
    if method == "ttk":
        return TTK(k=k, C=C, solver="fd", polish=polish, random_state=random_state, **money)
    if method in ("ttk-mip", "ttk-bnb"):
        exact = "bnb" if method == "ttk-bnb" else "auto"
        return TTK(k=k, C=C, solver="mip", mip_solver=exact, time_limit=time_limit,
                   random_state=random_state, **money)  # fmt: skip
    if method == "tsvm":
        return TSVM(k=k, C=C, max_time=fit_time_limit)
    cls = {"svm": SVM, "svmperf": SVMPerf, "toppush": TopPush, "aatp": AATP}
    return cls[method](k=k, C=C)


def _auto(method: str, model: str, *, k: int, C: float, Cs: tuple[float, ...] | None,
          budget: float | None, n_species: int, random_state: int | None,
          n_jobs: int | None = None,
          effort_columns: tuple[int, ...] | None = None) -> Any:  # fmt: skip
    """:class:`~reserve.solvers.AutoTTK` for ``model`` (a feature map, or ``"auto"``)."""
    from reserve.solvers.auto import AUTO_CS, AUTO_MODELS, AutoTTK
    from reserve.solvers.features import FEATURE_MAPS

    if model != "auto" and model not in FEATURE_MAPS:
        raise InvalidInputError(
            f"model={model!r} is not a model; choose from auto, {', '.join(FEATURE_MAPS)}"
        )
    if method != "ttk" or n_species > 1:
        raise InvalidInputError(
            f"model={model!r} needs method 'ttk' and one species (received method {method!r}, "
            f"{n_species} species); pass model 'linear' for the other methods"
        )
    models = AUTO_MODELS if model == "auto" else (model,)
    return AutoTTK(k=k, budget=budget, models=models, Cs=tuple(Cs) if Cs else AUTO_CS,
                   random_state=random_state, n_jobs=n_jobs,
                   effort_columns=effort_columns)  # fmt: skip
