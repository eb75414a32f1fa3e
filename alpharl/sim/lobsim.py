"""``LobSim``: B backtests of the limit-order-book simulator on the GPU.

Device buffers and the launch order of the simulator kernels
(alpharl.cuda_kernels.lobsim); the semantics of a step are documented in
alpharl.reference.lobsim (``ReferenceLobSim``, the same interface on host
arrays, is the ``numpy`` backend's simulator).

    sim = LobSim(market, SimParams(), n_backtests=B, seed=0)
    sim.reset()                      # host -> device seeding; not capturable
    sim.step(actions_d)              # int32[B] device array; launches only
    sim.step(actions_d, orders_d)    # with order instructions int32[N_ORD, B] (alpharl.sim.orders)
    sim.obs, sim.reward, sim.done    # device arrays: [B, obs_dim], [B], [B]

``step`` only launches kernels on ``stream`` (no host sync, no copy), so it can
be captured in a CUDA graph. Launch order per step: ``lobsim_synth_flow``
(synthetic market only), then ``lobsim_step``.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from alpharl.cuda_kernels.lobsim import step as k_step
from alpharl.cuda_kernels.lobsim import synthetic as k_syn
from alpharl.cuda_kernels.lobsim.stage import STAGE_SMEM_BYTES, step_launch
from alpharl.prng import STREAM_SIM, STREAM_SYNTH, seed_lanes, seed_states
from alpharl.sim import layout as L
from alpharl.sim.market import SyntheticMarket, check_window, latency_rows, order_arrivals, replay_stream, row_times
from alpharl.sim.outputs import StepOutputs
from alpharl.sim.params import SimParams
from alpharl.sim.upgrade import upgrade_state
from alpharl.sim.variants import step_kernel, switches_for


class LobSim(StepOutputs):
    """B backtests on one device; ``market`` is a MarketData (replay) or a SyntheticMarket.

    ``lanes``: the run's backtest indices these backtests are, whose lanes of the PRNG stream
    STREAM_SIM they draw (one file's simulator among several, alpharl.sim.streams); default 0..B-1."""

    def __init__(self, market, params: SimParams, n_backtests: int, seed: int, stream=None, lanes=None):
        self.params = params
        self.B = int(n_backtests)
        self.E = params.events_per_step
        self.seed = int(seed)
        self.lanes = np.arange(self.B) if lanes is None else np.asarray(lanes, np.int64)
        self.stream = stream if stream is not None else cuda.default_stream()
        self.synthetic = isinstance(market, SyntheticMarket)
        st = self.stream
        if self.synthetic:
            self.levels, self.tick = market.levels, market.tick
            rows = self.B * (self.E + 1)
            self.events = cuda.to_device(np.zeros((rows, L.N_EV_COLS), np.int32), stream=st)
            self.book = cuda.to_device(np.zeros((rows, L.BOOK_COLS * self.levels), np.int32), stream=st)
            self.sp = cuda.to_device(L.pack_synth(market.params), stream=st)
            self.syn_i = cuda.device_array((L.n_syn_rows(self.levels), self.B), np.int32, stream=st)
            self.syn_rng = cuda.device_array(self.B, np.uint32, stream=st)
            n_rows = 0
        else:
            rs = replay_stream(market, params.off_tick_trades)
            self.levels, self.tick = rs.levels, rs.tick
            n_rows = rs.n_rows
            check_window(params, n_rows)
            # One read-only copy of the stream, shared by every backtest.
            self.events = cuda.to_device(rs.events, stream=st)
            self.book = cuda.to_device(rs.book, stream=st)
        lat = latency_rows(market, params)
        self.live_rows = cuda.to_device(lat.live_rows, stream=st)
        self.seen_rows = cuda.to_device(lat.seen_rows, stream=st)
        self.resp_rows = cuda.to_device(lat.resp_rows, stream=st)
        self.arrived = cuda.to_device(order_arrivals(market, params), stream=st)
        self.times = cuda.to_device(row_times(market, params), stream=st)
        ip, fp = L.pack_params(params, self.levels, self.tick, n_rows, self.synthetic)
        self.window_steps = int(ip[L.IP_EPISODE_STEPS])    # episode_steps, or one pass's steps
        self.ip = cuda.to_device(ip, stream=st)
        self.fp = cuda.to_device(fp, stream=st)
        self.obs_dim = L.obs_dim(params.obs_levels)
        cap = max(params.fills_log_capacity, 1)
        self.state_i = cuda.device_array((L.N_STATE_I, self.B), np.int32, stream=st)
        self.state_f = cuda.device_array((L.N_STATE_F, self.B), np.float64, stream=st)
        self.rng = cuda.device_array(self.B, np.uint32, stream=st)
        self.resp_ring = cuda.to_device(np.zeros((L.N_RESP, self.B), np.float64), stream=st)
        self.obs_d = cuda.device_array((self.B, self.obs_dim), np.float32, stream=st)
        self.out = cuda.device_array((L.N_OUT, self.B), np.float32, stream=st)
        self.fills_i = cuda.to_device(np.zeros((self.B, cap, L.N_FILL_I), np.int32), stream=st)
        self.fills_f = cuda.to_device(np.zeros((self.B, cap), np.float64), stream=st)
        self.fills_t = cuda.to_device(np.zeros((self.B, cap), np.int64), stream=st)
        # the order instructions of a step without any (step's ``orders`` default): all zeros
        self.no_orders = cuda.to_device(np.zeros((L.N_ORD, self.B), np.int32), stream=st)
        self._grid = k_step.sim_grid(self.B)
        self._block = k_step.SIM_BLOCK
        self.step_launch = step_launch(self.B, self.E, self.levels)
        self._switches = {given: switches_for(ip, given) for given in (False, True)}
        #: launch the step built for these parameters (alpharl.sim.variants); False: the registered one
        self.specialize = True
        # the step and reset kernels read the tables flat (views, no copies)
        self._events_flat = self.events.reshape(self.events.size)
        self._book_flat = self.book.reshape(self.book.size)

    # ------------------------------------------------------------ lifecycle
    def reset(self) -> None:
        """Every backtest starts afresh from the seed (copies the seeded PRNG states: not capturable)."""
        st = self.stream
        self.rng.copy_to_device(seed_lanes(self.seed, self.lanes, STREAM_SIM), stream=st)
        if self.synthetic:
            self.syn_rng.copy_to_device(seed_states(self.seed, self.B, STREAM_SYNTH), stream=st)
            k_syn.lobsim_synth_reset[self._grid, self._block, st](
                self.sp, self.syn_i, self.events, self.book, np.int32(self.E))
        k_step.lobsim_reset[self._grid, self._block, st](
            self._events_flat, self._book_flat, self.seen_rows, self.resp_rows, self.ip, self.fp, self.state_i,
            self.state_f, self.rng, self.resp_ring, self.obs_d, self.out)

    def step(self, actions, orders=None) -> None:
        """One env step; ``actions`` int32[B] device array; ``orders`` int32[N_ORD, B] device array of
        order instructions (alpharl.sim.layout ORD_*; None: none). Launches only (graph-capturable)."""
        st = self.stream
        if self.synthetic:
            k_syn.lobsim_synth_flow[self._grid, self._block, st](
                self.sp, self.syn_i, self.syn_rng, self.events, self.book, np.int32(self.E))
        sl = self.step_launch
        # the build without the features these parameters leave off (alpharl.sim.variants); with no
        # instructions, also without their (no-op) pass over the zeros of no_orders; a launch of one
        # thread per backtest stores the block's observations together (where they fit in the shared
        # memory a block may hold; larger blocks of observations are stored a row per thread)
        one_each = (sl.chunk == 0 and sl.per_block == sl.threads
                    and 4 * sl.threads * self.obs_dim <= STAGE_SMEM_BYTES)
        kern = (step_kernel(self._switches[orders is not None], (sl.threads, self.obs_dim) if one_each else None)
                if self.specialize else k_step.lobsim_step)
        kern[sl.grid, sl.threads, st, sl.smem_bytes](
            actions, self.no_orders if orders is None else orders, self._events_flat, self._book_flat, self.live_rows,
            self.seen_rows, self.resp_rows, self.arrived, self.ip, self.fp,
            self.state_i, self.state_f, self.rng, self.resp_ring,
            self.obs_d, self.out, self.fills_i, self.fills_f, self.fills_t, self.times, np.int32(sl.per_block),
            np.int32(sl.chunk))

    # ------------------------------------------------------------ outputs
    @property
    def obs(self):
        """float32[B, obs_dim] device array: the observation for the next action."""
        return self.obs_d

    # output(k), reward, done, ...: StepOutputs

    # ------------------------------------------------------------ host copies
    def state_dict(self) -> dict:
        """Host copies of every state array (checkpoints); keys as ReferenceLobSim.state_dict."""
        self.stream.synchronize()
        d = {"state_i": self.state_i.copy_to_host(), "state_f": self.state_f.copy_to_host(),
             "rng": self.rng.copy_to_host(), "obs": self.obs_d.copy_to_host(), "out": self.out.copy_to_host(),
             "fills_i": self.fills_i.copy_to_host(), "fills_f": self.fills_f.copy_to_host(),
             "fills_t": self.fills_t.copy_to_host(), "resp_ring": self.resp_ring.copy_to_host()}
        if self.synthetic:
            d.update({"syn_i": self.syn_i.copy_to_host(), "syn_rng": self.syn_rng.copy_to_host(),
                      "syn_events": self.events.copy_to_host(), "syn_book": self.book.copy_to_host()})
        return d

    def load_state_dict(self, d: dict) -> None:
        st = self.stream
        d = upgrade_state(d)
        pairs = [("state_i", self.state_i), ("state_f", self.state_f), ("rng", self.rng), ("obs", self.obs_d),
                 ("out", self.out), ("fills_i", self.fills_i), ("fills_f", self.fills_f), ("fills_t", self.fills_t),
                 ("resp_ring", self.resp_ring)]
        if self.synthetic:
            pairs += [("syn_i", self.syn_i), ("syn_rng", self.syn_rng), ("syn_events", self.events),
                      ("syn_book", self.book)]
        for key, dev in pairs:
            dev.copy_to_device(np.ascontiguousarray(d[key], dtype=dev.dtype), stream=st)
        st.synchronize()

    def field(self, name: str) -> np.ndarray:
        """Host copy of one state field by name (layout.STATE_I_NAMES / STATE_F_NAMES), [B]."""
        if name in L.STATE_I_NAMES:
            return self.state_i[L.STATE_I_NAMES.index(name)].copy_to_host()
        return self.state_f[L.STATE_F_NAMES.index(name)].copy_to_host()

    def fills_snapshot(self):
        """(fills_i, fills_f, fills_t, fill_head) host copies, for the fills log (outside the hot path)."""
        self.stream.synchronize()
        return (self.fills_i.copy_to_host(), self.fills_f.copy_to_host(), self.fills_t.copy_to_host(),
                self.state_i[L.S_FILL_HEAD].copy_to_host())
