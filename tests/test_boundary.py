"""TTK with a boundary penalty against brute force over every k-subset (shapely boundaries).

The brute-force optima of the 40 instances are cached (``ttk_boundary`` in
tests/data/oracle_optima.json; tests/test_oracle_cache.py re-runs a sample of them).
"""

from __future__ import annotations

import numpy as np
import pytest

from reserve.adjacency import grid_adjacency
from reserve.errors import InvalidInputError
from reserve.solvers import TTK, Boundary, hinge_objective
from tests._oracle import ORACLE_SEEDS, boundary_instance, union_boundary


def _term(cells, edge_factor):
    adj = grid_adjacency(cells)
    return Boundary(4 * adj.cell_size - (1 - edge_factor) * adj.outer(), adj.matrix())


def _fit_and_recompute(seed):
    """The polished fit's objective, recomputed from coef_, intercept_ and the shapely union."""
    X, y, cells, k, C, penalty, ef = boundary_instance(seed)
    model = TTK(k=k, C=C, boundary_penalty=penalty).fit(X, y, boundary=_term(cells, ef))
    lab = y != -1
    y_pm = np.where(y[lab] == 1, 1.0, -1.0)
    base = hinge_objective(model.coef_, model.intercept_, X[lab], y_pm, C)
    total = base + penalty * union_boundary(cells, model.selected_, ef)
    assert model.objective_ == pytest.approx(total, rel=1e-7)
    assert model.selected_.size == k and np.all(y[model.selected_] == -1)
    return total


def test_polish_with_penalty_within_one_percent_on_90_percent(oracle_optima):
    seeds = ORACLE_SEEDS["ttk_boundary"]
    ratios = []
    for seed in seeds:
        best = oracle_optima["ttk_boundary"][str(seed)]
        got = _fit_and_recompute(seed)
        assert got >= best - 1e-6 * max(1.0, best), seed  # never below the optimum
        ratios.append(got / best - 1.0)
    within = int(np.sum(np.asarray(ratios) <= 0.01))
    assert within >= 0.9 * len(seeds), sorted(ratios)[-5:]


def test_zero_penalty_is_the_plain_fit():
    X, y, cells, k, C, _, ef = boundary_instance(3)
    plain = TTK(k=k, C=C).fit(X, y)
    zero = TTK(k=k, C=C, boundary_penalty=0.0).fit(X, y, boundary=_term(cells, ef))
    assert zero.selected_.tolist() == plain.selected_.tolist()
    assert zero.objective_ == plain.objective_
    assert zero.boundary_length_ == pytest.approx(union_boundary(cells, zero.selected_, ef))


def test_a_larger_penalty_never_lengthens_the_boundary():
    X, y, cells, k, C, _, ef = boundary_instance(5)
    term = _term(cells, ef)
    lengths = [
        TTK(k=k, C=C, boundary_penalty=lam).fit(X, y, boundary=term).boundary_length_
        for lam in (0.0, 0.5, 5.0)
    ]
    assert lengths[2] <= lengths[0]
    assert lengths[2] == min(lengths)


@pytest.mark.parametrize(
    ("params", "with_term", "match"),
    [
        ({"boundary_penalty": 0.5}, False, "needs boundary= in fit"),
        ({"boundary_penalty": -1.0}, True, "boundary_penalty"),
        ({"boundary_penalty": "x"}, True, "boundary_penalty"),
        ({"boundary_penalty": 0.5, "polish": False}, True, "needs polish=True"),
    ],
)
def test_bad_penalty_is_refused(params, with_term, match):
    X, y, cells, k, C, _, ef = boundary_instance(0)
    term = _term(cells, ef) if with_term else None
    with pytest.raises(InvalidInputError, match=match):
        TTK(k=k, C=C, **params).fit(X, y, boundary=term)


def test_a_term_of_the_wrong_size_is_refused():
    X, y, cells, k, C, _, ef = boundary_instance(0)
    with pytest.raises(InvalidInputError, match="over the 16 rows of X"):
        TTK(k=k, C=C, boundary_penalty=1.0).fit(X, y, boundary=_term(cells[:8], ef))


