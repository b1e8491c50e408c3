"""Tests for reserve.io: reading both layouts, every best-practice step, real auk files."""

from __future__ import annotations

import csv
import gzip
import zipfile
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

from reserve import io as ebird
from reserve.errors import DataFileError, InvalidInputError
from reserve.io import ChecklistFilter, dask_engine

SHARED = Path(__file__).resolve().parents[2] / "shared" / "real" / "ebird-bcr27"

# Column names of the two layouts (names only; no eBird data).
NEW_SED = (
    "LAST EDITED DATE|COUNTRY|COUNTRY CODE|STATE|STATE CODE|COUNTY|COUNTY CODE|IBA CODE|BCR CODE|"
    "USFWS CODE|ATLAS BLOCK|LOCALITY|LOCALITY ID|LOCALITY TYPE|LATITUDE|LONGITUDE|"
    "OBSERVATION DATE|TIME OBSERVATIONS STARTED|OBSERVER ID|OBSERVER ORCID ID|"
    "SAMPLING EVENT IDENTIFIER|OBSERVATION TYPE|PROTOCOL NAME|PROTOCOL CODE|PROJECT NAMES|"
    "PROJECT IDENTIFIERS|DURATION MINUTES|EFFORT DISTANCE KM|EFFORT AREA HA|NUMBER OBSERVERS|"
    "ALL SPECIES REPORTED|GROUP IDENTIFIER|CHECKLIST COMMENTS"
).split("|")
OLD_SED = (
    "LAST EDITED DATE|COUNTRY|COUNTRY CODE|STATE|STATE CODE|COUNTY|COUNTY CODE|IBA CODE|BCR CODE|"
    "USFWS CODE|ATLAS BLOCK|LOCALITY ID| LOCALITY TYPE|LATITUDE|LONGITUDE|OBSERVATION DATE|"
    "TIME OBSERVATIONS STARTED|OBSERVER ID|SAMPLING EVENT IDENTIFIER|PROTOCOL TYPE|PROTOCOL CODE|"
    "PROJECT CODE|DURATION MINUTES|EFFORT DISTANCE KM|EFFORT AREA HA|NUMBER OBSERVERS|"
    "ALL SPECIES REPORTED|GROUP IDENTIFIER|TRIP COMMENTS"
).split("|")
NEW_EBD = (
    "GLOBAL UNIQUE IDENTIFIER|LAST EDITED DATE|TAXONOMIC ORDER|CATEGORY|TAXON CONCEPT ID|"
    "COMMON NAME|SCIENTIFIC NAME|SUBSPECIES COMMON NAME|SUBSPECIES SCIENTIFIC NAME|EXOTIC CODE|"
    "OBSERVATION COUNT|BREEDING CODE|BREEDING CATEGORY|BEHAVIOR CODE|AGE/SEX|COUNTRY|"
    "COUNTRY CODE|STATE|STATE CODE|COUNTY|COUNTY CODE|IBA CODE|BCR CODE|USFWS CODE|ATLAS BLOCK|"
    "LOCALITY|LOCALITY ID|LOCALITY TYPE|LATITUDE|LONGITUDE|OBSERVATION DATE|"
    "TIME OBSERVATIONS STARTED|OBSERVER ID|OBSERVER ORCID ID|SAMPLING EVENT IDENTIFIER|"
    "OBSERVATION TYPE|PROTOCOL NAME|PROTOCOL CODE|PROJECT NAMES|PROJECT IDENTIFIERS|"
    "DURATION MINUTES|EFFORT DISTANCE KM|EFFORT AREA HA|NUMBER OBSERVERS|ALL SPECIES REPORTED|"
    "GROUP IDENTIFIER|HAS MEDIA|APPROVED|REVIEWED|REASON|CHECKLIST COMMENTS|SPECIES COMMENTS"
).split("|")
OLD_EBD = (
    "GLOBAL UNIQUE IDENTIFIER|LAST EDITED DATE|TAXONOMIC ORDER|CATEGORY|COMMON NAME|"
    "SCIENTIFIC NAME|SUBSPECIES COMMON NAME|SUBSPECIES SCIENTIFIC NAME|OBSERVATION COUNT|"
    "BREEDING BIRD ATLAS CODE|BREEDING BIRD ATLAS CATEGORY|AGE/SEX|COUNTRY|COUNTRY CODE|STATE|"
    "STATE CODE|COUNTY|COUNTY CODE|IBA CODE|BCR CODE|USFWS CODE|ATLAS BLOCK|LOCALITY|"
    "LOCALITY ID| LOCALITY TYPE|LATITUDE|LONGITUDE|OBSERVATION DATE|TIME OBSERVATIONS STARTED|"
    "OBSERVER ID|SAMPLING EVENT IDENTIFIER|PROTOCOL TYPE|PROTOCOL CODE|PROJECT CODE|"
    "DURATION MINUTES|EFFORT DISTANCE KM|EFFORT AREA HA|NUMBER OBSERVERS|ALL SPECIES REPORTED|"
    "GROUP IDENTIFIER|HAS MEDIA|APPROVED|REVIEWED|REASON|TRIP COMMENTS|SPECIES COMMENTS"
).split("|")

