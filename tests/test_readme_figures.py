"""The README's figures of the default region are those of a run (``make demo``'s)."""

from __future__ import annotations

import re
from pathlib import Path

from reserve.select import select_reserve

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_default_regions_private_land_check_is_the_readmes():
    s = select_reserve(30, out=None, map=False).summary
    text = re.sub(r"\s+", " ", README.read_text(encoding="utf-8"))
    said = (
        f"On the default Georgia region the same check gives AUC {s['check_auc']:.2f} "
        f"({s['check_auc_low']:.2f}-{s['check_auc_high']:.2f}) on "
        f"{s['check_n_surveyed']:,} surveyed private cells, and the run says `signal "
        f"{s['signal']}`"
    )
    assert said in text
