"""Tests for reserve.maps: offline page, size for ~20k cells, thinning, and a real browser."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest

from reserve.errors import OutputExistsError
from reserve.maps import CONTEXT, build_map, initial_view, write_map
from reserve.select import select_reserve
from tests.test_select import make_units, write_units


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
    assert "window.reserveReady" in page and "About this selection" in page


def test_selected_cells_are_all_drawn_in_rank_order_with_popup_data():
    units = scored_units(10, 6)
    data = _data(build_map(units, main_features=["lc_forest"]))
    assert data["selected"]["rank"] == [1, 2, 3, 4, 5, 6]
    assert len(data["selected"]["n"]) == 6 and data["features"] == ["lc_forest"]
    n_train = int((units["role"] == "train").sum())
    assert len(data["detected"]["id"]) + len(data["undetected"]["id"]) == n_train
    assert len(data["candidates"]["id"]) == int((units["role"] == "candidate").sum()) - 6


def test_initial_view_frames_the_selection_with_context():
    region = (-85.6, 30.4, -80.9, 35.0)
    sel = (-84.6, 34.5, -83.1, 35.0)  # a cluster at the region's northern edge
    (s, w), (n, e) = initial_view(sel, region)
    assert w <= sel[0] and e >= sel[2] and s <= sel[1] and n >= sel[3]  # all selected in view
    assert region[0] <= w and e <= region[2] and region[1] <= s and n <= region[3]
    assert e - w == pytest.approx(CONTEXT * (region[2] - region[0]))  # widened for context
    assert n - s == pytest.approx(CONTEXT * (region[3] - region[1]))
    assert n == pytest.approx(region[3])  # slid inside the region, not cut
    # a selection wider than the context share is framed as it is
    wide = (-85.0, 31.0, -81.0, 34.0)
    assert initial_view(wide, region) == [[31.0, -85.0], [34.0, -81.0]]
    assert initial_view(None, region) == [[30.4, -85.6], [35.0, -80.9]]


def test_page_starts_on_the_region_and_frames_the_selection_on_demand():
    units = scored_units(30, 3)
    page = build_map(units)
    data = _data(page)
    sel = units[units["selected"]].to_crs(4326).total_bounds
    (s, w), (n, e) = data["view"]
    assert w <= sel[0] + 1e-5 and s <= sel[1] + 1e-5 and e >= sel[2] - 1e-5 and n >= sel[3] - 1e-5
    assert data["region"][0][0] <= s and n <= data["region"][1][0]
    assert 'show("region");' in page and 'show("selection");' not in page


def _polygons_drawn(page: str) -> tuple[dict | None, dict | None]:
    """The outline and public land the page draws (GeoJSON; None: not drawn)."""
    outline, pub = re.search(r"var outline = (.*?), pub = (.*?);\n", page).groups()
    return json.loads(outline), json.loads(pub)


def with_polygon_layers(path: Path, units: gpd.GeoDataFrame) -> tuple[object, object]:
    """Add ``public_land`` and ``region`` layers as ``reserve ingest`` writes them."""
    import shapely

    public = shapely.union_all(units.geometry[units["role"] == "train"].to_numpy())
    x0, y0, x1, y1 = units.total_bounds
    region = shapely.Polygon([(x0 + 4000, y0), (x1, y0 + 4000), (x1 - 4000, y1), (x0, y1 - 4000)])
    for name, geom in (("public_land", public), ("region", region)):
        layer = gpd.GeoDataFrame(
            geometry=[shapely.MultiPolygon(shapely.get_parts(geom))], crs=units.crs
        )
        pyogrio.write_dataframe(layer, path, layer=name, append=True, promote_to_multi=True)
    return public, region


def test_select_draws_the_public_land_and_region_stored_in_the_cells_file(tmp_path):
    import shapely

    units = make_units(n_side=14)
    old = write_units(tmp_path / "old.gpkg", units)
    new = write_units(tmp_path / "new.gpkg", units)
    public, region = with_polygon_layers(new, units)
    runs = {
        name: select_reserve(
            4, path, out=tmp_path / name, map=tmp_path / f"{name}.html", model="linear"
        )
        for name, path in (("old", old), ("new", new))
    }
    pages = {name: res.map_path.read_text() for name, res in runs.items()}
    # the polygons only decorate: the same cells are chosen
    assert list(runs["old"].selected["cell_id"]) == list(runs["new"].selected["cell_id"])
    outline, pub = _polygons_drawn(pages["new"])
    ll = gpd.GeoSeries([public, region], crs=units.crs).to_crs(4326)
    drawn_pub, drawn_outline = (
        shapely.from_geojson(json.dumps(pub)),
        shapely.from_geojson(json.dumps(outline)),
    )
    assert drawn_pub.bounds == pytest.approx(ll.iloc[0].bounds, abs=2e-3)
    assert drawn_outline.bounds == pytest.approx(ll.iloc[1].bounds, abs=2e-3)
    assert shapely.get_num_coordinates(drawn_outline) == 5  # the region, not the cells' union
    assert "public land</div>" in pages["new"]
    summary = runs["new"].summary
    assert summary["public_path"] == f"{new} (layer public_land)"
    assert summary["outline_path"] == f"{new} (layer region)"
    # a file written before the layers existed: the map as before (the cells' own outline)
    outline, pub = _polygons_drawn(pages["old"])
    assert pub is None and "public land</div>" not in pages["old"]
    cells = shapely.coverage_union_all(units.to_crs(4326).geometry.to_numpy())
    assert shapely.from_geojson(json.dumps(outline)).bounds == pytest.approx(cells.bounds, abs=2e-3)
    assert runs["old"].summary["public_path"] == ""
    # both explain the cells that are neither bought nor learned from
    n_other = int((units["role"] == "other").sum())
    for page in pages.values():
        assert "other cell: not bought and not learned from" in page
        assert f"other cells ({n_other}): not bought, not learned from" in page
        assert len(_data(page)["others"]["n"]) == n_other


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
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,900",
        f"--user-data-dir={tempfile.mkdtemp(prefix='reserve-chromium-')}",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def _open(driver, page: Path, width: int, height: int) -> None:
    """Load ``page`` in a viewport of exactly ``width`` x ``height`` CSS pixels."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )
    driver.get(page.resolve().as_uri())
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return !!(window.L && window.reserveReady)")
    )
    # a screenshot or a measure taken mid-animation shows a scaled, blurred map
    WebDriverWait(driver, 10).until(
        lambda d: d.execute_script("return !document.querySelector('.leaflet-zoom-anim')")
    )
    time.sleep(0.5)


