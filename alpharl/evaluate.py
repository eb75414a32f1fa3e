"""Evaluation of a trained policy on a held-out window, next to baseline policies.

Every policy runs on the same market window, with the same B, seed and
simulator parameters, through the scripted driver (``alpharl.sim.driver``);
each starts from a fresh simulator with the same seed, so the episodes start
at the same offsets.

Which rows (``plan``): every file of the data (the run's, or ``--data``), each
on a window of its own. By default that is what the run held out: in a file it
trained on, the complement of its training window (alpharl.windows.held_out:
``0.8:1`` for the default ``0:0.8``); a file it never trained on (held out by
``--holdout-files``, or data it never saw; files are known by their content's
sha256), whole. ``--window A:B`` names one window for every file; one that
shares rows with what the run trained on is refused unless the caller allows
the overlap, and the file is then marked in-sample. With several files each
is evaluated on its own (B backtests) and the overall statistics pool their
runs one after the other in time (``pooled_stats``); one file is evaluated as
it always was.

Policies:

- ``sampled``: a ~ softmax(pi logits) of the checkpoint's network, drawn with
  the training sampler's NumPy twin (xorshift32 per backtest);
- ``greedy``: argmax of the pi logits;
- baselines: ``hold`` (never trade), ``random`` (uniform over the nine
  actions), ``periodic`` (market buy, hold ``period`` steps, market sell: one
  round trip per period), ``join`` (rest at the touch on both sides: join bid
  and join ask on alternate steps; re-joining the same price keeps the queue
  position), ``improve`` (improve bid and improve ask on alternate steps: one tick inside the
  touch where the spread allows, at the touch where it does not; join's twin that trades queue
  position for price, and on most LOBSTER sample days the stronger of the two).

Statistics (``trade_stats``), in dollars, from the per-step rewards r[t, b]
(change of mark-to-market equity after fees, so a trade's rewards sum to its PnL):

- ``pnl``: Σ r over steps and backtests; ``pnl_per_backtest`` = pnl / B;
- ``sharpe``: mean / std (ddof 1) of the per-step portfolio return
  x_t = mean_b r[t, b], times √(steps per year). A step spans
  ``events_per_step`` market events; the window's own event rate gives its
  seconds, and a year is ``TRADING_DAYS`` × ``TRADING_SECONDS_PER_DAY``
  (252 × 6.5 h). ``sharpe_per_step`` is the ratio before annualisation (the
  synthetic market has no clock: only that one is given);
- ``max_drawdown``: the largest fall of the equity curve Σ_{s<=t} x_s from its
  running peak (which starts at 0);
- ``trades`` (closed round trips, truncated ones included: the steps whose
  ``trade_done`` is set, so with ``episode_end = "horizon"`` every round trip,
  not only an episode's last), ``win_rate`` (share with PnL > 0),
  ``avg_trade`` (mean PnL per trade);
- ``action_share``: each action's share of the run's steps x backtests (``hold``, ``join_bid``,
  ``improve_ask``, ...): what the policy does to earn it.

A run's ``inventory_penalty`` and ``inventory_penalty_quadratic`` are set to 0 here: they shape the learning reward
only, and the statistics are of the equity.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from alpharl import actions as A
from alpharl import windows as W
from alpharl.atomic import atomic_writer
from alpharl.checkpoint import check_obs_version, load_checkpoint
from alpharl.dataset import build, content_sha256, data_specs, file_labels, find_sources, load_files
from alpharl.mirror import levels_of, symmetric_logits
from alpharl.nets import NetLayout
from alpharl.rundir import CHECKPOINT_FILE
from alpharl.sim import layout as L
from alpharl.sim.driver import run_script
from alpharl.sim.market import SyntheticMarket
from alpharl.sizes import N_ACTIONS
from alpharl.windows import DEFAULT_TRAIN_WINDOW, held_out, parse_window

# alpharl.prng, alpharl.reference.* and alpharl.sim.lobsim load numba: they are imported where a
# network policy or a simulator runs, so that `alpharl --help` (which reads this module's defaults)
# starts without it.

POLICIES = ("sampled", "greedy")
BASELINES = ("hold", "random", "periodic", "join", "improve")
ALL = POLICIES + BASELINES
#: Backends of the evaluation's simulator: the NumPy reference, or the kernels (GPU or CUDA simulator).
EVAL_BACKENDS = ("numpy", "cuda", "sim")
#: Annualisation of the Sharpe ratio: US equity trading year.
TRADING_DAYS = 252
TRADING_SECONDS_PER_DAY = 6.5 * 3600
#: Held-out window without a run (baselines alone): the complement of the default training window.
DEFAULT_START, DEFAULT_END = held_out(parse_window(DEFAULT_TRAIN_WINDOW))
#: Steps a periodic round trip is held open.
DEFAULT_PERIOD = 20
#: Fill records kept per backtest per step when a fills log is asked for (drained every step).
FILLS_PER_STEP = 64


class EvalError(ValueError):
    """Bad evaluation input (window, policy name, checkpoint): one line."""


@dataclass
class Window:
    """The evaluated rows [first, stop) of the event stream and the seconds they span (None: synthetic)."""

    first: int
    stop: int
    seconds: float | None


def select_window(market, start: float, end: float):
    """Rows start..end (fractions of the event stream, alpharl.windows.rows) of a MarketData;
    (market window, Window)."""
    if not (0.0 <= start < end <= 1.0):
        raise EvalError(f"--start {start} --end {end}: need 0 <= start < end <= 1")
    a, b = W.rows(market.n_events, (start, end))
    win = market.window(a, b)
    seconds = float(win.time[-1] - win.time[0]) if win.n_events > 1 else None
    return win, Window(a, b, seconds if seconds and seconds > 0 else None)


def fit_params(sim_params, n_rows: int | None):
    """Simulator parameters whose episode window fits the evaluated rows (episodes shortened if needed)."""
    if n_rows is None:
        return sim_params
    e = sim_params.events_per_step
    fit = n_rows // e - 2
    if fit < 1:
        raise EvalError(f"window of {n_rows} events is shorter than two env steps ({e} events each); widen --window")
    return dataclasses.replace(sim_params, episode_steps=min(sim_params.episode_steps, fit))


# ------------------------------------------------------------------ policies
class NetPolicy:
    """pi of a checkpoint's flat parameter vector (NetLayout order), on host observations."""

    def __init__(self, params: np.ndarray, obs_dim: int, greedy: bool, b: int, seed: int, mirror: bool = False):
        """``mirror``: act on the logits averaged with the mirror image's (alpharl.mirror), which cancels
        a constant tilt to one side and keeps what depends on the state."""
        from alpharl.prng import STREAM_EVAL, seed_states   # numba: see the note above

        self.layout = NetLayout(obs_dim)
        params = np.asarray(params, np.float32).ravel()
        if params.size != self.layout.n_params:
            raise EvalError(f"checkpoint network has {params.size} parameters; observations of size {obs_dim} "
                            f"need {self.layout.n_params} (the run's config.toml is not the checkpoint's?)")
        self.params = params
        self.greedy = greedy
        self.levels = levels_of(obs_dim) if mirror else None
        self.prng = seed_states(seed, b, STREAM_EVAL)
        self.actions = np.zeros(b, np.int32)
        self.logp = np.zeros(b, np.float32)

    def logits(self, obs: np.ndarray) -> np.ndarray:
        from alpharl.reference.learner import pi_logits   # numba: see the note above

        def raw(x):
            return pi_logits(self.params, self.layout, np.asarray(x, np.float32))

        return raw(obs) if self.levels is None else symmetric_logits(raw, np.asarray(obs, np.float32), self.levels)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        logits = self.last_logits = self.logits(obs)   # kept for diagnoses of what pi was
        if self.greedy:
            return np.argmax(logits, axis=1).astype(np.int32)
        from alpharl.reference.sampling import rl_pi_action_kernel   # numba: see the note above

        rl_pi_action_kernel(logits, self.prng, self.actions, self.logp)
        return self.actions.copy()


