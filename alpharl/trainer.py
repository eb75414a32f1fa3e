"""IntegratedTrainer: the whole training step (SPEC §1) for all B backtests at once.

``step_with_lobsim`` (the default) and ``step_synthetic`` run the same fixed
sequence; only where s_t, r_t and done_t come from differs:

 1. observe s_t (the simulator's observation buffer) and keep a copy;
 2-4. encode + pi head on s_t; ``rl_pi_action_kernel`` samples a_t ~ pi and keeps
    log pi_old(a_t | s_t);
 5. ``lobsim_step`` applies a_t, advances the market, fills, emits r_t, done_t,
    auto-resets (``step_synthetic``: a synthetic feature/reward process instead);
 6. s_{t+1} = the simulator's new observation; the transition goes to the PER;
 7-12. the K-loop: k_max (<= K_MAX) copies of [``rl_k_gate`` -> PER sample -> learning update
    (Q C51 + Double-DQN, V blend, advantage/return, PPO, V, BCE, AUX, encoder, Adam)
    -> PER priority update], each copy predicated on the device by its gate (the
    first copy always runs: K >= 1, so it needs no gate kernel), so
    K = clamp(round(isv[404] / 2048), 1, K_MAX) costs no host read and the graph
    stays fixed. (A conditional graph node would skip the gated-off copies
    entirely, but needs a device-side cudaGraphSetConditional that numba kernels
    cannot call, and eager mode would differ from graph mode; predication keeps
    both identical and costs a few idle launches of ~1 µs.)
 14. signals: ``rl_batch_moments_multi`` (one launch, one block per statistic) of
    entropy, KL, TD error, advantage, return, ratio, done and closed-trade PnL into
    the ISV's obs slots (``SIGNAL_MOMENTS``), then the EMAs;
 15. controllers (LR, clip, ratio bound, entropy coef, tau, PER, K);
 16. target soft update; device step counter + 1.

Independent work runs on side branches (``alpharl.graph.Branches``; parallel
branches of the captured graph): the copy of s_t next to acting, the run
totals of closed trades next to the K-loop, each PER priority update next to
what follows it (joined before the next sample), and inside the learning
update its independent chains.

Backends: ``cuda`` (kernels on the GPU; the step is captured once as a CUDA
graph and replayed unless ``graph=False``), ``sim`` (the same kernels under
Numba's CUDA simulator) and ``numpy`` (the kernels' NumPy references: same
sequence on host arrays). Nothing in the step reads back to the host.
"""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from alpharl import isv as S
from alpharl.config import TrainConfig
from alpharl.prng import STREAM_ACTIONS, seed_states
from alpharl.sim.layout import OUT_TRADE_DONE
from alpharl.cuda_kernels.reductions import MomentSlots, moments_table
from alpharl.cuda_kernels.step_ops import N_ACC
from alpharl.sizes import HIDDEN

#: Side branches of the step (``alpharl.graph.Branches`` indices of ``_DeviceOps``).
BRANCH_OBS, BRANCH_ACCUMULATE, BRANCH_PRIORITIES = range(3)
N_STEP_BRANCHES = 3


class SignalMoment(NamedTuple):
    """One batch statistic of step 14: its input, length, weights and ISV slots."""

    x: str  #: the input: a learner output (entropy, kl, ratio, advantage, ret, td) or done / trade_pnl
    minibatch: bool  #: length M (a replay minibatch) instead of B (the env batch)
    slots: MomentSlots
    by_trade_done: bool = False  #: weighted by the closed-trade flag (else all weights 1)


#: Step 14's batch statistics, one block each of ``rl_batch_moments_multi`` (one launch for all).
SIGNAL_MOMENTS = (
    SignalMoment("entropy", False, MomentSlots(mean=S.RL_OBS_ENTROPY)),
    SignalMoment("kl", False, MomentSlots(mean=S.RL_OBS_KL)),
    SignalMoment("ratio", False, MomentSlots(max=S.RL_OBS_RATIO_MAX)),
    SignalMoment("advantage", False, MomentSlots(var=S.RL_OBS_ADV_VAR)),
    SignalMoment("ret", False, MomentSlots(var=S.RL_OBS_RETURN_VAR)),
    SignalMoment("td", True, MomentSlots(kurt=S.RL_OBS_TD_KURTOSIS)),
    SignalMoment("done", False, MomentSlots(mean=S.RL_OBS_DONE_RATE)),
    SignalMoment("trade_pnl", False, MomentSlots(count=S.RL_OBS_TRADES, mean=S.RL_OBS_REWARD_PER_TRADE,
                                                 neg_frac=S.RL_OBS_LOSS_RATE), by_trade_done=True),
)