_VISIBLE_RANKS = (
    "return Array.from(document.querySelectorAll('.reserve-rank:not(.reserve-rank-hidden)'),"
    " e => { const r = e.querySelector('.r').getBoundingClientRect();"
    " const m = e.querySelector('.more').textContent;"
    " return [+e.querySelector('.r').textContent, r.left, r.top, r.right, r.bottom,"
    " m ? +m.slice(1) : 0]; })"
)


_REGION_SHOWN = (
    "const boxes = ['.reserve-list', '.reserve-legend', '.reserve-summary', '.reserve-top']"
    ".map(s => document.querySelector(s).getBoundingClientRect());"
    "const R = reserveData.region, m = reserveMap, c = m.getContainer().getBoundingClientRect();"
    "const a = m.latLngToContainerPoint(R[0]), b = m.latLngToContainerPoint(R[1]);"
    "const r = {left: c.left + a.x, bottom: c.top + a.y, right: c.left + b.x, top: c.top + b.y};"
    "return r.left >= 0 && r.top >= 0 && r.right <= innerWidth && r.bottom <= innerHeight"
    " && boxes.every(x => r.right <= x.left || x.right <= r.left || r.bottom <= x.top"
    " || x.bottom <= r.top)"
)


def _check_large(driver, res, k: int, shots: Path) -> None:
    """1400 x 900: palette, contrast, legend range, title, summary, labels, list, popups."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _open(driver, res.map_path, 1400, 900)
    count = "return document.querySelectorAll(arguments[0]).length"
    # exactly k selected cells: k outlines and k fixed-size markers, by stable classes
    assert driver.execute_script(count, "path.reserve-selected") == k
    assert driver.execute_script(count, "path.reserve-selected-marker") == k
    labels = driver.execute_script(
        "return Array.from(document.querySelectorAll('.reserve-rank .r'), e => e.textContent)"
    )
    assert sorted(map(int, labels)) == list(range(1, k + 1))
    # the first view shows every selected marker, inside the window and clear of the panels
    inside = driver.execute_script(
        "const boxes = ['.reserve-list', '.reserve-legend', '.reserve-summary', '.reserve-top']"
        ".map(s => document.querySelector(s).getBoundingClientRect());"
        "return Array.from(document.querySelectorAll('path.reserve-selected-marker'),"
        " e => { const r = e.getBoundingClientRect(); return r.left >= 0 && r.top >= 0"
        " && r.right <= innerWidth && r.bottom <= innerHeight && boxes.every(b =>"
        " r.right <= b.left || b.right <= r.left || r.bottom <= b.top || b.bottom <= r.top)"
        "; })"
    )
    assert inside == [True] * k
    # the first view shows the whole region, clear of the panels
    assert driver.execute_script(_REGION_SHOWN)
    # colour-blind-safe sequential ramp (viridis ends) and a selected hue outside it
    ramp = driver.execute_script(
        "return getComputedStyle(document.querySelector('.reserve-legend .ramp')).backgroundImage"
    )
    assert "rgb(68, 1, 84)" in ramp and "rgb(253, 231, 37)" in ramp
    strokes = driver.execute_script(
        "return Array.from(document.querySelectorAll('path.reserve-selected-marker, "
        "path.reserve-selected'), e => e.getAttribute('fill') + ' ' + e.getAttribute('stroke'))"
    )
    assert all(s.lower().startswith("#e7298a") for s in strokes), strokes[:3]
    # the legend covers every score drawn, the selected cells' own scores included
    lo, hi, scores = driver.execute_script(
        "const l = document.querySelector('.reserve-legend');"
        "const D = JSON.parse(JSON.stringify(window.reserveData));"
        "return [+l.dataset.lo, +l.dataset.hi, D.candidates.score.concat(D.selected.score)"
        ".filter(v => v !== null)];"
    )
    legend = driver.find_element(By.CLASS_NAME, "reserve-legend").text
    assert hi >= max(scores) and (lo <= min(scores) or f"{lo:g} or less" in legend), (lo, hi)
    sel = res.selected["score"]
    assert f"chosen cells {round(sel.min(), 3):g} to {round(sel.max(), 3):g}" in legend
    # a title with species, budget and date; a plain-language summary, solver figures folded
    title = driver.find_element(By.CLASS_NAME, "reserve-title").text
    assert f"{k} cells to buy" in title and "Test Thrush" in title
    assert re.search(r"\d{4}-\d{2}-\d{2}", title)
    box = driver.find_element(By.CLASS_NAME, "reserve-summary").text
    assert f"{k} cells chosen out of {res.summary['n_candidates']}" in box
    assert "how sure" in box and "higher is better" in box
    assert "a local optimum" in box  # what the solver can promise, in words
    assert "objective" not in box and "status" not in box  # solver-speak stays folded
    solver = driver.execute_script(
        "return Array.from(document.querySelectorAll('.reserve-solver tr'),"
        " r => r.textContent).join('|')"
    )
    assert f"model{res.summary['model_fitted']}" in solver and "objective" in solver
    assert driver.find_element(By.CSS_SELECTOR, ".leaflet-control-layers").is_displayed()
    ranks = driver.find_elements(By.CSS_SELECTOR, ".reserve-ranks li")
    assert [int(li.get_attribute("value")) for li in ranks] == list(range(1, k + 1))
    driver.save_screenshot(str(shots / "map_1400x900.png"))
    # zoomed far out the markers crowd: shown rank labels never overlap, the best rank is
    # shown, some labels give way and the shown ones count the ranks they hide
    driver.execute_script("reserveMap.setZoom(5, {animate: false})")
    shown = driver.execute_script(_VISIBLE_RANKS)
    assert 1 in [row[0] for row in shown] and 0 < len(shown) < k
    assert sum(1 + row[5] for row in shown) == k  # cluster labels: every rank accounted for
    for i, a in enumerate(shown):
        for b in shown[i + 1 :]:
            overlap = a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]
            assert not overlap, (a, b)
    # the ranked list zooms to a cell and opens its popup
    ranks[2].click()
    WebDriverWait(driver, 10).until(
        lambda d: d.find_elements(By.CLASS_NAME, "leaflet-popup-content")
    )
    popup = driver.execute_script(
        "return document.querySelector('.leaflet-popup-content').textContent"
    )
    assert "selected cell" in popup and "rank 3" in popup and "cell id" in popup
    third = res.selected[res.selected["rank"] == 3].iloc[0]  # as the ranking.csv gives it
    where = f"centre {third['latitude']:.5f}, {third['longitude']:.5f} (latitude, longitude)"
    assert where in popup and f"area {third['area_ha']:.1f} ha" in popup
    assert driver.execute_script("return reserveMap.getZoom()") > 5


def _check_stored_layers(driver, tmp_path: Path, shots: Path) -> None:
    """A planner's own region: its public land, outline and other cells drawn and explained."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    units = make_units(n_side=20, seed=3)
    cells = write_units(tmp_path / "own.gpkg", units)
    with_polygon_layers(cells, units)
    res = select_reserve(6, cells, out=tmp_path / "own", map=tmp_path / "own.html", model="linear")
    _open(driver, res.map_path, 1400, 900)
    count = "return document.querySelectorAll(arguments[0]).length"
    assert driver.execute_script(count, "path.reserve-public") >= 1
    assert driver.execute_script(count, "path.reserve-outline") == 1
    assert driver.execute_script(_REGION_SHOWN)
    legend = driver.find_element(By.CLASS_NAME, "reserve-legend").text
    assert "public land" in legend and "region outline" in legend
    assert "other cell: not bought and not learned from (public land nobody surveyed" in legend
    driver.save_screenshot(str(shots / "own_region_1400x900.png"))
    # a click on an other cell (clear of the panels and the markers) says what it is
    centres = units[units["role"] == "other"].geometry.centroid.to_crs(4326)
    spot = driver.execute_script(
        "const m = reserveMap, S = reserveData.selected, c = m.getContainer();"
        "const boxes = Array.from(document.querySelectorAll('.reserve-box, .reserve-top,"
        " .leaflet-control-layers'), e => e.getBoundingClientRect());"
        "const sel = S.lat.map((y, i) => m.latLngToContainerPoint([y, S.lon[i]]));"
        "for (const [y, x] of arguments[0]) { const p = m.latLngToContainerPoint([y, x]);"
        " if (boxes.every(b => p.x < b.left - 5 || p.x > b.right + 5 || p.y < b.top - 5"
        " || p.y > b.bottom + 5) && sel.every(q => q.distanceTo(p) > 30))"
        " return [p.x - c.clientWidth / 2, p.y - c.clientHeight / 2]; } return null;",
        [[p.y, p.x] for p in centres],
    )
    assert spot is not None
    container = driver.find_element(By.CSS_SELECTOR, ".leaflet-container")
    ActionChains(driver).move_to_element_with_offset(container, *map(round, spot)).click().perform()
    text = "const e = document.querySelector('.leaflet-popup-content'); return e && e.textContent"
    WebDriverWait(driver, 10).until(lambda d: d.execute_script(text))
    popup = driver.execute_script(text)
    assert popup.startswith("other cell: not bought and not learned from"), popup
    assert driver.execute_script("return window.__errors") == []


