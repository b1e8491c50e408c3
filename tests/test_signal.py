"""Ties at the budget's cut and the model's signal: said on stderr, in run_summary, on the map."""

from __future__ import annotations

import numpy as np
import pyogrio
import pytest
from click.testing import CliRunner

from reserve.cli import main
from reserve.confidence import CrossValidation, PrivateCheck, cv_interval
from reserve.select import select_reserve
from reserve.signal import CutoffTies, assess_signal, break_cutoff_ties
from tests.test_select import FEATURES, make_units, write_units


def test_no_tie_across_the_cut_leaves_the_choice_alone():
    s = np.array([5.0, 4.0, 3.0, 3.0, 1.0])
    new, rest, ties = break_cutoff_ties(s, np.arange(5), np.array([0, 1, 2, 3]))
    assert new.tolist() == [0, 1, 2, 3] and rest.size == 0
    assert (ties.n_tied, ties.n_tied_chosen, ties.n_drawn) == (2, 2, 0)


def test_a_straddling_tie_is_a_seeded_draw_not_the_lowest_ids():
    n, k = 1000, 20
    s = np.zeros(n)
    chosen = np.arange(k)  # what an id-order tie-break gives: the first cells of the grid
    new, rest, ties = break_cutoff_ties(s, np.arange(n), chosen, seed=0)
    assert len(set(new.tolist())) == k and ties.flat and ties.n_drawn == k
    assert not set(new.tolist()) <= set(range(100))  # spread over the grid, not its corner
    assert np.mean(new) > 200  # ids 0..999: the draw's mean is far from the corner's 9.5
    again, _, _ = break_cutoff_ties(s, np.arange(n), chosen, seed=0)
    other, _, _ = break_cutoff_ties(s, np.arange(n), chosen, seed=1)
    assert again.tolist() == new.tolist() and set(other.tolist()) != set(new.tolist())
    assert sorted(np.concatenate([new, rest]).tolist()) == list(range(n))


def test_the_secondary_score_breaks_a_tie_before_the_draw():
    s = np.array([2.0, 1.0, 1.0, 1.0, 1.0])
    sec = np.array([0.0, 0.1, 0.9, 0.5, 0.2])
    new, rest, ties = break_cutoff_ties(s, np.arange(5), np.array([0, 1, 2]), secondary=sec)
    assert new.tolist() == [0, 2, 3] and rest.tolist() == [4, 1]
    assert ties.n_drawn == 0 and ties.n_tied == 4  # the secondary separated the tie


@pytest.mark.parametrize("scale", [1.0, 0.1, 100.0])
def test_the_draw_count_does_not_depend_on_the_secondary_scale(scale):
    # 3 cells tie at 1.0; two chosen; the secondary puts 1 first and leaves 2 and 3 tied:
    # one of them is kept by the draw, whatever the secondary score's units
    s = np.array([5.0, 1.0, 1.0, 1.0, 0.0])
    sec = scale * np.array([0.0, 10.0, 3.0, 3.0, 0.0])
    new, rest, ties = break_cutoff_ties(s, np.arange(5), np.array([0, 1, 2]), secondary=sec)
    assert new[:2].tolist() == [0, 1] and rest.size == 1 and ties.n_tied == 3 and ties.n_drawn == 1


NO_CHECK = PrivateCheck(False, "not available: no candidate cell was surveyed")


def check(low, high):
    return PrivateCheck(
        True, n_surveyed=200, n_detected=40, auc=(low + high) / 2, auc_low=low, auc_high=high
    )


def test_ties_decide_first():
    cv = cv_interval(np.array([0.9, 0.8, 0.9, 0.85]), 0.5, 0.2)
    flat = assess_signal(CutoffTies(50, 10, 10, True), 10, check(0.7, 0.8), cv, 100, 30, 0)
    assert flat.signal == "none" and flat.evidence == "ties"
    drawn = assess_signal(CutoffTies(50, 10, 10, False), 10, NO_CHECK, cv, 100, 30, 0)
    assert drawn.signal == "none"
    part = assess_signal(CutoffTies(50, 3, 3, False), 10, check(0.7, 0.8), cv, 100, 30, 0)
    assert part.signal == "weak" and "3 of the 10" in part.note and "--legend" in part.note


