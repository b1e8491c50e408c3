"""Tests for the helpers of the peers benchmark's several-species suite (no fits)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.bench_peers import main
from benchmarks.peers_multi import (
    append_records,
    budget_share_split,
    per_plan,
    plan_targets,
    read_records,
    report,
    score_plan,
    target_check,
)


def test_budget_share_split_takes_each_species_share_of_its_own_ranking():
    a = np.array([0, 1, 2, 3, 4])
    b = np.array([5, 6, 7, 8, 9])
    assert budget_share_split([a, b], 4).tolist() == [0, 1, 5, 6]
    # an odd budget: the first species takes the extra cell
    assert budget_share_split([a, b], 5).tolist() == [0, 1, 2, 5, 6]
    c = np.array([10, 11, 12])
    assert budget_share_split([a, b, c], 4).tolist() == [0, 1, 5, 10]


def test_budget_share_split_refills_overlaps_from_each_species_in_turn():
    a = np.array([0, 1, 2, 3, 4, 5])
    b = np.array([1, 0, 7, 8, 9, 10])
    # shares: a -> {0, 1}, b -> {1, 0}: two cells; refill a's next (2), b's next (7)
    assert budget_share_split([a, b], 4).tolist() == [0, 1, 2, 7]
    # a's next-best cells are already chosen by b: it skips them
    a = np.array([0, 5, 6, 2, 3])
    b = np.array([5, 6, 7, 8, 9])
    assert budget_share_split([a, b], 4).tolist() == [0, 5, 6, 2]
    # a species whose ranking is exhausted leaves the refill to the others
    assert budget_share_split([np.array([0, 1]), np.array([1, 0, 2, 3])], 4).tolist() == [
        0,
        1,
        2,
        3,
    ]
    with pytest.raises(ValueError, match="fewer than k"):
        budget_share_split([np.array([0, 1]), np.array([1, 0])], 3)


def test_budget_share_split_is_k_distinct_cells_from_the_rankings():
    rng = np.random.default_rng(3)
    for _ in range(50):
        n, S = 30, int(rng.integers(1, 5))
        rankings = [rng.permutation(n) for _ in range(S)]
        k = int(rng.integers(1, n + 1))
        rows = budget_share_split(rankings, k)
        assert rows.size == k and np.unique(rows).size == k
        for s, r in enumerate(rankings):  # each species' share is in, best first
            share = k // S + (1 if s < k % S else 0)
            assert set(r[:share].tolist()) <= set(rows.tolist())


def test_plan_targets_is_half_the_expected_occupied_cells_of_each_own_plan():
    P = np.array([[0.9, 0.0], [0.4, 0.2], [0.1, 0.7], [0.6, 0.5]])
    got = plan_targets(P, [np.array([0, 3]), np.array([2, 3, 1])])
    np.testing.assert_allclose(got, [0.75, 0.7])


def test_score_plan_counts_true_cells_and_targets_met():
    truth = np.array([[1, 0, 1], [1, 1, 0], [0, 1, 0], [0, 0, 0], [1, 1, 1]])
    s = score_plan(np.array([0, 1, 4]), truth, np.array([3.0, 2.5, np.nan]))
    assert s["occupied"].tolist() == [3, 2, 2]
    assert s["met"].tolist() == [True, False, False]  # 2 < 2.5; no target: never met
    assert (s["n_met"], s["total"]) == (1, 7)
    # a target met exactly counts as met
    assert score_plan(np.array([2]), truth, np.array([0.0, 1.0, 0.0]))["n_met"] == 3


def _records():
    recs = []
    # two problems, one budget, two species; ours meets both targets, split one, rf none
    occupied = {
        ("p1", "ours"): (5, 4),
        ("p1", "split"): (5, 1),
        ("p1", "rf+targets"): (2, 1),
        ("p2", "ours"): (3, 3),
        ("p2", "split"): (4, 4),
        ("p2", "rf+targets"): (1, 1),
    }
    for (problem, method), occ in occupied.items():
        for s, name in enumerate(("A", "B")):
            recs.append(
                {
                    "suite": "multi (test)",
                    "problem": problem,
                    "k": 10,
                    "method": method,
                    "species": name,
                    "target": 3.0,
                    "expected": 2.0,
                    "occupied": occ[s],
                    "met": int(occ[s] >= 3.0),
                    "target_true": 2.0,
                    "met_true": int(occ[s] >= 2.0),
                    "seconds": 1.0,
                    "status": "",
                }
            )
    return recs


def test_per_plan_and_target_check_name_the_shortfall(tmp_path):
    recs = _records()
    plans = per_plan(recs)
    assert plans[("multi (test)", "p1", 10, "ours")]["n_met"] == 2
    assert plans[("multi (test)", "p2", 10, "split")]["total"] == 8
    check = target_check(recs, ["ours", "split", "rf+targets"])
    assert check[2] == "- k = 10, targets met (ours 2.00): met"
    # truth unit: ours 2, split 1.5; total: ours 7.5, split 7.0, rf 2.5 -> met
    assert check[3:5] == [
        "- k = 10, targets met, truth unit (ours 2.00): met",
        "- k = 10, total occupied (ours 7.50): met",
    ]
    path = tmp_path / "r.csv"
    append_records(path, recs[:4], fresh=True)
    append_records(path, recs[4:], fresh=False)
    assert read_records(path) == recs
    text = report(recs, "cmd", ["a note"])
    assert "| ours | 2.00 | 2.00 | 7.5 |" in text and "- a note" in text


def test_target_check_says_by_how_much_a_target_is_missed():
    recs = [r for r in _records() if r["problem"] == "p2"]
    check = target_check(recs, ["ours", "split", "rf+targets"])
    assert check[2] == "- k = 10, targets met (ours 2.00): met"
    assert check[4] == "- k = 10, total occupied (ours 6.00): not met: below split by 2.00"


def test_multi_suite_runs_on_its_own(capsys):
    with pytest.raises(SystemExit):
        main(["--suites", "multi,region"])
    assert "on its own" in capsys.readouterr().err


def test_bcr27_folds_hide_their_candidates_and_lock_out_the_surveyed_rest(tmp_path):
    import pyogrio

    from benchmarks.peers_multi import bcr27_problems
    from reserve.paper.surrogates import BCR27_SPECIES, bcr27_instance
    from tests.test_surrogates import make_fake_bcr27

    source = make_fake_bcr27(tmp_path / "bcr27")
    insts = [bcr27_instance(code, source) for code in BCR27_SPECIES]
    is_cand = insts[0].y == -1
    cand = insts[0].cell_ids[is_cand]
    at = {int(c): i for i, c in enumerate(cand)}
    seen = []
    for problem in bcr27_problems(3, tmp_path, source):
        units = pyogrio.read_dataframe(problem.cells, layer="planning_units").set_index("cell_id")
        fold = units.loc[problem.candidates]
        # the fold's candidates: for sale, unsurveyed, their labels only in the truth
        assert (fold["role"] == "candidate").all() and not fold["locked_out"].any()
        assert (fold["label"] == -1).all() and (fold["n_checklists"] == 0).all()
        rest = units[(units["role"] == "candidate") & ~units.index.isin(problem.candidates)]
        # every other surveyed private cell: locked out, with its own labels and checklists
        assert rest["locked_out"].all() and len(rest) + len(fold) == cand.size
        pos = [at[int(c)] for c in rest.index]
        mine = [at[int(c)] for c in problem.candidates]
        np.testing.assert_array_equal(rest["n_checklists"], insts[0].n_checklists[is_cand][pos])
        columns = [c for c in units.columns if c.startswith("label__")]
        for s, (inst, column) in enumerate(zip(insts, columns, strict=True)):
            np.testing.assert_array_equal(rest[column], inst.y_candidates[pos])
            np.testing.assert_array_equal(problem.truth[:, s], inst.y_candidates[mine])
        seen.extend(problem.candidates.tolist())
    assert sorted(seen) == sorted(cand.tolist())  # the folds partition the candidates
