"""A calibrated probability of presence per cell, and the expected occupied cells of a choice.

A score ranks cells; a planner also asks *how many of the chosen cells hold the species*. The
labels that answer it are detections, and a detection needs both presence and a birder who
notices: a cell surveyed once and missed may still be occupied. :class:`OccupancyCalibration`
therefore fits the single-season site-occupancy model (MacKenzie et al. 2002) with the score
as the occupancy covariate and each checklist as a visit:

* the cell is occupied with probability ``psi = sigmoid(a + b * z)``, ``z`` the score
  standardised over the calibration cells;
* each checklist in an occupied cell detects the species with probability ``p``
  (``sigmoid(c)``), so an occupied cell with ``n`` checklists is detected with probability
  ``1 - (1 - p) ** n``; an unoccupied cell is never detected.

The three parameters are fitted by maximum likelihood with a weakly informative normal prior
(sd :data:`PRIOR_SD` on the logit scale) that keeps them finite when few cells are surveyed;
their uncertainty is the Laplace approximation (the inverse Hessian at the optimum).
:meth:`OccupancyCalibration.expected_count` draws parameters from it and presences from them,
so its interval carries both the model's uncertainty and the luck of the draw. A chosen cell
with a detection of its own is occupied; one surveyed without a detection keeps the
probability that it was missed (its posterior).

How ``psi`` grows with the score beyond most calibration cells is barely constrained by them,
yet that is where the chosen cells lie (the top of the ranking, where surveyed cells are
few). :class:`LinkAverage` therefore fits several link shapes (:data:`LINKS`) and averages
them with stacking weights from their held-out likelihood on the calibration cells, so the
interval carries the disagreement between shapes that fit the surveyed cells about equally
well. Every shape is non-decreasing in the score (its slopes are bounded below by 0 where
a free fit would turn down): the score is the model's ranking, and a probability that fell
at the top would rank the chosen cells below cells the model put after them.

The calibration cells must be scored out of sample: ``reserve select`` uses the surveyed
private candidates (never fitted as labelled rows), see :mod:`reserve.confidence`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log1p

__all__ = ["LINKS", "PRIOR_SD", "LinkAverage", "OccupancyCalibration"]

#: Prior standard deviation of the intercept, slope and detection logit.
PRIOR_SD = 2.5
#: Parameter draws behind an expected count's interval.
N_DRAWS = 4000
#: Shapes of the occupancy link (see :class:`OccupancyCalibration`).
LINKS = ("score", "rank", "score+tail", "rank+tail")
#: Share of the calibration cells above the knot of a ``+tail`` link.
TAIL_SHARE = 0.1
#: Folds of the cross-validation that weighs the links of :class:`LinkAverage`.
LINK_FOLDS = 5


def _detect(c: float, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``1 - q**n`` and ``q**n`` with ``q = 1 - sigmoid(c)``, stable for any ``c``."""
    log_qn = n * -np.logaddexp(0.0, c)  # n log(1 - sigmoid(c))
    return -np.expm1(log_qn), np.exp(log_qn)


def _nll(theta: np.ndarray, A: np.ndarray, n: np.ndarray, y: np.ndarray) -> tuple:
    """Negative log posterior of the occupancy model and its gradient.

    ``theta`` is the occupancy coefficients on the columns of ``A``, then the detection logit.
    """
    a, c = theta[:-1], theta[-1]
    log_psi = -np.logaddexp(0.0, -(A @ a))
    psi = np.exp(log_psi)
    d, qn = _detect(c, n)
    d = np.maximum(d, 1e-300)
    miss = np.maximum(1.0 - psi * d, 1e-300)  # likelihood of a cell without detection
    ll = np.where(y, log_psi + np.log(d), log1p(-psi * d))
    g_eta = np.where(y, 1.0 - psi, -psi * (1.0 - psi) * d / miss)
    dd = n * expit(c) * qn  # derivative of 1 - q**n with respect to c
    g_c = np.where(y, dd / d, -psi * dd / miss)
    grad = -np.r_[A.T @ g_eta, g_c.sum()] + theta / PRIOR_SD**2
    return -ll.sum() + 0.5 * float(theta @ theta) / PRIOR_SD**2, grad


