"""Choose the reserve: planning units in, ``k`` ranked cells (GeoPackage, map, summary) out.

:func:`select_reserve` is the one place that runs the sequence:

1. check the options (:class:`reserve.config.SelectOptions`);
2. check the output paths (nothing is created yet), then read the planning units into one
   :class:`reserve.design.Problem` (every refusal of the input there);
3. choose ``C`` (given, or by the paper's cross-validation on the training cells);
4. standardise the problem's features on the fitted (``train`` and ``candidate``) cells
   (:func:`standardised`) and fit :func:`reserve.solvers.make_estimator`'s estimator on the
   problem object, ``est.fit(problem.selection)``; its budget (cells or money) decides the
   selection whatever the method;
5. with ``bootstrap=N``, refit N :func:`sklearn.base.clone` s of the estimator on resampled
   training cells (the standardisation stays the whole problem's);
6. build the tables (:mod:`reserve.result`); write them and the map to temporary files
   beside their targets and rename both at the end (:mod:`reserve.run_files`, which also
   checks the output paths and the map's polygon files first): a refused or killed run
   changes nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import has_fit_parameter

from reserve.bootstrap import selection_frequency
from reserve.calibrate import calibrate_boundary
from reserve.confidence import checkable
from reserve.config import (
    CONFIG_KEYS,
    SELECT_DEFAULTS,
    SELECT_METHODS,
    SPECIES_LABEL_PREFIX,
    SelectOptions,
    load_config,
    resolve_config,
    species_slug,
)
from reserve.design import (
    REQUIRED_COLUMNS,
    Problem,
    build_problem,
    file_sha256,
    locate_cells,
    read_planning_units,
)
from reserve.errors import InvalidInputError
from reserve.export import CSV_NAME, SUMMARY_NAME, identified_crs
from reserve.fork import Standby
from reserve.methods import capabilities
from reserve.representation import SpeciesFit, combine_results, plan_representation
from reserve.result import FitOutcome, SelectionResult, build_result, survey_visits
from reserve.run_files import (
    check_decoration,
    check_outputs,
    default_region_cached,
    ingest_species,
    map_polygons,
    one_species_options,
    write_outputs,
)
from reserve.solvers import SelectionProblem, describe_members, make_estimator
from reserve.solvers.registry import chosen_C, fixed_model
from reserve.surveys import (
    SURVEY_CHECKLISTS,
    SurveyResults,
    apply_surveys,
    read_surveys,
    settle_selection,
    suggest_surveys,
    survey_detection,
)

__all__ = [
    "CONFIG_KEYS",
    "METHODS",
    "REQUIRED_COLUMNS",
    "SelectOptions",
    "SelectionResult",
    "label_column",
    "load_config",
    "read_planning_units",
    "reselect",
    "resolve_config",
    "run_selection",
    "select_reserve",
    "unlearned_scores",
]

METHODS = SELECT_METHODS  #: Methods accepted by ``method=`` / ``--method``.


def _estimator(opts: SelectOptions, problem: Problem, C: float) -> Any:
    """A fresh estimator of ``opts.method`` for ``problem`` (its budget: cells or money)."""
    n_species = problem.selection.n_species
    model = opts.effective_model
    Cs = None if model == "linear" or opts.C in (None, "cv") else (float(opts.C),)
    knapsack = problem.selection.money and capabilities(opts.method).money_budget
    budget = problem.selection.budget.budget if knapsack else None
    effort = problem.selection.effort_columns or None
    return make_estimator(
        opts.method,
        k=problem.k_fit,
        C=C,
        budget=budget,
        n_species=n_species,
        random_state=opts.seed,
        time_limit=opts.time_limit,
        model=model,
        Cs=Cs,
        n_jobs=opts.n_jobs,
        effort_columns=effort,
    )


def standardised(selection: SelectionProblem) -> tuple[StandardScaler, SelectionProblem]:
    """The scaler fitted on the problem's rows, and the problem over the standardised rows.

    The estimator fits the standardised problem; the scaler then standardises every cell
    the fit scores (a cell with a missing feature gets NaN, so no score).
    """
    scaler = StandardScaler().fit(selection.X)
    return scaler, selection.with_X(scaler.transform(selection.X))


def _choose_C(
    opts: SelectOptions, problem: Problem, fitted: SelectionProblem, say: Callable[[str], None]
) -> tuple[float | None, str, Any]:
    """``(C, source, cv)``: the given C, or the cross-validated one.

    With a feature map (``model`` not linear) C is chosen with the map by the estimator
    itself: ``(None, "given", None)`` here, and the fitted estimator reports its C
    (:func:`reserve.solvers.registry.chosen_C`).
    """
    if opts.effective_model != "linear":
        return None, "given", None
    if opts.fixed_C != "cv":
        return float(opts.fixed_C), "given", None
    from reserve.model_selection import select_C

    say(f"choosing C by cross-validation over {list(SELECT_DEFAULTS.Cs)}")
    est0 = make_estimator(
        opts.method, k=problem.k_fit, C=1.0, random_state=opts.seed, time_limit=opts.time_limit
    )
    cv = select_C(
        est0,
        fitted.X,
        fitted.y,
        Cs=SELECT_DEFAULTS.Cs,
        n_repeats=SELECT_DEFAULTS.cv_repeats,
        n_folds=SELECT_DEFAULTS.cv_folds,
        k_fraction=SELECT_DEFAULTS.cv_k_fraction,
        random_state=opts.seed,
        effort_columns=fitted.effort_columns,
    )
    return float(cv.best_C), "cv", cv


def _fit(opts: SelectOptions, problem: Problem, say: Callable[[str], None]) -> FitOutcome:
    """Choose C, fit the estimator, bootstrap; everything the result tables need."""
    scaler, fitted = standardised(problem.selection)
    C, C_source, cv = _choose_C(opts, problem, fitted, say)
    what = f"C={C:g}" if C is not None else f"model {opts.model}"
    say(
        f"fitting {opts.method} (k={problem.k_fit}, {what}) on {int(problem.train.sum())} "
        f"training and {int(problem.candidate.sum())} candidate cells"
    )
    t_fit = time.perf_counter()
    est = _estimator(opts, problem, SELECT_DEFAULTS.C if C is None else C)
    penalty = opts.boundary_penalty
    if problem.boundary is not None and penalty != "auto":
        est.set_params(boundary_penalty=float(penalty))
    progress = {"progress": say} if has_fit_parameter(est, "progress") else {}  # a model choice
    est.fit(fitted, **progress)
    searched = C is None  # the estimator chose C with its feature map
    C, C_source = chosen_C(est, C_source)
    if searched:
        say(f"model {describe_members(est.members_)} ({C_source})")
        if getattr(est, "small_training_note_", ""):
            say(f"model choice: {est.small_training_note_}")
    tradeoff, chooser = None, None
    if penalty == "auto":  # the calibration refits the chosen model: its CV stays the record
        chooser = est
        est, penalty, tradeoff = calibrate_boundary(problem, est, fitted, say)
        say(f"boundary penalty {penalty:.4g} chosen at the knee of the trade-off")
    picked = np.asarray(est.selected_, dtype=np.int64)
    fit_seconds = time.perf_counter() - t_fit
    frequency = selection_frequency(opts, problem, est, fitted, say)
    # every cell's standardised features (non-finite raw values as NaN: those cells get no score)
    X_all = np.where(np.isfinite(problem.X), problem.X, np.nan)
    Z = scaler.transform(X_all)
    held_out, training_folds = _held_out(opts, problem, est, fitted, (Z, X_all), say)
    return FitOutcome(
        estimator=est,
        Z=Z,
        picked=picked,
        C=C,
        C_source=C_source,
        cv=cv,
        fit_seconds=fit_seconds,
        frequency=frequency,
        tradeoff=tradeoff,
        boundary_penalty=float(penalty),
        model_choice=chooser,
        held_out=held_out,
        training_folds=training_folds,
    )


def _held_out(
    opts: SelectOptions,
    problem: Problem,
    est: Any,
    fitted: SelectionProblem,
    features: tuple[np.ndarray, np.ndarray],
    say: Callable[[str], None],
) -> tuple[np.ndarray | None, int]:
    """The scores the private-land check and the calibration read, and the refits that
    scored the labelled cells out of fold (0: none): :func:`training_held_out_scores` when
    the calibration falls back on the labelled cells, else the learned cells' scores without
    their labels (:func:`unlearned_scores`, :func:`cross_fitted_scores`). ``features``:
    every cell's standardised and raw features."""
    Z, X_all = features
    if needs_training_calibration(opts, problem):
        held_out, folds = training_held_out_scores(opts, problem, est, fitted, Z, say)
        if held_out is not None:
            return held_out, folds
    if opts.learn_from == "public" and problem.learned is not None:  # new surveys learned
        return unlearned_scores(problem, est, Z), 0
    return cross_fitted_scores(opts, problem, est, X_all, say), 0


