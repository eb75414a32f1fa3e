"""The on-policy rollout of ``--rollout T`` (host side): the step's phase and the rollout buffer.

With T = 1 every step is ENV_ONE_STEP (PPO and V learn on the step's B transitions
with the one-step TD advantage) and there is no buffer. With T > 1 the step's phase
follows the step counter, a schedule the host knows without reading the device:
step mod T < T - 1 collects (ENV_COLLECT), step mod T = T - 1 also updates PPO and
V on the whole rollout with GAE(lambda) (ENV_GAE). The kernels are in
cuda_kernels/nets/rollout.py, what each phase does in alpharl.learner and
alpharl.trainer.

``Rollout`` holds the buffer, [T B] per field (obs [T B, obs_dim]), on the device
(the cuda and sim backends) or on the host (numpy backend); every element starts at
0, so a checkpoint taken mid-rollout is deterministic.

``rollout_rows`` R > 0 caps the transitions one PPO / V update learns from: when
T B > R the update step gathers the whole trajectories of n_sub = B // stride
backtests, stride = ceil(T B / R), into a second buffer of T n_sub rows
(``rl_rollout_gather``, a different subset each update, every backtest once in
``stride`` updates) and GAE, PPO and V run on it. That bounds the update's cost
at large B (its encoder pass and backward over the rows, some 74 µs an env step at
B = 4096, T = 16 on all 65,536 rows); at T B <= R nothing changes. The second
buffer is scratch, rewritten every update, not part of a checkpoint.
"""
from __future__ import annotations

import numpy as np

from alpharl.batches import EnvBatch, GaeInputs
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE, ENV_ONE_STEP
from alpharl.views import Views

#: The buffer's fields, in rl_rollout_store's argument order, and their dtypes.
FIELDS = (("obs", np.float32), ("action", np.int32), ("logp", np.float32), ("reward", np.float32),
          ("done", np.float32), ("label_up", np.float32), ("label_ret", np.float32), ("v_used", np.float32))


def subset(t_len: int, n_b: int, rows: int) -> tuple[int, int]:
    """(stride, n_sub): the update learns from n_sub of the n_b backtests' trajectories, T n_sub <= rows
    (rows = 0 or T B <= rows: (1, n_b), all of them)."""
    t_len, n_b, rows = int(t_len), int(n_b), int(rows)
    if rows <= 0 or t_len * n_b <= rows:
        return 1, n_b
    stride = -(-(t_len * n_b) // rows)
    return stride, max(1, n_b // stride)


def phase_of(step: int, rollout: int) -> int:
    """The phase of step ``step`` (0-based) with rollout length T = ``rollout`` (see the module docstring)."""
    if rollout == 1:
        return ENV_ONE_STEP
    return ENV_GAE if step % rollout == rollout - 1 else ENV_COLLECT


class Rollout:
    """The rollout buffer: T slices of B transitions (``device``: device arrays on ``stream``, else host)."""

    def __init__(self, t_len: int, n_b: int, obs_dim: int, device: bool, stream=0, rows: int = 0):
        """rows: ``rollout_rows`` (0: the update learns from all T B transitions; see the module docstring)."""
        self.t_len, self.n_b, self.obs_dim = int(t_len), int(n_b), int(obs_dim)
        self.device = device
        self.views = Views()  # the 1-D views ``flat`` hands out, made once
        self.stride, self.n_sub = subset(t_len, n_b, rows)
        for name, arr in self._buffers(self.t_len * self.n_b, stream).items():
            setattr(self, name, arr)
        # the update's own rollout (T n_sub rows, s_T's n_sub rows last) when it learns from a subset
        self.sub = self._buffers(self.t_len * self.n_sub, stream, with_next=True) if self.stride > 1 else None

    @property
    def update_rows(self) -> int:
        """The env rows of one PPO / V update: T n_sub."""
        return self.t_len * self.n_sub

    def _buffers(self, n: int, stream, with_next: bool = False) -> dict:
        out = {}
        for name, dtype in FIELDS + ((("obs_next", np.float32),) if with_next else ()):
            rows = self.n_sub if name == "obs_next" else n
            host = np.zeros((rows, self.obs_dim) if name.startswith("obs") else rows, dtype)
            if self.device:
                from numba import cuda  # the numpy backend runs without a CUDA target

                out[name] = cuda.to_device(host, stream=stream)
            else:
                out[name] = host
        return out

    @property
    def arrays(self) -> dict:
        """name -> array, in FIELDS order."""
        return {name: getattr(self, name) for name, _ in FIELDS}

    def flat(self) -> list:
        """The buffer's arrays in FIELDS order, 1-D (rl_rollout_store's trailing arguments): the same view
        objects at every step while the buffer's arrays stay the same (a repeated launch with them stays
        prepared, alpharl.cuda_kernels.prepared)."""
        return [self.views.flat(a) for a in self.arrays.values()]

    def gather_args(self, obs_next) -> list:
        """rl_rollout_gather's arguments after step_count (a subset only): sizes, the rollout, s_T, the subset's."""
        i32 = np.int32
        v = self.views.flat
        return ([i32(self.t_len), i32(self.n_b), i32(self.stride), i32(self.n_sub), i32(self.obs_dim)]
                + self.flat() + [v(obs_next)] + [v(a) for a in self.sub.values()])

    def env_batch(self, obs_next) -> EnvBatch:
        """The learner's env rows on the update step: the T B transitions, and obs_next = s_T [B, obs_dim] (the
        t+1 rows: the last slice's s_{t+1}); with a subset its T n_sub and n_sub rows (gathered first)."""
        if self.sub is not None:
            u = self.sub
            return EnvBatch(u["obs"], u["action"], u["logp"], u["reward"], u["done"], u["obs_next"],
                            u["label_up"], u["label_ret"])
        return EnvBatch(self.obs, self.action, self.logp, self.reward, self.done, obs_next, self.label_up,
                        self.label_ret)

    def gae_inputs(self, lam: float) -> GaeInputs:
        u = self.arrays if self.sub is None else self.sub
        return GaeInputs(u["reward"], u["done"], u["v_used"], float(lam))

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        host = {k: (v.copy_to_host() if self.device else v.copy()) for k, v in self.arrays.items()}
        return {"t_len": self.t_len, "n_b": self.n_b, "obs_dim": self.obs_dim} | host

    def load_state_dict(self, d: dict) -> None:
        if not d:
            raise ValueError("the checkpoint holds no rollout buffer (it was written with --rollout 1)")
        got = tuple(int(d[k]) for k in ("t_len", "n_b", "obs_dim"))
        if got != (self.t_len, self.n_b, self.obs_dim):
            raise ValueError(f"checkpoint rollout is T, B, obs_dim = {got}, this run has "
                             f"{(self.t_len, self.n_b, self.obs_dim)}")
        for name, dst in self.arrays.items():
            src = np.ascontiguousarray(d[name], dtype=dst.dtype)
            if src.shape != dst.shape:
                raise ValueError(f"checkpoint rollout.{name} has shape {src.shape}, expected {dst.shape}")
            if self.device:
                dst.copy_to_device(src)
            else:
                dst[...] = src