class Baseline:
    """A scripted policy: ``hold``, ``random``, ``periodic``, ``join`` or ``improve`` (module doc)."""

    def __init__(self, name: str, b: int, seed: int, period: int = DEFAULT_PERIOD):
        if name not in BASELINES:
            raise EvalError(f"--policy {name!r}: expected one of {', '.join(ALL)}")
        from alpharl.prng import STREAM_EVAL   # numba: see the note above

        self.name, self.b, self.period = name, b, max(2, int(period))
        self.rng = np.random.default_rng([seed, STREAM_EVAL])
        self.t = 0

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        t, self.t = self.t, self.t + 1
        if self.name == "hold":
            a = A.HOLD
        elif self.name == "random":
            return self.rng.integers(0, N_ACTIONS, size=self.b, dtype=np.int32)
        elif self.name == "periodic":
            phase = t % self.period
            a = A.MARKET_BUY if phase == 0 else A.MARKET_SELL if phase == self.period // 2 else A.HOLD
        elif self.name == "improve":  # a tick inside the touch on both sides
            a = A.IMPROVE_BID if t % 2 == 0 else A.IMPROVE_ASK
        else:  # join the touch on both sides
            a = A.JOIN_BID if t % 2 == 0 else A.JOIN_ASK
        return np.full(self.b, a, np.int32)


