"""An interactive HTML map of a selection (folium / Leaflet), drawn in EPSG:4326.

What is drawn, each in its own entry of the layer control:

* **selected cells**: every one of them, as a thick outline (SVG path of class
  ``reserve-selected``) and, so that a 3 km cell still shows at state-wide zoom, a circle
  marker of fixed on-screen size (SVG path of class ``reserve-selected-marker``). Rank
  labels sit on the markers; where markers crowd, only the best-ranked label of a crowd is
  shown (greedy placement, redone at every zoom), so labels never pile up. A ranked list
  panel names every selected cell and zooms to it on click;
* **candidate cells** coloured by score (the colour ramp and its range are in the legend);
* **training cells**: detected (blue) and not detected (grey);
* **outside the surveyed habitat**: the drawn candidate and selected cells whose habitat is
  *novel* (negative ``mess``, :mod:`reserve.novelty`), hatched over their colour (SVG paths
  of class ``reserve-novel`` filled with the page's own ``<pattern id="reserve-hatch">``,
  so the hatching needs no network), with their MESS in a tooltip;
* **other cells**, lightly shaded: the cells that are neither bought nor learned from
  (role ``other``: public land nobody surveyed, land locked out at ingest, or a private
  cell mostly outside the region), so that they read as part of the grid, not as holes;
* **public land** and the **region outline** (simplified to about 100 m): the files given,
  else the layers ``public_land`` and ``region`` that ``reserve ingest`` stored beside the
  cells (:func:`reserve.run_files.stored_polygons`); without either, the outline of the
  planning units.

Clicking a cell opens a popup with its id, rank, score, label and the values of the main
habitat features (:meth:`reserve.select.SelectionResult.main_features`), plus "locked in"
for locked-in cells and the ``selection_frequency`` of bootstrapped runs. A summary box
gives the budget, method, C and objective.

The map opens on the whole region, with fractional zoom so the fit is tight, in the part of
the window the panels leave free (beside them or above them, whichever shows the region
larger), so no part of the region starts hidden; every selected cell has a marker that
shows at that zoom. A "selection" button frames the selected cells with context: their
bounding box, widened to at least :data:`CONTEXT` of the region's extent in each direction
(kept inside the region); "whole region" returns to the first view.

Light and offline: the bulk of the cells (candidates and training cells) is not GeoJSON but
compact integer arrays (1e-5 degree steps, delta-coded rings) drawn on one canvas by a short
script, so about 20,000 cells stay near 2 MB; above ``max_cells`` the lowest-scoring
candidates are left out (never a selected cell), and the summary box says so. Leaflet's
JavaScript and CSS are inlined from ``reserve/static`` (BSD-2, vendored), so the page needs
the network only for the base-map tiles; when tiles cannot load, the cells still draw (a
failed tile is a network error, not a script error).
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import shapely

from reserve.config import SELECT_DEFAULTS, species_slug
from reserve.errors import DataFileError, OutputExistsError
from reserve.grid import cell_locations

__all__ = ["CONTEXT", "build_map", "initial_view", "write_map", "write_page"]

_Q = 1e5  # coordinate quantum: 1e-5 degree (about 1 m)

#: Smallest share of the region's extent (per direction) the initial view shows.
CONTEXT = 0.4


def _static(name: str) -> str:
    return resources.files("reserve").joinpath("static", name).read_text(encoding="utf-8")


def _rings(geoms: np.ndarray) -> tuple[list[int], list[int]]:
    """Exterior rings as delta-coded integer coordinates and point counts (closing point cut)."""
    if len(geoms) == 0:
        return [], []
    rings = shapely.get_exterior_ring(shapely.get_geometry(geoms, 0))
    coords, idx = shapely.get_coordinates(rings, return_index=True)
    q = np.round(coords * _Q).astype(np.int64)
    counts = np.bincount(idx, minlength=len(geoms))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    keep = np.ones(len(q), dtype=bool)
    keep[starts + counts - 1] = False  # the closing point repeats the first
    first = np.zeros(len(q), dtype=bool)
    first[starts] = True
    delta = q.copy()
    delta[1:] -= q[:-1]
    delta[first] = q[first]
    return delta[keep].ravel().tolist(), (counts - 1).tolist()


def _round(values: np.ndarray, digits: int = 3) -> list[Any]:
    v = np.round(np.asarray(values, dtype=np.float64), digits)
    return [None if not np.isfinite(x) else float(x) for x in v]


def _ids(cell_id: Any) -> list[Any]:
    """Cell ids for the page: integers as integers, text ids (legal in a cells file) as text."""
    if cell_id.dtype.kind in "iuf":
        return cell_id.astype(np.int64).tolist()
    return cell_id.astype(str).tolist()


def _layer(frame: gpd.GeoDataFrame, features: Sequence[str]) -> dict[str, Any]:
    xy, n = _rings(frame.geometry.to_numpy())
    out = {
        "xy": xy,
        "n": n,
        "id": _ids(frame["cell_id"]),
        "score": _round(frame["score"].to_numpy(), 3),
        "rank": frame["rank"].astype(np.int64).tolist(),
        "label": frame["label"].astype(np.int64).tolist(),
        "f": [_round(frame[c].to_numpy(), 3) for c in features],
    }
    # only when the run used them, so a plain run's page is unchanged
    if "selection_frequency" in frame.columns:
        out["freq"] = _round(frame["selection_frequency"].to_numpy(), 3)
    if "locked_in" in frame.columns and frame["locked_in"].astype(bool).any():
        out["locked"] = frame["locked_in"].astype(bool).astype(np.int64).tolist()
    out |= _novelty_data(frame)
    out |= _survey_data(frame)
    return out


def _survey_data(frame: gpd.GeoDataFrame) -> dict[str, Any]:
    """A layer's calibrated probability (2 decimals) and survey flags, when present."""
    if "probability" not in frame.columns:
        return {}
    flag = np.where(
        frame["known_detection"].astype(bool),
        1,
        np.where(frame["surveyed_no_detection"].astype(bool), 2, 0),
    )
    return {"p": _round(frame["probability"].to_numpy(), 2), "sv": flag.tolist()}


def _novelty_data(frame: gpd.GeoDataFrame) -> dict[str, Any]:
    """A layer's MESS (1 decimal), novel flags and most dissimilar feature, when present."""
    if "mess" not in frame.columns or "novel" not in frame.columns:
        return {}
    out = {
        "mess": _round(frame["mess"].to_numpy(), 1),
        "novel": frame["novel"].astype(bool).astype(np.int64).tolist(),
    }
    if "mess_variable" in frame.columns:  # names, until _index_mess_names numbers them
        out["mv"] = frame["mess_variable"].fillna("").astype(str).tolist()
    return out


def _index_mess_names(data: dict[str, Any]) -> None:
    """Each layer's most dissimilar feature as a number into ``data["mess_names"]`` (size)."""
    layers = [d for d in data.values() if isinstance(d, dict) and "mv" in d]
    names = sorted({n for d in layers for n in d["mv"]})
    number = {n: i for i, n in enumerate(names)}
    for d in layers:
        d["mv"] = [number[n] for n in d["mv"]]
    data["mess_names"] = names