def test_a_tie_the_secondary_score_broke_is_reported():
    # every chosen cell ties at the cut and the secondary score chose them: no draw, yet the
    # model chose none of them, so a clear check still gives "weak", and the note says why
    cv = cv_interval(np.array([0.9, 0.8, 0.9, 0.85]), 0.5, 0.2)
    mass = CutoffTies(3943, 30, 0, False)
    told = assess_signal(mass, 30, check(0.7, 0.8), cv, 1414, 136, 0)
    assert told.signal == "weak" and told.evidence == "ties"
    assert "3943 candidates tie" in told.note and "secondary score" in told.note
    none = assess_signal(mass, 30, check(0.2, 0.4), cv, 1414, 136, 0)
    assert none.signal == "none" and "secondary score" in none.note
    # a tie that holds only part of the chosen, or no more than the chosen, changes nothing
    part = assess_signal(CutoffTies(50, 3, 0, False), 30, check(0.7, 0.8), cv, 1414, 136, 0)
    exact = assess_signal(CutoffTies(30, 30, 0, False), 30, check(0.7, 0.8), cv, 1414, 136, 0)
    assert part.signal == exact.signal == "ok"


def test_the_private_land_check_decides_by_its_interval():
    clear, cv_good = CutoffTies(1, 1, 0, False), cv_interval(np.full(6, 0.9), 0.5, 0.2)
    ok = assess_signal(clear, 10, check(0.55, 0.7), CrossValidation(), 5, 1, 0)
    assert ok.signal == "ok" and ok.note == "" and ok.evidence == "private-land check"
    # cross-validation cannot overrule the land being bought
    weak = assess_signal(clear, 10, check(0.45, 0.6), cv_good, 100, 30, 0)
    assert weak.signal == "weak" and "blind pick" in weak.note
    assert "--learn-from surveyed" in weak.note and "0.45-0.60" in weak.note
    worse = assess_signal(clear, 10, check(0.3, 0.45), cv_good, 100, 30, 0)
    assert worse.signal == "none" and "worse than a blind pick" in worse.note


def test_without_the_check_cross_validation_decides_by_its_interval():
    clear = CutoffTies(1, 1, 0, False)
    few = assess_signal(clear, 10, NO_CHECK, cv_interval(np.full(4, 0.9), 0.5, 0.3), 10, 3, 0)
    assert few.signal == "none" and few.evidence == "too few training cells"
    good = cv_interval(np.array([0.6, 0.7, 0.65, 0.6, 0.7, 0.65]), 0.5, 0.3)
    assert assess_signal(clear, 10, NO_CHECK, good, 100, 30, 0).signal == "ok"
    wide = cv_interval(np.array([0.0, 1.0, 0.5, 0.2]), 0.5, 0.3)  # the interval spans 0.3
    verdict = assess_signal(clear, 10, NO_CHECK, wide, 100, 30, 0)
    assert verdict.signal == "weak" and verdict.evidence == "cross-validation"
    assert "interval" in verdict.note
    unmeasured = assess_signal(clear, 10, NO_CHECK, CrossValidation(), 100, 30, 0)
    assert unmeasured.signal == "weak" and "--model auto" in unmeasured.note


def flat_cells(tmp_path):
    """Every cell has the same habitat: no model can rank the candidates."""
    units = make_units(n_side=14)
    for col in FEATURES:
        units[col] = 0.5
    units.loc[units["role"] == "other", FEATURES] = 0.1  # keep the columns non-constant
    return write_units(tmp_path / "flat.gpkg", units)