def _check_small(driver, res, shots: Path) -> None:
    """800 x 600: every panel starts folded, small, and opens on a tap."""
    from selenium.webdriver.common.by import By

    _open(driver, res.map_path, 800, 600)
    opened = driver.execute_script(
        "return Array.from(document.querySelectorAll('details.reserve-box'), d => d.open)"
    )
    assert opened == [False, False, False]
    covered = driver.execute_script(
        "return Array.from(document.querySelectorAll('.reserve-box, .reserve-top,"
        " .leaflet-control-layers'), e => { const r = e.getBoundingClientRect();"
        " return r.width * r.height; }).reduce((a, b) => a + b, 0) / (innerWidth * innerHeight)"
    )
    assert covered < 0.12, covered  # at 1400 x 900 unfolded they cover far more
    driver.save_screenshot(str(shots / "map_800x600.png"))
    driver.find_element(By.CSS_SELECTOR, ".reserve-legend summary").click()
    assert driver.find_element(By.CSS_SELECTOR, ".reserve-legend .ramp").is_displayed()


def test_summary_counts_come_from_the_cells_when_the_summary_lacks_them(tmp_path):
    units = scored_units(12, 5)
    page = write_map(units, tmp_path / "m.html", summary={"budget": 5})
    n_cand = int((units["role"] == "candidate").sum())
    assert f"5 cells chosen out of {n_cand} private candidate cells" in page.read_text()


