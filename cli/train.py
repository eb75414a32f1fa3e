"""``alpharl train``: train the agent; live dashboard, run directory, clean stop on Ctrl-C.

Every option's Typer default is None, meaning "not given", so only what was
typed overrides the config file; how the layers merge, and what a resumed run
may change, is alpharl.rundir's (``resolve_config``, ``check_paths``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alpharl import rundir
from alpharl.cli.errors import user_errors
from alpharl.config import BACKENDS, FUSED_MODES, Q_TARGETS, TENSOR_CORE_MODES, TrainConfig
from alpharl.dashboard import Dashboard
from alpharl.sim.layout import PENALTY_UNITS

#: Exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130

_D = TrainConfig()


def _onoff(flag: bool) -> str:
    return "on" if flag else "off"


def train(
    steps: Annotated[int | None, typer.Option("--steps", help=f"Training steps (each steps all B backtests once). (default: {_D.steps})", show_default=False)] = None,
    b: Annotated[int | None, typer.Option("--b", "-b", help=f"B, backtests run side by side. (default: {_D.b})", show_default=False)] = None,
    data: Annotated[list[str] | None, typer.Option("--data", metavar="<path>", help="LOBSTER zip, CSV pair, cached Arrow file, folder or glob; repeat for more (each file one stream). (default: the embedded sample)", show_default=False)] = None,
    train_window: Annotated[str | None, typer.Option("--train-window", help=f"A:B, the fractions of each file's events training reads; the rest is held out. (default: {_D.train_window})", show_default=False)] = None,
    holdout_files: Annotated[str | None, typer.Option("--holdout-files", help="Glob on the file name: matching files are kept out of training whole.", show_default=False)] = None,
    synthetic: Annotated[bool | None, typer.Option("--synthetic/--replay", help="Train on the synthetic Poisson order-flow market instead of replayed data. (default: replay)", show_default=False)] = None,
    seed: Annotated[int | None, typer.Option("--seed", help=f"Seed of everything (init, PRNGs, episode starts, replay). (default: {_D.seed})", show_default=False)] = None,
    run_dir: Annotated[Path | None, typer.Option("--run-dir", help="Run directory. (default: runs/<timestamp>-s<seed>)", show_default=False)] = None,
    diag_every: Annotated[int | None, typer.Option("--diag-every", help=f"Steps between diagnostic rows. (default: {_D.diag_every})", show_default=False)] = None,
    checkpoint_every: Annotated[int | None, typer.Option("--checkpoint-every", help=f"Steps between checkpoints (0: only at the end). (default: {_D.checkpoint_every})", show_default=False)] = None,
    resume: Annotated[Path | None, typer.Option("--resume", help="Continue the run in this directory from its checkpoint.", show_default=False)] = None,
    graph: Annotated[bool | None, typer.Option("--graph/--no-graph", help="Capture the step as a CUDA graph (cuda backend). (default: graph)", show_default=False)] = None,
    backend: Annotated[str | None, typer.Option("--backend", help=f"{' | '.join(BACKENDS)}: auto = cuda with a GPU, else numpy. (default: {_D.backend})", show_default=False)] = None,
    features: Annotated[bool | None, typer.Option("--features/--market", help="step_synthetic: a synthetic feature/reward process with a known best action instead of the order book. (default: market)", show_default=False)] = None,
    rollout: Annotated[int | None, typer.Option("--rollout", help=f"T: PPO and V learn every T-th step on the last T x B transitions with GAE(lambda); 1 = every step, one-step TD. (default: {_D.rollout})", show_default=False)] = None,
    gae_lambda: Annotated[float | None, typer.Option("--gae-lambda", help=f"lambda of GAE(lambda) with --rollout > 1. (default: {_D.gae_lambda})", show_default=False)] = None,
    rollout_rows: Annotated[int | None, typer.Option("--rollout-rows", help=f"With --rollout > 1: the most transitions one PPO / V update learns from (whole trajectories of a subset of the backtests, a different one each update); 0 = all T x B. Bounds the update's cost at large B. (default: {_D.rollout_rows})", show_default=False)] = None,
    k_max: Annotated[int | None, typer.Option("--k-max", help=f"Ceiling of learning iterations per env step (the K controller picks K up to it). (default: {_D.k_max})", show_default=False)] = None,
    minibatch: Annotated[int | None, typer.Option("--minibatch", help=f"Q minibatch drawn from the replay per learning iteration. (default: {_D.minibatch})", show_default=False)] = None,
    replay_capacity: Annotated[int | None, typer.Option("--replay-capacity", help=f"Transitions held by the prioritized replay. (default: {_D.replay_capacity})", show_default=False)] = None,
    reward_scale: Annotated[float | None, typer.Option("--reward-scale", help=f"Reward ($) multiplier before learning. (default: {_D.reward_scale})", show_default=False)] = None,
    obs_levels: Annotated[int | None, typer.Option("--obs-levels", min=1, help=f"Book levels in the observation, whatever the data's depth ([sim] obs_levels; deeper books cut, shallower padded). (default: {_D.sim.obs_levels})", show_default=False)] = None,
    episode_end: Annotated[str | None, typer.Option("--episode-end", help=f"round_trip: an episode ends when the position is back to flat; horizon: only at its window (episode_steps), every round trip still counted as a trade ([sim] episode_end). (default: {_D.sim.episode_end})", show_default=False)] = None,
    inventory_penalty: Annotated[float | None, typer.Option("--inventory-penalty", help=f"lambda >= 0: each step's learning reward less lambda x |shares held| x tick $ (ticks per share per step; never in PnL or eval) ([sim] inventory_penalty). (default: {_D.sim.inventory_penalty})", show_default=False)] = None,
    inventory_penalty_unit: Annotated[str | None, typer.Option("--inventory-penalty-unit", help=f"{' | '.join(PENALTY_UNITS)}: the unit of --inventory-penalty's lambda: ticks, or standard deviations of the backtest's own mid move per step (lambda x sigma x |shares| x tick $; adapts to each instrument's volatility) ([sim] inventory_penalty_unit). (default: {_D.sim.inventory_penalty_unit})", show_default=False)] = None,
    inventory_penalty_quadratic: Annotated[float | None, typer.Option("--inventory-penalty-quadratic", help=f"lambda_2 >= 0: a second holding-penalty term, quadratic in the position: (lambda + lambda_2 x |shares| / lot) x |shares| x tick $ [x sigma] (a mean-variance trader's cost; heavy on a position parked at the limit) ([sim] inventory_penalty_quadratic). (default: {_D.sim.inventory_penalty_quadratic})", show_default=False)] = None,
    peg_quotes: Annotated[bool | None, typer.Option("--peg-quotes/--no-peg-quotes", help="A join / improve order follows its side's best price (a tick inside it for an improve) at every step, replaced there when the touch moves, as an exchange's peg order; a side quoted once does not go stale ([sim] peg_quotes). (default: off)", show_default=False)] = None,
    refill_quotes: Annotated[bool | None, typer.Option("--refill-quotes/--no-refill-quotes", help="With --peg-quotes: a pegged side whose order filled is quoted again at the next step, so a side quoted once stays quoted until a cancel or flatten ([sim] refill_quotes). (default: off)", show_default=False)] = None,
    reward_norm: Annotated[bool | None, typer.Option("--reward-norm/--no-reward-norm", help=f"Scale learning's rewards by 1 / RMS of the running return (on the device). (default: {_onoff(_D.reward_norm)})", show_default=False)] = None,
    adaptive_support: Annotated[bool | None, typer.Option("--adaptive-support/--no-adaptive-support", help=f"C51 support at +-5 running return RMS instead of a fixed +-10. (default: {_onoff(_D.adaptive_support)})", show_default=False)] = None,
    adaptive_anchors: Annotated[bool | None, typer.Option("--adaptive-anchors/--no-adaptive-anchors", help=f"Controllers aim at anchors from observed, scale-free signals (relative update, entropy, tau, best baseline fit). (default: {_onoff(_D.adaptive_anchors)})", show_default=False)] = None,
    pace_policy: Annotated[bool | None, typer.Option("--pace-policy/--no-pace-policy", help="With --adaptive-anchors: the policy head's step paced by the KL each PPO update's own steps add, the clip set from that trust region (measured worse held out). (default: off)", show_default=False)] = None,
    k_noise_band: Annotated[bool | None, typer.Option("--k-noise-band/--no-k-noise-band", help="With --adaptive-anchors: K steps up only where the baseline's fit is also worse than its usual level by more than twice its scatter. (default: off)", show_default=False)] = None,
    mirror_policy: Annotated[bool | None, typer.Option("--mirror-policy/--no-mirror-policy", help="A mirror-equivariant actor: acts on and learns through its logits averaged with those of the buy/sell mirror image of the market, so it cannot tilt to one side whatever the seed. (default: off)", show_default=False)] = None,
    q_target: Annotated[str | None, typer.Option("--q-target", help=f"{' | '.join(Q_TARGETS)}: what the C51 target bootstraps from at the next state: the greedy action (Double DQN) or the acting policy's mixture over its actions, so the Q head values the policy that acts. (default: {_D.q_target})", show_default=False)] = None,
    tensor_cores: Annotated[str | None, typer.Option("--tensor-cores", help=f"{' | '.join(TENSOR_CORE_MODES)}: the large layers' products on TF32 tensor cores (cuBLASLt via nvmath-python, the extra 'tc'); auto where measured faster. (default: {_D.tensor_cores})", show_default=False)] = None,
    fused_update: Annotated[str | None, typer.Option("--fused-update", help=f"{' | '.join(FUSED_MODES)}: each learning update as one cooperative launch (nine phases between grid barriers) instead of its sequence of launches; measured slower, so off. (default: {_D.fused_update})", show_default=False)] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help=f"G data-parallel ranks, one process per GPU, each with B/G backtests (NCCL all-reduce of the gradients and the ISV's batch statistics); with --backend numpy or sim the ranks run on the CPU. (default: {_D.gpus})", show_default=False)] = None,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Run the --gpus ranks as Ray actors with one GPU each on this cluster (its nodes must see the run directory and the data at the same paths; needs the extra 'ray').", show_default=False)] = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML file of options; command-line options override it.", show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live dashboard: a plain progress line at most once a minute.")] = False,
) -> None:
    """Train the agent: B backtests side by side, one run directory of config, diagnostics, checkpoints, summary."""
    with user_errors():
        cfg = rundir.resolve_config(
            config_file=config, resume=resume,
            overrides=dict(steps=steps, b=b, data=_data(data), train_window=train_window, holdout_files=holdout_files,
                           synthetic=synthetic, seed=seed,
                           run_dir=None if run_dir is None else str(run_dir), diag_every=diag_every,
                           rollout=rollout, gae_lambda=gae_lambda, rollout_rows=rollout_rows,
                           checkpoint_every=checkpoint_every, graph=graph, backend=backend, minibatch=minibatch,
                           k_max=k_max, features=features, replay_capacity=replay_capacity, reward_scale=reward_scale,
                           **{"sim.obs_levels": obs_levels, "sim.episode_end": episode_end,
                              "sim.inventory_penalty": inventory_penalty,
                              "sim.inventory_penalty_unit": inventory_penalty_unit,
                              "sim.inventory_penalty_quadratic": inventory_penalty_quadratic,
                              "sim.peg_quotes": peg_quotes, "sim.refill_quotes": refill_quotes}, reward_norm=reward_norm,
                           adaptive_support=adaptive_support, adaptive_anchors=adaptive_anchors,
                           pace_policy=pace_policy, k_noise_band=k_noise_band, mirror_policy=mirror_policy, q_target=q_target, gpus=gpus, tensor_cores=tensor_cores, fused_update=fused_update))
        note = rundir.check_paths(cfg, resume)
        if note:
            typer.echo(f"alpharl: {note}", err=True)
        # Here, not at the top: alpharl.run loads the trainer, numba and the kernels, which
        # `alpharl --help` and the other commands do without.
        from alpharl import run

        run.check_backend(cfg)
        if cfg.gpus > 1 or ray_address is not None:
            from alpharl import launch
            from alpharl.backends.factory import resolve_backend

            backend_name = resolve_backend(cfg.backend)
            launch.check_gpus(cfg, backend_name, ray_address)
            summary = launch.launch(cfg, None if resume is None else str(resume), backend=backend_name, quiet=quiet,
                                    ray_address=ray_address)
        else:
            summary = _run(run, cfg, resume, quiet)
    if summary.get("interrupted"):
        where = summary.get("run_dir", cfg.run_dir)
        at = summary.get("step", summary.get("steps", "?"))
        typer.echo(f"alpharl: interrupted at step {at}; checkpoint and diagnostics are in "
                   f"{where} (continue with --resume {where})", err=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    if summary.get("run_dir"):
        typer.echo(f"view the run: alpharl diag {summary['run_dir']}")


def _data(data: list[str] | None) -> str | list[str] | None:
    """--data as the config holds it: one entry as a string, several as a list, none as None."""
    if not data:
        return None
    return data[0] if len(data) == 1 else list(data)


def _run(run, cfg: TrainConfig, resume: Path | None, quiet: bool) -> dict:
    """Hand the config and a dashboard to ``run.train`` (which enters the dashboard, updates and finishes it)."""
    with Dashboard(total_steps=cfg.steps, b=cfg.b, quiet=quiet) as dash:
        try:
            summary = run.train(cfg, resume=None if resume is None else str(resume), dashboard=dash)
        except KeyboardInterrupt:
            # The trainer saves on SIGINT itself; a Ctrl-C outside its loop (loading) lands here.
            return {"interrupted": True, "step": dash.step, "run_dir": cfg.run_dir or dash.run_dir}
        dash.finish(summary)   # no-op when the trainer already finished it
    return summary
