"""A training run: run directory, diagnostics, checkpoints, clean stop.

``train(config, resume=None, dashboard=None)`` is what ``alpharl train`` calls.
The run directory holds:

- ``config.toml``        the resolved configuration;
- ``diagnostics.arrows`` one row per ``diag_every`` steps (alpharl.diag), durable row by row;
- ``diagnostics.parquet`` a snapshot of the same, refreshed at each checkpoint and at the end;
- ``checkpoint.npz``     everything needed to continue bit-identically (alpharl.checkpoint):
  keys ``nets.*`` (params, adam_m, adam_v, target, adam_state), ``sim.*``, ``replay.*``,
  ``isv``, ``prng``, ``step_count``, ``acc``, ``trainer.steps_done``; meta: step, config;
- ``summary.json``       final step, wall time, throughput, last losses and trade statistics.

Ctrl-C (SIGINT) or SIGTERM stops after the current step: a final checkpoint is
written and the diagnostics flushed. ``--steps`` is the run's total: resuming a
run of N steps with ``--steps 2N`` continues for N more.
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np

from alpharl import isv as S
from alpharl.checkpoint import CHECKPOINT_FILE, CheckpointError, load_checkpoint, save_checkpoint
from alpharl.config import ConfigError, TrainConfig
from alpharl.diag import DiagnosticsWriter, write_parquet_snapshot
from alpharl.sim.market import fit_episode

#: Options a resumed run may change; everything else comes from the run's own config.toml.
RESUME_OVERRIDABLE = ("steps", "backend", "graph")
SUMMARY_FILE = "summary.json"
CONFIG_FILE = "config.toml"


def load_market(config: TrainConfig):
    """The market the backtests replay: synthetic, a LOBSTER source, or the embedded sample."""
    if config.features:
        return None  # step_synthetic: no market
    if config.synthetic:
        from alpharl.sim.market import SyntheticMarket

        return SyntheticMarket(config.synth)
    from alpharl.lobster.load import load_lobster
    from alpharl.lobster.sample import load_embedded

    return load_lobster(config.data) if config.data else load_embedded()


def default_run_dir(config: TrainConfig) -> Path:
    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-s{config.seed}"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def resume_config(run_dir: Path, given: TrainConfig) -> TrainConfig:
    cfg_path = run_dir / CONFIG_FILE
    if not run_dir.is_dir():
        raise CheckpointError(f"{run_dir}: no such run directory")
    if not cfg_path.exists():
        raise CheckpointError(f"{cfg_path}: missing; {run_dir} is not an alpharl run directory")
    saved = TrainConfig.from_toml(cfg_path)
    return saved.with_overrides(**{k: getattr(given, k) for k in RESUME_OVERRIDABLE}, run_dir=str(run_dir))


class _StopFlag:
    """SIGINT/SIGTERM set a flag the loop checks after each step (restored on exit)."""

    def __init__(self):
        self.stop = False
        self._old = {}

    def __enter__(self):
        import threading

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


def train(config: TrainConfig, *, resume: str | None = None, dashboard=None) -> dict:
    """Run (or resume) training; returns the summary (also written to summary.json)."""
    from alpharl.trainer import IntegratedTrainer, METRICS

    dash = dashboard if dashboard is not None else _NullDashboard()
    if resume:
        run_dir = Path(resume)
        config = resume_config(run_dir, config)
    config.validate()
    run_dir = Path(config.run_dir) if config.run_dir else default_run_dir(config)
    market = load_market(config)
    sim, notice = fit_episode(config.sim, market)
    config = config.with_overrides(sim=sim)

    trainer = IntegratedTrainer(config, market)
    start_step = 0
    if resume:
        arrays, meta = load_checkpoint(run_dir / CHECKPOINT_FILE)
        if int(meta.get("obs_dim", -1)) != trainer.obs_dim or int(meta.get("b", -1)) != config.b:
            raise CheckpointError(f"{run_dir / CHECKPOINT_FILE}: checkpoint is for b={meta.get('b')}, "
                                  f"obs_dim={meta.get('obs_dim')}; this run has b={config.b}, obs_dim={trainer.obs_dim}")
        try:
            trainer.load_state_dict(arrays)
        except (KeyError, ValueError) as exc:
            raise CheckpointError(f"{run_dir / CHECKPOINT_FILE}: incompatible checkpoint ({exc})") from None
        start_step = int(meta["step"])
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
    _write_atomic(run_dir / CONFIG_FILE, config.to_toml())

    writer = DiagnosticsWriter(run_dir, list(METRICS), append=bool(resume), keep_until_step=start_step)

    def checkpoint(step: int) -> None:
        meta = {"step": step, "b": config.b, "obs_dim": trainer.obs_dim, "config": config.to_dict()}
        save_checkpoint(run_dir / CHECKPOINT_FILE, trainer.state_dict(), meta)
        write_parquet_snapshot(run_dir)

    t_start = time.perf_counter()
    t_last, step_last = t_start, start_step
    step = start_step
    last_isv = None
    metrics: dict = {}
    interrupted = False
    with dash, _StopFlag() as flag:
        dash.start(config, run_dir)
        if notice:
            dash.log(notice)
        if resume:
            dash.log(f"resumed {run_dir} at step {start_step}")
        dash.log(f"backend {trainer.backend}, B={config.b}, obs_dim={trainer.obs_dim}, run dir {run_dir}")
        try:
            while step < config.steps:
                trainer.step()
                step += 1
                if step % config.diag_every == 0 or step == config.steps or flag.stop:
                    last_isv = trainer.read_isv()
                    metrics = trainer.metrics()
                    now = time.perf_counter()
                    sps = (step - step_last) / max(now - t_last, 1e-9)
                    t_last, step_last = now, step
                    writer.write(step, now - t_start, time.time(), sps, sps * config.b, last_isv, metrics)
                    dash.update(step, last_isv, metrics, sps, sps * config.b)
                if config.checkpoint_every and step % config.checkpoint_every == 0:
                    checkpoint(step)
                if flag.stop:
                    interrupted = True
                    dash.log(f"stopping at step {step}: writing the final checkpoint")
                    break
        finally:
            checkpoint(step)
            writer.close()
        wall = time.perf_counter() - t_start
        if last_isv is None:
            last_isv = trainer.read_isv()
            metrics = trainer.metrics()
        summary = {
            "run_dir": str(run_dir), "step": step, "started_at_step": start_step, "interrupted": interrupted,
            "backend": trainer.backend, "b": config.b, "wall_seconds": wall,
            "steps_per_s": (step - start_step) / wall if wall > 0 else float("nan"),
            "losses": {s.name: float(last_isv[s.index]) for s in S.SLOTS if s.group == "losses"},
            "metrics": {k: (None if v != v else v) for k, v in metrics.items()},
            "loss_q_vs_uniform": float(last_isv[S.RL_LOSS_Q]) - float(np.log(21.0)),
        }
        _write_atomic(run_dir / SUMMARY_FILE, json.dumps(summary, indent=1))
        dash.finish(summary)
    return summary


__all__ = ["train", "load_market", "ConfigError", "CheckpointError"]