# --------------------------------------------------------------- statistics
def trade_stats(reward: np.ndarray, trade_done: np.ndarray, trade_pnl: np.ndarray,
                seconds_per_step: float | None) -> dict:
    """PnL, Sharpe, max drawdown and trade statistics of one run (see module doc). Arrays [T, B];
    ``trade_done`` the steps where a trade ended (a round trip, or an open position truncated)."""
    reward = np.asarray(reward, np.float64)
    t_steps, b = reward.shape
    x = reward.mean(axis=1)                       # per-step portfolio return, $ per backtest
    sd = float(x.std(ddof=1)) if t_steps > 1 else 0.0
    sharpe_step = float(x.mean() / sd) if sd > 0 else float("nan")
    per_year = (TRADING_DAYS * TRADING_SECONDS_PER_DAY / seconds_per_step) if seconds_per_step else None
    curve = np.cumsum(x)
    peak = np.maximum.accumulate(np.concatenate([[0.0], curve]))[1:]
    closed = np.asarray(trade_done, bool) & (np.asarray(trade_pnl) != 0)
    trades = np.asarray(trade_pnl, np.float64)[closed]
    n = int(trades.size)
    return {
        "pnl": float(reward.sum()),
        "pnl_per_backtest": float(reward.sum() / b),
        "sharpe": sharpe_step * math.sqrt(per_year) if per_year and math.isfinite(sharpe_step) else None,
        "sharpe_per_step": sharpe_step if math.isfinite(sharpe_step) else None,
        "max_drawdown": float((peak - curve).max()) if t_steps else 0.0,
        "trades": n,
        "win_rate": float((trades > 0).mean()) if n else None,
        "avg_trade": float(trades.mean()) if n else None,
        "steps": int(t_steps),
        "backtests": int(b),
    }


def action_share(actions: np.ndarray) -> dict[str, float]:
    """Share of each of the nine actions over a run's steps and backtests, by lower-case name: what a
    policy does (quotes, takes, holds), beside what it earns."""
    a = np.asarray(actions).ravel()
    counts = np.bincount(a, minlength=N_ACTIONS)[:N_ACTIONS]
    return {act.name.lower(): float(c) / a.size if a.size else 0.0 for act, c in zip(A.Action, counts)}


def book_presence(inventory: np.ndarray, bid_working: np.ndarray, ask_working: np.ndarray,
                  max_position: int) -> dict[str, float]:
    """Where a run's quotes and position sat, over its steps and backtests: the share of them with a buy
    (``bid``) / sell (``ask``) limit order working, with both (``two_sided``), the mean |position| as a
    share of max_position, and the share at the limit (|position| >= max_position). A policy's action
    shares say what it sends; these say what it holds (a pegged or refilled side stays quoted without
    being sent again, and a side it seldom sends is missing from the book)."""
    bid, ask = np.asarray(bid_working, bool), np.asarray(ask_working, bool)
    held = np.abs(np.asarray(inventory, np.float64))
    n = bid.size
    return {"bid": float(bid.mean()) if n else 0.0, "ask": float(ask.mean()) if n else 0.0,
            "two_sided": float((bid & ask).mean()) if n else 0.0,
            "position": float(held.mean() / max_position) if n else 0.0,
            "at_limit": float((held >= max_position).mean()) if n else 0.0}