def initial_view(
    selected_bounds: Sequence[float] | None,
    region_bounds: Sequence[float],
    context: float = CONTEXT,
) -> list[list[float]]:
    """The map's first view: the selection, widened for context, inside the region.

    Parameters
    ----------
    selected_bounds : sequence of 4 floats or None
        ``(minx, miny, maxx, maxy)`` of the selected cells (lon/lat); None for no selection.
    region_bounds : sequence of 4 floats
        ``(minx, miny, maxx, maxy)`` of all cells.
    context : float
        Smallest share of the region's extent shown in each direction (0 to 1).

    Returns
    -------
    list
        ``[[south, west], [north, east]]``, as Leaflet's ``fitBounds`` takes it.

    Examples
    --------
    >>> initial_view((0.0, 0.0, 1.0, 1.0), (0.0, 0.0, 10.0, 10.0))
    [[0.0, 0.0], [4.0, 4.0]]
    """
    rx0, ry0, rx1, ry1 = (float(v) for v in region_bounds)
    if selected_bounds is None or not np.all(np.isfinite(selected_bounds)):
        return [[ry0, rx0], [ry1, rx1]]
    sx0, sy0, sx1, sy1 = (float(v) for v in selected_bounds)

    def widen(lo: float, hi: float, rlo: float, rhi: float) -> tuple[float, float]:
        span = min(max(hi - lo, context * (rhi - rlo)), rhi - rlo)
        a = (lo + hi - span) / 2
        a = min(max(a, rlo), rhi - span)  # slide inside the region, never shrink
        return min(a, lo), max(a + span, hi)

    x0, x1 = widen(sx0, sx1, rx0, rx1)
    y0, y1 = widen(sy0, sy1, ry0, ry1)
    return [[round(y0, 5), round(x0, 5)], [round(y1, 5), round(x1, 5)]]


def _outline_geojson(path: Any, fallback: Any = None) -> str | None:
    """``path`` (a polygon file, or a geometry in EPSG:4326) or ``fallback``, as GeoJSON."""
    if path is None and fallback is None:
        return None
    if isinstance(path, shapely.Geometry):
        geom = path
    elif path is not None:
        try:
            shapes = gpd.read_file(path)
        except Exception as exc:  # any unreadable file: a one-line data error
            raise DataFileError(f"cannot read polygons {str(path)!r} ({exc})") from None
        if shapes.crs is None:
            raise DataFileError(f"polygons {str(path)!r} have no CRS; assign one")
        geom = shapely.union_all(shapes.to_crs(4326).geometry.make_valid().to_numpy())
    else:
        geom = fallback
    geom = shapely.simplify(geom, 0.001, preserve_topology=True)
    geom = shapely.set_precision(geom, 1e-4)
    return shapely.to_geojson(geom)


def build_map(
    planning_units: gpd.GeoDataFrame,
    *,
    summary: Mapping[str, Any] | None = None,
    main_features: Sequence[str] = (),
    public: str | os.PathLike[str] | shapely.Geometry | None = None,
    outline: str | os.PathLike[str] | shapely.Geometry | None = None,
    tiles: str | None = "OpenStreetMap",
    max_cells: int = SELECT_DEFAULTS.map_max_cells,
) -> str:
    """The map's HTML page.

    Parameters
    ----------
    planning_units : geopandas.GeoDataFrame
        The ``planning_units`` of a selection (columns ``cell_id``, ``role``, ``label``,
        ``score``, ``rank``, ``selected`` and the features), in any CRS.
    summary : mapping, optional
        The run summary (``budget``, ``method``, ``c``, ``objective`` are shown).
    main_features : sequence of str
        Feature columns shown in the popups.
    public, outline : path-like or shapely geometry, optional
        Public-land polygons and the region outline: polygon files, or geometries in
        EPSG:4326 (as :func:`reserve.run_files.stored_polygons` reads them from a cells
        file). Without ``outline`` the outline of the planning units is drawn.
    tiles : str or None
        folium base map; None for none.
    max_cells : int
        Most candidate + training cells drawn (the selected cells come on top of these).

    Returns
    -------
    str
    """
    import folium

    # the counts the summary box states, from the cells themselves when the summary lacks them
    role = planning_units["role"].astype(str)
    counts = {
        "n_selected": int(planning_units["selected"].astype(bool).sum()),
        "n_candidates": int((role == "candidate").sum()),
    }
    summary = {**counts, **(summary or {})}
    # the ranking's figures, for the popups
    where = cell_locations(planning_units.geometry.to_numpy(), planning_units.crs)
    units = planning_units.assign(**{c: where[c].to_numpy() for c in where}).to_crs(4326)
    data, sel, thinned = _map_data(units, main_features, max_cells)
    (s, w), (n, e) = data["view"]
    # zoom_snap: fractional zooms, so the first view fits the selection tightly
    m = folium.Map(
        location=[(s + n) / 2, (w + e) / 2],
        zoom_start=7,
        tiles=None,
        control_scale=True,
        prefer_canvas=False,
        zoom_snap=0.25,
        zoom_delta=0.5,
    )
    _offline_leaflet(m)
    if tiles:
        folium.TileLayer(tiles, name="base map", control=False).add_to(m)
    species = [n.strip() for n in str(summary.get("species") or "").split(",") if n.strip()]
    _add_layers(m, data, units, len(sel), public, outline, species)
    _add_panels(m, summary, data, len(sel), thinned, public is not None)
    return m.get_root().render()


def _map_data(
    units: gpd.GeoDataFrame, main_features: Sequence[str], max_cells: int
) -> tuple[dict[str, Any], gpd.GeoDataFrame, int]:
    """The cells drawn (as the script's data), the selected cells, and how many were thinned."""
    role = units["role"].astype(str).to_numpy()
    sel_mask = units["selected"].astype(bool).to_numpy()
    feats = [f for f in main_features if f in units.columns]

    sel = units[sel_mask].sort_values("rank")
    cand = units[(role == "candidate") & ~sel_mask]
    train = units[role == "train"]
    other = units[(role == "other") & ~sel_mask]
    room = max(0, int(max_cells) - len(train))
    thinned = max(0, len(cand) - room)
    if thinned:  # keep the best-scoring candidates; the selected are drawn regardless
        cand = cand.sort_values("rank").iloc[:room]
    detected = train["label"].to_numpy() == 1

    minx, miny, maxx, maxy = units.total_bounds
    data = {"features": feats, **_score_range(cand["score"].to_numpy(), sel["score"].to_numpy())}
    data |= {
        "view": initial_view(sel.total_bounds if len(sel) else None, (minx, miny, maxx, maxy)),
        "region": [[float(miny), float(minx)], [float(maxy), float(maxx)]],
        "candidates": _layer(cand, feats),
        "detected": _layer(train[detected], feats),
        "undetected": _layer(train[~detected], feats),
        "selected": _layer(sel, feats),
    }
    # light: shapes only, at most max_cells of them (one shaded path, one popup for all)
    xy, n = _rings(other.geometry.to_numpy()[: int(max_cells)])
    data["others"] = {"xy": xy, "n": n, "count": len(other)}
    data["n_novel"] = sum(sum(data[k].get("novel", [])) for k in ("candidates", "selected"))
    _add_areas(
        data,
        {
            "candidates": cand,
            "detected": train[detected],
            "undetected": train[~detected],
            "selected": sel,
        },
    )
    _index_mess_names(data)
    return data, sel, thinned


