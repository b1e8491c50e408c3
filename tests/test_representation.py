"""Several species planned together: options, the default-region run, its layers, bad input.

One module-scoped run on the default region (two virtual species, linear models for speed)
feeds the checks of the ``representation`` layer, which are recomputed from the
``planning_units`` layer's per-species probabilities.
"""

from __future__ import annotations

import numpy as np
import pyogrio
import pytest
from click.testing import CliRunner

from reserve.cli import main
from reserve.config import SelectOptions
from reserve.errors import InvalidInputError
from reserve.evaluate import evaluate_representation, read_representation, read_selection
from reserve.goals import Target, Weight, parse_targets, parse_weights
from reserve.maps import species_layer_name
from reserve.representation import REPRESENTATION_COLUMNS
from reserve.select import select_reserve
from tests.conftest import assert_one_line_error, snapshot

SPECIES = ("Virtual Thrush", "Virtual Quail")
TWO = ["--species", SPECIES[0], "--species", SPECIES[1]]


def test_targets_and_weights_parse_from_text_tables_and_objects():
    assert parse_targets(["Virtual Thrush=40", "Virtual Quail=50%"]) == (
        Target("Virtual Thrush", 40.0),
        Target("Virtual Quail", 50.0, share=True),
    )
    assert parse_targets({"Virtual Quail": "5%"}) == (Target("Virtual Quail", 5.0, True),)
    assert parse_weights({"Virtual Quail": 2}) == (Weight("Virtual Quail", 2.0),)
    assert Target("A", 10.0, share=True).absolute(total=50.0, base=3.0) == 8.0
    opts = SelectOptions(budget=30, species=list(SPECIES), weight=["Virtual Quail=2"])
    assert opts.weights() == (1.0, 2.0)
    assert opts.to_dict()["weight"] == ["Virtual Quail=2"]


def test_a_toml_file_takes_a_list_or_a_table(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        'budget = 30\nspecies = ["Virtual Thrush", "Virtual Quail"]\n'
        'target = ["Virtual Thrush=20", "Virtual Quail=1%"]\n'
        'weight = {"Virtual Quail" = 2}\nstrict_targets = true\n'
    )
    opts = SelectOptions.from_sources({}, path)
    assert opts.target == (Target("Virtual Thrush", 20.0), Target("Virtual Quail", 1.0, True))
    assert opts.weight == (Weight("Virtual Quail", 2.0),) and opts.strict_targets


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([*TWO, "--target", "Virtual Trush=4"], "did you mean 'Virtual Thrush'"),
        ([*TWO, "--weight", "Wood Thrush=2"], "not in the run"),
        ([*TWO, "--target", "Virtual Quail=-3"], "must be a number >= 0"),
        ([*TWO, "--target", "Virtual Quail=many"], "must be a number >= 0"),
        ([*TWO, "--weight", "Virtual Quail=heavy"], "weight for 'Virtual Quail'"),
        ([*TWO, "--target", "Virtual Quail=150%"], "at most 100%"),
        ([*TWO, "--target", "Virtual Quail"], "must be SPECIES=VALUE"),
        ([*TWO, "--target", "Virtual Quail=1", "--target", "Virtual Quail=2"], "more than once"),
        (["--species", SPECIES[0], "--target", "Virtual Thrush=3"], "two or more"),
        ([*TWO, "--joint-fit", "--target", "Virtual Quail=3"], "--joint-fit fits no targets"),
        (["--joint-fit"], "joint_fit needs two or more"),
    ],
)
def test_bad_targets_and_weights_are_one_line_and_write_nothing(workdir, args, needle):
    before = snapshot(workdir)
    res = CliRunner().invoke(main, ["select", "--budget", "30", *args])
    assert_one_line_error(res.stderr, res.exit_code, 2, needle)
    assert snapshot(workdir) == before


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan")
    result = select_reserve(
        30,
        species=list(SPECIES),
        target=["Virtual Thrush=15", "Virtual Quail=1%"],
        weight=["Virtual Quail=2"],
        model="linear",
        out=out,
        map=out / "map.html",
    )
    return result


def _layer(run, name):
    return pyogrio.read_dataframe(run.gpkg_path, layer=name, read_geometry=False)


