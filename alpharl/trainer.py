"""IntegratedTrainer: the whole training step (SPEC §1) for all B backtests at once.

``step`` runs one fixed sequence of a backend's operations (``alpharl.backends``);
only where s_t, r_t and done_t come from differs with ``config.features``
(the order-book simulator, or a synthetic feature/reward process):

 (7) first, the first K-loop iteration's PER minibatch (draw + gather) from the replay
    as of the step's start, on a side branch beside 1-6 (it needs nothing of this step);
 1. observe s_t (the simulator's observation buffer) and keep a copy;
 2-4. encode + pi head on s_t; ``rl_pi_action_kernel`` samples a_t ~ pi and keeps
    log pi_old(a_t | s_t);
 5. ``lobsim_step`` applies a_t, advances the market, fills, emits r_t, done_t,
    auto-resets (with config.features: the synthetic process's step instead);
 6. s_{t+1} = the simulator's new observation;
 7-12. the K-loop: k_max (<= K_MAX) copies of [``rl_k_gate`` -> PER sample (the first
    copy's was drawn at the step's start) -> learning update
    (Q C51 + Double-DQN, V blend, advantage/return, PPO, V, BCE, AUX, encoder, Adam)
    -> PER priority update], each copy predicated on the device by its gate (the
    first copy always runs: K >= 1, so it needs no gate kernel), so
    K = clamp(round(isv[404] / 2048), 1, K_MAX) costs no host read and the graph
    stays fixed. (A conditional graph node would skip the gated-off copies
    entirely, but needs a device-side cudaGraphSetConditional that numba kernels
    cannot call, and eager mode would differ from graph mode; predication keeps
    both identical and costs a few idle launches of ~1 µs.)
 13. the step's transitions go to the PER, behind the last priority update (a slot
    drawn this step and overwritten now holds the new transition at the insert's
    max priority). Every draw of step t sees the replay as of step t's start: the B
    transitions of step t are drawable from step t + 1. The run's first step, whose
    replay is empty, inserts before its first draw (it runs eagerly: a graph is
    captured from a phase's second step).
 14. signals: ``rl_batch_moments_multi`` (one launch, one block per statistic) of
    entropy, KL, TD error, advantage, return, ratio, done and closed-trade PnL into
    the ISV's obs slots (``alpharl.signals.SIGNAL_MOMENTS``), then the EMAs;
 15. controllers (LR, clip, ratio bound, entropy coef, tau, PER, K);
 16. target soft update; device step counter + 1.

``--rollout T`` > 1 (``alpharl.rollout``): PPO and V learn on T-step rollouts with
GAE(lambda). Each step has a phase the host knows from its own step counter (no
device read): on a collect step (step mod T < T - 1) the K-loop's updates train
Q, BCE, AUX and the encoder only (PPO/V gradients zero, pi and V not stepped) and
the first iteration's V_used(s_t) goes with the step's transitions into the
rollout's slice (``rl_rollout_store``, +1 launch); on the update step
(step mod T = T - 1) the step's transitions are stored first, and the K-loop's
env rows are the rollout's T B transitions: the first iteration runs ``rl_gae``
(+1 launch) after the V blend, every iteration then PPO, V, BCE and AUX on all
T B rows (K epochs over the rollout) beside Q on its replay minibatch. The PPO
signals (entropy, KL, ratio, advantage and return variance, pi and V grad norms)
are written only on update steps; their EMAs fold only then (gated on
RL_OBS_PPO_SAMPLES).
On the GPU each phase is its own captured graph (collect, update), replayed in the
host's schedule: a device-side gate would keep both phases' launches in one graph,
every step paying for the idle half (~1-2 µs a launch, some 40 launches x K_MAX).

Independent work runs on side branches (see ``alpharl.backends.device``): the first
PER draw and gather next to acting and the simulator, the copy of s_t next to acting,
the run totals of closed trades next to the K-loop, each PER priority update next to
what follows it (joined before the next sample) and the replay insert behind the last,
and inside the learning update its independent chains.

Backends: ``cuda`` (kernels on the GPU; the step is captured once as a CUDA
graph and replayed unless ``graph=False``), ``sim`` (the same kernels under
Numba's CUDA simulator) and ``numpy`` (the kernels' NumPy references: same
sequence on host arrays). Nothing in the step reads back to the host.
"""
from __future__ import annotations

import numpy as np

from alpharl.backends.factory import make_backend, resolve_backend
from alpharl.config import TrainConfig
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE
from alpharl.graph import CapturedGraph
from alpharl.rollout import phase_of
from alpharl.sizes import HIDDEN


