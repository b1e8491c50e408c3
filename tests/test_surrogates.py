"""BCR 27 surrogates: the pivot collapse, a synthetic folder end to end, the real one if present.

Every table here is made up in code; no eBird row is stored in the project. The test on the
real folder (``../shared/real/ebird-bcr27``) is skipped when that folder is absent.
"""

import shutil

import geopandas as gpd
import numpy as np
import pandas as pd
import pyproj
import pytest
import rasterio
import shapely
from rasterio.transform import from_origin

from reserve.errors import DataFileError
from reserve.grid import Grid, equal_area_crs
from reserve.paper.surrogates import (
    SURROGATES,
    bcr27_instance,
    collapse_pivot,
    default_bcr27_dir,
    read_bcr27_checklists,
    surrogate_splits,
)

SPECIES = ["norbob", "whiibi", "woothr"]
HEADER = [
    "checklist_id",
    "observer_id",
    "sampling_event_identifier",
    "species_observed",
    "state_code",
    "locality_id",
    "latitude",
    "longitude",
    "protocol_type",
    "all_species_reported",
    "observation_date",
    "time_observations_started",
    "duration_minutes",
    "effort_distance_km",
    "number_observers",
    *SPECIES,
    "bbs",
]


def _value(v):
    if isinstance(v, bool | np.bool_):
        return "TRUE" if v else "FALSE"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, float | np.floating):
        return "NA" if np.isnan(v) else repr(float(v))
    return str(int(v))


