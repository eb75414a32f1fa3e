"""A training run: the loop around the trainer, with diagnostics, checkpoints and a clean stop.

``train(config, resume=None, dashboard=None)`` is what ``alpharl train`` calls.
The run directory's files, its resume rules and the config merge are
alpharl.rundir's; the checkpoint holds keys ``nets.*`` (params, adam_m,
adam_v, target, adam_state), ``sim.*``, ``replay.*``, ``isv``, ``prng``,
``step_count``, ``acc`` (with several files ``acc_streams``), ``trainer.steps_done``; meta: step, b,
obs_dim, obs_version, config, dataset.

The data is a dataset (alpharl.dataset): every file found, each read on the rows of
``train_window`` unless ``holdout_files`` keeps it out. One training file is replayed by one
simulator, as always; several become one stream each (alpharl.sim.streams), with per-file
columns in the diagnostics (``<metric>@<file label>``) and per-file metrics in the summary.
The record of the files (content sha256, rows) goes to ``dataset.json`` before the first step,
and a resumed run must find the same files.

Ctrl-C (SIGINT) or SIGTERM stops after the current step: a final checkpoint is
written and the diagnostics flushed. ``--steps`` is the run's total: resuming a
run of N steps with ``--steps 2N`` continues for N more.
"""
from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from alpharl import isv as S
from alpharl.backends.factory import resolve_backend
from alpharl.comm import Communicator, RankError
from alpharl.checkpoint import CheckpointError, check_obs_version, load_checkpoint, save_checkpoint
from alpharl.config import ConfigError, TrainConfig
from alpharl.diag import DiagnosticsWriter, write_parquet_snapshot
from alpharl.ranks import check_identical, merge_rank_states, rank_config, rank_owns, rank_state
from alpharl.dataset import Dataset, check_same_files, load_dataset
from alpharl.rundir import (CHECKPOINT_FILE, clean, default_run_dir, has_checkpoint, read_dataset, resume_config,
                            write_config, write_dataset, write_summary)
from alpharl.sim.layout import OBS_VERSION
from alpharl.sim.market import SyntheticMarket, fit_episode
from alpharl.signals import METRICS, name_stream_metrics, stream_metric_names
from alpharl.sizes import LN_N_ATOMS
from alpharl.trainer import IntegratedTrainer


def load_data(config: TrainConfig) -> tuple[Dataset | None, object]:
    """The dataset (None: synthetic market or features) and the market the backtests replay: one
    file's training window (MarketData), several (a tuple, one stream each) or a SyntheticMarket."""
    if config.features:
        return None, None  # step_synthetic: no market
    if config.synthetic:
        return None, SyntheticMarket(config.synth)
    ds = load_dataset(config.data, config.train_window, config.holdout_files, config.b, config.sim.events_per_step)
    markets = ds.train_markets()
    return ds, markets[0] if len(markets) == 1 else tuple(markets)


def load_market(config: TrainConfig):
    """The market the backtests replay (``load_data``'s second half)."""
    return load_data(config)[1]


def fit_markets(params, market):
    """``fit_episode`` for one market or several: the episode must fit the shortest."""
    if isinstance(market, tuple):
        market = min(market, key=lambda m: m.n_events)
    return fit_episode(params, market)


def check_backend(config: TrainConfig) -> None:
    """The backend must exist on this machine (cuda needs a GPU; sim needs numba's simulator), and
    --tensor-cores on needs cuBLASLt where the kernels run on the GPU."""
    try:
        name = resolve_backend(config.backend)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if config.tensor_cores == "on" and name == "cuda":
        from alpharl.tensor_gemm import unavailable

        why = unavailable()
        if why is not None:
            raise ConfigError(f"--tensor-cores on: {why}")