@pytest.mark.parametrize("seed", range(6))
def test_compact_selection_is_the_brute_force_optimum(seed):
    from itertools import combinations

    from reserve.solvers.compact import select_compact

    _, _, cells, k, _, _, ef = boundary_instance(seed)
    rng = np.random.default_rng(seed)
    scores = rng.random(cells.size)
    penalty = [0.02, 0.1, 0.3][seed % 3]
    got = select_compact(scores, _term(cells, ef), k, penalty)
    best = max(
        scores[list(S)].sum() - penalty * union_boundary(cells, list(S), ef)
        for S in combinations(range(cells.size), k)
    )
    recomputed = scores[got.selected].sum() - penalty * union_boundary(cells, got.selected, ef)
    assert got.status == "optimal"
    assert got.objective == pytest.approx(recomputed, rel=1e-9)
    assert recomputed == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 5, 7, 11])
def test_the_mip_with_penalty_reaches_the_brute_force_optimum(oracle_optima, seed):
    X, y, cells, k, C, penalty, ef = boundary_instance(seed)
    model = TTK(k=k, C=C, solver="mip", time_limit=60, boundary_penalty=penalty)
    model.fit(X, y, boundary=_term(cells, ef))
    lab = y != -1
    y_pm = np.where(y[lab] == 1, 1.0, -1.0)
    base = hinge_objective(model.coef_, model.intercept_, X[lab], y_pm, C)
    total = base + penalty * union_boundary(cells, model.selected_, ef)
    best = oracle_optima["ttk_boundary"][str(seed)]
    assert model.status_ in ("optimal", "gap_limit")  # proved, to the 1e-6 gap
    assert model.objective_ == pytest.approx(total, rel=1e-7)
    assert total == pytest.approx(best, rel=1e-5)
    assert model.bound_ <= total + 1e-9


def _exact_total(seed, mip_solver, cost=None, budget=None):
    """An exact fit with the penalty, its total recomputed from the outputs (shapely union)."""
    X, y, cells, k, C, penalty, ef = boundary_instance(seed)
    model = TTK(
        k=None if cost is not None else k,
        budget=budget,
        C=C,
        solver="mip",
        mip_solver=mip_solver,
        time_limit=60,
        boundary_penalty=penalty,
    )
    model.fit(X, y, boundary=_term(cells, ef), cost=cost)
    lab = y != -1
    y_pm = np.where(y[lab] == 1, 1.0, -1.0)
    base = hinge_objective(model.coef_, model.intercept_, X[lab], y_pm, C)
    total = base + penalty * union_boundary(cells, model.selected_, ef)
    assert model.objective_ == pytest.approx(total, rel=1e-7)
    assert model.bound_ <= total + 1e-9
    outside = np.setdiff1d(np.flatnonzero(y == -1), model.selected_)
    assert np.all(X[outside] @ model.coef_ + model.intercept_ <= 1e-9)  # transductive
    return model, total


def test_the_bnb_with_penalty_proves_the_brute_force_optimum_on_all_40(oracle_optima):
    nodes = []
    for seed in ORACLE_SEEDS["ttk_boundary"]:
        model, total = _exact_total(seed, "bnb")
        assert model.mip_solver_ == "bnb"
        assert model.status_ in ("optimal", "gap_limit"), seed
        assert model.selected_.size == boundary_instance(seed)[3]
        assert total == pytest.approx(oracle_optima["ttk_boundary"][str(seed)], rel=1e-5), seed
        nodes.append(model.n_nodes_)
    # the root relaxation alone does not settle them: the tree search is exercised
    assert np.median(nodes) > 1, nodes


