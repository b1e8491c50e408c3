"""Tests for reserve.config: SelectOptions, the one place of the select defaults and checks."""

from __future__ import annotations

import dataclasses

import pytest

from reserve.config import CONFIG_KEYS, MAX_DEFAULT_JOBS, SELECT_DEFAULTS, SelectOptions
from reserve.errors import InvalidInputError


def test_defaults_come_from_select_defaults():
    opts = SelectOptions(budget=3)
    for name in ("method", "model", "seed", "time_limit", "bootstrap", "n_jobs"):
        assert getattr(opts, name) == getattr(SELECT_DEFAULTS, name)
    # C is chosen with the default model; a linear fit without a C uses TTK's default
    assert opts.C is None and opts.fixed_C == SELECT_DEFAULTS.C
    # every option of the command is an attribute; map_dir alone is no option (not in a file)
    names = {f.name for f in dataclasses.fields(SelectOptions)}
    assert set(CONFIG_KEYS) == names - {"map_dir"}


def test_default_n_jobs_is_one_per_available_processor_capped(monkeypatch):
    import os

    from reserve import config

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(3)), raising=False)
    assert config.SelectDefaults().n_jobs == min(3, MAX_DEFAULT_JOBS)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert config.SelectDefaults().n_jobs == MAX_DEFAULT_JOBS
    assert 1 <= SELECT_DEFAULTS.n_jobs <= MAX_DEFAULT_JOBS


def test_options_are_frozen_and_normalised():
    opts = SelectOptions(budget=3, method=" SVM ", C="auto", species="Wood Thrush")
    assert (opts.method, opts.C, opts.species) == ("svm", "cv", ("Wood Thrush",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.budget = 4  # type: ignore[misc]


def test_text_is_parsed_only_from_sources():
    assert SelectOptions.from_sources({"budget": "30", "n_jobs": "2"}).budget == 30
    assert SelectOptions.from_sources({"budget": "30"}).out == SELECT_DEFAULTS.out
    with pytest.raises(InvalidInputError, match="positive integer"):
        SelectOptions(budget="30")
    money = SelectOptions.from_sources({"budget": "12.5", "cost_column": "price"})
    assert money.budget == 12.5 and money.money


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"budget": None}, "budget is required"),
        ({"budget": 0}, "positive integer"),
        ({"budget": 3, "seed": -1}, "seed must be an integer >= 0"),
        ({"budget": 3, "time_limit": "soon"}, "time_limit must be a number"),
        ({"budget": 3, "overwrite": 1}, "overwrite must be true or false"),
        ({"budget": 3, "out": 5}, "out must be a path"),
        (
            {"budget": 3, "species": ["A", "B"], "method": "aatp", "joint_fit": True},
            "one species at a time",
        ),
    ],
)
def test_bad_options_are_refused(kw, message):
    with pytest.raises(InvalidInputError, match=message):
        SelectOptions(**kw)


def test_map_path(tmp_path):
    from pathlib import Path

    opts = SelectOptions(budget=7, method="svm", species=("Wood Thrush", "Quail"))
    assert opts.map_path(Path("x/cells.gpkg")) == Path(
        SELECT_DEFAULTS.map_dir, "georgia_svm_k7_wood_thrush_quail.html"
    )
    assert SelectOptions(budget=7, cells="a/b.gpkg", map=False).map_path(Path("a/b.gpkg")) is None
    for none in ("none", "False", " off "):  # --map none: no map, not a file named "none"
        opts = SelectOptions.from_sources({"budget": "7", "map": none})
        assert opts.map is False and opts.map_path(Path("a/b.gpkg")) is None
    assert SelectOptions(budget=7.5, cost_column="p").map_path(Path("c.gpkg")).name == (
        "georgia_ttk_cost7.5.html"
    )


def test_model_is_checked_and_resolved_per_method():
    with pytest.raises(InvalidInputError, match="auto, linear, spline"):
        SelectOptions(budget=3, model="gam")
    with pytest.raises(InvalidInputError, match="needs method 'ttk'"):
        SelectOptions(budget=3, method="svm", model="spline")
    assert SelectOptions(budget=3, method="svm").effective_model == "linear"
    two = SelectOptions(budget=3, species=["Wood Thrush", "Veery"])
    assert two.effective_model == "auto"  # each species' own fit
    joint = SelectOptions(budget=3, species=["Wood Thrush", "Veery"], joint_fit=True)
    assert joint.effective_model == "linear"
    assert SelectOptions(budget=3, model=" Spline ").effective_model == "spline"


def test_the_default_map_folder_is_an_attribute_not_a_hidden_one():
    from pathlib import Path

    cli = SelectOptions.from_sources({"budget": "4"})  # the command line's results/ and maps/
    assert (cli.out, cli.map_dir) == (SELECT_DEFAULTS.out, SELECT_DEFAULTS.map_dir)
    assert cli.map_path(Path("c.gpkg")).parent == Path(SELECT_DEFAULTS.map_dir)
    beside = SelectOptions.from_sources({"budget": "4", "out": "run1"})
    assert beside.map_dir is None and beside.map_path(Path("c.gpkg")).parent == Path("run1")
    assert "map_dir" not in cli.to_dict() and "_map_dir" not in vars(cli)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("effort", "yes", "effort must be true or false"),
        ("learn_from", "private", "learn_from='private' is unknown"),
        ("method", "ttk2", "method='ttk2' is unknown"),
        ("seed", 2**33, "seed must be an integer from 0"),
    ],
)
def test_a_config_file_value_is_checked_by_its_option(tmp_path, key, value, message):
    from reserve.config import check_config_values

    with pytest.raises(InvalidInputError, match=f"key '{key}' is invalid.*{message}"):
        check_config_values({"budget": 3, key: value}, tmp_path / "c.toml")
    with pytest.raises(InvalidInputError, match=message):  # the same check as the Python API
        SelectOptions(budget=3, **{key: value})


def test_a_config_file_may_turn_the_map_off(tmp_path):
    from pathlib import Path

    cfg = tmp_path / "c.toml"
    cfg.write_text("budget = 4\nmap = false\n")
    assert SelectOptions.from_sources({}, cfg).map_path(Path("c.gpkg")) is None
    cfg.write_text("budget = 4\nmap = 3\n")
    with pytest.raises(InvalidInputError, match=r"key 'map' is invalid.*map must be a path"):
        SelectOptions.from_sources({}, cfg)