def _add_areas(data: dict[str, Any], frames: Mapping[str, gpd.GeoDataFrame]) -> None:
    """The popups' cell areas and the chosen cells' centroids.

    An area is one figure (``cell_ha``) for a regular grid, else one per cell. The chosen
    cells carry their centroids as the ``ranking`` layer gives them (``lat``, ``lon``); the
    page finds the others' centres from their drawn shapes.
    """
    chosen = frames["selected"]
    data["selected"]["lat"] = chosen["latitude"].tolist()
    data["selected"]["lon"] = chosen["longitude"].tolist()
    every = np.concatenate([f["area_ha"].to_numpy() for f in frames.values()])
    if every.size and np.allclose(every, every[0], rtol=1e-6):
        data["cell_ha"] = round(float(every[0]), 2)
        return
    for name, frame in frames.items():
        data[name]["ha"] = _round(frame["area_ha"].to_numpy(), 2)


def _score_range(cand: np.ndarray, sel: np.ndarray) -> dict[str, Any]:
    """The colour ramp's range and the scores it must cover.

    The ramp runs from the 2nd percentile of every drawn score (candidates and selected
    cells; lower ones take the lowest colour and the legend says "or less") to the highest
    drawn score, so the selected cells' scores are always on it.
    """
    drawn = np.concatenate([cand, sel]).astype(np.float64)
    drawn = drawn[np.isfinite(drawn)]
    if drawn.size == 0:
        return {"range": [0.0, 1.0], "span": [0.0, 1.0], "sel_span": None, "flat": False}
    lo, hi = float(np.percentile(drawn, 2)), float(drawn.max())
    sel = sel[np.isfinite(sel)].astype(np.float64)
    sel_span = [round(float(sel.min()), 3), round(float(sel.max()), 3)] if sel.size else None
    return {
        "range": [round(lo, 3), round(hi if hi > lo else lo + 1.0, 3)],
        "span": [round(float(drawn.min()), 3), round(hi, 3)],
        "sel_span": sel_span,
        "flat": bool(hi <= float(drawn.min())),
    }


def _offline_leaflet(m: Any) -> None:
    """Inline Leaflet and the page's styles: no CDN scripts or styles."""
    from branca.element import Element

    m.default_js = []
    m.default_css = []
    m.get_root().header.add_child(
        Element(
            f"<style>{_static('leaflet.css')}</style>\n<script>{_static('leaflet.min.js')}</script>"
            + f"\n<style>{_CSS}</style>"
        ),
        name="reserve_leaflet",
        index=0,
    )


def _add_layers(
    m: Any,
    data: dict[str, Any],
    units: gpd.GeoDataFrame,
    n_sel: int,
    public: str | os.PathLike[str] | None,
    outline: str | os.PathLike[str] | None,
    species: Sequence[str] = (),
) -> None:
    """The layer groups and the script that fills them from ``data`` (with ``species``
    planned together, an overlay per species)."""
    import folium
    from branca.element import Element, MacroElement
    from jinja2 import Template

    fg_outline = folium.FeatureGroup(name="region outline").add_to(m)
    fg_public = folium.FeatureGroup(name="public land")
    if public is not None:
        fg_public.add_to(m)
    n_other = data["others"]["count"]
    fg_other = folium.FeatureGroup(name=f"other cells ({n_other}): not bought, not learned from")
    if n_other:
        fg_other.add_to(m)
    fg_cand = folium.FeatureGroup(name="candidate cells (score)").add_to(m)
    fg_novel = folium.FeatureGroup(
        name=f"outside the surveyed habitat ({data['n_novel']}, hatched)",
        show=bool(data["n_novel"]),
    )
    if data["n_novel"]:
        fg_novel.add_to(m)
        m.get_root().html.add_child(Element(_HATCH), name="reserve_hatch")
    fg_det = folium.FeatureGroup(name="training: detected").add_to(m)
    fg_undet = folium.FeatureGroup(name="training: not detected").add_to(m)
    fg_sel = folium.FeatureGroup(name=f"selected cells ({n_sel})").add_to(m)
    fg_patch = folium.FeatureGroup(name="patches (outlines)").add_to(m)

    fallback = None
    if outline is None:  # the planning units' own outline (cells tile the region)
        fallback = shapely.coverage_union_all(shapely.make_valid(units.geometry.to_numpy()))
    outline_json = _outline_geojson(outline, fallback)
    public_json = _outline_geojson(public) if public is not None else None

    macro = MacroElement()
    macro._name = "reserve_cells"
    # The script goes in as a value, not as template text: Jinja never parses the data.
    macro.payload = (
        _JS.replace("__DATA__", json.dumps(data, separators=(",", ":")))
        .replace("__OUTLINE__", outline_json or "null")
        .replace("__PUBLIC__", public_json or "null")
        .replace("__PATCHES__", _patches_geojson(units) or "null")
        .replace("__FG_PATCH__", fg_patch.get_name())
        .replace("__FG_OUTLINE__", fg_outline.get_name())
        .replace("__FG_PUBLIC__", fg_public.get_name())
        .replace("__FG_CAND__", fg_cand.get_name())
        .replace("__FG_OTHER__", fg_other.get_name() if n_other else "null")
        .replace("__FG_NOVEL__", fg_novel.get_name() if data["n_novel"] else "null")
        .replace("__FG_DET__", fg_det.get_name())
        .replace("__FG_UNDET__", fg_undet.get_name())
        .replace("__FG_SEL__", fg_sel.get_name())
        .replace("__OTHER_TEXT__", json.dumps(OTHER_TEXT))
        .replace("__MAP__", m.get_name())
    )
    macro._template = Template("{% macro script(this, kwargs) %}{{ this.payload }}{% endmacro %}")
    _add_species_layers(m, units, species)
    _add_survey_layer(m, units)
    folium.LayerControl(collapsed=False).add_to(m)  # before the script, which may fold it
    m.add_child(macro)


#: Prefix of the per-species probability columns drawn as one overlay per species.
SPECIES_PROBABILITY_PREFIX = "probability__"


def species_layer_name(species: str) -> str:
    """The layer switch's name of one species' overlay.

    Examples
    --------
    >>> species_layer_name("Virtual Quail")
    'Virtual Quail: chosen cells by probability (light 0, dark green 1)'
    """
    return f"{species}: chosen cells by probability (light 0, dark green 1)"


def _add_species_layers(m: Any, units: gpd.GeoDataFrame, species: Sequence[str]) -> None:
    """Several species planned together: one overlay per species (the first shown), the
    chosen cells shaded by that species' calibrated probability (light: 0, dark green: 1).

    The overlays lie in a pane of their own above the cells (which the page's script draws
    later) and let clicks through, so a chosen cell's popup still opens.
    """
    columns = {n: SPECIES_PROBABILITY_PREFIX + species_slug(n) for n in species}
    if len(columns) < 2 or not all(c in units.columns for c in columns.values()):
        return
    import folium
    from branca.colormap import linear

    folium.map.CustomPane("reserve_species", z_index=440, pointer_events=False).add_to(m)
    ramp = linear.YlGn_09.scale(0.0, 1.0)
    chosen = units[units["selected"].astype(bool)]
    for j, (name, col) in enumerate(columns.items()):
        group = folium.FeatureGroup(name=species_layer_name(name), show=j == 0).add_to(m)
        for geom, p in zip(chosen.geometry, chosen[col].to_numpy(dtype=np.float64), strict=True):
            ring = [(y, x) for x, y in shapely.get_exterior_ring(geom).coords]
            folium.Polygon(
                ring,
                pane="reserve_species",
                interactive=False,
                class_name=f"reserve-species reserve-species-{j}",
                color="#222222",
                weight=1,
                fill_color=ramp(p) if np.isfinite(p) else "#999999",
                fill_opacity=0.85,
            ).add_to(group)


