"""The paper's benchmark tables, shipped inside the package (``reserve/data/uci``)."""

from __future__ import annotations

from importlib import resources

import numpy as np

from reserve.errors import DataFileError, InvalidInputError

__all__ = ["BENCHMARKS", "load_benchmark", "transductive_split"]

#: Names of the bundled datasets (see ``data/uci/SOURCES.md`` for provenance and licences).
BENCHMARKS: tuple[str, ...] = (
    "diabetes",
    "ionosphere",
    "sonar",
    "german_numer",
    "splice",
    "spambase",
    "svmguide3",
)


def load_benchmark(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Load a bundled benchmark as features and 0/1 labels.

    Parameters
    ----------
    name : str
        One of :data:`BENCHMARKS`.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), int64 in {0, 1}

    Examples
    --------
    >>> X, y = load_benchmark("sonar")
    >>> X.shape, int(y.sum())
    ((208, 60), 111)
    """
    if name not in BENCHMARKS:
        raise InvalidInputError(f"unknown dataset {name!r}; choose one of {', '.join(BENCHMARKS)}.")
    path = resources.files("reserve.data") / "uci" / f"{name}.csv"
    try:
        with resources.as_file(path) as p:
            table = np.loadtxt(p, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    except (OSError, ValueError) as exc:
        raise DataFileError(
            f"could not read bundled dataset {name!r} ({exc}); reinstall reserve."
        ) from None
    X, label = table[:, :-1], table[:, -1]
    if not np.isin(label, (-1.0, 1.0)).all():
        raise DataFileError(f"dataset {name!r} has labels other than -1/1; reinstall reserve.")
    return np.ascontiguousarray(X), (label > 0).astype(np.int64)


def transductive_split(
    X: np.ndarray,
    y: np.ndarray,
    *,
    test_fraction: float = 0.5,
    k_fraction: float = 0.05,
    random_state: int | None = None,
    standardize: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Split labelled data into a training part and a hidden candidate part, as in the paper.

    Parameters
    ----------
    X, y : ndarray
        Features and 0/1 labels.
    test_fraction : float
        Share of rows hidden as candidates.
    k_fraction : float
        Budget as a share of the candidates; ``k = max(1, round(k_fraction * m))``.
    random_state : int or None
        Seed of the permutation.
    standardize : bool
        Standardise every feature with the mean and standard deviation of all rows (the
        candidates' features are known in the transductive setting); constant features
        are left at zero.

    Returns
    -------
    X_all : ndarray
        Features, training rows first then candidates.
    y_fit : ndarray
        Training labels followed by ``-1`` for every candidate.
    y_hidden : ndarray
        The true 0/1 labels of the candidates, for scoring only.
    k : int
        The budget.

    Examples
    --------
    >>> X, y = load_benchmark("sonar")
    >>> Xa, yf, yh, k = transductive_split(X, y, random_state=0)
    >>> int((yf == -1).sum()), k
    (104, 5)
    """
    rng = np.random.default_rng(random_state)
    n = X.shape[0]
    perm = rng.permutation(n)
    n_test = round(test_fraction * n)
    train, test = perm[: n - n_test], perm[n - n_test :]
    Xa = np.vstack([X[train], X[test]])
    if standardize:
        mu = Xa.mean(axis=0)
        sd = Xa.std(axis=0)
        sd[sd == 0] = 1.0
        Xa = (Xa - mu) / sd
    y_fit = np.concatenate([y[train], -np.ones(n_test, dtype=np.int64)])
    k = max(1, round(k_fraction * n_test))
    return Xa, y_fit, y[test].astype(np.int64), k
