"""A virtual species and virtual birders on a real landscape, written as eBird EBD + SED files.

eBird's terms forbid shipping real checklists, and no real dataset tells where a species truly
is. This module simulates both sides on a real grid of planning units:

* **The species** (:class:`SpeciesModel`, :func:`simulate_occupancy`): a forest bird of mid
  elevations. Per cell, ``logit(psi) = b0 + forest * f + woody * w - urban * u - crop * c
  - curvature * ((elev - optimum) / width)^2 + interaction * f * bump(elev) + sd * field``,
  where ``f``, ``w``, ``u``, ``c`` are land-cover fractions, ``bump`` is a Gaussian of elevation
  around ``optimum``, and ``field`` a spatially smooth Gaussian random field of unit variance.
  The quadratic elevation term, the interaction and the random field make sure no linear model
  of the cell features is exactly right. ``b0`` is solved so that the mean ``psi`` over the
  region equals the target prevalence; true occupancy is one Bernoulli draw per cell.
* **The birders** (:class:`BirderModel`, :func:`simulate_checklists`): localities are placed
  in cells with weights that grow near developed land and on public land and stay low
  elsewhere; checklists are drawn from localities by popularity, with an observer, a date, a
  start time, a protocol and an effort (duration, distance, party size) of realistic shape.
  Some checklists are incomplete, some are shared by a group (one row per member in the SED,
  the same group identifier), some counts are ``X``. The target species is detected only on a
  checklist in an occupied cell, with a probability that rises with effort and stays below one.
  A few common species fill the EBD so the files look like a real download.
* **A second species** (:data:`VIRTUAL_QUAIL`, the same :class:`SpeciesModel` with other
  coefficients): an open-country bird of low elevations (grassland and cropland, no forest),
  detected on the same checklists by :func:`simulate_detections`. It draws from its own
  random stream, after everything else, and its EBD rows are appended at the end of the file,
  so the first species' files are the same bytes with or without it.

:func:`write_ebd` and :func:`write_sed` write gzipped text in eBird's current column layout
(52 EBD columns, 33 SED columns and a trailing tab), byte-identical for the same input (gzip
``mtime=0``). :func:`simulate_region` runs the whole sequence on raster and polygon files and
writes the truth to its own file.

Examples
--------
>>> import numpy as np
>>> m = SpeciesModel()
>>> eta = np.array([-1.0, 0.0, 1.0])
>>> b0 = calibrate_intercept(eta, 0.5)
>>> round(float(np.mean(1 / (1 + np.exp(-(eta + b0))))), 6)
0.5
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyproj
import shapely
from scipy.ndimage import gaussian_filter

from reserve.config import DEFAULT_REGION
from reserve.errors import InvalidInputError
from reserve.grid import Grid, equal_area_crs
from reserve.habitat import RasterLayer, habitat_features
from reserve.ownership import cover_fraction, read_polygons

__all__ = [
    "EBD_HEADER",
    "LANDCOVER_CLASSES",
    "SED_HEADER",
    "VIRTUAL_QUAIL",
    "BirderModel",
    "SpeciesModel",
    "calibrate_intercept",
    "occupancy_logit",
    "region_grid",
    "simulate_checklists",
    "simulate_detections",
    "simulate_occupancy",
    "simulate_region",
    "smooth_field",
    "write_ebd",
    "write_sed",
]

#: MODIS MCD12Q1 University of Maryland (LC_Type2) classes.
LANDCOVER_CLASSES = {
    0: "Water bodies",
    1: "Evergreen Needleleaf Forests",
    2: "Evergreen Broadleaf Forests",
    3: "Deciduous Needleleaf Forests",
    4: "Deciduous Broadleaf Forests",
    5: "Mixed Forests",
    6: "Closed Shrublands",
    7: "Open Shrublands",
    8: "Woody Savannas",
    9: "Savannas",
    10: "Grasslands",
    11: "Permanent Wetlands",
    12: "Croplands",
    13: "Urban and Built-up Lands",
    14: "Cropland/Natural Vegetation Mosaics",
    15: "Non-Vegetated Lands",
}

#: The current EBD column layout (52 columns).
EBD_HEADER = (
    "GLOBAL UNIQUE IDENTIFIER",
    "LAST EDITED DATE",
    "TAXONOMIC ORDER",
    "CATEGORY",
    "TAXON CONCEPT ID",
    "COMMON NAME",
    "SCIENTIFIC NAME",
    "SUBSPECIES COMMON NAME",
    "SUBSPECIES SCIENTIFIC NAME",
    "EXOTIC CODE",
    "OBSERVATION COUNT",
    "BREEDING CODE",
    "BREEDING CATEGORY",
    "BEHAVIOR CODE",
    "AGE/SEX",
    "COUNTRY",
    "COUNTRY CODE",
    "STATE",
    "STATE CODE",
    "COUNTY",
    "COUNTY CODE",
    "IBA CODE",
    "BCR CODE",
    "USFWS CODE",
    "ATLAS BLOCK",
    "LOCALITY",
    "LOCALITY ID",
    "LOCALITY TYPE",
    "LATITUDE",
    "LONGITUDE",
    "OBSERVATION DATE",
    "TIME OBSERVATIONS STARTED",
    "OBSERVER ID",
    "OBSERVER ORCID ID",
    "SAMPLING EVENT IDENTIFIER",
    "OBSERVATION TYPE",
    "PROTOCOL NAME",
    "PROTOCOL CODE",
    "PROJECT NAMES",
    "PROJECT IDENTIFIERS",
    "DURATION MINUTES",
    "EFFORT DISTANCE KM",
    "EFFORT AREA HA",
    "NUMBER OBSERVERS",
    "ALL SPECIES REPORTED",
    "GROUP IDENTIFIER",
    "HAS MEDIA",
    "APPROVED",
    "REVIEWED",
    "REASON",
    "CHECKLIST COMMENTS",
    "SPECIES COMMENTS",
)

#: The current SED column layout (33 columns; eBird's files end every line with a tab).
SED_HEADER = (
    "LAST EDITED DATE",
    "COUNTRY",
    "COUNTRY CODE",
    "STATE",
    "STATE CODE",
    "COUNTY",
    "COUNTY CODE",
    "IBA CODE",
    "BCR CODE",
    "USFWS CODE",
    "ATLAS BLOCK",
    "LOCALITY",
    "LOCALITY ID",
    "LOCALITY TYPE",
    "LATITUDE",
    "LONGITUDE",
    "OBSERVATION DATE",
    "TIME OBSERVATIONS STARTED",
    "OBSERVER ID",
    "OBSERVER ORCID ID",
    "SAMPLING EVENT IDENTIFIER",
    "OBSERVATION TYPE",
    "PROTOCOL NAME",
    "PROTOCOL CODE",
    "PROJECT NAMES",
    "PROJECT IDENTIFIERS",
    "DURATION MINUTES",
    "EFFORT DISTANCE KM",
    "EFFORT AREA HA",
    "NUMBER OBSERVERS",
    "ALL SPECIES REPORTED",
    "GROUP IDENTIFIER",
    "CHECKLIST COMMENTS",
)

_PROTOCOL_CODES = {
    "Traveling": "P22",
    "Stationary": "P21",
    "Incidental": "P20",
    "Area": "P23",
    "Historical": "P62",
}

_FOREST = (1, 2, 4, 5)
_CROP = (12, 14)
_URBAN = 13
_WOODY = 8
_OPEN = (7, 9, 10)  # open shrublands, savannas, grasslands


def _lc(cls: int) -> str:
    from reserve.habitat import feature_name

    return feature_name("landcover", LANDCOVER_CLASSES[cls])


@dataclass(frozen=True)
class SpeciesModel:
    """Habitat response of the virtual species (a forest bird of mid elevations).

    Attributes
    ----------
    forest, woody, urban, crop : float
        Logit coefficients of the forest (UMD 1, 2, 4, 5), woody-savanna (8), urban (13) and
        cropland (12, 14) fractions; urban and crop are subtracted (a negative ``crop`` favours
        cropland).
    grassland : float
        Logit coefficient of the open-country fraction (open shrublands 7, savannas 9,
        grasslands 10), added; 0 for the forest bird.
    elevation_optimum, elevation_width : float
        Centre and scale (metres) of the elevation response.
    curvature : float
        Weight of the quadratic penalty ``((elev - optimum) / width)^2``.
    interaction : float
        Weight of ``forest * exp(-((elev - optimum) / width)^2)``: forest counts most at mid
        elevations.
    field_sd : float
        Standard deviation of the smooth random effect on the logit scale.
    field_length_m : float
        Correlation length (Gaussian kernel sd) of the random effect, in metres.
    prevalence : float
        Target mean of ``psi`` over the region; fixes the intercept.
    """

    forest: float = 3.0
    woody: float = 1.0
    urban: float = 4.0
    crop: float = 1.5
    elevation_optimum: float = 500.0
    elevation_width: float = 500.0
    curvature: float = 0.7
    interaction: float = 1.5
    field_sd: float = 0.5
    field_length_m: float = 12_000.0
    prevalence: float = DEFAULT_REGION.prevalence
    grassland: float = 0.0


#: The second virtual species of the default region (``DEFAULT_REGION.species_all[1]``): an
#: open-country bird of low elevations, in grassland, savanna and cropland, avoiding forest
#: and towns; optimum 100 m, a wider random effect, no forest x elevation interaction.
VIRTUAL_QUAIL = SpeciesModel(
    forest=-2.0,
    woody=-0.5,
    urban=3.0,
    crop=-2.5,
    grassland=3.0,
    elevation_optimum=100.0,
    elevation_width=300.0,
    curvature=0.6,
    interaction=0.0,
    field_sd=0.6,
    field_length_m=20_000.0,
    prevalence=0.2,
)


@dataclass(frozen=True)
class BirderModel:
    """How the virtual birders behave.

    Attributes
    ----------
    n_checklists : int
        Checklists drawn (a shared checklist counts once, whatever its group size).
    n_localities, n_observers : int
        Sites and people.
    hotspot_share : float
        Share of localities that are public hotspots (``LOCALITY TYPE`` H, else P).
    popularity_sigma, activity_sigma : float
        Log-normal spread of locality popularity and observer activity.
    base_weight, urban_weight, public_weight : float
        A cell's weight for placing localities: ``base + urban * near_urban + public * public``
        where ``near_urban`` is the smoothed urban fraction scaled to a maximum of one and
        ``public`` the cell's public-land fraction.
    urban_length_m : float
        Smoothing length (Gaussian sd) of the urban fraction, in metres.
    years : tuple of int
        Years of the checklists.
    season_months : tuple of int
        Months of most checklists; the rest fall in the months just before and after.
    season_share : float
        Share of checklists in ``season_months``.
    protocols : mapping protocol -> probability
    p_incomplete, p_group, p_x : float
        Shares of incomplete checklists, shared (group) checklists and ``X`` counts.
    mean_extra_members : float
        A group has ``2 + Poisson(mean_extra_members)`` members.
    duration_median_min, duration_sigma : float
        Log-normal duration (minutes) of timed checklists.
    distance_median_km, distance_sigma : float
        Log-normal distance of traveling checklists.
    p_single_observer : float
        Party size is ``1 + Geometric``; this is the share of parties of one.
    detection_intercept, detection_hours, detection_km, detection_observers : float
        ``logit(p) = intercept + hours * log(h) + km * log1p(km) + observers * log(n)``: the
        chance that a checklist in an occupied cell detects the species.
    incomplete_report : float
        Factor on that chance (and on other species) for incomplete checklists.
    other_species : tuple of (common, scientific, category, per-checklist probability)
        Background species reported independently of the grid.
    """

    n_checklists: int = 12_000
    n_localities: int = 2_500
    n_observers: int = 1_500
    hotspot_share: float = 0.3
    popularity_sigma: float = 1.2
    activity_sigma: float = 1.0
    base_weight: float = 0.05
    urban_weight: float = 1.0
    public_weight: float = 0.8
    urban_length_m: float = 10_000.0
    years: tuple[int, ...] = (2021, 2022)
    season_months: tuple[int, ...] = DEFAULT_REGION.months
    season_share: float = 0.85
    protocols: Mapping[str, float] = field(
        default_factory=lambda: {
            "Traveling": 0.58,
            "Stationary": 0.30,
            "Incidental": 0.07,
            "Area": 0.03,
            "Historical": 0.02,
        }
    )
    p_incomplete: float = 0.12
    p_group: float = 0.10
    p_x: float = 0.05
    mean_extra_members: float = 0.5
    duration_median_min: float = 55.0
    duration_sigma: float = 0.8
    distance_median_km: float = 2.0
    distance_sigma: float = 0.9
    p_single_observer: float = 0.65
    detection_intercept: float = -0.4
    detection_hours: float = 0.6
    detection_km: float = 0.3
    detection_observers: float = 0.3
    incomplete_report: float = 0.5
    other_species: tuple[tuple[str, str, str, float], ...] = (
        ("Northern Cardinal", "Cardinalis cardinalis", "species", 0.72),
        ("Carolina Wren", "Thryothorus ludovicianus", "species", 0.58),
        ("Tufted Titmouse", "Baeolophus bicolor", "species", 0.45),
        ("American Crow", "Corvus brachyrhynchos", "species", 0.42),
        ("Mourning Dove", "Zenaida macroura", "species", 0.40),
        ("Blue Jay", "Cyanocitta cristata", "species", 0.38),
        ("woodpecker sp.", "Picidae sp.", "spuh", 0.03),
    )

    def validate(self) -> None:
        """Raise :class:`InvalidInputError` when a share or a count is out of range."""
        for name in ("p_incomplete", "p_group", "p_x", "hotspot_share", "season_share"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise InvalidInputError(f"BirderModel.{name}={v!r} must lie in [0, 1]")
        for name in ("n_checklists", "n_localities", "n_observers"):
            if getattr(self, name) < 1:
                raise InvalidInputError(f"BirderModel.{name}={getattr(self, name)!r} must be >= 1")
        unknown = sorted(set(self.protocols) - set(_PROTOCOL_CODES))
        if unknown or not np.isclose(sum(self.protocols.values()), 1.0):
            raise InvalidInputError(
                f"BirderModel.protocols={dict(self.protocols)!r} must map names among "
                f"{sorted(_PROTOCOL_CODES)} to probabilities summing to 1"
            )


# --------------------------------------------------------------------------------------------
# Landscape


def region_grid(
    region: shapely.Geometry, cell_size: float = DEFAULT_REGION.cell_size
) -> tuple[Grid, np.ndarray, shapely.Geometry]:
    """The grid and cells :func:`reserve.ingest.ingest` builds for ``region`` (lon/lat polygon).

    Same construction as the ingest when every checklist lies inside the region: a Lambert
    azimuthal equal-area CRS centred on the region's bounding box, the region densified every
    0.05 degrees before projection, and the cells that meet it.

    Returns
    -------
    grid : Grid
    cells : int64 array
        Ids of the region's cells, sorted.
    region_xy : shapely geometry
        The region in the grid CRS.
    """
    x0, y0, x1, y1 = region.bounds
    crs = equal_area_crs((x0 + x1) / 2, (y0 + y1) / 2)
    to_grid = pyproj.Transformer.from_crs(4326, crs, always_xy=True)
    region_xy = shapely.transform(
        shapely.segmentize(region, 0.05), lambda c: np.column_stack(to_grid.transform(*c.T))
    )
    region_xy = shapely.make_valid(region_xy)
    grid = Grid.covering(shapely.bounds(region_xy), cell_size=cell_size, crs=crs)
    return grid, grid.cells_in(region_xy), region_xy


def smooth_field(
    grid: Grid, cells: np.ndarray, length_m: float, rng: np.random.Generator
) -> np.ndarray:
    """A Gaussian random field on the grid, smooth over ``length_m``, of mean 0 and sd 1.

    White noise on the whole grid rectangle is blurred with a Gaussian kernel (sd
    ``length_m``), then standardised over ``cells``.
    """
    noise = rng.standard_normal((grid.n_rows, grid.n_cols))
    smooth = gaussian_filter(noise, sigma=length_m / grid.cell_size, mode="reflect")
    rows, cols = grid.rows_cols(cells)
    values = smooth[rows, cols]
    return (values - values.mean()) / values.std()


def _smooth_values(
    grid: Grid, cells: np.ndarray, values: np.ndarray, length_m: float
) -> np.ndarray:
    """Blur per-cell values over the grid rectangle (cells outside count as 0)."""
    full = np.zeros((grid.n_rows, grid.n_cols))
    rows, cols = grid.rows_cols(cells)
    full[rows, cols] = np.nan_to_num(values)
    return gaussian_filter(full, sigma=length_m / grid.cell_size, mode="constant")[rows, cols]


def _fractions(features: pd.DataFrame, classes: tuple[int, ...] | int) -> np.ndarray:
    classes = (classes,) if isinstance(classes, int) else classes
    cols = [_lc(c) for c in classes if _lc(c) in features]
    if not cols:
        return np.zeros(len(features))
    return np.nan_to_num(features[cols].to_numpy(dtype=float).sum(axis=1))


def occupancy_logit(
    features: pd.DataFrame, field_values: np.ndarray, model: SpeciesModel
) -> np.ndarray:
    """The species' logit of occupancy per cell, without the intercept.

    Parameters
    ----------
    features : DataFrame
        Land-cover fractions (``landcover_<class>``) and ``elevation_mean`` per cell; NaN (a
        cell the rasters cover only partly) counts as 0 for fractions and as the region's
        median for elevation.
    field_values : array
        The smooth random effect per cell (mean 0, sd 1).
    model : SpeciesModel
    """
    if "elevation_mean" not in features:
        raise InvalidInputError("features need an 'elevation_mean' column for the species model")
    elev = features["elevation_mean"].to_numpy(dtype=float)
    elev = np.where(np.isfinite(elev), elev, np.nanmedian(elev))
    z = (elev - model.elevation_optimum) / model.elevation_width
    forest = _fractions(features, _FOREST)
    eta = (
        model.forest * forest
        + model.woody * _fractions(features, _WOODY)
        - model.urban * _fractions(features, _URBAN)
        - model.crop * _fractions(features, _CROP)
        - model.curvature * z**2
        + model.interaction * forest * np.exp(-(z**2))
        + model.field_sd * np.asarray(field_values, dtype=float)
    )
    if model.grassland:  # only when used, so the forest bird's logit is the same floats
        eta = eta + model.grassland * _fractions(features, _OPEN)
    return eta


def calibrate_intercept(eta: np.ndarray, prevalence: float) -> float:
    """The intercept ``b0`` with ``mean(sigmoid(eta + b0)) == prevalence`` (bisection)."""
    if not 0.0 < prevalence < 1.0:
        raise InvalidInputError(f"prevalence={prevalence!r} must lie strictly between 0 and 1")
    lo, hi = -50.0 - float(np.max(eta)), 50.0 - float(np.min(eta))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.mean(1.0 / (1.0 + np.exp(-(eta + mid)))) < prevalence:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def simulate_occupancy(
    features: pd.DataFrame,
    field_values: np.ndarray,
    rng: np.random.Generator,
    model: SpeciesModel | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Occupancy probability ``psi`` and one true occupancy draw per cell.

    Returns
    -------
    psi : float array
    occupied : bool array
    intercept : float
    """
    model = model or SpeciesModel()
    eta = occupancy_logit(features, field_values, model)
    b0 = calibrate_intercept(eta, model.prevalence)
    psi = 1.0 / (1.0 + np.exp(-(eta + b0)))
    return psi, rng.random(len(psi)) < psi, b0


