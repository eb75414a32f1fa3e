"""The step's operations on host arrays, through the kernels' NumPy references: the numpy backend.

Same sequence and the same state as the device backend; every operation is done when it
returns, so the side branches' joins are no-ops.
"""
from __future__ import annotations

import numpy as np

from alpharl import isv as S
from alpharl.backends.base import SharedOps
from alpharl.batches import STEP_OUTPUTS, EnvBatch, LearnerOutputs, ReplayBatch
from alpharl.config import Q_TARGET_POLICY, TrainConfig
from alpharl.controllers import reference_controllers, reference_signal_emas, reward_flags, reward_statistics
from alpharl.cuda_kernels.nets.adam import STATE_COLS
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE, ENV_ONE_STEP
from alpharl.cuda_kernels.step_ops import N_ACC
from alpharl.nets import MODULES, NetLayout
from alpharl.prng import STREAM_ACTIONS, rank_seed, seed_states
from alpharl.ranks import rank_sync
from alpharl.reference import learner as RL
from alpharl.reference.controllers import rl_k_gate, rl_reward_norm
from alpharl.reference.lobsim.streams import make_reference_lobsim
from alpharl.reference.reductions import rl_batch_moments_multi
from alpharl.reference.replay import PrioritizedReplayReference
from alpharl.reference.rollout import rl_rollout_gather, rl_rollout_store
from alpharl.reference.sampling import rl_pi_action_kernel
from alpharl.reference.step_ops import rl_accumulate_trades, rl_scale
from alpharl.rollout import Rollout
from alpharl.signals import kl_first_inputs, kl_first_table, signal_inputs, signal_moments_table
from alpharl.sim.features import ReferenceFeatureEnv
from alpharl.sim.layout import OUT_REWARD, OUT_TRADE_DONE, OUT_TRADE_PNL
from alpharl.sizes import HIDDEN


class HostNets:
    """``alpharl.nets.Nets``' state on host arrays: params, adam_m, adam_v, target, adam_state."""

    def __init__(self, layout: NetLayout, seed: int):
        p0 = layout.init_params(seed)
        n = layout.n_params
        self.layout = layout
        self.state = {"params": p0, "adam_m": np.zeros(n, np.float32), "adam_v": np.zeros(n, np.float32),
                      "target": p0[: layout.n_target].copy(),
                      "adam_state": np.zeros(len(MODULES) * STATE_COLS, np.int32)}

    def state_dict(self) -> dict:
        return self.state

    def load_state_dict(self, d: dict) -> None:
        self.state = {k: np.array(v) for k, v in d.items() if k in self.state}


