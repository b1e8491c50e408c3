"""Feature maps in front of TTK: scikit-learn transformers, fitted on all rows.

TTK learns a linear scorer; these maps let it learn a nonlinear one in a richer space. Each map
is a list of ``(name, transformer)`` steps for an sklearn :class:`~sklearn.pipeline.Pipeline`
whose last step is the TTK estimator. The transformers are fitted on every row given to
``fit``, labelled and candidate alike (that is what transductive means here); only
:class:`ForestScore` reads the labels.

==================  ==========================================================================
map                 what it adds
==================  ==========================================================================
``linear``          standardised raw features (the paper's TTK)
``spline``          per-feature cubic B-splines: one smooth response curve per feature, the
                    shapes of a GAM or of Maxent's hinge features
``interactions``    all pairwise products and squares (a quadratic response surface)
``rbf``             a Nystroem approximation of the Gaussian (RBF) kernel
``stack``           the standardised features plus the logit of a random forest's out-of-bag
                    presence probability (a tree ensemble's view under TTK's top-k constraint)
==================  ==========================================================================
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.kernel_approximation import Nystroem
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import FeatureUnion
from sklearn.preprocessing import PolynomialFeatures, SplineTransformer, StandardScaler
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

from reserve.errors import InvalidInputError

__all__ = [
    "FEATURE_MAPS",
    "MAX_EXPANDED_BYTES",
    "BoostScore",
    "ForestScore",
    "expanded_width",
    "feature_map",
]

#: The feature maps :func:`feature_map` builds, simplest first.
FEATURE_MAPS: tuple[str, ...] = ("linear", "spline", "interactions", "rbf", "stack")

#: Largest expanded design (rows x expanded columns x 8 bytes) a map may build: 4 GiB.
MAX_EXPANDED_BYTES: int = 4 * 2**30

_SPLINE_KNOTS = 4
_SPLINE_DEGREE = 3
_RBF_COMPONENTS = 200
#: Probabilities of :class:`BoostScore` are clipped to [eps, 1 - eps] before the logit.
_BOOST_EPS = 1e-3
#: Labelled rows from which :class:`BoostScore` lets the boosting use OpenMP threads.
_THREADED_ROWS = 20000


def expanded_width(name: str, n_features: int, n_samples: int) -> int:
    """Number of columns map ``name`` produces from ``n_features`` raw features.

    Examples
    --------
    >>> expanded_width("spline", 18, 1000)
    108
    >>> expanded_width("interactions", 18, 1000)
    189
    """
    d = int(n_features)
    if name == "spline":
        return d * (_SPLINE_KNOTS + _SPLINE_DEGREE - 1)
    if name == "interactions":
        return d + d * (d + 1) // 2
    if name == "rbf":
        return min(_RBF_COMPONENTS, int(n_samples))
    if name == "stack":
        return d + 2
    return d


def _check_size(name: str, n_features: int, n_samples: int) -> None:
    width = expanded_width(name, n_features, n_samples)
    need = 8 * width * int(n_samples)
    if need > MAX_EXPANDED_BYTES:
        raise InvalidInputError(
            f"model={name!r} would expand {n_features} features into {width} columns for "
            f"{n_samples} rows ({need / 2**30:.1f} GiB, over the "
            f"{MAX_EXPANDED_BYTES / 2**30:.0f} GiB limit); choose model='linear' or 'spline', "
            "or fewer features"
        )


def feature_map(
    name: str, *, n_features: int, n_samples: int, random_state: int | None = None
) -> list[tuple[str, object]]:
    """Pipeline steps of feature map ``name`` (see the module docstring), TTK not included.

    Parameters
    ----------
    name : str
        One of :data:`FEATURE_MAPS`.
    n_features, n_samples : int
        Shape of the raw design, to size the map and refuse one that would not fit in memory
        (:data:`MAX_EXPANDED_BYTES`).
    random_state : int or None
        Seed of the randomised maps (``rbf``, ``stack``).

    Returns
    -------
    list of (str, transformer)

    Examples
    --------
    >>> [step for step, _ in feature_map("spline", n_features=3, n_samples=50)]
    ['scale', 'spline', 'rescale']
    """
    if name not in FEATURE_MAPS:
        raise InvalidInputError(
            f"model={name!r} is not a feature map; choose from {', '.join(FEATURE_MAPS)}"
        )
    _check_size(name, n_features, n_samples)
    steps: list[tuple[str, object]] = [("scale", StandardScaler())]
    if name == "spline":
        spline = SplineTransformer(
            n_knots=_SPLINE_KNOTS, degree=_SPLINE_DEGREE, extrapolation="linear",
            knots="quantile", include_bias=True,
        )  # fmt: skip
        steps += [("spline", spline), ("rescale", StandardScaler())]
    elif name == "interactions":
        poly = PolynomialFeatures(degree=2, include_bias=False)
        steps += [("interactions", poly), ("rescale", StandardScaler())]
    elif name == "rbf":
        n_comp = min(_RBF_COMPONENTS, int(n_samples))
        rbf = Nystroem(
            kernel="rbf", gamma=1.0 / max(n_features, 1), n_components=n_comp,
            random_state=random_state,
        )  # fmt: skip
        steps += [("rbf", rbf), ("rescale", StandardScaler())]
    elif name == "stack":
        trees = FeatureUnion([
            ("features", "passthrough"),
            ("forest", ForestScore(passthrough=False, random_state=random_state)),
            ("boost", BoostScore(passthrough=False, random_state=random_state)),
        ])  # fmt: skip
        steps += [("stack", trees), ("rescale", StandardScaler())]
    return steps


def _few_threads(n_rows: int) -> object:
    """One OpenMP thread for a small fit: on a few thousand rows the boosting's threads cost
    more in start-up and spinning than they save (tenfold on a busy 2-core machine)."""
    return threadpool_limits(1, user_api="openmp") if n_rows < _THREADED_ROWS else nullcontext()


def _labelled_rows(est: object, y: object, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions and labels of the labelled rows (``y != -1``) of a score transformer's ``y``."""
    name = type(est).__name__
    if y is None:
        raise InvalidInputError(
            f"{name} requires y to be passed, but the target y is None; pass y "
            "(1/0, -1 for candidates)"
        )
    yy = np.asarray(y).reshape(-1)
    if yy.shape[0] != n:
        raise InvalidInputError(f"y must have {n} entries like X; received {yy.shape[0]}")
    lab = np.flatnonzero(yy != -1)
    if np.unique(yy[lab]).size < 2:
        raise InvalidInputError(
            f"{name} needs labelled rows (y != -1) of at least two classes; received "
            "one class. Pass presences (1) and absences (0)."
        )
    return lab, yy[lab]


