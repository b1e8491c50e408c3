"""The paper's benchmark tables (Table 2 and Table 3), reproducible from one call.

Table 3: for every dataset, ``n_splits`` random 50/50 splits; the test half is the candidate
set and ``k`` is 5 % of it. Each method chooses ``C`` by five 2-fold transductive CV runs on
the training half (:func:`reserve.model_selection.select_C`), is refitted with that ``C`` and
scored by the precision of its ``k`` selected candidates. Table 2: ``C = 1``, the training
objective ``0.5 ||w||^2 + C sum hinge`` and the summed test hinge loss.

TTK-FD's CV fits (``cv_ttk``): by default (``"fd"``) the 50 CV fits run the feasible-direction
method without the polish and only the final fit is the full TTK (FD + polish). The polish is
what makes TTK slow on the larger sets (tens of times slower per CV fit on spambase), and
50 of them per split do not fit the one-hour budget; ``"full"`` runs the
polish in the CV fits too (the same estimator as the final fit). TSVM's CCCP stops after
``fit_time_limit`` seconds in a final fit and after ``cv_fit_time_limit`` in a CV fit (3 s by
default: its CV fits on splice and spambase would otherwise use most of the hour); the table
counts the fits that stopped there.

Methods too slow on larger data are reported as ``NA`` (AATP and TTK-MIP above 1000 rows,
as in the paper), never dropped silently.

Table 3 also holds real surrogates for the paper's unpublished eBird instances NY16, NY18 and
NY88: :data:`reserve.paper.surrogates.SURROGATES` (BCR 27 checklists, national-forest cells
labelled, the other surveyed cells as candidates). Their "splits" are disjoint folds of the
candidate cells with the labelled cells fixed (:func:`reserve.paper.surrogates.surrogate_splits`).
They read eBird data from a local folder at run time; :func:`reproduce_paper` skips them with a
note when it is absent, and writes a run made of surrogates only to ``paper_table3_bcr27.*``.
"""

from __future__ import annotations

import csv
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from scipy import stats

from reserve.errors import DataFileError, InvalidInputError, ReserveError
from reserve.metrics import hinge_loss_sum, selection_precision
from reserve.model_selection import PAPER_CS, select_C
from reserve.paper.datasets import BENCHMARKS, load_benchmark, transductive_split
from reserve.paper.surrogates import SURROGATES, default_bcr27_dir, load_surrogate, surrogate_splits
from reserve.solvers import canonical_method, hinge_objective, make_estimator
from reserve.solvers.registry import capabilities

__all__ = [
    "CV_TTK",
    "DATASETS",
    "METHODS",
    "PAPER_TABLE2",
    "PAPER_TABLE3",
    "PAPER_TABLE3_NY",
    "RunRecord",
    "Split",
    "format_table2",
    "format_table3",
    "load_dataset",
    "prepare_splits",
    "reproduce_paper",
    "run_table2",
    "run_table3",
    "write_csv",
    "write_text",
]

#: Column order of Table 3.
METHODS: tuple[str, ...] = ("SVM", "TSVM", "SVMPerf", "TopPush", "AATP", "TTK-MIP", "TTK-FD")

#: TTK-FD's estimator in the CV fits that choose C: ``"fd"`` (feasible direction without the
#: polish; the final fit still polishes) or ``"full"`` (FD + polish, as the final fit).
CV_TTK: tuple[str, ...] = ("fd", "full")

#: Methods the paper could only run on datasets of at most this many rows.
SMALL_ONLY: dict[str, int] = {"AATP": 1000, "TTK-MIP": 1000}

#: The paper's Table 3 (mean, sd of precision@5%); ``None`` where the paper reports NA.
PAPER_TABLE3: dict[str, dict[str, tuple[float, float] | None]] = {
    "diabetes": {
        "SVM": (0.86, 0.08),
        "TSVM": (0.86, 0.09),
        "SVMPerf": (0.69, 0.20),
        "TopPush": (0.80, 0.10),
        "AATP": (0.68, 0.28),
        "TTK-MIP": (0.85, 0.10),
        "TTK-FD": (0.86, 0.08),
    },
    "ionosphere": {
        "SVM": (0.76, 0.13),
        "TSVM": (0.80, 0.17),
        "SVMPerf": (0.82, 0.22),
        "TopPush": (0.71, 0.16),
        "AATP": (1.00, 0.00),
        "TTK-MIP": (0.97, 0.05),
        "TTK-FD": (0.84, 0.15),
    },
    "sonar": {
        "SVM": (0.96, 0.08),
        "TSVM": (0.98, 0.06),
        "SVMPerf": (0.85, 0.16),
        "TopPush": (0.88, 0.13),
        "AATP": (0.90, 0.11),
        "TTK-MIP": (0.96, 0.08),
        "TTK-FD": (1.00, 0.00),
    },
    "german_numer": {
        "SVM": (0.70, 0.08),
        "TSVM": (0.72, 0.08),
        "SVMPerf": (0.56, 0.17),
        "TopPush": (0.63, 0.12),
        "AATP": None,
        "TTK-MIP": None,
        "TTK-FD": (0.71, 0.06),
    },
    "splice": {
        "SVM": (1.00, 0.00),
        "TSVM": (1.00, 0.00),
        "SVMPerf": (1.00, 0.01),
        "TopPush": (1.00, 0.00),
        "AATP": None,
        "TTK-MIP": None,
        "TTK-FD": (1.00, 0.00),
    },
    "spambase": {
        "SVM": (0.97, 0.02),
        "TSVM": (0.97, 0.02),
        "SVMPerf": (0.98, 0.01),
        "TopPush": (0.96, 0.02),
        "AATP": None,
        "TTK-MIP": None,
        "TTK-FD": (0.98, 0.01),
    },
    "svmguide3": {
        "SVM": (0.86, 0.07),
        "TSVM": (0.85, 0.07),
        "SVMPerf": (0.91, 0.04),
        "TopPush": (0.83, 0.07),
        "AATP": None,
        "TTK-MIP": None,
        "TTK-FD": (0.87, 0.06),
    },
}

