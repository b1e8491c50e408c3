"""Pick the rows of the target species out of an EBD and roll them up to species level."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from reserve.config import species_slug
from reserve.errors import InvalidInputError
from reserve.io.log import FilterLog
from reserve.io.parse import parse_detections

__all__ = [
    "NON_SPECIES_CATEGORIES",
    "no_row_error",
    "rollup_species",
    "species_key",
    "species_list",
    "species_rows",
    "tag_species",
]


#: Taxonomic categories that are not identified to one species and are dropped by the roll-up.
NON_SPECIES_CATEGORIES = ("spuh", "slash", "hybrid")


_PAREN = re.compile(r"\s*\(.*\)\s*$")


def species_list(species: str | Sequence[str]) -> tuple[str, ...]:
    """The species names of ``species`` (one name or several), checked.

    Every name must be a non-empty string. Several names must give distinct column suffixes
    (:func:`reserve.config.species_slug`), so the same species cannot be asked for twice.

    Examples
    --------
    >>> species_list("Wood Thrush"), species_list(["Wood Thrush", "Veery"])
    (('Wood Thrush',), ('Wood Thrush', 'Veery'))
    """
    if isinstance(species, str):
        if not species.strip():
            raise InvalidInputError(
                f"species={species!r}; pass a common or scientific name, e.g. 'Wood Thrush'"
            )
        return (species,)
    try:
        names = tuple(species)
    except TypeError:
        names = ()
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise InvalidInputError(
            f"species={species!r}; pass a common or scientific name, or a list of them, e.g. "
            "['Wood Thrush', 'Veery']"
        )
    seen: dict[str, str] = {}
    for name in names:
        slug = species_slug(name)
        if not slug:
            raise InvalidInputError(
                f"species name {name!r} has no letter or digit; pass a common or scientific name"
            )
        if slug in seen:
            what = "is given twice" if seen[slug] == name else f"and {name!r} are the same name"
            raise InvalidInputError(
                f"species {seen[slug]!r} {what} (both would be column suffix {slug!r}); "
                "pass each species once"
            )
        seen[slug] = name
    return names


def species_key(name: str) -> str:
    """The lower-case, single-spaced form of a species name matched against the EBD."""
    return " ".join(name.split()).lower()


def rollup_species(detections: pd.DataFrame) -> pd.DataFrame:
    """Roll EBD rows up to species: drop spuh, slash and hybrid; merge subspecies rows.

    Precondition: parsed EBD rows (:func:`reserve.io.parse_detections`): ``category``,
    ``common_name``, ``scientific_name``, ``observation_count``, ``detected``,
    ``sampling_event_identifier``.
    Subspecies, forms, intergrades and domestic types count as their species; the species name is
    the scientific binomial (first two words) and the common name without any parenthesis. Rows
    of the same species on the same checklist become one: their counts add up, and an ``X`` on
    any of them makes the total unknown (NaN).

    Examples
    --------
    >>> t = pd.DataFrame({"sampling_event_identifier": ["S1", "S1", "S1"],
    ...     "category": ["issf", "species", "slash"],
    ...     "common_name": ["Yellow-rumped Warbler"] * 2 + ["Yellow-rumped/Palm Warbler"],
    ...     "scientific_name": ["Setophaga coronata", "Setophaga coronata",
    ...                         "Setophaga coronata/palmarum"],
    ...     "observation_count": [2.0, 3.0, 1.0], "detected": [True, True, True]})
    >>> rollup_species(t)[["scientific_name", "observation_count"]].values.tolist()
    [['Setophaga coronata', 5.0]]
    """
    keep = ~detections["category"].isin(NON_SPECIES_CATEGORIES).to_numpy()
    rows = detections[keep]
    if rows.empty:
        return rows.reset_index(drop=True)
    sci = _binomial(rows["scientific_name"])
    common = _strip_paren(rows["common_name"])
    rows = rows.assign(
        scientific_name=sci,
        common_name=common,
        category="species",
        _unknown=rows["observation_count"].isna().to_numpy(),
    )
    grouped = rows.groupby(["sampling_event_identifier", "scientific_name"], sort=True)
    out = grouped.agg(
        common_name=("common_name", "first"),
        detected=("detected", "any"),
        observation_count=("observation_count", "sum"),
        unknown=("_unknown", "any"),
    )
    out["observation_count"] = out["observation_count"].where(~out.pop("unknown"), np.nan)
    out["category"] = "species"
    return out.reset_index()[list(detections.columns)]


def _binomial(names: pd.Series) -> pd.Series:
    uniq = pd.unique(names.to_numpy())
    mapped = {u: " ".join(str(u).split()[:2]) for u in uniq}
    return names.map(mapped)


def _strip_paren(names: pd.Series) -> pd.Series:
    uniq = pd.unique(names.to_numpy())
    mapped = {u: _PAREN.sub("", str(u)) for u in uniq}
    return names.map(mapped)


def species_rows(
    text: pd.DataFrame, log: FilterLog, targets: tuple[str, ...], names: dict[str, str]
) -> pd.DataFrame:
    """Parse the EBD rows of one chunk that may belong to ``targets`` (lower-case names)."""
    log.record("ebd", "read", kept=len(text), dropped=0)
    sci = text["scientific_name"]
    common = text["common_name"]
    u_sci = pd.unique(sci.dropna().to_numpy())
    u_common = pd.unique(common.dropna().to_numpy())
    # Roll names up on the distinct values only: a chunk of a million rows has a few thousand.
    sci_key = {u: " ".join(str(u).split()[:2]) for u in u_sci}
    common_key = {u: _PAREN.sub("", str(u)) for u in u_common}
    for u in u_common:
        names.setdefault(common_key[u].lower(), common_key[u])
    for u in u_sci:
        names.setdefault(sci_key[u].lower(), sci_key[u])
    hit_sci = [u for u in u_sci if sci_key[u].lower() in targets]
    hit_common = [u for u in u_common if common_key[u].lower() in targets]
    mask = sci.isin(hit_sci).to_numpy() | common.isin(hit_common).to_numpy()
    log.record("ebd", "species", kept=int(mask.sum()), dropped=int((~mask).sum()))
    rows = text[mask]
    parsed = parse_detections(rows)
    log.record("ebd", "malformed", kept=len(parsed), dropped=len(rows) - len(parsed))
    return parsed


def no_row_error(species: str, names: dict[str, str], path: Path) -> InvalidInputError:
    """The error for a species no row of the EBD is of, naming close names seen in the file."""
    target = species_key(species)
    close = difflib.get_close_matches(target, list(names), n=3, cutoff=0.6)
    hint = f" Close names in the file: {', '.join(names[c] for c in close)}." if close else ""
    return InvalidInputError(
        f"species={species!r} matches no row of EBD file {str(path)!r} "
        f"({len(names)} distinct names seen).{hint} Fix: pass a common or scientific name "
        "as spelled in the file."
    )


def tag_species(rows: pd.DataFrame, species: tuple[str, ...], log: FilterLog) -> pd.DataFrame:
    """Tag rolled-up EBD rows with the name asked for (column ``species``); record the counts.

    Refuses two names of the same species (a common and a scientific name, say): a row that
    matches both.
    """
    sci = rows["scientific_name"].str.lower().to_numpy()
    common = rows["common_name"].str.lower().to_numpy()
    hits = np.zeros((len(rows), len(species)), dtype=bool)
    for j, name in enumerate(species):
        hits[:, j] = (sci == species_key(name)) | (common == species_key(name))
    both = np.flatnonzero(hits.sum(axis=1) > 1)
    if both.size:
        i, j = np.flatnonzero(hits[both[0]])[:2]
        raise InvalidInputError(
            f"species {species[i]!r} and {species[j]!r} are the same species "
            f"({rows['common_name'].iloc[both[0]]}, {rows['scientific_name'].iloc[both[0]]}); "
            "pass each species once"
        )
    which = hits.argmax(axis=1)
    keep = hits.any(axis=1)
    for j, name in enumerate(species):
        n = int((keep & (which == j)).sum())
        log.record("ebd", f"species:{species_slug(name)}", kept=n, dropped=0, detail=name)
    tags = np.asarray(species, dtype=object)[which[keep]]
    return rows[keep].assign(species=tags)
