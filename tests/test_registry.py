"""Every method's declared capabilities hold, and only the declarations decide.

Each capability of :data:`reserve.methods.CAPABILITIES` is checked both ways: a method that
declares it does the thing (fits with costs within the budget, selects for two species,
takes a boundary penalty, reaches the brute-force optimum, fits a feature map), and a method
that does not is refused, by the options and by the registry, with a message naming the
methods that do.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse

from reserve.config import SELECT_METHODS, SelectOptions
from reserve.errors import InvalidInputError
from reserve.methods import CAPABILITIES, METHODS, MODELS, capabilities, methods_with, quoted
from reserve.solvers import Boundary
from reserve.solvers.features import FEATURE_MAPS
from reserve.solvers.registry import PAPER_NAMES, TTK_METHODS, chosen_C, make_estimator
from reserve.solvers.ties import tie_width
from tests._oracle import brute_force_ttk, brute_force_ttk_cost, make_cost_instance

ROOT = Path(__file__).resolve().parents[1]


def _with(capability: str) -> list[str]:
    return [m for m in METHODS if getattr(CAPABILITIES[m], capability)]


def _without(capability: str) -> list[str]:
    return [m for m in METHODS if not getattr(CAPABILITIES[m], capability)]


def _instance(seed: int = 0, n: int = 14, m: int = 7, d: int = 2):
    rng = np.random.default_rng(seed)
    y_lab = np.r_[0, 1, rng.integers(0, 2, n - 2)]
    X_lab = rng.normal(size=(n, d)) + np.where(y_lab[:, None] == 1, 1.0, -1.0)
    X = np.vstack([X_lab, rng.normal(size=(m, d)) + 0.5])
    return X, np.r_[y_lab, -np.ones(m, dtype=np.int64)]


def test_the_methods_are_written_once():
    assert METHODS == SELECT_METHODS == tuple(CAPABILITIES)
    assert set(PAPER_NAMES.values()) <= set(METHODS)
    assert frozenset(methods_with("money_budget")) == TTK_METHODS
    assert MODELS == ("auto", *FEATURE_MAPS)  # the maps the solvers implement


@pytest.mark.parametrize("method", _with("money_budget"))
def test_a_money_method_fits_with_costs_within_the_budget(method):
    X, y, cost, budget, C = make_cost_instance(3)
    est = make_estimator(method, k=1, C=C, budget=budget, random_state=0).fit(X, y, cost=cost)
    spent = float(cost[est.selected_].sum())
    assert 0 < spent <= budget * (1 + 1e-12)
    assert np.isclose(spent, est.selected_cost_)
    if capabilities(method).exact:  # the oracle's optimum, under the same budget
        best = brute_force_ttk_cost(X, y, cost, budget, C)[0]
        assert est.objective_ == pytest.approx(best, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("method", _without("money_budget"))
def test_a_ranking_method_is_refused_a_money_budget(method):
    with pytest.raises(InvalidInputError, match=re.escape(quoted(_with("money_budget")))):
        make_estimator(method, k=3, budget=10.0)


@pytest.mark.parametrize("method", _with("several_species"))
def test_a_several_species_method_selects_k_for_two_species(method):
    X, y = _instance(1)
    Y = np.column_stack([y, np.where(y == -1, -1, 1 - y)])
    est = make_estimator(method, k=3, n_species=2, random_state=0).fit(X, Y)
    chosen = np.asarray(est.selected_)
    assert chosen.size == 3 and set(chosen) <= set(np.flatnonzero(y == -1))
    assert SelectOptions(budget=3, method=method, species=["A", "B"]).several_species


@pytest.mark.parametrize("method", _without("several_species"))
def test_a_one_species_method_is_refused_several_species(method):
    names = ", ".join(methods_with("several_species"))
    with pytest.raises(InvalidInputError, match=f"selects for one species.*{re.escape(names)}"):
        SelectOptions(budget=3, method=method, species=["A", "B"], joint_fit=True)
    with pytest.raises(InvalidInputError, match=re.escape(quoted(_with("several_species")))):
        make_estimator(method, k=3, n_species=2)


def test_several_species_scores_combine_as_declared():
    X, y = _instance(2)
    Y = np.column_stack([y, np.where(y == -1, -1, 1 - y)])
    for method in _with("several_species"):
        est = make_estimator(method, k=3, n_species=2, random_state=0).fit(X, Y)
        per_species = X @ np.atleast_2d(est.coef_).T + est.intercept_
        score = capabilities(method).combine_species(per_species)
        if capabilities(method).species_score == "sum":  # the ranking is by the sum
            cand = np.flatnonzero(y == -1)
            chosen = np.isin(cand, est.selected_)
            # a top 3 of the sum, up to a tie at the cut (broken by the one rule)
            width = tie_width(score[cand])
            assert chosen.sum() == 3
            assert score[cand][chosen].min() >= score[cand][~chosen].max() - width
        else:
            assert np.array_equal(score, per_species.max(axis=1))


def _line_boundary(m: int) -> Boundary:
    """Cells on a line: each has 4 edges of length 1, neighbours share one."""
    shared = sparse.diags([np.ones(m - 1), np.ones(m - 1)], [-1, 1], format="csr")
    return Boundary(np.full(m, 4.0), shared)


@pytest.mark.parametrize("method", _with("boundary"))
def test_a_boundary_method_takes_the_penalty(method):
    X, y = _instance(3)
    est = make_estimator(method, k=3, random_state=0)
    est.set_params(boundary_penalty=0.5)
    est.fit(X, y, boundary=_line_boundary(len(X)))
    assert np.isfinite(est.boundary_length_) and est.boundary_length_ > 0
    assert SelectOptions(budget=3, method=method, boundary_penalty=0.5).boundary_penalty == 0.5


@pytest.mark.parametrize("method", _without("boundary"))
def test_a_method_without_a_boundary_is_refused_the_penalty(method):
    with pytest.raises(InvalidInputError, match=re.escape(quoted(_with("boundary")))):
        SelectOptions(budget=3, method=method, boundary_penalty=0.5)


@pytest.mark.parametrize("method", _with("exact"))
def test_an_exact_method_reaches_the_brute_force_optimum(method):
    X, y = _instance(4, n=12, m=7)
    est = make_estimator(method, k=2, C=1.0, random_state=0).fit(X, y)
    best = brute_force_ttk(X, y, 2, 1.0)[0]
    assert est.objective_ == pytest.approx(best, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("method", _with("time_limit"))
def test_a_time_limited_method_is_given_the_limit(method):
    assert make_estimator(method, k=2, time_limit=7.5).get_params()["time_limit"] == 7.5


@pytest.mark.parametrize("method", _with("feature_maps"))
def test_a_feature_map_method_fits_a_map(method):
    from reserve.solvers import AutoTTK

    est = make_estimator(method, k=2, model="spline", Cs=(1.0,))
    assert isinstance(est, AutoTTK) and est.models == ("spline",)
    assert SelectOptions(budget=3, method=method, model="spline").effective_model == "spline"


@pytest.mark.parametrize("method", _without("feature_maps"))
def test_a_linear_method_is_refused_a_feature_map(method):
    supported = re.escape(quoted(_with("feature_maps")))
    with pytest.raises(InvalidInputError, match=f"needs method {supported}"):
        SelectOptions(budget=3, method=method, model="spline")
    with pytest.raises(InvalidInputError, match=supported):
        make_estimator(method, k=2, model="spline")
    assert SelectOptions(budget=3, method=method).effective_model == "linear"


def test_models_are_checked_once_with_the_same_message():
    with pytest.raises(InvalidInputError, match="model='gam' is unknown") as by_options:
        SelectOptions(budget=3, model="gam")
    with pytest.raises(InvalidInputError) as by_registry:
        make_estimator("ttk", k=2, model="gam")
    assert str(by_options.value) == str(by_registry.value)


def test_chosen_C_is_reported_by_the_fitted_estimator():
    X, y = _instance(5)
    assert chosen_C(make_estimator("ttk", k=2, C=3.0).fit(X, y)) == (3.0, "given")
    assert chosen_C(make_estimator("svm", k=2, C=0.5), "cv") == (0.5, "cv")
    X, y = _instance(6, n=60, m=30, d=3)
    search = make_estimator("ttk", k=3, model="spline", Cs=(0.5, 2.0), random_state=0)
    C, source = chosen_C(search.fit(X, y))  # the search's own choice, never NaN
    assert (C, source) == (search.best_params_["C"], "cv") and C in (0.5, 2.0)


#: A comparison with a method's name: ``== "svm"``, ``in ("ttk", ...)``, ``"svm" !=``, or a
#: membership test in a hand-written method set.
_NAME = "|".join(re.escape(n) for n in (*METHODS, *PAPER_NAMES))
_NAME_TEST = re.compile(
    rf"(==|!=|\bin)\s*\(?\s*[\"']({_NAME})[\"']|[\"']({_NAME})[\"']\s*(==|!=)"
    r"|\bin\s+(TTK_METHODS|MULTI_SPECIES_METHODS|SELECT_METHODS)\b"
)

#: Where a method's name may be tested: the declarations and the registry.
_REGISTRY = {"reserve/methods.py", "reserve/solvers/registry.py"}


def test_no_code_outside_the_registry_tests_a_method_name():
    offending = {}
    for path in sorted((ROOT / "reserve").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name in _REGISTRY:
            continue
        hits = [line.strip() for line in path.read_text().splitlines() if _NAME_TEST.search(line)]
        if hits:
            offending[name] = hits
    assert not offending, offending
    # the pattern finds what it must find
    assert _NAME_TEST.search('score = a if method == "svm" else b')
    assert _NAME_TEST.search("if opts.method not in ('ttk', 'ttk-mip'):")
    assert _NAME_TEST.search("budget if method in TTK_METHODS else None")