#: Folds of the cross-fitting that scores learned cells without their own labels.
CROSS_FIT_FOLDS = 2


def cross_fitted_scores(
    opts: SelectOptions, problem: Problem, est: Any, X_all: np.ndarray, say: Callable[[str], None]
) -> np.ndarray | None:
    """Every learned cell's score from a refit that did not see its label (else NaN), or None.

    With ``learn_from="surveyed"`` the surveyed private cells are training rows, so the
    private-land check cannot use the final fit's scores of them. They are split into
    :data:`CROSS_FIT_FOLDS` folds (stratified by label, seeded); for each fold the estimator
    is refitted, with the features standardised anew, on the problem without that fold's
    labelled rows (:meth:`~reserve.solvers.SelectionProblem.take`: their candidate rows
    stay) and scores them. The refits keep the chosen feature maps and C (``refit_params``:
    no search each).
    """
    if problem.learned is None or not problem.learned.any():
        return None
    from sklearn.base import clone
    from sklearn.model_selection import StratifiedKFold

    learned = np.flatnonzero(problem.learned)
    labelled_copy = np.arange(len(problem.rows) - learned.size, len(problem.rows))
    base = fixed_model(est)
    held_out = np.full(len(problem.X), np.nan)
    folds = StratifiedKFold(CROSS_FIT_FOLDS, shuffle=True, random_state=opts.seed)
    say(f"cross-fitting {learned.size} surveyed private cells ({CROSS_FIT_FOLDS} refits)")
    for _, fold in folds.split(learned, problem.label[learned]):
        keep = np.setdiff1d(np.arange(len(problem.rows)), labelled_copy[fold])
        scaler, fitted = standardised(problem.selection.take(keep))
        refit = clone(base).fit(fitted)
        cells = learned[fold]
        held_out[cells] = refit.decision_function(scaler.transform(X_all[cells]))
    return held_out


