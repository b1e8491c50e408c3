"""Precision of a selection against the simulated species' true occupancy.

Only the default region (:mod:`reserve.default_region`) has a truth: the simulator
(:mod:`reserve.paper.simulate`) writes the true occupancy of every cell to its own file, which
selection never reads. :func:`evaluate_selection` reads it and reports how many of the selected
cells the species truly occupies.

Examples
--------
>>> import gzip, pathlib, tempfile
>>> truth = pathlib.Path(tempfile.mkdtemp()) / "truth.csv.gz"
>>> _ = truth.write_bytes(gzip.compress(b"cell_id,psi,occupied\\n1,0.9,1\\n2,0.2,0\\n3,0.7,1\\n"))
>>> r = evaluate_selection([1, 2], truth)
>>> r["precision"], r["n_occupied"], r["expected_precision"]
(0.5, 1, 0.55)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reserve.design import boolean_values
from reserve.errors import DataFileError, InvalidInputError

__all__ = [
    "evaluate_representation",
    "evaluate_selection",
    "read_representation",
    "read_selection",
    "read_truth",
]

_TRUTH_COLUMNS = ("cell_id", "psi", "occupied")


def _truth_path(
    truth_path: str | os.PathLike[str] | None, species: str | None
) -> str | os.PathLike[str]:
    """``truth_path``, or the embedded region's truth of ``species``; refuse both at once."""
    if truth_path is not None and species is not None:
        raise InvalidInputError(
            f"pass truth_path or species, not both (got {str(truth_path)!r} and {species!r}); "
            "species picks one of the embedded region's truth files"
        )
    if truth_path is None:
        from reserve.default_region import default_truth_path

        return default_truth_path(species)
    return truth_path


def read_truth(
    truth_path: str | os.PathLike[str] | None = None, species: str | None = None
) -> pd.DataFrame:
    """The truth table indexed by ``cell_id``: ``psi`` (probability) and ``occupied`` (bool).

    Parameters
    ----------
    truth_path : path-like, optional
        A CSV (plain or gzipped) with ``cell_id``, ``psi``, ``occupied``; default the embedded
        region's :func:`reserve.default_region.default_truth_path`.
    species : str, optional
        With no ``truth_path``: which of the embedded region's virtual species
        (``DEFAULT_REGION.species_all``, common or scientific name); default the first.
    """
    truth_path = _truth_path(truth_path, species)
    path = _input_file(truth_path, "--truth")
    try:
        table = pd.read_csv(path)
    except (ValueError, OSError, pd.errors.ParserError, EOFError) as exc:
        raise DataFileError(
            f"--truth {str(path)!r} is not a readable CSV ({exc}); pass the truth CSV "
            "(cell_id, psi, occupied) written by python -m pipelines.default_region"
        ) from None
    missing = [c for c in _TRUTH_COLUMNS if c not in table]
    if missing:
        raise DataFileError(
            f"--truth {str(path)!r} lacks columns {missing}; it needs cell_id, psi, occupied "
            "(as written by python -m pipelines.default_region)"
        )
    ids = _integer_ids(table["cell_id"], f"--truth {str(path)!r}")
    if ids.duplicated().any():
        raise DataFileError(f"--truth {str(path)!r} repeats cell ids; regenerate it")
    psi = pd.to_numeric(table["psi"], errors="coerce")
    if not psi.between(0.0, 1.0).all():
        raise DataFileError(
            f"--truth {str(path)!r}: column psi must hold probabilities in [0, 1]; "
            f"{int((~psi.between(0.0, 1.0)).sum())} rows do not. Regenerate the file"
        )
    occupied = boolean_values(table["occupied"], f"--truth {str(path)!r} column 'occupied'")
    return pd.DataFrame({"psi": psi.to_numpy(), "occupied": occupied}, index=ids.to_numpy())