class IntegratedTrainer:
    """B backtests + networks + replay + controllers; ``step()`` runs one training step."""

    def __init__(self, config: TrainConfig, market=None, hidden: int = HIDDEN, comm=None):
        """market: MarketData or SyntheticMarket for the order-book simulator, or a tuple of MarketData (one
        stream each: alpharl.sim.streams); unused with config.features.
        hidden: the encoder's width (SPEC: HIDDEN; narrower nets make kernel-vs-reference tests cheap).
        comm: this rank's communicator (alpharl.comm) when it is one of several data-parallel ranks; config
        is then the rank's own (alpharl.ranks.rank_config: B/G backtests)."""
        self.config = config.validate()
        self.backend = resolve_backend(config.backend)
        self.B = config.b
        self.M = min(config.minibatch, config.capacity)
        self.steps_done = 0
        self.ops = make_backend(self.backend, config, market, self.M, hidden, comm)
        self.obs_dim = self.ops.obs_dim
        self._graphs: dict[int, CapturedGraph] = {}  # per phase
        self._ran_eagerly: set[int] = set()  # phases whose kernels ran (compiled) in this process
        self.ops.reset()

    # ------------------------------------------------------------ the step
    def phase(self, step: int | None = None) -> int:
        """The phase of step ``step`` (default: the next): ENV_ONE_STEP, ENV_COLLECT or ENV_GAE (alpharl.rollout)."""
        return phase_of(self.steps_done if step is None else step, self.config.rollout)

    def _step_body(self, phase: int, insert_first: bool = False) -> None:
        """insert_first: the run's first step, whose replay is empty: the transitions go in before the draw."""
        o = self.ops
        # 7 (the first iteration's minibatch), from the replay as of the step's start: a side branch beside
        # 1-6, joined before the learning update. This step's transitions are drawable from the next step.
        if not insert_first:
            mb = o.sample(o.open_gate, ahead=True)
        # 1-4 observe (s_t kept on a side branch, joined before the simulator overwrites it), act
        o.keep_obs()
        o.act()
        o.join_obs()
        # 5-6 simulate
        o.simulate()
        o.accumulate()  # run totals: a side branch, joined below
        o.scale_reward(self.config.reward_scale)
        env = o.env_batch()
        if insert_first:  # the replay is empty: nothing to draw before this step's transitions
            o.insert(env)
            mb = o.sample(o.open_gate)
        learn_env = env
        if phase == ENV_GAE:  # the last slice, then the whole rollout is the update's env rows
            o.store_rollout(env, phase)
            learn_env = o.rollout_batch()
        # 7-12 the K-loop. K >= 1 always (rl_k_gate clamps it), so iteration 0 runs on the open gate.
        for k in range(self.config.k_max):
            gate = o.open_gate
            if k > 0:
                o.join_priorities()  # the last iteration's new priorities, before this one samples
                o.k_gate(k)
                if o.host_skips_gated and not o.gate_is_open():
                    break  # simulator and numpy only: gated-off operations would write nothing anyway
                gate = o.gate
                mb = o.sample(gate)
            else:
                o.join_sample()
            out = o.learn(learn_env, mb, gate, phase, gae=phase == ENV_GAE and k == 0)
            if k == 0 and self.config.pace_policy and phase != ENV_COLLECT:
                o.kl_first(out, phase)  # the KL before this update's own policy steps (alpharl.signals.KL_FIRST)
            if phase == ENV_COLLECT and k == 0:  # with V_used(s_t) at the parameters that acted
                o.store_rollout(env, phase)
            o.update_priorities(out, gate)  # a side branch, joined before the next sample
        if not insert_first:
            # 13 after every draw and priority update of the step: a slot drawn and now overwritten keeps the
            # new transition's max priority (a side branch behind the last update, joined at the end).
            o.insert(env, after_updates=True)
        # 14 signals (from the last iteration that ran): the SIGNAL_MOMENTS rows in one launch
        o.moments(out, phase)
        o.reduce_signals()  # data-parallel ranks: averaged over them (alpharl.ranks); else nothing
        # 14-15 signal EMAs, controllers and the step counter (one launch), 16 target soft update
        o.step_controllers()
        o.soft_update()
        o.join_priorities()
        o.join_accumulate()

    def step(self) -> None:
        """One training step (on the cuda backend a graph replay of its phase's graph, captured at the phase's
        second step in this process: the first runs eagerly, so capture records launches only)."""
        phase = self.phase()
        insert_first = self.steps_done == 0  # the replay is empty only before the first step's insert
        if self.backend == "cuda" and self.config.graph and not insert_first:
            if phase not in self._graphs and phase in self._ran_eagerly:
                self._graphs[phase] = CapturedGraph(self.ops.stream, lambda: self._step_body(phase))
            if phase in self._graphs:
                self._graphs[phase].replay()
                self.steps_done += 1
                return
        self._step_body(phase, insert_first)
        self._ran_eagerly.add(phase)
        self.steps_done += 1

    def captured(self, phase: int):
        """The phase's captured graph (alpharl.graph.CapturedGraph), or None before its capture."""
        return self._graphs.get(phase)

    def run(self, n: int) -> None:
        for _ in range(n):
            self.step()

    # ------------------------------------------------------------ host reads (off the hot path)
    def read_isv(self) -> np.ndarray:
        return self.ops.to_host(self.ops.isv)

    def metrics(self) -> dict[str, float]:
        """Trainer metrics for diagnostics (one sync): reward, PnL and trade statistics (``METRICS``)."""
        return self.ops.metrics()

    def stream_metrics(self) -> list[dict[str, float]]:
        """The same metrics per file when the backtests replay several ([] for one), in stream order."""
        return self.ops.stream_metrics()

    def state_dict(self) -> dict[str, np.ndarray]:
        return self.ops.state_dict() | {"trainer.steps_done": np.array(self.steps_done, np.int64)}

    def load_state_dict(self, d: dict) -> None:
        self.ops.load_state_dict(d)
        self.steps_done = int(d["trainer.steps_done"])
        self._graphs = {}