#: The paper's Table 3 rows for its unpublished eBird instances (New York, June 2012), shown
#: beside the BCR 27 surrogates as context only: another region, species and feature set.
PAPER_TABLE3_NY: dict[str, dict[str, tuple[float, float]]] = {
    "NY16": {
        "SVM": (0.64, 0.08),
        "TSVM": (0.64, 0.09),
        "SVMPerf": (0.65, 0.12),
        "TopPush": (0.62, 0.10),
        "AATP": (0.62, 0.08),
        "TTK-MIP": (0.68, 0.07),
        "TTK-FD": (0.70, 0.09),
    },
    "NY18": {
        "SVM": (0.44, 0.11),
        "TSVM": (0.45, 0.10),
        "SVMPerf": (0.36, 0.07),
        "TopPush": (0.43, 0.13),
        "AATP": (0.46, 0.12),
        "TTK-MIP": (0.46, 0.08),
        "TTK-FD": (0.47, 0.12),
    },
    "NY88": {
        "SVM": (0.40, 0.08),
        "TSVM": (0.33, 0.12),
        "SVMPerf": (0.37, 0.15),
        "TopPush": (0.34, 0.08),
        "AATP": (0.31, 0.09),
        "TTK-MIP": (0.40, 0.09),
        "TTK-FD": (0.42, 0.07),
    },
}

#: Every dataset name Table 3 accepts: the bundled benchmarks, then the eBird surrogates.
DATASETS: tuple[str, ...] = (*BENCHMARKS, *SURROGATES)

#: The paper's Table 2: (train objective mean, sd), (test loss mean, sd) at C = 1.
PAPER_TABLE2: dict[str, dict[str, tuple[tuple[float, float], tuple[float, float]]]] = {
    "diabetes": {
        "SVM": ((311, 25), (323, 20)),
        "AATP": ((265, 23), (273, 24)),
        "TTK-MIP": ((224, 7), (235, 6)),
        "TTK-FD": ((226, 7), (235, 5)),
    },
    "ionosphere": {
        "SVM": ((325, 46), (338, 44)),
        "AATP": ((474, 88), (488, 85)),
        "TTK-MIP": ((127, 4), (146, 5)),
        "TTK-FD": ((136, 4), (150, 7)),
    },
    "sonar": {
        "SVM": ((167, 52), (216, 22)),
        "AATP": ((166, 41), (213, 30)),
        "TTK-MIP": ((20, 8), (103, 19)),
        "TTK-FD": ((30, 10), (105, 24)),
    },
}


@dataclass(frozen=True)
class RunRecord:
    """One method on one split of one dataset.

    ``status`` is ``"ok"``, ``"na"`` (not run: too large for the method, as in the paper)
    or ``"failed"`` (the solver raised; ``note`` says why). Seconds are wall time.
    ``cv_estimator`` names the CV fits' estimator when it is not the final fit's (TTK-FD
    with ``cv_ttk="fd"``: ``"TTK-FD without polish"``), else ``""``; ``cv_limited`` counts
    the CV fits (of ``len(Cs) * n_repeats * 2``) that stopped at their per-fit time limit.
    """

    table: str
    dataset: str
    split: int
    method: str
    C: float
    k: int
    precision: float
    train_objective: float
    test_hinge: float
    cv_seconds: float
    fit_seconds: float
    status: str
    note: str = ""
    cv_estimator: str = ""
    cv_limited: int = 0


def _check_names(values: Iterable[str], allowed: Sequence[str], what: str) -> list[str]:
    out = list(values)
    bad = [v for v in out if v not in allowed]
    if bad:
        raise InvalidInputError(
            f"unknown {what} {', '.join(map(repr, bad))}; choose from {', '.join(allowed)}."
        )
    if not out:
        raise InvalidInputError(f"no {what} given; choose from {', '.join(allowed)}.")
    return out