def _check_banner(driver, tmp_path: Path, shots: Path) -> None:
    """A model that ranks nothing: a banner says so, above the map."""
    from selenium.webdriver.common.by import By

    units = scored_units(12, 5)
    units["score"] = -1.0
    note = "every candidate has the same score; " + "more surveyed public land would help " * 8
    summary = {"budget": 5, "signal": "none", "signal_note": note}
    page = write_map(units, tmp_path / "flat.html", summary=summary)
    _open(driver, page, 1400, 900)
    banner = driver.find_element(By.CLASS_NAME, "reserve-banner")
    assert banner.is_displayed() and "ranks nothing" in banner.text
    assert "every candidate has the same score" in banner.text
    # a long banner stays clear of the (unfolded) layer control
    layers = driver.find_element(By.CLASS_NAME, "leaflet-control-layers")
    b, c = banner.rect, layers.rect
    apart = b["x"] + b["width"] <= c["x"] or b["y"] >= c["y"] + c["height"]
    assert apart, (b, c)
    legend = driver.find_element(By.CLASS_NAME, "reserve-legend").text
    assert "every cell -1" in legend and "to 0" not in legend  # no made-up range
    driver.save_screenshot(str(shots / "flat_1400x900.png"))


@pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="chromium / chromedriver not installed (.ci/run installs them)",
)
def test_map_reads_at_a_glance_in_headless_chromium(tmp_path):
    """The map as a person sees it at 1400 x 900 and 800 x 600, with no script error.

    Screenshots go to ``tmp_path`` (``pytest --basetemp=DIR`` keeps them). A tile that
    cannot load (no network here) is logged by Chromium with source 'network'; that is not
    a JavaScript error and is not counted.
    """
    units = make_units(n_side=30)
    cells = write_units(tmp_path / "cells.gpkg", units)
    pyogrio.write_dataframe(
        pd.DataFrame({"item": ["species"], "value": ["Test Thrush"]}),
        cells,
        layer="ingest_summary",
        append=True,
    )
    k = 12
    res = select_reserve(k, cells, out=tmp_path / "out", map=tmp_path / "map.html", model="linear")
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
        _check_large(driver, res, k, tmp_path)
        _check_small(driver, res, tmp_path)
        errors = driver.execute_script("return window.__errors")
        _check_stored_layers(driver, tmp_path, tmp_path)
        _check_novel(driver, tmp_path, tmp_path)
        _check_banner(driver, tmp_path, tmp_path)
        logs = driver.get_log("browser")
    finally:
        driver.quit()
    assert errors == []
    script_errors = [e for e in logs if e["level"] == "SEVERE" and e.get("source") != "network"]
    assert script_errors == [], script_errors
    assert all((tmp_path / f"map_{s}.png").stat().st_size > 10_000 for s in ("1400x900", "800x600"))


