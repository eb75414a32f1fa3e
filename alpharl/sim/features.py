"""``FeatureEnv``: the synthetic feature/reward process of ``step_synthetic``, on the
device (kernels in alpharl.cuda_kernels.lobsim.features) or on host arrays
(``ReferenceFeatureEnv``, the numpy backend's twin). Same outputs interface as
``LobSim``: ``obs``, ``reward``, ``done``, ``trade_pnl``, ``label_up``,
``label_ret``, ``output(k)``, ``field("equity")``, ``step(actions)``."""
from __future__ import annotations

import numpy as np
from numba import cuda

from alpharl.cuda_kernels.lobsim.features import (FEATURES_BLOCK, FEATURES_DIM, FEATURES_DONE_PROB, FEATURES_RET_SCALE,
                                                  rl_features_reset, rl_features_step)
from alpharl.prng import STREAM_FEATURES, seed_states, uniform24_np, xorshift32_np
from alpharl.sim import layout as L
from alpharl.sim.outputs import StepOutputs
from alpharl.sizes import cdiv


class _Outputs(StepOutputs):
    obs_dim = FEATURES_DIM

    @property
    def obs(self):
        return self.obs_buf


class FeatureEnv(_Outputs):
    """B backtests of the synthetic feature process on the device."""

    def __init__(self, n_backtests: int, seed: int, stream=None):
        self.B, self.seed = int(n_backtests), int(seed)
        self.stream = stream if stream is not None else cuda.default_stream()
        st = self.stream
        self.obs_buf = cuda.device_array((self.B, FEATURES_DIM), np.float32, stream=st)
        self.out = cuda.to_device(np.zeros((L.N_OUT, self.B), np.float32), stream=st)
        self.rng = cuda.device_array(self.B, np.uint32, stream=st)
        self.equity = cuda.device_array(self.B, np.float64, stream=st)

    def _grid(self):
        return cdiv(self.B, FEATURES_BLOCK), FEATURES_BLOCK, self.stream

    def reset(self) -> None:
        self.rng.copy_to_device(seed_states(self.seed, self.B, STREAM_FEATURES), stream=self.stream)
        rl_features_reset[self._grid()](self.obs_buf, self.rng, self.equity, np.int32(self.B))

    def step(self, actions) -> None:
        rl_features_step[self._grid()](actions, self.obs_buf, self.out, self.rng, self.equity, np.int32(self.B))

    def field(self, name: str):
        if name != "equity":
            raise KeyError(name)
        self.stream.synchronize()
        return self.equity.copy_to_host()

    def state_dict(self) -> dict:
        self.stream.synchronize()
        return {"obs": self.obs_buf.copy_to_host(), "out": self.out.copy_to_host(), "rng": self.rng.copy_to_host(),
                "equity": self.equity.copy_to_host()}

    def load_state_dict(self, d: dict) -> None:
        for key, dev in (("obs", self.obs_buf), ("out", self.out), ("rng", self.rng), ("equity", self.equity)):
            dev.copy_to_device(np.ascontiguousarray(d[key], dtype=dev.dtype), stream=self.stream)
        self.stream.synchronize()


class ReferenceFeatureEnv(_Outputs):
    """The same process on host arrays, drawing the same numbers from the same lanes."""

    def __init__(self, n_backtests: int, seed: int):
        self.B, self.seed = int(n_backtests), int(seed)
        self.obs_buf = np.zeros((self.B, FEATURES_DIM), np.float32)
        self.out = np.zeros((L.N_OUT, self.B), np.float32)
        self.rng = np.zeros(self.B, np.uint32)
        self.equity = np.zeros(self.B, np.float64)

    def _draw(self):
        s = self.rng
        for j in range(FEATURES_DIM):
            s = xorshift32_np(s)
            self.obs_buf[:, j] = np.float32(2.0) * uniform24_np(s) - np.float32(1.0)
        self.rng = s

    def reset(self) -> None:
        self.rng = seed_states(self.seed, self.B, STREAM_FEATURES)
        self._draw()
        self.equity[:] = 0.0

    def step(self, actions) -> None:
        d, idx = FEATURES_DIM, np.arange(self.B)
        x = self.obs_buf
        r = x[idx, np.asarray(actions) % d]
        self.out[L.OUT_REWARD] = r
        self.out[L.OUT_LABEL_UP] = (x[:, d - 1] > 0).astype(np.float32)
        self.out[L.OUT_LABEL_RET] = np.float32(FEATURES_RET_SCALE) * x[:, d - 2]
        eq = self.equity + r.astype(np.float64)
        self.rng = xorshift32_np(self.rng)
        done = uniform24_np(self.rng) < np.float32(FEATURES_DONE_PROB)
        self.out[L.OUT_DONE] = done
        self.out[L.OUT_TRADE_DONE] = done
        self.out[L.OUT_TRADE_PNL] = np.where(done, eq.astype(np.float32), 0)
        self.out[L.OUT_TRUNCATED] = 0
        self.equity = np.where(done, 0.0, eq)
        self._draw()

    def field(self, name: str):
        if name != "equity":
            raise KeyError(name)
        return self.equity.copy()

    def state_dict(self) -> dict:
        return {"obs": self.obs_buf.copy(), "out": self.out.copy(), "rng": self.rng.copy(),
                "equity": self.equity.copy()}

    def load_state_dict(self, d: dict) -> None:
        self.obs_buf[...] = d["obs"]
        self.out[...] = d["out"]
        self.rng = np.array(d["rng"], np.uint32)
        self.equity = np.array(d["equity"], np.float64)