#: Folds of the cross-fitting that scores the training cells for the calibration: as many
#: as AutoTTK's cross-validation (:class:`reserve.solvers.search.TransductiveSplit`).
TRAINING_FOLDS = 3


def needs_training_calibration(opts: SelectOptions, problem: Problem) -> bool:
    """Whether the calibration falls back on the labelled cells, scored out of fold.

    So it does for one species when the surveyed private cells (``problem.private_land``)
    do not allow the private-land check (:func:`reserve.confidence.checkable`), unless the
    method is an exact solve under a time limit (its refits would each take the limit, and
    stop by the clock).
    """
    if problem.multi or capabilities(opts.method).time_limit:
        return False
    visits = survey_visits(problem)
    surveyed = problem.private_land & (visits >= 1)
    return not checkable(problem.label[surveyed], visits[surveyed])


def on_scale_of(scores: np.ndarray, own: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``scores`` of a refit put on the final fit's scale.

    Both fits score the same candidates (``own``: the refit's scores of them, ``reference``:
    the final fit's); the affine map that best matches their sorted scores (a least-squares
    line through the quantile-quantile plot) carries the refit's ``scores`` over. A refit
    that ranks every candidate alike leaves ``scores`` as they are.

    Examples
    --------
    >>> on_scale_of(np.array([1.0]), np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, 5.0]))
    array([3.])
    """
    own, reference = np.sort(own), np.sort(reference)
    if own.size < 2 or np.ptp(own) == 0.0:
        return np.asarray(scores, dtype=np.float64)
    slope, intercept = np.polyfit(own, reference, 1)
    return slope * np.asarray(scores, dtype=np.float64) + intercept


def training_held_out_scores(
    opts: SelectOptions,
    problem: Problem,
    est: Any,
    fitted: SelectionProblem,
    Z: np.ndarray,
    say: Callable[[str], None],
) -> tuple[np.ndarray | None, int]:
    """Every cell's score, each labelled cell's from a refit that did not see its label.

    Without surveyed candidates to calibrate on, the calibration reads the labelled cells
    (the training cells, and the surveyed candidates the fit learned from); the final fit's
    scores of them are in sample (the fit learned their labels), so the calibrated
    probabilities would be overconfident. The labelled rows are split as AutoTTK's
    cross-validation splits them (:class:`reserve.solvers.search.TransductiveSplit`,
    :data:`TRAINING_FOLDS` stratified, seeded folds, fewer when a class has fewer rows): each
    fold's refit (the chosen feature maps and C, :func:`reserve.solvers.registry.fixed_model`:
    no search) learns from the other folds' rows with the fold's rows as its candidates and
    the fold's budget, as the model was judged. It scores the fold's cells at the run's
    standard effort, as candidates are scored, and the run's candidates too: its scores are
    put on the final fit's scale by :func:`on_scale_of`. Other cells keep the final fit's
    scores.

    Parameters
    ----------
    opts : reserve.config.SelectOptions
    problem : reserve.design.Problem
    est : estimator
        The final fit.
    fitted : reserve.solvers.SelectionProblem
        The standardised problem the final fit learned from.
    Z : numpy.ndarray
        Every cell's features as the final fit standardised them (NaN: no score).
    say : callable

    Returns
    -------
    (numpy.ndarray or None, int)
        The scores (None when a class has fewer than 2 labelled rows) and the folds.
    """
    from sklearn.base import clone

    from reserve.solvers.search import TransductiveSplit

    y = np.asarray(fitted.y)
    lab, cand = np.flatnonzero(y != -1), np.flatnonzero(y == -1)
    splitter = TransductiveSplit(TRAINING_FOLDS, k=problem.k_fit, random_state=opts.seed)
    folds, _ = splitter.split(y)
    if not folds:
        return None, 0
    finite = np.isfinite(Z).all(axis=1)
    held_out = np.full(len(Z), np.nan)
    held_out[finite] = est.decision_function(Z[finite])
    reference = held_out[problem.rows[cand]]
    cols = np.asarray(fitted.effort_columns or (), dtype=np.int64)
    base = fixed_model(est)
    # a fold's fit is a plain cell budget over its rows, as in AutoTTK's cross-validation
    fold_params = {"budget": None, "boundary_penalty": 0.0}
    fold_params = {key: v for key, v in fold_params.items() if key in base.get_params()}
    say(f"scoring {lab.size} labelled cells out of fold for the calibration ({len(folds)} refits)")
    for fold in folds:
        Xf, yf = splitter.rows(fitted.X[lab], y[lab], fold)
        if cols.size and cand.size:  # held-out rows at the standard effort of the candidates
            Xf[np.ix_(yf == -1, cols)] = fitted.X[cand[0], cols]
        refit = clone(base).set_params(**{**fold_params, "k": fold.k}).fit(Xf, yf)
        scores = refit.decision_function(Xf[yf == -1])
        own = refit.decision_function(fitted.X[cand])
        held_out[problem.rows[lab[fold.held]]] = on_scale_of(scores, own, reference)
    return held_out, len(folds)


def _planned(
    opts: SelectOptions,
    units: Any,
    problem: Problem,
    inputs: Mapping[str, str],
    config: Mapping[str, Any],
    say: Callable[[str], None],
) -> SelectionResult:
    """Several species: each species' own single-species fit, then one plan over their
    calibrated probabilities (:mod:`reserve.representation`)."""
    fits = []
    for name in opts.species or ():
        one = opts.for_species(name)
        own = build_problem(units, one, problem.source)
        say(f"{name}:")
        fit = _fit(one, own, say)
        result = build_result(own, one, fit, inputs=inputs, config=one.recorded(None))
        fits.append(SpeciesFit(name, own, result))
    plan_in, plan, warnings = plan_representation(problem, opts, fits, say)
    result = combine_results(problem, opts, fits, plan_in, plan, warnings)
    result.summary["config"] = json.dumps(dict(config), sort_keys=True, default=str)
    result.config = dict(config)
    return result


def unlearned_scores(problem: Problem, est: Any, Z: np.ndarray) -> np.ndarray:
    """Every cell's score from the final fit, NaN for the cells it learned the labels of.

    With ``learn_from="public"`` only the cells of new surveys are learned (``surveys=``):
    the other surveyed candidates stay out of sample and check the ranking alone, without
    the refits of :func:`cross_fitted_scores`.
    """
    finite = np.isfinite(Z).all(axis=1)
    out = np.full(len(Z), np.nan)
    out[finite] = est.decision_function(Z[finite])
    out[problem.learned] = np.nan
    return out


def _read_surveys(
    opts: SelectOptions, units: Any, cells_path: Path
) -> tuple[Any, SurveyResults | None]:
    """The planning units with the new surveys' labels, and the surveys (None without).

    An EBD of new checklists is read for the run's species: ``--species``, else the one
    the ingest recorded (:func:`reserve.run_files.ingest_species`).
    """
    if opts.surveys is None:
        return units, None
    locked = units["locked_out"].astype(bool).to_numpy()
    candidate = (units["role"].astype(str).to_numpy() == "candidate") & ~locked
    species = opts.species[0] if opts.species else ingest_species(cells_path) or None
    surveys = read_surveys(opts.surveys, units, candidate, sed=opts.surveys_sed, species=species)
    return apply_surveys(units, surveys, label_column(opts)), surveys


def _say_surveys(surveys: SurveyResults | None, say: Callable[[str], None]) -> None:
    """Say how many new surveys were read, and what their reading left out."""
    if surveys is None:
        return
    for note in surveys.notes:
        say(note)
    say(
        f"{surveys.cell_id.size} new surveys from {surveys.source} "
        f"({int(surveys.detected.sum())} with a detection)"
    )


def label_column(opts: SelectOptions) -> str:
    """The planning units' label column of the run's species."""
    if not opts.species:
        return "label"
    return SPECIES_LABEL_PREFIX + species_slug(opts.species[0])


def reselect(
    opts: SelectOptions,
    units: Any,
    surveys: SurveyResults,
    estimator: Any,
    source: str = "",
) -> SelectionResult:
    """The selection after new surveys, refitting a fitted run's model without a new search.

    The cheap half of the loop suggest, survey, reselect: the planning units take the
    surveys (:func:`reserve.surveys.apply_surveys`), the estimator is refitted with the
    feature maps and C it chose (``refit_params``: no cross-validation) on the problem that
    learns their labels, and the chosen cells are settled on their outcomes
    (:func:`reserve.surveys.settle_selection`). ``reserve select --surveys`` does the same
    with a fresh model choice.

    Parameters
    ----------
    opts : reserve.config.SelectOptions
        The run's options (``surveys`` is not read: ``surveys`` is given).
    units : geopandas.GeoDataFrame
        The planning units before the surveys.
    surveys : reserve.surveys.SurveyResults
    estimator : estimator
        The fitted estimator of the run before the surveys.
    source : str
        The cells file, for messages.

    Returns
    -------
    SelectionResult
        Without outputs written.
    """
    units = apply_surveys(units, surveys, label_column(opts))
    learn = pd.Index(units["cell_id"]).isin(surveys.cell_id)
    problem = build_problem(units, opts, source, learn=learn)
    _check_survey_cells(problem, surveys, None)
    scaler, fitted = standardised(problem.selection)
    est = fixed_model(estimator)
    t = time.perf_counter()
    est.fit(fitted)
    Z = scaler.transform(np.where(np.isfinite(problem.X), problem.X, np.nan))
    C, C_source = chosen_C(est, "given")
    fit = FitOutcome(
        estimator=est,
        Z=Z,
        picked=np.asarray(est.selected_, dtype=np.int64),
        C=C,
        C_source=C_source,
        cv=None,
        fit_seconds=time.perf_counter() - t,
        frequency=None,
        held_out=unlearned_scores(problem, est, Z) if opts.learn_from == "public" else None,
    )
    inputs = {"cells_path": source, "cells_sha256": "", "public_path": "", "outline_path": ""}
    result = build_result(problem, opts, fit, inputs=inputs, config=opts.recorded(None))
    fit, figures = _settled(problem, opts, fit, result, surveys)
    result = build_result(problem, opts, fit, inputs=inputs, config=opts.recorded(None))
    result.summary.update(figures)
    return result


def _check_survey_cells(problem: Problem, surveys: SurveyResults | None, m: int | None) -> None:
    """Refuse surveyed cells the options lock, and more suggestions than candidates."""
    n_cand = int(problem.candidate.sum())
    if m is not None and m > n_cand:
        raise InvalidInputError(
            f"suggest_surveys={m} is more than the {n_cand} candidate cells; pass at most {n_cand}"
        )
    if surveys is None:
        return
    pos = pd.Index(problem.units["cell_id"]).get_indexer(surveys.cell_id)
    out = ~problem.candidate[pos]
    if out.any():
        cells = ", ".join(str(c) for c in surveys.cell_id[out][:5])
        raise InvalidInputError(
            f"surveys {surveys.source!r}: cells {cells} are locked in or out for this run "
            "(--locked-in, --locked-out, --exclude-novel); unlock them or drop their surveys"
        )


def _settled(
    problem: Problem,
    opts: SelectOptions,
    fit: FitOutcome,
    result: SelectionResult,
    surveys: SurveyResults,
) -> tuple[FitOutcome, dict[str, Any]]:
    """The fit with its chosen cells settled on the new surveys
    (:func:`reserve.surveys.settle_selection`), and the summary's survey figures."""
    ranking = result.ranking[~result.ranking["locked_in"].astype(bool)]
    at = pd.Index(ranking["cell_id"])
    surveyed = np.zeros(len(ranking), dtype=bool)
    surveyed[at.get_indexer(surveys.cell_id)] = True
    detected = np.zeros(len(ranking), dtype=bool)
    detected[at.get_indexer(surveys.cell_id[surveys.detected])] = True
    p = np.nan_to_num(ranking["probability"].to_numpy(dtype=np.float64), nan=0.0)
    settled = settle_selection(p, surveyed, detected, int(problem.k_free))
    cells = pd.Index(problem.units["cell_id"]).get_indexer(at[settled.chosen])
    n_fitted = int((problem.train | problem.candidate).sum())  # learned copies come after
    picked = pd.Index(problem.rows[:n_fitted]).get_indexer(cells)
    figures = {
        "surveys_path": str(opts.surveys),
        "n_surveys": int(surveys.cell_id.size),
        "n_surveys_detected": int(surveys.detected.sum()),
        "n_selected_surveys_detected": settled.n_detected,
        "n_surveys_dropped": settled.n_dropped,
    }
    return replace(fit, picked=picked.astype(np.int64)), figures