_FIELD = {  # canonical key -> header name in either layout
    "id": ("SAMPLING EVENT IDENTIFIER",),
    "lat": ("LATITUDE",),
    "lon": ("LONGITUDE",),
    "date": ("OBSERVATION DATE",),
    "time": ("TIME OBSERVATIONS STARTED",),
    "protocol": ("PROTOCOL NAME", "PROTOCOL TYPE"),
    "minutes": ("DURATION MINUTES",),
    "km": ("EFFORT DISTANCE KM",),
    "observers": ("NUMBER OBSERVERS",),
    "complete": ("ALL SPECIES REPORTED",),
    "group": ("GROUP IDENTIFIER",),
    "category": ("CATEGORY",),
    "common": ("COMMON NAME",),
    "sci": ("SCIENTIFIC NAME",),
    "count": ("OBSERVATION COUNT",),
    "comment": ("CHECKLIST COMMENTS", "TRIP COMMENTS"),
}


def checklist(id_, **kw):
    """A synthetic checklist that passes every default filter unless told otherwise."""
    row = {
        "id": id_,
        "lat": "35.0",
        "lon": "-80.0",
        "date": "2018-05-15",
        "time": "07:00:00",
        "protocol": "Traveling",
        "minutes": "60",
        "km": "1.5",
        "observers": "1",
        "complete": "1",
        "group": "",
    }
    row.update({k: str(v) for k, v in kw.items()})
    return row


def observation(id_, common="Wood Thrush", sci="Hylocichla mustelina", count="1", **kw):
    """A synthetic EBD row for checklist ``id_``."""
    row = checklist(id_, **{k: v for k, v in kw.items() if k not in ("category",)})
    row.update(common=common, sci=sci, count=str(count), category=kw.get("category", "species"))
    return row


def lines(header, rows, trailing_tab=False):
    """Tab-separated text of ``rows`` (dicts keyed as in ``_FIELD``) under ``header``."""
    where = {}
    for key, names in _FIELD.items():
        for n in names:
            if n in header:
                where[key] = header.index(n)
    end = "\t" if trailing_tab else ""
    out = ["\t".join(header) + end]
    for row in rows:
        fields = [""] * len(header)
        for key, value in row.items():
            if key in where:
                fields[where[key]] = value
        out.append("\t".join(fields) + end)
    return "\n".join(out) + "\n"


def write(path, header, rows, compress=None, trailing_tab=False):
    """Write a synthetic EBD/SED file, plain, gzip or zip; return its path."""
    text = lines(header, rows, trailing_tab).encode()
    path = Path(path)
    if compress == "gz":
        path = path.with_suffix(".txt.gz")
        path.write_bytes(gzip.compress(text))
    elif compress == "zip":
        path = path.with_suffix(".zip")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("terms_of_use.txt", "not the data")
            zf.writestr(path.stem + ".txt", text)
    else:
        path.write_bytes(text)
    return path


NO_FILTERS = ChecklistFilter(
    complete=False,
    protocols=None,
    max_hours=None,
    max_km=None,
    max_observers=None,
    max_speed_kmh=None,
)


def ids(frame):
    return sorted(frame["sampling_event_identifier"].tolist())


# ------------------------------------------------------------------------------------------
# reading


def test_normalise_columns_maps_both_layouts_to_the_same_names():
    old = set(ebird.normalise_columns(OLD_SED))
    new = set(ebird.normalise_columns(NEW_SED))
    assert set(ebird.SED_REQUIRED) <= old
    assert set(ebird.SED_REQUIRED) <= new
    assert "locality_type" in old  # the leading space of " LOCALITY TYPE" is trimmed
    assert "checklist_comments" in old and "checklist_comments" in new
    assert set(ebird.EBD_REQUIRED) <= set(ebird.normalise_columns(OLD_EBD))
    assert set(ebird.EBD_REQUIRED) <= set(ebird.normalise_columns(NEW_EBD))