def load_dataset(name: str, data_dir: str | os.PathLike[str] | None = None) -> tuple:
    """Features and 0/1 labels of a benchmark: bundled, or ``data_dir/<name>.csv``.

    A CSV has a header row, feature columns, and the label (-1/1 or 0/1) last. A missing or
    non-numeric cell is refused with the file, row and column.
    """
    if name not in BENCHMARKS:
        raise InvalidInputError(f"unknown dataset {name!r}; choose from {', '.join(BENCHMARKS)}.")
    if data_dir is None:
        return load_benchmark(name)
    path = Path(data_dir) / f"{name}.csv"
    if not path.is_file():
        raise InvalidInputError(
            f"dataset file {path} does not exist; pass a --data-dir holding {name}.csv."
        )
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))[1:]
    if not rows:
        raise InvalidInputError(f"dataset file {path} has no data rows; check the file.")
    try:
        table = np.array([[float(v) if v.strip() else np.nan for v in r] for r in rows])
    except ValueError as exc:
        raise InvalidInputError(f"dataset file {path} has a non-numeric cell ({exc}).") from None
    if table.ndim != 2:
        raise InvalidInputError(f"dataset file {path} has rows of different lengths.")
    missing = np.argwhere(~np.isfinite(table))
    if missing.size:
        r, c = missing[0]
        what = "label" if c == table.shape[1] - 1 else f"feature column {c}"
        raise InvalidInputError(
            f"dataset file {path} has {len(missing)} missing value(s), first the {what} of "
            f"data row {r + 1}; fill or drop those rows."
        )
    label = table[:, -1]
    if not (np.isin(label, (-1.0, 1.0)).all() or np.isin(label, (0.0, 1.0)).all()):
        raise InvalidInputError(f"dataset file {path} has labels other than -1/1 or 0/1.")
    return np.ascontiguousarray(table[:, :-1]), (label > 0).astype(np.int64)


@dataclass(frozen=True)
class Split:
    """One transductive problem of a benchmark table: a split of one dataset.

    ``X`` holds every row (labelled, then candidates for a surrogate; shuffled halves for a
    UCI set), ``y_fit`` the labels the estimator sees (``-1`` on the candidates), ``y_hidden``
    the candidates' held-out 0/1 labels, ``k`` the cells to select, ``n_rows`` the dataset's
    size (what :data:`SMALL_ONLY` compares with) and ``seed`` the split's seed (also the
    estimator's ``random_state`` and the CV folds' seed).
    """

    dataset: str
    split: int
    X: np.ndarray
    y_fit: np.ndarray
    y_hidden: np.ndarray
    k: int
    n_rows: int
    seed: int


def prepare_splits(
    datasets: Sequence[str],
    n_splits: int,
    k_fraction: float,
    seed: int,
    data_dir: str | os.PathLike[str] | None,
) -> list[Split]:
    """Every split of every dataset, as the benchmark tables use them.

    Everything is loaded and split up front, so bad input fails before any computing.

    Parameters
    ----------
    datasets : sequence of str
        Names from :data:`DATASETS`.
    n_splits : int
        Splits per dataset (at least 2).
    k_fraction : float
        ``k`` as a share of the test half, strictly between 0 and 1.
    seed : int
        Split ``s`` uses seed ``1000 * seed + s``.
    data_dir : path-like or None
        Read ``<name>.csv`` here instead of the bundled copies.

    Returns
    -------
    list of Split
        Dataset by dataset, split by split.

    Raises
    ------
    InvalidInputError
        Bad ``n_splits`` or ``k_fraction``, a single class in a training half, or ``k`` not
        smaller than the test half.

    Examples
    --------
    >>> sp = prepare_splits(["sonar"], 2, 0.05, 0, None)
    >>> [(s.split, s.seed, s.k) for s in sp]
    [(0, 0, 5), (1, 1, 5)]
    """
    if isinstance(n_splits, bool) or not isinstance(n_splits, int) or n_splits < 2:
        raise InvalidInputError(
            f"splits must be an integer >= 2 (a paired t-test needs two); received {n_splits!r}."
        )
    if not 0.0 < k_fraction < 1.0:
        raise InvalidInputError(
            f"k_fraction must lie strictly between 0 and 1; received {k_fraction!r}."
        )
    out = []
    for name in datasets:
        if name in SURROGATES:
            # one fixed labelled set; the splits are disjoint folds of the candidates
            inst = load_surrogate(name)
            problems = surrogate_splits(inst, n_splits, k_fraction=k_fraction, random_state=seed)
        else:
            X, y = load_dataset(name, data_dir)
        for s in range(n_splits):
            split_seed = seed * 1000 + s
            if name in SURROGATES:
                Xa, yf, yh, k = problems[s]
                n_rows = Xa.shape[0]
            else:
                Xa, yf, yh, k = transductive_split(
                    X, y, random_state=split_seed, k_fraction=k_fraction
                )
                n_rows = X.shape[0]
            train = yf[yf != -1]
            if np.unique(train).size < 2 or np.unique(yh).size < 1:
                raise InvalidInputError(
                    f"dataset {name!r}, split {s}: the training half holds a single class "
                    f"({int(train.sum())} positives of {train.size}); use more data."
                )
            if k >= yh.size:
                raise InvalidInputError(
                    f"dataset {name!r}: k = {k} is not smaller than the test half "
                    f"({yh.size} rows); lower --k-fraction."
                )
            out.append(Split(name, s, Xa, yf, yh, k, n_rows, split_seed))
    return out