class ForestScore(TransformerMixin, BaseEstimator):
    """Append the logit of a random forest's presence probability to the features.

    The forest is fitted on the labelled rows (``y`` 0/1; rows with ``y == -1`` are ignored).
    With other labels the score is that of the last class (``forest_.classes_[-1]``).
    In ``fit_transform`` the labelled rows get their *out-of-bag* probability (from the trees
    that did not see them), so a downstream model fitted on them does not learn the forest's
    own overfit; every other row, and every row passed to ``transform`` later, gets the whole
    forest's probability. This is stacking with a tree ensemble as the first stage.

    Parameters
    ----------
    n_estimators : int, default=200
        Trees.
    min_samples_leaf : int, default=3
        Smallest leaf: smooths the probabilities of small samples.
    max_samples : int, default=20000
        Rows drawn per tree (at most the labelled rows): keeps large problems fast.
    passthrough : bool, default=True
        Return the input features with the score appended (else the score alone).
    random_state : int or None, default=None
        Seed of the forest.
    n_jobs : int or None, default=None
        Parallel trees.

    Attributes
    ----------
    forest_ : RandomForestClassifier
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int); y[40:] = -1
    >>> ForestScore(n_estimators=20, random_state=0).fit_transform(X, y).shape
    (60, 3)
    """

    def __init__(
        self,
        n_estimators: int = 200,
        min_samples_leaf: int = 3,
        max_samples: int = 20000,
        passthrough: bool = True,
        random_state: int | None = None,
        n_jobs: int | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.min_samples_leaf = min_samples_leaf
        self.max_samples = max_samples
        self.passthrough = passthrough
        self.random_state = random_state
        self.n_jobs = n_jobs

    def __sklearn_tags__(self):  # sklearn protocol: the labels are needed to fit
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

    def _labelled(self, y: object, n: int) -> tuple[np.ndarray, np.ndarray]:
        return _labelled_rows(self, y, n)

    def fit(self, X: object, y: object = None) -> ForestScore:
        """Fit the forest on the labelled rows; return ``self``."""
        X = validate_data(self, X, dtype=np.float64)
        lab, yl = self._labelled(y, X.shape[0])
        draw = min(int(self.max_samples), lab.size)
        self.forest_ = RandomForestClassifier(
            n_estimators=self.n_estimators, min_samples_leaf=self.min_samples_leaf,
            max_samples=draw, oob_score=True, random_state=self.random_state, n_jobs=self.n_jobs,
        ).fit(X[lab], yl)  # fmt: skip
        self._eps = 0.5 / (self.n_estimators + 1)
        return self

    def _logit(self, p: np.ndarray) -> np.ndarray:
        p = np.clip(p, self._eps, 1.0 - self._eps)
        return np.log(p) - np.log1p(-p)

    def _out(self, X: np.ndarray, score: np.ndarray) -> np.ndarray:
        col = self._logit(score)[:, None]
        return np.hstack([X, col]) if self.passthrough else col

    def fit_transform(self, X: object, y: object = None, **fit_params: object) -> np.ndarray:
        """Fit, then score: out-of-bag for the labelled rows, the whole forest for the rest."""
        self.fit(X, y)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        lab, _ = self._labelled(y, X.shape[0])
        score = self.forest_.predict_proba(X)[:, -1]
        oob = self.forest_.oob_decision_function_[:, -1]
        # A row in every tree's bag has no out-of-bag vote: keep the whole forest's score.
        score[lab] = np.where(np.isfinite(oob), oob, score[lab])
        return self._out(X, score)

    def transform(self, X: object) -> np.ndarray:
        """The whole forest's score of every row (appended to ``X`` with ``passthrough``)."""
        check_is_fitted(self, "forest_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self._out(X, self.forest_.predict_proba(X)[:, -1])


class BoostScore(TransformerMixin, BaseEstimator):
    """Append the logit of a gradient-boosted trees model's out-of-fold presence probability.

    The second tree ensemble of the ``stack`` map, beside :class:`ForestScore`: a
    :class:`~sklearn.ensemble.HistGradientBoostingClassifier` with its library defaults. In
    ``fit_transform`` each labelled row gets the probability of a model fitted on the other
    ``cv`` - 1 folds of the labelled rows (stratified, as ``cross_val_predict`` does), so a
    downstream model fitted on them never sees an in-sample score; every other row, and every
    row passed to ``transform`` later, gets the probability of the model fitted on all
    labelled rows. With fewer than 2 labelled rows in the smaller class no out-of-fold score
    exists and the labelled rows get the whole model's score.

    Parameters
    ----------
    cv : int, default=5
        Folds of the labelled rows for the out-of-fold scores (fewer when the smaller class
        has fewer rows).
    passthrough : bool, default=True
        Return the input features with the score appended (else the score alone).
    random_state : int or None, default=None
        Seed of the folds and of the boosting.

    Attributes
    ----------
    booster_ : HistGradientBoostingClassifier
        Fitted on all labelled rows.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 2)); y = (X[:, 0] > 0).astype(int); y[60:] = -1
    >>> BoostScore(random_state=0).fit_transform(X, y).shape
    (80, 3)
    """

    def __init__(
        self, cv: int = 5, passthrough: bool = True, random_state: int | None = None
    ) -> None:
        self.cv = cv
        self.passthrough = passthrough
        self.random_state = random_state

    def __sklearn_tags__(self):  # sklearn protocol: the labels are needed to fit
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

    def _model(self) -> HistGradientBoostingClassifier:
        return HistGradientBoostingClassifier(random_state=self.random_state)

    def fit(self, X: object, y: object = None) -> BoostScore:
        """Fit the boosting on the labelled rows; return ``self``."""
        X = validate_data(self, X, dtype=np.float64)
        lab, yl = _labelled_rows(self, y, X.shape[0])
        with _few_threads(lab.size):
            self.booster_ = self._model().fit(X[lab], yl)
        return self

    def _out(self, X: np.ndarray, score: np.ndarray) -> np.ndarray:
        p = np.clip(score, _BOOST_EPS, 1.0 - _BOOST_EPS)
        col = (np.log(p) - np.log1p(-p))[:, None]
        return np.hstack([X, col]) if self.passthrough else col

    def fit_transform(self, X: object, y: object = None, **fit_params: object) -> np.ndarray:
        """Fit, then score: out-of-fold for the labelled rows, the whole model for the rest."""
        self.fit(X, y)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        lab, yl = _labelled_rows(self, y, X.shape[0])
        score = self.booster_.predict_proba(X)[:, -1]
        n_splits = min(int(self.cv), int(np.unique(yl, return_counts=True)[1].min()))
        if n_splits >= 2:
            folds = StratifiedKFold(n_splits, shuffle=True, random_state=self.random_state)
            with _few_threads(lab.size):
                oof = cross_val_predict(self._model(), X[lab], yl, cv=folds,
                                        method="predict_proba")  # fmt: skip
            score[lab] = oof[:, -1]
        return self._out(X, score)

    def transform(self, X: object) -> np.ndarray:
        """The whole model's score of every row (appended to ``X`` with ``passthrough``)."""
        check_is_fitted(self, "booster_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self._out(X, self.booster_.predict_proba(X)[:, -1])