@pytest.mark.parametrize("seed", [0, 6])
def test_the_bnb_and_the_mip_agree_with_a_money_budget(seed):
    # Both leave money unspent here: an unspent budget costs TTK nothing, a cell adds boundary.
    X = boundary_instance(seed)[0]
    cost = np.random.default_rng(seed).uniform(0.5, 2.0, size=X.shape[0])
    bnb, t_bnb = _exact_total(seed, "bnb", cost=cost, budget=3.0)
    scip, t_scip = _exact_total(seed, "scip", cost=cost, budget=3.0)
    assert bnb.status_ in ("optimal", "gap_limit") and scip.status_ in ("optimal", "gap_limit")
    assert cost[bnb.selected_].sum() <= 3.0 * (1 + 1e-12)
    assert t_bnb == pytest.approx(t_scip, rel=1e-5)


def _select(tmp_path, name, *extra):
    from click.testing import CliRunner

    from reserve.cli import main
    from tests.test_select import make_units, write_units

    cells = tmp_path / "cells.gpkg"
    if not cells.exists():
        write_units(cells, make_units(n_side=14, seed=3))
    out = tmp_path / name
    args = [
        "select",
        "--budget",
        "10",
        "--model",
        "linear",
        "--cells",
        str(cells),
        "--out",
        str(out),
        *extra,
    ]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.stderr
    return out / "reserve.gpkg", res


def test_select_reports_patches_and_a_penalty_shortens_the_boundary(tmp_path):
    import pyogrio

    plain, res = _select(tmp_path, "plain")
    tight, _ = _select(tmp_path, "tight", "--boundary-penalty", "0.001")
    rows = {}
    for name, path in (("plain", plain), ("tight", tight)):
        summary = pyogrio.read_dataframe(path, layer="run_summary").iloc[0]
        sel = pyogrio.read_dataframe(path, layer="selected")
        cells = sel.geometry.to_numpy()
        assert summary["boundary_length"] == pytest.approx(
            union_boundary(cells, np.arange(cells.size), 1.0) - 0.5 * _border_share(path, cells),
            rel=1e-9,
        )
        assert summary["n_patches"] == sel["patch_id"].max() == sel["patch_id"].nunique()
        rows[name] = summary
    assert rows["plain"]["boundary_penalty"] == 0.0 and rows["tight"]["boundary_penalty"] == 1e-3
    assert rows["tight"]["boundary_length"] < rows["plain"]["boundary_length"]
    assert rows["tight"]["n_patches"] <= rows["plain"]["n_patches"]
    assert "patches:" in res.stdout


def test_select_ttk_bnb_with_a_penalty_proves_its_selection(tmp_path):
    import pyogrio

    heuristic, _ = _select(tmp_path, "ttk", "--boundary-penalty", "0.001")
    exact, _ = _select(tmp_path, "bnb", "--boundary-penalty", "0.001", "--method", "ttk-bnb")
    ttk = pyogrio.read_dataframe(heuristic, layer="run_summary").iloc[0]
    bnb = pyogrio.read_dataframe(exact, layer="run_summary").iloc[0]
    sel = pyogrio.read_dataframe(exact, layer="selected")
    assert bnb["solver_status"] in ("optimal", "gap_limit") and bnb["gap"] <= 1e-6
    assert bnb["bound"] <= bnb["objective"] <= ttk["objective"] * (1 + 1e-9)
    assert bnb["boundary_length"] == pytest.approx(
        union_boundary(sel.geometry.to_numpy(), np.arange(len(sel)), 1.0)
        - 0.5 * _border_share(exact, sel.geometry.to_numpy()),
        rel=1e-9,
    )


def _border_share(path, cells):
    """Length of the selection's boundary on the region's border (the union of all cells)."""
    import pyogrio
    import shapely

    every = pyogrio.read_dataframe(path, layer="planning_units").geometry.to_numpy()
    mine = shapely.unary_union(cells).boundary
    return shapely.intersection(mine, shapely.unary_union(every).boundary).length


