"""``reserve ingest`` under hostile input: one error line, the right exit code, nothing written.

The inputs are the small study area of tests/test_ingest.py; every case runs in process in an
empty working folder that must be byte for byte unchanged afterwards (and so must the inputs).
Legal-but-odd files (no final newline, mixed line endings, a BOM, gzip, zip) must give the
planning units of the plain file.
"""

from __future__ import annotations

import gzip
import os
import re
import zipfile
from pathlib import Path

import pyogrio
import pytest
from click.testing import CliRunner

from reserve.cli import main
from tests.conftest import assert_one_line_error, snapshot
from tests.test_ingest import make_inputs


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, object]:
    d = tmp_path_factory.mktemp("hostile_ingest_inputs")
    got = make_inputs(d)
    ebd, sed = got["ebd"].read_bytes(), got["sed"].read_bytes()
    extra = {
        "folder": None,
        "empty.txt": b"",
        "binary.txt": bytes(range(256)) * 4,
        "header_only_ebd.txt": ebd.split(b"\n", 1)[0] + b"\n",
        "cut_ebd.txt": ebd.rstrip(b"\n").rsplit(b"\t", 30)[0],
        "cut_sed.txt": sed.rstrip(b"\n").rsplit(b"\t", 10)[0],
        "cut_ebd_nl.txt": ebd.rstrip(b"\n").rsplit(b"\t", 30)[0] + b"\n",
        "cut_ebd.txt.gz": gzip.compress(ebd)[:-40],
        "cut_sed.txt.gz": gzip.compress(sed)[: len(gzip.compress(sed)) // 2],
        "gz_header_only.gz": gzip.compress(ebd)[:12],
        "bad.zip": b"PK\x03\x04 this is not a zip archive",
        "cut.zip": None,
        "garbage.txt.gz": gzip.compress(bytes(range(256)) * 8),
        "commas.txt": ebd.replace(b"\t", b","),
        "not_raster.tif": b"II*\x00 not a tiff",
        "legend_bad.csv": b"klass;nom\n1;x\n",
        "region_bad.geojson": b"{ nope",
        "sed_repeated.txt": _repeat_line(sed, 5),
        "sed_conflict.txt": _repeat_line(sed, 5, latitude=b"35.01000"),
        "sed_extra_field.txt": _extra_field(sed, 1),
        "ebd_extra_field.txt": _extra_field(ebd, 1),
        "ebd_foreign.txt": re.sub(rb"\tS(\d+)\t", rb"\tX\1\t", ebd),
    }
    out: dict[str, object] = dict(got)
    for name, data in extra.items():
        path = d / name
        if name == "folder":
            path.mkdir()
        elif name == "cut.zip":
            buf = d / "full.zip"
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
                zf.writestr("ebd.txt", ebd * 50)
            path.write_bytes(buf.read_bytes()[:-200])
            buf.unlink()
        elif name == "nozip_member.zip":
            pass
        else:
            path.write_bytes(data)
        out[name] = path
    with zipfile.ZipFile(d / "nomember.zip", "w") as zf:
        zf.writestr("readme.pdf", b"%PDF")
    out["nomember.zip"] = d / "nomember.zip"
    (d / "prev.gpkg").write_bytes(b"previous units")
    out["prev.gpkg"] = d / "prev.gpkg"
    return out


def _repeat_line(sed: bytes, i: int, latitude: bytes | None = None) -> bytes:
    """``sed`` with its line ``i`` repeated after itself (with another LATITUDE if given)."""
    lines = sed.split(b"\n")
    copy = lines[i].split(b"\t")
    if latitude is not None:
        copy[lines[0].split(b"\t").index(b"LATITUDE")] = latitude
    return b"\n".join([*lines[: i + 1], b"\t".join(copy), *lines[i + 1 :]])


def _extra_field(text: bytes, i: int) -> bytes:
    """``text`` with one more field, holding text, on its line ``i``."""
    lines = text.split(b"\n")
    lines[i] += b"\tan extra field"
    return b"\n".join(lines)


def _base(inputs: dict[str, object]) -> list[str]:
    return [
        "ingest",
        "--ebd",
        str(inputs["ebd"]),
        "--sed",
        str(inputs["sed"]),
        "--species",
        "Hylocichla mustelina",
        "--output",
        "units.gpkg",
        "--region",
        str(inputs["region"]),
        "--cell-size",
        "2000",
        "--categorical",
        f"landcover={inputs['lc']}",
        "--legend",
        f"landcover={inputs['legend']}",
        "--continuous",
        f"elevation={inputs['dem']}",
        "--public",
        str(inputs["public"]),
        "--no-progress",
    ]


def _with(args: list[str], option: str, value: str | None) -> list[str]:
    """``args`` with the value of ``option`` replaced (or the option removed when None)."""
    out = list(args)
    i = out.index(option)
    if value is None:
        del out[i : i + 2]
    else:
        out[i + 1] = value
    return out


# (option to replace, its new value or "@file", extra arguments, exit code, message fragment)
CASES = {
    "ebd_missing": ("--ebd", "nosuch.txt", [], 1, "does not exist"),
    "ebd_folder": ("--ebd", "@folder", [], 1, "is a folder"),
    "sed_missing": ("--sed", "nosuch.txt", [], 1, "does not exist"),
    "sed_folder": ("--sed", "@folder", [], 1, "is a folder"),
    "ebd_empty": ("--ebd", "@empty.txt", [], 1, "is not an eBird EBD file"),
    "sed_empty": ("--sed", "@empty.txt", [], 1, "is not an eBird SED file"),
    "ebd_binary": ("--ebd", "@binary.txt", [], 1, "is not an eBird EBD file"),
    "sed_binary": ("--sed", "@binary.txt", [], 1, "is not an eBird SED file"),
    "ebd_commas": ("--ebd", "@commas.txt", [], 1, "is not an eBird EBD file"),
    "ebd_is_sed": ("--ebd", "@sed", [], 1, "looks like a sampling event (SED) file"),
    "sed_is_ebd": ("--sed", "@ebd", [], 1, "looks like an EBD"),
    "ebd_header_only": ("--ebd", "@header_only_ebd.txt", [], 2, "no row"),
    "ebd_cut": ("--ebd", "@cut_ebd.txt", [], 1, "line 27 has 22 of the header's"),
    "ebd_cut_newline": ("--ebd", "@cut_ebd_nl.txt", [], 1, "looks truncated"),
    "sed_cut": ("--sed", "@cut_sed.txt", [], 1, "looks truncated"),
    "ebd_cut_gz": ("--ebd", "@cut_ebd.txt.gz", [], 1, "truncated or damaged"),
    "sed_cut_gz": ("--sed", "@cut_sed.txt.gz", [], 1, "truncated or damaged"),
    "ebd_gz_header_only": ("--ebd", "@gz_header_only.gz", [], 1, "truncated or damaged"),
    "ebd_garbage_gz": ("--ebd", "@garbage.txt.gz", [], 1, "is not an eBird EBD file"),
    "ebd_bad_zip": ("--ebd", "@bad.zip", [], 1, "is not a readable one"),
    "sed_bad_zip": ("--sed", "@bad.zip", [], 1, "is not a readable one"),
    "ebd_cut_zip": ("--ebd", "@cut.zip", [], 1, "not a readable one"),
    "ebd_zip_no_text": ("--ebd", "@nomember.zip", [], 1, "holds no .txt member"),
    "chunksize_zero": ("--chunksize", None, ["--chunksize", "0"], 2, "chunksize must be"),
    "chunksize_negative": ("--chunksize", None, ["--chunksize", "-5"], 2, "chunksize must be"),
    "chunksize_word": ("--chunksize", None, ["--chunksize", "x"], 2, "'--chunksize'"),
    "cell_size_zero": ("--cell-size", "0", [], 2, "cell_size must be a positive number"),
    "cell_size_negative": ("--cell-size", "-10", [], 2, "cell_size must be a positive"),
    "cell_size_nan": ("--cell-size", "nan", [], 2, "cell_size must be a positive"),
    "cell_size_word": ("--cell-size", "big", [], 2, "'--cell-size'"),
    "species_unknown": ("--species", "Dodo", [], 2, "--species 'Dodo'"),
    "species_blank": ("--species", " ", [], 2, "pass a common or scientific name"),
    "species_twice": (
        "--species",
        None,
        ["--species", "Veery", "--species", "veery"],
        2,
        "are the same name",
    ),
    "months_word": ("--months", None, ["--months", "may"], 2, "--months 'may' must be"),
    "years_word": ("--years", None, ["--years", "last"], 2, "--years 'last' must be"),
    "months_13": ("--months", None, ["--months", "13"], 2, "months"),
    "start_date_bad": (
        "--start-date",
        None,
        ["--start-date", "2018-13-45"],
        2,
        "--start-date '2018-13-45'",
    ),
    "dates_reversed": (
        "--start-date",
        None,
        ["--start-date", "2019-01-01", "--end-date", "2018-01-01"],
        2,
        "end_date",
    ),
    "max_hours_negative": ("--max-hours", None, ["--max-hours", "-1"], 2, "--max-hours -1.0"),
    "region_three_numbers": ("--region", "1,2,3", [], 2, "is not a bbox"),
    "region_inverted": ("--region", "-79.96,34.96,-80.06,35.04", [], 2, "is not a bbox"),
    "region_out_of_range": ("--region", "500,0,600,10", [], 2, "outside longitude/latitude"),
    "region_missing_file": ("--region", "nosuch.geojson", [], 1, "neither a bbox"),
    "region_garbage_file": ("--region", "@region_bad.geojson", [], 1, "cannot be read"),
    "region_elsewhere": ("--region", "10,10,10.1,10.1", [], 2, "no checklist"),
    "crs_geographic": ("--crs", None, ["--crs", "EPSG:4326"], 2, "equal-area"),
    "crs_garbage": ("--crs", None, ["--crs", "not a crs"], 2, "crs"),
    "categorical_no_equals": ("--categorical", "landcover", [], 2, "must be NAME=PATH"),
    "categorical_missing": ("--categorical", "landcover=nosuch.tif", [], 1, "does not exist"),
    "categorical_not_raster": (
        "--categorical",
        "landcover=@not_raster.tif",
        [],
        1,
        "cannot be read by GDAL",
    ),
    "continuous_missing": ("--continuous", "elevation=nosuch.tif", [], 1, "does not exist"),
    "same_raster_name": ("--continuous", "landcover=@dem", [], 2, "used twice"),
    "legend_unknown": ("--legend", "forest=@legend", [], 2, "match no categorical raster"),
    "legend_bad": ("--legend", "landcover=@legend_bad.csv", [], 1, "it needs a value column"),
    "legend_missing": ("--legend", "landcover=nosuch.csv", [], 1, "does not exist"),
    "public_missing": ("--public", "nosuch.geojson", [], 1, "does not exist"),
    "public_garbage": ("--public", "@region_bad.geojson", [], 1, "cannot be read"),
    "locked_out_missing": (
        "--locked-out",
        None,
        ["--locked-out", "nosuch.gpkg"],
        1,
        "does not exist",
    ),
    "public_threshold": (
        "--public-threshold",
        None,
        ["--public-threshold", "2"],
        2,
        "--public-threshold 2.0 must lie in [0, 1]",
    ),
    "locked_threshold": (
        "--locked-threshold",
        None,
        ["--locked-threshold", "-1"],
        2,
        "--locked-threshold",
    ),
    "region_threshold": (
        "--region-threshold",
        None,
        ["--region-threshold", "1"],
        2,
        "--region-threshold",
    ),
    "engine_unknown": ("--engine", None, ["--engine", "spark"], 2, "'--engine'"),
    "output_not_gpkg": ("--output", "units.shp", [], 2, "must end in .gpkg"),
    "output_folder": ("--output", "@folder", [], 1, "is a folder"),
    "output_no_folder": ("--output", "nosuch/units.gpkg", [], 1, "does not exist; create it"),
    "output_proc": ("--output", "/proc/units.gpkg", [], 1, "cannot be written"),
    "output_not_utf8": ("--output", "units\udcff.gpkg", [], 1, "holds bytes that are not UTF-8"),
    "output_name_long": ("--output", "u" * 300 + ".gpkg", [], 1, "is 305 bytes, longer than"),
    "output_existing": ("--output", "prev.gpkg", [], 1, "already exists; pass --overwrite"),
    "output_is_input": ("--output", "@prev.gpkg", [], 1, "already exists"),
    "missing_species": ("--species", None, [], 2, "Missing option '--species'"),
    "sed_extra_field": (
        "--sed",
        "@sed_extra_field.txt",
        [],
        1,
        "line 2 has 34 fields where the header has 33 (the extra text: ['an extra field'])",
    ),
    "ebd_extra_field": ("--ebd", "@ebd_extra_field.txt", [], 1, "Fix or delete that line"),
    "sed_conflict": ("--sed", "@sed_conflict.txt", [], 2, "1 sampling event(s) on several rows"),
    "sed_conflict_dask": (
        "--sed",
        "@sed_conflict.txt",
        ["--engine", "dask"],
        2,
        "differ (S5; in latitude)",
    ),
    "unknown_option": ("--no-progress", None, ["--bogus"], 2, "No such option"),
}


def _args(inputs: dict[str, object], case: tuple) -> list[str]:
    option, value, extra, _, _ = case
    args = _base(inputs)
    if option in args:
        if isinstance(value, str) and "@" in value:
            head, _, name = value.partition("@")
            value = head + str(inputs[name])
        args = _with(args, option, value)
    return args + extra


@pytest.mark.parametrize("name", list(CASES))
def test_refused(name, inputs, workdir):
    case = CASES[name]
    if name == "output_existing":
        (workdir / "prev.gpkg").write_bytes(b"previous units")
    before = snapshot(workdir)
    inputs_before = snapshot(Path(str(inputs["dir"])))
    res = CliRunner().invoke(main, _args(inputs, case), catch_exceptions=False)
    assert_one_line_error(res.stderr, res.exit_code, case[3], case[4])
    assert res.stdout == ""
    assert snapshot(workdir) == before
    assert snapshot(Path(str(inputs["dir"]))) == inputs_before


# ------------------------------------------------------------------------------------------
# legal but odd: the same planning units as the plain file


def _odd_files(inputs: dict[str, object], folder: Path) -> dict[str, tuple[str, Path]]:
    ebd = Path(str(inputs["ebd"])).read_bytes()
    sed = Path(str(inputs["sed"])).read_bytes()
    crlf = b"".join(
        line.replace(b"\n", b"\r\n") if i % 2 else line
        for i, line in enumerate(ebd.splitlines(keepends=True))
    )
    files = {
        "no_final_newline": ("--ebd", ebd.rstrip(b"\n")),
        "sed_no_final_newline": ("--sed", sed.rstrip(b"\n")),
        "mixed_line_endings": ("--ebd", crlf),
        "all_crlf": ("--sed", sed.replace(b"\n", b"\r\n")),
        "bom": ("--ebd", b"\xef\xbb\xbf" + ebd),
        "sed_bom": ("--sed", b"\xef\xbb\xbf" + sed),
        "gz": ("--ebd", gzip.compress(ebd)),
        "gz_named_txt": ("--sed", gzip.compress(sed)),
        "zip": ("--ebd", None),
        "sed_repeated_line": ("--sed", _repeat_line(sed, 5)),
    }
    out = {}
    for name, (option, data) in files.items():
        path = folder / f"{name}.txt"
        if data is None:
            path = folder / f"{name}.zip"
            with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
                zf.writestr("terms.txt", "not the data")
                zf.writestr("ebd_data.txt", ebd * 1)
        else:
            path.write_bytes(data)
        out[name] = (option, path)
    return out


@pytest.fixture(scope="module")
def plain_units(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("plain") / "units.gpkg"
    args = _with(_base(inputs), "--output", str(out))
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    return pyogrio.read_dataframe(out, layer="planning_units")


ODD = [
    "no_final_newline",
    "sed_no_final_newline",
    "mixed_line_endings",
    "all_crlf",
    "bom",
    "sed_bom",
    "gz",
    "gz_named_txt",
    "zip",
    "sed_repeated_line",
]


@pytest.mark.parametrize("name", ODD)
def test_odd_but_legal(name, inputs, plain_units, workdir, tmp_path):
    option, path = _odd_files(inputs, tmp_path)[name]
    args = _with(_base(inputs), option, str(path))
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    got = pyogrio.read_dataframe(workdir / "units.gpkg", layer="planning_units")
    cols = ["cell_id", "role", "label", "n_checklists", "n_detections", "effort_hours"]
    assert got[cols].equals(plain_units[cols])
    assert sorted(p.name for p in workdir.iterdir()) == ["units.gpkg"]  # no temporaries


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_repeated_sed_line_is_dropped_with_a_note(engine, inputs, workdir):
    args = _with(_base(inputs), "--sed", str(inputs["sed_repeated.txt"]))
    res = CliRunner().invoke(main, [*args, "--engine", engine], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    assert "reserve: warning: 1 repeated SED row dropped" in res.stderr
    summary = pyogrio.read_dataframe(workdir / "units.gpkg", layer="ingest_summary")
    row = summary.set_index("item").loc["sed:repeated_rows"]
    assert (row["kept"], row["dropped"]) == (20, 1)


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_ebd_of_another_download_is_said(engine, inputs, workdir):
    """EBD checklists none of which is in the SED: ingested (all non-detections), said loudly."""
    args = _with(_base(inputs), "--ebd", str(inputs["ebd_foreign.txt"]))
    res = CliRunner().invoke(main, [*args, "--engine", engine], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    example = r" \(e\.g\. X\d+\)" if engine == "local" else ""
    warned = (
        f"reserve: warning: none of the 6 EBD checklists with the species{example} is among "
        "the 20 checklists kept from the SED"
    )
    assert re.search(warned, res.stderr), res.stderr
    assert "different downloads" in res.stderr


def test_ebd_of_the_same_download_is_not_warned(inputs, workdir):
    res = CliRunner().invoke(main, _base(inputs), catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    assert "EBD checklists" not in res.stderr and "repeated SED" not in res.stderr


@pytest.mark.parametrize("region", [True, False])
def test_cell_size_in_km_refused_up_front(region, inputs, workdir, monkeypatch):
    """--cell-size 10 (km meant, metres read): refused with the count, the memory and the fix.

    With --region the size is known before any file is read; without, once the checklists'
    extent is (before any cell is made).
    """
    import reserve.ingest

    monkeypatch.setattr(reserve.ingest, "available_memory", lambda: 10**8)
    args = _with(_base(inputs), "--cell-size", "10")
    if not region:
        args = _with(args, "--region", None)
    before = snapshot(workdir)
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    line = assert_one_line_error(res.stderr, res.exit_code, 2, "--cell-size 10 would grid")
    assert re.search(r"into about [\d,]+ cells, needing about [\d.]+ GB of memory", line), line
    assert "where 0.1 GB are available" in line
    assert "for 10 km pass --cell-size 10000" in line
    assert snapshot(workdir) == before


def test_cell_size_that_fits_is_not_refused(inputs, workdir, monkeypatch):
    import reserve.ingest

    monkeypatch.setattr(reserve.ingest, "available_memory", lambda: 2 * 10**9)
    res = CliRunner().invoke(main, _with(_base(inputs), "--cell-size", "500"))
    assert res.exit_code == 0, res.stderr


def test_filter_report_on_stderr(inputs, workdir):
    """Every filter step of ingest_summary is on stderr with its rows kept and dropped."""
    res = CliRunner().invoke(main, _base(inputs), catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    summary = pyogrio.read_dataframe(workdir / "units.gpkg", layer="ingest_summary")
    steps = summary[summary["item"].str.match(r"(sed|ebd|checklists):")]
    assert len(steps) >= 10
    lines = res.stderr.splitlines()
    assert lines[0] == "filters (rows kept, dropped):"
    for row in steps.itertuples():
        shown = [ln.split() for ln in lines if ln.split()[:1] == [row.item]]
        assert len(shown) == 1, row.item
        assert shown[0][1:3] == [f"{int(row.kept):,}", f"{int(row.dropped):,}"], row.item
    assert "sed:protocol" in res.stderr and "Stationary,Traveling" in res.stderr
    assert res.stdout.startswith("wrote ")  # stdout keeps its two lines
    assert len(res.stdout.splitlines()) == 2


def test_disk_full_while_writing_the_units(inputs, workdir, monkeypatch):
    """GDAL's 'database or disk is full': one error line, no file and no temporary left."""
    from pyogrio.errors import FeatureError

    real = pyogrio.write_dataframe

    def write(df, path, **kw):
        if kw.get("layer") == "ingest_summary":
            raise FeatureError("Failed to commit transaction: database or disk is full")
        return real(df, path, **kw)

    monkeypatch.setattr(pyogrio, "write_dataframe", write)
    res = CliRunner().invoke(main, _base(inputs), catch_exceptions=False)
    assert res.exit_code == 1 and "Traceback" not in res.stderr
    last = res.stderr.splitlines()[-1]
    assert last.startswith("reserve: error: --output 'units.gpkg' cannot be written: the disk")
    assert os.listdir(workdir) == []


def test_missing_legend_is_said_once(inputs, workdir):
    res = CliRunner().invoke(main, _with(_base(inputs), "--legend", None), catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    said = [ln for ln in res.stderr.splitlines() if "without --legend" in ln]
    assert said == [
        "reserve: warning: --categorical landcover without --legend: its features are named "
        "landcover_class_<value>, which says nothing of the habitat in the outputs and the map; "
        "pass --legend landcover=classes.csv (a CSV of class,name)"
    ]
    units = pyogrio.read_dataframe(workdir / "units.gpkg", layer="planning_units")
    assert any(c.startswith("landcover_class_") for c in units.columns)
    res = CliRunner().invoke(main, [*_base(inputs), "--overwrite"], catch_exceptions=False)
    assert "--legend" not in res.stderr
