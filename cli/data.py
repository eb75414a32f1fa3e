"""``alpharl data``: inspect LOBSTER market data (the embedded sample by default)."""
from __future__ import annotations

from typing import Annotated

import typer

from alpharl import jsontext
from alpharl.cli.errors import user_errors
from alpharl.dataset import file_labels, find_sources
from alpharl.lobster import cache as lobster_cache
from alpharl.lobster.load import load_lobster
from alpharl.lobster.sample import load_embedded
from alpharl.lobster.stats import describe

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)


@app.callback()
def data() -> None:
    """LOBSTER market data: the files the simulator replays."""


@app.command()
def info(
    path: Annotated[str | None, typer.Argument(
        help="LOBSTER zip, message CSV, Arrow cache, or a folder or glob of them (one table of every file). "
             "Default: the embedded sample.", show_default=False)] = None,
    levels: Annotated[int | None, typer.Option("--levels", "-l", min=1,
                                               help="Use only the top N book levels.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache",
                                           help="Parse the CSVs; neither read nor write the Arrow cache.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON for scripts.")] = False,
) -> None:
    """Events, levels, time span, tick size, spread and depth statistics, event-type counts; for a folder
    or glob of several files, one line per file (events, levels, time span, tick)."""
    cache = not no_cache
    with user_errors():
        if path is None:
            mds = [load_embedded(levels, cache=cache)]
        else:
            mds = [load_lobster(p, levels, cache=cache) for p in find_sources([path], option="")]
    if len(mds) > 1:
        files = [{"label": label, **describe(md)} for label, md in zip(file_labels(mds), mds)]
        if as_json:
            typer.echo(jsontext.dumps({"path": path, "files": files}, indent=1))
            return
        _print_files(path, files)
        return
    stats = describe(mds[0])
    if as_json:
        typer.echo(jsontext.dumps(stats, indent=1))
        return
    _print_table(stats)


@app.command("cache")
def cache_cmd(
    clear: Annotated[bool, typer.Option("--clear", help="Remove every cached entry.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print where and how much as JSON for scripts.")] = False,
) -> None:
    """Where the Arrow cache of parsed LOBSTER files lives and how much it holds; --clear empties it."""
    with user_errors():
        if clear:
            freed = lobster_cache.clear()
            typer.echo(f"cleared {lobster_cache.cache_dir()}: {freed / 1e6:.1f} MB freed")
            return
        info = lobster_cache.usage()
    if as_json:
        typer.echo(jsontext.dumps(info, indent=1))
        return
    typer.echo(f"{info['dir']}: {info['entries']} entries, {info['bytes'] / 1e6:.1f} MB "
               f"(cap {info['max_bytes'] / 1e6:.0f} MB, ${lobster_cache.MAX_MB_ENV}; "
               f"elsewhere: ${lobster_cache.CACHE_DIR_ENV})")


def _print_files(path: str, files: list[dict]) -> None:
    """One line per file of a folder or glob."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{path}: {len(files)} LOBSTER files", title_justify="left")
    for name, justify in (("file", "left"), ("events", "right"), ("levels", "right"), ("time span", "left"),
                          ("tick $", "right")):
        table.add_column(name, justify=justify, no_wrap=True)
    for f in files:
        table.add_row(f["label"], f"{f['events']:,}", str(f["levels"]), f["time_span"] or "-", f"{f['tick_dollars']:g}")
    table.caption = "--json: every statistic of each file and its path"
    Console().print(table)


def _print_table(stats: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{stats['ticker']} {stats['date']}  ({stats['source']})", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    spread, depth = stats["spread_ticks"], stats["depth"]
    rows = [
        ("levels", str(stats["levels"])),
        ("events", f"{stats['events']:,}"),
        ("time span", stats["time_span"] or "-"),
        ("tick size", f"${stats['tick_dollars']:g} ({stats['tick']} price units)"),
        ("spread (ticks)", "-" if spread is None else
         f"mean {spread['mean']:.2f}  median {spread['median']:g}  p99 {spread['p99']:g}  max {spread['max']:g}"
         + (f"  ({spread['rows_one_sided']:,} one-sided rows left out)" if spread["rows_one_sided"] else "")),
        ("depth level 1 (shares)", f"ask {depth['ask_level1_mean']:.1f}  bid {depth['bid_level1_mean']:.1f}  (mean)"),
        (f"depth all {stats['levels']} levels", f"ask {depth['ask_all_levels_mean']:.1f}  "
                                                f"bid {depth['bid_all_levels_mean']:.1f}  (mean)"),
        *((f"type {e['type']} {e['name']}", f"{e['count']:,}  ({e['count'] / stats['events']:.1%})")
          for e in stats["event_types"]),
        ("unknown order ids", f"{stats['unknown_order_id_fraction']:.1%} of cancel/delete/execute rows"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    Console().print(table)
