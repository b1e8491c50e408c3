"""Input checks shared by every transductive top-k estimator.

Conventions (as in ``sklearn.semi_supervised``): labelled rows carry ``y`` in ``{0, 1}``,
candidate (unlabelled, transductive) rows carry ``y == -1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp

from reserve.errors import InvalidInputError

__all__ = [
    "MultiData",
    "TransductiveData",
    "as_float_matrix",
    "check_budget",
    "check_choice",
    "check_cost_budget",
    "check_hinge_weights",
    "check_multi_transductive",
    "check_positive_real",
    "check_solver_params",
    "check_transductive",
]

#: Solvers of the TTK estimators (``solver=``).
SOLVERS = ("fd", "mip")

#: Relative slack of "fits the budget" (the same as reserve.solvers._base.BUDGET_RTOL; not
#: imported from there so that this bottom module stays free of the solvers).
_BUDGET_RTOL = 1e-12


@dataclass(frozen=True)
class TransductiveData:
    """Validated arrays of a transductive top-k problem.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features), float64, C-contiguous
    y : ndarray of shape (n_samples,), int64 in {-1, 0, 1}
    labelled : ndarray of int64
        Row indices of labelled rows.
    candidates : ndarray of int64
        Row indices of candidate rows (``y == -1``), in increasing order.
    y_pm : ndarray of float64
        Labels of the labelled rows mapped to {-1, +1}.
    k : int or None
        Number of candidates to select (``None`` when a money budget replaces it).
    """

    X: np.ndarray
    y: np.ndarray
    labelled: np.ndarray
    candidates: np.ndarray
    y_pm: np.ndarray
    k: int | None

    @property
    def X_lab(self) -> np.ndarray:
        """Feature rows of the labelled set."""
        return self.X[self.labelled]

    @property
    def X_cand(self) -> np.ndarray:
        """Feature rows of the candidate set."""
        return self.X[self.candidates]


@dataclass(frozen=True)
class MultiData:
    """Validated arrays of a multi-species transductive top-k problem.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features), float64
    Y : ndarray of shape (n_samples, n_species), int64 in {-1, 0, 1}
    labelled, candidates : ndarray of int64
        Row indices, increasing.
    Y_pm : ndarray of shape (n_labelled, n_species)
        Labels of the labelled rows mapped to {-1, +1}.
    k : int
    """

    X: np.ndarray
    Y: np.ndarray
    labelled: np.ndarray
    candidates: np.ndarray
    Y_pm: np.ndarray
    k: int


def check_solver_params(est: object, counts: dict[str, int]) -> float:
    """The checks TTK-style estimators share: ``solver``, integer counts, MIP limits and ``C``.

    Parameters
    ----------
    est : estimator
        With attributes ``solver``, ``C``, ``threads``, ``time_limit``, ``mip_gap`` and every
        name in ``counts``.
    counts : dict
        Names of non-negative integer parameters and the default each message suggests.

    Returns
    -------
    float
        ``C``, checked positive.
    """
    solver = est.solver
    if solver not in SOLVERS:
        raise InvalidInputError(
            f"solver must be one of {', '.join(SOLVERS)}; received {solver!r}. "
            'Use solver="fd" (default) or solver="mip".'
        )
    for name, default in counts.items():
        value = getattr(est, name)
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
            raise InvalidInputError(
                f"{name} must be a non-negative integer; received {value!r}. "
                f"Pass e.g. {name}={default}."
            )
    if solver == "mip":
        threads = est.threads
        if threads < 1:
            raise InvalidInputError(
                f"threads must be at least 1 for solver='mip'; received {threads}. "
                "Pass threads=1 (SCIP's standard solve uses one thread)."
            )
        check_positive_real(est.time_limit, "time_limit")
        check_positive_real(est.mip_gap, "mip_gap", allow_zero=True)
    return check_positive_real(est.C, "C")


def check_choice(value: object, choices: tuple, name: str) -> None:
    """Refuse ``value`` unless it is one of ``choices``, naming them.

    Examples
    --------
    >>> check_choice("mean", ("none", "mean"), "ladder")
    >>> check_choice("many", ("none", "mean"), "ladder")
    Traceback (most recent call last):
    ...
    reserve.errors.InvalidInputError: ladder must be one of 'none', 'mean'; received 'many'
    """
    if value not in choices:
        raise InvalidInputError(
            f"{name} must be one of {', '.join(map(repr, choices))}; received {value!r}"
        )


def check_positive_real(value: object, name: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a finite float > 0 (or >= 0), else raise ``InvalidInputError``.

    Examples
    --------
    >>> check_positive_real(2, "C")
    2.0
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidInputError(
            f"{name} must be a number; received {value!r} ({type(value).__name__}). "
            f"Pass a positive number, e.g. {name}=1.0."
        )
    v = float(value)
    ok = np.isfinite(v) and (v >= 0 if allow_zero else v > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidInputError(
            f"{name} must be a finite number {bound}; received {value!r}. "
            f"Pass a finite value {bound}, e.g. {name}=1.0."
        )
    return v


def check_budget(k: object, n_candidates: int, name: str = "k") -> int:
    """Return the budget as an int with ``0 < k < n_candidates``.

    Examples
    --------
    >>> check_budget(3, 10)
    3
    """
    if isinstance(k, bool) or not isinstance(k, Integral | np.integer):
        raise InvalidInputError(
            f"{name} must be a whole number of candidates; received {k!r} "
            f"({type(k).__name__}). Pass an integer between 1 and {n_candidates - 1}."
        )
    k = int(k)
    if k <= 0 or k >= n_candidates:
        raise InvalidInputError(
            f"{name} must satisfy 0 < {name} < number of candidates ({n_candidates}); "
            f"received {name}={k}. Choose {name} between 1 and {n_candidates - 1}, "
            "or add candidate rows (y == -1)."
        )
    return k


def _cost_array(cost: object, n_samples: int) -> np.ndarray:
    """``cost`` as a float64 vector of length ``n_samples``, or a one-line error."""
    if cost is None or sp.issparse(cost):
        raise InvalidInputError(
            f"cost must be a 1-D numeric array; received {type(cost).__name__}. Pass one "
            "positive number per row of X (e.g. the cell's price or area)."
        )
    try:
        arr = np.asarray(cost)
        if arr.dtype == object:  # e.g. a list mixing ints and floats from a table
            arr = arr.astype(np.float64)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.dtype.kind not in "iuf":
        got = "values that are not numbers" if arr is None else f"dtype {arr.dtype}"
        raise InvalidInputError(
            f"cost must be numeric; received {type(cost).__name__} with {got}. Pass one "
            "positive number per row of X (e.g. the cell's price or area)."
        )
    arr = arr.astype(np.float64)
    if arr.ndim != 1 or arr.shape[0] != n_samples:
        raise InvalidInputError(
            f"cost must have shape ({n_samples},), one entry per row of X; received shape "
            f"{arr.shape}. Pass a 1-D array aligned with X (labelled rows' entries are ignored)."
        )
    return arr


def _check_money(budget: object, c: np.ndarray, candidates: np.ndarray) -> float:
    """``budget`` as a float that some but not all of the candidates' costs ``c`` fit."""
    if isinstance(budget, bool) or not isinstance(budget, Real):
        raise InvalidInputError(
            f"budget must be a positive finite number; received {budget!r} "
            f"({type(budget).__name__}). Pass the money budget, e.g. budget=1000.0."
        )
    B = float(budget)
    if not (np.isfinite(B) and B > 0):
        raise InvalidInputError(
            f"budget must be a positive finite number; received {budget!r}. "
            "Pass the money budget, e.g. budget=1000.0."
        )
    limit = B * (1.0 + _BUDGET_RTOL)
    j = int(np.argmin(c))
    if c[j] > limit:
        raise InvalidInputError(
            f"budget={B:g} is below the cheapest candidate's cost ({c[j]:g}, row "
            f"{int(candidates[j])}): nothing fits. Raise budget to at least {c[j]:g}."
        )
    total = float(c.sum())
    if total <= limit:
        raise InvalidInputError(
            f"budget={B:g} covers the total cost of all {c.size} candidates ({total:g}): every "
            f"candidate would be selected. Choose a budget below {total:g}, "
            "or add candidate rows (y == -1)."
        )
    return B


