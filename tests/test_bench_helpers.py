"""Tests for the logic of the peers and stability benchmarks (no fits of the real suites)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from benchmarks.bench_peers import (
    AUTO_VARIANTS,
    METHODS,
    SCORERS,
    append_records,
    default_methods,
    effort_variants,
    read_records,
    suite_report,
    with_effort,
)
from benchmarks.bench_stability import fold_budget_groups, largest_drop, parse_ks
from reserve.solvers import fold_k


def test_largest_drop_compares_adjacent_budgets_only():
    assert largest_drop([10, 11, 12], [0.5, 0.6, 0.7]) == (0.0, 10)
    assert largest_drop([28, 29, 30, 31], [0.89, 0.86, 0.63, 0.19]) == (0.44, 30)
    # 20 -> 30 is not adjacent: its fall is no drop between adjacent budgets
    assert largest_drop([10, 11, 20, 30], [0.9, 0.85, 0.9, 0.1]) == (pytest.approx(0.05), 10)


def test_parse_ks():
    assert parse_ks("10-12") == [10, 11, 12]
    assert parse_ks("28-29,10,28") == [10, 28, 29]


def test_fold_budget_groups_split_where_a_fold_budget_changes():
    n_lab, n_pos, m = 30, 4, 100
    ks = list(range(1, 60))
    groups = fold_budget_groups(ks, n_lab, n_pos, m)
    assert sorted(k for g in groups for k in g) == ks

    # brute force: every fold size 9..11 and positives 0..3 the stratified folds may hold
    def sig(k):
        return [fold_k(n, p, k, m) for n in range(9, 12) for p in range(0, 4)]

    for g in groups:
        assert all(sig(k) == sig(g[0]) for k in g)
    for a, b in itertools.combinations(groups, 2):
        assert sig(a[0]) != sig(b[0])
    assert len(groups) > 1  # fold budgets do grow with k here


def test_with_effort_sets_unlabelled_rows_to_the_labelled_median():
    raw = np.arange(8.0).reshape(4, 2)
    effort = pd.DataFrame({"n_checklists": [1, 3, 9, 40], "effort_km": [0.0, 2.0, 5.0, 0.0]})
    X = with_effort(raw, effort, np.array([True, True, True, False]))
    assert X.shape == (4, 4)
    np.testing.assert_array_equal(X[:, :2], raw)
    np.testing.assert_allclose(X[:, 2], np.log1p([1, 3, 9, 3]))
    np.testing.assert_allclose(X[:, 3], np.log1p([0, 2, 5, 2]))
    assert effort_variants("both") == (False, True) and effort_variants("on") == (True,)


def _rec(method, problem, precision, k=5):
    return {
        "suite": "s",
        "group": "g",
        "problem": problem,
        "k": k,
        "method": method,
        "precision": precision,
        "seconds": 0.5,
        "n_labelled": 10,
        "n_positive": 3,
        "n_candidates": 20,
    }


def test_records_round_trip_and_paired_counts(tmp_path):
    recs = [
        _rec("auto", "p1", 0.6),
        _rec("rf", "p1", 0.4),
        _rec("auto", "p2", 0.2),
        _rec("rf", "p2", 0.2),
        _rec("auto", "p3", 0.1),
        _rec("rf", "p3", 0.3),
    ]
    path = tmp_path / "r.csv"
    append_records(path, recs[:2], fresh=True)
    append_records(path, recs[2:], fresh=False)
    back = read_records(path)
    assert back == recs
    text = "\n".join(suite_report(back, ["auto", "rf"], "auto"))
    assert "| rf | 0.300 | 1/1/1 |" in text  # one win, one tie, one loss
    assert "| **all** | 0.300 | 0.300 |" not in text  # both means are the best: both bold
    assert "**0.300**" in text


def test_effort_report_pairs_each_suite_with_its_effort_variant():
    recs = [_rec("auto", "p1", 0.5), _rec("auto", "p2", 0.5)]
    recs += [
        {**_rec("auto", "p1", 0.7), "suite": "s + effort"},
        {**_rec("auto", "p2", 0.4), "suite": "s + effort"},
    ]
    from benchmarks.bench_peers import effort_report

    text = "\n".join(effort_report(recs, ["auto", "rf"]))
    assert "| auto | 0.500 | 0.550 | +0.050 | 1/0/1 |" in text
    assert "| rf |" not in text  # not run: no line
    assert effort_report(recs[:2], ["auto"]) == []  # one way only: nothing to pair


def test_the_start_benchmark_times_both_solvers_to_the_same_optimum(capsys):
    from benchmarks import bench_start

    assert bench_start.main(["--rows", "300", "--repeat", "1"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [r[0] for r in rows] == ["linear"] * 3 + ["spline"] * 3
    assert all(abs(float(r[-1])) < 1e-6 for r in rows)  # the objectives agree


def test_ensemble_rules_zmean_is_the_mean_of_standardised_scores():
    from benchmarks.bench_ensemble_rules import combinations, top

    rng = np.random.default_rng(0)
    S = rng.normal(size=(3, 50)) * np.array([[1.0], [10.0], [0.1]]) + 5.0
    rules = combinations(S)
    by_hand = ((S - S.mean(axis=1, keepdims=True)) / S.std(axis=1, keepdims=True)).mean(axis=0)
    np.testing.assert_allclose(rules["zmean"], by_hand)
    np.testing.assert_allclose(rules["zclip3"], by_hand)  # nothing beyond 3 sd here
    # Borda: the mean rank, whatever each member's scale
    ranks = np.argsort(np.argsort(S, axis=1), axis=1).mean(axis=0)
    chosen = top(rules["rankmean"], 5)
    assert ranks[chosen].min() >= np.delete(ranks, chosen).max()
    # one member's outlier decides the mean of z-scores, not the median
    S[0, 7] = 1e3
    assert top(combinations(S)["zmean"], 1)[0] == 7
    assert top(combinations(S)["zmedian"], 1)[0] != 7
    Z = (S - S.mean(axis=1, keepdims=True)) / S.std(axis=1, keepdims=True)
    assert Z[0, 7] > 3.0  # the product's mean holds the outlier to 3 sd
    np.testing.assert_allclose(combinations(S)["zclip3"], np.clip(Z, -3.0, 3.0).mean(axis=0))


def test_cv_forest_fold_scores_read_one_ranking_at_three_depths():
    from benchmarks.bench_cv_forest import fold_scores

    s = np.arange(100.0)[::-1]  # row 0 scores best
    y = np.zeros(100, dtype=int)
    y[[0, 1, 3, *range(11, 28)]] = 1  # 20 positives: 3 in the top 10, the rest below
    # k = 5 of 100 candidates: the share is 5 rows, AutoTTK's budget half the positives, 10
    assert fold_k(100, 20, 5, 100) == 10
    got = fold_scores(s, y, 5, 100)
    assert got["true"] == pytest.approx(3 / 5)
    assert got["auto"] == pytest.approx(3 / 10)
    hits = np.cumsum(y[:10])
    assert got["mean"] == pytest.approx(np.mean(hits / np.arange(1, 11)))
    # the forest's view or TTK's: a better ranking never scores lower at any depth
    better = fold_scores(np.where(y == 1, 1.0, 0.0) + s * 1e-6, y, 5, 100)
    assert all(better[name] >= got[name] for name in got)


def test_survey_cache_tag_follows_the_code_a_run_comes_from_not_the_plans(tmp_path):
    from benchmarks.bench_surveys import code_tag

    (tmp_path / "solvers").mkdir()
    (tmp_path / "occupancy.py").write_text("A = 1\n")
    (tmp_path / "solvers" / "ttk.py").write_text("B = 1\n")
    (tmp_path / "surveys.py").write_text("C = 1\n")
    tag = code_tag(tmp_path)
    assert code_tag(tmp_path) == tag and len(tag) == 10
    (tmp_path / "surveys.py").write_text("C = 2\n")  # the plans: the cached runs stand
    assert code_tag(tmp_path) == tag
    (tmp_path / "solvers" / "ttk.py").write_text("B = 2\n")  # a run's code: they do not
    assert code_tag(tmp_path) != tag


def _survey_records(draws_of: dict[str, list[int]]) -> pd.DataFrame:
    """Records of two cases at M = 10: each plan's gain is ``0.1 * draw`` plus an offset."""
    offset = {"suggested": 0.02, "uncertain": 0.0, "top": -0.01}
    rows = []
    for seed in (0, 1):
        for plan, draws in draws_of.items():
            for r in draws:
                gain = offset[plan] + 0.1 * r + 0.01 * seed
                rows.append(
                    {
                        "seed": seed,
                        "species": "S",
                        "k": 30,
                        "m": 10,
                        "plan": plan,
                        "draw": r,
                        "precision": 0.5 + gain,
                        "base": 0.5,
                        "gain": gain,
                        "n_detected": 1,
                        "seconds": 1.0,
                        "expected": np.nan,
                        "base_seconds": 2.0,
                        "reselection": "refit",
                    }
                )
    return pd.DataFrame(rows)