def _input_file(path: Any, option: str) -> Path:
    """``path`` as a Path to an existing file; a folder or a missing file refused."""
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputError(f"{option} must be a path; received {path!r}")
    p = Path(path)
    if p.is_dir():
        raise DataFileError(f"{option} {str(p)!r} is a folder; pass a file")
    if not p.is_file():
        raise DataFileError(f"{option} {str(p)!r} does not exist; check the path")
    if p.stat().st_size == 0:
        raise DataFileError(f"{option} {str(p)!r} is an empty file; pass the file itself")
    return p


def _integer_ids(values: pd.Series, what: str) -> pd.Series:
    """Cell ids as int64; refused (naming a few) unless every value is a whole number."""
    num = pd.to_numeric(values, errors="coerce")
    bad = num.isna() | (num % 1 != 0)
    if bad.any():
        shown = sorted({str(v) for v in values[bad].tolist()})[:5]
        raise DataFileError(
            f"{what}: column cell_id must hold integer cell ids; it holds {shown}. Pass the "
            "file written for the embedded region"
        )
    return num.astype(np.int64)


def read_selection(path: str | os.PathLike[str]) -> np.ndarray:
    """Selected cell ids from a ``reserve select`` GeoPackage (layer ``selected``, ``cell_id``).

    A ``.csv`` or ``.txt`` file with a ``cell_id`` column (or one id per line) also works.
    """
    path = _input_file(path, "SELECTION")
    if path.suffix.lower() == ".gpkg":
        table = _selected_layer(path)
    else:
        try:
            table = pd.read_csv(path)
            if "cell_id" not in table:
                table = pd.read_csv(path, header=None, names=["cell_id"])
        except (ValueError, OSError, pd.errors.ParserError, EOFError) as exc:
            raise DataFileError(
                f"SELECTION {str(path)!r} is neither a GeoPackage nor a readable CSV ({exc}); "
                "pass the reserve.gpkg written by reserve select"
            ) from None
    if "cell_id" not in table:
        raise DataFileError(f"SELECTION {str(path)!r} has no column 'cell_id'")
    return _integer_ids(table["cell_id"], f"SELECTION {str(path)!r}").to_numpy()


def _selected_layer(path: Path) -> pd.DataFrame:
    """The ``selected`` layer of a GeoPackage (no geometry); anything else refused."""
    import pyogrio
    from pyogrio.errors import DataSourceError

    try:
        layers = [str(name) for name, _ in pyogrio.list_layers(path)]
        driver = pyogrio.read_info(path, layer=layers[0])["driver"] if layers else None
    except (DataSourceError, OSError, ValueError, IndexError):
        driver = None
    if driver != "GPKG":
        raise DataFileError(
            f"SELECTION {str(path)!r} is not a GeoPackage; pass the reserve.gpkg written by "
            "reserve select"
        )
    if "selected" not in layers:
        raise DataFileError(
            f"SELECTION {str(path)!r} has no layer 'selected' (layers: {layers}); pass the "
            "GeoPackage written by reserve select"
        )
    try:
        return pyogrio.read_dataframe(path, layer="selected", read_geometry=False)
    except (DataSourceError, OSError, ValueError) as exc:
        raise DataFileError(
            f"SELECTION {str(path)!r}: its layer 'selected' cannot be read ({exc}); pass the "
            "GeoPackage written by reserve select"
        ) from None