@pytest.mark.parametrize("layout", ["old", "new"])
@pytest.mark.parametrize("compress", [None, "gz", "zip"])
@pytest.mark.parametrize("trailing_tab", [False, True])
def test_read_checklists_layouts_and_compression(tmp_path, layout, compress, trailing_tab):
    header = OLD_SED if layout == "old" else NEW_SED
    rows = [checklist("S1"), checklist("S2", minutes="30", km=""), checklist("S3", lat="40.25")]
    path = write(tmp_path / "sed", header, rows, compress, trailing_tab)
    got = ebird.read_checklists(path, NO_FILTERS)
    assert ids(got) == ["S1", "S2", "S3"]
    assert got.set_index("sampling_event_identifier").loc["S3", "latitude"] == 40.25
    assert got.set_index("sampling_event_identifier").loc["S2", "duration_minutes"] == 30.0
    assert got["observation_date"].dt.year.tolist() == [2018] * 3


def test_streaming_in_small_chunks_gives_the_same_table(tmp_path):
    rows = [checklist(f"S{i}", minutes=str(10 * i)) for i in range(1, 30)]
    path = write(tmp_path / "sed.txt", NEW_SED, rows)
    log_small, log_big = ebird.FilterLog(), ebird.FilterLog()
    small = ebird.read_checklists(path, chunksize=4, log=log_small)
    big = ebird.read_checklists(path, chunksize=1000, log=log_big)
    pd.testing.assert_frame_equal(small, big)
    assert log_small.counts == log_big.counts
    assert log_small.kept("sed", "effort") == sum(10 * i <= 360 for i in range(1, 30))


def test_missing_file_and_wrong_header(tmp_path):
    with pytest.raises(DataFileError, match="does not exist"):
        ebird.read_checklists(tmp_path / "nope.txt")
    ebd = write(tmp_path / "ebd.txt", NEW_EBD, [observation("S1")])
    with pytest.raises(DataFileError, match="looks like an EBD"):
        ebird.read_checklists(ebd)
    sed = write(tmp_path / "sed.txt", NEW_SED, [checklist("S1")])
    with pytest.raises(DataFileError, match="looks like a sampling event"):
        ebird.read_detections(sed, "Wood Thrush")
    other = tmp_path / "other.txt"
    other.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(DataFileError, match="is not an eBird SED file"):
        ebird.read_checklists(other)


def test_missing_required_column_is_named(tmp_path):
    header = [h for h in NEW_SED if h != "GROUP IDENTIFIER"]
    path = write(tmp_path / "sed.txt", header, [checklist("S1")])
    with pytest.raises(DataFileError, match="group_identifier"):
        ebird.read_checklists(path)


def test_malformed_rows_are_counted_and_dropped(tmp_path):
    rows = [
        checklist("S1"),
        checklist("S2", lat="north"),
        checklist("S3", date="2018-13-45"),
        checklist("S4", lon="-200"),
        checklist("S5"),
    ]
    path = write(tmp_path / "sed.txt", NEW_SED, rows)
    with open(path, "a") as f:  # a short line, and one with far too many fields (a short
        # *last* line is a cut file and refused: tests/test_hostile_ingest.py)
        f.write("S7\t2018-05-01\n" + "\t".join(["x"] * (len(NEW_SED) + 5)) + "\n")
    log = ebird.FilterLog()
    got = ebird.read_checklists(path, NO_FILTERS, log=log)
    assert ids(got) == ["S1", "S5"]
    assert log.counts[("sed", "malformed")] == [2, 5]


# ------------------------------------------------------------------------------------------
# the best-practice steps, one at a time


def _parsed(rows):
    text = pd.DataFrame(
        [
            {
                "sampling_event_identifier": r["id"],
                "group_identifier": r["group"] or np.nan,
                "latitude": r["lat"],
                "longitude": r["lon"],
                "observation_date": r["date"],
                "time_observations_started": r["time"],
                "protocol_type": r["protocol"],
                "duration_minutes": r["minutes"],
                "effort_distance_km": r["km"],
                "number_observers": r["observers"],
                "all_species_reported": r["complete"],
            }
            for r in rows
        ]
    ).replace("", np.nan)
    return ebird.parse_sampling(text)