def test_auto_penalty_writes_the_tradeoff_and_picks_its_knee(tmp_path):
    import pyogrio

    path, _ = _select(tmp_path, "auto", "--boundary-penalty", "auto")
    table = pyogrio.read_dataframe(path, layer="boundary_tradeoff")
    summary = pyogrio.read_dataframe(path, layer="run_summary").iloc[0]
    assert len(table) >= 3 and int(table["chosen"].sum()) == 1
    chosen = table[table["chosen"].astype(bool)].iloc[0]
    assert summary["boundary_penalty"] == pytest.approx(chosen["penalty"])
    assert summary["boundary_penalty_source"] == "auto"
    assert summary["boundary_length"] == pytest.approx(chosen["boundary_length"])
    expected = table["expected_precision"].to_numpy(dtype=float)
    assert np.all((expected > 0.0) & (expected < 1.0))
    html = next((path.parent).glob("*.html")).read_text()
    assert "expected precision" in html and f"{expected[0]:.2f}" in html
    # the ends of the curve: no penalty gives the longest boundary, the largest the shortest
    ends = table.sort_values("penalty")
    assert ends["boundary_length"].iloc[0] == ends["boundary_length"].max()
    assert ends["boundary_length"].iloc[-1] == ends["boundary_length"].min()


def test_auto_penalty_keeps_the_model_choice_cross_validation_on_record(tmp_path):
    # the calibration refits the chosen model without a CV; the run still reports the CV
    # that chose it (the map's "how sure" line, the summary's cv_precision)
    import pyogrio

    path, _ = _select(tmp_path, "cv", "--boundary-penalty", "auto", "--model", "auto")
    summary = pyogrio.read_dataframe(path, layer="run_summary").iloc[0]
    assert 0.0 <= summary["cv_precision"] <= 1.0
    assert set(summary["model_fitted"].split("+")) <= {"linear", "spline", "stack", "forest"}
    html = next((path.parent).glob("*.html")).read_text()
    assert "In cross-validation on the" in html and "Not measured by cross-validation" not in html


def test_presence_probability_keeps_the_prevalence_and_scores_at_standard_effort():
    from types import SimpleNamespace

    from reserve.calibrate import presence_probability

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (rng.random(300) < 1.0 / (1.0 + np.exp(-2.0 * X[:, 0] - X[:, 2]))).astype(int)
    y[200:] = -1
    p = presence_probability(SimpleNamespace(), X, y)
    # calibration in the large: an unweighted logistic fit's mean is the training prevalence
    assert p[:200].mean() == pytest.approx(y[:200].mean(), abs=1e-4)
    assert np.all((p > 0) & (p < 1))
    # effort column 2: candidates are scored at the training median, so two candidates that
    # differ only in effort get the same probability
    X[201] = X[200]
    X[201, 2] = X[200, 2] + 5.0
    q = presence_probability(SimpleNamespace(effort_columns=(2,)), X, y)
    assert q[200] == q[201]
    assert presence_probability(SimpleNamespace(), X, y)[201] != q[201]


def test_the_swap_bound_never_exceeds_the_swapped_qp():
    from reserve.solvers._polish import _swap_bound, solve_subset

    rng = np.random.default_rng(4)
    X_lab, X_cand = rng.normal(size=(40, 3)), rng.normal(size=(25, 3))
    y_pm = np.where(X_lab[:, 0] + 0.5 * rng.normal(size=40) > 0, 1.0, -1.0)
    in_S = np.zeros(25, dtype=bool)
    in_S[np.argsort(-X_cand[:, 0])[:4]] = True
    res, beta, _ = solve_subset(X_lab, y_pm, X_cand, in_S, 1.0)
    scores = X_cand @ res.w + res.b
    donors = np.argsort(-beta, kind="stable")[:8]
    gaps = []
    for i in np.flatnonzero(in_S):
        for j in np.flatnonzero(~in_S):
            trial = in_S.copy()
            trial[i], trial[j] = False, True
            qp = solve_subset(X_lab, y_pm, X_cand, trial, 1.0)[0].objective
            bound = _swap_bound(X_cand, res, beta, scores, i, j, donors)
            assert bound <= qp + 1e-7 * qp, (i, j)
            gaps.append(bound - res.objective)
    assert max(gaps) > 0  # the bound rises above the current optimum on some swaps
