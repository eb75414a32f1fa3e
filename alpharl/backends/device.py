"""The step's operations as kernel launches on one stream: the cuda backend (on the GPU) and the
sim backend (the same kernels under Numba's CUDA simulator).

Independent work runs on side branches (``alpharl.graph.Branches``; parallel branches of the
captured graph): the first PER draw and gather from the step's start next to acting and the
simulator (joined before the learning update), the copy of s_t next to acting, the run totals of
closed trades next to the K-loop, each PER priority update next to what follows it (joined before
the next sample) and the replay insert after the last one.

The first draw's branch reads the replay, the sampler states and the ISV's PER alpha and beta, and
writes the minibatch, the CDF scratch and the ISV's ESS slot: nothing the acting and simulator chain
reads or writes (the reward normaliser writes other ISV slots, disjoint words).
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from alpharl import isv as S
from alpharl import target
from alpharl.backends.base import SharedOps
from alpharl.batches import EnvBatch, LearnerOutputs, ReplayBatch
from alpharl.config import Q_TARGET_POLICY, TrainConfig
from alpharl.controllers import Controllers, reward_flags, reward_statistics
from alpharl.cuda_kernels.controllers.reward_norm import REWARD_NORM_BLOCK, rl_reward_norm
from alpharl.cuda_kernels.controllers.k_loop import rl_k_gate
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE, ENV_ONE_STEP
from alpharl.cuda_kernels.nets.rollout import (ROLLOUT_BLOCK, gather_grid, rl_rollout_gather, rl_rollout_store,
                                               store_grid)
from alpharl.cuda_kernels.reductions import REDUCE_BLOCK, pad_moments_inputs, rl_batch_moments_multi
from alpharl.cuda_kernels.sampling.action import ACTION_BLOCK, action_grid, rl_pi_action_kernel
from alpharl.cuda_kernels.step_ops import N_ACC, STEP_OPS_BLOCK, rl_accumulate_trades, rl_scale
from alpharl.graph import Branches
from alpharl.learner import Learner
from alpharl.nets import Nets
from alpharl.prng import STREAM_ACTIONS, rank_seed, seed_states
from alpharl.ranks import rank_sync
from alpharl.replay import PrioritizedReplay
from alpharl.rollout import Rollout
from alpharl.signals import kl_first_inputs, kl_first_table, signal_inputs, signal_moments_table
from alpharl.sim.features import FeatureEnv
from alpharl.sim.layout import OUT_REWARD, OUT_TRADE_DONE, OUT_TRADE_PNL
from alpharl.sim.streams import make_lobsim
from alpharl.sizes import HIDDEN, cdiv

#: Side branches of the step (``Branches`` indices).
BRANCH_OBS, BRANCH_ACCUMULATE, BRANCH_PRIORITIES, BRANCH_SAMPLE = range(4)
N_STEP_BRANCHES = 4


class DeviceBackend(SharedOps):
    """The step's operations as kernel launches on one stream (cuda and sim backends)."""

    def __init__(self, config: TrainConfig, market, m: int, hidden: int = HIDDEN, comm=None):
        """comm: this rank's communicator (alpharl.comm) with data-parallel ranks; None for one."""
        self.stream = cuda.stream()
        st = self.stream
        B = config.b
        self.B, self.M = B, m
        # The networks start from the run's seed on every rank; the backtests, replay and actions from the rank's.
        seed = rank_seed(config.seed, 0 if comm is None else comm.rank)
        if config.features:
            self.sim = FeatureEnv(B, seed, stream=st)
        else:
            self.sim = make_lobsim(market, config.sim, B, seed, stream=st)
        self.obs_dim = self.sim.obs_dim
        self.nets = Nets(self.obs_dim, seed=config.seed, hidden=hidden)
        T = self.t_len = config.rollout
        self.lam = config.gae_lambda
        self.rollout = Rollout(T, B, self.obs_dim, device=True, stream=st, rows=config.rollout_rows) if T > 1 else None
        # The update step's env rows are the rollout's T B (T n_sub with rollout_rows); the t+1 rows at most B.
        n_update = B if self.rollout is None else self.rollout.update_rows
        self.ranks = rank_sync(comm, self.nets.layout.n_params, device=True, stream=st)
        self.learner = Learner(self.nets, max(B, n_update), m, stream=st, max_next=B,
                               rel_update=config.adaptive_anchors, ranks=self.ranks, tensor_cores=config.tensor_cores,
                               fused=config.fused_update, mirror=config.mirror_policy,
                               policy_target=config.q_target == Q_TARGET_POLICY)
        self.replay = PrioritizedReplay(config.capacity, self.obs_dim, m, seed, stream=st)
        self.controllers = Controllers(st, anchors=config.adaptive_anchors, pace=config.pace_policy,
                                      k_noise=config.k_noise_band)
        self.isv = S.alloc_isv(st)
        f32 = np.float32
        self.obs_t = cuda.device_array((B, self.obs_dim), f32, stream=st)
        self.actions = cuda.device_array(B, np.int32, stream=st)
        self.logp = cuda.device_array(B, f32, stream=st)
        self.reward = cuda.device_array(B, f32, stream=st)
        self.reward_flags = reward_flags(config)
        self.reward_stats = reward_statistics(config)
        self.reward_stored = cuda.device_array(B, f32, stream=st) if config.reward_norm else self.reward
        self.ret_run = cuda.to_device(np.zeros(B, f32), stream=st)
        self.prng = cuda.to_device(seed_states(seed, B, STREAM_ACTIONS), stream=st)
        self.ones = cuda.to_device(np.ones(max(B, n_update, m), f32), stream=st)
        # One table per phase, before any graph capture: the PPO/V rows over B, T B or no samples.
        self.moments_tables = {phase: cuda.to_device(signal_moments_table(B, m, n_ppo), stream=st)
                               for phase, n_ppo in ((ENV_ONE_STEP, B), (ENV_COLLECT, 0), (ENV_GAE, n_update))}
        self.kl_first_tables = {phase: cuda.to_device(kl_first_table(n_ppo), stream=st)
                                for phase, n_ppo in ((ENV_ONE_STEP, B), (ENV_GAE, n_update))}
        self.gate = cuda.to_device(np.ones(1, np.int32), stream=st)
        self.open_gate = cuda.to_device(np.ones(1, np.int32), stream=st)
        self.step_count = cuda.to_device(np.zeros(1, np.int64), stream=st)
        # Under the CUDA simulator every thread is a Python thread, so launching the
        # gated-off K-loop iterations costs minutes; eager simulator runs read the gate
        # instead (identical results: a gated-off kernel writes nothing). The GPU
        # path never reads it: K stays a device-side decision inside the graph.
        self.host_skips_gated = target.on_simulator()
        self.acc = cuda.to_device(np.zeros(N_ACC, np.float64), stream=st)
        # several files: the run totals of each file's backtests too (row k: stream k)
        n_streams = getattr(self.sim, "n_streams", 0)
        self.acc_streams = cuda.to_device(np.zeros((n_streams, N_ACC), np.float64), stream=st) if n_streams else None
        self.branches = Branches(st, N_STEP_BRANCHES)
        self._pending: set[int] = set()  # side branches forked and not yet joined

    def reset(self) -> None:
        self.sim.reset()
        self.stream.synchronize()

    # ---- the step
    def keep_obs(self) -> None:
        self.obs_t.copy_to_device(self.sim.obs, stream=self.branches.fork(BRANCH_OBS))

    def join_obs(self) -> None:
        self.branches.join(BRANCH_OBS)

    def act(self) -> None:
        logits = self.learner.act_forward(self.sim.obs, self.open_gate)
        rl_pi_action_kernel[action_grid(self.B), ACTION_BLOCK, self.stream](logits, self.prng, self.actions, self.logp)

    def simulate(self) -> None:
        self.sim.step(self.actions)

    def accumulate(self) -> None:
        s = self.sim
        side = self.branches.fork(BRANCH_ACCUMULATE)
        rl_accumulate_trades[1, STEP_OPS_BLOCK, side](s.output(OUT_TRADE_DONE), s.trade_pnl, s.reward,
                                                      np.int32(self.B), self.acc)
        for k in range(0 if self.acc_streams is None else s.n_streams):
            out = s.stream_outputs(k)
            rl_accumulate_trades[1, STEP_OPS_BLOCK, side](out[OUT_TRADE_DONE], out[OUT_TRADE_PNL], out[OUT_REWARD],
                                                          np.int32(out.shape[1]), self.acc_streams[k])

    def join_accumulate(self) -> None:
        self.branches.join(BRANCH_ACCUMULATE)

    def scale_reward(self, scale: float) -> None:
        if not self.reward_stats:
            rl_scale[cdiv(self.B, STEP_OPS_BLOCK), STEP_OPS_BLOCK, self.stream](
                self.sim.reward, np.int32(self.B), np.float32(scale), self.reward)
            return
        rl_reward_norm[1, REWARD_NORM_BLOCK, self.stream](
            self.sim.reward, np.int32(self.B), np.float32(scale), self.sim.done, self.ret_run, self.reward_flags,
            self.isv, self.reward, self.reward_stored)

    def store_rollout(self, env: EnvBatch, phase: int) -> None:
        rl_rollout_store[store_grid(self.B, self.obs_dim), ROLLOUT_BLOCK, self.stream](
            self.step_count, np.int32(self.t_len), np.int32(self.B), np.int32(self.obs_dim),
            np.int32(phase == ENV_COLLECT), env.obs.reshape(env.obs.size), env.action, env.logp_old, env.reward,
            env.done, env.label_up, env.label_ret, self.learner.v_used, *self.rollout.flat())

    def gather_rollout(self) -> None:
        r = self.rollout
        rl_rollout_gather[gather_grid(r.n_sub, r.t_len, r.obs_dim), ROLLOUT_BLOCK, self.stream](
            self.step_count, *r.gather_args(self.sim.obs))

    def k_gate(self, k: int) -> None:
        rl_k_gate[1, 1, self.stream](self.isv, np.int32(k), self.gate)

    def gate_is_open(self) -> bool:
        return bool(self.to_host(self.gate)[0])

    def learn(self, env: EnvBatch, mb: ReplayBatch, gate, phase: int = ENV_ONE_STEP, gae: bool = False
              ) -> LearnerOutputs:
        return self.learner.update(env, mb, self.isv, gate, mode=phase,
                                   gae=self.rollout.gae_inputs(self.lam) if gae else None)

    def update_priorities(self, out: LearnerOutputs, gate) -> None:
        self.replay.update_priorities(out.q_priority, self.M, gate, stream=self._fork_pending(BRANCH_PRIORITIES))

    def _sample_stream(self, ahead: bool):
        return self._fork_pending(BRANCH_SAMPLE) if ahead else None

    def join_sample(self) -> None:
        self._join_pending(BRANCH_SAMPLE)

    def _insert_stream(self, after_updates: bool):
        # Behind the last priority update on its branch (same stream), and after the last gather (the fork):
        # the tail's other work (moments, controllers, soft update) does not wait for the insert.
        return self._fork_pending(BRANCH_PRIORITIES) if after_updates else None

    def join_priorities(self) -> None:
        self._join_pending(BRANCH_PRIORITIES)

    def _fork_pending(self, branch: int):
        """Side stream ``branch``, forked now; ``_join_pending`` joins it once, whatever ran on it since."""
        self._pending.add(branch)
        return self.branches.fork(branch)

    def _join_pending(self, branch: int) -> None:
        if branch in self._pending:
            self.branches.join(branch)
            self._pending.discard(branch)

    def kl_first(self, out: LearnerOutputs, phase: int = ENV_ONE_STEP) -> None:
        xs, ws = kl_first_inputs(out, self.ones)
        rl_batch_moments_multi[1, REDUCE_BLOCK, self.stream](
            pad_moments_inputs(xs), pad_moments_inputs(ws), self.kl_first_tables[phase], self.isv)

    def moments(self, out: LearnerOutputs, phase: int = ENV_ONE_STEP) -> None:
        """Step 14's statistics (rows of the phase's moments table): one launch, one block per row."""
        xs, ws = signal_inputs(out, self.sim, self.ones)
        rl_batch_moments_multi[len(xs), REDUCE_BLOCK, self.stream](
            pad_moments_inputs(xs), pad_moments_inputs(ws), self.moments_tables[phase], self.isv)

    def step_controllers(self) -> None:
        self.controllers.launch_step(self.isv, self.step_count)

    def soft_update(self) -> None:
        self.learner.soft_update(self.isv)

    # ---- host side
    def sync(self) -> None:
        self.stream.synchronize()

    def to_host(self, arr) -> np.ndarray:
        self.sync()
        return arr.copy_to_host(stream=self.stream)

    def copy_in(self, arr, host: np.ndarray) -> None:
        arr.copy_to_device(np.ascontiguousarray(host), stream=self.stream)
