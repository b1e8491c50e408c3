"""Benchmark tables: CLI bad input (exit 2, no files), a tiny end-to-end run, table logic."""

import csv

import numpy as np
import pytest
from click.testing import CliRunner

from reserve.cli import main
from reserve.paper.benchmark import RunRecord, format_table3


def _write(path, X, y):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([f"f{i}" for i in range(X.shape[1])] + ["label"])
        for row, lab in zip(X, y, strict=True):
            w.writerow([*row.tolist(), "" if lab is None else lab])


def _tiny(tmp_path, n=80, labels=None):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    y = labels if labels is not None else np.where(X[:, 0] + rng.normal(size=n) > 0, 1, -1)
    data = tmp_path / "data"
    data.mkdir()
    _write(data / "sonar.csv", X, list(y))
    return data


def _invoke(args):
    return CliRunner().invoke(main, ["benchmark", "paper", "--no-progress", *args])


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--datasets", "nosuch"], "unknown dataset 'nosuch'"),
        (["--datasets", "sonar", "--methods", "SVM,Magic"], "unknown method 'Magic'"),
        (["--table", "7"], "unknown table '7'"),
    ],
)
def test_unknown_names_exit_2_without_files(tmp_path, args, match):
    out = tmp_path / "out"
    res = _invoke([*args, "--out", str(out)])
    assert res.exit_code == 2
    assert match in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not out.exists()


def test_missing_label_single_class_and_big_k_exit_2(tmp_path):
    out = tmp_path / "out"
    labels = [1, -1] * 40
    labels[7] = None
    data = _tiny(tmp_path, labels=labels)
    res = _invoke(["--datasets", "sonar", "--data-dir", str(data), "--out", str(out)])
    assert res.exit_code == 2 and "missing value" in res.output and "label" in res.output
    (data / "sonar.csv").unlink()
    _write(data / "sonar.csv", np.zeros((80, 2)) + np.arange(80)[:, None], [1] * 80)
    res = _invoke(["--datasets", "sonar", "--data-dir", str(data), "--out", str(out)])
    assert res.exit_code == 2 and "single class" in res.output
    (data / "sonar.csv").unlink()
    _write(data / "sonar.csv", np.random.default_rng(1).normal(size=(80, 2)), [1, -1] * 40)
    res = _invoke(
        ["--datasets", "sonar", "--data-dir", str(data), "--out", str(out), "--k-fraction", "0.999"]
    )
    assert res.exit_code == 2 and "test half" in res.output
    assert not out.exists()


