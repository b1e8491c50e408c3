"""QGIS layer styles and a readable CRS entry for the selection's GeoPackage.

QGIS looks for a table named ``layer_styles`` in a GeoPackage (the one its *Save Style ▸ In
Database* writes) and applies the row marked ``useAsDefault`` when a layer is added, so the
layers open styled without any clicking:

* ``planning_units``: graduated by ``score`` in five quantile classes of the candidates'
  scores, viridis (colour-blind safe; light = high);
* ``selected``: magenta cells with a white outline, labelled by ``rank``.

:func:`style_table` builds the table's rows; :func:`describe_crs` writes a plain description
of the grid's CRS into ``gpkg_spatial_ref_sys`` (GDAL leaves it empty for a CRS without an
EPSG code, such as the ingest's Lambert azimuthal equal-area grid).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["STYLE_COLUMNS", "describe_crs", "style_table"]

#: Columns of QGIS's ``layer_styles`` table, in its order.
STYLE_COLUMNS = (
    "f_table_catalog",
    "f_table_schema",
    "f_table_name",
    "f_geometry_column",
    "styleName",
    "styleQML",
    "styleSLD",
    "useAsDefault",
    "description",
    "owner",
    "ui",
    "update_time",
)

#: viridis at five steps (low to high), as QGIS "r,g,b,a" colours.
_VIRIDIS5 = ("68,1,84,255", "59,82,139,255", "33,145,140,255", "94,201,98,255", "253,231,37,255")
_SELECTED = "231,41,138,255"  # the map's magenta

_HEAD = "<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>\n"


def _fill(name: str, color: str, outline: str = "no", outline_color: str = "0,0,0,0") -> str:
    opts = {
        "color": color,
        "style": "solid",
        "outline_style": "solid" if outline != "no" else "no",
        "outline_color": outline_color,
        "outline_width": outline if outline != "no" else "0",
        "outline_width_unit": "MM",
    }
    body = "".join(f'<Option name="{k}" type="QString" value="{v}"/>' for k, v in opts.items())
    return (
        f'<symbol type="fill" name="{name}" alpha="1" clip_to_extent="1" force_rhr="0">'
        f'<layer class="SimpleFill" enabled="1" pass="0" locked="0"><Option type="Map">'
        f"{body}</Option></layer></symbol>"
    )


def _graduated_qml(scores: np.ndarray) -> str:
    """planning_units: five quantile classes of ``score``, viridis."""
    s = np.asarray(scores, dtype=np.float64)
    s = s[np.isfinite(s)]
    lo, hi = (float(s.min()), float(s.max())) if s.size else (0.0, 1.0)
    edges = np.unique(np.quantile(s, np.linspace(0, 1, 6))) if s.size else np.array([lo, hi])
    if edges.size < 2:  # every score equal: one class around it
        edges = np.array([lo - 0.5, lo + 0.5])
    n = edges.size - 1
    colors = [_VIRIDIS5[round(i * 4 / max(n - 1, 1))] for i in range(n)]
    ranges = "".join(
        f'<range lower="{edges[i]:.6g}" upper="{edges[i + 1]:.6g}" symbol="{i}" '
        f'label="{edges[i]:.3g} to {edges[i + 1]:.3g}" render="true"/>'
        for i in range(n)
    )
    symbols = "".join(_fill(str(i), c) for i, c in enumerate(colors))
    return (
        f'{_HEAD}<qgis version="3.34" styleCategories="Symbology">'
        '<renderer-v2 type="graduatedSymbol" attr="score" graduatedMethod="GraduatedColor" '
        'symbollevels="0" enableorderby="0" forceraster="0">'
        f"<ranges>{ranges}</ranges><symbols>{symbols}</symbols>"
        f"<source-symbol>{_fill('0', _VIRIDIS5[2])}</source-symbol>"
        '<mode name="quantile"/></renderer-v2></qgis>'
    )


def _selected_qml() -> str:
    """selected: magenta fill, white outline, labelled by rank."""
    return (
        f'{_HEAD}<qgis version="3.34" styleCategories="Symbology|Labeling" labelsEnabled="1">'
        '<renderer-v2 type="singleSymbol" symbollevels="0" enableorderby="0" forceraster="0">'
        f"<symbols>{_fill('0', _SELECTED, '0.6', '255,255,255,255')}</symbols></renderer-v2>"
        '<labeling type="simple"><settings calloutType="simple">'
        '<text-style fieldName="rank" isExpression="0" fontSize="10" fontWeight="75" '
        'textColor="0,0,0,255" fontFamily="Sans Serif">'
        '<text-buffer bufferDraw="1" bufferSize="1" bufferSizeUnits="MM" '
        'bufferColor="255,255,255,255"/></text-style>'
        '<placement placement="1" dist="0"/><rendering obstacle="0" scaleVisibility="0"/>'
        "</settings></labeling></qgis>"
    )


def style_table(
    planning_units: pd.DataFrame, geometry_column: str = "geom", update_time: str = ""
) -> pd.DataFrame:
    """The rows of ``layer_styles`` for ``planning_units`` and ``selected``.

    Parameters
    ----------
    planning_units : pandas.DataFrame
        With ``score`` and ``role`` (the candidates' scores set the classes).
    geometry_column : str
        The layers' geometry column in the GeoPackage (GDAL's default ``geom``).
    update_time : str
        ISO time of the styles (fixed by the caller, so the file is reproducible).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`STYLE_COLUMNS`, one row per layer.

    Examples
    --------
    >>> units = pd.DataFrame({"score": [0.0, 1.0, 2.0], "role": ["candidate"] * 3})
    >>> style_table(units)["f_table_name"].tolist()
    ['planning_units', 'selected']
    """
    role = planning_units["role"].astype(str).to_numpy()
    scores = planning_units["score"].to_numpy()[role == "candidate"]
    styles = {
        "planning_units": (_graduated_qml(scores), "cells coloured by habitat score (viridis)"),
        "selected": (_selected_qml(), "the cells to buy, labelled by rank"),
    }
    return pd.DataFrame(
        [
            (
                "",
                "",
                name,
                geometry_column,
                f"reserve {name}",
                qml,
                "",
                True,
                desc,
                "",
                "",
                update_time,
            )
            for name, (qml, desc) in styles.items()
        ],
        columns=list(STYLE_COLUMNS),
    )


def _crs_description(crs: Any) -> str:
    """``"<name>: <method>, <parameters>; <datum>, <unit>"`` in one line."""
    from pyproj import CRS

    crs = crs if isinstance(crs, CRS) else CRS(crs)  # keeps a cached EPSG lookup
    parts = [crs.name]
    op = crs.coordinate_operation
    if op is not None:
        params = ", ".join(f"{p.name} {p.value:g}" for p in op.params)
        parts.append(f"{op.method_name} ({params})")
    if crs.datum is not None:
        parts.append(f"datum {crs.datum.name}")
    if crs.axis_info:
        parts.append(f"unit {crs.axis_info[0].unit_name}")
    epsg = crs.to_epsg()
    parts.append(f"EPSG:{epsg}" if epsg else "no EPSG code (a custom equal-area grid)")
    return "; ".join(parts)


def describe_crs(path: str | os.PathLike[str], crs: Any) -> None:
    """Fill the ``description`` of the layers' CRS entry in ``gpkg_spatial_ref_sys``.

    Parameters
    ----------
    path : path-like
        The GeoPackage (not yet renamed into place).
    crs : pyproj.CRS or any input of it
        The CRS of the layers.
    """
    con = sqlite3.connect(path)
    try:
        with con:
            con.execute(
                "UPDATE gpkg_spatial_ref_sys SET description = ? WHERE srs_id IN (SELECT "
                "srs_id FROM gpkg_geometry_columns) AND (description IS NULL OR description = ''"
                " OR description = 'undefined')",
                (_crs_description(crs),),
            )
    finally:
        con.close()
