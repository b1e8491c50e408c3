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
``forest``          that logit alone: TTK then ranks the candidates as the forest does (the
                    tree ensemble's view without a linear correction)
==================  ==========================================================================
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.kernel_approximation import Nystroem
from sklearn.preprocessing import PolynomialFeatures, SplineTransformer, StandardScaler
from sklearn.utils.validation import check_is_fitted, validate_data

from reserve.errors import InvalidInputError

__all__ = [
    "FEATURE_MAPS",
    "JOINING_MAPS",
    "MAX_EXPANDED_BYTES",
    "ForestScore",
    "expanded_width",
    "feature_map",
    "fit_feature_map",
]

#: The feature maps :func:`feature_map` builds, simplest first.
FEATURE_MAPS: tuple[str, ...] = ("linear", "spline", "interactions", "rbf", "stack", "forest")

#: Maps that may join AutoTTK's ensemble of the maps but never lead it (unless they are all
#: it compares): TTK over the single ``forest`` column ranks the candidates as the forest
#: does (``C`` and the class weights change nothing but the scale), so a fit led by it
#: would be a random forest, not a TTK (docs/algorithm.md, "The forest as a member").
JOINING_MAPS: tuple[str, ...] = ("forest",)

#: Largest expanded design (rows x expanded columns x 8 bytes) a map may build: 4 GiB.
MAX_EXPANDED_BYTES: int = 4 * 2**30

_SPLINE_KNOTS = 4
_SPLINE_DEGREE = 3
_RBF_COMPONENTS = 200

#: Fewest rows per block of a :class:`ForestScore` predict shared between threads.
_PREDICT_BLOCK_ROWS = 10_000


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
        return d + 1
    if name == "forest":
        return 1
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
    name: str,
    *,
    n_features: int,
    n_samples: int,
    random_state: int | None = None,
    n_jobs: int | None = None,
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
        Seed of the randomised maps (``rbf``, ``stack``, ``forest``).
    n_jobs : int or None
        Threads of the forest of ``stack`` and ``forest`` (:class:`ForestScore`; the
        numbers do not depend on it).

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
            n_knots=_SPLINE_KNOTS,
            degree=_SPLINE_DEGREE,
            extrapolation="linear",
            knots="quantile",
            include_bias=True,
        )
        steps += [("spline", spline), ("rescale", StandardScaler())]
    elif name == "interactions":
        poly = PolynomialFeatures(degree=2, include_bias=False)
        steps += [("interactions", poly), ("rescale", StandardScaler())]
    elif name == "rbf":
        n_comp = min(_RBF_COMPONENTS, int(n_samples))
        rbf = Nystroem(
            kernel="rbf",
            gamma=1.0 / max(n_features, 1),
            n_components=n_comp,
            random_state=random_state,
        )
        steps += [("rbf", rbf), ("rescale", StandardScaler())]
    elif name == "stack":
        forest = ForestScore(random_state=random_state, n_jobs=n_jobs)
        steps += [("forest", forest), ("rescale", StandardScaler())]
    elif name == "forest":
        forest = ForestScore(passthrough=False, random_state=random_state, n_jobs=n_jobs)
        steps += [("forest", forest), ("rescale", StandardScaler())]
    return steps


#: The maps whose one forest :func:`fit_feature_map` shares (the same scaled rows, the same
#: seed: the same forest), with the ``passthrough`` of each.
_FOREST_MAPS: dict[str, bool] = {"stack": True, "forest": False}


