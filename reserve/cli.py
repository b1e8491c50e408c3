"""The ``reserve`` command line: parse options, call one library function, print.

Errors derived from :class:`reserve.errors.ReserveError` become one line on stderr and a
non-zero exit code (2 for usage errors, 1 for data errors), never a traceback.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import click

from reserve import __version__, interrupt
from reserve.errors import InvalidInputError, ReserveError
from reserve.options import INGEST_OPTIONS, SELECT_OPTIONS, OptionSpec

if TYPE_CHECKING:
    from reserve.config import SelectOptions
    from reserve.fork import Standby

__all__ = ["main", "run"]


class _Typed(click.ParamType):
    """A typed option whose bad values are left to the library to refuse.

    The help shows the type (INTEGER, FLOAT, NUMBER, FLOAT|CV, FLOAT|AUTO) and good values arrive
    converted; a value that does not convert is passed on as typed, so that
    :class:`reserve.config.SelectOptions` refuses it with the same one-line message as the
    Python API (``budget must be ...``), not with click's usage text.
    """

    def __init__(self, name: str, *converters: Any) -> None:
        self.name = name
        self.converters = converters

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if not isinstance(value, str):
            return value  # a TOML value or a default: already typed
        for conv in self.converters:
            try:
                return conv(value.strip())
            except ValueError:
                continue
        return value


def _cv(value: str) -> str:
    if value.lower() != "cv":
        raise ValueError(value)
    return "cv"


def _auto(value: str) -> str:
    if value.lower() != "auto":
        raise ValueError(value)
    return "auto"


_INT, _FLOAT = _Typed("integer", int), _Typed("float", float)
_NUMBER, _C_VALUE = _Typed("number", int, float), _Typed("float|cv", float, _cv)
_PENALTY = _Typed("float|auto", float, _auto)


def _as_flag(message: str, group: click.Group, ctx: click.Context) -> str:
    """``message`` with a leading Python argument name (``cells='x' ...``) spelt as its flag.

    The library's messages name the argument (``select_reserve(cells=...)``); at the command
    line the planner typed ``--cells``, so ``cells='x' does not exist`` becomes
    ``--cells 'x' does not exist``. Other messages are returned unchanged.
    """
    name, sep, rest = message.partition("=")
    if not sep or not name.isidentifier() or ctx.invoked_subcommand is None:
        return message
    command = group.get_command(ctx, ctx.invoked_subcommand)
    for param in getattr(command, "params", []):
        if isinstance(param, click.Option) and param.name == name:
            flag = max(param.opts, key=len)
            return f"{flag} {rest}" if flag.startswith("--") else message
    return message


class _ReserveGroup(click.Group):
    """A click group that turns ``ReserveError`` into a one-line message and an exit code."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            with interrupt.working():
                return super().invoke(ctx)
        except ReserveError as exc:
            click.echo(f"reserve: error: {_as_flag(str(exc), self, ctx)}", err=True)
            code = 2 if isinstance(exc, InvalidInputError) else 1
            sys.exit(code)
        except KeyboardInterrupt as exc:  # the outputs' temporaries went as it unwound
            signum = interrupt.stopping(exc)
            click.echo(f"reserve: {interrupt.message(signum)}", err=True)
            sys.exit(128 + signum)
        except click.UsageError as exc:  # click's own checks (types, choices): one line too
            where = f"; see '{exc.ctx.command_path} --help'" if exc.ctx is not None else ""
            click.echo(f"reserve: error: {exc.format_message().rstrip('.')}{where}", err=True)
            sys.exit(2)


@click.group(cls=_ReserveGroup)
@click.version_option(__version__, prog_name="reserve")
def main() -> None:
    """Choose k private land cells for an endangered species with Transductive Top K."""


def _named_paths(values: tuple[str, ...], option: str) -> dict[str, str]:
    """Parse repeated ``NAME=PATH`` options into a dict."""
    out = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise InvalidInputError(f"{option} {value!r} must be NAME=PATH, e.g. landcover=lc.tif")
        out[name.strip()] = path.strip()
    return out


def _int_list(value: str | None, option: str) -> list[int] | None:
    if value is None:
        return None
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise InvalidInputError(
            f"{option} {value!r} must be integers separated by commas"
        ) from None


#: The click type of each kind of option (:data:`reserve.options.Kind`); ``text``: a string.
#: A lenient type passes a bad value on for the options' check; a strict one refuses it.
_KIND_TYPES: dict[str, Any] = {
    "number": _NUMBER,
    "integer": _INT,
    "float": _FLOAT,
    "float|cv": _C_VALUE,
    "float|auto": _PENALTY,
    "path": click.Path(),
}
_STRICT_TYPES: dict[str, Any] = {**_KIND_TYPES, "integer": click.INT, "float": click.FLOAT}