#: Outline of a cell suggested for a survey (``survey_rank`` > 0): dashed orange, unfilled.
SURVEY_STYLE = {"color": "#ff7f00", "weight": 3, "dash_array": "6 4", "fill": False}


def _add_survey_layer(m: Any, units: gpd.GeoDataFrame) -> None:
    """The cells to survey next (``survey_rank`` > 0, :mod:`reserve.surveys`) as their own
    layer of dashed outlines over the others; none without them."""
    if "survey_rank" not in units.columns:
        return
    import folium

    todo = units[units["survey_rank"].to_numpy() > 0].sort_values("survey_rank")
    if todo.empty:
        return
    # a pane of its own above the cells (which the page's script draws later); clicks go
    # through to the cell beneath and its popup
    folium.map.CustomPane("reserve_survey", z_index=450, pointer_events=False).add_to(m)
    group = folium.FeatureGroup(name=f"survey next ({len(todo)}, dashed orange)").add_to(m)
    for geom in todo.geometry:
        ring = [(y, x) for x, y in shapely.get_exterior_ring(geom).coords]
        folium.Polygon(
            ring,
            pane="reserve_survey",
            interactive=False,
            class_name="reserve-survey",
            **SURVEY_STYLE,
        ).add_to(group)


def _patches_geojson(units: gpd.GeoDataFrame) -> str | None:
    """Each patch of selected cells (``patch_id`` > 0) as one outlined polygon, as GeoJSON."""
    if "patch_id" not in units.columns:
        return None
    pid = units["patch_id"].to_numpy()
    feats = []
    for p in np.unique(pid[pid > 0]):
        shape = shapely.union_all(units.geometry.to_numpy()[pid == p])
        feats.append(
            {
                "type": "Feature",
                "geometry": shapely.geometry.mapping(shape),
                "properties": {"patch": int(p), "cells": int((pid == p).sum())},
            }
        )
    if not feats:
        return None
    return json.dumps({"type": "FeatureCollection", "features": feats}, separators=(",", ":"))


def _fmt(summary: Mapping[str, Any], key: str, spec: str = "") -> str:
    v = summary.get(key)
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "n/a"
    return format(v, spec) if spec else str(v)


def _budget_text(summary: Mapping[str, Any]) -> str:
    """``"30 cells"``, or a money budget with what it bought."""
    if summary.get("budget_unit", "cells") == "cells":
        return f"{_fmt(summary, 'budget')} cells"
    return (
        f"budget {_fmt(summary, 'budget', 'g')} ({_fmt(summary, 'budget_unit')}): "
        f"{_fmt(summary, 'n_selected')} cells costing {_fmt(summary, 'total_cost', '.6g')}"
    )


def _title(summary: Mapping[str, Any]) -> str:
    """The page's headline: species, budget, date."""
    species = summary.get("species") or "species not named in the input"
    date = str(summary.get("created_utc") or _dt.date.today().isoformat())[:10]
    return f"{species}: {_budget_text(summary)} to buy · {date}"


def _pct_interval(summary: Mapping[str, Any], key: str) -> str:
    """``49% (90% interval 37-61%)`` of a share in the summary."""
    point, low, high = (summary.get(key + end) for end in ("", "_low", "_high"))
    level = round(100 * float(summary.get("interval_level") or 0.9))
    if not isinstance(low, float) or not np.isfinite(low):
        return f"{point:.0%}"
    return f"{point:.0%} ({level}% interval {low:.0%}-{high:.0%})"


def _labelled(summary: Mapping[str, Any]) -> str:
    """The cells the model learned from, in words."""
    learned = int(summary.get("n_learned") or 0)
    n = int(summary.get("n_train") or 0)
    if learned:
        return f"{n} surveyed public and {learned} surveyed private cells"
    return f"{n} surveyed public cells"


def _finite(value: Any) -> bool:
    """Whether ``value`` is a finite float."""
    return isinstance(value, float) and bool(np.isfinite(value))


def _blind_expected(summary: Mapping[str, Any]) -> str:
    """``, against N for a blind pick`` ('' when the summary does not say)."""
    blind = summary.get("expected_occupied_blind")
    if _finite(blind):
        return f", against {blind:.0f} for a blind pick"
    return ""


def _expected_interval(summary: Mapping[str, Any]) -> str:
    """``90% interval LOW-HIGH`` of the expected occupied chosen cells."""
    level = round(100 * float(summary.get("interval_level") or 0.9))
    return (
        f"{level}% interval {summary['expected_occupied_low']:.0f}-"
        f"{summary['expected_occupied_high']:.0f}"
    )


def _certainty(summary: Mapping[str, Any]) -> str:
    """How sure the selection is, in plain words: the evidence about the land being bought
    first, each figure with its interval; no confidence claimed where the verdict is weak."""
    n_train, n_pos = summary.get("n_train"), summary.get("n_train_positive")
    if not n_train or n_pos is None:
        return "Not measured (no training cells recorded)."
    signal = summary.get("signal", "ok")
    parts = []
    if summary.get("check_available"):
        parts.append(
            f"Of {summary['check_n_surveyed']} private cells that birders surveyed, "
            f"{summary['check_n_detected']} had a detection. Comparing cells of equal survey "
            f"effort, the top 5% by this model's score had the species in "
            f"{_pct_interval(summary, 'check_precision_top')}, against "
            f"{summary['check_blind']:.0%} for a blind pick."
        )
    elif summary.get("check_note"):
        parts.append(f"No check on private land ({summary['check_note']}).")
    if _finite(summary.get("cv_precision")):
        parts.append(
            f"In cross-validation on the {_labelled(summary)}, "
            f"{_pct_interval(summary, 'cv_precision')} of the cells this model picked held "
            f"the species, against {summary.get('cv_blind', n_pos / n_train):.0%} blind."
        )
    expected = summary.get("expected_occupied")
    if _finite(expected) and signal == "ok":
        parts.append(
            f"Expected to hold the species: {expected:.0f} of the {summary['n_selected']} "
            f"chosen cells ({_expected_interval(summary)}){_blind_expected(summary)}."
        )
    blind = summary.get("expected_occupied_blind")
    if _finite(expected) and _finite(blind) and expected < blind:
        parts.append(
            f"The calibrated probabilities expect fewer occupied cells in this choice than in "
            f"a blind pick of as many cells ({expected:.1f}, {_expected_interval(summary)}, "
            f"against {blind:.1f})."
        )
    if signal != "ok":
        parts.append(
            "This does not show that the model can rank these cells: treat the choice as unproven."
        )
    return " ".join(parts) or (
        f"Not measured in this run; {n_pos} of the {n_train} surveyed public cells had a detection."
    )


def _solver_certainty(summary: Mapping[str, Any]) -> str:
    """What the solver can promise about its choice, in plain words ('' when unknown)."""
    status, gap = str(summary.get("solver_status", "")), summary.get("gap")
    if status == "optimal":
        return "The solver proved this the best choice for the fitted model."
    if _finite(gap):
        return f"The solver proved its choice within {gap:.0%} of the best possible one."
    if status == "local":
        return "The solver's choice is the best it found (a local optimum), not proved best."
    return ""