def signal_moments_table(b: int, m: int) -> np.ndarray:
    """int32 [len(SIGNAL_MOMENTS), MOM_COLS]: n and slots of step 14's statistics (built once per trainer)."""
    return moments_table([(m if r.minibatch else b, r.slots) for r in SIGNAL_MOMENTS])


def resolve_backend(backend: str) -> str:
    """auto -> cuda with a GPU, numpy without; cuda/sim must match the process's numba target."""
    from alpharl import target

    active = target.active()
    if backend == "auto":
        return "cuda" if active == target.GPU else "numpy"
    if backend == "cuda" and active != target.GPU:
        raise ValueError("--backend cuda: no GPU here (numba runs the CUDA simulator); use --backend numpy or sim")
    if backend == "sim" and active != target.SIM:
        raise ValueError("--backend sim: this process runs numba on the GPU; set ALPHARL_TARGET=sim to simulate")
    return backend


class IntegratedTrainer:
    """B backtests + networks + replay + controllers; ``step()`` runs one training step."""

    def __init__(self, config: TrainConfig, market=None, hidden: int = HIDDEN):
        """market: MarketData or SyntheticMarket for step_with_lobsim; unused with config.features.
        hidden: the encoder's width (SPEC: HIDDEN; narrower nets make kernel-vs-reference tests cheap)."""
        self.config = config.validate()
        self.backend = resolve_backend(config.backend)
        self.B = config.b
        self.M = min(config.minibatch, config.capacity)
        self.steps_done = 0
        if self.backend == "numpy":
            self.ops = _NumpyOps(config, market, self.M, hidden)
        else:
            self.ops = _DeviceOps(config, market, self.M, hidden)
        self.obs_dim = self.ops.obs_dim
        self._graph = None
        self.ops.reset()

    # ------------------------------------------------------------ the step
    def _step_body(self) -> None:
        o, B, M = self.ops, self.B, self.M
        # 1-4 observe (s_t kept on a side branch, joined before the simulator overwrites it), act
        o.keep_obs()
        o.act(o.sim.obs)
        o.join_obs()
        # 5-6 simulate, store the transition
        o.sim.step(o.actions)
        trade_done = o.sim.output(OUT_TRADE_DONE)
        o.accumulate(trade_done, o.sim.trade_pnl, o.sim.reward, B)  # run totals: a side branch, joined below
        o.scale(o.sim.reward, B, self.config.reward_scale, o.reward)
        o.replay.insert(o.obs_t, o.actions, o.reward, o.sim.done, o.sim.obs)
        env = o.env_batch()
        # 7-13 the K-loop. K >= 1 always (rl_k_gate clamps it), so iteration 0 runs on the open gate.
        for k in range(self.config.k_max):
            gate = o.open_gate
            if k > 0:
                o.join_priorities()  # the last iteration's new priorities, before this one samples
                o.k_gate(o.isv, k, o.gate)
                if o.host_skips_gated and not o.gate_is_open():
                    break  # simulator only: gated-off kernels would write nothing anyway
                gate = o.gate
            mb = o.replay.sample(o.isv, M, gate)
            out = o.learn(env, mb, gate)
            o.update_priorities(out.q_priority, M, gate)  # a side branch, joined before the next sample
        # 14 signals (from the last iteration that ran): the SIGNAL_MOMENTS rows in one launch
        inputs = {"entropy": out.entropy, "kl": out.kl, "ratio": out.ratio, "advantage": out.advantage,
                  "ret": out.ret, "td": out.td, "done": o.sim.done, "trade_pnl": o.sim.trade_pnl}
        o.moments([inputs[r.x] for r in SIGNAL_MOMENTS],
                  [trade_done if r.by_trade_done else o.ones for r in SIGNAL_MOMENTS])
        # 14-15 signal EMAs, controllers and the step counter (one launch), 16 target soft update
        o.step_controllers()
        o.soft_update()
        o.join_priorities()
        o.join_accumulate()

    def step(self) -> None:
        """One training step (graph replay on the cuda backend after the first, eager step)."""
        if self.backend == "cuda" and self.config.graph:
            if self._graph is None and self.steps_done >= 1:
                from alpharl.graph import CapturedGraph

                self._graph = CapturedGraph(self.ops.stream, self._step_body)
            if self._graph is not None:
                self._graph.replay()
                self.steps_done += 1
                return
        self._step_body()
        self.steps_done += 1

    def step_with_lobsim(self) -> None:
        """One step on the order-book simulator (config.features False)."""
        assert not self.config.features
        self.step()

    def step_synthetic(self) -> None:
        """One step on the synthetic feature/reward process (config.features True)."""
        assert self.config.features
        self.step()

    def run(self, n: int) -> None:
        for _ in range(n):
            self.step()

    # ------------------------------------------------------------ host reads (off the hot path)
    def read_isv(self) -> np.ndarray:
        return self.ops.to_host(self.ops.isv)

    def metrics(self) -> dict[str, float]:
        """Trainer metrics for diagnostics (one sync): losses, reward, PnL and trade statistics."""
        return self.ops.metrics()

    def state_dict(self) -> dict[str, np.ndarray]:
        return self.ops.state_dict() | {"trainer.steps_done": np.array(self.steps_done, np.int64)}

    def load_state_dict(self, d: dict) -> None:
        self.ops.load_state_dict(d)
        self.steps_done = int(d["trainer.steps_done"])
        self._graph = None


