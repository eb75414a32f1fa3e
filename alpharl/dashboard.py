"""The training display: a Rich live dashboard on a terminal, plain log lines elsewhere.

    with Dashboard(total_steps=cfg.steps, b=cfg.b) as dash:
        dash.start(cfg, run_dir)
        ...                                   # every diagnostic interval:
        dash.update(step, isv_host, metrics, steps_per_s, env_steps_per_s)
        dash.log("checkpoint written")        # any time
        dash.finish(summary)

Modes:

- *live* (``console.is_terminal`` and not ``quiet``): progress with ETA,
  steps/s and env-steps/s; the ISV by group (raw observations and non-finite
  guards compact); losses; reward/PnL/trades; sparklines of a few key series
  (C51 loss against its uniform level ln 21, reward per trade, learning rates,
  V-blend alpha). ``update`` only stores the values; Rich's refresh thread lays
  out and draws the whole display once a second (a few ms), so the trainer
  pays tens of µs per interval.
- *plain* (not a terminal, e.g. a log file or CI): one line per ``update``, at
  most one every ``min_interval_s`` seconds (default ``PLAIN_MIN_INTERVAL_S``).
- *quiet*: plain lines at most once a minute (``QUIET_MIN_INTERVAL_S``), plus
  ``log`` messages and the final summary.

The first and the last update are always printed in the plain modes.
"""
from __future__ import annotations

import math
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np

from alpharl import isv as S
from alpharl.report import fmt, sparkline

#: Points of history kept per sparkline series.
HISTORY = 60
#: Seconds between plain log lines (not a terminal), and with --quiet.
PLAIN_MIN_INTERVAL_S = 2.0
QUIET_MIN_INTERVAL_S = 60.0
#: Live header refreshes per second (the body changes only on update()).
LIVE_REFRESH_PER_S = 1.0
#: ISV panels: (title, groups). A group not named here gets a panel of its own.
ISV_PANELS = (
    ("learning rates", ("lr",)),
    ("grad-norm EMAs", ("grad_norm",)),
    ("controllers", ("ppo", "target", "k_loop", "returns")),
    ("V blend", ("v_blend",)),
    ("replay", ("replay",)),
    ("signals", ("signals",)),
)
#: ISV groups drawn compactly (name=value runs), and the losses group shown in its own panel.
COMPACT_GROUPS = ("obs", "guard")
LOSS_GROUP = "losses"
LOSS_PREFIX = "losses/"
#: Series drawn as sparklines: (label, ISV slot name).
SPARK_SERIES = (
    ("loss_q (ln21 = 3.04)", "loss_q"),
    ("reward/trade EMA", "reward_per_trade_ema"),
    ("lr_q", "lr_q"),
    ("lr_pi", "lr_pi"),
    ("lr_v", "lr_v"),
    ("V blend alpha", "v_blend_alpha"),
)
#: Slots shown in a plain log line, besides losses (name, label).
PLAIN_SLOTS = (("v_blend_alpha", "alpha"), ("lr_q", "lr_q"), ("lr_pi", "lr_pi"), ("entropy_ema", "H"),
               ("reward_per_trade_ema", "r/trade"))
PLAIN_LOSSES = ("loss_q", "loss_pi", "loss_v")