def check_cost_budget(
    cost: object, budget: object, candidates: np.ndarray, n_samples: int
) -> tuple[np.ndarray, float]:
    """Validate a money budget: per-row costs and the budget they must fit.

    Only the candidate rows' costs are checked and returned; labelled rows' entries are
    ignored (they may be NaN). "Fits" allows a relative 1e-12 of rounding, as
    :func:`reserve.solvers._base.budget_select` does.

    Parameters
    ----------
    cost : array-like of shape (n_samples,)
        Cost of each row; must be finite and > 0 on every candidate row.
    budget : float
        Positive and finite; at least the cheapest candidate's cost and below the total cost of
        all candidates (else nothing, or everything, would be selected).
    candidates : ndarray of int
        Row indices of the candidates.
    n_samples : int
        Rows of ``X``.

    Returns
    -------
    cost_cand : ndarray of float64
        The candidates' costs, aligned with ``candidates``.
    budget : float

    Examples
    --------
    >>> import numpy as np
    >>> c, B = check_cost_budget([np.nan, 2.0, 3.0], 4, np.array([1, 2]), 3)
    >>> c.tolist(), B
    ([2.0, 3.0], 4.0)
    """
    arr = _cost_array(cost, n_samples)
    c = arr[candidates]
    bad = ~np.isfinite(c)
    if bad.any():
        r = int(candidates[np.argmax(bad)])
        raise InvalidInputError(
            f"cost must be finite on every candidate row; received {int(bad.sum())} NaN or "
            f"infinite value(s), first at row {r} ({arr[r]}). Give each candidate a finite "
            "cost or drop it from the candidates."
        )
    bad = c <= 0
    if bad.any():
        r = int(candidates[np.argmax(bad)])
        raise InvalidInputError(
            f"cost must be > 0 on every candidate row; received {int(bad.sum())} value(s) "
            f"<= 0, first at row {r} ({arr[r]}). Give each candidate a positive cost or "
            "drop it from the candidates."
        )
    B = _check_money(budget, c, candidates)
    return np.ascontiguousarray(c), B