class NumpyBackend(SharedOps):
    """The step's operations on host arrays, through the kernels' NumPy references."""

    def __init__(self, config: TrainConfig, market, m: int, hidden: int = HIDDEN, comm=None):
        """comm: this rank's communicator (alpharl.comm) with data-parallel ranks; None for one."""
        B = config.b
        self.B, self.M = B, m
        seed = rank_seed(config.seed, 0 if comm is None else comm.rank)  # the nets: config.seed on every rank
        if config.features:
            self.sim = ReferenceFeatureEnv(B, seed)
        else:
            self.sim = make_reference_lobsim(market, config.sim, B, seed)
        self.obs_dim = self.sim.obs_dim
        self.layout = NetLayout(self.obs_dim, hidden)
        self.nets = HostNets(self.layout, config.seed)
        self.ranks = rank_sync(comm, self.layout.n_params, device=False)
        self.replay = PrioritizedReplayReference(config.capacity, self.obs_dim, m, seed)
        T = self.t_len = config.rollout
        self.lam = config.gae_lambda
        self.rollout = Rollout(T, B, self.obs_dim, device=False, rows=config.rollout_rows) if T > 1 else None
        n_update = B if self.rollout is None else self.rollout.update_rows  # the update step's env rows
        # rl_gae's outputs, reused by the update step's later K-loop iterations (the device learner's buffers)
        self.gae_buffers = {k: np.zeros(n_update, np.float32) for k in ("advantage", "ret", "ppo_adv")}
        self.v_used = np.zeros(B, np.float32)  # V_used(s_t) of the last update (what the rollout store reads)
        self.isv = S.bootstrap_vector()
        self.obs_t = np.zeros((B, self.obs_dim), np.float32)
        self.actions = np.zeros(B, np.int32)
        self.logp = np.zeros(B, np.float32)
        self.reward = np.zeros(B, np.float32)
        self.reward_flags = reward_flags(config)
        self.reward_stats = reward_statistics(config)
        self.reward_stored = np.zeros(B, np.float32) if config.reward_norm else self.reward
        self.ret_run = np.zeros(B, np.float32)
        self.anchors = config.adaptive_anchors
        self.pace = config.pace_policy
        self.k_noise = config.k_noise_band
        self.mirror = config.mirror_policy
        self.policy_target = config.q_target == Q_TARGET_POLICY
        self.prng = seed_states(seed, B, STREAM_ACTIONS)
        self.ones = np.ones(max(B, n_update, m), np.float32)
        self.moments_tables = {phase: signal_moments_table(B, m, n_ppo)
                               for phase, n_ppo in ((ENV_ONE_STEP, B), (ENV_COLLECT, 0), (ENV_GAE, n_update))}
        self.kl_first_tables = {phase: kl_first_table(n_ppo)
                                for phase, n_ppo in ((ENV_ONE_STEP, B), (ENV_GAE, n_update))}
        self.gate = np.ones(1, np.int32)
        self.open_gate = np.ones(1, np.int32)
        self.step_count = np.zeros(1, np.int64)
        self.host_skips_gated = True  # host arrays: reading the gate is free
        self.acc = np.zeros(N_ACC, np.float64)
        n_streams = getattr(self.sim, "n_streams", 0)
        self.acc_streams = np.zeros((n_streams, N_ACC), np.float64) if n_streams else None

    def reset(self) -> None:
        self.sim.reset()

    # ---- the step
    def keep_obs(self) -> None:
        self.obs_t[...] = self.sim.obs

    def join_obs(self) -> None:
        pass  # host arrays: every operation is done when it returns

    def act(self) -> None:
        logits = RL.pi_logits(self.nets.state["params"], self.layout, self.sim.obs, self.mirror)
        rl_pi_action_kernel(logits, self.prng, self.actions, self.logp)

    def simulate(self) -> None:
        self.sim.step(self.actions)

    def accumulate(self) -> None:
        s = self.sim
        rl_accumulate_trades(s.output(OUT_TRADE_DONE), s.trade_pnl, s.reward, self.B, self.acc)
        for k in range(0 if self.acc_streams is None else s.n_streams):
            out = s.stream_outputs(k)
            rl_accumulate_trades(out[OUT_TRADE_DONE], out[OUT_TRADE_PNL], out[OUT_REWARD], out.shape[1],
                                 self.acc_streams[k])

    def join_accumulate(self) -> None:
        pass

    def scale_reward(self, scale: float) -> None:
        if not self.reward_stats:
            rl_scale(self.sim.reward, self.B, scale, self.reward)
            return
        rl_reward_norm(self.sim.reward, self.B, scale, self.sim.done, self.ret_run, self.reward_flags, self.isv,
                       self.reward, self.reward_stored)

    def store_rollout(self, env: EnvBatch, phase: int) -> None:
        rl_rollout_store(self.step_count, self.t_len, self.B, self.obs_dim, phase == ENV_COLLECT, env.obs,
                         env.action, env.logp_old, env.reward, env.done, env.label_up, env.label_ret, self.v_used,
                         *self.rollout.flat())

    def gather_rollout(self) -> None:
        rl_rollout_gather(self.step_count, *self.rollout.gather_args(self.sim.obs))

    def k_gate(self, k: int) -> None:
        rl_k_gate(self.isv, k, self.gate)

    def gate_is_open(self) -> bool:
        return bool(self.gate[0])

    def learn(self, env: EnvBatch, mb: ReplayBatch, gate, phase: int = ENV_ONE_STEP, gae: bool = False
              ) -> LearnerOutputs:
        r = RL.update(self.nets.state, self.isv, env, mb, self.layout, dtype=np.float32, mode=phase,
                      gae=self.rollout.gae_inputs(self.lam) if gae else None,
                      gae_buffers=self.gae_buffers if phase == ENV_GAE else None, rel_update=self.anchors,
                      ranks=self.ranks, mirror=self.mirror, policy_target=self.policy_target)
        self.nets.state = {k: np.asarray(v, np.float32) if k != "adam_state" else v for k, v in r.state.items()}
        self.isv[:] = r.isv
        self.v_used = np.asarray(r.out.v_used, np.float32)
        return r.out._replace(**{k: np.asarray(getattr(r.out, k), np.float32) for k in STEP_OUTPUTS
                                 if getattr(r.out, k) is not None})

    def update_priorities(self, out: LearnerOutputs, gate) -> None:
        self.replay.update_priorities(out.q_priority, self.M, gate)

    def join_priorities(self) -> None:
        pass

    def join_sample(self) -> None:
        pass

    def kl_first(self, out: LearnerOutputs, phase: int = ENV_ONE_STEP) -> None:
        rl_batch_moments_multi(*kl_first_inputs(out, self.ones), self.kl_first_tables[phase], self.isv)

    def moments(self, out: LearnerOutputs, phase: int = ENV_ONE_STEP) -> None:
        rl_batch_moments_multi(*signal_inputs(out, self.sim, self.ones), self.moments_tables[phase], self.isv)

    def step_controllers(self) -> None:
        reference_signal_emas(self.isv, anchors=self.anchors)
        reference_controllers(self.isv, anchors=self.anchors, pace=self.pace, k_noise=self.k_noise)
        self.step_count[0] += 1

    def soft_update(self) -> None:
        st = self.nets.state
        st["target"] = np.asarray(RL.soft_update(st["target"], st["params"], self.layout.n_target, self.isv),
                                  np.float32)

    # ---- host side
    def sync(self) -> None:
        pass

    def to_host(self, arr) -> np.ndarray:
        return np.array(arr, copy=True)

    def copy_in(self, arr, host: np.ndarray) -> None:
        arr[...] = host