def _summary_rows(summary: Mapping[str, Any], thinned: int) -> list[tuple[str, str]]:
    """The summary box's plain-language rows (label, value); solver figures come after."""
    n_in = int(summary.get("n_locked_in") or 0)
    chosen = (
        f"{_fmt(summary, 'n_selected')} cells chosen out of "
        f"{_fmt(summary, 'n_candidates')} private candidate cells"
        + (f" ({n_in} locked in: already owned)" if n_in else "")
        + "."
    )
    n_patches = summary.get("n_patches")
    patches = []
    if isinstance(n_patches, int | np.integer) and n_patches > 0:
        km = float(summary.get("boundary_length", float("nan"))) / 1000.0
        largest = int(summary.get("largest_patch_cells") or 0)
        patches = [
            (
                "patches",
                f"{n_patches} patch{'es' if n_patches > 1 else ''} of touching "
                f"cells (largest {largest} cell{'s' if largest > 1 else ''}); "
                f"their outer boundary {km:.4g} km.",
            )
        ]
    penalised = float(summary.get("boundary_penalty") or 0.0) > 0.0
    which = "the chosen cells are the best-scoring candidates."
    if penalised:
        which = (
            "the chosen cells trade a little score for compact patches (boundary "
            f"penalty {_fmt(summary, 'boundary_penalty', '.3g')}), so some score below "
            "unchosen cells."
        )
    score = (
        "How closely a cell's habitat matches the surveyed cells where the species "
        f"was found: higher is better; {which}"
    )
    if "plan_objective" in summary:  # several species planned together
        score = (
            "The cell's weighted sum of the species' calibrated probabilities of presence "
            "(what it adds to the plan); the chosen cells are the plan's, which meets the "
            "targets first (representation layer)."
        )
    rows = [
        ("chosen", chosen),
        *patches,
        ("score", score),
        ("how sure", f"{_certainty(summary)} {_solver_certainty(summary)}".strip()),
    ]
    if thinned:
        rows.append(("not drawn", f"{thinned} lowest-scoring candidates (page size)."))
    return rows


