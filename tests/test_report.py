"""Tests for reserve.report: the typed record of a run and the text made from it."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import pytest

from reserve.report import Interval, RunReport, confidence_lines, summary_text
from reserve.select import select_reserve
from tests.test_select import write_units


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cells = write_units(tmp_path_factory.mktemp("report") / "c.gpkg")
    return select_reserve(5, cells, model="linear", seed=0)


def test_every_field_is_read_from_the_summary_under_its_name(run):
    """A field the summary does not hold would print its default silently: none may."""
    derived = {
        "species",
        "expected_precision",
        "expected_presences",
        "runtime_seconds",
        "created_utc",
        # several species planned together only
        "plan_solver",
        "plan_objective",
        "n_targets",
        "n_targets_met",
    }
    missing = [
        f for f in RunReport.__dataclass_fields__ if f not in derived and f not in run.summary
    ]
    assert missing == []


def test_the_record_holds_the_summary_values(run):
    s, r = run.summary, RunReport.from_summary(run.summary)
    assert (r.method, r.n_selected, r.n_candidates, r.budget) == (
        s["method"],
        s["n_selected"],
        s["n_candidates"],
        s["budget"],
    )
    assert isinstance(r.n_train, int) and r.c == s["c"] and r.c_source == s["c_source"]
    assert r.expected_occupied == Interval(
        s["expected_occupied"], s["expected_occupied_low"], s["expected_occupied_high"]
    )
    assert not r.money and r.species == () and r.expected_presences is None


def test_intervals_print_with_their_level():
    assert Interval(0.7, 0.65, 0.74).text(0.9) == "0.70 (90% 0.65-0.74)"
    assert Interval(12.34, 10.0, 15.0).text(0.8, ".1f", ".0f") == "12.3 (80% 10-15)"
    assert Interval(0.5).text(0.9) == "0.50"  # no interval: the figure alone
    assert math.isnan(Interval.read({}, "cv_precision").value)


def test_several_species_figures_are_read_per_species():
    s = {
        "species": "Wood Thrush, Veery",
        "expected_presences": 3.5,
        "expected_precision__wood_thrush": 0.6,
        "expected_precision__veery": 0.4,
    }
    r = RunReport.from_summary(s)
    assert r.species == ("Wood Thrush", "Veery") and r.expected_precision == (0.6, 0.4)
    assert RunReport.from_summary({"species": "Veery"}).expected_presences is None


def test_confidence_lines_say_the_verdict_and_the_check():
    r = RunReport(
        signal="weak",
        signal_evidence="cross-validation",
        check_note="no cells",
        n_selected=4,
        expected_occupied=Interval(2.0, 1.0, 3.0),
    )
    lines = confidence_lines(r)
    assert lines[0] == "signal weak: decided by the cross-validation"
    assert lines[1] == (
        "private-land check: no cells; the verdict rests on the training cells alone"
    )
    assert lines[2] == (
        "expected occupied: 2.0 (90% 1-3) of the 4 chosen cells (the species present, "
        "detected or not)"
    )
    assert lines[3].startswith("surveys of the chosen cells: 0 with a detection")
    assert len(lines) == 4  # no cross-validation figure (NaN), no prevalence note
    r = replace(r, expected_occupied_blind=1.25, detection_per_checklist=0.3)
    assert confidence_lines(r)[2:] == [
        "expected occupied: 2.0 (90% 1-3) of the 4 chosen cells, against 1.2 for a blind "
        "pick (the species present, detected or not)",
        "surveys of the chosen cells: 0 with a detection of their own, 0 surveyed 0+ times "
        "without one; a checklist in an occupied cell detects the species with probability 0.30",
    ]


def test_summary_text_is_the_same_from_the_mapping_or_the_record(run):
    text = summary_text(run.summary, run.selected)
    assert text == summary_text(RunReport.from_summary(run.summary), run.selected)
    assert text.startswith(f"the species: {run.summary['n_selected']} cells to buy of ")
    assert all(line in text for line in confidence_lines(RunReport.from_summary(run.summary)))
    body = text.split("\n\n")[-1]
    ids = pd.Series(run.selected["cell_id"]).astype(str)
    assert all(i in body for i in ids)