def test_filter_complete():
    got = ebird.filter_complete(_parsed([checklist("S1"), checklist("S2", complete="0")]))
    assert ids(got) == ["S1"]


def test_filter_protocol_ignores_case_and_accepts_custom_lists():
    rows = [
        checklist("S1", protocol="Stationary"),
        checklist("S2", protocol="traveling"),
        checklist("S3", protocol="Incidental"),
        checklist("S4", protocol="Historical"),
    ]
    assert ids(ebird.filter_protocol(_parsed(rows))) == ["S1", "S2"]
    assert ids(ebird.filter_protocol(_parsed(rows), protocols=["Historical"])) == ["S4"]


@pytest.mark.parametrize(
    ("row", "kept"),
    [
        (checklist("S", minutes="360"), True),  # exactly 6 h
        (checklist("S", minutes="361"), False),
        (checklist("S", km="10"), True),
        (checklist("S", km="10.01"), False),
        (checklist("S", observers="10"), True),
        (checklist("S", observers="11"), False),
        (checklist("S", minutes="6", km="10"), True),  # 100 km/h
        (checklist("S", minutes="5", km="10"), False),  # 120 km/h
        (checklist("S", protocol="Stationary", km=""), True),  # stationary travels 0 km
        (checklist("S", protocol="Traveling", km=""), False),
        (checklist("S", minutes=""), False),
        (checklist("S", observers=""), False),
    ],
)
def test_filter_effort_limits(row, kept):
    assert len(ebird.filter_effort(_parsed([row]))) == int(kept)


def test_filter_effort_limits_are_configurable_and_removable():
    rows = [checklist("S1", minutes="100"), checklist("S2", minutes="500", observers="")]
    assert ids(ebird.filter_effort(_parsed(rows), max_hours=1.5)) == []
    assert ids(ebird.filter_effort(_parsed(rows), max_hours=2)) == ["S1"]
    got = ebird.filter_effort(_parsed(rows), max_hours=None, max_observers=None)
    assert ids(got) == ["S1", "S2"]


def test_filter_effort_sets_stationary_distance_to_zero():
    got = ebird.filter_effort(_parsed([checklist("S1", protocol="Stationary", km="")]))
    assert got["effort_distance_km"].tolist() == [0.0]


def test_filter_dates_window_months_years():
    rows = [
        checklist("S1", date="2017-05-01"),
        checklist("S2", date="2018-04-30"),
        checklist("S3", date="2018-05-01"),
        checklist("S4", date="2018-06-30"),
        checklist("S5", date="2018-07-01"),
    ]
    p = _parsed(rows)
    assert ids(ebird.filter_dates(p, start_date="2018-05-01", end_date="2018-06-30")) == [
        "S3",
        "S4",
    ]
    assert ids(ebird.filter_dates(p, months=[5, 6])) == ["S1", "S3", "S4"]
    assert ids(ebird.filter_dates(p, years=[2017])) == ["S1"]
    with pytest.raises(InvalidInputError, match="start_date"):
        ebird.filter_dates(p, start_date="May 1st")


def test_filter_region_bbox_and_polygon():
    rows = [
        checklist("S1", lon="-80", lat="35"),
        checklist("S2", lon="-79", lat="36"),  # on the corner: kept
        checklist("S3", lon="-78.5", lat="35"),
    ]
    p = _parsed(rows)
    assert ids(ebird.filter_region(p, bbox=(-81, 34, -79, 36))) == ["S1", "S2"]
    triangle = shapely.Polygon([(-80.5, 34), (-78, 34), (-78, 35.5)])
    assert ids(ebird.filter_region(p, polygon=triangle)) == ["S3"]


def test_deduplicate_groups_keeps_one_per_group_whatever_the_order():
    rows = [
        checklist("S9", group="G1"),
        checklist("S3", group="G1"),
        checklist("S5"),
        checklist("S4", group="G2"),
    ]
    got = ebird.deduplicate_groups(_parsed(rows))
    assert sorted(zip(got.checklist_id, got.sampling_event_identifier, strict=True)) == [
        ("G1", "S3"),
        ("G2", "S4"),
        ("S5", "S5"),
    ]
    again = ebird.deduplicate_groups(_parsed(rows[::-1]))
    assert sorted(again.checklist_id) == sorted(got.checklist_id)
    assert set(again.sampling_event_identifier) == set(got.sampling_event_identifier)


def _detections(rows):
    text = pd.DataFrame(
        [
            {
                "sampling_event_identifier": r["id"],
                "category": r["category"],
                "common_name": r["common"],
                "scientific_name": r["sci"],
                "observation_count": r["count"],
            }
            for r in rows
        ]
    )
    return ebird.parse_detections(text)