def test_flat_scores_warn_everywhere_and_draw_neutrally(tmp_path):
    cells = flat_cells(tmp_path)
    k = 8
    res = CliRunner().invoke(
        main,
        [
            "select",
            "--budget",
            str(k),
            "--cells",
            str(cells),
            "--model",
            "linear",
            "--out",
            str(tmp_path / "out"),
            "--map",
            str(tmp_path / "map.html"),
        ],
    )
    assert res.exit_code == 0, res.output
    warnings = [line for line in res.stderr.splitlines() if line.startswith("reserve: warning")]
    assert len(warnings) == 1 and "ranks nothing" in warnings[0]
    assert "--legend" in warnings[0] and "elevation" in warnings[0] and "public land" in warnings[0]
    row = pyogrio.read_dataframe(tmp_path / "out" / "reserve.gpkg", layer="run_summary").iloc[0]
    n_cand = int(row["n_candidates"])
    assert row["signal"] == "none" and int(row["n_tied_at_cutoff"]) == n_cand
    assert int(row["n_tied_drawn"]) == k
    # no signal: the run still states probabilities, and says they are the prevalence
    assert "probability of presence is the occupancy prevalence" in res.stdout
    probability = pyogrio.read_dataframe(tmp_path / "out" / "reserve.gpkg", layer="selected")[
        "probability"
    ]
    assert np.ptp(probability.to_numpy()) == 0
    chosen = pyogrio.read_dataframe(tmp_path / "out" / "reserve.gpkg", layer="selected")
    units = pyogrio.read_dataframe(cells, layer="planning_units")
    lowest = sorted(units.loc[units["role"] == "candidate", "cell_id"])[:k]
    assert sorted(chosen["cell_id"]) != lowest  # never the first cells of the grid
    page = (tmp_path / "map.html").read_text()
    assert 'class="reserve-banner reserve-none"' in page and "ranks nothing" in page


def surveyed_cells(path, seed=0):
    """The fixture's cells with most candidates surveyed too (detection follows forest)."""
    units = make_units(n_side=16, seed=seed)
    rng = np.random.default_rng(seed + 1)
    cand = (units["role"] == "candidate").to_numpy() & (rng.random(len(units)) < 0.7)
    p = 1 / (1 + np.exp(-(5 * units["lc_forest"] - 2 * units["lc_crop"] - 2)))
    units.loc[cand, "label"] = (rng.random(int(cand.sum())) < p[cand]).astype(int)
    units.loc[cand, "n_checklists"] = rng.integers(1, 6, int(cand.sum()))
    return write_units(path, units)


def test_a_model_with_signal_does_not_warn(tmp_path):
    cells = surveyed_cells(tmp_path / "cells.gpkg")
    res = CliRunner().invoke(
        main,
        [
            "select",
            "--budget",
            "6",
            "--cells",
            str(cells),
            "--model",
            "linear",
            "--out",
            str(tmp_path / "out"),
            "--map",
            str(tmp_path / "map.html"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "reserve: warning" not in res.stderr
    row = pyogrio.read_dataframe(tmp_path / "out" / "reserve.gpkg", layer="run_summary").iloc[0]
    assert row["signal"] == "ok" and row["signal_note"] in ("", None)
    assert row["signal_evidence"] == "private-land check" and row["check_auc_low"] > 0.5
    assert '<details class="reserve-banner' not in (tmp_path / "map.html").read_text()


def test_a_linear_model_with_nothing_to_check_it_is_weak(tmp_path):
    """No cross-validation (--model linear) and no surveyed candidate: nothing earned."""
    cells = write_units(tmp_path / "cells.gpkg")
    res = CliRunner().invoke(
        main,
        [
            "select",
            "--budget",
            "6",
            "--cells",
            str(cells),
            "--model",
            "linear",
            "--out",
            str(tmp_path / "out"),
            "--map",
            str(tmp_path / "map.html"),
        ],
    )
    assert res.exit_code == 0, res.output
    warnings = [line for line in res.stderr.splitlines() if line.startswith("reserve: warning")]
    assert len(warnings) == 1 and "nothing measured" in warnings[0]
    assert (
        "private-land check: not available: no candidate cell was surveyed; the verdict rests "
        "on the training cells alone" in res.stdout
    )


@pytest.mark.parametrize("seed", [0, 3])
def test_draw_is_deterministic_per_seed(tmp_path, seed):
    cells = flat_cells(tmp_path)
    a = select_reserve(5, cells, model="linear", seed=seed).selected["cell_id"].tolist()
    b = select_reserve(5, cells, model="linear", seed=seed).selected["cell_id"].tolist()
    assert a == b


def test_a_model_that_learned_from_the_surveyed_cells_is_not_told_to():
    weak = PrivateCheck(True, n_surveyed=200, n_detected=40, auc=0.5, auc_low=0.4, auc_high=0.6)
    told = assess_signal(CutoffTies(), 10, weak, CrossValidation(), 100, 30, 0)
    learned = assess_signal(CutoffTies(), 10, weak, CrossValidation(), 100, 30, 0, learned=True)
    assert "--learn-from surveyed" in told.note and "--learn-from" not in learned.note
    assert learned.signal == told.signal == "weak"
