"""The selection result and its tables: scored cells, the selected cells, the ranking, a summary.

:func:`build_result` turns a fitted estimator and its :class:`reserve.design.Problem` into a
:class:`SelectionResult`, whose tables are what :mod:`reserve.export` writes (the
``planning_units``, ``selected``, ``ranking`` and ``run_summary`` layers) and what
:mod:`reserve.maps` draws.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from reserve.adjacency import EDGE_FACTOR, boundary_length, grid_adjacency, patch_labels
from reserve.confidence import (
    LEVEL,
    CrossValidation,
    PrivateCheck,
    cv_interval,
    private_land_check,
)
from reserve.config import SELECT_DEFAULTS, SelectOptions
from reserve.design import Problem
from reserve.errors import InvalidInputError
from reserve.grid import cell_locations
from reserve.methods import capabilities
from reserve.occupancy import LinkAverage
from reserve.signal import CutoffTies, Verdict, assess_signal
from reserve.solvers.ties import tie_width

__all__ = [
    "LOCATION_COLUMNS",
    "Evidence",
    "FitOutcome",
    "SelectionResult",
    "build_result",
    "expected_among",
    "survey_visits",
]


@dataclass
class SelectionResult:
    """What :func:`reserve.select.select_reserve` chose and wrote.

    Attributes
    ----------
    planning_units : geopandas.GeoDataFrame
        Every cell of the input with ``locked_out`` (the column and ``locked_out=``),
        ``locked_in``, ``score``, ``rank`` (selected and candidate cells, 1 = best; 0 for
        other cells), ``selected`` and, when bootstrapped, ``selection_frequency``, in the
        input CRS.
    selected : geopandas.GeoDataFrame
        The ``k`` selected cells, locked-in first, then best first (``rank`` 1..k); with
        ``locked_in`` when any cell is locked in, ``selection_frequency`` when bootstrapped.
    summary : dict
        The run summary (the ``run_summary`` layer's one row).
    estimator : estimator
        The fitted estimator.
    feature_names : list of str
        Feature columns, in the order of ``estimator.coef_``.
    cv : reserve.model_selection.CSelection or None
        The cross-validation outcome when ``C`` was chosen automatically.
    gpkg_path, map_path, csv_path : Path or None
        Files written (None when ``out`` was not given / no map was asked for); the CSV is
        the ranking table beside the GeoPackage.
    config : dict
        The effective configuration.
    contributions : numpy.ndarray or None
        Per feature (order of ``feature_names``), the mean over the selected cells of
        ``coef_[j] * z[i, j]`` (``z``: standardised features, mean 0 on the fitted cells):
        how much feature ``j`` lifts the selected cells' scores above those of an average
        fitted cell. Their sum is the selected cells' mean score minus the intercept.
    ranking : pandas.DataFrame or None
        Every ranked cell (the selected, locked-in first, then the other candidates by
        score): ``rank``, ``cell_id``, ``score``, ``selected``, ``locked_in`` and, when
        bootstrapped, ``selection_frequency`` (the ``ranking`` layer).
    tradeoff : pandas.DataFrame or None
        The boundary calibration's fits (the ``boundary_tradeoff`` layer), with
        ``--boundary-penalty auto``.
    evidence : Evidence or None
        How sure the selection is, with the calibration of its probabilities.
    representation : pandas.DataFrame or None
        With several species planned together: one row per species (the
        ``representation`` layer, :mod:`reserve.representation`).
    survey_next : geopandas.GeoDataFrame or None
        The suggested surveys (the ``survey_next`` layer, :mod:`reserve.surveys`), with
        ``--suggest-surveys``.
    """

    planning_units: gpd.GeoDataFrame
    selected: gpd.GeoDataFrame
    summary: dict[str, Any]
    estimator: Any
    feature_names: list[str]
    cv: Any = None
    gpkg_path: Path | None = None
    map_path: Path | None = None
    csv_path: Path | None = None
    summary_path: Path | None = None
    config: dict[str, Any] = field(default_factory=dict)
    contributions: np.ndarray | None = None
    ranking: pd.DataFrame | None = None
    tradeoff: pd.DataFrame | None = None
    evidence: Any = None
    representation: pd.DataFrame | None = None
    survey_next: gpd.GeoDataFrame | None = None

    def main_features(self, n: int = 3) -> list[str]:
        """The ``n`` features that explain most of the selected cells' scores.

        Features are ordered by ``|contributions|`` (weight times the selected cells' mean
        standardised value), largest first, ties in column order. A feature with a large
        weight on which the selected cells are average, and a feature on which they are
        extreme but that the model ignores, both rank low. Without ``contributions`` the
        absolute weights are used.

        Parameters
        ----------
        n : int
            Number of features.

        Returns
        -------
        list of str
        """
        key = self.contributions if self.contributions is not None else self.estimator.coef_
        order = np.argsort(-np.abs(np.asarray(key, dtype=np.float64)), kind="stable")[:n]
        return [self.feature_names[i] for i in order]


@dataclass(frozen=True)
class FitOutcome:
    """What the fit produced, for :func:`build_result`.

    Attributes
    ----------
    estimator : estimator
        The fitted estimator (fitted on the standardised ``Problem.selection``).
    Z : numpy.ndarray of shape (n_cells, n_features)
        Standardised features of every cell (NaN where a raw value is not finite).
    picked : numpy.ndarray of int
        Selected positions among the fitted rows, best first: the estimator's
        ``selected_``, within the budget (cells or money) whatever the method.
    C : float
        The C used; ``C_source`` says whether it was ``"given"`` or chosen by ``"cv"``.
    cv : reserve.model_selection.CSelection or None
        The cross-validation outcome.
    fit_seconds : float
        Time of the final fit.
    frequency : numpy.ndarray or None
        Bootstrap selection frequency of every cell.
    tradeoff : pandas.DataFrame or None
        The boundary calibration's fits (``--boundary-penalty auto``).
    boundary_penalty : float
        The boundary penalty of the fit (0: none).
    model_choice : estimator or None
        The fit whose cross-validation chose the model, with ``--boundary-penalty auto``
        (``estimator`` is then a refit of that model without one); else None.
    held_out : numpy.ndarray or None
        With ``learn_from="surveyed"``: every cell's score from a fit that did not see its
        label (cross-fitted; NaN for cells not surveyed), for the private-land check. When
        the surveyed private cells do not allow the check: every cell's score, the training
        cells' from refits without their labels (for the calibration).
    training_folds : int
        The refits that scored the training cells out of fold (0: none).
    """

    estimator: Any
    Z: np.ndarray
    picked: np.ndarray
    C: float
    C_source: str
    cv: Any
    fit_seconds: float
    frequency: np.ndarray | None
    tradeoff: pd.DataFrame | None = None
    boundary_penalty: float = 0.0
    model_choice: Any = None
    held_out: np.ndarray | None = None
    training_folds: int = 0


def _scores(problem: Problem, fit: FitOutcome, method: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-species scores (n, S) of every cell with finite features, and one score per cell."""
    Z = fit.Z
    finite = np.isfinite(Z).all(axis=1)
    if not hasattr(fit.estimator, "coef_"):  # a feature map in front of TTK: not linear in Z
        per_species = np.full((len(Z), 1), np.nan)
        per_species[finite, 0] = fit.estimator.decision_function(Z[finite])
        return per_species, per_species[:, 0]
    coef = np.atleast_2d(np.asarray(fit.estimator.coef_, dtype=np.float64))  # (S, d)
    per_species = np.full((len(Z), coef.shape[0]), np.nan)
    per_species[finite] = Z[finite] @ coef.T + np.atleast_1d(fit.estimator.intercept_)
    # one score per cell: the species' own; several species: combined as the method declares
    # (the max or the sum), so that the rank follows what the method selected by
    if not problem.multi:
        return per_species, per_species[:, 0]
    return per_species, capabilities(method).combine_species(per_species)


def _order(
    problem: Problem, fit: FitOutcome, score: np.ndarray
) -> tuple[np.ndarray, np.ndarray, CutoffTies]:
    """The selected cells (locked-in first, by score, then the estimator's order), the rank
    order of every ranked cell (the selected, then the other candidates in the estimator's
    ``candidate_rank_``: a tie's runners-up first, then by score) and the tie at the budget's
    cut, as the estimator broke it (``cutoff_ties_``, :mod:`reserve.solvers.ties`)."""
    rows = problem.rows
    cand_rows = rows[fit.estimator.candidates_]
    sel_rows = rows[fit.picked] if problem.k_free else np.zeros(0, dtype=np.int64)
    in_rows = np.flatnonzero(problem.locked_in)
    in_rows = in_rows[np.lexsort((in_rows, -np.nan_to_num(score[in_rows], nan=-np.inf)))]
    ties = CutoffTies()
    if sel_rows.size:  # cells left to choose: the estimator's cut (none with only locked-in)
        ties = getattr(fit.estimator, "cutoff_ties_", ties)
    rest = np.setdiff1d(cand_rows, sel_rows)
    rank = getattr(fit.estimator, "candidate_rank_", None)
    if rank is not None:  # the estimator's order: the tie's runners-up, then by score
        order_of = np.empty(len(problem.X), dtype=np.int64)
        order_of[cand_rows] = rank
        rest = rest[np.argsort(order_of[rest], kind="stable")]
    else:
        rest = rest[np.lexsort((rest, -score[rest]))]
    sel_rows = np.concatenate([in_rows, sel_rows]).astype(np.int64)
    return sel_rows, np.concatenate([sel_rows, rest]), ties


def _tables(
    problem: Problem, opts: SelectOptions, fit: FitOutcome, method: str
) -> tuple[gpd.GeoDataFrame, gpd.GeoDataFrame, pd.DataFrame, np.ndarray, CutoffTies]:
    """The scored planning units, the selected cells, the ranking, the selected rows and the
    tie at the budget's cut."""
    units, features = problem.units, problem.features
    per_species, score = _scores(problem, fit, method)
    sel_rows, order, ties = _order(problem, fit, score)
    rank = np.zeros(len(units), dtype=np.int64)
    rank[order] = np.arange(1, order.size + 1)
    selected = np.zeros(len(units), dtype=bool)
    selected[sel_rows] = True
    added = ("score", "rank", "selected", "locked_in", "selection_frequency")
    fixed = [
        c
        for c in units.columns
        if c not in features and c != units.geometry.name and c not in added
    ]
    table = units[fixed].copy()
    table["locked_out"] = problem.locked_out
    table["locked_in"] = problem.locked_in
    table["score"] = score
    table["rank"] = rank
    table["selected"] = selected
    if fit.frequency is not None:
        table["selection_frequency"] = fit.frequency
    score_cols = [f"score__{sl}" for sl in problem.slugs] if problem.multi else []
    for j, col in enumerate(score_cols):
        table[col] = per_species[:, j]
    result_units = gpd.GeoDataFrame(
        pd.concat([table, units[features]], axis=1), geometry=units.geometry, crs=units.crs
    )
    cost_col = [opts.cost_column] if opts.cost_column is not None else []
    freq_col = ["selection_frequency"] if fit.frequency is not None else []
    # the extra columns only when used, so a plain run's selected layer is as before
    extra = cost_col + freq_col + (["locked_in"] if problem.n_locked_in else [])
    sel = result_units.iloc[sel_rows].copy()
    cols = [
        "rank",
        "cell_id",
        "score",
        *score_cols,
        *extra,
        "role",
        "label",
        *features,
        sel.geometry.name,
    ]
    sel = sel[cols].reset_index(drop=True)
    ranking = pd.DataFrame(
        result_units.iloc[order][
            ["rank", "cell_id", "score", *score_cols, "selected", "locked_in", *cost_col, *freq_col]
        ]
    ).reset_index(drop=True)
    if problem.cost is not None:
        # what buying down the ranking would cost: the runners-up priced for the planner
        ranking.insert(
            ranking.columns.get_loc(opts.cost_column) + 1,
            "cumulative_cost",
            np.cumsum(problem.cost[order]),
        )
    return result_units, sel, ranking, sel_rows, ties


#: Columns :func:`_with_novelty` adds to the three tables (see :mod:`reserve.novelty`).
NOVELTY_COLUMNS = ("mess", "novel", "mess_variable")


def _with_novelty(
    problem: Problem,
    units: gpd.GeoDataFrame,
    sel: gpd.GeoDataFrame,
    ranking: pd.DataFrame,
    sel_rows: np.ndarray,
) -> tuple[gpd.GeoDataFrame, gpd.GeoDataFrame, pd.DataFrame, dict[str, int]]:
    """The tables with ``mess``, ``novel`` and ``mess_variable``, and the summary's counts.

    ``planning_units`` takes them before the features, ``selected`` before ``role`` and
    ``ranking`` at its end; a column of those names in the input (a ``reserve.gpkg`` read
    back) is replaced.
    """
    n = len(problem.units)
    value = problem.mess if problem.mess is not None else np.full(n, np.nan)
    name = problem.mess_variable if problem.mess_variable is not None else np.full(n, "")
    novel, kept_out = problem.novel, problem.novel_out
    kept_out = np.zeros(n, dtype=bool) if kept_out is None else kept_out
    columns = {"mess": value, "novel": novel, "mess_variable": name.astype(str)}
    units = units.drop(columns=[c for c in NOVELTY_COLUMNS if c in units.columns])
    at = units.columns.get_loc(problem.features[0])
    for i, (col, values) in enumerate(columns.items()):
        units.insert(at + i, col, values)
    at = sel.columns.get_loc("role")
    for i, (col, values) in enumerate(columns.items()):
        sel.insert(at + i, col, values[sel_rows])
    pos = pd.Index(problem.units["cell_id"]).get_indexer(ranking["cell_id"])
    ranking = ranking.assign(**{col: values[pos] for col, values in columns.items()})
    counts = {
        "n_candidates_novel": int((novel & (problem.candidate | kept_out)).sum()),
        "n_selected_novel": int(novel[sel_rows].sum()),
        "n_novel_excluded": int(kept_out.sum()),
    }
    return units, sel, ranking, counts


#: Columns :func:`_with_location` adds to the ``selected`` and ``ranking`` tables.
LOCATION_COLUMNS = ("longitude", "latitude", "area_ha")


def _with_location(
    units: gpd.GeoDataFrame, sel: gpd.GeoDataFrame, ranking: pd.DataFrame, sel_rows: np.ndarray
) -> tuple[gpd.GeoDataFrame, pd.DataFrame]:
    """``selected`` with :data:`LOCATION_COLUMNS` after ``cell_id``; ``ranking`` at its end."""
    where = cell_locations(units.geometry.to_numpy(), units.crs)
    sel = sel.drop(columns=[c for c in LOCATION_COLUMNS if c in sel.columns])
    at = sel.columns.get_loc("cell_id") + 1
    for i, col in enumerate(LOCATION_COLUMNS):
        sel.insert(at + i, col, where[col].to_numpy()[sel_rows])
    pos = pd.Index(units["cell_id"]).get_indexer(ranking["cell_id"])
    ranking = ranking.assign(**{c: where[c].to_numpy()[pos] for c in LOCATION_COLUMNS})
    return sel, ranking


def _nan_or(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for pkg in (
        "reserve",
        "numpy",
        "scipy",
        "scikit-learn",
        "geopandas",
        "pyogrio",
        "shapely",
        "folium",
        "clarabel",
        "pyscipopt",
    ):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = ""
    return out


def _crs_text(crs: Any) -> str:
    """``EPSG:<code>`` when the CRS has one, else its definition as read (WKT)."""
    epsg = crs.to_epsg()
    return f"EPSG:{epsg}" if epsg else str(crs.srs)


def _solver_summary(opts: SelectOptions, fit: FitOutcome) -> dict[str, Any]:
    est, cv = fit.estimator, fit.cv
    n_iter = getattr(est, "n_iter_", None)
    return {
        "method": opts.method,
        "c": fit.C,
        "c_source": fit.C_source,
        "c_cv_scores": ""
        if cv is None
        else json.dumps({f"{c:g}": _nan_or(s) for c, s in zip(cv.Cs, cv.mean_scores, strict=True)}),
        "solver_status": str(getattr(est, "status_", "fitted")),
        "objective": _nan_or(getattr(est, "objective_", np.nan)),
        "bound": _nan_or(getattr(est, "bound_", np.nan)),
        "gap": _nan_or(getattr(est, "gap_", np.nan)),
        "n_iter": int(n_iter) if n_iter is not None else -1,
        "fit_seconds": round(fit.fit_seconds, 3),
        "runtime_seconds": np.nan,  # set by the caller, after the outputs are written
        "seed": opts.seed,
        **_model_summary(opts, est if fit.model_choice is None else fit.model_choice),
    }


def _tied_at_cutoff(problem: Problem, fit: FitOutcome, score: np.ndarray) -> int:
    """Candidates whose score ties (:func:`reserve.solvers.ties.tie_width`) the last chosen
    cell's: the budget's cut falls inside that group, and the order within it is the
    tie-break's, not the model's."""
    if not problem.k_free or fit.picked.size == 0 or fit.boundary_penalty > 0:
        return 0  # nothing to cut, or a set chosen with the penalty rather than a cut
    cand = score[problem.rows[fit.estimator.candidates_]]
    last = score[problem.rows[fit.picked[-1]]]
    return int((np.abs(cand - last) <= tie_width(cand)).sum())


#: A chosen cell surveyed without a detection is flagged once its checklists would have
#: detected an occupied cell this often (by the calibrated detection per checklist).
MISS_CHANCE = 0.1


@dataclass(frozen=True)
class Evidence:
    """How sure the selection is: the checks, the verdict and the calibrated probabilities.

    Attributes
    ----------
    check : reserve.confidence.PrivateCheck
    cv : reserve.confidence.CrossValidation
    verdict : reserve.signal.Verdict
    calibration : reserve.occupancy.LinkAverage
    calibration_source : str
        The cells the probabilities were calibrated on, in words.
    probability : numpy.ndarray
        Every cell's probability of presence given its own survey (NaN: no score).
    expected : tuple of float
        Expected occupied cells among the chosen ones and its interval.
    expected_blind : float
        Expected occupied cells of a blind pick: the locked-in cells, and as many cells as
        the others drawn at random from the candidates.
    many_checklists : int
        Checklists without a detection that flag a cell (``surveyed_no_detection``).
    flags : dict of str to numpy.ndarray
        Per cell, ``known_detection`` and ``surveyed_no_detection``.
    """

    check: PrivateCheck
    cv: CrossValidation
    verdict: Verdict
    calibration: LinkAverage
    calibration_source: str
    probability: np.ndarray
    expected: tuple[float, float, float]
    expected_blind: float
    many_checklists: int
    flags: dict[str, np.ndarray]


def survey_visits(problem: Problem) -> np.ndarray:
    """Each cell's checklists where its label is known (0: unsurveyed, or label unknown)."""
    units = problem.units
    if "n_checklists" not in units.columns:
        return np.zeros(len(units))
    n = pd.to_numeric(units["n_checklists"], errors="coerce").to_numpy(dtype=np.float64)
    return np.where(np.isin(problem.label, (0, 1)), np.nan_to_num(n, nan=0.0), 0.0)


def _cross_validation(problem: Problem, fit: FitOutcome) -> CrossValidation:
    """The chosen model's held-out precision over the folds, with its interval."""
    train = problem.train
    blind = float((problem.label[train] == 1).mean()) if train.any() else float("nan")
    est = fit.model_choice if fit.model_choice is not None else fit.estimator
    res = getattr(est, "cv_results_", None)
    if res is not None and "rank_test_score" in res:
        i = int(np.flatnonzero(res["rank_test_score"] == 1)[0])
        splits = np.array([res[key][i] for key in res if key.startswith("split")], dtype=float)
        folds = max(splits.size // max(int(getattr(est, "n_repeats", 1)), 1), 2)
        return cv_interval(splits, 1.0 / (folds - 1), blind)
    if fit.cv is not None:
        i = int(np.flatnonzero(np.asarray(fit.cv.Cs) == fit.C)[0])
        return cv_interval(fit.cv.scores[i], 1.0 / (SELECT_DEFAULTS.cv_folds - 1), blind)
    return CrossValidation(blind=blind)


def _private_check(
    problem: Problem,
    score: np.ndarray,
    visits: np.ndarray,
    surveyed: np.ndarray,
    n_chosen: int,
    seed: int | None,
) -> PrivateCheck:
    """The private-land check of the ranking (:func:`reserve.confidence.private_land_check`)
    on the ``surveyed`` candidates."""
    if problem.multi:
        return PrivateCheck(False, "not computed for several species at once")
    if not surveyed.any():
        return PrivateCheck(False, "not available: no candidate cell was surveyed")
    share = min(max(n_chosen, 1) / max(int(problem.candidate.sum()), 1), 1.0)
    return private_land_check(
        score[surveyed], problem.label[surveyed], visits[surveyed], share, seed=seed
    )


def _calibrate(
    problem: Problem,
    score: np.ndarray,
    visits: np.ndarray,
    surveyed: np.ndarray,
    check: PrivateCheck,
    slope: bool,
    training_folds: int = 0,
) -> tuple[LinkAverage, str]:
    """The occupancy calibration, on the surveyed private cells when the check allows it."""
    if check.available:
        cells = surveyed
        locked = int((cells & problem.locked_out).sum())
        note = f" ({locked} of them locked out of the purchase)" if locked else ""
        source = f"the {int(cells.sum())} surveyed private cells{note}, scored out of sample"
    elif training_folds:
        learned = problem.learned if problem.learned is not None else False
        cells = (problem.train | learned) & np.isfinite(score)
        source = (
            f"the {int(cells.sum())} labelled cells, each scored by one of {training_folds} "
            "refits that did not see its label (too few surveyed private cells to calibrate on)"
        )
    else:
        cells = problem.train & np.isfinite(score)
        source = (
            f"the {int(cells.sum())} training cells, scored in sample (optimistic: no "
            "surveyed private cells to calibrate on)"
        )
    ranked = problem.candidate & np.isfinite(score)  # the percentiles of the rank links
    cal = LinkAverage(slope=slope)
    cal.fit(score[cells], visits[cells], problem.label[cells] == 1, reference=score[ranked])
    if slope:
        links = ", ".join(
            f"{m.link} {w:.2f}" for m, w in zip(cal.members_, cal.weights_, strict=True)
        )
        source += f"; links stacked by held-out likelihood: {links}"
    else:
        source += "; the model ranks nothing, so every probability is the occupancy prevalence"
    return cal, source


def _blind_expected(problem: Problem, probability: np.ndarray, sel_rows: np.ndarray) -> float:
    """Expected occupied cells of a blind pick: the locked-in cells as chosen, the others
    drawn at random from the candidates (their mean probability each)."""
    free = problem.candidate & np.isfinite(probability)
    if not free.any():
        return float("nan")
    locked = problem.locked_in[sel_rows]
    kept = probability[sel_rows[locked]]
    return float(np.nansum(kept) + probability[free].mean() * int((~locked).sum()))


def assess_evidence(
    problem: Problem,
    opts: SelectOptions,
    fit: FitOutcome,
    score: np.ndarray,
    sel_rows: np.ndarray,
    ties: CutoffTies,
) -> Evidence:
    """The private-land check, cross-validation, verdict and calibrated probabilities.

    Parameters
    ----------
    problem : reserve.design.Problem
    opts : reserve.config.SelectOptions
    fit : FitOutcome
    score : numpy.ndarray of shape (n_cells,)
        Every cell's score (NaN: none).
    sel_rows : numpy.ndarray of int
        The chosen cells.
    ties : reserve.signal.CutoffTies
        The tie at the budget's cut.

    Returns
    -------
    Evidence
    """
    check_score = score if fit.held_out is None else fit.held_out
    if fit.held_out is not None:  # a locked-out cell is never fitted: the final score is held out
        check_score = np.where(problem.locked_out, score, check_score)
    visits = survey_visits(problem)
    surveyed = problem.private_land & (visits >= 1) & np.isfinite(check_score)
    check = _private_check(problem, check_score, visits, surveyed, int(problem.k_free), opts.seed)
    cv = _cross_validation(problem, fit)
    train = problem.train
    n_pos = int((problem.label[train] == 1).sum())
    verdict = assess_signal(
        ties,
        int(problem.k_free),
        check,
        cv,
        int(train.sum()),
        n_pos,
        opts.seed,
        learned=problem.learned is not None,
    )
    cal, source = _calibrate(
        problem,
        check_score,
        visits,
        surveyed,
        check,
        slope=verdict.signal != "none",
        training_folds=fit.training_folds,
    )
    detected = problem.label == 1
    finite = np.isfinite(score)
    probability = np.full(score.shape, np.nan)
    probability[finite] = cal.posterior(score[finite], visits[finite], detected[finite])
    expected = cal.expected_count(
        score[sel_rows], visits[sel_rows], detected[sel_rows], LEVEL, opts.seed
    )
    q = max(1.0 - cal.detection_, 1e-12)
    many = max(int(np.ceil(np.log(MISS_CHANCE) / np.log(q))), 1) if q < 1 else 10**9
    flags = {
        "known_detection": detected,
        "surveyed_no_detection": (problem.label == 0) & (visits >= many),
    }
    blind = _blind_expected(problem, probability, sel_rows)
    return Evidence(check, cv, verdict, cal, source, probability, expected, blind, many, flags)


def expected_among(
    evidence: Evidence, problem: Problem, score: np.ndarray, rows: np.ndarray, seed: int | None
) -> tuple[float, float, float]:
    """Expected occupied cells among ``rows`` and its interval, by the run's calibration.

    Parameters
    ----------
    evidence : Evidence
        The run's evidence (its calibration).
    problem : reserve.design.Problem
        The problem of the run (labels and checklists of every cell).
    score : numpy.ndarray of shape (n_cells,)
        Every cell's score.
    rows : numpy.ndarray of int
        The cells counted.
    seed : int or None
        Seed of the calibration's draws.

    Returns
    -------
    (float, float, float)
        :meth:`reserve.occupancy.LinkAverage.expected_count` at :data:`LEVEL`.
    """
    visits = survey_visits(problem)
    detected = problem.label == 1
    return evidence.calibration.expected_count(
        score[rows], visits[rows], detected[rows], LEVEL, seed
    )


def evidence_columns(evidence: Evidence) -> dict[str, np.ndarray]:
    """Per cell: ``probability``, ``known_detection`` and ``surveyed_no_detection``."""
    return {"probability": evidence.probability, **evidence.flags}


def evidence_summary(
    evidence: Evidence, sel_rows: np.ndarray, columns: Mapping[str, np.ndarray]
) -> dict[str, Any]:
    """The ``run_summary`` keys of the evidence (``check_*``, ``cv_*``, ``signal*``,
    ``expected_occupied*``, ``n_selected_known_detection``, ...)."""
    c, cv, v = evidence.check, evidence.cv, evidence.verdict
    out: dict[str, Any] = {
        "check_available": c.available,
        "check_note": c.reason,
        "check_strata": "half-octaves of checklists per cell",
        "check_n_surveyed": c.n_surveyed,
        "check_n_detected": c.n_detected,
    }
    out.update(
        {f"check_{key}": value for key, value in asdict(c).items() if isinstance(value, float)}
    )  # the figures and their interval ends
    out.update(
        {
            "cv_precision_low": cv.low,
            "cv_precision_high": cv.high,
            "cv_n_splits": cv.n_splits,
            "cv_blind": cv.blind,
            "interval_level": LEVEL,
            "signal": v.signal,
            "signal_evidence": v.evidence,
            "signal_reason": v.reason,
            "signal_note": v.note,
            "expected_occupied": evidence.expected[0],
            "expected_occupied_low": evidence.expected[1],
            "expected_occupied_high": evidence.expected[2],
            "expected_occupied_blind": evidence.expected_blind,
            "calibration_source": evidence.calibration_source,
            "detection_per_checklist": evidence.calibration.detection_,
            "no_detection_checklists": evidence.many_checklists,
            "n_selected_known_detection": int(columns["known_detection"][sel_rows].sum()),
            "n_selected_no_detection": int(columns["surveyed_no_detection"][sel_rows].sum()),
        }
    )
    return out


def _model_summary(opts: SelectOptions, est: Any) -> dict[str, Any]:
    """What was learned from the features: the model asked for and chosen, and the CV."""
    best = getattr(est, "best_params_", None)
    if best is None:
        return {
            "model": opts.model,
            "model_fitted": "linear",
            "cv_precision": np.nan,
            "cv_note": "",
        }
    res = est.cv_results_
    i = int(np.flatnonzero(res["rank_test_score"] == 1)[0])
    members = getattr(est, "members_", None) or ((best["model"], None, None),)
    return {
        "model": opts.model,
        "model_fitted": "+".join(m for m, _, _ in members),
        "cv_precision": _nan_or(res["mean_test_score"][i]),
        "cv_note": est.cv_note_,
    }


def _summary(
    problem: Problem,
    opts: SelectOptions,
    fit: FitOutcome,
    sel_rows: np.ndarray,
    inputs: Mapping[str, str],
    config: Mapping[str, Any],
) -> dict[str, Any]:
    cost, train = problem.cost, problem.train
    summary: dict[str, Any] = {
        "budget": opts.budget,
        "budget_unit": "cells" if not opts.money else f"cost ({opts.cost_column})",
        "cost_column": opts.cost_column or "",
        "n_selected": int(sel_rows.size),
        "total_cost": float(cost[sel_rows].sum()) if cost is not None else float("nan"),
        **_solver_summary(opts, fit),
        "n_train": int(train.sum()),
        "n_train_positive": int((train & (problem.label == 1)).sum()),
        "learn_from": opts.learn_from,
        "n_learned": 0 if problem.learned is None else int(problem.learned.sum()),
        "n_candidates": int(problem.candidate.sum()),
        "n_locked_in": problem.n_locked_in,
        "n_locked_out": int(problem.locked_out.sum()),
        "effective_budget": problem.k_free if cost is None else problem.free_budget,
        "bootstrap": opts.bootstrap,
        "n_cells": len(problem.units),
        "n_features": len(problem.features),
        "main_features": "",
        "standardisation": "mean 0, sd 1 on train + candidate cells",
        "crs": _crs_text(problem.units.crs),
        **inputs,
        "config": json.dumps(dict(config), sort_keys=True, default=str),
    }
    summary.update({f"version_{k.replace('-', '_')}": v for k, v in _versions().items()})
    return summary


def _expected_precision(
    train_scores: np.ndarray, train_labels: np.ndarray, chosen_scores: np.ndarray
) -> float:
    """Mean Platt-calibrated probability of presence over the chosen cells.

    A one-feature logistic regression of the training cells' labels on their scores maps a
    score to a probability of detection; its mean over the selection is the share of the
    chosen cells expected to hold the species (an in-sample calibration: optimistic when the
    training cells are few).
    """
    from sklearn.linear_model import LogisticRegression

    if chosen_scores.size == 0:
        return float("nan")
    lr = LogisticRegression(C=1e4).fit(train_scores[:, None], train_labels.astype(int))
    return float(lr.predict_proba(chosen_scores[:, None])[:, 1].mean())


def _species_summary(problem: Problem, units: pd.DataFrame, sel_rows: np.ndarray) -> dict:
    """Per-species training positives and expected precision (several species)."""
    out: dict[str, Any] = {}
    presences = 0.0
    train, labels = problem.train, problem.labels
    if labels is None:
        return out
    for j, sl in enumerate(problem.slugs):
        scores = units[f"score__{sl}"].to_numpy()
        ep = _expected_precision(scores[train], labels[train, j], scores[sel_rows])
        out[f"n_train_positive__{sl}"] = int((labels[train, j] == 1).sum())
        out[f"expected_precision__{sl}"] = ep
        presences += ep * sel_rows.size
    out["expected_presences"] = presences
    return out


def patch_report(geometry: np.ndarray, sel_rows: np.ndarray) -> tuple[np.ndarray, dict]:
    """Each cell's patch (1 = the largest; 0 unselected) and the summary's patch figures.

    Patches join selected cells that share an edge (rook neighbours); the boundary length is
    Marxan's (:mod:`reserve.adjacency`, edge factor :data:`reserve.adjacency.EDGE_FACTOR`).
    Cells that are not a regular grid have no patches: every ``patch_id`` is -1 and the
    figures are NaN.
    """
    mask = np.zeros(geometry.shape[0], dtype=bool)
    mask[sel_rows] = True
    nan = float("nan")
    try:
        adj = grid_adjacency(geometry)
    except InvalidInputError:
        return np.full(mask.size, -1, dtype=np.int64), {
            "n_patches": -1,
            "largest_patch_cells": -1,
            "boundary_length": nan,
            "edge_factor": EDGE_FACTOR,
        }
    patch = patch_labels(adj, mask)
    sizes = np.bincount(patch)[1:]
    return patch, {
        "n_patches": int(sizes.size),
        "largest_patch_cells": int(sizes.max(initial=0)),
        "boundary_length": boundary_length(adj, mask),
        "edge_factor": EDGE_FACTOR,
    }


def _add_columns(
    units: pd.DataFrame, sel: pd.DataFrame, ranking: pd.DataFrame, columns: Mapping[str, np.ndarray]
) -> None:
    """Put each per-cell column after ``score`` in the three tables (rows by ``cell_id``)."""
    ids = pd.Index(units["cell_id"])
    for table in (units, sel, ranking):
        at = table.columns.get_loc("score") + 1
        rows = None if table is units else ids.get_indexer(table["cell_id"])
        for name, values in reversed(list(columns.items())):
            table.insert(at, name, values if rows is None else values[rows])


def build_result(
    problem: Problem,
    opts: SelectOptions,
    fit: FitOutcome,
    *,
    inputs: Mapping[str, str],
    config: Mapping[str, Any],
) -> SelectionResult:
    """The :class:`SelectionResult` of a fitted problem.

    Parameters
    ----------
    problem : reserve.design.Problem
        The problem that was fitted.
    opts : reserve.config.SelectOptions
        The run's options.
    fit : FitOutcome
        The fitted estimator, standardised features, selection, C and bootstrap frequencies.
    inputs : mapping
        ``cells_path``, ``cells_sha256``, ``public_path``, ``outline_path`` of the summary.
    config : mapping
        The effective configuration recorded in the summary.

    Returns
    -------
    SelectionResult
    """
    result_units, sel, ranking, sel_rows, ties = _tables(problem, opts, fit, opts.method)
    evidence = assess_evidence(problem, opts, fit, result_units["score"].to_numpy(), sel_rows, ties)
    columns = evidence_columns(evidence)
    _add_columns(result_units, sel, ranking, columns)
    config = {**config, "C_searched": list(SELECT_DEFAULTS.Cs) if opts.C == "cv" else None}
    summary = _summary(problem, opts, fit, sel_rows, inputs, config)
    patch, patch_summary = patch_report(problem.units.geometry.to_numpy(), sel_rows)
    summary.update(patch_summary)
    summary["boundary_penalty"] = fit.boundary_penalty
    summary["boundary_penalty_source"] = "auto" if fit.tradeoff is not None else "given"
    if fit.tradeoff is not None:
        summary["boundary_tradeoff"] = fit.tradeoff.to_json(orient="records")
    result_units.insert(result_units.columns.get_loc("selected") + 1, "patch_id", patch)
    sel.insert(1, "patch_id", patch[sel_rows])
    result_units, sel, ranking, novelty = _with_novelty(
        problem, result_units, sel, ranking, sel_rows
    )
    summary.update(novelty, exclude_novel=opts.exclude_novel)
    sel, ranking = _with_location(problem.units, sel, ranking, sel_rows)
    if hasattr(fit.estimator, "coef_"):
        # several species: the sum over species of each species' contribution
        coef = np.atleast_2d(np.asarray(fit.estimator.coef_, dtype=np.float64))
        contributions = fit.Z[sel_rows].mean(axis=0) * coef.sum(axis=0)
    else:  # not linear: how far the selected cells sit from an average cell, in sd
        contributions = np.nan_to_num(fit.Z[sel_rows].mean(axis=0)) if sel_rows.size else None
    if contributions is not None and problem.effort:  # effort is no reason a cell was chosen
        contributions = np.where(
            np.isin(problem.features, list(problem.effort)), 0.0, contributions
        )
    result = SelectionResult(
        planning_units=result_units,
        selected=sel,
        summary=summary,
        estimator=fit.estimator,
        feature_names=problem.features,
        cv=fit.cv,
        config=config,
        contributions=contributions,
        ranking=ranking,
        tradeoff=fit.tradeoff,
        evidence=evidence,
    )
    summary["main_features"] = ", ".join(result.main_features())
    summary["n_tied_at_cutoff"] = _tied_at_cutoff(problem, fit, result_units["score"].to_numpy())
    summary.update(evidence_summary(evidence, sel_rows, columns))
    summary["n_tied_drawn"] = ties.n_drawn
    if problem.species:
        summary["species"] = ", ".join(problem.species)
    if problem.multi:
        summary.update(_species_summary(problem, result_units, sel_rows))
    return result