def test_x_counts_are_detections_with_unknown_count():
    got = _detections([observation("S1", count="X"), observation("S2", count="3")])
    assert got["detected"].tolist() == [True, True]
    assert np.isnan(got["observation_count"].iloc[0])
    assert got["observation_count"].iloc[1] == 3.0


def test_rollup_drops_spuh_slash_hybrid_and_merges_subspecies():
    rows = [
        observation("S1", "Yellow-rumped Warbler", "Setophaga coronata", 2, category="issf"),
        observation("S1", "Yellow-rumped Warbler", "Setophaga coronata", 3),
        observation("S2", "Yellow-rumped Warbler", "Setophaga coronata", "X", category="issf"),
        observation("S2", "Yellow-rumped Warbler", "Setophaga coronata", 1),
        observation("S3", "warbler sp.", "Parulidae sp.", 1, category="spuh"),
        observation(
            "S4", "Yellow-rumped/Palm Warbler", "Setophaga coronata/palmarum", 1, category="slash"
        ),
        observation(
            "S5",
            "Western x Glaucous-winged Gull (hybrid)",
            "Larus occidentalis x glaucescens",
            1,
            category="hybrid",
        ),
        observation(
            "S6",
            "Yellow-rumped Warbler (Myrtle x Audubon's)",
            "Setophaga coronata coronata x auduboni",
            4,
            category="intergrade",
        ),
    ]
    got = ebird.rollup_species(_detections(rows)).set_index("sampling_event_identifier")
    assert sorted(got.index) == ["S1", "S2", "S6"]
    assert got.loc["S1", "observation_count"] == 5.0
    assert np.isnan(got.loc["S2", "observation_count"])  # an X makes the total unknown
    assert got.loc["S6", "scientific_name"] == "Setophaga coronata"
    assert got.loc["S6", "common_name"] == "Yellow-rumped Warbler"


def test_hybrid_is_not_read_as_its_first_parent(tmp_path):
    rows = [
        observation("S1", "Western Gull", "Larus occidentalis", 1),
        observation(
            "S2",
            "Western x Glaucous-winged Gull (hybrid)",
            "Larus occidentalis x glaucescens",
            1,
            category="hybrid",
        ),
    ]
    path = write(tmp_path / "ebd.txt", NEW_EBD, rows)
    got = ebird.read_detections(path, "western gull")
    assert got["sampling_event_identifier"].tolist() == ["S1"]


def test_species_by_common_or_scientific_name_any_case(tmp_path):
    rows = [observation("S1"), observation("S2", "Veery", "Catharus fuscescens")]
    path = write(tmp_path / "ebd.txt", OLD_EBD, rows)
    a = ebird.read_detections(path, "wood thrush")
    b = ebird.read_detections(path, "HYLOCICHLA  mustelina")
    assert a["sampling_event_identifier"].tolist() == b["sampling_event_identifier"].tolist()
    assert a["sampling_event_identifier"].tolist() == ["S1"]


def test_species_not_in_file_suggests_close_names(tmp_path):
    path = write(tmp_path / "ebd.txt", NEW_EBD, [observation("S1")])
    with pytest.raises(InvalidInputError, match="Close names in the file: Wood Thrush"):
        ebird.read_detections(path, "Wood Thrsh")