def _one(sp: Split, method: str, table: str, cfg: dict) -> RunRecord:
    base = dict(table=table, dataset=sp.dataset, split=sp.split, method=method, k=sp.k)
    nan = float("nan")
    limit = SMALL_ONLY.get(method)
    if limit is not None and sp.n_rows > limit:
        return RunRecord(
            **base,
            C=nan,
            precision=nan,
            train_objective=nan,
            test_hinge=nan,
            cv_seconds=0.0,
            fit_seconds=0.0,
            status="na",
            note=f"not run above {limit} rows (as in the paper)",
        )
    # the CV fits of TTK-FD may skip the polish (cv_ttk="fd"); the final fit never does
    polishes = capabilities(canonical_method(method)).polish
    cheap_cv = table == "3" and polishes and cfg["cv_ttk"] == "fd"
    base["cv_estimator"] = "TTK-FD without polish" if cheap_cv else ""
    t0 = time.perf_counter()
    try:
        if table == "3":
            est0 = make_estimator(
                method,
                k=sp.k,
                C=1.0,
                time_limit=cfg["time_limit"],
                random_state=sp.seed,
                fit_time_limit=cfg["cv_fit_time_limit"],
                polish=not cheap_cv,
            )
            sel = select_C(
                est0,
                sp.X,
                sp.y_fit,
                Cs=cfg["Cs"],
                n_repeats=cfg["n_repeats"],
                k_fraction=cfg["k_fraction"],
                random_state=sp.seed,
                n_jobs=cfg["cv_jobs"],
            )
            C = sel.best_C
            base["cv_limited"] = sel.n_limited
        else:
            C = cfg["C"]
        t1 = time.perf_counter()
        est = make_estimator(
            method,
            k=sp.k,
            C=C,
            time_limit=cfg["time_limit"],
            random_state=sp.seed,
            fit_time_limit=cfg["fit_time_limit"],
        )
        est.fit(sp.X, sp.y_fit)  # type: ignore[attr-defined]
        t2 = time.perf_counter()
    except ReserveError as exc:
        return RunRecord(
            **base,
            C=nan,
            precision=nan,
            train_objective=nan,
            test_hinge=nan,
            cv_seconds=time.perf_counter() - t0,
            fit_seconds=0.0,
            status="failed",
            note=str(exc)[:200],
        )
    cand = np.flatnonzero(sp.y_fit == -1)
    lab = np.flatnonzero(sp.y_fit != -1)
    y_pm = np.where(sp.y_fit[lab] == 1, 1.0, -1.0)
    w, b = est.coef_, float(est.intercept_)  # type: ignore[attr-defined]
    prec = selection_precision(sp.y_hidden, est.selected_ - cand[0])  # type: ignore[attr-defined]
    return RunRecord(
        **base,
        C=float(C),
        precision=prec,
        train_objective=hinge_objective(w, b, sp.X[lab], y_pm, float(C)),
        test_hinge=hinge_loss_sum(sp.y_hidden, sp.X[cand] @ w + b),
        cv_seconds=t1 - t0,
        fit_seconds=t2 - t1,
        status="ok",
        note=_limit_note(est),
    )


def _limit_note(est: object) -> str:
    """Say when the final fit stopped at a time limit (TSVM) or without proof (TTK-MIP)."""
    if getattr(est, "stop_reason_", None) == "max_time":
        return "time limit"
    status = getattr(est, "status_", None)
    if status is not None and status not in ("local", "optimal"):
        return f"MIP {status}"
    return ""


_COST = {"TSVM": 4, "TTK-FD": 2, "TTK-MIP": 4, "AATP": 2}


def _run(
    table: str,
    datasets: Sequence[str],
    methods: Sequence[str],
    n_splits: int,
    seed: int,
    data_dir: str | os.PathLike[str] | None,
    n_jobs: int,
    progress: Callable[[RunRecord, int], None] | None,
    cfg: dict,
) -> list[RunRecord]:
    datasets = _check_names(datasets, DATASETS, "dataset")
    methods = _check_names(methods, METHODS, "method")
    splits = prepare_splits(datasets, n_splits, cfg["k_fraction"], seed, data_dir)
    tasks = [(sp, m) for sp in splits for m in methods]
    # the slowest tasks first keeps both workers busy to the end (weights: one split of
    # spambase took TSVM 167 s, TTK-FD 54 s, SVM 17 s with the default CV settings)
    tasks.sort(key=lambda t: -t[0].n_rows * _COST.get(t[1], 1))
    gen = Parallel(n_jobs=n_jobs, return_as="generator_unordered")(
        delayed(_one)(sp, m, table, cfg) for sp, m in tasks
    )
    records = []
    for rec in gen:
        records.append(rec)
        if progress is not None:
            progress(rec, len(tasks))
    order = {m: i for i, m in enumerate(METHODS)}
    records.sort(key=lambda r: (datasets.index(r.dataset), r.split, order[r.method]))
    return records