# =========================================================== device ops

class _DeviceOps:
    """The step's operations as kernel launches on one stream (cuda and sim backends)."""

    def __init__(self, config: TrainConfig, market, m: int, hidden: int = HIDDEN):
        from numba import cuda

        from alpharl.controllers import Controllers
        from alpharl.learner import Learner
        from alpharl.nets import Nets
        from alpharl.replay import PrioritizedReplay
        from alpharl.sim.lobsim import LobSim

        self.cuda = cuda
        self.stream = cuda.stream()
        st = self.stream
        B = config.b
        self.B, self.M = B, m
        if config.features:
            from alpharl.sim.features import FeatureEnv

            self.sim = FeatureEnv(B, config.seed, stream=st)
        else:
            self.sim = LobSim(market, config.sim, B, config.seed, stream=st)
        self.obs_dim = self.sim.obs_dim
        self.nets = Nets(self.obs_dim, seed=config.seed, hidden=hidden)
        self.learner = Learner(self.nets, B, m, stream=st)
        self.replay = PrioritizedReplay(config.capacity, self.obs_dim, m, config.seed, stream=st)
        self.controllers = Controllers(st)
        self.isv = S.alloc_isv(st)
        self.seed = config.seed
        f32 = np.float32
        self.obs_t = cuda.device_array((B, self.obs_dim), f32, stream=st)
        self.actions = cuda.device_array(B, np.int32, stream=st)
        self.logp = cuda.device_array(B, f32, stream=st)
        self.reward = cuda.device_array(B, f32, stream=st)
        self.prng = cuda.to_device(seed_states(config.seed, B, STREAM_ACTIONS), stream=st)
        self.ones = cuda.to_device(np.ones(max(B, m), f32), stream=st)
        self.moments_table = cuda.to_device(signal_moments_table(B, m), stream=st)  # before any graph capture
        self.gate = cuda.to_device(np.ones(1, np.int32), stream=st)
        self.open_gate = cuda.to_device(np.ones(1, np.int32), stream=st)
        self.step_count = cuda.to_device(np.zeros(1, np.int64), stream=st)
        # Under the CUDA simulator every thread is a Python thread, so launching the
        # gated-off K-loop iterations costs minutes; eager simulator runs read the gate
        # instead (identical results: a gated-off kernel writes nothing). The GPU
        # path never reads it: K stays a device-side decision inside the graph.
        from alpharl import target

        self.host_skips_gated = target.on_simulator()
        self.acc = cuda.to_device(np.zeros(N_ACC, np.float64), stream=st)
        from alpharl.graph import Branches

        self.branches = Branches(st, N_STEP_BRANCHES)
        self._priorities_pending = False

    def reset(self):
        self.sim.reset()
        self.stream.synchronize()

    # ---- ops
    def keep_obs(self):
        self.obs_t.copy_to_device(self.sim.obs, stream=self.branches.fork(BRANCH_OBS))

    def join_obs(self):
        self.branches.join(BRANCH_OBS)

    def act(self, obs):
        from alpharl.cuda_kernels.sampling.action import ACTION_BLOCK, action_grid, rl_pi_action_kernel

        logits = self.learner.act_forward(obs, self.open_gate)
        rl_pi_action_kernel[action_grid(self.B), ACTION_BLOCK, self.stream](logits, self.prng, self.actions, self.logp)

    def scale(self, x, n, s, out):
        from alpharl.cuda_kernels.step_ops import STEP_OPS_BLOCK, rl_scale

        rl_scale[math.ceil(n / STEP_OPS_BLOCK), STEP_OPS_BLOCK, self.stream](x, np.int32(n), np.float32(s), out)

    def env_batch(self):
        from alpharl.learner import EnvBatch

        s = self.sim
        return EnvBatch(self.obs_t, self.actions, self.logp, self.reward, s.done, s.obs, s.label_up, s.label_ret)

    def k_gate(self, isv, k, gate):
        from alpharl.cuda_kernels.controllers.k_loop import rl_k_gate

        rl_k_gate[1, 1, self.stream](isv, np.int32(k), gate)

    def gate_is_open(self) -> bool:
        return bool(self.to_host(self.gate)[0])

    def learn(self, env, mb, gate):
        from alpharl.learner import ReplayBatch

        rep = ReplayBatch(mb.obs_s, mb.action, mb.reward, mb.done, mb.obs_s2, mb.is_weight)
        return self.learner.update(env, rep, self.isv, gate)

    def moments(self, xs, ws):
        """Step 14's statistics (rows of self.moments_table) of float32 device arrays xs, ws: one launch."""
        from alpharl.cuda_kernels.reductions import REDUCE_BLOCK, pad_moments_inputs, rl_batch_moments_multi

        rl_batch_moments_multi[len(xs), REDUCE_BLOCK, self.stream](
            pad_moments_inputs(xs), pad_moments_inputs(ws), self.moments_table, self.isv)

    def soft_update(self):
        self.learner.soft_update(self.isv)

    def step_controllers(self):
        self.controllers.launch_step(self.isv, self.step_count)

    # ---- host side
    def to_host(self, arr):
        self.stream.synchronize()
        return arr.copy_to_host(stream=self.stream)

    def accumulate(self, trade_done, trade_pnl, reward, n):
        from alpharl.cuda_kernels.step_ops import STEP_OPS_BLOCK, rl_accumulate_trades

        st = self.branches.fork(BRANCH_ACCUMULATE)
        rl_accumulate_trades[1, STEP_OPS_BLOCK, st](trade_done, trade_pnl, reward, np.int32(n), self.acc)

    def join_accumulate(self):
        self.branches.join(BRANCH_ACCUMULATE)

    def update_priorities(self, loss, m, gate):
        self.replay.update_priorities(loss, m, gate, stream=self.branches.fork(BRANCH_PRIORITIES))
        self._priorities_pending = True

    def join_priorities(self):
        if self._priorities_pending:
            self.branches.join(BRANCH_PRIORITIES)
            self._priorities_pending = False

    def metrics(self):
        return _metrics(self.to_host(self.acc), self.sim.field("equity"))

    def state_dict(self):
        self.stream.synchronize()
        d = {}
        d |= {f"nets.{k}": np.asarray(v) for k, v in self.nets.state_dict().items()}
        d |= {f"sim.{k}": v for k, v in self.sim.state_dict().items()}
        d |= {f"replay.{k}": np.asarray(v) for k, v in self.replay.state_dict().items()}
        d |= {"isv": self.isv.copy_to_host(), "prng": self.prng.copy_to_host(),
              "step_count": self.step_count.copy_to_host(), "acc": self.acc.copy_to_host()}
        return d

    def load_state_dict(self, d):
        self.stream.synchronize()
        self.nets.load_state_dict(_sub(d, "nets."))
        self.sim.load_state_dict(_sub(d, "sim."))
        self.replay.load_state_dict(_sub(d, "replay."))
        for name in ("isv", "prng", "step_count", "acc"):
            getattr(self, name).copy_to_device(np.ascontiguousarray(d[name]), stream=self.stream)
        self.stream.synchronize()


