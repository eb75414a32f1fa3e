"""Reports over a run's Arrow diagnostics: summaries, terminal charts, comparisons, PNG.

The logic behind ``alpharl diag`` lives here, apart from the command line, so
notebooks and the dashboard can use it too.

A *column* is named as a person reads it: an ISV slot by its slot name
(``lr_q``, the table's ``isv.lr_q``), a trainer metric by its metric name
(``losses/q``, ``pnl/mean``), a throughput column by its own name
(``steps_per_s``). ``select_columns`` picks columns by comma-separated shell
patterns over those names, full table column names, metric names without their
prefix (``win_rate`` = ``trades/win_rate``), ISV group names (``lr``,
``v_blend``) or metric prefixes (``pnl`` = ``pnl/*``).

Trend of a column: the least-squares slope of value against step (``slope``,
per 1000 steps) and an arrow from last vs first value: ``↑``/``↓`` when the
change exceeds ``TREND_FLAT_FRACTION`` of the column's range, ``→`` otherwise.
"""
from __future__ import annotations

import fnmatch
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from alpharl import isv as S
from alpharl.diag import ISV_PREFIX, read_diagnostics
from alpharl.jsontext import finite_or_none
from alpharl.rundir import CONFIG_FILE, DIAG_FILE, PARQUET_FILE, SUMMARY_FILE

#: Columns of the diagnostics table that are bookkeeping, never summarised.
BOOKKEEPING = ("step", "wall_time", "unix_time")
#: Throughput columns, summarised like slots.
THROUGHPUT = ("steps_per_s", "env_steps_per_s")
#: ISV groups left out of the default selection (raw per-step observations: their EMAs are shown).
DEFAULT_HIDDEN_GROUPS = ("obs",)
#: |last - first| below this fraction of (max - min) reads as flat.
TREND_FLAT_FRACTION = 0.05
#: Slope unit: change per this many steps.
SLOPE_STEPS = 1000
#: Sparkline glyphs, lowest to highest.
SPARK_GLYPHS = "▁▂▃▄▅▆▇█"
#: Block glyphs for the column charts: eighths of a cell, empty to full.
EIGHTHS = " ▁▂▃▄▅▆▇█"
#: The most charts a PNG draws when no --slots selects them.
PNG_MAX_PANELS = 24


class ReportError(ValueError):
    """A run or selection that cannot be reported (one line naming the path or pattern)."""


# ------------------------------------------------------------------ loading
@dataclass
class Run:
    """A run's diagnostics as float64 columns keyed by readable name."""

    name: str
    path: Path
    steps: np.ndarray
    wall_time: np.ndarray
    columns: dict[str, np.ndarray]
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return int(self.steps.shape[0])


def _readable_name(column: str) -> str:
    return column[len(ISV_PREFIX):] if column.startswith(ISV_PREFIX) else column


def load_run(path: Path | str) -> Run:
    """Load a run directory (or its ``diagnostics.arrows`` / ``diagnostics.parquet``).

    Raises ``ReportError`` with one line for a missing path, a directory without
    diagnostics, an unreadable or corrupt file.
    """
    import pyarrow as pa

    path = Path(path)
    if not path.exists():
        raise ReportError(f"{path}: no such run directory or diagnostics file")
    run_dir = path if path.is_dir() else path.parent
    if path.is_dir():
        path = path / DIAG_FILE
        if not path.exists() and (run_dir / PARQUET_FILE).exists():
            path = run_dir / PARQUET_FILE
        if not path.exists():
            raise ReportError(f"{run_dir}: no {DIAG_FILE} there (not a run directory?)")
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        else:
            table = read_diagnostics(path)
    except (IsADirectoryError, PermissionError) as exc:
        raise ReportError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (pa.ArrowInvalid, pa.ArrowException, OSError, ValueError) as exc:
        raise ReportError(f"{path}: not an alpharl diagnostics file ({_one_line(exc)})") from None
    if "step" not in table.column_names:
        raise ReportError(f"{path}: not an alpharl diagnostics file (no 'step' column)")
    cols = {}
    for name in table.column_names:
        if name in BOOKKEEPING:
            continue
        arr = table.column(name)
        if not (pa.types.is_floating(arr.type) or pa.types.is_integer(arr.type)):
            continue
        cols[_readable_name(name)] = arr.to_numpy(zero_copy_only=False).astype(np.float64)
    steps = table.column("step").to_numpy(zero_copy_only=False).astype(np.int64)
    wall = (table.column("wall_time").to_numpy(zero_copy_only=False).astype(np.float64)
            if "wall_time" in table.column_names else np.zeros(len(steps)))
    return Run(name=run_dir.name or str(run_dir), path=run_dir, steps=steps, wall_time=wall, columns=cols,
               config=_read_toml(run_dir / CONFIG_FILE), summary=_read_json(run_dir / SUMMARY_FILE))


