"""NumPy twin of cuda_kernels/lobsim/streams.py, and ``ReferenceMultiLobSim``: several files behind one
simulator on host arrays (the numpy backend's ``MultiLobSim``; semantics in alpharl.sim.streams)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from alpharl.cuda_kernels.lobsim.streams import ST_OUT, ST_ROW, ST_STRIDE
from alpharl.reference.lobsim.step import ReferenceLobSim
from alpharl.sim import layout as L
from alpharl.sim.streams import StreamsBase


def lobsim_streams_gather(actions, perm, actions_sm):
    """actions_sm[i] = actions[perm[i]]."""
    actions_sm[:] = np.asarray(actions)[np.asarray(perm)]


def lobsim_streams_scatter(obs_sm, out_sm, tab, obs, out):
    """obs[b, :] = obs_sm[tab[ST_ROW, b], :]; out[k, b] = out_sm[tab[ST_OUT, b] + k tab[ST_STRIDE, b]]."""
    obs[...] = obs_sm[tab[ST_ROW]]
    k = np.arange(out.shape[0])[:, None]
    out[...] = out_sm[tab[ST_OUT][None, :] + k * tab[ST_STRIDE][None, :]]


class ReferenceMultiLobSim(StreamsBase):
    """B backtests over several replayed files on host arrays (same API and state as MultiLobSim)."""

    def __init__(self, markets: Sequence, params, n_backtests: int, seed: int):
        self._setup(markets, params, n_backtests, seed,
                    lambda m, n, lanes: ReferenceLobSim(m, params, n, seed, lanes=lanes))
        B, D, lay = self.B, self.obs_dim, self.layout
        self.actions_sm = np.zeros(B, np.int32)
        self.obs_sm = np.zeros((B, D), np.float32)
        self.out_sm = np.zeros(L.N_OUT * B, np.float32)
        self._actions = []
        for k, sim in enumerate(self.streams):
            acts, sim.obs_buf, sim.out = lay.slot_views(self.actions_sm, self.obs_sm, self.out_sm, k)
            self._actions.append(acts)
        self.obs_buf = np.zeros((B, D), np.float32)
        self.out = np.zeros((L.N_OUT, B), np.float32)

    def reset(self) -> None:
        for sim in self.streams:
            sim.reset()
        self._scatter()

    def step(self, actions) -> None:
        lobsim_streams_gather(np.asarray(actions).astype(np.int32), self.layout.perm, self.actions_sm)
        for sim, acts in zip(self.streams, self._actions):
            sim.step(acts)
        self._scatter()

    def _scatter(self) -> None:
        lobsim_streams_scatter(self.obs_sm, self.out_sm, self.layout.table, self.obs_buf, self.out)

    @property
    def obs(self) -> np.ndarray:
        return self.obs_buf


def make_reference_lobsim(market, params, n_backtests: int, seed: int):
    """The host simulator of ``market`` (as alpharl.sim.streams.make_lobsim: several MarketData -> composite)."""
    if isinstance(market, (list, tuple)):
        if len(market) == 1:
            return ReferenceLobSim(market[0], params, n_backtests, seed)
        return ReferenceMultiLobSim(market, params, n_backtests, seed)
    return ReferenceLobSim(market, params, n_backtests, seed)