def test_popups_carry_locks_and_selection_frequency_only_when_present():
    units = scored_units(10, 4)
    plain = _data(build_map(units))
    assert "freq" not in plain["selected"] and "locked" not in plain["selected"]
    units["locked_in"] = False
    first = units.index[units["rank"] == 1][0]
    units.loc[first, "locked_in"] = True
    units["selection_frequency"] = np.where(units["selected"], 0.75, 0.0)
    units.loc[units["rank"] == 5, "selection_frequency"] = 0.25
    data = _data(build_map(units))
    assert data["selected"]["locked"] == [1, 0, 0, 0]
    assert data["selected"]["freq"] == [0.75] * 4
    ranks = data["candidates"]["rank"]
    assert data["candidates"]["freq"][ranks.index(5)] == 0.25


def test_title_names_the_species_the_label_is_for(tmp_path):
    cells = write_units(tmp_path / "cells.gpkg", make_units(n_side=10))
    pyogrio.write_dataframe(
        pd.DataFrame({"item": ["species"], "value": ["Virtual Thrush; Virtual Quail"]}),
        cells,
        layer="ingest_summary",
        append=True,
    )
    res = select_reserve(3, cells, model="linear", out=tmp_path / "o", map=tmp_path / "m.html")
    assert res.summary["species"] == "Virtual Thrush"  # label = the first species
    assert "Virtual Thrush: 3 cells to buy" in (tmp_path / "m.html").read_text()