def test_survey_report_averages_each_case_over_its_outcome_draws():
    from benchmarks.bench_surveys import first_draw, over_draws, report

    records = _survey_records({"suggested": [0, 1, 2], "uncertain": [0, 1, 2], "top": [0]})
    per = over_draws(records).set_index(["plan", "seed"])["gain"]
    # the mean over draws 0-2 of 0.1 r is 0.1; top, measured on draw 0 only, is left out
    assert per[("suggested", 1)] == pytest.approx(0.02 + 0.1 + 0.01)
    assert per[("uncertain", 0)] == pytest.approx(0.1)
    assert set(per.index.get_level_values("plan")) == {"suggested", "uncertain"}
    assert (first_draw(records)["draw"] == 0).all() and len(first_draw(records)) == 6
    text = report(records, "cmd")
    # the main tables read draw 0 alone: the same as a report of draw 0's records
    head = text.split("\n## Averaged over outcome draws")[0]
    assert head == report(first_draw(records).drop(columns="draw"), "cmd")
    assert "| 10 | 3 | uncertain | +12.50 | +10.50 | 2/0, 0.5 | +2.00 ± 0.00 |" in text
    assert "## Averaged" not in report(first_draw(records), "cmd")


def test_auto_variants_fix_one_choice_and_run_only_when_named():
    from reserve.solvers import AutoTTK

    assert set(AUTO_VARIANTS) <= set(METHODS) & set(SCORERS)
    assert set(default_methods(METHODS)) == set(METHODS) - set(AUTO_VARIANTS)
    assert "auto" in default_methods(METHODS)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = np.r_[(X[:24, 0] > 0).astype(int), -np.ones(36, dtype=int)]
    est = AutoTTK(k=5, random_state=0, models=("linear",)).fit(X, y)
    scores = SCORERS["auto-linear"](X, y, 5, 0)
    assert scores.shape == (36,)
    np.testing.assert_array_equal(scores, est.decision_function(X[y == -1]))
    assert {m for m, _, _ in est.members_} == {"linear"}
    winner = AutoTTK(k=5, random_state=0, ensemble="none", small_training=0).fit(X, y)
    assert len(winner.members_) == 1
    np.testing.assert_array_equal(
        SCORERS["auto-winner"](X, y, 5, 0), winner.decision_function(X[y == -1])
    )
    # 24 labelled rows: the default compares the linear map alone, auto-ensemble every map
    assert {m for m, _, _ in AutoTTK(k=5, random_state=0).fit(X, y).members_} == {"linear"}
    every = AutoTTK(k=5, random_state=0, small_training=0).fit(X, y)
    assert set(every.cv_results_["model"]) == {"linear", "spline", "stack", "forest"}
    np.testing.assert_array_equal(
        SCORERS["auto-ensemble"](X, y, 5, 0), every.decision_function(X[y == -1])
    )


def test_small_training_cuts_the_labelled_rows_and_keeps_rows_aligned():
    from benchmarks.bench_peers import Problem
    from benchmarks.bench_small_training import cut_problem

    y = np.r_[np.ones(12), np.zeros(48), -np.ones(30)].astype(int)
    X = np.arange(y.size * 2, dtype=float).reshape(-1, 2)
    truth = np.r_[y[:60], np.ones(30, dtype=int)]
    ids = np.arange(y.size)
    base = Problem("region", "Virtual Thrush", "seed 0", X, y, truth, (5,), {"cell_id": ids})
    cut = cut_problem(base, 20, draw=1)
    assert cut.suite == "region, 20 labelled" and cut.name == "seed 0, draw 1"
    assert int((cut.y == 1).sum()) == 4 and int((cut.y == 0).sum()) == 16
    assert int((cut.y == -1).sum()) == 30
    kept = cut.context["cell_id"]
    np.testing.assert_array_equal(cut.X, X[kept])
    np.testing.assert_array_equal(cut.y, y[kept])
    np.testing.assert_array_equal(cut.truth, truth[kept])
    assert not np.array_equal(kept, cut_problem(base, 20, draw=0).context["cell_id"])