def as_float_matrix(X: object) -> np.ndarray:
    if sp.issparse(X):
        raise InvalidInputError(
            "X is a sparse matrix, and sparse input is not supported: the solvers work on "
            "dense features. Pass X.toarray()."
        )
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged nested lists and the like
        raise InvalidInputError(
            f"X could not be read as a 2-D numeric array ({exc}). "
            "Pass a rectangular array of numbers."
        ) from None
    if arr.dtype == object or arr.dtype.kind in "USVMmb":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise InvalidInputError(
                f"X must be numeric; received an array of dtype {arr.dtype}. "
                "Convert text or categorical columns to numbers (e.g. one-hot) first."
            ) from None
    if arr.dtype.kind == "c":
        raise InvalidInputError(
            "Complex data not supported: X must be real-valued. Pass real features."
        )
    if arr.ndim != 2:
        raise InvalidInputError(
            f"X must be 2-D (n_samples, n_features); received an array with shape {arr.shape}. "
            "Reshape it, e.g. X.reshape(-1, 1) for a single feature."
        )
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if arr.shape[1] == 0:
        raise InvalidInputError(
            f"0 feature(s) (shape={arr.shape}) while a minimum of 1 is required: "
            "pass at least one feature column."
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise InvalidInputError(
            f"X contains {int(bad.sum())} NaN or infinite value(s), first at row {r}, "
            f"column {c} ({arr[r, c]}). Impute or drop those rows before fitting."
        )
    return arr


def _label_values(ya: np.ndarray, name: str = "y") -> np.ndarray:
    """``ya`` (``y``, or the species table ``Y``) as float64 holding only 1, 0 and -1, or a
    one-line error."""
    try:
        yf = ya.astype(np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"{name} must hold the numbers 1, 0 or -1; received dtype {ya.dtype}. "
            "Encode detected as 1, not detected as 0, candidates as -1."
        ) from None
    if np.any(yf != np.round(yf)):
        raise InvalidInputError(
            f"Unknown label type: continuous. {name} must hold 1 (positive), 0 (negative) or "
            "-1 (candidate); recode the labels."
        )
    bad = ~np.isin(yf, (-1.0, 0.0, 1.0))
    if bad.any():
        vals = np.unique(ya[bad])[:5].tolist()
        raise InvalidInputError(
            f"Only binary classification is supported. {name} must contain only 1 (positive), "
            f"0 (negative) and -1 (candidate); received other values {vals}. Recode the labels."
        )
    return yf


def check_transductive(X: object, y: object, k: object | None) -> TransductiveData:
    """Validate a transductive top-k problem.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Features of labelled and candidate rows together.
    y : array-like of shape (n_samples,)
        1 (detected), 0 (not detected) for labelled rows; -1 for candidates.
    k : int or None
        Number of candidates to select; ``None`` skips the check (a money budget replaces
        ``k``: see :func:`check_cost_budget`).

    Returns
    -------
    TransductiveData

    Raises
    ------
    InvalidInputError
        For NaN/inf or non-numeric features, mismatched shapes, labels outside {-1, 0, 1},
        no candidates, a single class among labelled rows, or ``k`` out of range.

    Examples
    --------
    >>> import numpy as np
    >>> d = check_transductive(np.eye(4), [0, 1, -1, -1], 1)
    >>> d.candidates.tolist(), d.k
    ([2, 3], 1)
    """
    if y is None:
        raise InvalidInputError(
            "this estimator requires y to be passed, but the target y is None. Pass labels: "
            "1 / 0 for labelled rows, -1 for candidates."
        )
    Xa = as_float_matrix(X)
    ya = np.asarray(y)
    if ya.ndim == 2 and ya.shape[1] == 1:
        ya = ya.ravel()
    if ya.ndim != 1:
        raise InvalidInputError(
            f"y must be 1-D; received shape {ya.shape}. Pass one label per row of X."
        )
    if ya.shape[0] != Xa.shape[0]:
        raise InvalidInputError(
            f"X and y disagree: X has {Xa.shape[0]} rows, y has {ya.shape[0]} labels. "
            "Pass one label per row (1, 0, or -1 for candidates)."
        )
    yi = _label_values(ya).astype(np.int64)
    labelled, candidates, y_pm, kk = _roles(yi[:, None], k, multi=False)
    return TransductiveData(
        X=Xa, y=yi, labelled=labelled, candidates=candidates, y_pm=y_pm[:, 0], k=kk
    )


def _roles(Yi: np.ndarray, k: object | None, *, multi: bool):
    """``(labelled, candidates, Y_pm, k)`` of checked labels ``Yi`` of shape (n, S).

    Candidates are the rows of -1 (in every column: mixed rows are refused before); every
    column needs both classes among the labelled rows. ``multi`` words the errors for the
    species table ``Y`` rather than ``y``.
    """
    is_cand = Yi[:, 0] == -1
    candidates, labelled = np.flatnonzero(is_cand), np.flatnonzero(~is_cand)
    if candidates.size == 0 and not multi:
        raise InvalidInputError(
            "y has no candidate rows (y == -1): there is nothing to select from. "
            "Append the candidate rows to X with label -1."
        )
    if candidates.size == 0:
        raise InvalidInputError(
            "Y has no candidate rows (-1 in every column): there is nothing to select from. "
            "Append the candidate rows to X with labels -1."
        )
    Yl = Yi[labelled]
    one_class = np.flatnonzero(Yl.min(axis=0) == Yl.max(axis=0)) if labelled.size else [0]
    if len(one_class):
        s = int(one_class[0])
        got = np.unique(Yl[:, s]).tolist() if labelled.size else []
        where = f"Y column {s} (species {s})" if multi else "labelled rows"
        among, drop = (" among labelled rows", " or drop the species") if multi else ("", "")
        raise InvalidInputError(
            f"{where} must contain both classes 0 and 1{among}; received only {got}. "
            f"Add labelled rows of the missing class{drop}."
        )
    kk = None if k is None else check_budget(k, candidates.size)
    return labelled, candidates, np.where(Yl == 1, 1.0, -1.0), kk


def check_multi_transductive(X: object, Y: object, k: object) -> MultiData:
    """Validate a multi-species problem: 0/1 in every column of a labelled row, -1 in every
    column of a candidate row.

    A 1-D ``Y`` is read as a single species. The checks are :func:`check_transductive`'s,
    column by column, plus the refusal of rows that mix -1 with labels.

    Raises
    ------
    InvalidInputError
        One line naming the parameter, what was received and the fix.

    Examples
    --------
    >>> import numpy as np
    >>> d = check_multi_transductive(np.eye(4), [[0, 1], [1, 0], [-1, -1], [-1, -1]], 1)
    >>> d.candidates.tolist(), d.Y_pm.shape
    ([2, 3], (2, 2))
    """
    if Y is None:
        raise InvalidInputError(
            "Y is None; this estimator needs labels. Pass Y of shape (n_samples, n_species): "
            "1 / 0 for labelled rows, -1 in every column for candidates."
        )
    Xa = as_float_matrix(X)
    Ya = np.asarray(Y)
    if Ya.ndim == 1:
        Ya = Ya[:, None]
    if Ya.ndim != 2 or Ya.shape[1] == 0:
        raise InvalidInputError(
            f"Y must be 2-D (n_samples, n_species) with at least one species column; received "
            f"shape {Ya.shape}. Pass one column of labels per species."
        )
    if Ya.shape[0] != Xa.shape[0]:
        raise InvalidInputError(
            f"X and Y disagree: X has {Xa.shape[0]} rows, Y has {Ya.shape[0]}. "
            "Pass one row of labels per row of X."
        )
    Yi = _label_values(Ya, "Y").astype(np.int64)
    is_cand = Yi == -1
    mixed = np.flatnonzero(is_cand.any(axis=1) & ~is_cand.all(axis=1))
    if mixed.size:
        r = int(mixed[0])
        raise InvalidInputError(
            f"Y row {r} mixes -1 with 0/1 labels ({Yi[r].tolist()}; {mixed.size} such row(s)); "
            "a row is either labelled for every species (0/1 in every column) or a candidate "
            "(-1 in every column). Label the row for every species or mark it -1 throughout."
        )
    labelled, candidates, Y_pm, kk = _roles(Yi, k, multi=True)
    return MultiData(X=Xa, Y=Yi, labelled=labelled, candidates=candidates, Y_pm=Y_pm, k=kk)


def _class_weights(class_weight: object, y01: np.ndarray) -> np.ndarray:
    """Per-row class weights of labels ``y01`` in {0, 1} (as sklearn's ``class_weight``)."""
    if class_weight == "balanced":
        # sklearn's rule: n / (n_classes * count); both classes are present.
        counts = np.bincount(y01, minlength=2).astype(np.float64)
        return (y01.size / (2.0 * counts))[y01]
    if isinstance(class_weight, dict) and set(class_weight) <= {0, 1}:
        cw = np.array([class_weight.get(0, 1.0), class_weight.get(1, 1.0)], dtype=np.float64)
        if np.isfinite(cw).all() and (cw > 0).all():
            return cw[y01]
    raise InvalidInputError(
        f"class_weight must be None, 'balanced' or a dict {{0: w0, 1: w1}} of positive "
        f"numbers; received {class_weight!r}. Pass class_weight='balanced' to weight each "
        "class's hinge loss by n / (2 n_class)."
    )


def check_hinge_weights(
    class_weight: object, sample_weight: object, y01: np.ndarray, labelled: np.ndarray, n: int
) -> np.ndarray | None:
    """Per-labelled-row hinge weights ``c_i`` (class weight times sample weight), or ``None``.

    Candidates carry no loss: their ``sample_weight`` entries are not read (NaN allowed).
    ``None`` means every weight is 1, so the solvers run the unweighted arithmetic exactly.

    Parameters
    ----------
    class_weight : None, "balanced" or dict
        ``"balanced"``: ``n_lab / (2 n_class)`` for each class (counts of labelled rows,
        sample weights not included, as in scikit-learn).
    sample_weight : array-like of shape (n,) or None
        Finite and ``>= 0`` on labelled rows.
    y01 : ndarray of int, shape (n_lab,)
        Labels of the labelled rows, 0 / 1.
    labelled : ndarray of int
        Row indices of the labelled rows.
    n : int
        Number of rows of ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> check_hinge_weights("balanced", None, np.array([1, 0, 0, 0]), np.arange(4), 5).tolist()
    [2.0, 0.6666666666666666, 0.6666666666666666, 0.6666666666666666]
    >>> check_hinge_weights(None, np.ones(5), np.array([1, 0]), np.arange(2), 5) is None
    True
    """
    c = np.ones(y01.size)
    if class_weight is not None:
        c = c * _class_weights(class_weight, y01)
    if sample_weight is not None:
        sw = np.asarray(sample_weight, dtype=np.float64) if _is_numeric(sample_weight) else None
        if sw is None or sw.shape not in ((n,), (n, 1)):
            raise InvalidInputError(
                f"sample_weight must be one number per row of X ({n}); received "
                f"{np.shape(sample_weight)}. Pass a 1-D array (candidate entries are ignored)."
            )
        sw = sw.ravel()[labelled]
        if not np.isfinite(sw).all() or (sw < 0).any():
            raise InvalidInputError(
                "sample_weight must be finite and >= 0 on labelled rows; received "
                f"min {np.nanmin(sw) if sw.size else 0!r}, NaN or inf present: "
                f"{not np.isfinite(sw).all()}. Pass non-negative weights."
            )
        c = c * sw
    for cls in (0, 1):
        if not (c[y01 == cls] > 0).any():
            raise InvalidInputError(
                f"every labelled row of class {cls} has sample_weight 0: the hinge loss has "
                "nothing to fit for that class. Give some of its rows a positive weight."
            )
    return None if np.all(c == 1.0) else c


def _is_numeric(a: object) -> bool:
    try:
        np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return True