def test_zero_fill_end_to_end_with_groups_and_filters(tmp_path):
    sed_rows = [
        checklist("S1"),
        checklist("S2"),
        checklist("S3", group="G1"),
        checklist("S4", group="G1"),
        checklist("S5", complete="0"),
        checklist("S6", group="G2"),
        checklist("S7", group="G2", protocol="Incidental"),
    ]
    ebd_rows = [
        observation("S2", count="X"),
        observation("S4", count="2"),  # a detection on the member that is not kept
        observation("S5", count="1"),  # incomplete checklist: dropped
        observation("S7", count="1"),  # its member failed the protocol filter: dropped
        observation("S1", "Veery", "Catharus fuscescens"),
        observation("S99", count="1"),  # not in the SED
    ]
    sed = write(tmp_path / "sed.txt", NEW_SED, sed_rows)
    ebd = write(tmp_path / "ebd.txt", NEW_EBD, ebd_rows)
    log = ebird.FilterLog()
    got = ebird.load_observations(ebd, sed, "Wood Thrush", log=log).set_index("checklist_id")
    assert sorted(got.index) == ["G1", "G2", "S1", "S2"]
    assert got.loc["G1", "sampling_event_identifier"] == "S3"
    assert got["detected"].to_dict() == {"G1": True, "G2": False, "S1": False, "S2": True}
    assert got.loc["G1", "observation_count"] == 2.0
    assert np.isnan(got.loc["S2", "observation_count"])
    assert got.loc["S1", "observation_count"] == 0.0
    assert log.counts[("ebd", "in_kept_checklists")] == [2, 3]
    assert log.counts[("sed", "group_dedup")] == [4, 1]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.booleans(), st.sampled_from(["", "1", "X"])),
        min_size=1,
        max_size=15,
    )
)
def test_zero_fill_detection_matches_a_direct_count(spec):
    """Property: a checklist is detected iff some EBD row of the species names it."""
    checklists = pd.DataFrame({"checklist_id": [f"S{i}" for i in range(4)]})
    rows = [(f"S{c}", 1.0 if n == "1" else np.nan) for c, _, n in spec if n]
    det = pd.DataFrame(rows or None, columns=["checklist_id", "observation_count"])
    det["detected"] = True
    got = ebird.zero_fill(checklists, det)
    expected = {f"S{c}" for c, _, n in spec if n}
    assert set(got.checklist_id[got.detected]) == expected
    assert (got.observation_count[~got.detected] == 0).all()


# ------------------------------------------------------------------------------------------
# real files (never copied into the project)


def _real(*parts):
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real eBird file {path} not available (tests read it from ../shared)")
    return path


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = [h.strip() for h in next(reader)]
        return [dict(zip(header, r, strict=False)) for r in reader]


def test_real_zerofill_example_gives_729_checklists_and_the_file_counts():
    ebd = _real("format_samples", "auk_zerofill-ex_ebd.txt")
    sed = _real("format_samples", "auk_zerofill-ex_sampling.txt")
    # Independent count: distinct checklists per species, straight from the text.
    by_species = defaultdict(set)
    for r in _rows(ebd):
        by_species[r["COMMON NAME"]].add(r["SAMPLING EVENT IDENTIFIER"])
    assert len(by_species) == 3
    for species, events in by_species.items():
        got = ebird.load_observations(ebd, sed, species, replace(NO_FILTERS, deduplicate=False))
        assert len(got) == 729
        assert int(got["detected"].sum()) == len(events)
        assert set(got.loc[got.detected, "sampling_event_identifier"]) == events


def test_real_nh_thrush_old_layout_parses_and_deduplicates():
    ebd = _real("nh_thrush", "ebd_thrush_nh.txt")
    sed = _real("nh_thrush", "ebd_thrush_nh_sampling.txt")
    rows = _rows(sed)
    groups = {r["GROUP IDENTIFIER"] for r in rows if r["GROUP IDENTIFIER"]}
    in_groups = sum(bool(r["GROUP IDENTIFIER"]) for r in rows)
    log = ebird.FilterLog()
    no_effort = replace(NO_FILTERS, complete=True)
    got = ebird.load_observations(ebd, sed, "Swainson's Thrush", no_effort, log=log)
    assert log.kept("sed", "complete") == 14355
    assert len(got) == 14355 - in_groups + len(groups)
    assert got["checklist_id"].is_unique
    detected_events = {
        r["SAMPLING EVENT IDENTIFIER"]
        for r in _rows(ebd)
        if r["COMMON NAME"] == "Swainson's Thrush"
    }
    members = {
        r["SAMPLING EVENT IDENTIFIER"]: (r["GROUP IDENTIFIER"] or r["SAMPLING EVENT IDENTIFIER"])
        for r in rows
    }
    assert int(got["detected"].sum()) == len({members[e] for e in detected_events})


def test_real_newer_layout_sample_parses():
    ebd = _real("format_samples", "auk_ebd-sample.txt")
    rows = _rows(ebd)
    log = ebird.FilterLog()
    got = ebird.read_detections(ebd, "Blue Jay", log=log)
    assert log.kept("ebd", "read") == len(rows) == 400
    expected = {r["SAMPLING EVENT IDENTIFIER"] for r in rows if r["COMMON NAME"] == "Blue Jay"}
    assert set(got["sampling_event_identifier"]) == expected
    assert got["detected"].all()