def _suggest(
    opts: SelectOptions, problem: Problem, result: SelectionResult, say: Callable[[str], None]
) -> None:
    """Add the ``survey_next`` layer, its cells' ``survey_rank`` and the summary's figures."""
    t = time.perf_counter()
    detection = float(result.summary["detection_per_checklist"])
    layer, total = suggest_surveys(
        result.ranking,
        result.planning_units,
        detection,
        int(opts.suggest_surveys),
        clusters=opts.survey_clusters,
        seed=opts.seed,
        problem=problem,
    )
    rank = np.zeros(len(result.planning_units), dtype=np.int64)
    rank[pd.Index(result.planning_units["cell_id"]).get_indexer(layer["cell_id"])] = layer["rank"]
    result.planning_units["survey_rank"] = rank
    result.survey_next = layer
    result.summary.update(
        {
            "suggest_surveys": int(opts.suggest_surveys),
            "n_survey_next": len(layer),
            "survey_checklists": SURVEY_CHECKLISTS,
            "survey_detection": survey_detection(detection),
            "survey_expected_gain": total,
            "survey_expected_gain_refit": float(layer["value_refit"].sum()),
            "survey_clusters": opts.survey_clusters or 0,
            "n_survey_clusters": int(layer["cluster"].max()) if len(layer) else 0,
        }
    )
    say(
        f"suggested {len(layer)} surveys: expected gain {total:.2f} occupied chosen cells, "
        f"{layer['value_refit'].sum():.2f} of them through what the next run learns from "
        f"the labels ({time.perf_counter() - t:.1f} s)"
    )