def run_table3(
    datasets: Sequence[str] = BENCHMARKS,
    methods: Sequence[str] = METHODS,
    *,
    n_splits: int = 10,
    k_fraction: float = 0.05,
    Cs: Sequence[float] = PAPER_CS,
    n_repeats: int = 5,
    seed: int = 0,
    time_limit: float = 60.0,
    fit_time_limit: float = 10.0,
    data_dir: str | os.PathLike[str] | None = None,
    n_jobs: int = 2,
    cv_ttk: str = "fd",
    cv_jobs: int = 1,
    cv_fit_time_limit: float = 3.0,
    progress: Callable[[RunRecord, int], None] | None = None,
) -> list[RunRecord]:
    """Run the paper's Table 3 protocol; one record per (dataset, split, method).

    Parameters
    ----------
    datasets, methods : sequence of str
        Subsets of :data:`DATASETS` and :data:`METHODS`. A surrogate
        (:data:`reserve.paper.surrogates.SURROGATES`) needs its eBird folder
        (:func:`reserve.paper.surrogates.default_bcr27_dir`).
    n_splits : int
        Random 50/50 splits per dataset (10 in the paper); for a surrogate, disjoint folds of
        its candidate cells.
    k_fraction : float
        Budget as a share of the test half (5 %).
    Cs, n_repeats : grid and repeats of the 2-fold CV choosing C.
    seed : int
        Split ``s`` uses seed ``1000 * seed + s``; CV folds reuse it (same for every method).
    time_limit : float
        Seconds per TTK-MIP fit.
    fit_time_limit : float
        Seconds per TSVM final fit (CCCP returns its last iterate).
    data_dir : path or None
        Read ``<name>.csv`` from here instead of the bundled copies.
    n_jobs : int
        Worker processes; one task is one method on one split.
    cv_ttk : {"fd", "full"}
        TTK-FD's estimator in the CV fits: ``"fd"`` skips the polish there (the final fit
        polishes; recorded in ``RunRecord.cv_estimator``), ``"full"`` polishes in every fit.
    cv_jobs : int
        Worker processes inside one CV (one per repeat and fold; joblib). With ``n_jobs``
        workers already busy it only helps the last, longest tasks.
    cv_fit_time_limit : float
        Seconds per TSVM CV fit.
    progress : callable or None
        Called with each finished record and the task count.

    Raises
    ------
    InvalidInputError
        Unknown names, a missing label in a data file, a single class in a training half,
        ``k`` not smaller than the test half, or a bad ``cv_ttk``, ``cv_jobs`` or time limit;
        raised before any fit starts.
    DataFileError
        A surrogate was asked for and its eBird folder is absent.
    """
    cv_ttk = _check_names([cv_ttk], CV_TTK, "cv_ttk")[0]
    if isinstance(cv_jobs, bool) or not isinstance(cv_jobs, int) or cv_jobs < 1:
        raise InvalidInputError(
            f"cv_jobs must be an integer >= 1; received {cv_jobs!r}. Pass e.g. cv_jobs=1."
        )
    for name, value in (
        ("fit_time_limit", fit_time_limit),
        ("cv_fit_time_limit", cv_fit_time_limit),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise InvalidInputError(
                f"{name} must be a number of seconds > 0; received {value!r}. Pass e.g. {name}=10."
            )
    cfg = dict(
        k_fraction=float(k_fraction),
        Cs=tuple(Cs),
        n_repeats=n_repeats,
        time_limit=float(time_limit),
        fit_time_limit=float(fit_time_limit),
        cv_ttk=cv_ttk,
        cv_jobs=cv_jobs,
        cv_fit_time_limit=float(cv_fit_time_limit),
    )
    return _run("3", datasets, methods, n_splits, seed, data_dir, n_jobs, progress, cfg)


def run_table2(
    datasets: Sequence[str] = ("diabetes", "ionosphere", "sonar"),
    methods: Sequence[str] = ("SVM", "AATP", "TTK-MIP", "TTK-FD"),
    *,
    n_splits: int = 10,
    C: float = 1.0,
    k_fraction: float = 0.05,
    seed: int = 0,
    time_limit: float = 60.0,
    fit_time_limit: float = 10.0,
    data_dir: str | os.PathLike[str] | None = None,
    n_jobs: int = 2,
    progress: Callable[[RunRecord, int], None] | None = None,
) -> list[RunRecord]:
    """Run the paper's Table 2 protocol (fixed ``C``; objective and test hinge loss)."""
    cfg = dict(
        k_fraction=float(k_fraction),
        C=float(C),
        time_limit=float(time_limit),
        fit_time_limit=float(fit_time_limit),
    )
    return _run("2", datasets, methods, n_splits, seed, data_dir, n_jobs, progress, cfg)


def _by(records: Sequence[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
    out: dict[tuple[str, str], list[RunRecord]] = {}
    for r in records:
        out.setdefault((r.dataset, r.method), []).append(r)
    return out


def _worse(a: np.ndarray, b: np.ndarray, alpha: float = 0.05) -> bool:
    """True when ``a`` is significantly worse than ``b`` (paired t-test, two-sided)."""
    d = b - a
    if d.mean() <= 0:
        return False
    if np.all(d == d[0]):  # constant positive difference: t is infinite
        return True
    return bool(stats.ttest_rel(b, a).pvalue < alpha)


def _ok_values(runs: list[RunRecord] | None) -> np.ndarray | None:
    if not runs or any(r.status != "ok" for r in runs):
        return None
    return np.array([r.precision for r in sorted(runs, key=lambda r: r.split)])


def _cell_status(runs: list[RunRecord] | None) -> str:
    if not runs:
        return "-"
    if any(r.status == "na" for r in runs):
        return "NA"
    n_fail = sum(r.status == "failed" for r in runs)
    return f"failed ({n_fail}/{len(runs)})"


def _paper_cell(ds: str, m: str) -> str:
    """The paper's Table 3 figure for one cell: ``mean±sd``, ``NA``, or ``-`` (not in it)."""
    if ds not in PAPER_TABLE3:
        return "-"
    paper = PAPER_TABLE3[ds].get(m)
    return "NA" if paper is None else f"{paper[0]:.2f}±{paper[1]:.2f}"


def _table3_row(
    ds: str, methods: list[str], groups: dict, vals: dict[str, np.ndarray | None]
) -> str:
    """One dataset's row: ours (bold when not significantly worse) / the paper's."""
    cells = []
    for m in methods:
        v, ptxt = vals[m], _paper_cell(ds, m)
        if v is None:
            cells.append(f"{_cell_status(groups.get((ds, m)))} / {ptxt}")
            continue
        best = not any(_worse(v, o) for mm, o in vals.items() if mm != m and o is not None)
        txt = f"{v.mean():.2f}±{v.std(ddof=1):.2f}"
        n_lim = sum(bool(r.note) for r in groups[(ds, m)])
        if n_lim:
            txt += f" †{n_lim}"
        cells.append(f"{'**' + txt + '**' if best else txt} / {ptxt}")
    return f"| {ds} | " + " | ".join(cells) + " |"


def _tally(wtl: dict[str, list[int]], vals: dict[str, np.ndarray | None], reference: str) -> None:
    """Add one dataset's wins/ties/losses of ``reference`` against every other method."""
    ref = vals.get(reference)
    if ref is None:
        return
    for m, o in vals.items():
        if m == reference or o is None:
            continue
        wtl[m][0 if _worse(o, ref) else 2 if _worse(ref, o) else 1] += 1


def _table3_body(
    records: Sequence[RunRecord], methods: list[str], reference: str, surrogate: bool
) -> list[str]:
    """The table itself: header, dataset rows, NY context, w/t/l and wall-time rows."""
    groups = _by(records)
    datasets = list(dict.fromkeys(r.dataset for r in records))
    lines = [
        "| dataset | " + " | ".join(f"{m} (ours / paper)" for m in methods) + " |",
        "|---|" + "---|" * len(methods),
    ]
    wtl = {m: [0, 0, 0] for m in methods}
    for ds in datasets:
        vals = {m: _ok_values(groups.get((ds, m))) for m in methods}
        lines.append(_table3_row(ds, methods, groups, vals))
        _tally(wtl, vals, reference)
    if surrogate:
        for ny, row in PAPER_TABLE3_NY.items():
            lines.append(
                f"| {ny} (paper, New York; context only) | "
                + " | ".join(f"- / {row[m][0]:.2f}±{row[m][1]:.2f}" for m in methods)
                + " |"
            )
    if reference in methods:
        lines.append(
            f"| {reference} w/t/l | "
            + " | ".join("" if m == reference else "{}/{}/{}".format(*wtl[m]) for m in methods)
            + " |"
        )
    cv = {m: sum(r.cv_seconds for r in records if r.method == m) for m in methods}
    fit = {m: sum(r.fit_seconds for r in records if r.method == m) for m in methods}
    lines.append("| wall time (s) | " + " | ".join(f"{cv[m] + fit[m]:.0f}" for m in methods) + " |")
    lines.append(
        "| of which CV / final fits (s) | "
        + " | ".join(f"{cv[m]:.0f} / {fit[m]:.0f}" for m in methods)
        + " |"
    )
    return lines


def _table3_notes(records: Sequence[RunRecord], surrogate: bool) -> list[str]:
    """The paragraphs under the table: legend, limited CV fits, cheap CV, surrogates."""
    lines = [
        "",
        "Bold: not significantly worse than any other method (paired t-test, p < 0.05). "
        "†n: in n splits the final fit stopped at a per-fit limit (TSVM: CCCP time limit; "
        "TTK-MIP: MIP time limit, best solution found). NA: not run above 1000 rows, as in "
        "the paper. Wall time: CV plus final fits, summed over splits (seconds of one worker).",
    ]
    groups = _by(records)
    limited: dict[tuple[str, str], int] = {}
    for r in records:
        if r.cv_limited:
            limited[(r.dataset, r.method)] = limited.get((r.dataset, r.method), 0) + r.cv_limited
    if limited:
        lines.append("")
        lines.append(
            "CV fits (50 per split with the default grid) that stopped at their per-fit time "
            "limit, their last iterate scored: "
            + "; ".join(
                f"{m} on {ds}: {n} in {len(groups[(ds, m)])} splits"
                for (ds, m), n in limited.items()
            )
            + "."
        )
    cheap = sorted({r.method for r in records if r.cv_estimator})
    if cheap:
        lines.append("")
        lines.append(
            f"C of {', '.join(cheap)} was chosen by CV fits without the polish (feasible "
            "direction only, 50 fits per split); the final fit with that C is the full TTK "
            "(FD + polish), and it alone is scored. This differs from the paper's protocol, "
            "which cross-validated the same estimator it scored; it is what makes the table "
            "fit one hour on two cores (`--cv-ttk full` restores the paper's protocol)."
        )
    if surrogate:
        lines.append("")
        lines.append(
            "bcr27_* rows: real surrogates for the paper's unpublished NY16/NY18/NY88, built "
            "from eBird checklists of BCR 27 (US Southeast Coastal Plain, May-June 2017-18; "
            "3 km cells, 16 MODIS land-cover fractions): national-forest cells are the "
            "labelled set, the other surveyed cells the candidates, scored by their held-out "
            "labels. Splits are disjoint folds of the candidates (labelled set fixed), so the "
            "sd is over candidate pools. The NY rows are the paper's figures for another "
            "region, year, species and feature set: context, not a comparison."
        )
    return lines


def format_table3(
    records: Sequence[RunRecord], reference: str = "TTK-FD", notes: Sequence[str] = ()
) -> str:
    """Markdown: ours (mean +- sd, bold = not significantly worse than any other) beside the
    paper's figure, then wins/ties/losses of ``reference`` and total wall time per method.

    When a BCR 27 surrogate is among the datasets, the paper's NY16/NY18/NY88 rows follow as
    context (paper figures only). ``notes`` are appended as lines after the table.
    """
    methods = [m for m in METHODS if any(r.method == m for r in records)]
    surrogate = any(r.dataset in SURROGATES for r in records)
    lines = _table3_body(records, methods, reference, surrogate)
    lines += _table3_notes(records, surrogate)
    if notes:
        lines.append("")
        lines.extend(f"- {n}" for n in notes)
    return "\n".join(lines) + "\n"


def format_table2(records: Sequence[RunRecord]) -> str:
    """Markdown: train objective and test hinge loss (mean +- sd), ours / paper."""
    groups = _by(records)
    datasets = list(dict.fromkeys(r.dataset for r in records))
    methods = [m for m in METHODS if any(r.method == m for r in records)]
    lines = [
        "| dataset | | " + " | ".join(f"{m} (ours / paper)" for m in methods) + " |",
        "|---|---|" + "---|" * len(methods),
    ]
    for ds in datasets:
        for label, attr, idx in (
            ("train obj.", "train_objective", 0),
            ("test loss", "test_hinge", 1),
        ):
            cells = []
            for m in methods:
                runs = groups.get((ds, m))
                paper = PAPER_TABLE2.get(ds, {}).get(m)
                ptxt = "-" if paper is None else f"{paper[idx][0]:.0f}±{paper[idx][1]:.0f}"
                if _ok_values(runs) is None:
                    cells.append(f"{_cell_status(runs)} / {ptxt}")
                    continue
                v = np.array([getattr(r, attr) for r in runs])
                cells.append(f"{v.mean():.0f}±{v.std(ddof=1):.0f} / {ptxt}")
            lines.append(f"| {ds} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _atomic_write(path: Path, write: Callable[[object], None], newline: str | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline=newline) as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_csv(records: Sequence[RunRecord], path: str | os.PathLike[str]) -> Path:
    """Write every run to ``path`` atomically (temporary file, then rename)."""
    p = Path(path)
    fields = list(RunRecord.__dataclass_fields__)

    def write(fh: object) -> None:
        w = csv.DictWriter(fh, fieldnames=fields)  # type: ignore[arg-type]
        w.writeheader()
        for r in records:
            w.writerow(asdict(r))

    _atomic_write(p, write, "")
    return p


def write_text(text: str, path: str | os.PathLike[str]) -> Path:
    """Write ``text`` to ``path`` atomically."""
    p = Path(path)
    _atomic_write(p, lambda fh: fh.write(text), None)  # type: ignore[attr-defined]
    return p


#: Table-3 methods run by default: the exact one (TTK-MIP) is left out because choosing its C
#: by CV means 51 time-limited MIP solves per split (ask for it with ``methods=``).
DEFAULT_TABLE3_METHODS: tuple[str, ...] = tuple(
    m for m in METHODS if not capabilities(canonical_method(m)).exact
)


def _available(names: list[str]) -> tuple[list[str], list[str]]:
    """Drop the surrogates when their eBird folder is absent; say so (warning and note)."""
    wanted = [n for n in names if n in SURROGATES]
    if not wanted or default_bcr27_dir() is not None:
        return names, []
    note = (
        f"Skipped {', '.join(wanted)}: the BCR 27 eBird folder (../shared/real/ebird-bcr27) "
        "is absent; set RESERVE_BCR27_DIR to its path to run them (eBird data is never "
        "shipped with reserve)."
    )
    kept = [n for n in names if n not in SURROGATES]
    if not kept:
        raise DataFileError(note.replace("Skipped", "Cannot run", 1))
    warnings.warn(note, UserWarning, stacklevel=3)
    return kept, [note]


def _elapsed_note(seconds: float, n_jobs: int, cv_jobs: int) -> str:
    inner = f" x {cv_jobs} CV workers each" if cv_jobs > 1 else ""
    return (
        f"Elapsed: {seconds / 60:.1f} min for this table ({n_jobs} worker processes{inner}, "
        f"{os.cpu_count()} CPUs visible)."
    )


def reproduce_paper(
    tables: Sequence[str] = ("3", "2"),
    *,
    out_dir: str | os.PathLike[str] = "benchmarks/results",
    datasets: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    n_splits: int = 10,
    k_fraction: float = 0.05,
    seed: int = 0,
    time_limit: float = 30.0,
    fit_time_limit: float = 10.0,
    data_dir: str | os.PathLike[str] | None = None,
    n_jobs: int = 2,
    cv_ttk: str = "fd",
    cv_jobs: int = 1,
    cv_fit_time_limit: float = 3.0,
    progress: Callable[[RunRecord, int], None] | None = None,
) -> dict[str, str]:
    """Run the requested tables, write ``paper_table<N>.md`` and ``paper_table<N>_runs.csv``
    (names distinct from the other benchmark scripts' results); return the markdown per
    output name. Nothing is written unless every requested table finished.

    ``datasets`` and ``methods`` default to the paper's choices for each table; Table 3's
    default also holds the BCR 27 surrogates when their eBird folder is present. A surrogate
    whose folder is absent is skipped with a warning and a note in the markdown. A Table 3 of
    surrogates only is written as ``paper_table3_bcr27.md`` / ``_runs.csv`` (output name
    ``"3_bcr27"``), so it never replaces the full ``paper_table3.md``. ``cv_ttk``, ``cv_jobs``
    and ``cv_fit_time_limit`` are :func:`run_table3`'s. Each markdown ends with the per-fit
    time limits and the table's elapsed time.
    """
    tables = _check_names(tables, ("2", "3"), "table")
    out: dict[str, tuple[str, list[RunRecord]]] = {}
    for t in tables:
        if t == "3":
            names = _check_names(datasets or DATASETS, DATASETS, "dataset")
            names, notes = _available(names)
            t0 = time.perf_counter()
            recs = run_table3(
                names,
                methods or DEFAULT_TABLE3_METHODS,
                n_splits=n_splits,
                k_fraction=k_fraction,
                seed=seed,
                time_limit=time_limit,
                fit_time_limit=fit_time_limit,
                data_dir=data_dir,
                n_jobs=n_jobs,
                cv_ttk=cv_ttk,
                cv_jobs=cv_jobs,
                cv_fit_time_limit=cv_fit_time_limit,
                progress=progress,
            )
            notes = [
                load_surrogate(n).describe(n_splits, k_fraction) for n in names if n in SURROGATES
            ] + notes
            notes.append(
                f"Per-fit time limits: TSVM {fit_time_limit:g} s in the final fit and "
                f"{cv_fit_time_limit:g} s in each CV fit; TTK-MIP {time_limit:g} s."
            )
            notes.append(_elapsed_note(time.perf_counter() - t0, n_jobs, cv_jobs))
            key = "3_bcr27" if all(n in SURROGATES for n in names) else "3"
            out[key] = (format_table3(recs, notes=notes), recs)
        else:
            t0 = time.perf_counter()
            recs = run_table2(
                datasets or ("diabetes", "ionosphere", "sonar"),
                methods or ("SVM", "AATP", "TTK-MIP", "TTK-FD"),
                n_splits=n_splits,
                k_fraction=k_fraction,
                seed=seed,
                time_limit=time_limit,
                fit_time_limit=fit_time_limit,
                data_dir=data_dir,
                n_jobs=n_jobs,
                progress=progress,
            )
            elapsed = _elapsed_note(time.perf_counter() - t0, n_jobs, 1)
            out[t] = (format_table2(recs) + f"\n- {elapsed}\n", recs)
    for t, (md, recs) in out.items():
        write_csv(recs, Path(out_dir) / f"paper_table{t}_runs.csv")
        write_text(md, Path(out_dir) / f"paper_table{t}.md")
    return {t: md for t, (md, _) in out.items()}