def run_stats(result, seconds_per_step: float | None, max_position: int) -> dict:
    """``trade_stats`` of a scripted run, its ``action_share`` and its ``book_presence``."""
    stats = trade_stats(result.reward, result.trade_done, result.trade_pnl, seconds_per_step)
    stats["action_share"] = action_share(result.actions)
    stats["book"] = book_presence(result.inventory, result.bid_working, result.ask_working, max_position)
    return stats


# ------------------------------------------------------------------ running
@dataclass
class EvalSetup:
    """Everything the policies share: market (window), simulator parameters, B, steps, seed, clock."""

    market: object
    sim_params: object
    b: int
    steps: int
    seed: int
    window: Window | None
    obs_dim: int

    @property
    def seconds_per_step(self) -> float | None:
        if self.window is None or self.window.seconds is None:
            return None
        rows = self.window.stop - self.window.first
        return self.window.seconds / max(rows - 1, 1) * self.sim_params.events_per_step


def make_setup(config, market, start: float, end: float, b: int, steps: int | None, seed: int,
               fills: bool) -> EvalSetup:
    """Cut the window start..end of ``market`` (a MarketData; None: the run's synthetic market) and
    fit the simulator parameters to it."""
    if b < 1:
        raise EvalError(f"--b {b}: must be >= 1")
    if steps is not None and steps < 1:
        raise EvalError(f"--steps {steps}: must be >= 1")
    # the holding penalty is a learning signal only: never in the PnL
    params = dataclasses.replace(config.sim, inventory_penalty=0.0, inventory_penalty_quadratic=0.0)
    if fills:
        params = dataclasses.replace(params, fills_log_capacity=max(params.fills_log_capacity, FILLS_PER_STEP))
    if market is None:
        market, window = SyntheticMarket(config.synth), None
        n_steps = steps or params.episode_steps
    else:
        market, window = select_window(market, start, end)
        params = fit_params(params, window.stop - window.first)
        n_steps = steps or max(1, (window.stop - window.first) // params.events_per_step)
    # the network's input is the run's observation, whatever the depth of the data evaluated on
    return EvalSetup(market, params, b, n_steps, seed, window, L.obs_dim(params.obs_levels))


# ------------------------------------------------------------------ which rows
@dataclass
class EvalFile:
    """One file to evaluate on: its window, and the rows of it the run trained on."""

    label: str
    path: str
    sha256: str
    market: object                          # the whole file (MarketData)
    window: tuple[float, float]
    trained_rows: tuple[int, int] | None    # None: the run never trained on this file

    @property
    def rows(self) -> tuple[int, int]:
        return W.rows(self.market.n_events, self.window)

    @property
    def in_sample(self) -> bool:
        """The window shares a row with what the run trained on (same content, overlapping rows)."""
        return W.overlap(self.rows, self.trained_rows)


def training_record(run_record: dict | None) -> tuple[dict, dict, tuple[float, float] | None]:
    """From a run's dataset record: ({sha256: rows trained on, None for a held-out file},
    {sha256: label}, the training window); empty for no run."""
    if run_record is None:
        return {}, {}, None
    rows = {f["sha256"]: None if f["train_rows"] is None else tuple(f["train_rows"]) for f in run_record["files"]}
    labels = {f["sha256"]: f["label"] for f in run_record["files"]}
    return rows, labels, parse_window(run_record["train_window"])


def derived_record(config, option: str = "--data") -> dict:
    """The dataset record of a run that kept none (from before datasets): what its config says it
    read (alpharl.rundir.read_run_config: such a run read the whole of each file)."""
    loaded = load_files(find_sources(data_specs(config.data), option))
    return build(loaded, parse_window(config.train_window), config.holdout_files).record()


def plan(run_record: dict | None, data: list[str] | None, config, window: tuple[float, float] | None,
         allow_overlap: bool) -> tuple[list[EvalFile], list[dict]]:
    """The files to evaluate on, each with its window, and the files left out (label, path, reason).

    ``run_record``: the run's dataset record (None: no run, baselines alone). ``data``: --data
    entries (None: the run's data). ``window``: --window; None picks per file: the held-out
    complement of the run's training window (alpharl.windows.held_out) in a file it trained on,
    the whole of a file it never trained on, and without a run the complement of the default
    training window. A window sharing rows with what the run trained on is refused (EvalError)
    unless ``allow_overlap``: the file is then evaluated in-sample."""
    trained, labels, train_window = training_record(run_record)
    loaded = load_files(find_sources(data if data else data_specs(config.data), "--data"))
    files, skipped = [], []
    for (path, md), fresh in zip(loaded, file_labels([md for _, md in loaded])):
        sha = content_sha256(md)
        rows = trained.get(sha)
        label = labels.get(sha, fresh)
        if window is not None:
            w = window
        elif run_record is None:
            w = (DEFAULT_START, DEFAULT_END)
        elif rows is None:
            w = (0.0, 1.0)                   # never trained on: held out whole
        else:
            w = held_out(train_window)
            if w is None:
                skipped.append({"label": label, "path": path, "reason": "the run trained on the whole file"})
                continue
        f = EvalFile(label, path, sha, md, w, rows)
        if f.in_sample and not allow_overlap:
            first, stop = f.rows
            raise EvalError(f"--window {W.format_window(w)} overlaps the rows the run trained on in {label} "
                            f"({path}: trained on rows {rows[0]:,}..{rows[1]:,}, window {first:,}..{stop:,}); "
                            f"pass --allow-overlap to evaluate in-sample")
        files.append(f)
    if not files:
        raise EvalError(f"nothing held out to evaluate on: the run trained on the whole of "
                        f"{', '.join(s['label'] for s in skipped)}; name --window A:B with --allow-overlap "
                        f"(in-sample), or --data with files it never trained on")
    return files, skipped


def run_policy(setup: EvalSetup, policy, backend: str = "numpy"):
    """One policy on a fresh simulator: the driver's ScriptResult."""
    # numba (see the note above), and only the chosen simulator's kernels are compiled.
    if backend == "numpy":
        from alpharl.reference.lobsim import ReferenceLobSim

        sim = ReferenceLobSim(setup.market, setup.sim_params, setup.b, setup.seed)
    else:
        from alpharl.sim.lobsim import LobSim

        sim = LobSim(setup.market, setup.sim_params, setup.b, setup.seed)
    return run_script(sim, policy, steps=setup.steps)


def make_policy(name: str, setup: EvalSetup, params: np.ndarray | None, period: int = DEFAULT_PERIOD,
                mirror: bool = False):
    """A baseline by name, or the trained policy (``mirror``: averaged with its mirror image)."""
    if name in POLICIES:
        if params is None:
            raise EvalError(f"--policy {name}: needs a trained run (RUN with a checkpoint)")
        return NetPolicy(params, setup.obs_dim, greedy=name == "greedy", b=setup.b, seed=setup.seed, mirror=mirror)
    return Baseline(name, setup.b, setup.seed, period)


def evaluate(setup: EvalSetup, names: list[str], params: np.ndarray | None, period: int = DEFAULT_PERIOD,
             backend: str = "numpy", mirror: bool = False) -> tuple[dict[str, dict], dict]:
    """Run each named policy; returns ({name: trade_stats}, {name: fills table})."""
    results, fills = {}, {}
    for name in names:
        r = run_policy(setup, make_policy(name, setup, params, period, mirror), backend)
        results[name] = run_stats(r, setup.seconds_per_step, setup.sim_params.max_position)
        fills[name] = r.fills
    return results, fills


# ------------------------------------------------------------------ several files
@dataclass
class FileResult:
    """One file's evaluation: the file and window, its setup, each policy's statistics."""

    file: EvalFile
    setup: EvalSetup
    policies: dict


def pooled_stats(runs: list, setups: list[EvalSetup]) -> dict:
    """``trade_stats`` and ``action_share`` of several files' runs of one policy, one after the other in
    time (the steps of every file, in dataset order); the clock is the files' mean seconds per step,
    weighted by steps."""
    reward = np.concatenate([r.reward for r in runs])
    trade_done = np.concatenate([r.trade_done for r in runs])
    pnl = np.concatenate([r.trade_pnl for r in runs])
    clocks = [s.seconds_per_step for s in setups]
    steps = [s.steps for s in setups]
    sps = None if any(c is None for c in clocks) else sum(c * n for c, n in zip(clocks, steps)) / sum(steps)
    stats = trade_stats(reward, trade_done, pnl, sps)
    stats["action_share"] = action_share(np.concatenate([r.actions for r in runs]))
    stats["book"] = book_presence(*(np.concatenate([getattr(r, k) for r in runs])
                                    for k in ("inventory", "bid_working", "ask_working")),
                                  setups[0].sim_params.max_position)
    return stats


def evaluate_files(files: list[EvalFile], config, names: list[str], params: np.ndarray | None, *, b: int,
                   steps: int | None, seed: int, period: int = DEFAULT_PERIOD, backend: str = "numpy",
                   fills: bool = False, mirror: bool = False) -> tuple[list[FileResult], dict, dict]:
    """Each policy on each file (B backtests, ``steps`` or one pass over the file's window), and
    over all of them (``pooled_stats``; one file: its own statistics). Returns (per file,
    {policy: overall stats}, {policy: fills table}); with several files the fills carry a ``file``
    column (the file's label)."""
    setups = [make_setup(config, f.market, *f.window, b, steps, seed, fills) for f in files]
    results = [FileResult(f, s, {}) for f, s in zip(files, setups)]
    overall, fill_tables = {}, {}
    for name in names:
        runs, tables = [], []
        for res in results:
            r = run_policy(res.setup, make_policy(name, res.setup, params, period, mirror), backend)
            res.policies[name] = run_stats(r, res.setup.seconds_per_step, res.setup.sim_params.max_position)
            runs.append(r)
            tables.append(r.fills if len(files) == 1 else
                          r.fills.append_column("file", pa.array([res.file.label] * r.fills.num_rows, pa.string())))
        overall[name] = results[0].policies[name] if len(files) == 1 else pooled_stats(runs, setups)
        fill_tables[name] = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    return results, overall, fill_tables


def write_fills(fills: dict, out: Path | str) -> Path:
    """All policies' fills in one table with a ``policy`` column: Parquet (.parquet), CSV (.csv) or Arrow IPC."""
    out = Path(out)
    tables = [t.append_column("policy", pa.array([name] * t.num_rows, pa.string())) for name, t in fills.items()]
    table = pa.concat_tables(tables) if tables else pa.table({})
    with atomic_writer(out) as f:
        if out.suffix == ".parquet":
            import pyarrow.parquet as pq   # each writer loaded for its own format only (start-up)

            pq.write_table(table, f)
        elif out.suffix == ".csv":
            import pyarrow.csv as pcsv

            pcsv.write_csv(table, f)
        else:
            import pyarrow.ipc as ipc

            with ipc.new_file(f, table.schema) as w:
                w.write_table(table)
    return out


def run_params(run: Path) -> np.ndarray:
    """The online network's parameters of a run directory's checkpoint, refused (CheckpointError) when it
    was trained on another observation layout."""
    arrays, meta = load_checkpoint(run / CHECKPOINT_FILE)
    check_obs_version(meta, run / CHECKPOINT_FILE)
    return checkpoint_params(arrays)


def checkpoint_params(arrays: dict) -> np.ndarray:
    """The online network's flat parameters from a checkpoint's arrays (key ``nets.params``)."""
    for key in ("nets.params", "params"):
        if key in arrays:
            return np.asarray(arrays[key], np.float32)
    raise EvalError("checkpoint holds no network parameters (no 'nets.params')")