# --------------------------------------------------------------------------------------------
# Birders


def _points_in_cells(
    grid: Grid,
    cells: np.ndarray,
    region_xy: shapely.Geometry,
    region_ll: shapely.Geometry,
    to_ll: pyproj.Transformer,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A uniform point in each cell that lies inside the region in both CRSs (redrawn if not)."""
    n = len(cells)
    x, y = np.empty(n), np.empty(n)
    todo = np.arange(n)
    rows, cols = grid.rows_cols(cells)
    shapely.prepare(region_xy)
    shapely.prepare(region_ll)
    for _ in range(200):
        if todo.size == 0:
            break
        s = grid.cell_size
        x[todo] = grid.x0 + (cols[todo] + rng.random(todo.size)) * s
        y[todo] = grid.y0 - (rows[todo] + rng.random(todo.size)) * s
        lon, lat = to_ll.transform(x[todo], y[todo])
        ok = shapely.contains_xy(region_xy, x[todo], y[todo]) & shapely.contains_xy(
            region_ll, lon, lat
        )
        todo = todo[~ok]
    # A sliver cell that never yields an inside point keeps its locality on the region's centre.
    if todo.size:
        c = shapely.point_on_surface(region_xy)
        x[todo], y[todo] = shapely.get_x(c), shapely.get_y(c)
    lon, lat = to_ll.transform(x, y)
    return x, y, np.asarray(lon), np.asarray(lat)


def _choice(rng: np.random.Generator, n: int, weights: np.ndarray) -> np.ndarray:
    p = np.asarray(weights, dtype=float)
    return rng.choice(len(p), size=n, p=p / p.sum())


def _detection_probability(
    m: BirderModel,
    duration: np.ndarray,
    distance: np.ndarray,
    observers: np.ndarray,
    complete: np.ndarray,
) -> np.ndarray:
    """Chance that a checklist in an occupied cell detects a species (see :class:`BirderModel`)."""
    hours = np.where(np.isfinite(duration), duration / 60.0, 0.5)
    km = np.nan_to_num(distance)
    logit = (
        m.detection_intercept
        + m.detection_hours * np.log(hours)
        + m.detection_km * np.log1p(km)
        + m.detection_observers * np.log(observers)
    )
    return 1.0 / (1.0 + np.exp(-logit)) * np.where(complete, 1.0, m.incomplete_report)


def simulate_checklists(
    grid: Grid,
    cells: np.ndarray,
    attraction: np.ndarray,
    occupied: np.ndarray,
    region_xy: shapely.Geometry,
    region_ll: shapely.Geometry,
    rng: np.random.Generator,
    model: BirderModel | None = None,
    *,
    species: tuple[str, str] = (DEFAULT_REGION.species, DEFAULT_REGION.scientific_name),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Draw checklists and their observations.

    Parameters
    ----------
    grid, cells : Grid, int array
        The planning units (region cells).
    attraction : float array
        Weight of each cell for placing localities (see :class:`BirderModel`).
    occupied : bool array
        True occupancy of each cell.
    region_xy, region_ll : shapely geometry
        The region in the grid CRS and in lon/lat; every locality lies inside both.
    rng : numpy Generator
    model : BirderModel, optional
    species : (common name, scientific name)
        The target species.

    Returns
    -------
    sed : DataFrame
        One row per sampling event (a group's members are separate rows), with typed columns
        and ``cell_id``, ``checklist``, ``occupied`` (for tests; not written).
    ebd : DataFrame
        One row per (sampling event, species): ``sampling_event_identifier``, ``common_name``,
        ``scientific_name``, ``category``, ``observation_count`` (text, ``X`` allowed),
        ``taxonomic_order``.
    """
    m = model or BirderModel()
    m.validate()
    cells = np.asarray(cells, dtype=np.int64)
    occupied = np.asarray(occupied, dtype=bool)
    attraction = np.asarray(attraction, dtype=float)
    if not (len(cells) == len(occupied) == len(attraction)):
        raise InvalidInputError(
            f"cells ({len(cells)}), attraction ({len(attraction)}) and occupied "
            f"({len(occupied)}) must have the same length"
        )
    # The draws below happen in this order; changing it changes every simulated file.
    to_ll = pyproj.Transformer.from_crs(grid.crs, 4326, always_xy=True)
    places = _draw_localities(grid, cells, attraction, region_xy, region_ll, to_ll, rng, m)
    when = _draw_dates(rng, m)
    effort = _draw_effort(rng, m)
    # Detection of the target species: only in occupied cells, rising with effort.
    cell_idx = places["loc_cell"][places["loc"]]
    occ = occupied[cell_idx]
    p_det = _detection_probability(
        m, effort["duration"], effort["distance"], effort["observers"], effort["complete"]
    )
    detected = occ & (rng.random(m.n_checklists) < p_det)
    obs_chk, obs_sp, count_text = _draw_observations(rng, m, detected, effort["complete"])
    events = _draw_events(rng, m, effort["members"])
    sed = _sed_frame(places, when, effort, events, cells[cell_idx], occ)
    ebd = _ebd_frame(sed, m, species, effort["members"], obs_chk, obs_sp, count_text)
    return sed, ebd


def _draw_localities(
    grid: Grid,
    cells: np.ndarray,
    attraction: np.ndarray,
    region_xy: shapely.Geometry,
    region_ll: shapely.Geometry,
    to_ll: pyproj.Transformer,
    rng: np.random.Generator,
    m: BirderModel,
) -> dict[str, np.ndarray]:
    """Localities (cell, lon/lat, hotspot), then each checklist's locality by popularity."""
    loc_cell = _choice(rng, m.n_localities, attraction)
    _, _, loc_lon, loc_lat = _points_in_cells(
        grid, cells[loc_cell], region_xy, region_ll, to_ll, rng
    )
    hotspot = rng.random(m.n_localities) < m.hotspot_share
    popularity = rng.lognormal(0.0, m.popularity_sigma, m.n_localities) * np.where(hotspot, 3, 1)
    loc = _choice(rng, m.n_checklists, popularity)
    return {"loc_cell": loc_cell, "lon": loc_lon, "lat": loc_lat, "hotspot": hotspot, "loc": loc}


def _draw_dates(rng: np.random.Generator, m: BirderModel) -> dict[str, np.ndarray]:
    """Each checklist's date (mostly in season) and start minute (``-1``: none)."""
    n = m.n_checklists
    year = rng.choice(np.asarray(m.years), size=n)
    in_season = rng.random(n) < m.season_share
    months = np.asarray(m.season_months)
    off = np.asarray([months.min() - 1, months.max() + 1])
    month = np.where(in_season, rng.choice(months, size=n), rng.choice(off, size=n))
    month_start = (year - 1970) * 12 + (month - 1)
    first = month_start.astype("datetime64[M]").astype("datetime64[D]")
    days = ((month_start + 1).astype("datetime64[M]").astype("datetime64[D]") - first).astype(int)
    date = first + np.floor(rng.random(n) * days).astype(int)
    start_min = np.clip(rng.normal(8.5 * 60, 150, n), 5 * 60, 20 * 60).astype(int)
    start_min = np.where(rng.random(n) < 0.03, -1, start_min)  # a few without a start time
    return {"date": date, "start_min": start_min}


def _draw_effort(rng: np.random.Generator, m: BirderModel) -> dict[str, np.ndarray]:
    """Each checklist's protocol, effort, observers, completeness and group size."""
    n = m.n_checklists
    names = list(m.protocols)
    protocol = np.asarray(names)[_choice(rng, n, np.asarray([m.protocols[p] for p in names]))]
    duration = np.clip(
        np.round(rng.lognormal(np.log(m.duration_median_min), m.duration_sigma, n)), 1, 720
    )
    distance = np.round(
        np.clip(rng.lognormal(np.log(m.distance_median_km), m.distance_sigma, n), 0.05, 60), 3
    )
    area_ha = np.round(rng.lognormal(np.log(10.0), 1.0, n), 1)
    duration = np.where(np.isin(protocol, ["Incidental"]), np.nan, duration)
    duration = np.where((protocol == "Historical") & (rng.random(n) < 0.5), np.nan, duration)
    distance = np.where(protocol == "Traveling", distance, np.nan)
    area_ha = np.where(protocol == "Area", area_ha, np.nan)
    observers = np.where(rng.random(n) < m.p_single_observer, 1, 1 + rng.geometric(0.45, n))
    complete = rng.random(n) >= m.p_incomplete
    group = rng.random(n) < m.p_group
    members = np.where(group, 2 + rng.poisson(m.mean_extra_members, n), 1)
    observers = np.maximum(observers, members)
    return {
        "protocol": protocol,
        "duration": duration,
        "distance": distance,
        "area_ha": area_ha,
        "observers": observers,
        "complete": complete,
        "group": group,
        "members": members,
    }


def _draw_observations(
    rng: np.random.Generator, m: BirderModel, detected: np.ndarray, complete: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Observation rows per checklist (target species ``0``, then the background species).

    Returns the checklist and species index of each row, sorted, and its count as text.
    """
    n = m.n_checklists
    report = np.where(complete, 1.0, m.incomplete_report)
    rows_chk, rows_sp = [np.flatnonzero(detected)], [np.zeros(int(detected.sum()), dtype=int)]
    for j, (*_, p) in enumerate(m.other_species, start=1):
        hit = np.flatnonzero(rng.random(n) < p * report)
        rows_chk.append(hit)
        rows_sp.append(np.full(hit.size, j))
    obs_chk = np.concatenate(rows_chk)
    obs_sp = np.concatenate(rows_sp)
    order = np.lexsort((obs_sp, obs_chk))
    obs_chk, obs_sp = obs_chk[order], obs_sp[order]
    mean_count = np.where(obs_sp == 0, 0.8, 2.0)
    count = (1 + rng.poisson(mean_count)).astype(int)
    is_x = rng.random(obs_chk.size) < m.p_x
    return obs_chk, obs_sp, np.where(is_x, "X", count.astype(str))


def _draw_events(
    rng: np.random.Generator, m: BirderModel, members: np.ndarray
) -> dict[str, np.ndarray]:
    """Sampling events: one per checklist, one per member of a group; ids and observers."""
    n = m.n_checklists
    ev_chk = np.repeat(np.arange(n), members)
    ev_member = np.arange(ev_chk.size) - np.repeat(np.cumsum(members) - members, members)
    n_ev = ev_chk.size
    event_ids = 100_000_000 + rng.permutation(n_ev) * 7 + rng.integers(0, 7, n_ev)
    group_ids = 10_000_000 + rng.permutation(n) * 3
    activity = rng.lognormal(0.0, m.activity_sigma, m.n_observers)
    # The checklist's owner; the other members of a group are the next observer ids, so the
    # members of one group are different people.
    owner = _choice(rng, n, activity)
    observer = (owner[ev_chk] + ev_member) % m.n_observers
    return {"chk": ev_chk, "event_ids": event_ids, "group_ids": group_ids, "observer": observer}


def _sed_frame(
    places: dict[str, np.ndarray],
    when: dict[str, np.ndarray],
    effort: dict[str, np.ndarray],
    events: dict[str, np.ndarray],
    cell_of_checklist: np.ndarray,
    occupied_of_checklist: np.ndarray,
) -> pd.DataFrame:
    """The sampling-event table: one row per event, typed columns (no randomness here)."""
    ev_chk, loc = events["chk"], places["loc"]
    group_ids = events["group_ids"]
    return pd.DataFrame(
        {
            "sampling_event_identifier": np.char.add("S", events["event_ids"].astype(str)),
            "group_identifier": np.where(
                effort["group"][ev_chk], np.char.add("G", group_ids[ev_chk].astype(str)), ""
            ),
            "latitude": places["lat"][loc][ev_chk],
            "longitude": places["lon"][loc][ev_chk],
            "locality_id": np.char.add("L", (2_000_000 + loc[ev_chk] * 13).astype(str)),
            "locality_type": np.where(places["hotspot"][loc][ev_chk], "H", "P"),
            "observation_date": when["date"][ev_chk],
            "start_minutes": when["start_min"][ev_chk],
            "observer_id": np.char.add("obsr", (100_000 + events["observer"] * 11).astype(str)),
            "protocol_type": effort["protocol"][ev_chk],
            "duration_minutes": effort["duration"][ev_chk],
            "effort_distance_km": effort["distance"][ev_chk],
            "effort_area_ha": effort["area_ha"][ev_chk],
            "number_observers": effort["observers"][ev_chk],
            "all_species_reported": effort["complete"][ev_chk],
            "cell_id": cell_of_checklist[ev_chk],
            "occupied": occupied_of_checklist[ev_chk],
            "checklist": ev_chk,
        }
    )


def _ebd_frame(
    sed: pd.DataFrame,
    m: BirderModel,
    species: tuple[str, str],
    members: np.ndarray,
    obs_chk: np.ndarray,
    obs_sp: np.ndarray,
    count_text: np.ndarray,
) -> pd.DataFrame:
    """The observation table; every member of a shared checklist carries the same rows."""
    first_event = np.cumsum(members) - members
    ev_counts = members[obs_chk]
    obs_rows = np.repeat(np.arange(obs_chk.size), ev_counts)
    ev_index = first_event[obs_chk][obs_rows] + (
        np.arange(obs_rows.size) - np.repeat(np.cumsum(ev_counts) - ev_counts, ev_counts)
    )
    taxa = [species, *((c, s) for c, s, *_ in m.other_species)]
    cats = ["species", *(c for _, _, c, _ in m.other_species)]
    order_nums = np.asarray([99_999, 30_114, 26_982, 25_460, 22_064, 2_331, 21_870, 16_996])
    sp = obs_sp[obs_rows]
    return pd.DataFrame(
        {
            "sampling_event_identifier": sed["sampling_event_identifier"].to_numpy()[ev_index],
            "common_name": np.asarray([t[0] for t in taxa])[sp],
            "scientific_name": np.asarray([t[1] for t in taxa])[sp],
            "category": np.asarray(cats)[sp],
            "taxonomic_order": order_nums[: len(taxa)][sp],
            "observation_count": count_text[obs_rows],
            "event": ev_index,
        }
    )


def simulate_detections(
    sed: pd.DataFrame,
    cells: np.ndarray,
    occupied: np.ndarray,
    rng: np.random.Generator,
    model: BirderModel | None = None,
    *,
    species: tuple[str, str],
    taxonomic_order: int,
) -> pd.DataFrame:
    """Detections of another species on checklists already drawn by :func:`simulate_checklists`.

    The species is detected only on a checklist in a cell it occupies, with the same effort
    response as the target species (:class:`BirderModel`); every member of a shared checklist
    carries the row, with the same count.

    Parameters
    ----------
    sed : DataFrame
        The first output of :func:`simulate_checklists` (``checklist``, ``cell_id``, effort).
    cells, occupied : arrays
        Sorted cell ids of the region and this species' true occupancy of each.
    rng : numpy Generator
        Its own stream, so the checklists and the first species do not change.
    model : BirderModel, optional
        The model the checklists were drawn with.
    species : (common name, scientific name)
    taxonomic_order : int

    Returns
    -------
    DataFrame
        EBD rows as the second output of :func:`simulate_checklists` (with ``event``, the row
        of ``sed``), in event order.
    """
    m = model or BirderModel()
    cells = np.asarray(cells, dtype=np.int64)
    chk = sed.drop_duplicates("checklist").sort_values("checklist", kind="stable")
    pos = np.searchsorted(cells, chk["cell_id"].to_numpy())
    if (pos >= len(cells)).any() or not np.array_equal(
        cells[np.minimum(pos, len(cells) - 1)], chk["cell_id"].to_numpy()
    ):
        raise InvalidInputError("sed has cell ids that are not in cells; pass the region's cells")
    occ = np.asarray(occupied, dtype=bool)[pos]
    p_det = _detection_probability(
        m,
        chk["duration_minutes"].to_numpy(dtype=float),
        chk["effort_distance_km"].to_numpy(dtype=float),
        chk["number_observers"].to_numpy(),
        chk["all_species_reported"].to_numpy(dtype=bool),
    )
    detected = occ & (rng.random(len(chk)) < p_det)
    count = (1 + rng.poisson(0.8, int(detected.sum()))).astype(int)
    is_x = rng.random(count.size) < m.p_x
    count_text = np.where(is_x, "X", count.astype(str))
    which = np.cumsum(detected) - 1  # index among the detected checklists
    checklist = sed["checklist"].to_numpy()
    events = np.flatnonzero(detected[checklist])
    n = events.size
    return pd.DataFrame(
        {
            "sampling_event_identifier": sed["sampling_event_identifier"].to_numpy()[events],
            "common_name": np.full(n, species[0], dtype=object),
            "scientific_name": np.full(n, species[1], dtype=object),
            "category": np.full(n, "species", dtype=object),
            "taxonomic_order": np.full(n, taxonomic_order),
            "observation_count": count_text[which[checklist[events]]],
            "event": events,
        }
    )


# --------------------------------------------------------------------------------------------
# Writing


def _fmt(values: np.ndarray, spec: str) -> np.ndarray:
    """Format floats with ``spec``; NaN becomes an empty field."""
    values = np.asarray(values, dtype=float)
    out = np.char.mod(spec, np.nan_to_num(values)).astype(object)
    out[~np.isfinite(values)] = ""
    return out


def _sed_text(sed: pd.DataFrame) -> dict[str, Any]:
    """The SED fields shared by both files, as text."""
    start = sed["start_minutes"].to_numpy()
    start_text = np.char.add(
        np.char.add(np.char.zfill((start // 60).astype(str), 2), ":"),
        np.char.add(np.char.zfill((start % 60).astype(str), 2), ":00"),
    ).astype(object)
    start_text[start < 0] = ""
    date = sed["observation_date"].to_numpy().astype("datetime64[D]")
    edited = (date + 3).astype(str)
    protocol = sed["protocol_type"].to_numpy().astype(str)
    return {
        "LAST EDITED DATE": np.char.add(edited, " 18:04:11"),
        "COUNTRY": "United States",
        "COUNTRY CODE": "US",
        "STATE": "Georgia",
        "STATE CODE": "US-GA",
        "COUNTY": "",
        "COUNTY CODE": "",
        "IBA CODE": "",
        "BCR CODE": "",
        "USFWS CODE": "",
        "ATLAS BLOCK": "",
        "LOCALITY": np.char.add("Simulated site ", sed["locality_id"].to_numpy().astype(str)),
        "LOCALITY ID": sed["locality_id"].to_numpy(),
        "LOCALITY TYPE": sed["locality_type"].to_numpy(),
        "LATITUDE": _fmt(sed["latitude"].to_numpy(), "%.7f"),
        "LONGITUDE": _fmt(sed["longitude"].to_numpy(), "%.7f"),
        "OBSERVATION DATE": date.astype(str),
        "TIME OBSERVATIONS STARTED": start_text,
        "OBSERVER ID": sed["observer_id"].to_numpy(),
        "OBSERVER ORCID ID": "",
        "SAMPLING EVENT IDENTIFIER": sed["sampling_event_identifier"].to_numpy(),
        "OBSERVATION TYPE": protocol,
        "PROTOCOL NAME": protocol,
        "PROTOCOL CODE": pd.Series(protocol).map(_PROTOCOL_CODES).to_numpy(),
        "PROJECT NAMES": "eBird",
        "PROJECT IDENTIFIERS": "EBIRD",
        "DURATION MINUTES": _fmt(sed["duration_minutes"].to_numpy(), "%.0f"),
        "EFFORT DISTANCE KM": _fmt(sed["effort_distance_km"].to_numpy(), "%.3f"),
        "EFFORT AREA HA": _fmt(sed["effort_area_ha"].to_numpy(), "%.1f"),
        "NUMBER OBSERVERS": sed["number_observers"].to_numpy().astype(int).astype(str),
        "ALL SPECIES REPORTED": sed["all_species_reported"].to_numpy().astype(int).astype(str),
        "GROUP IDENTIFIER": sed["group_identifier"].to_numpy(),
        "CHECKLIST COMMENTS": "",
    }


def _write_gz_table(frame: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Tab-separated text, gzipped with no name and mtime 0, written atomically."""
    path = Path(path)
    text = io.StringIO()
    frame.to_csv(text, sep="\t", index=False, quoting=csv.QUOTE_NONE, lineterminator="\n")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with (
            open(tmp, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz,
        ):
            gz.write(text.getvalue().encode("utf-8"))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def write_sed(sed: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write simulated sampling events as a gzipped SED in eBird's current layout.

    Parameters
    ----------
    sed : DataFrame
        The first output of :func:`simulate_checklists`.
    path : path-like
        ``.txt.gz`` to write (atomically, byte-stable).
    """
    fields = _sed_text(sed)
    frame = pd.DataFrame({k: fields[k] for k in SED_HEADER}, index=np.arange(len(sed)))
    frame[""] = ""  # eBird's SED lines end with a tab
    return _write_gz_table(frame, path)


def write_ebd(ebd: pd.DataFrame, sed: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write simulated observations as a gzipped EBD in eBird's current layout (52 columns).

    Parameters
    ----------
    ebd, sed : DataFrame
        The outputs of :func:`simulate_checklists`.
    path : path-like
        ``.txt.gz`` to write (atomically, byte-stable).
    """
    ev = ebd["event"].to_numpy()
    shared = {
        k: (v if isinstance(v, str) else np.asarray(v)[ev]) for k, v in _sed_text(sed).items()
    }
    n = len(ebd)
    fields: dict[str, Any] = {
        "GLOBAL UNIQUE IDENTIFIER": np.char.add(
            "URN:CornellLabOfOrnithology:EBIRD:OBS", (900_000_000 + np.arange(n)).astype(str)
        ),
        "TAXONOMIC ORDER": ebd["taxonomic_order"].to_numpy().astype(str),
        "CATEGORY": ebd["category"].to_numpy(),
        "TAXON CONCEPT ID": "",
        "COMMON NAME": ebd["common_name"].to_numpy(),
        "SCIENTIFIC NAME": ebd["scientific_name"].to_numpy(),
        "SUBSPECIES COMMON NAME": "",
        "SUBSPECIES SCIENTIFIC NAME": "",
        "EXOTIC CODE": "",
        "OBSERVATION COUNT": ebd["observation_count"].to_numpy(),
        "BREEDING CODE": "",
        "BREEDING CATEGORY": "",
        "BEHAVIOR CODE": "",
        "AGE/SEX": "",
        "HAS MEDIA": "0",
        "APPROVED": "1",
        "REVIEWED": "0",
        "REASON": "",
        "SPECIES COMMENTS": "",
    }
    fields.update({k: v for k, v in shared.items() if k in EBD_HEADER})
    frame = pd.DataFrame({k: fields[k] for k in EBD_HEADER}, index=np.arange(n))
    return _write_gz_table(frame, path)


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


# --------------------------------------------------------------------------------------------
# The whole region


def simulate_region(
    *,
    landcover: str | os.PathLike[str],
    legend: str | os.PathLike[str],
    elevation: str | os.PathLike[str],
    region: str | os.PathLike[str],
    public: str | os.PathLike[str],
    ebd: str | os.PathLike[str],
    sed: str | os.PathLike[str],
    truth: str | os.PathLike[str],
    meta: str | os.PathLike[str] | None = None,
    seed: int = DEFAULT_REGION.seed,
    species: SpeciesModel | None = None,
    birders: BirderModel | None = None,
    cell_size: float = DEFAULT_REGION.cell_size,
    second_truth: str | os.PathLike[str] | None = None,
    second_species: SpeciesModel | None = None,
) -> dict[str, Any]:
    """Simulate the species and the birders on a landscape and write EBD, SED and truth.

    With ``second_truth``, a second species (``DEFAULT_REGION.species_all[1]``) is simulated
    after everything else from its own random stream (``SeedSequence(seed, spawn_key=(1,))``)
    and detected on the same checklists; its EBD rows follow the others', so the SED, the
    first species' truth and the EBD up to its last row of the first species' draw are the same
    bytes as without it.

    Parameters
    ----------
    landcover, legend, elevation : path-like
        UMD land-cover raster, its class legend (CSV), elevation raster (metres).
    region, public : path-like
        Polygon files: the region and the public land.
    ebd, sed, truth : path-like
        Outputs: gzipped EBD and SED, and the truth table (``cell_id``, ``psi``, ``occupied``,
        ``lon``, ``lat`` of the cell centre; gzipped CSV).
    meta : path-like, optional
        JSON summary of the models, the seed and the counts.
    seed : int
        Seed of everything random.
    species, birders : optional
        Models; the documented defaults otherwise.
    cell_size : float
        Side of the planning units (metres).
    second_truth : path-like, optional
        Truth of the second species (same columns as ``truth``); without it, no second species.
    second_species : SpeciesModel, optional
        Its model; default :data:`VIRTUAL_QUAIL`.

    Returns
    -------
    dict
        The summary (also written to ``meta``).
    """
    species = species or SpeciesModel()
    birders = birders or BirderModel()
    rng = np.random.default_rng(seed)
    grid, cells, region_xy, region_ll, features, public_fraction = _landscape(
        region, cell_size, landcover, legend, elevation, public
    )
    field_values = smooth_field(grid, cells, species.field_length_m, rng)
    psi, occupied, b0 = simulate_occupancy(features, field_values, rng, species)
    attraction = _attraction(grid, cells, features, public_fraction, birders)
    sed_table, ebd_table = simulate_checklists(
        grid, cells, attraction, occupied, region_xy, region_ll, rng, birders
    )
    lon, lat = _cell_centres_ll(grid, cells)
    second: dict[str, Any] | None = None
    if second_truth is not None:
        rows2, second = _second_species(
            grid, cells, features, sed_table, seed, birders, second_species, second_truth, lon, lat
        )
        ebd_table = pd.concat([ebd_table, rows2], ignore_index=True)
    write_sed(sed_table, sed)
    write_ebd(ebd_table, sed_table, ebd)
    _write_truth(truth, cells, psi, occupied, lon, lat)
    summary = _summary(seed, species, birders, b0, grid, cells, psi, occupied, sed_table, ebd_table)
    summary.update({} if second is None else {"second_species": second})
    if meta is not None:
        _write_text(Path(meta), json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return summary


def _landscape(
    region: str | os.PathLike[str],
    cell_size: float,
    landcover: str | os.PathLike[str],
    legend: str | os.PathLike[str],
    elevation: str | os.PathLike[str],
    public: str | os.PathLike[str],
) -> tuple[Grid, np.ndarray, shapely.Geometry, shapely.Geometry, pd.DataFrame, np.ndarray]:
    """The region's grid and cells, the region (grid CRS, lon/lat), features, public share.

    The features are the cells' land-cover fractions and elevation.
    """
    region_ll = read_polygons(region, "EPSG:4326", name="region")
    grid, cells, region_xy = region_grid(region_ll, cell_size)
    layers = [
        RasterLayer("landcover", landcover, "categorical", legend),
        RasterLayer("elevation", elevation, "continuous"),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # partly covered edge cells: handled as NaN below
        features = habitat_features(grid, cells, layers)
    public_fraction = cover_fraction(grid.polygons(cells), read_polygons(public, grid.crs))
    return grid, cells, region_xy, region_ll, features, public_fraction


def _attraction(
    grid: Grid,
    cells: np.ndarray,
    features: pd.DataFrame,
    public_fraction: np.ndarray,
    birders: BirderModel,
) -> np.ndarray:
    """Each cell's weight for placing localities: base, smoothed urban share, public land."""
    urban = _smooth_values(grid, cells, _fractions(features, _URBAN), birders.urban_length_m)
    return (
        birders.base_weight
        + birders.urban_weight * urban / max(float(urban.max()), 1e-12)
        + birders.public_weight * public_fraction
    )


def _second_species(
    grid: Grid,
    cells: np.ndarray,
    features: pd.DataFrame,
    sed_table: pd.DataFrame,
    seed: int,
    birders: BirderModel,
    second_species: SpeciesModel | None,
    second_truth: str | os.PathLike[str],
    lon: np.ndarray,
    lat: np.ndarray,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The second species from its own random stream, detected on the same checklists.

    Writes its truth table to ``second_truth`` (``lon``, ``lat``: the cell centres) and
    returns its EBD rows and its summary entry.
    """
    model2 = second_species or VIRTUAL_QUAIL
    names2 = (DEFAULT_REGION.species_all[1], DEFAULT_REGION.scientific_names_all[1])
    rng2 = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,)))
    field2 = smooth_field(grid, cells, model2.field_length_m, rng2)
    psi2, occupied2, b2 = simulate_occupancy(features, field2, rng2, model2)
    rows2 = simulate_detections(
        sed_table, cells, occupied2, rng2, birders, species=names2, taxonomic_order=99_998
    )
    second = {
        "common_name": names2[0],
        "scientific_name": names2[1],
        "species_model": dataclasses.asdict(model2),
        "intercept": round(float(b2), 6),
        "truth": Path(second_truth).name,
        "seed": f"SeedSequence({int(seed)}, spawn_key=(1,))",
        "counts": {
            "occupied_cells": int(occupied2.sum()),
            "prevalence": round(float(occupied2.mean()), 6),
            "mean_psi": round(float(psi2.mean()), 6),
            "detections": len(rows2),
        },
    }
    _write_truth(second_truth, cells, psi2, occupied2, lon, lat)
    return rows2, second


def _cell_centres_ll(grid: Grid, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longitude and latitude of the cells' centres."""
    rows, cols = grid.rows_cols(cells)
    cx = grid.x0 + (cols + 0.5) * grid.cell_size
    cy = grid.y0 - (rows + 0.5) * grid.cell_size
    return pyproj.Transformer.from_crs(grid.crs, 4326, always_xy=True).transform(cx, cy)


def _summary(
    seed: int,
    species: SpeciesModel,
    birders: BirderModel,
    b0: float,
    grid: Grid,
    cells: np.ndarray,
    psi: np.ndarray,
    occupied: np.ndarray,
    sed_table: pd.DataFrame,
    ebd_table: pd.DataFrame,
) -> dict[str, Any]:
    """The simulation summary: seed, models, grid and counts (``simulation.json``)."""
    chk = sed_table.drop_duplicates("checklist")
    return {
        "seed": int(seed),
        "species": {
            "common_name": DEFAULT_REGION.species,
            "scientific_name": DEFAULT_REGION.scientific_name,
        },
        "species_model": dataclasses.asdict(species),
        "birder_model": {
            k: v if not isinstance(v, Mapping) else dict(v)
            for k, v in dataclasses.asdict(birders).items()
        },
        "intercept": round(float(b0), 6),
        "grid": {
            "crs": grid.crs.to_wkt(),
            "cell_size": grid.cell_size,
            "x0": grid.x0,
            "y0": grid.y0,
            "n_rows": grid.n_rows,
            "n_cols": grid.n_cols,
        },
        "counts": {
            "cells": len(cells),
            "occupied_cells": int(occupied.sum()),
            "prevalence": round(float(occupied.mean()), 6),
            "mean_psi": round(float(psi.mean()), 6),
            "checklists": len(chk),
            "sampling_events": len(sed_table),
            "ebd_rows": len(ebd_table),
            "incomplete_checklists": int((~chk["all_species_reported"]).sum()),
            "group_checklists": int((chk["group_identifier"] != "").sum()),
            "x_counts": int((ebd_table["observation_count"] == "X").sum()),
            "target_detections": int(
                (ebd_table["scientific_name"] == DEFAULT_REGION.scientific_name).sum()
            ),
        },
    }


def _write_truth(
    path: str | os.PathLike[str],
    cells: np.ndarray,
    psi: np.ndarray,
    occupied: np.ndarray,
    lon: np.ndarray,
    lat: np.ndarray,
) -> None:
    """The truth table as gzipped CSV (mtime 0, byte-stable), written atomically."""
    truth_frame = pd.DataFrame(
        {
            "cell_id": cells,
            "psi": _fmt(psi, "%.6f"),
            "occupied": occupied.astype(int),
            "lon": _fmt(lon, "%.6f"),
            "lat": _fmt(lat, "%.6f"),
        }
    )
    text = io.StringIO()
    truth_frame.to_csv(text, index=False, lineterminator="\n")
    truth_path = Path(path)
    tmp = truth_path.with_name(f".{truth_path.name}.{os.getpid()}.tmp")
    try:
        with (
            open(tmp, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz,
        ):
            gz.write(text.getvalue().encode())
        os.replace(tmp, truth_path)
    finally:
        if tmp.exists():
            tmp.unlink()
