"""Zero-fill: a kept checklist with no EBD row of the species is a non-detection."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from reserve.config import species_slug
from reserve.errors import InvalidInputError
from reserve.io.log import FilterLog

__all__ = [
    "COUNT_PREFIX",
    "DETECTED_PREFIX",
    "UNLINKED",
    "link_detections",
    "log_zero_fill",
    "note_unlinked",
    "zero_fill",
]


#: Per-species columns of zero-filled checklists when several species are read:
#: ``detected__<slug>`` and ``observation_count__<slug>``.
DETECTED_PREFIX = "detected__"


COUNT_PREFIX = "observation_count__"


def link_detections(detections: pd.DataFrame, members: pd.DataFrame) -> pd.DataFrame:
    """Attach ``checklist_id`` to EBD rows through the SED members; drop rows of no kept member.

    Precondition: ``members`` has ``sampling_event_identifier`` and ``checklist_id`` for every
    sampling event that passed the filters (before group de-duplication, so a detection on any
    member of a shared checklist counts for the group).
    """
    # an event repeated in the SED is one member (its rows are refused later if they differ)
    once = members.drop_duplicates("sampling_event_identifier")
    table = once.set_index("sampling_event_identifier")["checklist_id"]
    ids = detections["sampling_event_identifier"].map(table)
    out = detections.assign(checklist_id=ids)
    return out[ids.notna().to_numpy()]


#: The detail of step ``ebd:in_kept_checklists`` when no EBD row joins (:func:`note_unlinked`).
UNLINKED = "none joined a kept SED checklist"


def note_unlinked(log: FilterLog, example: str | None = None) -> bool:
    """Say in ``log`` when no EBD row of the species joins a checklist kept from the SED.

    Every checklist is then a non-detection, which is right only when the filters drop every
    checklist with the species; when the EBD and the SED come from different downloads it is
    a silent wrong result. The ``ebd:in_kept_checklists`` step (of :func:`link_detections`)
    then gets the detail ``none joined`` and ``example``, one of the EBD's sampling events,
    for ``reserve ingest`` to warn with.

    Returns
    -------
    bool
        Whether no row joined.
    """
    kept, dropped = log.counts.get(("ebd", "in_kept_checklists"), [0, 0])
    if kept > 0 or dropped == 0:
        return False
    shown = f", e.g. {example}" if example else ""
    log.details[("ebd", "in_kept_checklists")] = f"{UNLINKED}{shown}"
    return True


def zero_fill(
    checklists: pd.DataFrame,
    detections: pd.DataFrame,
    species: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Mark every checklist as a detection or a non-detection of the target species.

    Precondition: ``checklists`` unique on ``checklist_id``; ``detections`` are the rolled-up
    EBD rows of *one* species with a ``checklist_id`` (:func:`link_detections`). A checklist
    with no row for the species is a non-detection (count 0); an ``X`` count is a detection with
    an unknown (NaN) count. Shared checklists with rows from several members take the largest
    count (members count the same birds).

    With ``species`` (names, as in :func:`reserve.io.species_list`), ``detections`` hold the rows of
    several species tagged by a ``species`` column, and each is zero-filled against the same
    checklists: ``detected__<slug>`` and ``observation_count__<slug>`` for every species;
    ``detected`` and ``observation_count`` repeat the first species'.

    Examples
    --------
    >>> c = pd.DataFrame({"checklist_id": ["S1", "S2", "S3"]})
    >>> d = pd.DataFrame({"checklist_id": ["S1", "S3"], "observation_count": [2.0, np.nan],
    ...                   "detected": [True, True]})
    >>> z = zero_fill(c, d)
    >>> z.detected.tolist(), z.observation_count.tolist()
    ([True, False, True], [2.0, 0.0, nan])
    >>> d["species"] = ["Veery", "Wood Thrush"]
    >>> z = zero_fill(c, d, species=["Wood Thrush", "Veery"])
    >>> z.detected__wood_thrush.tolist(), z.detected__veery.tolist()
    ([False, False, True], [True, False, False])
    """
    if checklists["checklist_id"].duplicated().any():
        raise InvalidInputError(
            "zero_fill: checklists has duplicated checklist_id values; run deduplicate_groups "
            "(or with_checklist_id) first"
        )
    ids = checklists["checklist_id"]
    out = checklists.copy()
    if species is None:
        out["detected"], out["observation_count"] = _fill(ids, detections)
        return out
    tags = detections["species"].to_numpy()
    for j, name in enumerate(species):
        detected, count = _fill(ids, detections[tags == name])
        if j == 0:
            out["detected"], out["observation_count"] = detected, count
        slug = species_slug(name)
        out[DETECTED_PREFIX + slug], out[COUNT_PREFIX + slug] = detected, count
    return out


def _fill(ids: pd.Series, detections: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``detected`` and ``observation_count`` of every checklist id (see :func:`zero_fill`)."""
    det = detections[detections["detected"].to_numpy(dtype=bool)]
    grouped = det.groupby("checklist_id", sort=False)["observation_count"]
    count = grouped.max()  # NaN only when every member's count is an X
    detected = ids.isin(count.index).to_numpy()
    filled = ids.map(count).to_numpy(dtype=float)
    return detected, np.where(detected, filled, 0.0)


def log_zero_fill(log: FilterLog, filled: pd.DataFrame, species: str | Sequence[str]) -> None:
    """Record the zero-filled checklists and the detections of every species in ``log``."""
    several = not isinstance(species, str)
    detail = "; ".join(species) if several else species
    log.record("checklists", "zero_fill", kept=len(filled), dropped=0, detail=detail)
    log.record(
        "checklists",
        "detections",
        kept=int(filled["detected"].sum()),
        dropped=int((~filled["detected"]).sum()),
        detail="kept = detections, dropped = non-detections"
        + (f" (of {species[0]})" if several else ""),
    )
    for name in species if several else ():
        detected = filled[DETECTED_PREFIX + species_slug(name)].to_numpy(dtype=bool)
        log.record(
            "checklists",
            f"detections:{species_slug(name)}",
            kept=int(detected.sum()),
            dropped=int((~detected).sum()),
            detail=f"{name}: kept = detections, dropped = non-detections",
        )