def test_header_with_a_trailing_tab_that_data_lines_lack(tmp_path):
    path = tmp_path / "sed.txt"
    text = lines(NEW_SED, [checklist("S1"), checklist("S2")])
    head, _, rest = text.partition("\n")
    path.write_text(head + "\t\n" + rest)
    assert ids(ebird.read_checklists(path)) == ["S1", "S2"]


# ------------------------------------------------------------------------------------------
# byte ranges (the unit of work of the Dask engine) and the Dask engine itself


@settings(max_examples=10, deadline=None)
@given(st.integers(min_value=1, max_value=900))
def test_byte_ranges_read_every_line_exactly_once(tmp_path_factory, block):
    rows = [checklist(f"S{i}", minutes=str(i % 50 + 1)) for i in range(40)]
    path = write(tmp_path_factory.mktemp("ranges") / "sed.txt", NEW_SED, rows)
    size = path.stat().st_size
    seen = []
    for start in range(0, size, block):
        for chunk in ebird.iter_table(
            path, ["sampling_event_identifier"], byte_range=(start, min(start + block, size))
        ):
            seen += chunk["sampling_event_identifier"].tolist()
    assert seen == [f"S{i}" for i in range(40)]


def test_dask_engine_equals_the_local_engine(tmp_path, monkeypatch):
    pytest.importorskip("distributed", reason="the Dask engine needs dask[distributed]")
    monkeypatch.setattr(dask_engine, "DASK_BLOCK_BYTES", 1500)  # several tasks on a tiny file
    sed_rows = [
        checklist(f"S{i}", minutes=str(20 * (i % 25)), group=f"G{i // 7}" if i % 5 == 0 else "")
        for i in range(60)
    ]
    ebd_rows = [observation(f"S{i}", count="X" if i % 4 else str(i)) for i in range(0, 60, 3)]
    sed = write(tmp_path / "sed.txt", NEW_SED, sed_rows)
    ebd = write(tmp_path / "ebd", NEW_EBD, ebd_rows, "gz")  # compressed: one task
    logs = [ebird.FilterLog(), ebird.FilterLog()]
    local = ebird.load_observations(ebd, sed, "Wood Thrush", log=logs[0], chunksize=7)
    dask = ebird.load_observations(ebd, sed, "Wood Thrush", log=logs[1], chunksize=7, engine="dask")
    pd.testing.assert_frame_equal(local, dask, check_exact=True)
    assert logs[0].counts == logs[1].counts
    assert local["detected"].any() and not local["detected"].all()


def _line_starts(path):
    """Byte offset of every data line of a plain file (the header excluded)."""
    data = path.read_bytes()
    starts = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")) + 1
    return starts[starts < len(data)]


@pytest.fixture(scope="module")
def scheduler():
    """A loopback LocalCluster in this process (threads: quick to start), shared by a module."""
    distributed = pytest.importorskip("distributed", reason="the Dask engine needs distributed")
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        yield cluster.scheduler_address


def test_dask_groups_split_across_byte_ranges_are_deduplicated_exactly(
    tmp_path, monkeypatch, scheduler
):
    """One checklist per group even when its members and detections sit in different tasks."""
    block = 1200
    monkeypatch.setattr(dask_engine, "DASK_BLOCK_BYTES", block)
    filler = [checklist(f"S{100 + i}", minutes=str(10 + i)) for i in range(1, 30)]
    # Group GX: S900 first in the file, S150 (the kept member: smallest id as text) in the
    # middle, S500 last; S0 is smaller still but incomplete, so it never competes.
    sed_rows = [
        checklist("S900", group="GX", minutes="15"),
        checklist("S0", group="GX", complete="0"),
        *filler[:14],
        checklist("S150", group="GX", minutes="45"),
        *filler[14:],
        checklist("S500", group="GX", minutes="30"),
    ]
    # Detections of the group only on the members that are not kept, at both ends of the EBD.
    ebd_rows = [
        observation("S500", count="3"),
        *[observation(f"S{100 + i}", count=str(i)) for i in range(1, 30, 2)],
        *[observation(f"S{100 + i}", "Veery", "Catharus fuscescens") for i in range(1, 30)],
        observation("S900", count="7"),
        observation("S0", count="50"),  # incomplete member: not linked
    ]
    sed = write(tmp_path / "sed.txt", NEW_SED, sed_rows)
    ebd = write(tmp_path / "ebd.txt", NEW_EBD, ebd_rows)
    # The three kept members, and the two detections, lie in three / two different ranges.
    sed_ranges = _line_starts(sed)[[0, 16, len(sed_rows) - 1]] // block
    ebd_ranges = _line_starts(ebd)[[0, len(ebd_rows) - 2]] // block
    assert len(set(sed_ranges)) == 3 and len(set(ebd_ranges)) == 2

    for dedup in (True, False):
        logs = [ebird.FilterLog(), ebird.FilterLog()]
        kw = dict(chunksize=5)
        dedup_only = ChecklistFilter(deduplicate=dedup)
        local = ebird.load_observations(ebd, sed, "Wood Thrush", dedup_only, log=logs[0], **kw)
        dask = ebird.load_observations(
            ebd,
            sed,
            "Wood Thrush",
            dedup_only,
            log=logs[1],
            engine="dask",
            scheduler=scheduler,
            **kw,
        )
        pd.testing.assert_frame_equal(local, dask, check_exact=True)
        assert logs[0].to_frame().equals(logs[1].to_frame())
    # Oracle for the de-duplicated table, written by hand.
    got = ebird.load_observations(ebd, sed, "Wood Thrush", engine="dask", scheduler=scheduler)
    got = got.set_index("checklist_id")
    assert len(got) == 30 and got.index.is_unique
    assert got.loc["GX", "sampling_event_identifier"] == "S150"
    assert got.loc["GX", "detected"] and got.loc["GX", "observation_count"] == 7.0
    assert got.loc["S102", "observation_count"] == 0.0 and got.loc["S101", "detected"]


