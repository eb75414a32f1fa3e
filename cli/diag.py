"""``alpharl diag RUN [RUN_B]``: the report viewer over a run's Arrow diagnostics."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alpharl import jsontext, report
from alpharl.cli.errors import UserError, user_errors


def diag(
    run: Annotated[Path, typer.Argument(help="Run directory (or its diagnostics.arrows).", show_default=False)],
    run_b: Annotated[Path | None, typer.Argument(help="A second run: compare the two side by side.", show_default=False)] = None,
    slots: Annotated[str | None, typer.Option("--slots", "-s", help="Columns to show: comma-separated patterns over slot names, metric names or groups, e.g. 'lr_*,v_blend,pnl'. (default: every non-obs slot, throughput and metrics)", show_default=False)] = None,
    chart: Annotated[bool | None, typer.Option("--chart/--no-chart", help="Terminal charts of the selected columns. (default: on with --slots)", show_default=False)] = None,
    width: Annotated[int, typer.Option("--width", help="Chart width in characters.")] = 60,
    height: Annotated[int, typer.Option("--height", help="Chart height in lines.")] = 6,
    png: Annotated[Path | None, typer.Option("--png", help="Also draw the selected columns into this PNG (needs matplotlib).", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary (and comparison) as JSON for scripts.")] = False,
) -> None:
    """Summarise a run's diagnostics (first, last, min, max, trend per slot), chart slots, compare two runs."""
    with user_errors():
        if width < 8 or height < 1:
            raise UserError(f"--width {width} / --height {height}: need width >= 8 and height >= 1")
        runs = [report.load_run(run)] + ([report.load_run(run_b)] if run_b is not None else [])
        names = _selection(runs, slots)
        if png is not None:
            _png(runs, names, png, limit=slots is None)
        if as_json:
            typer.echo(jsontext.dumps(report.report_json(runs, names), indent=1))
            return
        from rich.console import Console

        console = Console()
        if len(runs) == 1:
            console.print(report.summary_table(runs[0], names, width=console.width))
        else:
            console.print(report.compare_table(runs[0], runs[1], names, width=console.width))
        if chart if chart is not None else slots is not None:
            console.print(report.charts(runs, names, width=width, height=height))
        if png is not None:
            console.print(f"wrote {png}")


def _selection(runs, slots: str | None) -> list[str]:
    """The selected columns of the first run, then any the second run adds."""
    names = report.select_columns(runs[0], slots)
    for extra in runs[1:]:
        try:
            more = report.select_columns(extra, slots)
        except report.ReportError:
            more = []
        names += [n for n in more if n not in names]
    return names


def _png(runs, names, out: Path, limit: bool) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError(f"--png {out}: matplotlib is not installed (pip install 'alpharl[plot]')") from None
    if not out.parent.exists():
        raise UserError(f"--png {out}: no such directory {out.parent}")
    report.save_png(runs, names, out, max_panels=report.PNG_MAX_PANELS if limit else None)
