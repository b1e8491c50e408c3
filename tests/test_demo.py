"""The `make demo` pipeline: prints exactly k chosen rows and the objective."""

from __future__ import annotations

import re

from pipelines import demo


def test_demo_prints_k_rows_and_objective(capsys):
    model = demo.run("diabetes", seed=1)
    out = capsys.readouterr().out
    rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+(-?\d+\.\d+)\s+([01])$", out, flags=re.M)
    assert len(rows) == model.k == 19
    assert [int(r[1]) for r in rows] == model.selected_.tolist()
    assert f"objective {model.objective_:.3f}" in out
    assert "precision@19" in out


def test_demo_bad_dataset_is_one_line_and_exit_2(capsys):
    assert demo.main(["--dataset", "iris"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("demo: error: unknown dataset") and "\n" not in err