def run_selection(
    opts: SelectOptions,
    *,
    public: str | os.PathLike[str] | None = None,
    outline: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    config: Mapping[str, Any] | None = None,
    map_drawer: Standby | None = None,
) -> SelectionResult:
    """Run one selection with checked options; :func:`select_reserve` with an options object.

    Parameters
    ----------
    opts : reserve.config.SelectOptions
        The run's options.
    public, outline, progress, config
        As in :func:`select_reserve`.
    map_drawer : reserve.fork.Standby or None
        A child forked at the start (``reserve select`` forks it before importing the
        models) that has imported folium meanwhile: it draws the map while this process
        writes the GeoPackage (:func:`reserve.run_files.write_outputs`). The caller cancels
        it when the run ends.

    Returns
    -------
    SelectionResult
    """
    t0 = time.perf_counter()
    say = progress or (lambda message: None)
    # Nothing is said before every check has passed: a refused run prints its one error line.
    if opts.cells is None:  # the embedded region is no bad input: check the outputs first
        gpkg_path, map_path = check_outputs(opts, Path("georgia"))
        if not default_region_cached():
            say("preparing the default region (cached after the first run)")
    cells_path, public, outline = locate_cells(opts.cells, public, outline)
    check_decoration(public, outline)
    if opts.cells is not None and cells_path.is_file():  # the outputs before the cells are read
        gpkg_path, map_path = check_outputs(opts, cells_path)
    units = read_planning_units(cells_path)
    opts = one_species_options(opts, units.columns, cells_path)
    public, outline, drawn = map_polygons(cells_path, public, outline)
    # its EPSG code is looked up once here, not again by the summary and every layer written
    units = units.set_crs(identified_crs(units.crs), allow_override=True)
    units, surveys = _read_surveys(opts, units, cells_path)
    learn = None
    if surveys is not None:
        learn = pd.Index(units["cell_id"]).isin(surveys.cell_id)
    problem = build_problem(units, opts, str(cells_path), learn=learn)
    _check_survey_cells(problem, surveys, opts.suggest_surveys)
    _say_surveys(surveys, say)
    say(
        f"reading {cells_path}: {len(units)} cells, {int(problem.train.sum())} training, "
        f"{int(problem.candidate.sum())} candidates"
    )
    n_out = int(problem.locked_out.sum())
    if problem.n_locked_in or n_out:
        choosing = (
            f"choosing {problem.k_free} more"
            if not opts.money
            else f"choosing more for {problem.free_budget:g} of the budget"
        )
        say(f"{problem.n_locked_in} cells locked in, {n_out} locked out; {choosing}")
    if problem.novel_out is not None and problem.novel_out.any():
        say(f"{int(problem.novel_out.sum())} novel candidate cells kept out (exclude_novel)")
    if problem.effort:
        say(
            f"effort covariates {', '.join(problem.effort)}; candidates scored at the training "
            "median"
        )
    inputs = {
        "cells_path": str(cells_path),
        "cells_sha256": file_sha256(cells_path),
        "public_path": drawn["public"],
        "outline_path": drawn["outline"],
    }
    recorded = dict(config) if config is not None else opts.recorded(map_path)
    if opts.planned:
        result = _planned(opts, units, problem, inputs, recorded, say)
    else:
        fit = _fit(opts, problem, say)
        result = build_result(problem, opts, fit, inputs=inputs, config=recorded)
    if surveys is not None:  # the surveyed cells decided by their outcome, then the tables
        fit, figures = _settled(problem, opts, fit, result, surveys)
        result = build_result(problem, opts, fit, inputs=inputs, config=recorded)
        result.summary.update(figures)
    if not result.summary.get("species"):  # one species: named by the ingest, for the map
        result.summary["species"] = ingest_species(cells_path)
    result.gpkg_path, result.map_path = gpkg_path, map_path
    result.csv_path = None if gpkg_path is None else gpkg_path.with_name(CSV_NAME)
    result.summary_path = None if gpkg_path is None else gpkg_path.with_name(SUMMARY_NAME)
    result.summary["effort_covariates"] = json.dumps(problem.effort, sort_keys=True)
    if opts.suggest_surveys is not None:
        _suggest(opts, problem, result, say)
    write_outputs(result, say, t0, public, outline, parallel=opts.n_jobs > 1, drawer=map_drawer)
    result.summary["runtime_seconds"] = round(time.perf_counter() - t0, 3)
    return result