def _click_option(spec: OptionSpec) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click option of one declared option (:mod:`reserve.options`)."""
    kw: dict[str, Any] = {
        "help": spec.help,
        "metavar": spec.metavar,
        "multiple": spec.multiple,
        "required": spec.required,
    }
    if spec.kind == "switch":  # without a default: None unless given
        kw["default"] = spec.default
    if spec.default is not None:
        kw.update(default=spec.default, show_default=True)
    decls = [spec.flag, spec.name]
    types = _STRICT_TYPES if spec.strict else _KIND_TYPES
    if spec.kind == "switch":  # --effort/--no-effort
        decls[0] = f"{spec.flag}/--no-{spec.flag[2:]}"
    elif spec.kind == "flag":
        kw["is_flag"] = True
    elif spec.kind == "choice":
        kw["type"] = click.Choice(spec.choices, case_sensitive=spec.strict)
    elif spec.kind in types:
        kw["type"] = types[spec.kind]
    return click.option(*decls, **kw)


def _declared(options: Mapping[str, OptionSpec]) -> Callable[[Callable[..., Any]], Any]:
    """A decorator adding every declared option to a command, in the declared order."""

    def add(command: Callable[..., Any]) -> Any:
        for spec in reversed(list(options.values())):
            command = _click_option(spec)(command)
        return command

    return add


@main.command("ingest", short_help="Grid eBird checklists into labelled planning units.")
@_declared(INGEST_OPTIONS)
def ingest_command(**kw: Any) -> None:
    """Grid eBird checklists into labelled planning units.

    One species (or several, with repeated --species): the checklists are filtered with
    eBird's best practices, gridded into equal-area cells, labelled (detected or not) and
    given habitat features and roles (train, candidate, other).
    """
    from dataclasses import fields

    from reserve.ingest import ingest
    from reserve.io import ChecklistFilter

    kw["categorical"] = _named_paths(kw["categorical"], "--categorical")
    kw["continuous"] = _named_paths(kw["continuous"], "--continuous")
    kw["legend"] = _named_paths(kw["legend"], "--legend")
    kw["public"] = list(kw["public"]) or None
    kw["locked_out"] = list(kw["locked_out"]) or None
    kw["months"] = _int_list(kw["months"], "--months")
    kw["years"] = _int_list(kw["years"], "--years")
    protocols = str(kw["protocols"])
    kw["protocols"] = None if protocols.lower() == "all" else protocols.split(",")
    filter_names = [f.name for f in fields(ChecklistFilter) if f.name in kw]
    kw["filters"] = ChecklistFilter(**{name: kw.pop(name) for name in filter_names})
    names = tuple(kw.pop("species"))
    species = names[0] if len(names) == 1 else names  # one --species: the one-species columns
    result = ingest(kw.pop("ebd"), kw.pop("sed"), species, kw.pop("output"), **kw)
    counts = result.counts()
    click.echo(
        f"wrote {result.path} (crs {result.grid.crs.name}, cells {result.grid.cell_size:g} m)"
    )
    click.echo(
        f"checklists {counts['checklists']}; cells: train {counts['train']} "
        f"(positive {counts['train_positive']}), candidate {counts['candidate']}, "
        f"other {counts['other']}"
    )
    for line in filter_report(result.summary):
        click.echo(line, err=True)
    notes = (
        _repeated_rows(result.summary),
        _unlinked(result.summary),
        _no_legend(kw["categorical"], kw["legend"]),
        _few_training_cells(result.planning_units),
    )
    for warning in notes:
        if warning:
            click.echo(f"reserve: warning: {warning}", err=True)
    if len(names) > 1:
        from reserve.config import SPECIES_LABEL_PREFIX, species_slug

        pu = result.planning_units
        train = pu["role"] == "train"
        for name in names:
            column = SPECIES_LABEL_PREFIX + species_slug(name)
            click.echo(
                f"{column} = {name} (train positive {int((train & (pu[column] == 1)).sum())}, "
                f"surveyed positive {int((pu[column] == 1).sum())})"
            )
        click.echo(f"label = {names[0]}")


def filter_report(summary: Any) -> list[str]:
    """The ingest's filter steps as lines for stderr: rows kept and dropped, and the setting.

    Parameters
    ----------
    summary : pandas.DataFrame
        The ``ingest_summary`` table (:attr:`reserve.ingest.IngestResult.summary`).

    Returns
    -------
    list of str
    """
    steps = summary[summary["item"].str.match(r"(sed|ebd|checklists):") & summary["kept"].notna()]
    lines = ["filters (rows kept, dropped):"]
    for row in steps.itertuples(index=False):
        detail = f"  {row.value}" if isinstance(row.value, str) and row.value else ""
        lines.append(f"  {row.item:<28} {int(row.kept):>10,} {int(row.dropped):>10,}{detail}")
    return lines if len(lines) > 1 else []


def _no_legend(categorical: Mapping[str, Any] | None, legend: Mapping[str, Any] | None) -> str:
    """The note, once, when a categorical raster has no --legend ('' when every one has)."""
    missing = sorted(set(categorical or {}) - set(legend or {}))
    if not missing:
        return ""
    shown = ", ".join(f"{name}_class_<value>" for name in missing)
    example = f"--legend {missing[0]}=classes.csv"
    return (
        f"--categorical {', '.join(missing)} without --legend: its features are named {shown}, "
        f"which says nothing of the habitat in the outputs and the map; pass {example} "
        "(a CSV of class,name)"
    )


def _repeated_rows(summary: Any) -> str:
    """The note when identical repeated SED rows were dropped ('' if none)."""
    rows = summary.set_index("item")
    n = int(rows["dropped"].get("sed:repeated_rows", 0) or 0)
    if n == 0:
        return ""
    return (
        f"{n} repeated SED row{'s' if n > 1 else ''} dropped (identical copies of a sampling "
        "event's row; one of each is kept)"
    )


def _unlinked(summary: Any) -> str:
    """The warning when no EBD row of the species joins a kept SED checklist ('' if some do)."""
    from reserve.io.zerofill import UNLINKED

    rows = summary.set_index("item")
    step = "ebd:in_kept_checklists"
    detail = str(rows["value"].get(step, ""))
    if not detail.startswith(UNLINKED):
        return ""
    example = detail[len(UNLINKED) :].lstrip(", ")
    return (
        f"none of the {int(rows.at[step, 'dropped'])} EBD checklists with the species"
        f"{f' ({example})' if example else ''} is among the "
        f"{int(rows.at['checklists:zero_fill', 'kept'])} checklists kept from the SED: every "
        "checklist is a non-detection. If the EBD and the SED come from different downloads, "
        "pass the SED of the EBD's download; if the filters drop every checklist with the "
        "species, widen the region, dates or protocols"
    )


def _few_training_cells(units: Any) -> str:
    """The warning when the training cells are too few for a model to be judged ('' if not)."""
    from reserve.signal import MIN_TRAIN_CELLS, MIN_TRAIN_POSITIVE, too_few_training_cells

    role, label = units["role"].astype(str), units["label"]
    train = role == "train"
    n, pos = int(train.sum()), int((train & (label == 1)).sum())
    if not too_few_training_cells(n, pos):
        return ""
    surveyed = (role == "candidate") & label.isin((0, 1))
    return (
        f"only {n} training cells ({pos} with a detection): too few for any habitat model to "
        f"be judged by cross-validation (it takes at least {MIN_TRAIN_CELLS}, "
        f"{MIN_TRAIN_POSITIVE} with and without a detection); {int(surveyed.sum())} surveyed "
        "private cells can still check the ranking ('reserve select' does), and "
        "'--learn-from surveyed' learns from them. Widen --public, the dates or --cell-size"
    )


@main.command("select", short_help="Choose the cells to buy; write a GeoPackage and a map.")
@_declared(SELECT_OPTIONS)
@click.option("--config", type=click.Path(), help="TOML file with the same names as the flags.")
def select_command(config: str | None, **kw: object) -> None:
    """Choose the cells to buy; write a GeoPackage and a map.

    TTK (or a baseline) fits a habitat model on the surveyed public cells and chooses the
    --budget best private candidate cells; the table goes to stdout, the progress and any
    warning (a model that ranks nothing, a tie at the budget's cut) to stderr.
    """
    import time

    from reserve.config import SelectOptions

    ctx = click.get_current_context()
    given = {
        k: v
        for k, v in kw.items()
        if ctx.get_parameter_source(k) is not click.core.ParameterSource.DEFAULT
    }
    options = SelectOptions.from_sources(given, config)
    t0 = time.perf_counter()

    def progress(message: str) -> None:
        click.echo(f"[{time.perf_counter() - t0:6.1f} s] {message}", err=True)

    drawer = _start_map_drawer(options)  # before the imports below, on another processor
    try:
        from reserve.select import run_selection

        result = run_selection(
            options, progress=progress, config=options.to_dict(), map_drawer=drawer
        )
    finally:
        if drawer is not None:
            drawer.cancel()
    if result.summary.get("signal", "ok") != "ok":
        click.echo(f"reserve: warning: {result.summary['signal_note']}", err=True)
    for warning in filter(None, str(result.summary.get("target_warnings", "")).split(" | ")):
        click.echo(f"reserve: warning: {warning}", err=True)
    from reserve.report import print_selection

    print_selection(result)


#: What drawing the map imports (folium compiles its page templates on import: about 1 s).
MAP_MODULES = ("reserve.maps", "folium", "branca.element", "jinja2")


def _start_map_drawer(options: SelectOptions) -> Standby | None:
    """A child forked now to draw the run's map (:class:`reserve.fork.Standby`), or None.

    It imports :data:`MAP_MODULES` on a second processor while this process imports the
    models and fits, and then draws the map while this process writes the GeoPackage. None
    without a map, with one processor (``--n-jobs 1``) or where no child may be forked.
    """
    if options.map is False or options.out is None or options.n_jobs < 2:
        return None
    from reserve.fork import fork_standby

    return fork_standby(MAP_MODULES)


@main.command("evaluate", short_help="Score a selection against a simulated true occupancy.")
@click.argument("selection", required=False, type=click.Path())
@click.option(
    "--cell-ids", metavar="ID,ID", help="Selected cell ids, comma-separated (instead of SELECTION)."
)
@click.option(
    "--truth",
    "truth_path",
    type=click.Path(),
    help="Truth CSV: cell_id, psi, occupied (default: the embedded region's).",
)
@click.option(
    "--species", metavar="NAME", help="Embedded region's virtual species (default: the first)."
)
def evaluate_command(
    selection: str | None, cell_ids: str | None, truth_path: str | None, species: str | None
) -> None:
    """Score a selection against a simulated true occupancy.

    Prints the precision of SELECTION (a reserve.gpkg written by reserve select) or of
    --cell-ids against the true occupancy of a simulated region: the embedded region (reserve
    select without --cells) or a --truth CSV. A real region has no truth to compare with.
    """
    from reserve.evaluate import (
        evaluate_representation,
        evaluate_selection,
        read_representation,
        read_selection,
    )

    if selection is None and cell_ids is None:
        raise InvalidInputError(
            "pass what to evaluate: SELECTION (the reserve.gpkg that reserve select wrote, e.g. "
            "reserve evaluate results/reserve.gpkg) or --cell-ids 12,40,73"
        )
    if selection is not None and cell_ids is not None:
        raise InvalidInputError("pass either SELECTION or --cell-ids, not both")
    if selection is not None and truth_path is None:
        _check_simulated(selection)
    ids = read_selection(selection) if selection else _int_list(cell_ids, "--cell-ids")
    plan = None if selection is None or truth_path or species else read_representation(selection)
    if plan is not None:  # several species planned together: each against its own truth
        _echo_representation(evaluate_representation(ids, plan))  # type: ignore[arg-type]
        return
    r = evaluate_selection(ids, truth_path, species)  # type: ignore[arg-type]
    click.echo(
        f"precision@{r['k']} = {r['n_occupied']}/{r['k']} = {r['precision']:.3f} "
        f"(expected {r['expected_precision']:.3f}; prevalence {r['prevalence']:.3f})"
    )


def _echo_representation(table: Any) -> None:
    """One line per species: precision against its truth and whether its target was met."""
    for r in table.itertuples(index=False):
        target = (
            "no target"
            if r.met is None
            else f"target {r.target:.1f}: {'met' if r.met else 'not met'} "
            f"(expected {r.expected:.1f})"
        )
        click.echo(
            f"{r.species}: precision@{r.k} = {r.n_occupied}/{r.k} = {r.precision:.3f} "
            f"(expected {r.expected_precision:.3f}); {target}"
        )


def _check_simulated(selection: str) -> None:
    """Refuse, with the reason, a selection made on a real region: it has no truth."""
    from pathlib import Path

    import pyogrio

    from reserve.default_region import default_cache_dir
    from reserve.errors import DataFileError

    path = Path(selection)
    if path.suffix.lower() != ".gpkg" or not path.is_file():
        return  # a list of ids, or a missing file: evaluate_selection says what is wrong
    try:
        row = pyogrio.read_dataframe(path, layer="run_summary", read_geometry=False)
        cells = str(row["cells_path"].iloc[0])
    except Exception:  # no run summary to tell: let the truth check decide
        return
    if Path(cells).resolve().parent != default_cache_dir().resolve():
        raise DataFileError(
            f"SELECTION {selection!r} was chosen on the cells of {cells!r}, a real region: "
            "its true occupancy is unknown, so there is nothing to evaluate against. A truth "
            "exists only for simulated regions (the embedded region: reserve select without "
            "--cells; or pass --truth with a simulated truth CSV). For a real region read "
            "run_summary's cv_precision and signal instead"
        )


@main.group("benchmark", short_help="Reproduce the paper's benchmark tables.")
def benchmark_group() -> None:
    """Reproduce the paper's benchmark tables."""


@benchmark_group.command("paper", short_help="Reproduce the paper's Tables 2 and 3.")
@click.option("--table", "tables", default="3,2", show_default=True, help="Tables: 3, 2 or 3,2.")
@click.option("--datasets", default=None, help="Comma-separated subset (default: the paper's).")
@click.option("--methods", default=None, help="Comma-separated subset (default: the paper's).")
@click.option(
    "--splits", "n_splits", type=int, default=10, show_default=True, help="Random 50/50 splits."
)
@click.option(
    "--k-fraction",
    type=float,
    default=0.05,
    show_default=True,
    help="k as a share of the test half.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the splits.")
@click.option(
    "--time-limit", type=float, default=30.0, show_default=True, help="Seconds per TTK-MIP fit."
)
@click.option(
    "--fit-time-limit",
    type=float,
    default=10.0,
    show_default=True,
    help="Seconds per TSVM final fit.",
)
@click.option("--jobs", "n_jobs", type=int, default=2, show_default=True, help="Worker processes.")
@click.option(
    "--cv-ttk",
    type=click.Choice(["fd", "full"]),
    default="fd",
    show_default=True,
    help="TTK-FD's CV fits: fd = without the polish (final fit polishes), full = with it.",
)
@click.option(
    "--cv-jobs", type=int, default=1, show_default=True, help="Worker processes inside each CV."
)
@click.option(
    "--cv-fit-time-limit",
    type=float,
    default=3.0,
    show_default=True,
    help="Seconds per TSVM CV fit.",
)
@click.option(
    "--data-dir",
    type=click.Path(),
    default=None,
    help="Read <dataset>.csv here instead of the bundle.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(),
    default="benchmarks/results",
    show_default=True,
    help="Folder for the tables (Markdown) and the runs (CSV).",
)
@click.option(
    "--progress/--no-progress", default=True, show_default=True, help="Show a progress bar."
)
def benchmark_paper_command(**kw: Any) -> None:
    """Table 3 (precision@5% with C by CV) and Table 2 (losses at C=1), beside the paper."""
    from reserve.paper.benchmark import reproduce_paper

    for key in ("tables", "datasets", "methods"):
        if kw[key] is not None:
            kw[key] = [v.strip() for v in str(kw[key]).split(",") if v.strip()]
    show = kw.pop("progress")
    if not show:
        click.echo("\n".join(reproduce_paper(**kw).values()))
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    # The bar starts with the first finished run, i.e. after every input check has passed,
    # so bad input still gives exactly one line on stderr.
    state: dict[str, Any] = {}

    def tick(rec: Any, total: int) -> None:
        if "bar" not in state:
            bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
            )
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task("runs", total=total)
        state["bar"].update(
            state["task"],
            advance=1,
            description=f"{rec.dataset} {rec.method}",
        )

    try:
        tables = reproduce_paper(progress=tick, **kw)
    finally:
        if "bar" in state:
            state["bar"].stop()
    for name, md in tables.items():
        click.echo(f"Table {name} (written to {kw['out_dir']}/paper_table{name}.md)\n\n{md}")


def run() -> None:
    """The ``reserve`` console script: :func:`main`, then a quick exit.

    Ctrl-C and SIGTERM (``kill``, a scheduler's timeout) end the run at any moment with one
    ``reserve: error:`` line and exit code 130 or 143 (:mod:`reserve.interrupt`); during the
    work they unwind it, so the temporary files of unfinished outputs are removed at once (by
    default SIGTERM ends the process where it stands, leaving them for the next run).

    When the command is done, every object still alive is frozen (:func:`gc.freeze`) so
    that the interpreter's last garbage collection does not walk them: the process is
    ending, and the objects that scikit-learn, SciPy and pandas leave behind cost that
    collection about 0.6 s of every run. Outputs are complete and renamed by then, and
    ``atexit`` handlers still run. :func:`main` itself, which tests invoke in-process,
    freezes nothing.
    """
    interrupt.install()  # already done by reserve.__main__ or python -m (reserve/__init__.py)
    try:
        main()
    finally:
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    run()