def novel_units(n_side: int = 12, k: int = 4) -> gpd.GeoDataFrame:
    """``scored_units`` with the ``mess``, ``novel`` and ``mess_variable`` of a selection:
    every third candidate (the best-ranked and a selected one among them) novel."""
    units = scored_units(n_side, k)
    cand = (units["role"] == "candidate").to_numpy()
    novel = cand & (units["rank"].to_numpy() % 3 == 1)
    units["mess"] = np.where(novel, -12.345, 25.0)
    units["novel"] = novel
    units["mess_variable"] = np.where(novel, "elev_mean", "lc_forest")
    return units


def test_novel_cells_carry_their_mess_and_are_hatched_only_when_present():
    units = novel_units()
    page = build_map(units)
    data = _data(page)
    cand, sel = data["candidates"], data["selected"]
    assert sum(cand["novel"]) + sum(sel["novel"]) == data["n_novel"] == int(units["novel"].sum())
    assert sel["novel"][0] == 1 and sel["mess"][0] == -12.3  # rank 1: novel, one decimal
    assert [data["mess_names"][i] for i in sel["mv"][:2]] == ["elev_mean", "lc_forest"]
    assert 'id="reserve-hatch"' in page and "outside the surveyed habitat (MESS &lt; 0)" in page
    assert f"outside the surveyed habitat ({data['n_novel']}, hatched)" in page
    # a run without novel cells, or a table without the columns: no hatch, no legend row
    calm = build_map(units.assign(novel=False, mess=5.0))
    bare = build_map(scored_units(12, 4))
    for other in (calm, bare):
        assert 'id="reserve-hatch"' not in other and "MESS &lt; 0" not in other
    assert "mess" not in _data(bare)["candidates"]


