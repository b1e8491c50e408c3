"""Read eBird data and write outputs atomically.

This package turns eBird text files into two tables and knows nothing of grids or rasters:

* **checklists**: one row per sampling event of the Sampling Event Data (SED) that passes the
  filters, with ``checklist_id``, ``latitude``, ``longitude``, ``observation_date``,
  ``duration_minutes``, ``effort_distance_km``, ``number_observers``;
* **detections**: the eBird Basic Dataset (EBD) rows of the target species, rolled up to
  species level.

:func:`zero_fill` joins them: a checklist with no EBD row for the species is a non-detection.
Several species can be read in one pass (``species=["Wood Thrush", "Veery"]``): the EBD is
streamed once, the rows of every species are tagged with the name asked for, and each species
is zero-filled against the same checklists (columns ``detected__<slug>``,
``observation_count__<slug>``, see :func:`reserve.config.species_slug`).
:func:`load_observations` runs the whole sequence in the order of the eBird best-practice guide
(Strimas-Mackey et al.) and records, in a :class:`FilterLog`, how many rows every step kept and
dropped. The settings of every filter travel together in one :class:`ChecklistFilter`.

Modules, in the order data flows through them:

``text``
    stream EBD / SED text (both column layouts; plain, gzip or zip); header checks
``parse``
    type the text columns; malformed rows
``filters``
    the best-practice steps and :class:`ChecklistFilter`
``species``
    the target species' EBD rows and their roll-up to species level
``zerofill``
    detections and non-detections of every kept checklist
``readers``
    the whole-file readers (:func:`read_checklists`, :func:`read_detections`,
    :func:`load_observations`)
``dask_engine``
    the same steps on a Dask cluster (``engine="dask"``; imported only when used)
``atomic``
    temporary file beside the target, then a rename
"""

from __future__ import annotations

from typing import Any

from reserve.io.filters import (
    ChecklistFilter,
    deduplicate_groups,
    filter_complete,
    filter_dates,
    filter_effort,
    filter_protocol,
    filter_region,
    with_checklist_id,
)
from reserve.io.log import FilterLog
from reserve.io.parse import drop_malformed, parse_detections, parse_sampling
from reserve.io.readers import load_observations, read_checklists, read_detections
from reserve.io.species import NON_SPECIES_CATEGORIES, rollup_species, species_list
from reserve.io.text import (
    EBD_REQUIRED,
    SED_REQUIRED,
    iter_table,
    normalise_columns,
    read_header,
)
from reserve.io.zerofill import COUNT_PREFIX, DETECTED_PREFIX, link_detections, zero_fill

__all__ = [
    "COUNT_PREFIX",
    "DETECTED_PREFIX",
    "EBD_REQUIRED",
    "NON_SPECIES_CATEGORIES",
    "SED_REQUIRED",
    "ChecklistFilter",
    "DaskObservations",
    "FilterLog",
    "dask_client",
    "dask_observations",
    "deduplicate_groups",
    "drop_malformed",
    "filter_complete",
    "filter_dates",
    "filter_effort",
    "filter_protocol",
    "filter_region",
    "iter_table",
    "link_detections",
    "load_observations",
    "normalise_columns",
    "parse_detections",
    "parse_sampling",
    "read_checklists",
    "read_detections",
    "read_header",
    "rollup_species",
    "species_list",
    "with_checklist_id",
    "zero_fill",
]

_DASK_NAMES = ("DaskObservations", "dask_client", "dask_observations")


def __getattr__(name: str) -> Any:
    """The Dask engine's names, imported on first use (the module needs no Dask to load)."""
    if name in _DASK_NAMES:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.dask_engine"), name)
    raise AttributeError(f"module 'reserve.io' has no attribute {name!r}")