# ============================================================ numpy ops

class _NumpyOps:
    """The same operations on host arrays, through the kernels' NumPy references."""

    def __init__(self, config: TrainConfig, market, m: int, hidden: int = HIDDEN):
        from alpharl.nets import NetLayout
        from alpharl.reference.lobsim import ReferenceLobSim
        from alpharl.reference.replay import PrioritizedReplayReference

        B = config.b
        self.B, self.M = B, m
        if config.features:
            from alpharl.sim.features import ReferenceFeatureEnv

            self.sim = ReferenceFeatureEnv(B, config.seed)
        else:
            self.sim = ReferenceLobSim(market, config.sim, B, config.seed)
        self.obs_dim = self.sim.obs_dim
        self.layout = NetLayout(self.obs_dim, hidden)
        p0 = self.layout.init_params(config.seed)
        n = self.layout.n_params
        from alpharl.cuda_kernels.nets import adam as KA
        from alpharl.nets import MODULES

        self.state = {"params": p0, "adam_m": np.zeros(n, np.float32), "adam_v": np.zeros(n, np.float32),
                      "target": p0[: self.layout.n_target].copy(),
                      "adam_state": np.zeros(len(MODULES) * KA.STATE_COLS, np.int32)}
        self.replay = PrioritizedReplayReference(config.capacity, self.obs_dim, m, config.seed)
        self.isv = S.bootstrap_vector()
        self.obs_t = np.zeros((B, self.obs_dim), np.float32)
        self.actions = np.zeros(B, np.int32)
        self.logp = np.zeros(B, np.float32)
        self.reward = np.zeros(B, np.float32)
        self.prng = seed_states(config.seed, B, STREAM_ACTIONS)
        self.ones = np.ones(max(B, m), np.float32)
        self.moments_table = signal_moments_table(B, m)
        self.gate = np.ones(1, np.int32)
        self.open_gate = np.ones(1, np.int32)
        self.step_count = np.zeros(1, np.int64)
        self.host_skips_gated = True  # host arrays: reading the gate is free
        self.acc = np.zeros(N_ACC, np.float64)
        self._last = None

    def reset(self):
        self.sim.reset()

    def keep_obs(self):
        self.obs_t[...] = self.sim.obs

    def join_obs(self):
        pass

    def act(self, obs):
        from alpharl.reference.learner import _w, encode
        from alpharl.reference.nets import linear
        from alpharl.reference.sampling import rl_pi_action_kernel

        p = self.state["params"]
        _, h = encode(p, self.layout, obs)
        logits = linear(h, *_w(p, self.layout, "pi.out")).astype(np.float32)
        rl_pi_action_kernel(logits, self.prng, self.actions, self.logp)

    def scale(self, x, n, s, out):
        from alpharl.reference.step_ops import rl_scale

        rl_scale(x, n, s, out)

    def env_batch(self):
        s = self.sim
        return {"obs_t": self.obs_t, "actions": self.actions, "logp_old": self.logp, "reward": self.reward,
                "done": s.done, "obs_tp1": s.obs, "label_up": s.label_up, "label_ret": s.label_ret}

    def k_gate(self, isv, k, gate):
        from alpharl.reference.controllers import rl_k_gate

        rl_k_gate(isv, k, gate)

    def gate_is_open(self) -> bool:
        return bool(self.gate[0])

    def learn(self, env, mb, gate):
        from alpharl.reference.learner import update

        rep = {"obs_s": mb.obs_s, "actions": mb.action, "reward": mb.reward, "done": mb.done,
               "obs_sp": mb.obs_s2, "is_weight": mb.is_weight}
        r = update(self.state, self.isv, env, rep, self.layout, dtype=np.float32)
        self.state = {k: np.asarray(v, np.float32) if k != "adam_state" else v for k, v in r["state"].items()}
        self.isv[:] = r["isv"]
        f = lambda a: np.asarray(a, np.float32)  # noqa: E731
        self._last = SimpleNamespace(q_priority=f(r["q_priority"]), td=f(r["td"]), entropy=f(r["entropy"]),
                                     kl=f(r["kl"]), ratio=f(r["ratio"]), advantage=f(r["advantage"]),
                                     ret=f(r["return"]))
        return self._last

    def moments(self, xs, ws):
        from alpharl.reference.reductions import rl_batch_moments_multi

        rl_batch_moments_multi(xs, ws, self.moments_table, self.isv)

    def soft_update(self):
        from alpharl.reference.learner import soft_update

        self.state["target"] = np.asarray(
            soft_update(self.state["target"], self.state["params"], self.layout.n_target, self.isv), np.float32)

    def step_controllers(self):
        from alpharl.controllers import reference_controllers, reference_signal_emas

        reference_signal_emas(self.isv)
        reference_controllers(self.isv)
        self.step_count[0] += 1

    def to_host(self, arr):
        return np.array(arr, copy=True)

    def accumulate(self, trade_done, trade_pnl, reward, n):
        from alpharl.reference.step_ops import rl_accumulate_trades

        rl_accumulate_trades(trade_done, trade_pnl, reward, n, self.acc)

    def update_priorities(self, loss, m, gate):
        self.replay.update_priorities(loss, m, gate)

    def join_accumulate(self):
        pass  # host arrays: every operation is done when it returns

    def join_priorities(self):
        pass

    def metrics(self):
        return _metrics(self.acc.copy(), np.array(self.sim.field("equity")))

    def state_dict(self):
        d = {f"nets.{k}": np.asarray(v) for k, v in self.state.items()}
        d |= {f"sim.{k}": v for k, v in self.sim.state_dict().items()}
        d |= {f"replay.{k}": np.asarray(v) for k, v in self.replay.state_dict().items()}
        d |= {"isv": self.isv.copy(), "prng": self.prng.copy(), "step_count": self.step_count.copy(),
              "acc": self.acc.copy()}
        return d

    def load_state_dict(self, d):
        self.state = {k: np.array(v) for k, v in _sub(d, "nets.").items() if k in self.state}
        self.sim.load_state_dict(_sub(d, "sim."))
        self.replay.load_state_dict(_sub(d, "replay."))
        self.isv[:] = d["isv"]
        self.prng[:] = d["prng"]
        self.step_count[:] = d["step_count"]
        self.acc[:] = d["acc"]