def _check_novel(driver, tmp_path: Path, shots: Path) -> None:
    """The novel cells: one hatched path filled by the page's own pattern, under the chosen
    cells; a click on one opens the popup of the cell beneath, with its MESS."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page = write_map(novel_units(20, 5), tmp_path / "novel.html", summary={"budget": 5})
    _open(driver, page, 1400, 900)
    paths = driver.execute_script(
        "return Array.from(document.querySelectorAll('path.reserve-novel'), p => {"
        " const r = p.getBoundingClientRect(); return [p.getAttribute('fill'),"
        " getComputedStyle(p).fill, r.width * r.height, p.getAttribute('d').split('M').length"
        " - 1]; })"
    )
    n_novel = _data(page.read_text())["n_novel"]
    assert [p[0] for p in paths] == ["url(#reserve-hatch)"] * 2  # candidates, selected
    assert all("reserve-hatch" in p[1] and p[2] > 100 for p in paths), paths
    assert sum(p[3] for p in paths) == n_novel  # one ring per novel cell
    assert driver.execute_script(
        "const p = document.getElementById('reserve-hatch');"
        "return p && p.tagName === 'pattern' && p.querySelectorAll('rect').length"
    )
    control = driver.find_element(By.CSS_SELECTOR, ".leaflet-control-layers").text
    assert f"outside the surveyed habitat ({n_novel}, hatched)" in control
    legend = driver.find_element(By.CLASS_NAME, "reserve-legend").text
    assert "outside the surveyed habitat (MESS < 0)" in legend
    # the best-ranked novel candidate that is not chosen: click its centre
    centre = driver.execute_script(
        "const d = reserveData.candidates; let best = -1;"
        "for (let i = 0; i < d.rank.length; i++) if (d.novel[i] && (best < 0 ||"
        " d.rank[i] < d.rank[best])) best = i;"
        "let p = 0; for (let i = 0; i < best; i++) p += 2 * d.n[i];"
        "let x = 0, y = 0, sx = 0, sy = 0;"
        "for (let j = 0; j < d.n[best]; j++, p += 2) { if (j === 0) { x = d.xy[p];"
        " y = d.xy[p + 1]; } else { x += d.xy[p]; y += d.xy[p + 1]; } sx += x; sy += y; }"
        "reserveMap.setView([sy / d.n[best] / 1e5, sx / d.n[best] / 1e5], 12,"
        " {animate: false});"
        "const c = reserveMap.latLngToContainerPoint([sy / d.n[best] / 1e5,"
        " sx / d.n[best] / 1e5]); return [c.x, c.y, d.id[best]];"
    )
    time.sleep(0.5)
    box = driver.find_element(By.CLASS_NAME, "leaflet-container")
    rect = box.rect
    ActionChains(driver).move_to_element_with_offset(
        box, int(centre[0] - rect["width"] / 2), int(centre[1] - rect["height"] / 2)
    ).click().perform()
    WebDriverWait(driver, 10).until(
        lambda d: d.find_elements(By.CLASS_NAME, "leaflet-popup-content")
    )
    popup = driver.execute_script(
        "return document.querySelector('.leaflet-popup-content').textContent"
    )
    assert f"cell id {centre[2]}" in popup
    assert "outside the surveyed habitat: MESS -12.3 (most unlike on elev_mean)" in popup
    time.sleep(0.5)  # the popup fades in
    driver.save_screenshot(str(shots / "novel_1400x900.png"))
    assert driver.execute_script("return window.__errors") == []


@pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="chromium / chromedriver not installed (.ci/run installs them)",
)
def test_suggested_surveys_are_a_layer_of_their_own_in_headless_chromium(tmp_path):
    """The cells to survey next: dashed orange outlines, one per cell, over the cells drawn,
    named in the layer control, hidden with it, and no script error."""
    from selenium.webdriver.common.by import By

    units = scored_units(20, 5)
    cand = units.index[(units["role"] == "candidate") & ~units["selected"]][:4]
    units["survey_rank"] = 0
    units.loc[cand, "survey_rank"] = np.arange(1, 5)
    page = write_map(units, tmp_path / "survey.html", summary={"budget": 5})
    driver = _driver()
    try:
        _open(driver, page, 1400, 900)
        paths = driver.execute_script(
            "return Array.from(document.querySelectorAll('path.reserve-survey'), p => {"
            " const r = p.getBoundingClientRect(); return [p.getAttribute('stroke'),"
            " p.getAttribute('stroke-dasharray'), p.getAttribute('fill'), r.width * r.height];"
            " })"
        )
        assert len(paths) == 4
        assert all(p[0] == "#ff7f00" and p[1] == "6 4" and p[2] == "none" for p in paths), paths
        assert all(p[3] > 4 for p in paths), paths
        control = driver.find_element(By.CSS_SELECTOR, ".leaflet-control-layers")
        label = next(
            e for e in control.find_elements(By.TAG_NAME, "label") if "survey next (4" in e.text
        )
        label.find_element(By.TAG_NAME, "input").click()
        hidden = driver.execute_script("return document.querySelectorAll('path.reserve-survey')")
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        driver.quit()
    assert hidden == []
    assert [e for e in errors if e.get("source") != "network"] == []


@pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="chromium / chromedriver not installed (.ci/run installs them)",
)
def test_several_species_switch_between_their_overlays_in_headless_chromium(tmp_path):
    """A plan for two species: one overlay per species in the layer control, the first shown;
    switching draws the other species' chosen cells, shaded by its own probability."""
    from selenium.webdriver.common.by import By

    from reserve.maps import species_layer_name

    units = scored_units(20, 6)
    chosen = units["selected"].to_numpy(dtype=bool)
    units["probability__forest_bird"] = np.where(chosen, 0.9, 0.1)
    units["probability__crop_bird"] = np.where(chosen, np.linspace(0, 1, len(units)), 0.2)
    summary = {"budget": 6, "species": "Forest Bird, Crop Bird"}
    page = write_map(units, tmp_path / "species.html", summary=summary)
    fills = (
        "return Array.from(document.querySelectorAll('path.reserve-species-{}'),"
        " p => p.getAttribute('fill'))"
    )
    driver = _driver()
    try:
        _open(driver, page, 1400, 900)
        first, second = (
            driver.execute_script(fills.format(0)),
            driver.execute_script(fills.format(1)),
        )
        control = driver.find_element(By.CSS_SELECTOR, ".leaflet-control-layers")
        labels = {e.text.strip(): e for e in control.find_elements(By.TAG_NAME, "label")}
        labels[species_layer_name("Crop Bird")].find_element(By.TAG_NAME, "input").click()
        labels[species_layer_name("Forest Bird")].find_element(By.TAG_NAME, "input").click()
        after = driver.execute_script(fills.format(1)), driver.execute_script(fills.format(0))
        driver.save_screenshot(str(tmp_path / "species_1400x900.png"))
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        driver.quit()
    assert len(first) == chosen.sum() and second == []  # the first species shown at first
    assert len(set(first)) == 1  # one probability, one shade
    assert len(after[0]) == chosen.sum() and after[1] == []
    assert len(set(after[0])) > 1  # the second species' own probabilities
    assert [e for e in errors if e.get("source") != "network"] == []


@pytest.mark.parametrize(("expected", "blind", "says"), [(9.7, 13.6, True), (26.2, 5.5, False)])
def test_the_how_sure_box_says_when_a_blind_pick_is_expected_to_hold_more(
    tmp_path, expected, blind, says
):
    summary = {
        "budget": 5,
        "n_train": 40,
        "n_train_positive": 10,
        "n_selected": 5,
        "signal": "weak",
        "expected_occupied": expected,
        "expected_occupied_low": expected - 2,
        "expected_occupied_high": expected + 2,
        "expected_occupied_blind": blind,
    }
    text = write_map(scored_units(12, 5), tmp_path / "m.html", summary=summary).read_text()
    sentence = (
        "The calibrated probabilities expect fewer occupied cells in this choice than in a "
        f"blind pick of as many cells ({expected:.1f}, 90% interval {expected - 2:.0f}-"
        f"{expected + 2:.0f}, against {blind:.1f})."
    )
    assert (sentence in text) is says
    assert "treat the choice as unproven" in text