def _read_toml(path: Path) -> dict:
    import tomllib

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, ValueError):
        return {}


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# ---------------------------------------------------------------- selection
def _metric_prefix(name: str) -> str | None:
    return name.split("/", 1)[0] if "/" in name else None


def default_columns(run: Run) -> list[str]:
    """Every ISV slot outside the raw-observation group, throughput, then every metric."""
    hidden = {s.name for s in S.SLOTS if s.group in DEFAULT_HIDDEN_GROUPS}
    return [c for c in run.columns if c not in hidden]


def select_columns(run_columns, patterns: str | None) -> list[str]:
    """Columns matching comma-separated patterns (see module doc), in table order.

    ``run_columns`` is a ``Run`` or an iterable of readable column names.
    """
    names = list(run_columns.columns) if isinstance(run_columns, Run) else list(run_columns)
    if not patterns:
        if isinstance(run_columns, Run):
            return default_columns(run_columns)
        hidden = {s.name for s in S.SLOTS if s.group in DEFAULT_HIDDEN_GROUPS}
        return [c for c in names if c not in hidden]
    chosen: set[str] = set()
    for pattern in (p.strip() for p in patterns.split(",")):
        if not pattern:
            continue
        hit = {c for c in names if _matches(c, pattern)}
        if not hit:
            groups = ", ".join(sorted(set(S.GROUPS) | {p for c in names if (p := _metric_prefix(c))}))
            raise ReportError(f"--slots {pattern!r}: no slot, metric or group matches (groups: {groups})")
        chosen |= hit
    return [c for c in names if c in chosen]


def _matches(name: str, pattern: str) -> bool:
    slot = S.BY_NAME.get(name)
    full = ISV_PREFIX + name if slot is not None else name
    prefix = _metric_prefix(name)
    return (fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(full, pattern)
            or (slot is not None and slot.group == pattern) or prefix == pattern
            or (prefix is not None and fnmatch.fnmatchcase(name[len(prefix) + 1:], pattern)))


