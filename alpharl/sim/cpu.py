"""``CpuLobSim``: the simulator kernels' own per-backtest step, compiled for the CPU.

A fast path for a few backtests on a machine without a GPU (scripted strategies, the order-level
driver, evaluation): the NumPy reference pays Python's per-call cost on every event, while here
each backtest walks its events in compiled code, many steps per call (``run``).

One definition of the step: the device functions of ``alpharl.cuda_kernels.lobsim`` (book.py,
observe.py, agent.py, backtest.py) are compiled again with ``numba.njit`` instead of
``cuda.jit(device=True)``. Their source is read and executed as a CPU twin module in which
``cuda.jit(device=True)`` is ``njit``, the kernel modules they import are the twins, and any other
CUDA device function they import (``alpharl.prng.xorshift32``) is its Python function under
``njit``. What ``lobsim_step`` adds around those phases (register copies, shared-memory staging)
is the loop below, a backtest at a time over the global tables. Replayed data only (the synthetic
market's generator is a kernel of its own).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from alpharl.lobster.format import ASK_PRICE, BID_PRICE
from alpharl.prng import STREAM_SIM, seed_lanes
from alpharl.sim import layout as L
from alpharl.sim.market import SyntheticMarket, check_window, replay_stream
from alpharl.sim.outputs import HostState, StepOutputs
from alpharl.sim.params import SimParams
from alpharl.sim.twins import twin_modules

#: The kernel modules of device functions, in import order (each imports only those before it).
TWINNED = ("switches", "book", "observe", "agent", "backtest")


class _CpuCuda:
    """Stands for ``numba.cuda`` in a CPU twin: a device function is an njit function."""

    @staticmethod
    def jit(*args, device=False, **kwargs):
        if not device or args:
            raise TypeError("CPU twin: only cuda.jit(device=True) functions can be compiled for the CPU")
        return njit(cache=False)


def _is_device_function(obj) -> bool:
    """A CUDA device function (real dispatcher or the simulator's), whose Python function njit compiles."""
    return hasattr(obj, "py_func") and type(obj).__module__.startswith("numba.cuda")


def _njit_host_device_functions(module) -> None:
    """Device functions a twin imported from a host module (alpharl.prng) become njit functions."""
    for key, value in list(module.__dict__.items()):
        if _is_device_function(value):
            module.__dict__[key] = njit(cache=False)(value.py_func)


def _build_twins() -> dict:
    return twin_modules(TWINNED, __name__, bound={"cuda": _CpuCuda}, finish=_njit_host_device_functions)


_TWINS = _build_twins()
_bt = _TWINS["backtest"]
_activate = _TWINS["agent"].activate
_mid2_of = _TWINS["book"].mid2_of


@njit(cache=False)
def _run(actions, orders, events, book, live_rows, seen_rows, resp_rows, arrived, ip, fp, si, sf, rng, resp_ring, obs,
         out, fills_i, fills_f, fills_t, times):
    """``actions.shape[0]`` env steps of every backtest (lobsim_step's phases, a backtest at a time
    over the global tables: the kernel's unstaged path); orders [T, N_ORD, B]."""
    n_ev = ip[L.IP_EVENTS_PER_STEP]
    width = L.BOOK_COLS * ip[L.IP_LEVELS]
    st = np.empty(L.N_STATE_I, np.int32)
    fs = np.empty(L.N_STATE_F, np.float64)
    rs = np.empty(1, np.uint32)
    for b in range(si.shape[1]):
        st[:] = si[:, b]
        fs[:] = sf[:, b]
        rs[0] = rng[b]
        for k in range(actions.shape[0]):
            row0 = st[L.S_CURSOR]
            trips0 = st[L.S_TRIPS]
            base0 = fs[L.F_TRIP_BASE]
            sb0 = row0 * width
            ev0 = row0 * L.N_EV_COLS
            mid_before = _mid2_of(book[sb0 + ASK_PRICE], book[sb0 + BID_PRICE])
            _bt.send_orders(st, actions[k, b], orders[k], b, book, sb0, book, row0, width, live_rows, seen_rows, ip)
            closed = False
            walking = True
            j = 0
            while j <= n_ev and walking:
                at1 = sb0 + j * width
                ask1 = book[at1 + ASK_PRICE]
                bid1 = book[at1 + BID_PRICE]
                if j > 0:
                    closed = _bt.replay_event(st, fs, rs, b, events, ev0 + j * L.N_EV_COLS, book, at1, ask1, bid1,
                                              width, arrived, ip, fp, fills_i, fills_f, fills_t, times)
                if not closed:
                    closed = _activate(st, fs, b, book, at1, ask1, bid1, ip, fp, fills_i, fills_f, fills_t, times)
                walking = not closed and _bt.has_orders(st)
                j += 1
            st[L.S_CURSOR] = row0 + n_ev          # the events left unwalked only move the cursor
            row_e = row0 + n_ev
            done, mid_e = _bt.end_step(st, fs, b, book, row_e * width, row_e, closed, mid_before, trips0, base0, book,
                                       seen_rows, width, ip, fp, out, fills_i, fills_f, fills_t, times)
            row = _bt.restart(st, fs, rs, done, row_e, ip)
            _bt.observe_next(st, fs, b, book, row * width, row, row_e, mid_e, done, book, seen_rows, resp_rows,
                             resp_ring, width, ip, fp, obs, b)
        si[:, b] = st
        sf[:, b] = fs
        rng[b] = rs[0]


@njit(cache=False)
def _reset(book, seen_rows, resp_rows, ip, fp, si, sf, rng, resp_ring, obs, out):
    """lobsim_reset: every backtest afresh (rng freshly seeded)."""
    st = np.empty(L.N_STATE_I, np.int32)
    fs = np.empty(L.N_STATE_F, np.float64)
    rs = np.empty(1, np.uint32)
    for b in range(si.shape[1]):
        rs[0] = rng[b]
        _bt.start_backtest(st, fs, rs, b, book, seen_rows, resp_rows, resp_ring, ip, fp, obs, out)
        si[:, b] = st
        sf[:, b] = fs
        rng[b] = rs[0]


class CpuLobSim(HostState, StepOutputs):
    """B backtests of a replayed market on the CPU, compiled (same API and results as ``LobSim`` and
    ``ReferenceLobSim``, host arrays), plus ``run`` for many steps per call.

    ``market``: a MarketData (a SyntheticMarket is refused); ``lanes`` as LobSim's."""

    def __init__(self, market, params: SimParams, n_backtests: int, seed: int, lanes=None):
        if isinstance(market, SyntheticMarket):
            raise ValueError("CpuLobSim replays recorded data; the synthetic market runs on LobSim / ReferenceLobSim")
        self._init_backtests(params, n_backtests, seed, lanes)
        self.synthetic = False
        stream = replay_stream(market, params.off_tick_trades)
        self.levels, self.tick = stream.levels, stream.tick
        check_window(params, stream.n_rows)
        self.events = np.ascontiguousarray(stream.events).reshape(-1)
        self.book = np.ascontiguousarray(stream.book).reshape(-1)
        self._init_buffers(market, params, stream.n_rows, False)

    def reset(self) -> None:
        """Every backtest starts afresh from the seed."""
        self.rng = seed_lanes(self.seed, self.lanes, STREAM_SIM)
        _reset(self.book, self.seen_rows, self.resp_rows, self.ip, self.fp, self.state_i, self.state_f, self.rng,
               self.resp_ring, self.obs_buf, self.out)

    def step(self, actions, orders=None) -> None:
        """One env step: actions int32[B], orders int32[N_ORD, B] (None: no instructions)."""
        self.run(np.asarray(actions, np.int32).reshape(1, self.B),
                 None if orders is None else np.asarray(orders, np.int32).reshape(1, L.N_ORD, self.B))

    def run(self, actions, orders=None) -> None:
        """``T`` env steps in one call: actions int32[T, B], orders int32[T, N_ORD, B] (None: none).
        The outputs and observation are the last step's; a fills log must hold the T steps' fills."""
        acts = np.ascontiguousarray(actions, np.int32)
        if acts.ndim != 2 or acts.shape[1] != self.B:
            raise ValueError(f"CpuLobSim.run: actions of shape {acts.shape}, expected [T, {self.B}]")
        ords = (np.zeros((acts.shape[0], L.N_ORD, self.B), np.int32) if orders is None
                else np.ascontiguousarray(orders, np.int32))
        if ords.shape != (acts.shape[0], L.N_ORD, self.B):
            raise ValueError(f"CpuLobSim.run: orders of shape {ords.shape}, expected {(acts.shape[0], L.N_ORD, self.B)}")
        _run(acts, ords, self.events, self.book, self.live_rows, self.seen_rows, self.resp_rows, self.arrived, self.ip,
             self.fp, self.state_i, self.state_f, self.rng, self.resp_ring, self.obs_buf, self.out, self.fills_i,
             self.fills_f, self.fills_t, self.times)

    @property
    def obs(self) -> np.ndarray:
        return self.obs_buf