def _solver_rows(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run's technical figures, for the collapsed details."""
    return [
        ("method", _fmt(summary, "method")),
        *([("model", _fmt(summary, "model_fitted"))] if summary.get("model_fitted") else []),
        ("C", f"{_fmt(summary, 'c', 'g')} ({_fmt(summary, 'c_source')})"),
        ("solver status", _fmt(summary, "solver_status")),
        ("objective", _fmt(summary, "objective", ".4g")),
        ("tied at cut", _fmt(summary, "n_tied_at_cutoff")),
        (
            "cells",
            f"{_fmt(summary, 'n_candidates')} candidates, {_fmt(summary, 'n_train')} training",
        ),
    ]


def _banner(summary: Mapping[str, Any]) -> str:
    """A warning across the top when the model ranks nothing or little ('' when fine)."""
    signal = summary.get("signal", "ok")
    if signal not in ("weak", "none"):
        return ""
    head = (
        "No signal: the habitat model ranks nothing here; treat these cells as unproven."
        if signal == "none"
        else "Weak signal: the evidence does not show that this model ranks the land."
    )
    note = html.escape(str(summary.get("signal_note", "")))
    return (
        f'<details class="reserve-banner reserve-{signal}" open><summary>&#9888; '
        f"{html.escape(head)}</summary><div>{note}</div></details>"
    )


def _legend(data: dict[str, Any], with_public: bool) -> str:
    lo, hi = data["range"]
    low = f"{lo:g}" if data["span"][0] >= lo else f"{lo:g} or less"
    sel = data["sel_span"]
    chosen = f"; chosen cells {sel[0]:g} to {sel[1]:g}" if sel else ""
    if data.get("flat"):  # one colour for one score: say so rather than draw a fake range
        lo = hi = data["span"][0]
        ramp = (
            '<div><span class="sw" style="background:#440154"></span>habitat score: every '
            f"cell {lo:g} (the model does not tell the cells apart)</div>"
        )
    else:
        ramp = (
            f'<div class="ramp-row"><span class="lo">{low}</span><span class="sw ramp"></span>'
            f'<span class="hi">{hi:g}</span></div>'
            f'<div class="note">habitat score (higher = better){chosen}</div>'
        )
    rows = [
        '<span class="sw dot"></span>chosen cell, number = rank (+n: n more close by)',
        ramp,
        '<span class="sw det"></span>surveyed public cell: species detected',
        '<span class="sw undet"></span>surveyed public cell: not detected',
        *_other_legend(data),
        *_novel_legend(data),
        *(['<span class="sw pub"></span>public land'] if with_public else []),
        '<span class="sw patch"></span>patch: chosen cells that touch (share an edge)',
        '<span class="sw outline"></span>region outline',
    ]
    body = "".join(f"<div>{r}</div>" for r in rows)
    return (
        f'<details class="reserve-box reserve-legend" open data-lo="{lo}" data-hi="{hi}">'
        f"<summary><b>Legend</b></summary>{body}</details>"
    )


#: What an ``other`` cell is, in the legend and its popup (roles: :mod:`reserve.ingest`).
OTHER_TEXT = (
    "other cell: not bought and not learned from (public land nobody surveyed, land locked "
    "out, or a cell mostly outside the region)"
)


def _other_legend(data: dict[str, Any]) -> list[str]:
    """The legend's row of the other cells, when there are any."""
    if not data["others"]["count"]:
        return []
    return [f'<span class="sw other"></span>{html.escape(OTHER_TEXT)}']


def _novel_legend(data: dict[str, Any]) -> list[str]:
    """The legend's row of the hatched cells, when any is drawn."""
    if not data.get("n_novel"):
        return []
    return [
        '<span class="sw novel"></span>outside the surveyed habitat (MESS &lt; 0): the '
        "score there is an extrapolation"
    ]


def _table(rows: list[tuple[str, str]]) -> str:
    return "".join(f"<tr><th>{html.escape(a)}</th><td>{html.escape(b)}</td></tr>" for a, b in rows)


def _tradeoff_svg(summary: Mapping[str, Any], width: int = 260, height: int = 130) -> str:
    """The boundary calibration (``--boundary-penalty auto``) as a small folded SVG plot.

    Each fit is a point: boundary length (km) across, the objective without the penalty up;
    the chosen penalty is the filled point. Below it, the fits as a list with their expected
    precision. '' when the run did not calibrate.
    """
    text = summary.get("boundary_tradeoff")
    if not text:
        return ""
    rows = json.loads(str(text))
    xs = np.array([r["boundary_length"] / 1000.0 for r in rows])
    ys = np.array([r["objective"] for r in rows])
    pad = 28

    def scale(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
        span = float(v.max() - v.min()) or 1.0
        return lo + (v - v.min()) / span * (hi - lo)

    px, py = scale(xs, pad, width - 8), scale(ys, height - pad, 8)
    order = np.argsort(px)
    line = " ".join(f"{px[i]:.1f},{py[i]:.1f}" for i in order)
    dots = "".join(
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{5 if r["chosen"] else 3}" '
        f'fill="{"#7a0177" if r["chosen"] else "#fff"}" stroke="#7a0177">'
        f"<title>penalty {r['penalty']:.3g}: boundary {bx:.4g} km, objective {r['objective']:.4g}"
        f"{_expected(r, ', expected precision ')}</title></circle>"
        for x, y, bx, r in zip(px, py, xs, rows, strict=True)
    )
    axes = (
        f'<text x="{width - 8}" y="{height - 6}" text-anchor="end">boundary (km)</text>'
        f'<text x="4" y="12">objective</text>'
    )
    return (
        '<details class="reserve-tradeoff"><summary>boundary penalty trade-off</summary>'
        f'<svg width="{width}" height="{height}" font-size="10" role="img" '
        'aria-label="objective against boundary length for each penalty tried">'
        f'<polyline points="{line}" fill="none" stroke="#999"/>{dots}{axes}</svg>'
        f"{_tradeoff_list(rows)}</details>"
    )


def _expected(row: Mapping[str, Any], prefix: str = "") -> str:
    """The fit's expected precision as text ('' for tables written before it existed)."""
    value = row.get("expected_precision")
    return "" if value is None or not np.isfinite(value) else f"{prefix}{value:.2f}"


def _tradeoff_list(rows: list[dict[str, Any]]) -> str:
    """The calibration's fits as a small table: penalty, boundary, patches, expected precision."""
    head = (
        "<tr><th>penalty</th><th>boundary km</th><th>patches</th>"
        '<th title="mean presence probability of the selected cells, from a logistic '
        'regression on the training cells">expected precision</th></tr>'
    )
    cells = []
    for r in sorted(rows, key=lambda r: r["penalty"]):
        mark = " (chosen)" if r["chosen"] else ""
        cells.append(
            f"<tr><td>{r['penalty']:.3g}{mark}</td><td>{r['boundary_length'] / 1000.0:.4g}</td>"
            f"<td>{r.get('n_patches', '')}</td><td>{_expected(r)}</td></tr>"
        )
    body = "".join(cells)
    return f'<table class="reserve-tradeoff-list">{head}{body}</table>'


def _add_panels(
    m: Any,
    summary: Mapping[str, Any],
    data: dict[str, Any],
    n_sel: int,
    thinned: int,
    with_public: bool,
) -> None:
    """The title, the warning banner, the summary, the legend, the ranked list, the config."""
    from branca.element import Element

    # JSON inside <script> is not HTML-decoded: only "</" must not appear literally
    cfg = str(summary.get("config", "")).replace("</", "<\\/")
    m.get_root().html.add_child(
        Element(
            f'<div class="reserve-top"><h1 class="reserve-title">{html.escape(_title(summary))}'
            f"</h1>{_banner(summary)}</div>"
            '<details class="reserve-box reserve-summary" open><summary><b>About this selection'
            f"</b></summary><table>{_table(_summary_rows(summary, thinned))}</table>"
            f"{_tradeoff_svg(summary)}"
            '<details class="reserve-solver"><summary>solver details</summary>'
            f"<table>{_table(_solver_rows(summary))}</table></details></details>"
            f"{_legend(data, with_public)}"
            '<details class="reserve-box reserve-list" open><summary><b>Ranked cells '
            f"({n_sel})</b></summary>"
            '<div class="views"><button type="button" data-view="selection">selection</button>'
            '<button type="button" data-view="region">whole region</button></div>'
            '<ol class="reserve-ranks"></ol></details>'
            f'<script type="application/json" id="reserve-config">{cfg}</script>'
        )
    )


def write_page(
    path: str | os.PathLike[str], planning_units: gpd.GeoDataFrame, **kwargs: Any
) -> None:
    """Write :func:`build_map`'s page to ``path`` as it is (the caller's temporary file).

    Parameters
    ----------
    path : path-like
    planning_units : geopandas.GeoDataFrame
    **kwargs
        Passed to :func:`build_map`.
    """
    Path(path).write_text(build_map(planning_units, **kwargs), encoding="utf-8")


def write_map(
    planning_units: gpd.GeoDataFrame,
    path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    **kwargs: Any,
) -> Path:
    """Write :func:`build_map` to ``path`` atomically (temporary file beside it, then rename).

    Parameters
    ----------
    planning_units : geopandas.GeoDataFrame
    path : path-like
        ``.html`` file.
    overwrite : bool
        Replace an existing file.
    **kwargs
        Passed to :func:`build_map`.

    Returns
    -------
    Path
    """
    from reserve.io.atomic import atomic_target, remove_stale_temporaries

    path = Path(path)
    if path.exists() and not overwrite:
        raise OutputExistsError(
            f"output {str(path)!r} already exists; pass --overwrite (overwrite=True) to replace it"
        )
    page = build_map(planning_units, **kwargs)
    remove_stale_temporaries(path)
    tmp = atomic_target(path, ".html")
    try:
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise DataFileError(
            f"cannot write {str(path)!r} ({exc.strerror}); pass a writable path"
        ) from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


_CSS = """
.reserve-box{position:fixed;z-index:1000;background:rgba(255,255,255,.94);padding:6px 9px;
 border-radius:5px;box-shadow:0 1px 5px rgba(0,0,0,.4);font:12px/1.4 sans-serif;
 max-width:340px;overflow:auto}
.reserve-box summary{cursor:pointer}
.reserve-top{position:fixed;z-index:1001;top:8px;left:50%;transform:translateX(-50%);
 max-width:calc(100% - 150px);font:12px/1.4 sans-serif;text-align:center}
.reserve-title{margin:0;display:inline-block;font:600 16px/1.3 sans-serif;padding:4px 12px;
 background:rgba(255,255,255,.94);border-radius:5px;box-shadow:0 1px 5px rgba(0,0,0,.4)}
.reserve-banner{margin:5px auto 0;padding:5px 9px;border-radius:5px;text-align:left;
 box-shadow:0 1px 5px rgba(0,0,0,.4);border:2px solid #b00020;background:#fde8ea}
.reserve-banner.reserve-weak{border-color:#8a5a00;background:#fff4d6}
.reserve-banner summary{cursor:pointer;font-weight:600}
.reserve-summary{left:10px;bottom:30px}.reserve-summary th{text-align:left;padding-right:8px;
 vertical-align:top;white-space:nowrap}
.reserve-solver{margin-top:3px;color:#444}
.reserve-legend{right:10px;bottom:30px}
.reserve-legend .sw{display:inline-block;width:14px;height:12px;margin-right:6px;
 vertical-align:middle;box-sizing:border-box}
.reserve-legend .ramp{width:90px;margin:0 4px;background:linear-gradient(90deg,#440154,
 #482878,#3e4989,#31688e,#26828e,#1f9e89,#35b779,#6ece58,#b5de2b,#fde725)}
.reserve-legend .note{color:#444;margin-bottom:2px}
.reserve-legend .dot{width:14px;height:14px;border-radius:50%;background:#e7298a;
 border:2px solid #fff;box-shadow:0 0 0 1px #e7298a}
.reserve-legend .det{background:#fff;border:2px solid #000}
.reserve-legend .undet{background:#bdbdbd;border:1px solid #636363}
.reserve-legend .other{background:rgba(120,120,120,.3);border:1px solid #bbb}
.reserve-legend .pub{border:2px solid #00441b;background:rgba(0,68,27,.15)}
.reserve-legend .outline{border:2px dashed #333}
.reserve-legend .patch{border:3px solid #7a0177}
.reserve-legend .novel{border:1px solid #222;background:repeating-linear-gradient(135deg,
 #000 0 1.5px,#fff 1.5px 3px,transparent 3px 7px)}
.reserve-rank{background:none;border:none;font:bold 11px/18px sans-serif;color:#fff;
 text-align:center;pointer-events:none}
.reserve-rank .more{position:absolute;left:15px;top:-7px;font:bold 9px/12px sans-serif;
 background:#222;color:#fff;border-radius:6px;padding:0 3px;white-space:nowrap}
.reserve-rank .more:empty{display:none}
.reserve-rank-hidden{display:none}
.reserve-list{left:10px;top:90px;max-width:220px}
.reserve-list .views button{font:11px sans-serif;margin:3px 4px 3px 0;cursor:pointer}
.reserve-ranks{margin:0;padding:0 0 0 2.6em;max-height:calc(100vh - 430px);min-height:3em;
 overflow-y:auto}
.reserve-ranks li{cursor:pointer;white-space:nowrap}
.reserve-ranks li:hover{background:#ffff99}
@media (max-width:900px),(max-height:650px){
 .reserve-box{font-size:11px;max-width:46vw;padding:4px 7px}
 .reserve-title{font-size:13px}.reserve-top{max-width:calc(100% - 110px)}
 .reserve-ranks{max-height:calc(100vh - 300px)}}
"""

# The hatch of cells outside the surveyed habitat: black-on-white stripes with gaps, legible on
# every colour of the ramp; drawn by the page's own SVG (no network). A zero-size, not
# display:none, holder: a pattern inside display:none is not rendered.
_HATCH = (
    '<svg width="0" height="0" style="position:absolute" aria-hidden="true" focusable="false">'
    '<defs><pattern id="reserve-hatch" patternUnits="userSpaceOnUse" width="7" height="7" '
    'patternTransform="rotate(45)"><rect x="0" y="0" width="3" height="7" fill="#fff"/>'
    '<rect x="0" y="0" width="1.5" height="7" fill="#000"/></pattern></defs></svg>'
)

# Placeholders __X__ are filled by build_map. Runs after the feature groups exist.
_JS = r"""
(function () {
  var D = __DATA__;
  var Q = 1e5, canvas = L.canvas({padding: 0.3});
  // viridis: sequential, colour-blind safe, light to dark reads as high to low
  var RAMP = [[68,1,84],[72,40,120],[62,73,137],[49,104,142],[38,130,142],[31,158,137],
    [53,183,121],[110,206,88],[181,222,43],[253,231,37]];
  var SEL = "#e7298a";
  function ramp(s) {
    var t = (s - D.range[0]) / (D.range[1] - D.range[0]);
    t = Math.max(0, Math.min(1, isFinite(t) ? t : 0)) * (RAMP.length - 1);
    var i = Math.min(Math.floor(t), RAMP.length - 2), f = t - i, a = RAMP[i], b = RAMP[i + 1];
    return "rgb(" + [0, 1, 2].map(function (j) { return Math.round(a[j] + f * (b[j] - a[j])); })
      .join(",") + ")";
  }
  function fmt(v) { return v === null ? "n/a" : (+v).toFixed(3); }
  function popup(d, i, what) {
    var lab = d.label[i] === 1 ? "detected" : (d.label[i] === 0 ? "not detected" : "unsurveyed");
    var h = "<b>" + what + "</b><br>cell id " + d.id[i] +
      (d.rank[i] > 0 ? "<br>rank " + d.rank[i] : "") + "<br>score " + fmt(d.score[i]) +
      "<br>label " + d.label[i] + " (" + lab + ")";
    if (d.ll && d.ll[i]) h += "<br>centre " + d.ll[i].lat.toFixed(5) + ", " +
      d.ll[i].lng.toFixed(5) + " (latitude, longitude)";
    var ha = d.ha ? d.ha[i] : D.cell_ha;
    if (ha !== undefined && ha !== null) h += "<br>area " + (+ha).toFixed(1) + " ha";
    if (d.locked && d.locked[i]) h += "<br>locked in (already owned or committed)";
    if (d.freq) h += "<br>selection frequency " + fmt(d.freq[i]);
    if (d.p) h += "<br>probability of presence " + (d.p[i] === null ? "n/a" : d.p[i]);
    if (d.sv && d.sv[i] === 1) h += "<br><b>known detection</b>: birders found the species here";
    if (d.sv && d.sv[i] === 2) h += "<br><b>surveyed often, never detected</b>";
    if (d.mess) h += "<br>" + novelty(d, i);
    for (var j = 0; j < D.features.length; j++) h += "<br>" + D.features[j] + " " + fmt(d.f[j][i]);
    return h;
  }
  function novelty(d, i) {
    var v = d.mess[i] === null ? "n/a" : (+d.mess[i]).toFixed(1);
    var name = d.mv ? D.mess_names[d.mv[i]] : "";
    var why = name ? " (most unlike on " + name + ")" : "";
    return d.novel[i] ? "<b>outside the surveyed habitat</b>: MESS " + v + why +
      "; the score is an extrapolation" : "habitat similarity to the surveyed cells (MESS) " + v;
  }
  function rings(d) {
    var out = [], p = 0;
    for (var i = 0; i < d.n.length; i++) {
      var x = 0, y = 0, r = [];
      for (var j = 0; j < d.n[i]; j++, p += 2) {
        if (j === 0) { x = d.xy[p]; y = d.xy[p + 1]; } else { x += d.xy[p]; y += d.xy[p + 1]; }
        r.push([y / Q, x / Q]);
      }
      out.push(r);
    }
    return out;
  }
  function draw(d, group, style, what, svg) {
    var rs = rings(d), shapes = [];
    for (var i = 0; i < rs.length; i++) {
      var o = style(d, i);
      if (!svg) o.renderer = canvas;
      var poly = L.polygon(rs[i], o).addTo(group);
      (d.ll = d.ll || [])[i] = d.lat ? L.latLng(d.lat[i], d.lon[i])  // the popup's centre
        : poly.getBounds().getCenter();
      poly.bindPopup((function (k) { return function () { return popup(d, k, what); }; })(i));
      shapes.push(poly);
    }
    return shapes;
  }
  var outline = __OUTLINE__, pub = __PUBLIC__;
  if (outline) L.geoJSON(outline, {style: {color: "#333", weight: 2, dashArray: "6 4",
    fill: false, className: "reserve-outline"}, interactive: false}).addTo(__FG_OUTLINE__);
  if (pub) L.geoJSON(pub, {style: {color: "#00441b", weight: 2, fillColor: "#00441b",
    fillOpacity: 0.15, className: "reserve-public"}, interactive: false})
    .addTo(__FG_PUBLIC__);
  var patches = __PATCHES__;
  if (patches) L.geoJSON(patches, {style: {color: "#7a0177", weight: 3, fill: false},
    onEachFeature: function (f, layer) {
      layer.bindTooltip("patch " + f.properties.patch + ": " + f.properties.cells + " cells");
    }}).addTo(__FG_PATCH__);
  // the other cells: one light shape of them all, one popup saying what they are
  var otherGroup = __FG_OTHER__;
  if (otherGroup && D.others.n.length) L.polygon(rings(D.others).map(function (r) {
    return [r]; }), {stroke: false, fillColor: "#787878", fillOpacity: 0.3, renderer: canvas})
    .bindPopup(__OTHER_TEXT__).addTo(otherGroup);
  draw(D.candidates, __FG_CAND__, function (d, i) {
    return {stroke: false, fillColor: ramp(d.score[i]), fillOpacity: 0.75};
  }, "candidate cell");
  draw(D.detected, __FG_DET__, function () {
    return {color: "#000", weight: 2, fillColor: "#fff", fillOpacity: 0.9};
  }, "training cell");
  draw(D.undetected, __FG_UNDET__, function () {
    return {color: "#636363", weight: 1, fillColor: "#bdbdbd", fillOpacity: 0.8};
  }, "training cell");
  // cells outside the surveyed habitat: one hatched SVG path of all of them over the cells'
  // own colours (one path, not thousands: the page stays fast); it lets clicks through to
  // the cell beneath, whose popup gives the MESS
  var novelGroup = __FG_NOVEL__;
  function hatch(d) {
    if (!novelGroup || !d.novel) return;
    var rs = rings(d), parts = [];
    for (var i = 0; i < rs.length; i++) if (d.novel[i]) parts.push([rs[i]]);
    if (parts.length) L.polygon(parts, {stroke: false, fillColor: "url(#reserve-hatch)",
      fillOpacity: 0.9, interactive: false, className: "reserve-novel"}).addTo(novelGroup);
  }
  hatch(D.candidates);
  hatch(D.selected);
  var map = __MAP__;
  var sel = draw(D.selected, __FG_SEL__, function () {
    return {color: SEL, weight: 3, fillColor: SEL, fillOpacity: 0.55,
      className: "reserve-selected"};
  }, "selected cell", true);
  // A marker of fixed on-screen size per selected cell: a 3 km cell is a pixel or two at
  // state-wide zoom. Drawn worst rank first, so the best rank is on top where they overlap.
  var centres = sel.map(function (p) { return p.getBounds().getCenter(); }), labels = [];
  for (var i = sel.length - 1; i >= 0; i--) {
    L.circleMarker(centres[i], {radius: 9, color: "#fff", weight: 2, fillColor: SEL,
      fillOpacity: 1, className: "reserve-selected-marker"}).addTo(__FG_SEL__)
      .bindPopup((function (k) { return function () {
        return popup(D.selected, k, "selected cell"); }; })(i));
  }
  for (i = 0; i < sel.length; i++) {
    labels.push(L.marker(centres[i], {interactive: false, keyboard: false, icon: L.divIcon({
      className: "reserve-rank", html: '<span class="r">' + D.selected.rank[i] +
        '</span><span class="more"></span>', iconSize: [18, 18]})})
      .addTo(__FG_SEL__));
  }
  // Greedy label placement in rank order: a label is shown only if no better-ranked shown
  // label is within 20 px, so crowded ranks never pile up; a shown label counts the ranks it
  // hides ("+n"), so a cluster says how many chosen cells it holds.
  function placeLabels() {
    var shown = [], more = [];
    for (var i = 0; i < labels.length; i++) {
      var el = labels[i].getElement();
      if (!el) continue;
      var p = map.latLngToLayerPoint(centres[i]), host = -1;
      for (var j = 0; j < shown.length && host < 0; j++) {
        if (Math.abs(p.x - shown[j].x) < 20 && Math.abs(p.y - shown[j].y) < 20) host = j;
      }
      el.classList.toggle("reserve-rank-hidden", host >= 0);
      if (host >= 0) { more[host] += 1; continue; }
      shown.push(p); more.push(0); p.el = el;
    }
    shown.forEach(function (p, j) {
      p.el.querySelector(".more").textContent = more[j] ? "+" + more[j] : "";
    });
  }
  map.on("zoomend overlayadd", placeLabels);
  // keep the framed cells clear of the boxes laid over the map (list, legend, summary,
  // layer control): either above the bottom boxes or between the side ones, whichever
  // shows ``bounds`` larger (a tall region fits between, a wide one above)
  function box(sel, side) {
    var el = document.querySelector(sel);
    return el ? el.getBoundingClientRect()[side] : 0;
  }
  function pad(bounds) {
    var size = map.getSize(), top = Math.max(30, box(".reserve-top", "bottom") + 15);
    var left = box(".reserve-list", "right");
    var bottom = Math.min(box(".reserve-legend", "top") || size.y,
      box(".reserve-summary", "top") || size.y);
    var right = Math.min(box(".reserve-legend", "left") || size.x,
      box(".leaflet-control-layers", "left") || size.x);
    var above = {paddingTopLeft: [left + 15, top],
      paddingBottomRight: [30, Math.max(0, size.y - bottom) + 15]};
    var between = {paddingTopLeft: [Math.max(left, box(".reserve-summary", "right")) + 15, top],
      paddingBottomRight: [Math.max(0, size.x - right) + 15, 30]};
    function zoom(p) {
      var room = L.point(p.paddingTopLeft).add(p.paddingBottomRight);
      return room.x < size.x && room.y < size.y ? map.getBoundsZoom(bounds, false, room)
        : -Infinity;
    }
    return zoom(between) > zoom(above) ? between : above;
  }
  // small screens: every panel starts folded (a tap on its heading opens it), the layer
  // control too, so the map is not hidden behind them
  if (innerWidth < 900 || innerHeight < 650) {
    document.querySelectorAll("details.reserve-box, details.reserve-banner").forEach(
      function (d) { d.open = false; });
    var ctl = document.querySelector(".leaflet-control-layers");
    if (ctl) ctl.classList.remove("leaflet-control-layers-expanded");
  }
  var topBar = document.querySelector(".reserve-top"), listBox = document.querySelector(
    ".reserve-list");
  // the title and banner stay clear of the layer control in the top right corner
  var corner = document.querySelector(".leaflet-top.leaflet-right");
  if (topBar && corner) {
    var half = corner.getBoundingClientRect().left - innerWidth / 2 - 10;
    if (half > 120) topBar.style.maxWidth = 2 * half + "px";
  }
  if (topBar && listBox) listBox.style.top = Math.max(80, topBar.getBoundingClientRect()
    .bottom + 8) + "px";
  // the ranked list ends above the summary box, however tall that box is
  function fitList() {
    var ranks = document.querySelector(".reserve-ranks");
    var summary = document.querySelector(".reserve-summary");
    if (!ranks || !summary) return;
    var room = summary.getBoundingClientRect().top - ranks.getBoundingClientRect().top - 12;
    ranks.style.maxHeight = Math.max(48, room) + "px";
  }
  window.addEventListener("resize", fitList);
  document.querySelectorAll("details").forEach(function (d) {
    d.addEventListener("toggle", fitList);
  });
  function show(view) {
    var bounds = L.latLngBounds(view === "region" ? D.region : D.view);
    map.fitBounds(bounds, pad(bounds));
  }
  // the ranked list: click a cell to zoom to it and open its popup
  var list = document.querySelector(".reserve-ranks");
  if (list) {
    for (i = 0; i < sel.length; i++) {
      var li = document.createElement("li");
      li.value = D.selected.rank[i];
      li.textContent = "cell " + D.selected.id[i] + " \u00b7 " + fmt(D.selected.score[i]);
      li.onclick = (function (k) { return function () {
        if (!map.hasLayer(__FG_SEL__)) map.addLayer(__FG_SEL__);
        var cell = sel[k].getBounds();
        map.fitBounds(cell, Object.assign({maxZoom: 12}, pad(cell)));
        sel[k].openPopup(centres[k]);
      }; })(i);
      list.appendChild(li);
    }
    document.querySelectorAll(".reserve-list button").forEach(function (b) {
      b.onclick = function () { show(b.getAttribute("data-view")); };
    });
  }
  __FG_SEL__.bringToFront && __FG_SEL__.bringToFront();
  fitList();
  show("region");  // the whole region first: no part of it starts hidden
  placeLabels();
  window.reserveMap = map;
  window.reserveData = D;
  window.reserveReady = true;
})();
"""