# ---------------------------------------------------------------- summaries
@dataclass
class ColumnSummary:
    first: float
    last: float
    min: float
    max: float
    mean: float
    slope: float
    """Least-squares change per SLOPE_STEPS steps (NaN with fewer than two finite rows)."""
    trend: str
    """↑, ↓ or → (last vs first against the range); '' when nothing finite was recorded."""

    def to_dict(self) -> dict:
        return {k: finite_or_none(v) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def summarize_column(steps: np.ndarray, values: np.ndarray) -> ColumnSummary:
    ok = np.isfinite(values)
    if not ok.any():
        nan = float("nan")
        return ColumnSummary(nan, nan, nan, nan, nan, nan, "")
    v, x = values[ok], steps[ok].astype(np.float64)
    first, last, lo, hi = float(v[0]), float(v[-1]), float(v.min()), float(v.max())
    slope = float("nan")
    if v.size >= 2 and np.ptp(x) > 0:
        xc = x - x.mean()
        slope = float((xc * (v - v.mean())).sum() / (xc * xc).sum() * SLOPE_STEPS)
    return ColumnSummary(first, last, lo, hi, float(v.mean()), slope, trend_arrow(first, last, lo, hi))


def trend_arrow(first: float, last: float, lo: float, hi: float) -> str:
    span = hi - lo
    if not span > 0 or abs(last - first) <= TREND_FLAT_FRACTION * span:
        return "→"
    return "↑" if last > first else "↓"


def run_header(run: Run) -> dict:
    """Where and how long: path, rows, steps, wall time, mean throughput, config basics."""
    sps = run.columns.get("steps_per_s")
    head = {
        "path": str(run.path),
        "rows": run.rows,
        "first_step": int(run.steps[0]) if run.rows else None,
        "last_step": int(run.steps[-1]) if run.rows else None,
        "wall_time_s": finite_or_none(float(run.wall_time[-1])) if run.rows else None,
        "mean_steps_per_s": finite_or_none(float(np.nanmean(sps))) if sps is not None and run.rows and np.isfinite(sps).any() else None,
    }
    for key in ("b", "seed", "backend", "steps", "data", "synthetic"):
        if key in run.config:
            head[key] = run.config[key]
    return head


def compare(run_a: Run, run_b: Run, names: list[str]) -> dict[str, dict]:
    """Last values of both runs and the change B - A (relative to |A| when A != 0)."""
    out = {}
    for n in names:
        a = summarize_column(run_a.steps, run_a.columns[n]).last if n in run_a.columns else float("nan")
        b = summarize_column(run_b.steps, run_b.columns[n]).last if n in run_b.columns else float("nan")
        delta = b - a
        rel = delta / abs(a) if math.isfinite(delta) and a != 0 else float("nan")
        out[n] = {"a": finite_or_none(a), "b": finite_or_none(b), "delta": finite_or_none(delta), "rel": finite_or_none(rel)}
    return out


def report_json(runs: list[Run], names: list[str]) -> dict:
    """The machine-readable report: per run its header and column summaries; with two runs the comparison."""
    out = {"runs": [{**run_header(r), "columns": {n: summarize_column(r.steps, r.columns[n]).to_dict()
                                                  for n in names if n in r.columns}} for r in runs]}
    if len(runs) == 2:
        out["compare"] = compare(runs[0], runs[1], names)
    return out


# --------------------------------------------------------------- formatting
def fmt(x) -> str:
    """Four significant digits; '-' for missing/non-finite."""
    if x is None or not isinstance(x, (int, float, np.floating, np.integer)) or not math.isfinite(x):
        return "-"
    x = float(x)
    if x != 0 and (abs(x) >= 1e5 or abs(x) < 1e-3):
        return f"{x:.3e}"
    return f"{x:.4g}"


def sparkline(values, width: int | None = None) -> str:
    """One row of block glyphs; the last ``width`` points (or all), scaled min..max; NaN as a space."""
    v = np.asarray(values, dtype=np.float64)
    if width is not None and v.size > width:
        v = _resample(v, width)
    ok = np.isfinite(v)
    if not ok.any():
        return " " * v.size
    lo, hi = float(v[ok].min()), float(v[ok].max())
    top = len(SPARK_GLYPHS) - 1
    if hi > lo:
        idx = np.clip(np.round((v - lo) / (hi - lo) * top), 0, top)
    else:
        idx = np.full(v.shape, top // 2)
    return "".join(SPARK_GLYPHS[int(i)] if good else " " for i, good in zip(np.nan_to_num(idx), ok))


def _resample(v: np.ndarray, width: int) -> np.ndarray:
    """Mean of each of ``width`` equal bins (NaN-aware), keeping the series' shape for narrow charts."""
    edges = np.linspace(0, v.size, width + 1).astype(int)
    out = np.full(width, np.nan)
    for i in range(width):
        chunk = v[edges[i]:max(edges[i + 1], edges[i] + 1)]
        if np.isfinite(chunk).any():
            out[i] = np.nanmean(chunk)
    return out


def column_chart(steps: np.ndarray, values: np.ndarray, width: int = 60, height: int = 8) -> list[str]:
    """A filled column chart in block glyphs (eighths of a cell), y labels left, steps below.

    Each column is the mean of its bin of rows; the baseline is the series'
    minimum, so small changes of a large value stay visible.
    """
    v = _resample(np.asarray(values, dtype=np.float64), width) if len(values) > width else np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v)
    label_w = 10
    if not ok.any():
        return [" " * label_w + "│ (no finite values)"]
    lo, hi = float(v[ok].min()), float(v[ok].max())
    span = hi - lo if hi > lo else 1.0
    cells = np.where(ok, np.round((v - lo) / span * (height * 8 - 1)) + 1, 0).astype(int) if hi > lo \
        else np.where(ok, height * 4, 0)
    lines = []
    for row in range(height - 1, -1, -1):
        fill = np.clip(cells - row * 8, 0, 8)
        label = fmt(hi) if row == height - 1 else fmt(lo) if row == 0 else ""
        lines.append(f"{label:>{label_w}}│" + "".join(EIGHTHS[int(f)] for f in fill))
    n = v.size
    left, right = (str(int(steps[0])), str(int(steps[-1]))) if len(steps) else ("", "")
    lines.append(" " * label_w + "└" + "─" * n)
    lines.append(" " * (label_w + 1) + left + " " * max(1, n - len(left) - len(right)) + right)
    return lines


# -------------------------------------------------------------- rich output
#: Widest number ``fmt`` writes (e.g. -6.913e+04).
NUMBER_WIDTH = 10
#: Widest column name shown whole (longer ones end in an ellipsis) and a group name's width.
NAME_WIDTH, GROUP_WIDTH = 24, 8
#: Narrowest sparkline worth showing.
MIN_SPARK = 8


def _cell(w: int) -> int:
    """Console columns of a table cell of content width w (padding and its border)."""
    return w + 3


def _fit(names: list[str], width: int | None, fixed: int, spark_width: int, n_sparks: int,
         minmax: bool) -> dict:
    """The optional columns of a table that fit `width` console columns (None: all), beside the
    column names and `fixed` console columns of numbers that are always shown. In order: min and max
    (where the table has them) if the sparklines keep at least MIN_SPARK; the group if the sparklines
    keep their full width; then the n_sparks sparklines share the rest (MIN_SPARK..spark_width, else none).
    """
    name_w = min(max((len(n) for n in names), default=6), NAME_WIDTH)
    lay = {"name": name_w, "group": True, "spark": spark_width}
    if minmax:
        lay["minmax"] = True
    if width is None:
        return lay
    room = width - 1 - _cell(name_w) - fixed
    if minmax:
        lay["minmax"] = room >= 2 * _cell(NUMBER_WIDTH) + n_sparks * _cell(MIN_SPARK)
        room -= 2 * _cell(NUMBER_WIDTH) if lay["minmax"] else 0
    lay["group"] = room >= _cell(GROUP_WIDTH) + n_sparks * _cell(spark_width)
    room -= _cell(GROUP_WIDTH) if lay["group"] else 0
    spark = min(spark_width, room // n_sparks - 3)
    lay["spark"] = spark if spark >= MIN_SPARK else 0
    return lay


def fit_columns(width: int | None, widths: list[int], give_way: list[int]) -> list[int]:
    """The columns of a table of numbers kept on a console of `width` columns (None: all), by index.

    The same rule as ``_fit``: numbers are never cut. ``widths`` is each column's content width
    (its widest cell, or its header's longest word: headers may wrap); the columns of ``give_way``
    are left out in that order until the rest fit whole. Tables call ``fitted_table``.
    """
    keep = list(range(len(widths)))
    for i in give_way if width is not None else []:
        if 1 + sum(_cell(widths[j]) for j in keep) <= width:
            break
        keep.remove(i)
    return keep


def fitted_table(headers: list[str], rows: list[list[str]], width: int | None, give_way: list[int],
                 lead: int = 1, **table_kw):
    """A Rich table of ``rows`` (strings, the first ``lead`` columns left-aligned labels, the rest
    right-aligned numbers) fitted to `width` console columns by ``fit_columns``; the caption names
    the columns left out."""
    from rich.table import Table

    widths = [max([len(r[i]) for r in rows] + [max(len(w) for w in h.split())]) for i, h in enumerate(headers)]
    keep = fit_columns(width, widths, give_way)
    table = Table(**table_kw)
    for i in keep:
        table.add_column(headers[i], justify="left" if i < lead else "right", min_width=widths[i])
    for r in rows:
        table.add_row(*[r[i] for i in keep])
    left_out = [headers[i] for i in range(len(headers)) if i not in keep]
    if left_out:
        note = f"left out at {width} columns: {', '.join(left_out)} (--json has every column)"
        table.caption = note if not table.caption else f"{table.caption}\n{note}"
    return table


def compare_layout(names: list[str], width: int | None, spark_width: int = 16) -> dict:
    """The two-run table's fit to `width` console columns (``_fit``): column, A last, B last, B - A
    and rel always; then the two sparklines, then the group."""
    return _fit(names, width, 3 * _cell(NUMBER_WIDTH) + _cell(7), spark_width, 2, minmax=False)


def summary_layout(names: list[str], width: int | None, spark_width: int = 24) -> dict:
    """The summary's fit to `width` console columns (``_fit``): column, first, last, trend, slope
    always (numbers are never cut); then min and max, the sparkline, the group."""
    return _fit(names, width, 3 * _cell(NUMBER_WIDTH) + _cell(5), spark_width, 1, minmax=True)


def summary_table(run: Run, names: list[str], spark_width: int = 24, width: int | None = None):
    """A Rich table: column, first, last, min, max, trend arrow, slope, sparkline; on a console of
    `width` columns, the optional ones that fit (``summary_layout``)."""
    from rich.table import Table

    head = run_header(run)
    title = (f"{run.name}: {head['rows']} rows, steps {head['first_step']}..{head['last_step']}, "
             f"{fmt(head['wall_time_s'])} s" if run.rows else f"{run.name}: no rows yet")
    lay = summary_layout(names, width, spark_width)
    table = Table(title=title, title_justify="left")
    table.add_column("column", no_wrap=True, overflow="ellipsis", max_width=lay["name"])
    if lay["group"]:
        table.add_column("group", style="dim", no_wrap=True, overflow="crop", max_width=GROUP_WIDTH)
    stats = ("first", "last", "min", "max") if lay["minmax"] else ("first", "last")
    for c in stats:
        table.add_column(c, justify="right", no_wrap=True, min_width=NUMBER_WIDTH)
    table.add_column("trend", justify="center", no_wrap=True)
    table.add_column(f"slope/{SLOPE_STEPS}", justify="right", no_wrap=True, min_width=NUMBER_WIDTH)
    if lay["spark"]:
        table.add_column("history", no_wrap=True)
    for n in names:
        s = summarize_column(run.steps, run.columns[n])
        row = [n] + ([_group_of(n)] if lay["group"] else []) + [fmt(getattr(s, c)) for c in stats]
        row += [s.trend, fmt(s.slope)] + ([sparkline(run.columns[n], lay["spark"])] if lay["spark"] else [])
        table.add_row(*row)
    return table


def compare_table(run_a: Run, run_b: Run, names: list[str], width: int | None = None):
    """A Rich table of two runs: last values, difference, relative change, both sparklines; on a
    console of `width` columns, the optional ones that fit (``compare_layout``)."""
    from rich.table import Table

    lay = compare_layout(names, width)
    table = Table(title=f"A = {run_a.name} ({run_a.rows} rows, step {_last_step(run_a)})   "
                        f"B = {run_b.name} ({run_b.rows} rows, step {_last_step(run_b)})", title_justify="left")
    table.add_column("column", no_wrap=True, overflow="ellipsis", max_width=lay["name"])
    if lay["group"]:
        table.add_column("group", style="dim", no_wrap=True, overflow="crop", max_width=GROUP_WIDTH)
    for c in ("A last", "B last", "B - A"):
        table.add_column(c, justify="right", no_wrap=True, min_width=NUMBER_WIDTH)
    table.add_column("rel", justify="right", no_wrap=True)
    if lay["spark"]:
        table.add_column("A history", no_wrap=True)
        table.add_column("B history", no_wrap=True)
    for n, d in compare(run_a, run_b, names).items():
        rel = "-" if d["rel"] is None else f"{d['rel']:+.1%}"
        row = [n] + ([_group_of(n)] if lay["group"] else []) + [fmt(d["a"]), fmt(d["b"]), fmt(d["delta"]), rel]
        if lay["spark"]:
            row += [sparkline(run_a.columns.get(n, []), lay["spark"]), sparkline(run_b.columns.get(n, []), lay["spark"])]
        table.add_row(*row)
    return table


def charts(runs: list[Run], names: list[str], width: int = 60, height: int = 6):
    """One Rich panel per column, holding a column chart per run."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    panels = []
    for n in names:
        parts = []
        for r in runs:
            if n not in r.columns:
                continue
            if len(runs) > 1:
                parts.append(Text(r.name, style="bold"))
            parts.append(Text("\n".join(column_chart(r.steps, r.columns[n], width, height))))
        panels.append(Panel(Group(*parts), title=n, title_align="left", expand=False))
    return Group(*panels)


def _group_of(name: str) -> str:
    slot = S.BY_NAME.get(name)
    if slot is not None:
        return slot.group
    if name in THROUGHPUT:
        return "throughput"
    return _metric_prefix(name) or ""


def _last_step(run: Run):
    return int(run.steps[-1]) if run.rows else "-"


# ---------------------------------------------------------------------- PNG
def save_png(runs: list[Run], names: list[str], out: Path | str, max_panels: int | None = PNG_MAX_PANELS) -> Path:
    """One subplot per column (every run overlaid), written with matplotlib's Agg backend.

    Raises ``ImportError`` when matplotlib is missing (the ``plot`` extra).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    names = names[:max_panels] if max_panels is not None else names
    if not names:
        raise ReportError("--png: no columns selected")
    ncols = min(3, len(names))
    nrows = math.ceil(len(names) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 2.6 * nrows), squeeze=False)
    for ax, n in zip(axes.flat, names):
        for r in runs:
            if n in r.columns:
                ax.plot(r.steps, r.columns[n], label=r.name, linewidth=1.0)
        ax.set_title(n, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    if len(runs) > 1:
        axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