def _load_resumed(trainer: IntegratedTrainer, run_dir: Path, config: TrainConfig, rank: int = 0) -> int:
    """Load the run's checkpoint (rank ``rank``'s part) into ``trainer``; the step it was written at."""
    path = run_dir / CHECKPOINT_FILE
    arrays, meta = load_checkpoint(path, keep=lambda k: rank_owns(k, rank))
    check_obs_version(meta, path)
    if int(meta.get("gpus", 1)) != config.gpus:
        raise CheckpointError(f"{path}: checkpoint of {meta.get('gpus', 1)} rank(s) (--gpus); this run has "
                              f"--gpus {config.gpus}: resume with --gpus {meta.get('gpus', 1)}")
    arrays = rank_state(arrays, rank)
    if int(meta.get("obs_dim", -1)) != trainer.obs_dim or int(meta.get("b", -1)) != config.b:
        raise CheckpointError(f"{path}: checkpoint is for b={meta.get('b')}, "
                              f"obs_dim={meta.get('obs_dim')}; this run has b={config.b}, obs_dim={trainer.obs_dim}")
    try:
        trainer.load_state_dict(arrays)
    except (KeyError, ValueError) as exc:
        raise CheckpointError(f"{path}: incompatible checkpoint ({exc})") from None
    return int(meta["step"])


class _StopFlag:
    """SIGINT/SIGTERM set a flag the loop checks after each step (restored on exit)."""

    def __init__(self):
        self.stop = False
        self._old = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._set)
        return self

    def _set(self, signum, frame):
        self.stop = True

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


class _NullDashboard:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def start(self, config, run_dir):
        pass

    def update(self, step, isv_host, metrics, steps_per_s, env_steps_per_s):
        pass

    def log(self, message):
        pass

    def finish(self, summary):
        pass