def _sub(d: dict, prefix: str) -> dict:
    return {k[len(prefix):]: v for k, v in d.items() if k.startswith(prefix)}


#: Trainer metrics written to the diagnostics next to the ISV (name: meaning).
METRICS = {
    "pnl/total_reward": "sum over all backtests and steps of the reward (equity change after fees), $",
    "pnl/total_trade_pnl": "sum of the PnL of every closed trade, $",
    "pnl/equity_mean": "mean over backtests of the current episode's equity, $",
    "trades/closed": "closed round trips so far (all backtests)",
    "trades/win_rate": "fraction of closed trades with positive PnL",
    "trades/pnl_mean": "mean PnL per closed trade, $",
}


def _metrics(acc, equity) -> dict[str, float]:
    from alpharl.cuda_kernels.step_ops import ACC_REWARD, ACC_TRADE_PNL, ACC_TRADES, ACC_WINS

    n = float(acc[ACC_TRADES])
    return {
        "pnl/total_reward": float(acc[ACC_REWARD]),
        "pnl/total_trade_pnl": float(acc[ACC_TRADE_PNL]),
        "pnl/equity_mean": float(np.mean(equity)),
        "trades/closed": n,
        "trades/win_rate": float(acc[ACC_WINS]) / n if n else float("nan"),
        "trades/pnl_mean": float(acc[ACC_TRADE_PNL]) / n if n else float("nan"),
    }