def format_duration(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "-"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


class Dashboard:
    """Live Rich dashboard on a terminal, plain periodic lines otherwise (see module doc)."""

    def __init__(self, total_steps: int, b: int, console=None, quiet: bool = False,
                 min_interval_s: float | None = None):
        from rich.console import Console

        self.total_steps = int(total_steps)
        self.b = int(b)
        self.console = console if console is not None else Console()
        self.quiet = quiet
        self.live_mode = self.console.is_terminal and not quiet
        self.min_interval_s = (min_interval_s if min_interval_s is not None
                               else QUIET_MIN_INTERVAL_S if quiet else PLAIN_MIN_INTERVAL_S)
        self._live = None
        self._t_start = time.monotonic()
        self._first: tuple[float, int] | None = None   # (time, step) of the first update: ETA baseline
        self._last_plain = -math.inf
        self._pending_plain = False        # an update not printed yet (plain modes)
        self.step = 0
        self.steps_per_s = float("nan")
        self.env_steps_per_s = float("nan")
        self.isv = S.bootstrap_vector()
        self.metrics: dict[str, float] = {}
        self.history: dict[str, deque] = {name: deque(maxlen=HISTORY) for _, name in SPARK_SERIES}
        self.config = None
        self.run_dir: Path | None = None
        self._body = None
        self._dirty = True                 # the body is laid out lazily, on the Live thread
        self._depth = 0                    # context-manager nesting: the CLI and the trainer both enter it
        self._finished = False
        self._lock = threading.Lock()      # update() (trainer thread) vs rendering (Live thread)

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> "Dashboard":
        self._depth += 1
        if self.live_mode and self._live is None and not self._finished:
            from rich.live import Live

            self._live = Live(console=self.console, get_renderable=self._renderable, auto_refresh=True,
                              refresh_per_second=LIVE_REFRESH_PER_S, transient=False,
                              redirect_stdout=True, redirect_stderr=True)
            self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        self._depth = max(self._depth - 1, 0)
        if self._depth == 0:
            self._stop_live()
        return None

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.refresh()
            self._live.stop()
            self._live = None

    def start(self, config, run_dir) -> None:
        """Record the run's config and directory; announce them (one line in the plain modes)."""
        self.config = config
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self._t_start = time.monotonic()
        if not self.live_mode:
            self._print(f"alpharl train: {self.total_steps} steps, B={self.b}, backend {self._backend()}, "
                        f"seed {getattr(config, 'seed', '-')}, run dir {self.run_dir}")
        elif self._live is not None:
            self._dirty = True
            self._live.refresh()

    def update(self, step: int, isv_host: np.ndarray, metrics: dict[str, float], steps_per_s: float,
               env_steps_per_s: float) -> None:
        """Take one diagnostic interval's values (ISV float32[RL_SLOTS_END] on the host, metrics by name)."""
        # Only stores the values (tens of µs): the live body is laid out and drawn on
        # Rich's refresh thread, once a second; a plain line is formatted only when printed.
        now = time.monotonic()
        with self._lock:
            self.step = int(step)
            self.isv = np.array(isv_host, dtype=np.float32)
            self.metrics = dict(metrics)
            self.steps_per_s = float(steps_per_s)
            self.env_steps_per_s = float(env_steps_per_s)
            if self._first is None:
                self._first = (now, self.step)
            for _, name in SPARK_SERIES:
                self.history[name].append(float(self.isv[S.BY_NAME[name].index]))
            self._dirty = True
        if self.live_mode:
            return
        first = self._last_plain == -math.inf
        if first or now - self._last_plain >= self.min_interval_s or self.step >= self.total_steps:
            self._print(self._plain_line())
            self._last_plain = now
            self._pending_plain = False
        else:
            self._pending_plain = True

    def log(self, message: str) -> None:
        """A message above the live display, or a plain line."""
        if self._live is not None:
            self._live.console.print(message, markup=False, highlight=False)
        else:
            self._print(message)

    def finish(self, summary: dict) -> None:
        """Stop the live display and print the run's summary (a table on a terminal, one line otherwise).

        Only the first call prints; later ones do nothing."""
        if self._finished:
            return
        self._finished = True
        self._stop_live()
        if self._pending_plain:
            self._print(self._plain_line())
            self._pending_plain = False
        # The dataset record (files, rows) is for dataset.json and scripts, not this summary.
        shown = {k: v for k, v in summary.items() if k != "dataset"}
        flat = {k: v for k, v in _flatten(shown).items() if not isinstance(v, (list, dict))}
        if self.live_mode:
            from rich.table import Table

            table = Table(title="run summary", show_header=False, title_justify="left")
            table.add_column("", style="bold")
            table.add_column("", justify="right")
            for k, v in flat.items():
                table.add_row(k, fmt(v) if isinstance(v, float) else str(v))
            self.console.print(table)
        else:
            self._print("alpharl train: done: " + "  ".join(
                f"{k} {fmt(v) if isinstance(v, float) else v}" for k, v in flat.items()))

    # ------------------------------------------------------------ helpers
    def _print(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def _backend(self) -> str:
        return str(getattr(self.config, "backend", "-")) if self.config is not None else "-"

    def _slot(self, name: str) -> float:
        return float(self.isv[S.BY_NAME[name].index])

    def eta_s(self) -> float:
        """Remaining seconds at the mean rate since the first update (the reported rate before that)."""
        remaining = max(self.total_steps - self.step, 0)
        rate = self.steps_per_s
        if self._first is not None:
            t0, s0 = self._first
            dt = time.monotonic() - t0
            if self.step > s0 and dt > 0:
                rate = (self.step - s0) / dt
        return remaining / rate if rate and rate > 0 and math.isfinite(rate) else float("nan")

    def _plain_line(self) -> str:
        pct = 100.0 * self.step / self.total_steps if self.total_steps else 100.0
        parts = [f"step {self.step}/{self.total_steps} ({pct:.1f}%)",
                 f"{fmt(self.steps_per_s)} steps/s", f"{fmt(self.env_steps_per_s)} env-steps/s",
                 f"ETA {format_duration(self.eta_s())}"]
        parts.append(" ".join(f"{n} {fmt(self._slot(n))}" for n in PLAIN_LOSSES))
        parts.append(" ".join(f"{label} {fmt(self._slot(n))}" for n, label in PLAIN_SLOTS))
        reward = [f"{k} {fmt(v)}" for k, v in self.metrics.items() if not k.startswith(LOSS_PREFIX)]
        if reward:
            parts.append(" ".join(reward[:6]))
        return " | ".join(parts)

    # ------------------------------------------------------------ rendering
    # Rich's Table/Panel/Columns measure every cell on every render (~20-70 ms for
    # this many rows), too slow to run at each diag interval. The body is laid out
    # here with plain string formatting into one styled Text (~1 ms); only the
    # progress header uses Rich widgets.
    def _renderable(self):
        from rich.console import Group

        with self._lock:
            if self._dirty:
                self._body = self._render_body()
                self._dirty = False
            return Group(self._render_header(), self._body)

    def _render_header(self):
        from rich.panel import Panel
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        elapsed = time.monotonic() - self._t_start
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True)
        grid.add_column(width=PROGRESS_WIDTH)
        grid.add_column(no_wrap=True)
        pct = self.step / self.total_steps if self.total_steps else 1.0
        grid.add_row(f"step {self.step:,}/{self.total_steps:,} ({100 * pct:.1f}%)",
                     ProgressBar(total=max(self.total_steps, 1), completed=min(self.step, self.total_steps),
                                 width=PROGRESS_WIDTH),
                     f"elapsed {format_duration(elapsed)}  ETA {format_duration(self.eta_s())}")
        grid.add_row(f"{fmt(self.steps_per_s)} steps/s   {fmt(self.env_steps_per_s)} env-steps/s", "",
                     f"B={self.b}  backend {self._backend()}  run {self.run_dir or '-'}")
        return Panel(grid, title="alpharl train", title_align="left")

    def _sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """(title, [(label, value)]) of every panel, in display order."""
        named = {g for _, groups in ISV_PANELS for g in groups} | set(COMPACT_GROUPS) | {LOSS_GROUP}
        panels = list(ISV_PANELS) + [(g, (g,)) for g in S.GROUPS if g not in named]
        out = []
        for title, groups in panels:
            rows = []
            for s in S.SLOTS:
                if s.group in groups:
                    rows.append((s.name, fmt(self._slot(s.name))))
                    if s.index == S.RL_K_LOOP_MULT:
                        rows.append(("  K", str(S.decode_k(self.isv))))   # the fixed point read as the learner does
            out.append((title, rows))
        losses = [(s.name, fmt(self._slot(s.name))) for s in S.SLOTS if s.group == LOSS_GROUP]
        losses += [(k, fmt(v)) for k, v in self.metrics.items() if k.startswith(LOSS_PREFIX)]
        out.append(("losses", losses))
        reward = [(k, fmt(v)) for k, v in self.metrics.items() if not k.startswith(LOSS_PREFIX)]
        out.append(("reward / PnL / trades", reward or [("(no metrics yet)", "")]))
        trends = []
        for label, name in SPARK_SERIES:
            h = self.history[name]
            spark = sparkline(list(h), HISTORY) if h else ""
            trends.append((label, f"{spark:<{HISTORY}}  {fmt(h[-1]) if h else '-':>{VALUE_WIDTH}}"))
        out.append((f"trends (last {HISTORY} intervals)", trends))
        return out

    def _render_body(self):
        from rich.text import Text

        width = max(self.console.width, MIN_WIDTH)
        blocks = [_block(title, rows) for title, rows in self._sections()]
        text = Text(no_wrap=True, overflow="crop")
        for row in _pack(blocks, width):
            height = max(len(b) for b in row)
            for i in range(height):
                for b in row:
                    w = len(b[0][0])
                    seg, style = b[i] if i < len(b) else (" " * w, "")
                    text.append(seg, style)
                    text.append(" " * BLOCK_GAP)
                text.append("\n")
        for group in COMPACT_GROUPS:
            if group not in S.GROUPS:
                continue
            prefix = "obs_" if group == "obs" else ""
            text.append(group, TITLE_STYLE)
            used = len(group)
            for s in S.SLOTS:
                if s.group == group:
                    v = self._slot(s.name)
                    item = f"  {s.name.removeprefix(prefix)}={fmt(v)}"
                    if used + len(item) > width:   # wrap under the title
                        text.append("\n" + " " * len(group))
                        used = len(group)
                    text.append(item, "red" if group == "guard" and v != 0 else "")
                    used += len(item)
            text.append("\n")
        return text


#: Width of the progress bar, gap between side-by-side blocks, narrowest layout width.
PROGRESS_WIDTH = 40
BLOCK_GAP = 3
MIN_WIDTH = 60
#: Width of a formatted value (fmt gives at most 9 characters, e.g. -1.234e-05).
VALUE_WIDTH = 10
TITLE_STYLE = "bold cyan"


def _block(title: str, rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A titled column of label/value rows as (padded line, style) pairs of equal width."""
    lw = max([len(label) for label, _ in rows] + [0])
    vw = max([len(value) for _, value in rows] + [0])
    width = max(len(title), lw + 1 + vw)
    lines = [(title.ljust(width), TITLE_STYLE), ("─" * width, "dim")]
    lines += [(f"{label:<{lw}} {value:>{width - lw - 1}}", "") for label, value in rows]
    return lines


def _pack(blocks: list, width: int) -> list[list]:
    """Blocks in rows that fit ``width`` (in order; a block wider than the width gets a row alone)."""
    rows, row, used = [], [], 0
    for b in blocks:
        w = len(b[0][0]) + BLOCK_GAP
        if row and used + w > width:
            rows.append(row)
            row, used = [], 0
        row.append(b)
        used += w
    if row:
        rows.append(row)
    return rows


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = v
    return out