def train(config: TrainConfig, *, resume: str | None = None, dashboard=None, comm: Communicator | None = None) -> dict:
    """Run (or resume) training; returns the summary (also written to summary.json).

    comm: this process's rank of ``config.gpus`` data-parallel ranks (alpharl.launch starts them). Every rank
    steps its own B/G backtests; rank 0 alone writes the run directory (config, diagnostics of its own
    backtests' metrics, summary) and the checkpoint, which holds every rank's state. Every diagnostic interval
    the ranks check that their weights and ISV are the same bits (RankError on the first that differs) and
    take rank 0's stop flag: with several ranks, Ctrl-C stops at the next diagnostic interval."""
    if config.gpus > 1 and (comm is None or comm.size != config.gpus):
        raise ConfigError(f"--gpus {config.gpus}: the ranks are started by alpharl.launch, one process each")
    rank = 0 if comm is None else comm.rank
    writes = rank == 0
    dash = dashboard if dashboard is not None and writes else _NullDashboard()
    if resume:
        run_dir = Path(resume)
        config = resume_config(run_dir, config)
    config.validate()
    run_dir = Path(config.run_dir) if config.run_dir else default_run_dir(config)
    dataset, market = load_data(config)
    sim, notice = fit_markets(config.sim, market)
    config = config.with_overrides(sim=sim)
    # A resumed run without a checkpoint (killed before its first) starts its own config again from 0.
    continuing = bool(resume) and has_checkpoint(run_dir)
    recorded = read_dataset(run_dir) if continuing else None
    if dataset is not None and recorded is not None:
        check_same_files(dataset, recorded, f"--resume {run_dir}")
    record = None if dataset is None else dataset.record(config.b)
    labels = [f.label for f in dataset.training] if dataset is not None and len(dataset.training) > 1 else []

    trainer = IntegratedTrainer(config if comm is None else rank_config(config), market, comm=comm)
    start_step = 0
    if continuing:
        start_step = _load_resumed(trainer, run_dir, config, rank)
    elif writes:
        run_dir.mkdir(parents=True, exist_ok=True)
    writer = None
    if writes:
        clean(run_dir)
        write_config(run_dir, config)
        if record is not None:
            write_dataset(run_dir, record)
        writer = DiagnosticsWriter(run_dir, list(METRICS) + stream_metric_names(labels), append=continuing,
                                   keep_until_step=start_step)

    def all_metrics() -> tuple[dict, dict]:
        """(overall metrics, overall and per-file metrics under their diagnostics names)."""
        overall = trainer.metrics()
        return overall, overall | name_stream_metrics(labels, trainer.stream_metrics())

    def checkpoint(step: int) -> None:
        """Every rank hands its state to rank 0, which writes them as one checkpoint."""
        parts = [trainer.state_dict()] if comm is None else comm.gather(trainer.state_dict())
        if not writes:
            return
        meta = {"step": step, "b": config.b, "gpus": config.gpus, "obs_dim": trainer.obs_dim,
                "obs_version": OBS_VERSION, "config": config.to_dict(), "dataset": record}
        save_checkpoint(run_dir / CHECKPOINT_FILE, merge_rank_states(parts), meta)
        write_parquet_snapshot(run_dir)

    def stop_now(step: int, at_diag: bool) -> bool:
        """One rank: its own flag. Several: at diagnostic intervals, where they check their states too,
        rank 0's flag on every rank (all must stop at the same step)."""
        if comm is None:
            return flag.stop
        if not at_diag:
            return False
        check_identical(comm, trainer, step)
        return bool(comm.broadcast(flag.stop))

    t_start = time.perf_counter()
    t_last, step_last = t_start, start_step
    step = start_step
    last_isv = None
    metrics: dict = {}
    interrupted = False
    diverged = False
    with dash, _StopFlag() as flag:
        dash.start(config, run_dir)
        if notice:
            dash.log(notice)
        if continuing:
            dash.log(f"resumed {run_dir} at step {start_step}")
        elif resume:
            dash.log(f"{run_dir} had no checkpoint yet: started again from step 0 with its config")
        ranks = "" if comm is None else f", {config.gpus} ranks of B/G={config.b // config.gpus}"
        dash.log(f"backend {trainer.backend}, B={config.b}{ranks}, obs_dim={trainer.obs_dim}, run dir {run_dir}")
        try:
            while step < config.steps:
                trainer.step()
                step += 1
                at_diag = step % config.diag_every == 0 or step == config.steps
                stop = stop_now(step, at_diag)
                if writes and (at_diag or stop):
                    last_isv = trainer.read_isv()
                    metrics, columns = all_metrics()
                    now = time.perf_counter()
                    sps = (step - step_last) / max(now - t_last, 1e-9)
                    t_last, step_last = now, step
                    writer.write(step, now - t_start, time.time(), sps, sps * config.b, last_isv, columns)
                    dash.update(step, last_isv, metrics, sps, sps * config.b)
                if config.checkpoint_every and step % config.checkpoint_every == 0:
                    checkpoint(step)
                if stop:
                    interrupted = True
                    dash.log(f"stopping at step {step}: writing the final checkpoint")
                    break
        except RankError:
            diverged = True  # the last checkpoint stays the last good state
            raise
        finally:
            if not diverged:
                checkpoint(step)
            if writer is not None:
                writer.close()
        if not writes:
            return {"run_dir": str(run_dir), "step": step, "rank": rank, "interrupted": interrupted}
        wall = time.perf_counter() - t_start
        if last_isv is None:
            last_isv = trainer.read_isv()
            metrics = trainer.metrics()
        files = [{"label": lab, "metrics": {k: (None if v != v else v) for k, v in m.items()}}
                 for lab, m in zip(labels, trainer.stream_metrics())]
        summary = {
            "run_dir": str(run_dir), "step": step, "started_at_step": start_step, "interrupted": interrupted,
            "backend": trainer.backend, "b": config.b, "gpus": config.gpus, "wall_seconds": wall,
            "steps_per_s": (step - start_step) / wall if wall > 0 else float("nan"),
            "losses": {s.name: float(last_isv[s.index]) for s in S.SLOTS if s.group == "losses"},
            "metrics": {k: (None if v != v else v) for k, v in metrics.items()},
            "loss_q_vs_uniform": float(last_isv[S.RL_LOSS_Q]) - LN_N_ATOMS,
            "dataset": record,
            "file_metrics": files,
        }
        write_summary(run_dir, summary)
        dash.finish(summary)
    return summary


__all__ = ["train", "load_data", "load_market", "fit_markets", "check_backend", "ConfigError", "CheckpointError"]
