"""The interface between the trainer and a backend, and what every backend shares.

``Backend`` declares the operations ``IntegratedTrainer._step_body`` calls, in
step order (SPEC §1); each backend runs them on its own arrays (s_t, a_t,
log pi_old, r_t, the gates, the ISV...), so the trainer passes only the batch
containers between them. On the device an operation only launches: nothing
synchronises until a host read (``to_host``, ``metrics``, ``state_dict``).

``SharedOps`` holds the operations that are the same on every backend, written
once on the attributes the Protocol declares: the env batch, replay insert and
sample, the trainer metrics and the one checkpoint format.
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from alpharl import signals
from alpharl.batches import EnvBatch, LearnerOutputs, ReplayBatch
from alpharl.cuda_kernels.nets.advantage import ENV_ONE_STEP

#: Parts of the checkpoint saved by their own ``state_dict``, each under "<part>." (and "rollout." with
#: --rollout T > 1: ``ROLLOUT_PART``).
STATE_PARTS = ("nets", "sim", "replay")
ROLLOUT_PART = "rollout"
#: The backend's own arrays in the checkpoint, one key each.
STATE_ARRAYS = ("isv", "prng", "step_count", "acc", "ret_run")
#: ... and with several files, the run totals of each file's backtests (float64 [S, N_ACC]).
STREAM_STATE_ARRAYS = ("acc_streams",)
#: Arrays a checkpoint written before they existed lacks: loaded as zeros (their initial value).
OPTIONAL_STATE_ARRAYS = ("ret_run",)


@runtime_checkable
class Backend(Protocol):
    """The step's operations on one backend's arrays (see the trainer's docstring for the order)."""

    B: int  #: backtests (the env batch's rows)
    M: int  #: replay minibatch rows
    obs_dim: int
    host_skips_gated: bool  #: read the K gate on the host and stop the K-loop at the first closed one
    sim: Any  #: the env: obs, reward, done, trade_pnl, label_up, label_ret, output(k), field(name)
    nets: Any  #: the networks' state (state_dict / load_state_dict)
    replay: Any  #: the prioritized replay (insert, sample, update_priorities, state_dict)
    rollout: Any  #: the rollout buffer (alpharl.rollout.Rollout) with --rollout T > 1, else None
    isv: Any  #: float32 [ISV_LEN]
    prng: Any  #: uint32 [B]: the action sampler's states
    step_count: Any  #: int64 [1]: the device step counter
    acc: Any  #: float64 [N_ACC]: run totals of closed trades
    acc_streams: Any  #: float64 [S, N_ACC]: the same per file of several (None: one file)
    ret_run: Any  #: float32 [B]: each backtest's discounted return so far (the reward statistics', rl_reward_norm)
    reward_stored: Any  #: float32 [B]: the rewards the replay stores (``reward`` itself unless --reward-norm)
    ones: Any  #: float32 [max(B, the update step's PPO / V rows, M)]: the unit weights of step 14
    gate: Any  #: int32 [1]: this K-loop iteration's gate (written by ``k_gate``)
    open_gate: Any  #: int32 [1] = 1: the first iteration's gate (K >= 1)

    def reset(self) -> None:
        """Start every backtest's first episode."""

    def keep_obs(self) -> None:
        """1: keep a copy of s_t (a side branch, joined by ``join_obs``)."""

    def join_obs(self) -> None: ...

    def act(self) -> None:
        """2-4: encode + pi head on s_t, sample a_t ~ pi, keep log pi_old(a_t | s_t)."""

    def simulate(self) -> None:
        """5: apply a_t, advance the market, fill, emit r_t and done_t, auto-reset."""

    def accumulate(self) -> None:
        """Run totals of closed trades and rewards (a side branch, joined by ``join_accumulate``)."""

    def join_accumulate(self) -> None: ...

    def scale_reward(self, scale: float) -> None:
        """r_t = the simulator's reward times scale; with --reward-norm, --adaptive-support or
        --adaptive-anchors also the running reward statistics, the gain and the support (rl_reward_norm),
        and r_t times the gain (the replay stores ``reward_stored``, before the gain)."""

    def env_batch(self) -> EnvBatch: ...

    def insert(self, env: EnvBatch, after_updates: bool = False) -> None:
        """6: the env batch's transitions into the replay; after_updates: at the step's end, after the last
        priority update (on the device on the priority updates' side branch, joined by ``join_priorities``)."""

    def store_rollout(self, env: EnvBatch, phase: int) -> None:
        """T > 1: the env batch into the rollout's slice step mod T (with V_used(s_t) of the last update when
        phase is ENV_COLLECT; on the ENV_GAE step rl_gae writes it)."""

    def rollout_batch(self) -> EnvBatch:
        """The rollout's T B transitions with obs_next = s_T (the learner's env rows on the ENV_GAE step); with
        rollout_rows the T n_sub of its subset (``gather_rollout`` first)."""

    def gather_rollout(self) -> None:
        """rollout_rows: this update's subset of the rollout into its own buffer (rl_rollout_gather)."""

    def k_gate(self, k: int) -> None:
        """``gate`` = 1 if K-loop iteration k runs (k < K from the ISV)."""

    def gate_is_open(self) -> bool:
        """Host read of ``gate`` (only where ``host_skips_gated``)."""

    def sample(self, gate, ahead: bool = False) -> ReplayBatch:
        """7: a replay minibatch; ahead: the first iteration's, from the replay as of the step's start (on the
        device a side branch from the step's start, joined by ``join_sample``)."""

    def join_sample(self) -> None: ...

    def learn(self, env: EnvBatch, mb: ReplayBatch, gate, phase: int = ENV_ONE_STEP, gae: bool = False
              ) -> LearnerOutputs:
        """7-12: one whole learning update in the step's phase, predicated on gate; gae (the ENV_GAE step's first
        iteration): GAE(lambda) over the rollout first."""

    def update_priorities(self, out: LearnerOutputs, gate) -> None:
        """13: the sampled rows' new priorities (a side branch, joined by ``join_priorities``)."""

    def join_priorities(self) -> None: ...

    def kl_first(self, out: LearnerOutputs, phase: int = ENV_ONE_STEP) -> None:
        """--pace-policy, after the K-loop's first iteration of a PPO/V update: its mean KL into obs_kl_first
        (alpharl.signals.KL_FIRST)."""

    def moments(self, out: LearnerOutputs, phase: int = ENV_ONE_STEP) -> None:
        """14: the SIGNAL_MOMENTS statistics into the ISV's obs slots (the PPO/V rows over the phase's samples)."""

    def reduce_signals(self) -> None:
        """14 with data-parallel ranks: step 14's statistics averaged over the ranks (alpharl.ranks)."""

    def step_controllers(self) -> None:
        """14-15: signal EMAs, controllers, step counter + 1."""

    def soft_update(self) -> None:
        """16: the target net towards the online net."""

    def sync(self) -> None:
        """Wait for every launched operation."""

    def to_host(self, arr) -> np.ndarray:
        """A host copy of one of the backend's arrays (synchronises)."""

    def copy_in(self, arr, host: np.ndarray) -> None:
        """Overwrite one of the backend's arrays with a host array of the same shape."""

    def metrics(self) -> dict[str, float]: ...

    def stream_metrics(self) -> list[dict[str, float]]:
        """The metrics of each file's backtests (several files; [] for one)."""

    def state_dict(self) -> dict[str, np.ndarray]: ...

    def load_state_dict(self, d: dict) -> None: ...


def _sub(d: dict, prefix: str) -> dict:
    return {k[len(prefix):]: v for k, v in d.items() if k.startswith(prefix)}


class SharedOps:
    """The operations written once for every backend (on the attributes ``Backend`` declares, and
    obs_t, actions, logp, reward: the env batch's own arrays)."""

    def reduce_signals(self) -> None:
        """14 with data-parallel ranks (``self.ranks``, None with one): step 14's statistics averaged."""
        if self.ranks is not None:
            self.ranks.signals(self.isv)

    def env_batch(self) -> EnvBatch:
        s = self.sim
        return EnvBatch(self.obs_t, self.actions, self.logp, self.reward, s.done, s.obs, s.label_up, s.label_ret)

    def insert(self, env: EnvBatch, after_updates: bool = False) -> None:
        """The transitions, with the rewards before the normaliser's gain (``reward_stored``: env.reward
        itself without --reward-norm); the C51 loss reads them at the gain of its own step."""
        reward = self.reward_stored if env.reward is self.reward else env.reward
        self.replay.insert(env.obs, env.action, reward, env.done, env.obs_next,
                           stream=self._insert_stream(after_updates))

    def sample(self, gate, ahead: bool = False) -> ReplayBatch:
        return self.replay.sample(self.isv, self.M, gate, stream=self._sample_stream(ahead))

    def _insert_stream(self, after_updates: bool):
        """The stream ``insert`` launches on (None: the backend's own; host arrays have no other)."""
        return None

    def _sample_stream(self, ahead: bool):
        """The stream ``sample`` launches on (None: the backend's own)."""
        return None

    def rollout_batch(self) -> EnvBatch:
        if self.rollout.sub is not None:  # rollout_rows: the update's backtests' trajectories, gathered first
            self.gather_rollout()
        return self.rollout.env_batch(self.sim.obs)

    def _state_parts(self) -> tuple[str, ...]:
        return STATE_PARTS + ((ROLLOUT_PART,) if self.rollout is not None else ())

    def metrics(self) -> dict[str, float]:
        """Trainer metrics for diagnostics (one sync): reward, PnL and trade statistics."""
        return signals.metrics(self.to_host(self.acc), np.array(self.sim.field("equity")))

    def stream_metrics(self) -> list[dict[str, float]]:
        """The trainer metrics of each file's backtests, in stream order ([] with one file)."""
        if self.acc_streams is None:
            return []
        acc, equity = self.to_host(self.acc_streams), np.array(self.sim.field("equity"))
        return [signals.metrics(acc[k], equity[members]) for k, members in enumerate(self.sim.layout.members)]

    def _state_arrays(self) -> tuple[str, ...]:
        return STATE_ARRAYS + (STREAM_STATE_ARRAYS if self.acc_streams is not None else ())

    def state_dict(self) -> dict[str, np.ndarray]:
        """The checkpoint: "nets.*", "sim.*", "replay.*" (each part's own state_dict), then STATE_ARRAYS
        (and STREAM_STATE_ARRAYS with several files)."""
        self.sync()
        d = {}
        for part in self._state_parts():
            d |= {f"{part}.{k}": np.asarray(v) for k, v in getattr(self, part).state_dict().items()}
        return d | {name: self.to_host(getattr(self, name)) for name in self._state_arrays()}

    def load_state_dict(self, d: dict) -> None:
        self.sync()
        for part in self._state_parts():
            getattr(self, part).load_state_dict(_sub(d, part + "."))
        for name in self._state_arrays():
            host = d.get(name)
            if host is None and name in OPTIONAL_STATE_ARRAYS:
                host = np.zeros_like(self.to_host(getattr(self, name)))
            self.copy_in(getattr(self, name), d[name] if host is None else host)
        self.sync()