def _cell_loglik(theta: np.ndarray, A: np.ndarray, n: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each surveyed cell's log likelihood (no prior)."""
    a, c = theta[:-1], theta[-1]
    log_psi = -np.logaddexp(0.0, -(A @ a))
    d, _ = _detect(c, n)
    d = np.maximum(d, 1e-300)
    return np.where(y, log_psi + np.log(d), log1p(-np.exp(log_psi) * d))


def _loglik(theta: np.ndarray, A: np.ndarray, n: np.ndarray, y: np.ndarray) -> float:
    """Log likelihood of surveyed cells (no prior)."""
    return -_nll(theta, A, n, y)[0] + 0.5 * float(theta @ theta) / PRIOR_SD**2


def _bounded_fit(
    theta: np.ndarray, rows: np.ndarray, A: np.ndarray, n: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """The maximum of :func:`_nll`'s posterior with ``rows @ theta >= 0`` (every slope of
    the link at least 0), from the free optimum ``theta`` moved onto the bounds."""
    res = minimize(
        _nll,
        _onto_bounds(theta, rows),
        args=(A, n, y),
        jac=True,
        method="SLSQP",
        constraints={"type": "ineq", "fun": lambda t: rows @ t, "jac": lambda t: rows},
    )
    return _onto_bounds(res.x, rows)  # the solver's tolerance, not a slope below 0


def _onto_bounds(theta: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``theta`` with its slope at least 0 and, for a tail link (two rows), its tail no
    steeper downwards than the slope below the knot."""
    out = theta.copy()
    out[1] = max(out[1], 0.0)
    if rows.shape[0] == 2:
        out[2] = max(out[2], -out[1])
    return out


def _laplace(theta: np.ndarray, A: np.ndarray, n: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Inverse of the finite-difference Hessian of :func:`_nll` at ``theta``."""
    h, m = 1e-5, theta.size
    hess = np.empty((m, m))
    for j in range(m):
        step = np.zeros(m)
        step[j] = h
        hess[:, j] = (_nll(theta + step, A, n, y)[1] - _nll(theta - step, A, n, y)[1]) / (2 * h)
    return np.linalg.pinv(0.5 * (hess + hess.T))


@dataclass
class OccupancyCalibration:
    """Occupancy probability from a score, fitted on surveyed cells (see the module).

    Parameters
    ----------
    slope : bool
        False fixes ``psi`` to a constant: every cell gets the calibration cells' occupancy
        (used when the score ranks nothing).
    link : str
        Covariate of ``logit(psi)``, one of :data:`LINKS`: ``"score"`` the score standardised
        over the calibration cells; ``"rank"`` the logit of the score's percentile among the
        ``reference`` cells (the score of a ranker is only ordinal: its scale near the cut is
        set by the loss, not by occupancy), standardised; ``+tail`` adds a second slope above
        the calibration cells' upper :data:`TAIL_SHARE` (a hinge), so the top of the ranking
        follows its own cells rather than the bulk. The link's slope is at least 0 below the
        knot and above it: occupancy never falls as the score rises, so the probabilities
        keep the ranking's order (a hinge fitted freely can turn the top of the ranking down
        when the few calibration cells there happen to be empty). A free fit that keeps the
        order is the fit; one that does not is refitted with the slopes bounded.

    Attributes
    ----------
    params_ : ndarray
        Occupancy coefficients (intercept, slope, tail slope as the link has them: above the
        knot the slope is their sum), then the detection logit.
    cov_ : ndarray
        Laplace covariance of ``params_``.
    center_, scale_ : float
        Standardisation of the covariate.
    knot_ : float
        Knot of a ``+tail`` link (standardised covariate).
    n_cells_ : int
        Calibration cells.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> s = rng.normal(size=2000)
    >>> occupied = rng.random(2000) < 1 / (1 + np.exp(-(s - 0.5)))
    >>> n = rng.integers(1, 10, 2000)
    >>> detected = occupied & (rng.random(2000) < 1 - 0.7 ** n)
    >>> cal = OccupancyCalibration().fit(s, n, detected)
    >>> round(cal.detection_, 2), round(float(cal.probability(np.array([0.5]))[0]), 2)
    (0.38, 0.47)

    (The truth: 0.3 and 0.5.)
    """

    slope: bool = True
    link: str = "score"
    params_: np.ndarray = field(init=False, repr=False)
    cov_: np.ndarray = field(init=False, repr=False)
    center_: float = field(init=False, default=0.0)
    scale_: float = field(init=False, default=1.0)
    knot_: float = field(init=False, default=np.inf)
    n_cells_: int = field(init=False, default=0)
    reference_: np.ndarray = field(init=False, repr=False, default=None)

    def _raw(self, score: np.ndarray) -> np.ndarray:
        """The link's covariate before standardisation."""
        s = np.asarray(score, dtype=np.float64)
        if not self.link.startswith("rank"):
            return s
        ref = self.reference_
        pos = (np.searchsorted(ref, s, "left") + np.searchsorted(ref, s, "right")) / 2.0
        u = (pos + 0.5) / (ref.size + 1.0)
        return np.log(u) - np.log1p(-u)

    def _design(self, score: np.ndarray) -> np.ndarray:
        """Columns of ``logit(psi)``: intercept, then the slopes the link has."""
        z = (self._raw(score) - self.center_) / self.scale_
        cols = [np.ones_like(z)]
        if self.slope:
            cols.append(z)
            if self.link.endswith("+tail"):
                cols.append(np.maximum(z - self.knot_, 0.0))
        return np.column_stack(cols)

    def _slopes(self, m: int) -> np.ndarray:
        """Rows that map the ``m`` parameters to the link's slopes: below the knot, and for a
        ``+tail`` link above it (the slope plus the tail's)."""
        rows = np.zeros((m - 2, m))
        rows[:, 1] = 1.0
        if self.link.endswith("+tail") and m == 4:
            rows[1, 2] = 1.0
        return rows

    def fit(
        self,
        score: np.ndarray,
        n_checklists: np.ndarray,
        detected: np.ndarray,
        reference: np.ndarray | None = None,
    ):
        """Fit the occupancy model on surveyed cells.

        Parameters
        ----------
        score : array-like of shape (n,)
            Out-of-sample score of each cell.
        n_checklists : array-like of shape (n,)
            Checklists (visits) in each cell, at least 1.
        detected : array-like of shape (n,)
            Whether any checklist detected the species.
        reference : array-like, optional
            Scores whose percentiles a ``rank`` link uses (the cells to be ranked, e.g. every
            candidate); default ``score``.

        Returns
        -------
        self
        """
        if self.link not in LINKS:
            raise ValueError(f"link must be one of {LINKS}; got {self.link!r}")
        s = np.asarray(score, dtype=np.float64)
        n = np.maximum(np.asarray(n_checklists, dtype=np.float64), 1.0)
        y = np.asarray(detected).astype(bool)
        ref = s if reference is None else np.asarray(reference, dtype=np.float64)
        self.reference_ = np.sort(ref[np.isfinite(ref)])
        x = self._raw(s)
        self.center_ = float(x.mean()) if x.size else 0.0
        self.scale_ = float(x.std()) if x.size and x.std() > 0 else 1.0
        z = (x - self.center_) / self.scale_
        self.knot_ = float(np.quantile(z, 1.0 - TAIL_SHARE)) if z.size else np.inf
        A = self._design(s)
        theta = minimize(_nll, np.zeros(A.shape[1] + 1), args=(A, n, y), jac=True, method="BFGS").x
        rows = self._slopes(theta.size)
        if rows.size and (rows @ theta).min() < 0.0:
            theta = _bounded_fit(theta, rows, A, n, y)
        self.params_ = theta
        self.cov_ = _laplace(theta, A, n, y)
        self.n_cells_ = int(s.size)
        return self

    def loglik(self, score: np.ndarray, n_checklists: np.ndarray, detected: np.ndarray) -> float:
        """Log likelihood of surveyed cells under the fitted parameters (held-out cells)."""
        return float(self.cell_loglik(score, n_checklists, detected).sum())

    def cell_loglik(
        self, score: np.ndarray, n_checklists: np.ndarray, detected: np.ndarray
    ) -> np.ndarray:
        """Each surveyed cell's log likelihood under the fitted parameters."""
        n = np.maximum(np.asarray(n_checklists, dtype=np.float64), 1.0)
        y = np.asarray(detected).astype(bool)
        return _cell_loglik(self.params_, self._design(score), n, y)

    @property
    def detection_(self) -> float:
        """Probability that one checklist in an occupied cell detects the species."""
        return float(expit(self.params_[-1]))

    def draws(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` parameter draws from the Laplace approximation at the fit.

        The draws are not held to the slopes' bounds: where a slope sits at 0 the
        approximation keeps the width the cells give it on both sides, which the interval of
        an expected count needs (holding the draws to the bound narrows it below its stated
        coverage on the default region, ``docs/confidence.md``).
        """
        return rng.multivariate_normal(self.params_, self.cov_, size=size, method="eigh")

    def _psi(self, score: np.ndarray, theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(theta)
        return expit(theta[:, :-1] @ self._design(score).T)

    def probability(self, score: np.ndarray) -> np.ndarray:
        """Probability that a cell with ``score`` is occupied (before its own survey)."""
        return self._psi(score, self.params_)[0]

    def posterior(
        self,
        score: np.ndarray,
        n_checklists: np.ndarray,
        detected: np.ndarray,
        theta: np.ndarray | None = None,
    ) -> np.ndarray:
        """Probability of presence given the cell's own survey (``n_checklists`` 0: none).

        Parameters
        ----------
        score, n_checklists, detected : array-like of shape (n,)
            A detection makes a cell occupied; ``n`` checklists without one leave
            ``psi q**n / (psi q**n + 1 - psi)``.
        theta : ndarray of shape (B, m), optional
            Parameter draws (default: the fitted parameters).

        Returns
        -------
        ndarray of shape (n,), or (B, n) with ``theta``
        """
        draws = self.params_ if theta is None else theta
        psi = self._psi(score, draws)
        n = np.maximum(np.asarray(n_checklists, dtype=np.float64), 0.0)
        qn = np.exp(n[None, :] * -np.logaddexp(0.0, np.atleast_2d(draws)[:, -1:]))
        missed = psi * qn / (psi * qn + 1.0 - psi)
        out = np.where(np.asarray(detected, dtype=bool)[None, :], 1.0, missed)
        return out[0] if theta is None else out

    def expected_count(
        self,
        score: np.ndarray,
        n_checklists: np.ndarray,
        detected: np.ndarray,
        level: float = 0.9,
        seed: int | None = 0,
    ) -> tuple[float, float, float]:
        """Expected occupied cells among the given ones, with a ``level`` interval.

        Parameters
        ----------
        score, n_checklists, detected : array-like of shape (n,)
            The chosen cells (``n_checklists`` 0 for an unsurveyed cell).
        level : float
            Coverage of the interval.
        seed : int or None
            Seed of the draws.

        Returns
        -------
        (float, float, float)
            The expected count (the mean over the parameter draws) and the interval's ends
            (whole cells).
        """
        rng = np.random.default_rng(seed)
        prob = self.posterior(score, n_checklists, detected, self.draws(N_DRAWS, rng))
        return _count_interval(prob, level, rng)


def _count_interval(
    prob: np.ndarray, level: float, rng: np.random.Generator
) -> tuple[float, float, float]:
    """The occupied count's mean and interval: presences drawn from each row of probabilities
    (one row per parameter draw), so the mean and the interval come from one distribution."""
    counts = (rng.random(prob.shape) < prob).sum(axis=1)
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(counts, [tail, 1.0 - tail])
    mean = float(prob.sum(axis=1).mean())
    # whole cells around the mean: a count piled on one value can leave the mean outside
    return mean, float(min(lo, np.floor(mean))), float(max(hi, np.ceil(mean)))


def _stacking_weights(held: np.ndarray, n_iter: int = 500) -> np.ndarray:
    """Weights on the simplex that maximise the held-out log score of the mixture.

    ``held`` is (members, cells) of held-out log likelihoods; the weights are the mixture
    proportions' maximum likelihood (stacking of predictive distributions, Yao et al. 2018),
    found by the EM update ``w_k <- mean_i w_k p_ik / sum_j w_j p_ij``.
    """
    k = held.shape[0]
    if k == 1 or not np.any(held):
        return np.full(k, 1.0 / k)
    p = np.exp(held - held.max(axis=0, keepdims=True))
    w = np.full(k, 1.0 / k)
    for _ in range(n_iter):
        mix = w @ p
        w = (w[:, None] * p / mix).mean(axis=1)
    return w / w.sum()


@dataclass
class LinkAverage:
    """The link shapes of :data:`LINKS` averaged with stacking weights (see the module).

    Each link is fitted on all calibration cells; the weights maximise the
    :data:`LINK_FOLDS`-fold held-out log score of the mixture of the links' predictive
    distributions (stacking, Yao et al. 2018; :func:`_stacking_weights`), which keeps weight
    on every link that predicts some cells well. Probabilities are the weighted mean of the
    links'; the expected count's interval draws a link by weight, then its parameters, then
    the presences.

    Parameters
    ----------
    slope : bool
        False: one constant-occupancy fit (nothing to average).
    links : tuple of str
        The shapes averaged.
    seed : int or None
        Seed of the folds.

    Attributes
    ----------
    members_ : list of OccupancyCalibration
    weights_ : ndarray
        Weight of each member.
    cv_loglik_ : ndarray
        Held-out log likelihood of each member (summed over the cells).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> s = rng.normal(size=2000)
    >>> occupied = rng.random(2000) < 1 / (1 + np.exp(-(s - 0.5)))
    >>> n = rng.integers(1, 10, 2000)
    >>> detected = occupied & (rng.random(2000) < 1 - 0.7 ** n)
    >>> avg = LinkAverage().fit(s, n, detected)
    >>> round(float(avg.weights_.sum()), 6), len(avg.members_)
    (1.0, 4)
    >>> round(float(avg.probability(np.array([0.5]))[0]), 1)
    0.5
    """

    slope: bool = True
    links: tuple[str, ...] = LINKS
    seed: int | None = 0
    members_: list = field(init=False, repr=False, default_factory=list)
    weights_: np.ndarray = field(init=False, repr=False, default=None)
    cv_loglik_: np.ndarray = field(init=False, repr=False, default=None)

    def fit(
        self,
        score: np.ndarray,
        n_checklists: np.ndarray,
        detected: np.ndarray,
        reference: np.ndarray | None = None,
    ):
        """Fit every link and weigh them (parameters as :meth:`OccupancyCalibration.fit`)."""
        s = np.asarray(score, dtype=np.float64)
        n = np.asarray(n_checklists, dtype=np.float64)
        y = np.asarray(detected).astype(bool)
        ref = s if reference is None else np.asarray(reference, dtype=np.float64)
        links = self.links if self.slope else ("score",)
        self.members_ = [OccupancyCalibration(self.slope, link).fit(s, n, y, ref) for link in links]
        held = np.array([self._held_out(link, s, n, y, ref) for link in links])
        self.cv_loglik_ = held.sum(axis=1)
        self.weights_ = _stacking_weights(held)
        return self

    def _held_out(
        self, link: str, s: np.ndarray, n: np.ndarray, y: np.ndarray, ref: np.ndarray
    ) -> np.ndarray:
        """Each cell's cross-validated log likelihood under one link (0 with too few cells
        to fold)."""
        out = np.zeros(s.size)
        if s.size < 2 * LINK_FOLDS or len(self.links) < 2:
            return out
        order = np.random.default_rng(self.seed).permutation(s.size)
        for fold in np.array_split(order, LINK_FOLDS):
            keep = np.ones(s.size, dtype=bool)
            keep[fold] = False
            cal = OccupancyCalibration(self.slope, link).fit(s[keep], n[keep], y[keep], ref)
            out[fold] = cal.cell_loglik(s[fold], n[fold], y[fold])
        return out

    @property
    def detection_(self) -> float:
        """Weighted mean of the links' detection per checklist."""
        return float(
            sum(w * m.detection_ for w, m in zip(self.weights_, self.members_, strict=True))
        )

    @property
    def n_cells_(self) -> int:
        """Calibration cells."""
        return self.members_[0].n_cells_

    def probability(self, score: np.ndarray) -> np.ndarray:
        """Weighted mean of the links' :meth:`OccupancyCalibration.probability`."""
        mean = sum(
            w * m.probability(score) for w, m in zip(self.weights_, self.members_, strict=True)
        )
        return np.clip(mean, 0.0, 1.0)  # weights summing to 1 up to rounding

    def posterior(
        self, score: np.ndarray, n_checklists: np.ndarray, detected: np.ndarray
    ) -> np.ndarray:
        """Weighted mean of the links' :meth:`OccupancyCalibration.posterior`."""
        mean = sum(
            w * m.posterior(score, n_checklists, detected)
            for w, m in zip(self.weights_, self.members_, strict=True)
        )
        return np.clip(mean, 0.0, 1.0)

    def expected_count(
        self,
        score: np.ndarray,
        n_checklists: np.ndarray,
        detected: np.ndarray,
        level: float = 0.9,
        seed: int | None = 0,
    ) -> tuple[float, float, float]:
        """As :meth:`OccupancyCalibration.expected_count`, over the links by weight."""
        rng = np.random.default_rng(seed)
        per = rng.multinomial(N_DRAWS, self.weights_)
        prob = np.vstack(
            [
                m.posterior(score, n_checklists, detected, m.draws(int(b), rng))
                for m, b in zip(self.members_, per, strict=True)
                if b > 0
            ]
        )
        return _count_interval(prob, level, rng)