def write_checklists(path, rows):
    """The files' layout: space-separated, quoted header and text, TRUE/FALSE, NA."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [" ".join(f'"{h}"' for h in HEADER)]
    lines += [" ".join(_value(r[h]) for h in HEADER) for r in rows]
    path.write_text("\n".join(lines) + "\n")


def _row(cid, lon, lat, counts, observed=False, **kw):
    row = dict(
        checklist_id=cid,
        observer_id="obs1",
        sampling_event_identifier=cid,
        species_observed=observed,
        state_code="US-GA",
        locality_id="L1",
        latitude=lat,
        longitude=lon,
        protocol_type="Traveling",
        all_species_reported=True,
        observation_date="2018-05-20",
        time_observations_started=7.5,
        duration_minutes=60,
        effort_distance_km=1.0,
        number_observers=1,
        bbs=0,
    )
    row.update(dict(zip(SPECIES, counts, strict=True)))
    row.update(kw)
    return row


NAN = float("nan")


def test_collapse_pivot_six_rows(tmp_path):
    # S1: woothr counted (TRUE row), others 0 (FALSE row); S2: woothr an "X" (NA on both rows);
    # S3: nothing; S4: whiibi "X" on its only row.
    rows = [
        _row("S1", -83.9, 32.1, [NAN, NAN, 3.0], observed=True),
        _row("S1", -83.9, 32.1, [0.0, 0.0, NAN]),
        _row("S2", -83.8, 32.1, [NAN, NAN, NAN], observed=True),
        _row("S2", -83.8, 32.1, [0.0, 0.0, NAN]),
        _row("S3", -83.8, 32.2, [0.0, 0.0, 0.0]),
        _row("S4", -83.7, 32.2, [0.0, NAN, 0.0], observed=True),
    ]
    path = tmp_path / "checklists.txt"
    write_checklists(path, rows)
    table = read_bcr27_checklists([path])
    assert table["checklist_id"].tolist() == ["S1", "S2", "S3", "S4"]
    assert "species_observed" not in table.columns
    assert table["woothr"].tolist()[0] == 3.0 and np.isnan(table["woothr"].tolist()[1])
    assert table["norbob"].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert np.isnan(table["whiibi"].tolist()[3])
    assert table["longitude"].tolist() == [-83.9, -83.8, -83.8, -83.7]
    same = collapse_pivot(pd.DataFrame(rows).iloc[::-1])  # row order does not matter
    pd.testing.assert_frame_equal(same[table.columns], table, check_dtype=False)
    write_checklists(tmp_path / "again.txt", rows[:2])
    with pytest.raises(DataFileError, match="more than one file"):
        read_bcr27_checklists([path, tmp_path / "again.txt"])


# A synthetic BCR 27 folder: a 0.3 x 0.27 degree box in Georgia, the west third "forest".
BOX = (-84.0, 32.0, -83.7, 32.27)
FOREST = (-84.0, 32.0, -83.9, 32.27)


def make_fake_bcr27(root, n=700, seed=0, drop_candidate_detections=False):
    """Write a folder with the real one's layout, every value invented; return its path."""
    rng = np.random.default_rng(seed)
    (root / "boundaries").mkdir(parents=True)
    gpd.GeoDataFrame({"bcr_code": [27]}, geometry=[shapely.box(*BOX)], crs="EPSG:4269").to_file(
        root / "boundaries" / "gis-data_bcr27.gpkg", layer="bcr", driver="GPKG"
    )
    public = root / "public_land" / "usfs_ranger_districts_bcr27"
    public.mkdir(parents=True)
    gpd.GeoDataFrame({"name": ["fake"]}, geometry=[shapely.box(*FOREST)], crs="EPSG:4326").to_file(
        public / "fake_ranger_district.geojson", driver="GeoJSON"
    )
    lc = root / "landcover"
    lc.mkdir()
    (lc / "mcd12q1_umd_classes.csv").write_text(
        "class,name,description\n0,Water bodies,w\n1,Mixed Forests,f\n2,Croplands,c\n"
        "255,Unclassified,u\n"
    )
    for year in (2017, 2018):
        classes = rng.choice([0, 1, 2], size=(100, 100), p=[0.1, 0.5, 0.4]).astype("uint8")
        classes[:50] = np.where(classes[:50] == 2, 1, classes[:50])  # the north is forest
        with rasterio.open(
            lc / f"modis_mcd12q1_umd_{year}_bcr27.tif",
            "w",
            driver="GTiff",
            width=100,
            height=100,
            count=1,
            dtype="uint8",
            nodata=255,
            crs="EPSG:4326",
            transform=from_origin(-84.1, 32.4, 0.005, 0.005),
        ) as dst:
            dst.write(classes, 1)
    for year, name in (
        (2018, "train_data_mayjune_201718_bcr27.txt"),
        (2017, "test_data_2017_mayjune_201718_bcr27.txt"),
    ):
        lon = rng.uniform(BOX[0] - 0.02, BOX[2], n)  # a few fall outside the region
        lat = rng.uniform(BOX[1], BOX[3], n)
        p = np.where(lat > 32.13, 0.35, 0.08)
        rows = []
        for i in range(n):
            cid = f"S{year}{i:04d}"
            counts = [float(c) for c in (rng.random(3) < p[i]) * rng.integers(1, 4, 3)]
            if drop_candidate_detections and lon[i] > FOREST[2] + 0.02:
                counts = [0.0, 0.0, 0.0]
            if counts[2] > 0 and i % 5 == 0:
                counts[2] = NAN  # an "X"
            kw = dict(observation_date=f"{year}-06-01")
            if i % 97 == 0:
                kw.update(duration_minutes=1, effort_distance_km=5.0)  # 300 km/h: dropped
            found = [c != 0 for c in counts]
            if any(found) and i % 2 == 0:  # the pivot quirk: a TRUE and a FALSE row
                rows.append(
                    _row(
                        cid,
                        lon[i],
                        lat[i],
                        [c if f else NAN for c, f in zip(counts, found, strict=True)],
                        observed=True,
                        **kw,
                    )
                )
                rows.append(
                    _row(
                        cid,
                        lon[i],
                        lat[i],
                        [NAN if f else c for c, f in zip(counts, found, strict=True)],
                        **kw,
                    )
                )
            else:
                rows.append(_row(cid, lon[i], lat[i], counts, observed=any(found), **kw))
        write_checklists(root / "checklists" / name, rows)
    return root


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    return make_fake_bcr27(tmp_path_factory.mktemp("bcr27"))


