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

The calibration cells must be scored out of sample: ``reserve select`` uses the surveyed
private candidates (never fitted as labelled rows), see :mod:`reserve.confidence`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log1p

__all__ = ["PRIOR_SD", "OccupancyCalibration"]

#: Prior standard deviation of the intercept, slope and detection logit.
PRIOR_SD = 2.5
#: Parameter draws behind an expected count's interval.
N_DRAWS = 4000


def _detect(c: float, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``1 - q**n`` and ``q**n`` with ``q = 1 - sigmoid(c)``, stable for any ``c``."""
    log_qn = n * -np.logaddexp(0.0, c)  # n log(1 - sigmoid(c))
    return -np.expm1(log_qn), np.exp(log_qn)


@dataclass
class OccupancyCalibration:
    """Occupancy probability from a score, fitted on surveyed cells (see the module).

    Parameters
    ----------
    slope : bool
        False fixes ``b = 0``: every cell gets the calibration cells' occupancy (used when
        the score ranks nothing).

    Attributes
    ----------
    params_ : ndarray of shape (3,)
        ``(a, b, c)``: intercept, slope on the standardised score, detection logit.
    cov_ : ndarray of shape (3, 3)
        Laplace covariance of ``params_`` (zero row and column for a fixed slope).
    center_, scale_ : float
        Standardisation of the score.
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
    params_: np.ndarray = field(init=False, repr=False)
    cov_: np.ndarray = field(init=False, repr=False)
    center_: float = field(init=False, default=0.0)
    scale_: float = field(init=False, default=1.0)
    n_cells_: int = field(init=False, default=0)

    def _nll(self, theta: np.ndarray, z: np.ndarray, n: np.ndarray, y: np.ndarray) -> tuple:
        """Negative log posterior and its gradient."""
        a, b, c = theta
        eta = a + b * z
        log_psi = -np.logaddexp(0.0, -eta)
        psi = np.exp(log_psi)
        d, qn = _detect(c, n)
        d = np.maximum(d, 1e-300)
        p = expit(c)
        miss = np.maximum(1.0 - psi * d, 1e-300)  # likelihood of a cell without detection
        ll = np.where(y, log_psi + np.log(d), log1p(-psi * d))
        g_eta = np.where(y, 1.0 - psi, -psi * (1.0 - psi) * d / miss)
        dd = n * p * qn  # derivative of 1 - q**n with respect to c
        g_c = np.where(y, dd / d, -psi * dd / miss)
        grad = -np.array([g_eta.sum(), (g_eta * z).sum(), g_c.sum()])
        grad += theta / PRIOR_SD**2
        if not self.slope:
            grad[1] = 0.0
        return -ll.sum() + 0.5 * float(theta @ theta) / PRIOR_SD**2, grad

    def fit(self, score: np.ndarray, n_checklists: np.ndarray, detected: np.ndarray):
        """Fit the occupancy model on surveyed cells.

        Parameters
        ----------
        score : array-like of shape (n,)
            Out-of-sample score of each cell.
        n_checklists : array-like of shape (n,)
            Checklists (visits) in each cell, at least 1.
        detected : array-like of shape (n,)
            Whether any checklist detected the species.

        Returns
        -------
        self
        """
        s = np.asarray(score, dtype=np.float64)
        n = np.maximum(np.asarray(n_checklists, dtype=np.float64), 1.0)
        y = np.asarray(detected).astype(bool)
        self.center_ = float(s.mean()) if s.size else 0.0
        self.scale_ = float(s.std()) if s.size and s.std() > 0 else 1.0
        z = (s - self.center_) / self.scale_
        res = minimize(self._nll, np.zeros(3), args=(z, n, y), jac=True, method="BFGS")
        self.params_ = res.x if self.slope else res.x * np.array([1.0, 0.0, 1.0])
        self.cov_ = self._laplace(z, n, y)
        self.n_cells_ = int(s.size)
        return self

    def _laplace(self, z: np.ndarray, n: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Inverse of the finite-difference Hessian of the negative log posterior."""
        h = 1e-5
        hess = np.empty((3, 3))
        for j in range(3):
            step = np.zeros(3)
            step[j] = h
            up = self._nll(self.params_ + step, z, n, y)[1]
            down = self._nll(self.params_ - step, z, n, y)[1]
            hess[:, j] = (up - down) / (2 * h)
        hess = 0.5 * (hess + hess.T)
        free = [0, 1, 2] if self.slope else [0, 2]
        cov = np.zeros((3, 3))
        cov[np.ix_(free, free)] = np.linalg.pinv(hess[np.ix_(free, free)])
        return cov

    @property
    def detection_(self) -> float:
        """Probability that one checklist in an occupied cell detects the species."""
        return float(expit(self.params_[2]))

    def _psi(self, score: np.ndarray, theta: np.ndarray) -> np.ndarray:
        z = (np.asarray(score, dtype=np.float64) - self.center_) / self.scale_
        theta = np.atleast_2d(theta)
        return expit(theta[:, :1] + theta[:, 1:2] * z[None, :])

    def probability(self, score: np.ndarray) -> np.ndarray:
        """Probability that a cell with ``score`` is occupied (before its own survey)."""
        return self._psi(score, self.params_)[0]

    def posterior(self, score: np.ndarray, n_checklists: np.ndarray,
                  detected: np.ndarray, theta: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
        """Probability of presence given the cell's own survey (``n_checklists`` 0: none).

        Parameters
        ----------
        score, n_checklists, detected : array-like of shape (n,)
            A detection makes a cell occupied; ``n`` checklists without one leave
            ``psi q**n / (psi q**n + 1 - psi)``.
        theta : ndarray of shape (B, 3), optional
            Parameter draws (default: the fitted parameters).

        Returns
        -------
        ndarray of shape (n,), or (B, n) with ``theta``
        """
        draws = self.params_ if theta is None else theta
        psi = self._psi(score, draws)
        n = np.maximum(np.asarray(n_checklists, dtype=np.float64), 0.0)
        qn = np.exp(n[None, :] * -np.logaddexp(0.0, np.atleast_2d(draws)[:, 2:3]))
        missed = psi * qn / (psi * qn + 1.0 - psi)
        out = np.where(np.asarray(detected, dtype=bool)[None, :], 1.0, missed)
        return out[0] if theta is None else out

    def expected_count(self, score: np.ndarray, n_checklists: np.ndarray,
                       detected: np.ndarray, level: float = 0.9,
                       seed: int | None = 0) -> tuple[float, float, float]:  # fmt: skip
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
            The expected count and the interval's ends (whole cells).
        """
        rng = np.random.default_rng(seed)
        theta = rng.multivariate_normal(self.params_, self.cov_, size=N_DRAWS,
                                        method="eigh")  # fmt: skip
        prob = self.posterior(score, n_checklists, detected, theta)
        counts = (rng.random(prob.shape) < prob).sum(axis=1)
        tail = (1.0 - level) / 2.0
        lo, hi = np.quantile(counts, [tail, 1.0 - tail])
        expected = float(self.posterior(score, n_checklists, detected).sum())
        return expected, float(lo), float(hi)
