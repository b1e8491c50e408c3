"""Type the text columns of eBird SED and EBD rows; rows that do not parse are malformed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = [
    "EBD_COLUMNS",
    "SED_COLUMNS",
    "clean_text",
    "drop_malformed",
    "empty_text",
    "parse_detections",
    "parse_sampling",
]


SED_COLUMNS = (
    "sampling_event_identifier",
    "group_identifier",
    "latitude",
    "longitude",
    "observation_date",
    "time_observations_started",
    "protocol_type",
    "duration_minutes",
    "effort_distance_km",
    "number_observers",
    "all_species_reported",
)


EBD_COLUMNS = (
    "sampling_event_identifier",
    "category",
    "common_name",
    "scientific_name",
    "observation_count",
)


def clean_text(series: pd.Series) -> pd.Series:
    """Stripped text; missing stays missing (an all-empty column may arrive as float NaN)."""
    return series.astype("str").str.strip()


def _num(series: pd.Series) -> np.ndarray:
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)


def parse_sampling(text: pd.DataFrame) -> pd.DataFrame:
    """Parse SED text columns into typed columns; rows that do not parse get NaN / NaT.

    Precondition: the columns of :data:`reserve.io.SED_REQUIRED`, as text. Use
    :func:`drop_malformed` afterwards to remove rows whose identifier, coordinates or date did
    not parse.

    Examples
    --------
    >>> t = pd.DataFrame({"sampling_event_identifier": ["S1"], "group_identifier": [np.nan],
    ...     "latitude": ["1.5"], "longitude": ["x"], "observation_date": ["2018-05-01"],
    ...     "time_observations_started": ["07:30:00"], "protocol_type": ["Traveling"],
    ...     "duration_minutes": ["60"], "effort_distance_km": ["2.5"],
    ...     "number_observers": ["1"], "all_species_reported": ["1"]})
    >>> p = parse_sampling(t)
    >>> float(p.latitude[0]), bool(np.isnan(p.longitude[0])), bool(p.all_species_reported[0])
    (1.5, True, True)
    """
    out = pd.DataFrame(index=text.index)
    out["sampling_event_identifier"] = clean_text(text["sampling_event_identifier"])
    group = clean_text(text["group_identifier"])
    out["group_identifier"] = group.where(group != "", np.nan)
    out["latitude"] = _num(text["latitude"])
    out["longitude"] = _num(text["longitude"])
    out["observation_date"] = pd.to_datetime(
        text["observation_date"], format="%Y-%m-%d", errors="coerce"
    )
    if "time_observations_started" in text:
        t = pd.to_timedelta(text["time_observations_started"], errors="coerce")
        out["time_observations_started"] = t.dt.total_seconds().to_numpy() / 3600.0
    out["protocol_type"] = clean_text(text["protocol_type"])
    out["duration_minutes"] = _num(text["duration_minutes"])
    out["effort_distance_km"] = _num(text["effort_distance_km"])
    out["number_observers"] = _num(text["number_observers"])
    complete = clean_text(text["all_species_reported"]).str.lower()
    out["all_species_reported"] = complete.isin(["1", "true", "t", "yes"]).to_numpy()
    return out


def drop_malformed(checklists: pd.DataFrame) -> pd.DataFrame:
    """Drop parsed SED rows whose identifier, latitude, longitude or date is missing or invalid.

    Precondition: the output of :func:`parse_sampling`.
    """
    ok = (
        checklists["sampling_event_identifier"].notna().to_numpy()
        & np.isfinite(checklists["latitude"].to_numpy())
        & np.isfinite(checklists["longitude"].to_numpy())
        & (np.abs(checklists["latitude"].to_numpy()) <= 90)
        & (np.abs(checklists["longitude"].to_numpy()) <= 180)
        & checklists["observation_date"].notna().to_numpy()
    )
    return checklists[ok]


def parse_detections(text: pd.DataFrame) -> pd.DataFrame:
    """Parse EBD text rows: counts to numbers, ``"X"`` to detected with an unknown (NaN) count.

    Precondition: the columns of :data:`reserve.io.EBD_REQUIRED`, as text. Rows whose identifier
    or names are missing, or whose count is neither a number nor ``X``, are dropped (they are
    malformed).

    Examples
    --------
    >>> t = pd.DataFrame({"sampling_event_identifier": ["S1", "S2", "S3"],
    ...     "category": ["species"] * 3, "common_name": ["Wood Thrush"] * 3,
    ...     "scientific_name": ["Hylocichla mustelina"] * 3,
    ...     "observation_count": ["2", "X", "two"]})
    >>> p = parse_detections(t)
    >>> p.observation_count.tolist(), p.detected.tolist()
    ([2.0, nan], [True, True])
    """
    raw = clean_text(text["observation_count"])
    is_x = (raw.str.upper() == "X").to_numpy()
    count = _num(raw)
    ok = (
        (is_x | np.isfinite(count))
        & text["sampling_event_identifier"].notna().to_numpy()
        & text["scientific_name"].notna().to_numpy()
        & text["common_name"].notna().to_numpy()
    )
    out = pd.DataFrame(
        {
            "sampling_event_identifier": clean_text(text["sampling_event_identifier"]),
            "category": clean_text(text["category"]).str.lower(),
            "common_name": clean_text(text["common_name"]),
            "scientific_name": clean_text(text["scientific_name"]),
            "observation_count": np.where(is_x, np.nan, count),
            "detected": is_x | (count > 0),
        },
        index=text.index,
    )
    return out[ok]


def empty_text(columns: Sequence[str]) -> pd.DataFrame:
    """An empty table of text columns (what a file with only a header streams)."""
    return pd.DataFrame({c: pd.Series(dtype=str) for c in columns})
