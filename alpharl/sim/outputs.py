"""The per-step outputs of a simulator by name: one definition for every env.

``LobSim`` (device arrays), ``ReferenceLobSim`` and the synthetic feature envs
(host or device arrays) keep their per-step outputs as rows of one array
``self.out[N_OUT, B]`` (alpharl.sim.layout OUT_*); this mixin names the rows.
"""
from __future__ import annotations

import numpy as np

from alpharl.prng import STREAM_SIM, seed_lanes
from alpharl.sim import layout as L
from alpharl.sim.market import latency_rows, order_arrivals, row_times
from alpharl.sim.upgrade import upgrade_state
from alpharl.views import Views


class StepOutputs:
    """Named views of ``self.out``'s rows (float32[B] each, device or host as ``out`` is), each made once
    (alpharl.views: a step reads them several times)."""

    def output(self, k: int):
        """Row k (alpharl.sim.layout OUT_*) of the per-step outputs: a float32[B] array."""
        views = self.__dict__.get("_out_views")
        if views is None:
            views = self._out_views = Views()
        return views(self.out, k)

    reward = property(lambda self: self.output(L.OUT_REWARD), doc="float32[B]: equity change over the step, $")
    done = property(lambda self: self.output(L.OUT_DONE), doc="float32[B]: 1.0 where the episode ended")
    truncated = property(lambda self: self.output(L.OUT_TRUNCATED), doc="float32[B]: 1.0 where the window ran out")
    trade_done = property(lambda self: self.output(L.OUT_TRADE_DONE), doc="float32[B]: 1.0 where a trade ended")
    trade_pnl = property(lambda self: self.output(L.OUT_TRADE_PNL), doc="float32[B]: PnL of the trade that ended, $")
    label_up = property(lambda self: self.output(L.OUT_LABEL_UP), doc="float32[B]: 1.0 where the mid rose this step")
    label_ret = property(lambda self: self.output(L.OUT_LABEL_RET), doc="float32[B]: relative mid change this step")


class HostState:
    """Reads of a simulator whose state is host arrays (``state_i`` / ``state_f`` rows, the fills ring):
    ReferenceLobSim and CpuLobSim."""

    def _init_backtests(self, params, n_backtests: int, seed: int, lanes) -> None:
        self.params = params
        self.B = int(n_backtests)
        self.E = params.events_per_step
        self.seed = int(seed)
        self.lanes = np.arange(self.B) if lanes is None else np.asarray(lanes, np.int64)

    def _init_buffers(self, market, params, n_rows: int, synthetic: bool) -> None:
        """The host tables of ``market`` (latency rows, order arrivals, row times, packed parameters) and
        zeroed state, PRNG, response ring, observation, outputs and fills ring; ``self.levels`` / ``tick``
        set before."""
        lat = latency_rows(market, params)
        self.live_rows, self.seen_rows, self.resp_rows = lat.live_rows, lat.seen_rows, lat.resp_rows
        self.arrived = order_arrivals(market, params)
        self.times = row_times(market, params)
        self.ip, self.fp = L.pack_params(params, self.levels, self.tick, n_rows, synthetic)
        self.window_steps = int(self.ip[L.IP_EPISODE_STEPS])    # episode_steps, or one pass's steps
        self.obs_dim = L.obs_dim(params.obs_levels)
        cap = max(params.fills_log_capacity, 1)
        self.state_i = np.zeros((L.N_STATE_I, self.B), np.int32)
        self.state_f = np.zeros((L.N_STATE_F, self.B), np.float64)
        self.rng = seed_lanes(self.seed, self.lanes, STREAM_SIM)
        self.resp_ring = np.zeros((L.N_RESP, self.B), np.float64)
        self.obs_buf = np.zeros((self.B, self.obs_dim), np.float32)
        self.out = np.zeros((L.N_OUT, self.B), np.float32)
        self.fills_i = np.zeros((self.B, cap, L.N_FILL_I), np.int32)
        self.fills_f = np.zeros((self.B, cap), np.float64)
        self.fills_t = np.zeros((self.B, cap), np.int64)

    def field(self, name: str):
        """One state field by name (STATE_I_NAMES / STATE_F_NAMES): a [B] view."""
        if name in L.STATE_I_NAMES:
            return self.state_i[L.STATE_I_NAMES.index(name)]
        return self.state_f[L.STATE_F_NAMES.index(name)]

    #: The state arrays saved and loaded under their attribute names (the observation: "obs").
    STATE_KEYS = ("state_i", "state_f", "rng", "fills_i", "fills_f", "fills_t", "out", "resp_ring")

    def state_dict(self) -> dict:
        """Copies of every state array (checkpoints); keys as LobSim.state_dict."""
        return {k: getattr(self, k).copy() for k in self.STATE_KEYS} | {"obs": self.obs_buf.copy()}

    def load_state_dict(self, d: dict) -> None:
        """Load ``d`` (a state_dict, of this version or an older one: alpharl.sim.upgrade)."""
        d = upgrade_state(d)
        for k in self.STATE_KEYS:
            getattr(self, k)[...] = d[k]
        self.obs_buf[...] = d["obs"]

    def fills_snapshot(self):
        """(fills_i, fills_f, fills_t, fill_head) host copies, for the fills log."""
        return self.fills_i.copy(), self.fills_f.copy(), self.fills_t.copy(), self.state_i[L.S_FILL_HEAD].copy()
