"""Tests for reserve.maps: offline page, size for ~20k cells, thinning, and a real browser."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import geopandas as gpd
import numpy as np
import pytest

from reserve.errors import OutputExistsError
from reserve.maps import build_map, write_map
from reserve.select import select_reserve
from tests.test_select import make_units, write_units

ARTIFACTS = Path(__file__).parent / "artifacts"


def scored_units(n_side: int, k: int, seed: int = 0) -> gpd.GeoDataFrame:
    """Planning units with the columns a selection adds (score, rank, selected)."""
    units = make_units(n_side=n_side, seed=seed)
    rng = np.random.default_rng(seed)
    units["score"] = rng.normal(size=len(units))
    cand = np.flatnonzero(units["role"] == "candidate")
    order = cand[np.argsort(-units["score"].to_numpy()[cand], kind="stable")]
    units["rank"] = 0
    units.loc[order, "rank"] = np.arange(1, order.size + 1)
    units["selected"] = False
    units.loc[order[:k], "selected"] = True
    return units


def _data(page: str) -> dict:
    return json.loads(re.search(r"var D = (\{.*?\});\n", page).group(1))


def test_page_needs_no_network_but_tiles():
    page = build_map(scored_units(10, 4), summary={"budget": 4, "method": "ttk"})
    assert not re.search(r"<script[^>]+src=", page)
    assert not re.search(r"<link[^>]+href=[\"']https?:", page)
    urls = set(re.findall(r"https?://[^\s\"'\\)]+", page))
    assert {u for u in urls if "{z}" in u} == {"https://tile.openstreetmap.org/{z}/{x}/{y}.png"}
    assert "window.reserveReady" in page and "Reserve selection" in page


def test_selected_cells_are_all_drawn_in_rank_order_with_popup_data():
    units = scored_units(10, 6)
    data = _data(build_map(units, main_features=["lc_forest"]))
    assert data["selected"]["rank"] == [1, 2, 3, 4, 5, 6]
    assert len(data["selected"]["n"]) == 6 and data["features"] == ["lc_forest"]
    n_train = int((units["role"] == "train").sum())
    assert len(data["detected"]["id"]) + len(data["undetected"]["id"]) == n_train
    assert len(data["candidates"]["id"]) == int((units["role"] == "candidate").sum()) - 6


def test_rings_decode_to_the_cells_in_lon_lat():
    units = scored_units(4, 1)
    data = _data(build_map(units))
    d = data["selected"]
    xy = np.asarray(d["xy"], dtype=float).reshape(-1, 2).cumsum(axis=0) / 1e5
    ring = units[units["selected"]].to_crs(4326).geometry.iloc[0].exterior.coords[:-1]
    np.testing.assert_allclose(xy, np.asarray(ring), atol=1e-5)


def test_thinning_drops_low_candidates_never_selected():
    units = scored_units(20, 5)
    data = _data(build_map(units, max_cells=150))
    n_train = int((units["role"] == "train").sum())
    assert len(data["candidates"]["id"]) == 150 - n_train
    assert max(data["candidates"]["rank"]) == 150 - n_train + 5
    assert len(data["selected"]["id"]) == 5


@pytest.mark.slow
def test_twenty_thousand_cells_stay_light(tmp_path):
    units = scored_units(142, 30)  # 20,164 cells
    path = write_map(units, tmp_path / "m.html", main_features=["lc_forest", "lc_crop"])
    size = path.stat().st_size
    assert size < 5_000_000, size
    assert len(_data(path.read_text())["selected"]["id"]) == 30


def test_write_is_atomic_and_refuses_to_overwrite(tmp_path, monkeypatch):
    path = write_map(scored_units(6, 2), tmp_path / "m.html")
    before = path.read_bytes()
    with pytest.raises(OutputExistsError):
        write_map(scored_units(6, 2), path)

    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr("reserve.maps.build_map", broken)
    with pytest.raises(RuntimeError):
        write_map(scored_units(6, 2), path, overwrite=True)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["m.html"]


# ------------------------------------------------------------------ a real browser

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")


def _driver():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    # Without the background-networking flags Chromium's own connections stall in a closed
    # network; a fresh profile keeps runs independent.
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1200,900",
                f"--user-data-dir={tempfile.mkdtemp(prefix='reserve-chromium-')}"):  # fmt: skip
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


@pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="chromium / chromedriver not installed (.ci/run installs them)",
)
def test_map_renders_in_headless_chromium(tmp_path):
    """Leaflet loads offline, exactly k selected cells are drawn, no script error.

    A tile that cannot load (no network here) is logged by Chromium with source 'network';
    that is not a JavaScript error and is not counted.
    """
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    cells = write_units(tmp_path / "cells.gpkg", n_side=30)
    k = 12
    res = select_reserve(k, cells, out=tmp_path / "out", map=tmp_path / "map.html")
    driver = _driver()
    try:
        driver.set_page_load_timeout(60)
        driver.execute_cdp_cmd(
            "Page.addScriptToEvaluateOnNewDocument",
            {
                "source": "window.__errors = [];"
                "addEventListener('error', e => __errors.push(String(e.message)));"
                "addEventListener('unhandledrejection', e => __errors.push(String(e.reason)));"
            },
        )
        driver.get(res.map_path.resolve().as_uri())
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script("return !!(window.L && window.reserveReady)")
        )
        n_sel = driver.execute_script(
            "return document.querySelectorAll('path.reserve-selected').length"
        )
        labels = driver.execute_script(
            "return Array.from(document.querySelectorAll('.reserve-rank'), e => e.textContent)"
        )
        assert n_sel == k
        assert sorted(map(int, labels)) == list(range(1, k + 1))
        assert driver.find_element(By.CSS_SELECTOR, ".leaflet-control-layers").is_displayed()
        assert "Reserve selection" in driver.find_element(By.CLASS_NAME, "reserve-summary").text
        ARTIFACTS.mkdir(exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "map.png"))
        # a popup opens on a selected cell and names its rank
        driver.execute_script(
            "document.querySelectorAll('path.reserve-selected')[0]"
            ".dispatchEvent(new MouseEvent('click', {bubbles: true}))"
        )
        WebDriverWait(driver, 10).until(
            lambda d: d.find_elements(By.CLASS_NAME, "leaflet-popup-content")
        )
        popup = driver.execute_script(
            "return document.querySelector('.leaflet-popup-content').textContent"
        )
        assert "selected cell" in popup and "rank" in popup and "cell id" in popup
        errors = driver.execute_script("return window.__errors")
        logs = driver.get_log("browser")
    finally:
        driver.quit()
    assert errors == []
    script_errors = [e for e in logs if e["level"] == "SEVERE" and e.get("source") != "network"]
    assert script_errors == [], script_errors