def fit_feature_map(
    name: str,
    X: np.ndarray,
    y: np.ndarray,
    *,
    random_state: int | None = None,
    n_jobs: int | None = None,
    shared: dict | None = None,
) -> tuple[list[tuple[str, object]], np.ndarray]:
    """Fit feature map ``name`` on all rows of ``X``: its fitted steps and the mapped rows.

    Parameters
    ----------
    name : str
        One of :data:`FEATURE_MAPS`.
    X : numpy.ndarray
        Raw rows, labelled and candidate.
    y : numpy.ndarray
        1 / 0 for labelled rows, -1 for the others.
    random_state, n_jobs : int or None
        As :func:`feature_map`'s.
    shared : dict or None
        A dict kept across the calls of one fit on the same rows (same ``X``, ``y`` and
        ``random_state``): the ``stack`` and ``forest`` maps then fit one forest between
        them, as the second would have fitted it (the same scaled rows and seed), and return
        what fitting each alone returns.

    Returns
    -------
    steps : list of (str, transformer)
        The fitted steps, TTK not included.
    Z : numpy.ndarray
        ``X`` through them.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 3)); y = (X[:, 0] > 0).astype(int); y[50:] = -1
    >>> cache = {}
    >>> _, Zs = fit_feature_map("stack", X, y, random_state=0, shared=cache)
    >>> _, Zf = fit_feature_map("forest", X, y, random_state=0, shared=cache)
    >>> _, Zf_alone = fit_feature_map("forest", X, y, random_state=0)
    >>> Zs.shape, bool(np.array_equal(Zf, Zf_alone))
    ((80, 4), True)
    """
    steps = feature_map(
        name, n_features=X.shape[1], n_samples=X.shape[0], random_state=random_state, n_jobs=n_jobs
    )
    if shared is not None and name in _FOREST_MAPS and "forest" in shared:
        scale, forest, scaled, logit = shared["forest"]
        rescale = steps[-1][1]
        Z = rescale.fit_transform(np.hstack([scaled, logit]) if _FOREST_MAPS[name] else logit)
        return [
            ("scale", scale),
            ("forest", forest.twin(_FOREST_MAPS[name])),
            ("rescale", rescale),
        ], Z
    Z = X
    for _, step in steps:
        Z_in, Z = Z, step.fit_transform(Z, y)
        if shared is not None and isinstance(step, ForestScore):  # its input: the scaled rows
            shared["forest"] = (steps[0][1], step, Z_in, Z[:, -1:])
    return steps, Z


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
        Threads: the trees are fitted in parallel, and the rows are scored in blocks on
        separate threads, each block's trees summed in order, so the scores do not depend
        on it (the forest's own parallel predict adds the trees' votes in the order they
        finish, which can change a probability's last bits).

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
        if y is None:
            raise InvalidInputError(
                "ForestScore requires y to be passed, but the target y is None; pass y "
                "(1/0, -1 for candidates)"
            )
        yy = np.asarray(y).reshape(-1)
        if yy.shape[0] != n:
            raise InvalidInputError(f"y must have {n} entries like X; received {yy.shape[0]}")
        lab = np.flatnonzero(yy != -1)
        if np.unique(yy[lab]).size < 2:
            raise InvalidInputError(
                "ForestScore needs labelled rows (y != -1) of at least two classes; received "
                "one class. Pass presences (1) and absences (0)."
            )
        return lab, yy[lab]

    def fit(self, X: object, y: object = None) -> ForestScore:
        """Fit the forest on the labelled rows; return ``self``."""
        X = validate_data(self, X, dtype=np.float64)
        lab, yl = self._labelled(y, X.shape[0])
        draw = min(int(self.max_samples), lab.size)
        self.forest_ = RandomForestClassifier(
            n_estimators=self.n_estimators,
            min_samples_leaf=self.min_samples_leaf,
            max_samples=draw,
            oob_score=True,
            random_state=self.random_state,
            n_jobs=self.n_jobs,
        ).fit(X[lab], yl)
        self.forest_.set_params(n_jobs=1)  # predict: see _proba
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
        score = self._proba(X)
        oob = self.forest_.oob_decision_function_[:, -1]
        # A row in every tree's bag has no out-of-bag vote: keep the whole forest's score.
        score[lab] = np.where(np.isfinite(oob), oob, score[lab])
        return self._out(X, score)

    def transform(self, X: object) -> np.ndarray:
        """The whole forest's score of every row (appended to ``X`` with ``passthrough``)."""
        check_is_fitted(self, "forest_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self._out(X, self._proba(X))

    def twin(self, passthrough: bool) -> ForestScore:
        """A fitted twin of this transformer with ``passthrough`` set, sharing its forest.

        The twin is what fitting this transformer's parameters with ``passthrough`` on the
        same rows gives, without fitting a second forest: the ``stack`` and ``forest`` maps
        share one this way (:func:`fit_feature_map`).

        Parameters
        ----------
        passthrough : bool
            The twin's ``passthrough``.

        Returns
        -------
        ForestScore

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int); y[40:] = -1
        >>> both = ForestScore(n_estimators=20, random_state=0).fit(X, y)
        >>> alone = ForestScore(n_estimators=20, passthrough=False, random_state=0).fit(X, y)
        >>> bool(np.array_equal(both.twin(False).transform(X), alone.transform(X)))
        True
        """
        check_is_fitted(self, "forest_")
        twin = clone(self).set_params(passthrough=passthrough)
        for name in ("forest_", "_eps", "n_features_in_", "feature_names_in_"):
            if hasattr(self, name):
                setattr(twin, name, getattr(self, name))
        return twin

    def _proba(self, X: np.ndarray) -> np.ndarray:
        """The whole forest's presence probability of each row; with ``n_jobs``, blocks of
        rows on separate threads (the same numbers: each row's trees are summed in order)."""
        jobs = min(effective_n_jobs(self.n_jobs), X.shape[0] // _PREDICT_BLOCK_ROWS)
        if jobs < 2:
            return self.forest_.predict_proba(X)[:, -1]
        blocks = np.array_split(X, jobs)
        with ThreadPoolExecutor(jobs) as pool:
            parts = pool.map(lambda b: self.forest_.predict_proba(b)[:, -1], blocks)
            return np.concatenate(list(parts))