def test_the_representation_layer_is_recomputed_from_the_probabilities(run):
    rep = _layer(run, "representation")
    units = _layer(run, "planning_units")
    assert list(rep.columns) == list(REPRESENTATION_COLUMNS)
    assert list(rep["species"]) == list(SPECIES)
    chosen = units["selected"].astype(bool)
    assert chosen.sum() == 30
    ranked = units["rank"] > 0
    for row in rep.itertuples(index=False):
        p = units["probability__" + row.species.lower().replace(" ", "_")]
        assert row.expected == pytest.approx(p[chosen].sum(), rel=1e-9)
        assert row.expected_total == pytest.approx(p[ranked].sum(), rel=1e-9)
        assert row.share == pytest.approx(row.expected / row.expected_total)
        assert row.shortfall == pytest.approx(max(row.target - row.expected, 0.0), abs=1e-9)
        assert bool(row.met) == (row.shortfall <= 1e-6)
        assert row.expected_low - 1 <= row.expected <= row.expected_high + 1
        assert row.reachable >= row.expected - 1e-9
    quail = rep.iloc[1]
    p = units["probability__virtual_quail"]
    assert quail.target == pytest.approx(0.01 * p[ranked].sum())  # 1% of the candidates'
    assert list(rep["weight"]) == [1.0, 2.0]


def test_the_score_is_the_weighted_sum_and_the_chosen_come_first(run):
    units = run.planning_units
    expected = units["probability__virtual_thrush"] + 2 * units["probability__virtual_quail"]
    ranked = units["rank"] > 0
    assert np.allclose(units.loc[ranked, "score"], expected[ranked])
    sel = run.selected
    assert list(sel["rank"]) == list(range(1, 31))
    assert {"probability__virtual_thrush", "probability__virtual_quail"} <= set(sel.columns)


def test_the_run_summary_reports_the_plan(run):
    s = _layer(run, "run_summary").iloc[0]
    assert s["species"] == ", ".join(SPECIES)
    assert s["n_targets"] == 2
    rep = _layer(run, "representation")
    assert s["n_targets_met"] == int(rep["met"].astype(bool).sum())
    for key in ("plan_solver", "plan_objective", "gap", "utility_bound", "shortfall_bound"):
        assert key in s.index
    assert s["plan_objective"] == "shortfall, then utility"


def test_the_map_has_one_overlay_per_species(run):
    page = run.map_path.read_text()
    for name in SPECIES:
        assert species_layer_name(name) in page
    assert "calibrated probabilities of presence (what it adds to the plan)" in page


def test_evaluate_reports_each_species_against_its_truth(run):
    ids = read_selection(run.gpkg_path)
    table = evaluate_representation(ids, read_representation(run.gpkg_path))
    assert list(table["species"]) == list(SPECIES)
    assert (table["k"] == 30).all()
    for r in table.itertuples(index=False):
        assert r.met == (r.n_occupied >= r.target)
    res = CliRunner().invoke(main, ["evaluate", str(run.gpkg_path)])
    assert res.exit_code == 0, res.output
    assert res.output.count("precision@30") == 2 and "Virtual Quail" in res.output


def test_an_unreachable_target_warns_or_is_refused(workdir):
    args = ["select", "--budget", "5", *TWO, "--model", "linear", "--n-jobs", "1"]
    args += ["--target", "Virtual Quail=100%", "--map", "m.html", "--out", "o"]
    before = snapshot(workdir)
    res = CliRunner().invoke(main, [*args, "--strict-targets"])
    # reachable is known once the species are fitted: their progress lines come first
    said = [line for line in res.stderr.splitlines() if not line.startswith("[")]
    assert_one_line_error("\n".join(said), res.exit_code, 2, "can reach at most")
    assert snapshot(workdir) == before
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.stderr
    warned = [line for line in res.stderr.splitlines() if line.startswith("reserve: warning:")]
    assert any("can reach at most" in line and "shortfall" in line for line in warned)
    assert "representation" in res.stdout


def test_one_species_options_are_unchanged():
    with pytest.raises(InvalidInputError, match="two or more"):
        SelectOptions(budget=3, weight=["A=1"], species=["A"])
    assert not SelectOptions(budget=3).planned