def test_split_by_keeps_every_row_once_in_order():
    frame = pd.DataFrame({"v": np.arange(50)})
    bucket = (np.arange(50) * 7) % 4
    pieces = dask_engine.split_by(frame, bucket, 5)
    assert len(pieces) == 5 and pieces[4].empty
    for j, piece in enumerate(pieces):
        assert piece["v"].tolist() == [v for v in range(50) if bucket[v] == j]


def test_real_rollup_example():
    path = _real("format_samples", "auk_ebd-rollup-ex.txt")
    rows = _rows(path)
    name = "Yellow-rumped Warbler"
    # Independent oracle: sum the counts of the species' rows per checklist, by hand.
    expected = defaultdict(float)
    for r in rows:
        if r["COMMON NAME"] == name and r["CATEGORY"] in ("species", "issf", "intergrade"):
            expected[r["SAMPLING EVENT IDENTIFIER"]] += float(r["OBSERVATION COUNT"])
    got = ebird.read_detections(path, "setophaga coronata").set_index("sampling_event_identifier")
    assert got["observation_count"].to_dict() == dict(expected)
    assert set(got["common_name"]) == {name}
    # Only hybrids and slashes of Western Gull are in the file: no species-level row.
    with pytest.raises(InvalidInputError, match="Western Gull"):
        ebird.read_detections(path, "Western Gull")


@settings(max_examples=10, deadline=None)
@given(st.randoms(use_true_random=False))
def test_row_order_does_not_change_the_zero_filled_table(tmp_path_factory, rnd):
    """Property: shuffling the SED and EBD lines gives the same checklists and detections."""
    sed_rows = [
        checklist(f"S{i}", group=f"G{i % 4}" if i % 3 == 0 else "", minutes=str(30 + i))
        for i in range(24)
    ]
    ebd_rows = [observation(f"S{i}", count=str(i) if i % 2 else "X") for i in range(0, 24, 2)]
    folder = tmp_path_factory.mktemp("order")
    a = ebird.load_observations(
        write(folder / "e1.txt", NEW_EBD, ebd_rows),
        write(folder / "s1.txt", NEW_SED, sed_rows),
        "Wood Thrush",
    )
    rnd.shuffle(sed_rows)
    rnd.shuffle(ebd_rows)
    b = ebird.load_observations(
        write(folder / "e2.txt", NEW_EBD, ebd_rows),
        write(folder / "s2.txt", NEW_SED, sed_rows),
        "Wood Thrush",
    )
    key = ["checklist_id", "sampling_event_identifier", "detected", "observation_count"]
    a = a[key].sort_values("checklist_id").reset_index(drop=True)
    b = b[key].sort_values("checklist_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_dask_engine_without_dask_names_the_install_line(tmp_path, monkeypatch):
    import sys

    from reserve.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "distributed", None)  # makes the import fail
    sed = write(tmp_path / "sed.txt", NEW_SED, [checklist("S1")])
    with pytest.raises(MissingDependencyError, match=r"pip install 'reserve\[dask\]'"):
        ebird.read_checklists(sed, engine="dask")