def evaluate_selection(
    selected_cell_ids: Sequence[int] | np.ndarray,
    truth_path: str | os.PathLike[str] | None = None,
    species: str | None = None,
) -> dict[str, Any]:
    """Precision of ``selected_cell_ids`` against the true occupancy.

    Parameters
    ----------
    selected_cell_ids : sequence of int
        The chosen cells (``cell_id`` of the ``planning_units`` layer), distinct.
    truth_path : path-like, optional
        Truth CSV; default the embedded region's.
    species : str, optional
        Without ``truth_path``: which embedded virtual species (see :func:`read_truth`).

    Returns
    -------
    dict
        ``k`` (cells selected), ``n_occupied`` (of which truly occupied), ``precision``
        (``n_occupied / k``), ``expected_precision`` (mean occupancy probability ``psi`` of the
        selection: the precision expected over redraws of the species from the same model),
        ``prevalence`` (share of all the region's cells occupied) and ``truth_path``.
    """
    try:
        ids = np.asarray(selected_cell_ids)
    except (TypeError, ValueError):
        ids = np.asarray([])
    if ids.ndim != 1 or ids.size == 0:
        raise InvalidInputError(
            f"selected_cell_ids must be a non-empty 1-D list of cell ids; got shape {ids.shape}"
        )
    if not np.issubdtype(ids.dtype, np.integer):
        values = pd.to_numeric(pd.Series(ids), errors="coerce").to_numpy(dtype=float)
        if ids.dtype == bool or not np.all(np.isfinite(values)) or np.any(values % 1):
            raise InvalidInputError(
                f"selected_cell_ids must be integers (cell_id values); received {ids[:5].tolist()}"
            )
        ids = values.astype(np.int64)
    uniq, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise InvalidInputError(
            f"selected_cell_ids repeats {uniq[counts > 1][:5].tolist()}; pass each cell once"
        )
    truth_path = _truth_path(truth_path, species)
    truth = read_truth(truth_path)
    known = np.isin(ids, truth.index.to_numpy())
    if not known.all():
        raise InvalidInputError(
            f"selected_cell_ids has {int((~known).sum())} id(s) not in the truth, e.g. "
            f"{ids[~known][:5].tolist()}; evaluate a selection made on the same region"
        )
    rows = truth.loc[ids]
    n_occ = int(rows["occupied"].sum())
    return {
        "k": int(ids.size),
        "n_occupied": n_occ,
        "precision": n_occ / ids.size,
        "expected_precision": round(float(rows["psi"].mean()), 6),
        "prevalence": round(float(truth["occupied"].mean()), 6),
        "truth_path": str(truth_path),
    }


def read_representation(path: str | os.PathLike[str]) -> pd.DataFrame | None:
    """The ``representation`` layer of a ``reserve select`` GeoPackage (several species
    planned together), or None when the file has none."""
    import pyogrio

    path = _input_file(path, "SELECTION")
    if path.suffix.lower() != ".gpkg":
        return None
    _selected_layer(path)  # a GeoPackage of reserve select's, or refused
    layers = [str(name) for name, _ in pyogrio.list_layers(path)]
    if "representation" not in layers:
        return None
    return pyogrio.read_dataframe(path, layer="representation", read_geometry=False)


def evaluate_representation(
    selected_cell_ids: Sequence[int] | np.ndarray, representation: pd.DataFrame
) -> pd.DataFrame:
    """Per species of a several-species plan: precision and whether its target was met.

    Parameters
    ----------
    selected_cell_ids : sequence of int
        The chosen cells.
    representation : pandas.DataFrame
        The run's ``representation`` layer (``species``, ``target``, ``expected``).

    Returns
    -------
    pandas.DataFrame
        One row per species: ``species``, ``k``, ``n_occupied`` (truly occupied chosen
        cells), ``precision``, ``expected_precision``, ``target`` (NaN: none), ``expected``
        (the plan's expectation) and ``met`` (``n_occupied >= target``; None without a
        target), against each species' truth of the embedded region.
    """
    rows = []
    for r in representation.itertuples(index=False):
        e = evaluate_selection(selected_cell_ids, species=str(r.species))
        target = float(r.target)
        met = bool(e["n_occupied"] >= target) if np.isfinite(target) else None
        rows.append(
            {
                "species": str(r.species),
                "k": e["k"],
                "n_occupied": e["n_occupied"],
                "precision": e["precision"],
                "expected_precision": e["expected_precision"],
                "target": target,
                "expected": float(r.expected),
                "met": met,
            }
        )
    return pd.DataFrame(rows)