def test_fake_folder_cells_roles_and_labels(fake):
    inst = bcr27_instance("woothr", fake)
    c = inst.counts
    lab = inst.y != -1
    assert c["labelled"] == lab.sum() > 5 and c["candidates"] == (~lab).sum() > 20
    assert c["labelled"] + c["candidates"] + c["cells_no_features"] == c["cells_surveyed"]
    assert (inst.public_fraction[lab] > 0.5).all() and (inst.public_fraction[~lab] <= 0.5).all()
    assert lab[: c["labelled"]].all()  # labelled rows first
    assert c["checklists_read"] == 1400
    assert c["checklists_read"] - c["checklists_kept"] >= 2 * 8  # speed filter + region
    assert inst.X.shape == (lab.size, 3) and np.allclose(inst.X.mean(axis=0), 0.0)
    assert np.allclose(inst.features.sum(axis=1), 1.0)
    # labels by an independent route: checklists read with pandas, gridded, any detection
    raw = pd.concat([pd.read_csv(p, sep=" ") for p in sorted((fake / "checklists").glob("*.txt"))])
    per = raw.groupby("checklist_id").agg(
        lon=("longitude", "first"),
        lat=("latitude", "first"),
        minutes=("duration_minutes", "first"),
        km=("effort_distance_km", "first"),
        det=("woothr", lambda v: bool(v.isna().all() or (v > 0).any())),
    )
    per = per[(per["km"] / (per["minutes"] / 60) <= 100)]
    per = per[(per["lon"] >= BOX[0]) & (per["lon"] <= BOX[2])]
    crs = equal_area_crs((BOX[0] + BOX[2]) / 2, (BOX[1] + BOX[3]) / 2)
    to_xy = pyproj.Transformer.from_crs(4326, crs, always_xy=True)
    ring = shapely.segmentize(shapely.box(*BOX), 0.05)
    region = shapely.transform(ring, lambda c: np.column_stack(to_xy.transform(*c.T)))
    grid = Grid.covering(region.bounds, cell_size=3000.0, crs=crs)
    per["cell"] = grid.cell_of(*to_xy.transform(per["lon"].to_numpy(), per["lat"].to_numpy()))
    cells = per.groupby("cell")["det"].max().astype(int)
    assert len(cells) == c["cells_surveyed"]
    want = cells.loc[inst.cell_ids].to_numpy()
    np.testing.assert_array_equal(want[lab], inst.y[lab])
    np.testing.assert_array_equal(want[~lab], inst.y_candidates)
    assert 2 <= inst.y[lab].sum() <= lab.sum() - 2


def test_deterministic_and_splits_are_disjoint_folds(fake):
    a = bcr27_instance("norbob", fake)
    b = bcr27_instance("norbob", str(fake))
    for field in ("X", "y", "y_candidates", "cell_ids"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    s1 = surrogate_splits(a, 3, random_state=4)
    s2 = surrogate_splits(a, 3, random_state=4)
    assert all(np.array_equal(p[0], q[0]) and p[3] == q[3] for p, q in zip(s1, s2, strict=True))
    n_lab = a.n_labelled
    assert sum(p[2].size for p in s1) == a.n_candidates
    assert sorted(np.concatenate([p[2] for p in s1])) == sorted(a.y_candidates)
    for Xa, yf, yh, k in s1:
        np.testing.assert_array_equal(yf[:n_lab], a.y[:n_lab])
        assert (yf[n_lab:] == -1).all() and yh.size == (yf == -1).sum()
        assert k == max(1, round(0.05 * yh.size))
        assert np.allclose(Xa.mean(axis=0), 0.0)
    other = surrogate_splits(a, 3, random_state=5)
    assert any(not np.array_equal(p[2], q[2]) for p, q in zip(s1, other, strict=True))


def test_candidate_labels_never_reach_the_inputs(tmp_path, fake):
    """Erasing every detection outside the forest changes the held-out labels only."""
    shutil.copytree(fake, tmp_path / "same")
    erased = make_fake_bcr27(tmp_path / "erased", drop_candidate_detections=True)
    base = bcr27_instance("woothr", tmp_path / "same")
    other = bcr27_instance("woothr", erased)
    assert base.y_candidates.sum() > 0
    np.testing.assert_array_equal(base.cell_ids, other.cell_ids)
    np.testing.assert_array_equal(base.X, other.X)
    np.testing.assert_array_equal(base.y, other.y)
    assert not np.array_equal(base.y_candidates, other.y_candidates)


def test_absent_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("RESERVE_BCR27_DIR", str(tmp_path / "nowhere"))
    assert default_bcr27_dir() is None
    with pytest.raises(DataFileError, match="absent"):
        bcr27_instance("woothr")
    with pytest.raises(DataFileError, match="absent"):
        bcr27_instance("woothr", tmp_path / "nowhere")


REAL = default_bcr27_dir()


@pytest.mark.skipif(REAL is None, reason="../shared/real/ebird-bcr27 (eBird data) is absent")
@pytest.mark.parametrize("name", list(SURROGATES))
def test_real_instances_sizes(name):
    inst = bcr27_instance(SURROGATES[name], REAL)
    c = inst.counts
    assert c["checklists_read"] == 36330  # SOURCES.md: 20,492 + 15,838 checklists
    assert 25_000 < c["checklists_kept"] < 36330
    assert 100 < c["labelled"] < 1000 and 2 <= c["labelled_positive"] < c["labelled"]
    assert c["candidates"] > 10 * c["labelled"] and 0 < c["candidate_positive"] < c["candidates"]
    assert inst.X.shape[1] == 16 and len(inst.feature_names) == 16
    assert (inst.public_fraction[inst.y != -1] > 0.5).all()
    assert set(np.unique(inst.y)) == {-1, 0, 1}