def test_tiny_end_to_end_run_writes_tables(tmp_path):
    data = _tiny(tmp_path)
    out = tmp_path / "out"
    args = ["--table", "3", "--datasets", "sonar", "--methods", "SVM,SVMPerf", "--splits", "2"]
    res = _invoke([*args, "--jobs", "1", "--data-dir", str(data), "--out", str(out)])
    assert res.exit_code == 0, res.output
    md = (out / "paper_table3.md").read_text()
    assert "SVM (ours / paper)" in md and "0.96±0.08" in md
    with (out / "paper_table3_runs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4
    assert {r["status"] for r in rows} == {"ok"}
    assert all(0.0 <= float(r["precision"]) <= 1.0 for r in rows)
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def _rec(ds, split, method, prec, status="ok"):
    return RunRecord("3", ds, split, method, 1.0, 5, prec, 0.0, 0.0, 0.1, 0.1, status)


def test_bold_and_wins_ties_losses():
    recs = []
    for s in range(10):
        noise = 0.01 * (s % 3)
        recs += [
            _rec("sonar", s, "SVM", 0.5 + noise),
            _rec("sonar", s, "TopPush", 0.9 + 0.02 * (s % 2)),
            _rec("sonar", s, "TTK-FD", 0.9 + 0.02 * ((s + 1) % 2)),
            _rec("sonar", s, "AATP", float("nan"), status="na"),
        ]
    md = format_table3(recs)
    row = next(line for line in md.splitlines() if line.startswith("| sonar"))
    cells = [c.strip() for c in row.split("|")[2:-1]]
    assert not cells[0].startswith("**")  # SVM significantly worse
    assert cells[1].startswith("**")  # TopPush ties TTK-FD
    assert cells[2].startswith("NA")
    assert cells[3].startswith("**")
    wtl = next(line for line in md.splitlines() if line.startswith("| TTK-FD w/t/l"))
    assert wtl.split("|")[2].strip() == "1/0/0" and wtl.split("|")[3].strip() == "0/1/0"


def test_bad_input_with_progress_bar_is_still_one_line(tmp_path):
    res = CliRunner().invoke(
        main, ["benchmark", "paper", "--datasets", "nope", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        next(line for line in res.output.splitlines() if "unknown dataset 'nope'" in line)
    ]


def test_bcr27_skipped_with_a_note_when_the_folder_is_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("RESERVE_BCR27_DIR", str(tmp_path / "absent"))
    data = _tiny(tmp_path)
    out = tmp_path / "out"
    args = [
        "--table",
        "3",
        "--datasets",
        "sonar,bcr27_woothr",
        "--methods",
        "SVM",
        "--splits",
        "2",
        "--jobs",
        "1",
        "--data-dir",
        str(data),
        "--out",
        str(out),
    ]
    with pytest.warns(UserWarning, match="Skipped bcr27_woothr"):
        res = _invoke(args)
    assert res.exit_code == 0, res.output
    md = (out / "paper_table3.md").read_text()
    assert "Skipped bcr27_woothr" in md and "| sonar |" in md and "| bcr27" not in md
    assert "Skipped bcr27_woothr" in res.output  # printed, not only written
    only = _invoke(["--table", "3", "--datasets", "bcr27_woothr", "--out", str(tmp_path / "o2")])
    assert only.exit_code != 0 and "absent" in only.output
    assert len(only.output.strip().splitlines()) == 1 and not (tmp_path / "o2").exists()


def test_bcr27_fake_folder_runs_into_its_own_files(tmp_path, monkeypatch):
    from tests.test_surrogates import make_fake_bcr27

    monkeypatch.setenv("RESERVE_BCR27_DIR", str(make_fake_bcr27(tmp_path / "bcr27")))
    out = tmp_path / "out"
    args = [
        "--table",
        "3",
        "--datasets",
        "bcr27_woothr",
        "--methods",
        "SVM,TopPush",
        "--splits",
        "2",
        "--jobs",
        "1",
        "--out",
        str(out),
    ]
    res = _invoke(args)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == [
        "paper_table3_bcr27.md",
        "paper_table3_bcr27_runs.csv",
    ]
    md = (out / "paper_table3_bcr27.md").read_text()
    assert "| bcr27_woothr |" in md and "NY16 (paper, New York; context only)" in md
    assert "disjoint candidate folds" in md
    with (out / "paper_table3_bcr27_runs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}
    assert all(int(r["k"]) >= 1 for r in rows)


def _spy_select_C(monkeypatch):
    """Record the polish flag of every estimator the benchmark cross-validates."""
    import reserve.paper.benchmark as bm

    seen = []
    real = bm.select_C

    def spy(est, *args, **kwargs):
        seen.append(est.get_params()["polish"])
        return real(est, *args, **kwargs)

    monkeypatch.setattr(bm, "select_C", spy)
    return seen


def _noisy(tmp_path):
    """200 rows, 6 features: TTK's polish improves on FD on both splits of seed 0."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6))
    y = np.where(X[:, 0] + rng.normal(size=200) > 0, 1, -1)
    data = tmp_path / "noisy"
    data.mkdir()
    _write(data / "sonar.csv", X, list(y))
    return data


@pytest.mark.parametrize("cv_ttk", ["fd", "full"])
def test_cv_ttk_decides_the_cv_estimator_and_the_final_fit_always_polishes(
    tmp_path, monkeypatch, cv_ttk
):
    from reserve.paper.benchmark import prepare_splits, run_table3
    from reserve.solvers import TTK

    data = _noisy(tmp_path)
    seen = _spy_select_C(monkeypatch)
    recs = run_table3(["sonar"], ["TTK-FD"], n_splits=2, n_jobs=1, cv_ttk=cv_ttk, data_dir=data)
    assert seen == [cv_ttk == "full"] * 2
    label = "TTK-FD without polish" if cv_ttk == "fd" else ""
    assert [r.cv_estimator for r in recs] == [label, label]
    # the scored fit is the full TTK (FD + polish) with the chosen C, whatever the CV used
    gaps = []
    for sp, r in zip(prepare_splits(["sonar"], 2, 0.05, 0, data), recs, strict=True):
        full = TTK(k=sp.k, C=r.C, polish=True, random_state=sp.seed).fit(sp.X, sp.y_fit)
        fd = TTK(k=sp.k, C=r.C, polish=False, random_state=sp.seed).fit(sp.X, sp.y_fit)
        assert r.train_objective == pytest.approx(full.objective_, rel=1e-9)
        gaps.append(fd.objective_ - full.objective_)
    assert max(gaps) > 1e-6  # the polish matters on these splits, so the check can fail
    md = format_table3(recs)
    assert ("chosen by CV fits without the polish" in md) == (cv_ttk == "fd")
    assert "| of which CV / final fits (s) |" in md


def test_parallel_cv_gives_the_same_records_as_serial(tmp_path):
    from reserve.paper.benchmark import run_table3

    kw = dict(n_splits=2, n_jobs=1, data_dir=_noisy(tmp_path))
    a = run_table3(["sonar"], ["SVM", "TTK-FD"], cv_jobs=1, **kw)
    b = run_table3(["sonar"], ["SVM", "TTK-FD"], cv_jobs=2, **kw)
    assert [(r.method, r.C, r.precision, r.train_objective) for r in a] == [
        (r.method, r.C, r.precision, r.train_objective) for r in b
    ]


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"cv_ttk": "half"}, "unknown cv_ttk 'half'"), ({"cv_jobs": 0}, "cv_jobs must be an integer")],
)
def test_bad_cv_options_are_refused_before_any_fit(kw, match):
    from reserve.errors import InvalidInputError
    from reserve.paper.benchmark import run_table3

    with pytest.raises(InvalidInputError, match=match):
        run_table3(["sonar"], ["SVM"], n_splits=2, n_jobs=1, **kw)


def test_cli_passes_cv_options_and_writes_the_elapsed_time(tmp_path):
    data = _tiny(tmp_path)
    out = tmp_path / "out"
    args = [
        "--table",
        "3",
        "--datasets",
        "sonar",
        "--methods",
        "SVM,TTK-FD",
        "--splits",
        "2",
        "--jobs",
        "1",
        "--cv-jobs",
        "2",
        "--cv-ttk",
        "full",
        "--data-dir",
        str(data),
        "--out",
        str(out),
    ]
    res = _invoke(args)
    assert res.exit_code == 0, res.output
    md = (out / "paper_table3.md").read_text()
    assert "without the polish" not in md
    assert "Elapsed:" in md and "x 2 CV workers each" in md
    bad = _invoke([*args[:-2], "--cv-ttk", "half", "--out", str(tmp_path / "o2")])
    assert bad.exit_code == 2 and not (tmp_path / "o2").exists()


def test_tsvm_cv_fits_get_their_own_time_limit_and_are_counted(tmp_path, monkeypatch):
    import reserve.paper.benchmark as bm
    from reserve.solvers import make_estimator

    calls = []
    real = bm.make_estimator
    assert real is make_estimator  # the benchmark builds its estimators with the one registry

    def spy(method, **kw):
        calls.append((method, kw["fit_time_limit"], kw.get("polish", True)))
        return real(method, **kw)

    monkeypatch.setattr(bm, "make_estimator", spy)
    data = _noisy(tmp_path)
    recs = bm.run_table3(
        ["sonar"],
        ["TSVM", "TTK-FD"],
        n_splits=2,
        n_jobs=1,
        data_dir=data,
        fit_time_limit=7.0,
        cv_fit_time_limit=1e-9,
    )
    # each task builds one CV estimator and one final estimator
    expected = [
        ("TSVM", 1e-9, True),
        ("TSVM", 7.0, True),
        ("TTK-FD", 1e-9, False),
        ("TTK-FD", 7.0, True),
    ]
    assert sorted(calls) == sorted(expected * 2)
    tsvm = [r for r in recs if r.method == "TSVM"]
    assert [r.cv_limited for r in tsvm] == [50, 50]  # every CV fit stopped at 1e-9 s
    assert [r.note for r in tsvm] == ["", ""]  # the final fits had 7 s and converged
    assert all(r.cv_limited == 0 for r in recs if r.method == "TTK-FD")
    md = bm.format_table3(recs)
    assert "TSVM on sonar: 100 in 2 splits" in md
    with pytest.raises(bm.InvalidInputError, match="cv_fit_time_limit must be"):
        bm.run_table3(["sonar"], ["TSVM"], n_splits=2, n_jobs=1, cv_fit_time_limit=0)
