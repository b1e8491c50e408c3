"""The documentation's real-data commands, run exactly as written (parsed from the files).

* README.md "Your own region, end to end": Wood Thrush in Mississippi ends in a selection
  whose scores differ, with no warning;
* docs/ingest.md "Real eBird data: New Hampshire": features that cannot rank the cells, and
  ``reserve select`` says so.

The commands read ``../shared/real/ebird-bcr27`` relative to the repository root (eBird data
is never part of the project). A checkout elsewhere (a git worktree) can point at the folder
holding ``real/`` with ``RESERVE_SHARED``; without it the tests are skipped. They run in a
temporary folder laid out like the repository (``data`` and ``pipelines`` linked, ``shared``
beside it), so nothing is written into the checkout.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyogrio
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RESERVE_SHARED", ROOT.parent / "shared"))
BUNDLE = SHARED / "real" / "ebird-bcr27"

pytestmark = pytest.mark.skipif(
    not BUNDLE.is_dir(), reason=f"real eBird bundle not found at {BUNDLE} (set RESERVE_SHARED)"
)


def commands(doc: Path, heading: str) -> list[list[str]]:
    """The commands of the first code block after ``heading`` in ``doc``, as argv lists."""
    text = doc.read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    joined = re.sub(r"\\\n\s*", " ", block)
    return [shlex.split(line) for line in joined.splitlines() if line.strip()]


def run_all(cmds: list[list[str]], cwd: Path) -> list[subprocess.CompletedProcess]:
    """Run ``cmds`` as a planner would, with the venv active (``reserve`` = this package)."""
    out = []
    for argv in cmds:
        if argv[0] == "reserve":
            argv = [sys.executable, "-m", "reserve.cli", *argv[1:]]
        elif argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, (argv, proc.stderr[-3000:])
        out.append(proc)
    return out


@pytest.fixture
def clone(tmp_path):
    """A folder laid out like the repository root, with ``../shared`` beside it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("data", "pipelines"):
        (repo / name).symlink_to(ROOT / name)
    (tmp_path / "shared").symlink_to(SHARED)
    return repo


def readme_figures() -> str:
    """The README's paragraph on what the walkthrough's run prints."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("From a run of them:")
    end = text.index("**Which cells train the model.**", start)
    return re.sub(r"\s+", " ", text[start:end])


def test_readme_walkthrough_says_the_data_cannot_rank_the_land(clone):
    """Mississippi at 10 km: the surveyed private cells show no model ranks them, and the run
    says so (weak, on that evidence, with its interval); the README quotes this run."""
    cmds = commands(ROOT / "README.md", "## Your own region, end to end")
    assert [c[0] for c in cmds] == ["python", "reserve", "reserve"]
    assert any("../shared/real/ebird-bcr27" in a for a in cmds[1])  # real eBird data
    t0 = time.perf_counter()
    procs = run_all(cmds, clone)
    seconds = time.perf_counter() - t0
    print(f"README walkthrough: {seconds:.1f} s")  # the figure the README quotes
    out = clone / "mississippi"
    assert {"reserve.gpkg", "map.html", "units.gpkg"} <= {p.name for p in out.iterdir()}
    warnings = [ln for ln in procs[-1].stderr.splitlines() if ln.startswith("reserve: warning")]
    assert len(warnings) == 1 and "surveyed private land" in warnings[0]
    s = pyogrio.read_dataframe(out / "reserve.gpkg", layer="run_summary").iloc[0]
    assert s["signal"] in ("weak", "none") and s["signal_evidence"] == "private-land check"
    assert s["check_auc_low"] < 0.5  # no better than a blind pick, within its interval
    # 35 training cells: the rule for few labelled cells fits the linear map, and says so
    assert s["model_fitted"] == "linear"
    assert "model choice: 35 labelled cells (at most 60): the linear map alone" in (
        procs[-1].stderr
    )
    page = (out / "map.html").read_text()
    assert "reserve-banner" in page and "treat the choice as unproven" in page
    printed = (out / "summary.txt").read_text(encoding="utf-8")
    assert f"warning: {s['signal_note']}" in printed and "signal weak" in printed
    said = readme_figures()
    checklists = re.search(r"checklists (\d+);", procs[1].stdout).group(1)
    figures = [
        f"{int(checklists):,} checklists kept",
        f"{s['n_train']} surveyed public cells ({s['n_train_positive']} with a detection)",
        f"{s['n_candidates']:,} private candidate cells",
        f"{s['check_n_surveyed']} of them were surveyed by birders ({s['check_n_detected']} "
        "with a detection)",
        f"AUC {s['check_auc']:.2f} (90% interval {s['check_auc_low']:.2f}-"
        f"{s['check_auc_high']:.2f})",
        f"signal {s['signal']}",
        f"among the {s['n_selected']} chosen ({s['expected_occupied']:.1f}, 90% interval "
        f"{s['expected_occupied_low']:.0f}-{s['expected_occupied_high']:.0f}) than among "
        f"{s['n_selected']} candidates picked blind ({s['expected_occupied_blind']:.1f})",
    ]
    assert s["expected_occupied"] < s["expected_occupied_blind"]
    assert "fewer occupied cells in this choice than in a blind pick" in page
    for figure in figures:
        assert figure in said, (figure, said)
    # the README's figure of the same run with --learn-from surveyed --effort
    assert cmds[-1][-4:] == ["--out", "mississippi", "--map", "mississippi/map.html"]
    again = [*cmds[-1][:-4], "--learn-from", "surveyed", "--effort", "--out", "mississippi/again"]
    run_all([again], clone)
    s2 = pyogrio.read_dataframe(out / "again" / "reserve.gpkg", layer="run_summary").iloc[0]
    learned = (
        f"AUC {s2['check_auc']:.2f} ({s2['check_auc_low']:.2f}-"
        f"{s2['check_auc_high']:.2f}) in its cross-fitted check, "
        f"still `{s2['signal']}`"
    )
    assert learned in said, (learned, said)


def test_new_hampshire_example_warns(clone):
    cmds = commands(ROOT / "docs" / "ingest.md", "## Real eBird data: New Hampshire")
    cmds = [c for c in cmds if c[0] != "mkdir"]
    (clone / "nh").mkdir()
    cmds[-1] += ["--model", "linear"]  # the warning is the model's verdict: linear is quick
    procs = run_all(cmds, clone)
    err = procs[-1].stderr
    warnings = [line for line in err.splitlines() if line.startswith("reserve: warning")]
    assert len(warnings) == 1 and "ranks nothing" in warnings[0] and "--legend" in warnings[0]
    summary = pyogrio.read_dataframe(clone / "nh" / "reserve.gpkg", layer="run_summary").iloc[0]
    assert summary["signal"] == "none" and int(summary["n_tied_at_cutoff"]) > 20
    chosen = pyogrio.read_dataframe(clone / "nh" / "reserve.gpkg", layer="selected")
    units = pyogrio.read_dataframe(clone / "nh" / "units.gpkg", layer="planning_units")
    lowest = np.sort(units.loc[units["role"] == "candidate", "cell_id"].to_numpy())[:20]
    assert set(chosen["cell_id"]) != set(lowest)  # not the northern edge of the box
    assert "ranks nothing" in (clone / "nh" / "map.html").read_text()
