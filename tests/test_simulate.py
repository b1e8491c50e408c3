"""Tests for reserve.paper.simulate: virtual species, virtual birders, the EBD/SED writers."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pyproj
import pytest
import shapely

from reserve.config import DEFAULT_REGION
from reserve.errors import InvalidInputError
from reserve.io import ChecklistFilter, load_observations, read_header
from reserve.paper.simulate import (
    EBD_HEADER,
    SED_HEADER,
    VIRTUAL_QUAIL,
    BirderModel,
    SpeciesModel,
    calibrate_intercept,
    occupancy_logit,
    region_grid,
    simulate_checklists,
    simulate_detections,
    simulate_occupancy,
    smooth_field,
    write_ebd,
    write_sed,
)

REGION = shapely.box(-83.3, 33.0, -83.0, 33.25)  # about 28 x 28 km: ~90 cells of 3 km
SPECIES = DEFAULT_REGION.species

#: Every checklist filter off (the simulated checklists are read as they are).
NO_FILTERS = ChecklistFilter(
    complete=False,
    protocols=None,
    max_hours=None,
    max_km=None,
    max_observers=None,
    max_speed_kmh=None,
)


@pytest.fixture(scope="module")
def landscape():
    grid, cells, region_xy = region_grid(REGION)
    rng = np.random.default_rng(0)
    occupied = rng.random(len(cells)) < 0.4
    attraction = rng.random(len(cells)) + 0.1
    return grid, cells, region_xy, occupied, attraction


def _simulate(landscape, seed=1, **kw):
    grid, cells, region_xy, occupied, attraction = landscape
    model = BirderModel(**{"n_checklists": 3000, "n_localities": 300, "n_observers": 200, **kw})
    return simulate_checklists(
        grid, cells, attraction, occupied, region_xy, REGION, np.random.default_rng(seed), model
    )


def _write(tmp_path, sed, ebd, tag=""):
    s = write_sed(sed, tmp_path / f"sed{tag}.txt.gz")
    e = write_ebd(ebd, sed, tmp_path / f"ebd{tag}.txt.gz")
    return e, s


def test_same_seed_same_bytes_other_seed_other_bytes(landscape, tmp_path):
    e1, s1 = _write(tmp_path, *_simulate(landscape, seed=3), tag="a")
    e2, s2 = _write(tmp_path, *_simulate(landscape, seed=3), tag="b")
    e3, s3 = _write(tmp_path, *_simulate(landscape, seed=4), tag="c")
    assert e1.read_bytes() == e2.read_bytes() and s1.read_bytes() == s2.read_bytes()
    assert e1.read_bytes() != e3.read_bytes() and s1.read_bytes() != s3.read_bytes()
    assert e1.read_bytes()[4:8] == b"\0\0\0\0"  # gzip mtime 0


def test_files_have_the_current_layout(landscape, tmp_path):
    ebd, sed = _write(tmp_path, *_simulate(landscape))
    with gzip.open(sed, "rt") as f:
        header, first = f.readline(), f.readline()
    assert header.rstrip("\n").split("\t") == [*SED_HEADER, ""]  # eBird's trailing tab
    assert len(first.rstrip("\n").split("\t")) == len(SED_HEADER) + 1
    with gzip.open(ebd, "rt") as f:
        assert f.readline().rstrip("\n").split("\t") == list(EBD_HEADER)
    assert len(EBD_HEADER) == 52 and len(SED_HEADER) == 33
    assert "protocol_type" in read_header(sed)  # PROTOCOL NAME mapped by the reader


def _expected_kept(sed: pd.DataFrame) -> pd.DataFrame:
    """The checklists the best-practice filters should keep, computed independently."""
    hours = sed["duration_minutes"] / 60
    km = sed["effort_distance_km"].fillna(0)
    ok = (
        sed["all_species_reported"]
        & sed["protocol_type"].isin(["Stationary", "Traveling"])
        & (hours <= 6)
        & (km <= 10)
        & (sed["number_observers"] <= 10)
        & (km / hours <= 100)
    )
    return sed[ok.to_numpy()]


def test_ingest_reader_reads_them_unchanged(landscape, tmp_path):
    sed, ebd = _simulate(landscape)
    ebd_path, sed_path = _write(tmp_path, sed, ebd)
    obs = load_observations(ebd_path, sed_path, SPECIES)
    kept = _expected_kept(sed)
    assert len(obs) == kept["checklist"].nunique()
    # A checklist is detected when any kept member has a row of the species.
    target = ebd[ebd["common_name"] == SPECIES]
    kept_ids = set(kept["sampling_event_identifier"])
    det_rows = target[target["sampling_event_identifier"].isin(kept_ids)]
    det_chk = sed.set_index("sampling_event_identifier").loc[
        det_rows["sampling_event_identifier"], "checklist"
    ]
    assert int(obs["detected"].sum()) == det_chk.nunique() > 0
    # The scientific name finds the same checklists.
    obs_sci = load_observations(ebd_path, sed_path, DEFAULT_REGION.scientific_name)
    assert obs_sci["detected"].sum() == obs["detected"].sum()


def test_no_detection_in_an_unoccupied_cell(landscape, tmp_path):
    grid, cells, _, occupied, _ = landscape
    sed, ebd = _simulate(landscape, n_checklists=6000)
    ebd_path, sed_path = _write(tmp_path, sed, ebd)
    obs = load_observations(ebd_path, sed_path, SPECIES, NO_FILTERS)
    to_grid = pyproj.Transformer.from_crs(4326, grid.crs, always_xy=True)
    x, y = to_grid.transform(obs["longitude"].to_numpy(), obs["latitude"].to_numpy())
    cell = grid.cell_of(x, y)
    occ = pd.Series(occupied, index=cells).reindex(cell).to_numpy()
    det = obs["detected"].to_numpy()
    assert det.sum() > 50
    assert occ[det].all()
    # Detection is imperfect: some checklists in occupied cells miss the species.
    assert (~det & occ).sum() > 50


def test_shares_are_what_the_model_was_told(landscape):
    m = {"p_incomplete": 0.2, "p_group": 0.15, "p_x": 0.07}
    sed, ebd = _simulate(landscape, n_checklists=20_000, **m)
    chk = sed.drop_duplicates("checklist")
    n = len(chk)

    def close(share, p, n):
        return abs(share - p) < 4 * np.sqrt(p * (1 - p) / n)

    assert n == 20_000
    assert close((~chk["all_species_reported"]).mean(), m["p_incomplete"], n)
    assert close((chk["group_identifier"] != "").mean(), m["p_group"], n)
    # X is drawn once per (checklist, species); group members repeat that row.
    ebd = ebd.assign(checklist=sed["checklist"].to_numpy()[ebd["event"].to_numpy()])
    rows = ebd.drop_duplicates(["checklist", "scientific_name"])
    assert close((rows["observation_count"] == "X").mean(), m["p_x"], len(rows))
    # Members of a group share the locality, date and observations, not the observer.
    grp = sed[sed["group_identifier"] != ""].groupby("group_identifier")
    assert (grp["locality_id"].nunique() == 1).all()
    assert (grp["observer_id"].nunique() == grp.size()).all()
    assert (grp["number_observers"].min() >= grp.size()).all()


def test_bad_birder_model_is_refused(landscape):
    with pytest.raises(InvalidInputError, match="p_group"):
        _simulate(landscape, p_group=1.5)
    with pytest.raises(InvalidInputError, match="protocols"):
        _simulate(landscape, protocols={"Traveling": 0.5})
    grid, cells, region_xy, occupied, attraction = landscape
    with pytest.raises(InvalidInputError, match="same length"):
        simulate_checklists(
            grid, cells, attraction[:-1], occupied, region_xy, REGION, np.random.default_rng(0)
        )


def test_intercept_gives_the_prevalence():
    eta = np.random.default_rng(0).normal(0, 2, 5000)
    for p in (0.15, 0.22, 0.3):
        b0 = calibrate_intercept(eta, p)
        assert np.mean(1 / (1 + np.exp(-(eta + b0)))) == pytest.approx(p, abs=1e-9)
    with pytest.raises(InvalidInputError, match="prevalence"):
        calibrate_intercept(eta, 1.0)


def test_species_prefers_forest_at_mid_elevation():
    m = SpeciesModel()
    elev = np.linspace(0, 1600, 81)
    frame = pd.DataFrame(
        {
            "elevation_mean": np.concatenate([elev, elev]),
            "landcover_deciduous_broadleaf_forests": np.r_[np.ones(81), np.zeros(81)],
            "landcover_croplands": np.r_[np.zeros(81), np.ones(81)],
        }
    )
    eta = occupancy_logit(frame, np.zeros(len(frame)), m)
    forest, crop = eta[:81], eta[81:]
    assert (forest > crop).all()
    peak = elev[np.argmax(forest)]
    assert abs(peak - m.elevation_optimum) <= 20  # not monotone in elevation: no linear model fits
    assert forest[0] < forest.max() and forest[-1] < forest.max()
    psi, occupied, _ = simulate_occupancy(frame, np.zeros(len(frame)), np.random.default_rng(0), m)
    assert psi.mean() == pytest.approx(m.prevalence, abs=1e-6)
    assert occupied.dtype == bool and 0 < occupied.sum() < len(frame)
    with pytest.raises(InvalidInputError, match="elevation_mean"):
        occupancy_logit(frame.drop(columns="elevation_mean"), np.zeros(len(frame)), m)


def test_random_effect_is_smooth_and_standardised():
    big_grid, big_cells, _ = region_grid(shapely.box(-84.0, 32.0, -82.0, 34.0))
    f = smooth_field(big_grid, big_cells, 12_000, np.random.default_rng(0))
    assert f.mean() == pytest.approx(0, abs=1e-9) and f.std() == pytest.approx(1, abs=1e-9)
    full = np.full(big_grid.n_cells, np.nan)
    full[big_cells] = f
    full = full.reshape(big_grid.n_rows, big_grid.n_cols)
    a, b = full[:, :-1].ravel(), full[:, 1:].ravel()
    ok = np.isfinite(a) & np.isfinite(b)
    assert np.corrcoef(a[ok], b[ok])[0, 1] > 0.8  # neighbours agree: spatially smooth


QUAIL = ("Virtual Quail", "Colinus simulatus")


def test_second_species_is_detected_on_the_same_checklists(landscape, tmp_path):
    _, cells, _, occupied, _ = landscape
    sed, ebd = _simulate(landscape, n_checklists=6000)
    occupied2 = ~occupied  # where the first species is absent
    rows = simulate_detections(
        sed, cells, occupied2, np.random.default_rng(5), species=QUAIL, taxonomic_order=7
    )
    assert len(rows) > 50 and list(rows.columns) == list(ebd.columns)
    again = simulate_detections(
        sed, cells, occupied2, np.random.default_rng(5), species=QUAIL, taxonomic_order=7
    )
    pd.testing.assert_frame_equal(rows, again)
    # only in cells the second species occupies; every member of a group carries the row
    cell = sed["cell_id"].to_numpy()[rows["event"].to_numpy()]
    assert pd.Series(occupied2, index=cells).loc[cell].all()
    hit = set(sed["checklist"].to_numpy()[rows["event"].to_numpy()])
    members = sed[sed["checklist"].isin(hit)]
    assert len(members) == len(rows)
    per_chk = rows.assign(chk=sed["checklist"].to_numpy()[rows["event"].to_numpy()])
    assert (per_chk.groupby("chk")["observation_count"].nunique() == 1).all()
    # Both species in one EBD (the second's rows appended): the reader separates them.
    both = pd.concat([ebd, rows], ignore_index=True)
    ebd_path, sed_path = _write(tmp_path, sed, both)
    obs = load_observations(ebd_path, sed_path, [SPECIES, QUAIL[0]], NO_FILTERS)
    first = load_observations(ebd_path, sed_path, SPECIES, NO_FILTERS)
    assert obs["detected"].tolist() == first["detected"].tolist()
    assert obs["detected__virtual_quail"].sum() == len(hit)
    assert not (obs["detected__virtual_quail"] & obs["detected__virtual_thrush"]).any()


def test_quail_prefers_open_low_land():
    elev = np.linspace(0, 1600, 81)
    frame = pd.DataFrame(
        {
            "elevation_mean": np.concatenate([elev, elev, elev]),
            "landcover_deciduous_broadleaf_forests": np.r_[np.ones(81), np.zeros(162)],
            "landcover_croplands": np.r_[np.zeros(81), np.ones(81), np.zeros(81)],
            "landcover_grasslands": np.r_[np.zeros(162), np.ones(81)],
        }
    )
    quail = occupancy_logit(frame, np.zeros(len(frame)), VIRTUAL_QUAIL)
    thrush = occupancy_logit(frame, np.zeros(len(frame)), SpeciesModel())
    forest, crop, grass = quail[:81], quail[81:162], quail[162:]
    assert (crop > forest).all() and (grass > forest).all()
    assert (thrush[:81] > thrush[81:162]).all()  # the thrush the other way round
    assert abs(elev[np.argmax(grass)] - VIRTUAL_QUAIL.elevation_optimum) <= 20
    assert grass[0] > grass[-1] + 5  # a lowland bird