def select_reserve(
    budget: int | float,
    cells: str | os.PathLike[str] | None = None,
    *,
    method: str = SELECT_DEFAULTS.method,
    C: float | str | None = None,
    seed: int = SELECT_DEFAULTS.seed,
    out: str | os.PathLike[str] | None = None,
    map: str | os.PathLike[str] | bool | None = None,
    overwrite: bool = False,
    time_limit: float = SELECT_DEFAULTS.time_limit,
    locked_in: str | os.PathLike[str] | None = None,
    locked_out: str | os.PathLike[str] | None = None,
    exclude_novel: bool = SELECT_DEFAULTS.exclude_novel,
    bootstrap: int = SELECT_DEFAULTS.bootstrap,
    n_jobs: int = SELECT_DEFAULTS.n_jobs,
    cost_column: str | None = None,
    species: list[str] | tuple[str, ...] | str | None = None,
    target: Any = (),
    weight: Any = (),
    strict_targets: bool = SELECT_DEFAULTS.strict_targets,
    joint_fit: bool = SELECT_DEFAULTS.joint_fit,
    model: str = SELECT_DEFAULTS.model,
    effort: bool = SELECT_DEFAULTS.effort,
    learn_from: str = SELECT_DEFAULTS.learn_from,
    boundary_penalty: float | str = 0.0,
    suggest_surveys: int | None = None,
    survey_clusters: int | None = None,
    surveys: str | os.PathLike[str] | None = None,
    surveys_sed: str | os.PathLike[str] | None = None,
    public: str | os.PathLike[str] | None = None,
    outline: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    config: Mapping[str, Any] | None = None,
) -> SelectionResult:
    """Select ``budget`` candidate cells for the reserve and (optionally) write the outputs.

    Parameters
    ----------
    budget : int or float
        Number of cells to select, ``1 <= budget <`` the number of candidate cells; with
        ``cost_column``, the total cost the selection may spend (see "Money budgets" in
        :mod:`reserve.design`).
    cells : path-like, optional
        GeoPackage with a ``planning_units`` layer (``reserve ingest``). Default: the
        embedded Georgia region, ingested and cached on first use.
    method, C, seed, out, map, overwrite, time_limit, locked_in, locked_out, bootstrap, \
    n_jobs, cost_column, species, model, effort, learn_from, boundary_penalty, \
    suggest_surveys, survey_clusters, surveys, surveys_sed
        The options of :class:`reserve.config.SelectOptions` (``reserve select``'s flags),
        every one of them: nothing is written without ``out``; an existing output is an
        error, raised before any work, unless ``overwrite``; ``map=False`` draws no map.
    target, weight : sequence of str, or mapping
        With two or more ``species``: ``"SPECIES=N"`` / ``"SPECIES=P%"`` targets and
        ``"SPECIES=W"`` weights (:mod:`reserve.goals`), or a mapping of species to value.
    strict_targets : bool
        Refuse a target above what the candidates can reach (else warn and plan).
    joint_fit : bool
        Several species: one joint fit (``MultiTTK``) instead of a fit per species and a
        plan over their calibrated probabilities.
    exclude_novel : bool
        Never select a candidate whose habitat lies outside the training cells' range
        (negative MESS, :mod:`reserve.novelty`): they are locked out. Off: they are flagged.
    public, outline : path-like, optional
        Public-land and region polygons drawn on the map (default region: its own files).
    progress : callable, optional
        Called with a short message at the start of every step.
    config : mapping, optional
        The effective configuration to record (default: these arguments).

    Returns
    -------
    SelectionResult

    Raises
    ------
    InvalidInputError
        Bad options; conflicting locks (a usage error); with ``strict_targets``, a target
        above what the candidates can reach.
    DataFileError
        Unusable cells or lock polygon file; unwritable output folder.
    OutputExistsError
        An output exists and ``overwrite`` is False.

    Examples
    --------
    >>> result = select_reserve(30, "units.gpkg", out="run1")  # doctest: +SKIP
    """
    if progress is not None and not callable(progress):
        raise InvalidInputError(
            f"progress must be a function of one message; received {progress!r}"
        )
    if config is not None and not isinstance(config, Mapping):
        raise InvalidInputError(f"config must be a mapping of option names; received {config!r}")
    opts = SelectOptions(
        budget=budget,
        cells=cells,
        method=method,
        C=C,
        seed=seed,
        out=out,
        map=map,
        overwrite=overwrite,
        time_limit=time_limit,
        locked_in=locked_in,
        locked_out=locked_out,
        bootstrap=bootstrap,
        exclude_novel=exclude_novel,
        n_jobs=n_jobs,
        cost_column=cost_column,
        species=species,
        target=target,
        weight=weight,
        strict_targets=strict_targets,
        joint_fit=joint_fit,
        model=model,
        effort=effort,
        boundary_penalty=boundary_penalty,
        learn_from=learn_from,
        suggest_surveys=suggest_surveys,
        survey_clusters=survey_clusters,
        surveys=surveys,
        surveys_sed=surveys_sed,
    )
    return run_selection(opts, public=public, outline=outline, progress=progress, config=config)
