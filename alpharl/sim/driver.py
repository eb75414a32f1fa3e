"""Scripted driver: feed a fixed action sequence or a NumPy policy to the simulator.

For baselines (always-hold, join-and-wait, ...) and for reproducing a
strategy exactly: the same script on the same seed gives the same run, on
``LobSim`` and ``ReferenceLobSim`` alike.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa

from alpharl.sim import layout as L
from alpharl.sim.fills import FILLS_SCHEMA, drain_fills


@dataclass
class ScriptResult:
    """Per-step outputs of a scripted run (host arrays [T, B]) and its fills."""

    actions: np.ndarray      # int32[T, B]
    reward: np.ndarray       # float32[T, B]
    done: np.ndarray         # float32[T, B]
    truncated: np.ndarray    # float32[T, B]
    trade_done: np.ndarray   # float32[T, B]
    trade_pnl: np.ndarray    # float32[T, B]
    fills: pa.Table          # FILLS_SCHEMA (empty when the sim keeps no fills log)
    lost_fills: int          # records the ring overwrote before they were read
    # after each step, as the next observation is made: a step that ends an episode shows the fresh one
    inventory: np.ndarray    # int32[T, B]: the position after each step (shares)
    bid_working: np.ndarray  # bool[T, B]: a buy limit order resting or on its way after each step
    ask_working: np.ndarray  # bool[T, B]: a sell limit order likewise

    def trades(self) -> np.ndarray:
        """PnL of every trade that ended (with a non-zero PnL), in step order."""
        return self.trade_pnl[self.trade_done.astype(bool) & (self.trade_pnl != 0)]


def _host(x) -> np.ndarray:
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.array(x)


def run_script(sim, script, steps: int | None = None, reset: bool = True) -> ScriptResult:
    """Run ``sim`` (LobSim or ReferenceLobSim) for ``steps`` steps.

    ``script``: int array [T, B] or [T] (broadcast to every backtest) of action ids,
    or a policy ``fn(obs float32[B, obs_dim]) -> int[B]`` called on host copies of the
    observation. ``steps`` defaults to T for an array, and for a policy on a simulator making one
    pass over its data (SimParams.episode_steps = 0) to that pass's steps. The fills log is drained every
    step (so the ring never overflows when capacity >= the fills one step can make).
    """
    on_device = hasattr(sim.obs, "copy_to_host")
    if callable(script):
        policy: Callable | None = script
        if steps is None and sim.params.episode_steps == 0:
            steps = sim.window_steps
        if steps is None:
            raise ValueError("run_script: a policy needs steps")
        table_actions = None
    else:
        policy = None
        table_actions = np.asarray(script, dtype=np.int32)
        if table_actions.ndim == 1:
            table_actions = np.broadcast_to(table_actions[:, None], (table_actions.shape[0], sim.B))
        if table_actions.shape[1] != sim.B:
            raise ValueError(f"run_script: actions for {table_actions.shape[1]} backtests, sim has {sim.B}")
        steps = table_actions.shape[0] if steps is None else steps
    if reset:
        sim.reset()
    if on_device:
        from numba import cuda

        act_d = cuda.device_array(sim.B, np.int32)
    keep = {k: np.zeros((steps, sim.B), np.float32) for k in ("reward", "done", "truncated", "trade_done", "trade_pnl")}
    acts = np.zeros((steps, sim.B), np.int32)
    inventory = np.zeros((steps, sim.B), np.int32)
    bid_working, ask_working = np.zeros((steps, sim.B), bool), np.zeros((steps, sim.B), bool)
    last = np.zeros(sim.B, np.int64)
    fills, lost = [], 0
    if sim.params.fills_log_capacity:
        _, last, _ = drain_fills(sim, last)
    for t in range(steps):
        a = np.asarray(policy(_host(sim.obs)) if policy else table_actions[t], dtype=np.int32)
        acts[t] = a
        if on_device:
            act_d.copy_to_device(np.ascontiguousarray(a))
            sim.step(act_d)
        else:
            sim.step(a)
        out = _host(sim.out)
        keep["reward"][t] = out[L.OUT_REWARD]
        keep["done"][t] = out[L.OUT_DONE]
        keep["truncated"][t] = out[L.OUT_TRUNCATED]
        keep["trade_done"][t] = out[L.OUT_TRADE_DONE]
        keep["trade_pnl"][t] = out[L.OUT_TRADE_PNL]
        si = _host(sim.state_i)   # one copy of the integer state a step (three rows read from it)
        inventory[t] = si[L.S_INVENTORY]
        bid_working[t], ask_working[t] = si[L.S_BUY_QTY] > 0, si[L.S_SELL_QTY] > 0
        if sim.params.fills_log_capacity:
            table, last, n_lost = drain_fills(sim, last)
            fills.append(table)
            lost += n_lost
    table = pa.concat_tables(fills) if fills else FILLS_SCHEMA.empty_table()
    return ScriptResult(actions=acts, fills=table, lost_fills=lost, inventory=inventory, bid_working=bid_working,
                        ask_working=ask_working, **keep)
