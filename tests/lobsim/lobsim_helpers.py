"""Helpers of the simulator tests: real data, hand-made markets, state comparison, invariants."""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from alpharl.lobster.format import ASK_PRICE, BID_PRICE, BOOK_COLS_PER_LEVEL
from alpharl.lobster.load import load_lobster
from alpharl.lobster.market import MarketData
from alpharl.lobster.sample import load_embedded
from alpharl.sim import layout as L
from support import AMZN5, LOBSTER_SAMPLES, poisoned, real_sample

#: Price unit per tick of the hand-made markets (LOBSTER units: $0.01).
TICK = 100


@functools.lru_cache(maxsize=None)
def _load(name: str) -> MarketData:
    if name == AMZN5 and not (LOBSTER_SAMPLES / name).is_file():
        return load_embedded()  # its first 30,000 events: more room than the cut
    path, _ = real_sample(name)
    # The Arrow cache for the whole files only: a cut in the repository parses at once.
    return load_lobster(path, cache=path.parent == LOBSTER_SAMPLES)


def real_market(name: str = AMZN5, start: int = 20_000, rows: int = 3_000) -> MarketData:
    """A window of a real LOBSTER sample: the whole file beside the repository, else the
    embedded sample (AMZN level 5) or the sample's cut in the repository (support.real_sample);
    ``start`` and ``rows`` shrink to what the data holds."""
    md = _load(name)
    rows = min(rows, md.n_events)
    start = min(start, md.n_events - rows)
    return md.window(start, start + rows)


def make_market(rows, levels: int = 2) -> MarketData:
    """A hand-made market: rows of (type, direction, size, price ticks, book ticks [4L]), the book
    AFTER the event, in LOBSTER column order (use None for an empty level's price)."""
    n = len(rows)
    book = np.zeros((n, 4 * levels), np.int64)
    for i, (_, _, _, _, bk) in enumerate(rows):
        for c, v in enumerate(bk):
            field = c % BOOK_COLS_PER_LEVEL
            if field in (ASK_PRICE, BID_PRICE):
                pad = 9_999_999_999 if field == ASK_PRICE else -9_999_999_999
                book[i, c] = pad if v is None else v * TICK
            else:
                book[i, c] = v
    return MarketData(ticker="TEST", date="2012-06-21", levels=levels, time=np.arange(n, dtype=np.float64),
                      event_type=np.array([r[0] for r in rows], np.int8), order_id=np.arange(n, dtype=np.int64),
                      size=np.array([r[2] for r in rows], np.int32),
                      price=np.array([r[3] * TICK for r in rows], np.int64),
                      direction=np.array([r[1] for r in rows], np.int8), book=book, tick=TICK, source="hand-made")


def poison_outputs(sim) -> None:
    """Give a LobSim fresh NaN-poisoned outputs, so an element a kernel fails to write shows."""
    sim.obs_d = poisoned(sim.obs_d.shape)
    sim.out = poisoned(sim.out.shape)


def compare_states(gpu: dict, ref: dict, where: str) -> None:
    """Every state array: integers exactly, floats to tolerance."""
    assert gpu.keys() == ref.keys()
    for key in gpu:
        g, r = gpu[key], ref[key]
        assert g.shape == r.shape, f"{where}: {key} shape"
        if g.dtype.kind in "iu":
            bad = np.argwhere(g != r)
            assert bad.size == 0, f"{where}: {key}{tuple(bad[0])} gpu {g[tuple(bad[0])]} ref {r[tuple(bad[0])]}" \
                + (f" ({L.STATE_I_NAMES[bad[0][0]]})" if key == "state_i" else "")
        else:
            np.testing.assert_allclose(g, r, rtol=2e-6, atol=1e-6, err_msg=f"{where}: {key}")


def check_invariants(sim, stream, prev: dict, now: dict, fills, reward_sum: np.ndarray,
                     pnl_sum: np.ndarray | None = None) -> None:
    """Invariants of one step (SPEC §3.4, issue item 6). prev/now: state dicts before/after the
    step; fills: the fills table of the step; stream: the ReplayStream (None: synthetic);
    reward_sum / pnl_sum: float64[B] rewards / trade PnLs of the running episode, updated here."""
    p = sim.params
    si, sf, out = now["state_i"], now["state_f"], now["out"]
    si0, sf0 = prev["state_i"], prev["state_f"]
    done = out[L.OUT_DONE] != 0
    inv = si[L.S_INVENTORY]
    # shares bought = shares sold + inventory; position limits hold
    assert (si[L.S_BOUGHT] - si[L.S_SOLD] == inv).all()
    assert (np.abs(inv) <= p.max_position).all()
    # no negative queue, and the queue ahead never grows after placement
    for base in (L.S_BUY_PX, L.S_SELL_PX):
        live = (si[base + L.O_QTY] > 0) & (si[base + L.O_LIVE_AT] == L.LIVE)
        qa, qa0 = si[base + L.O_QA], si[base + L.O_QA0]
        assert (qa >= 0).all() and (qa[live] <= qa0[live]).all()
        assert (si[base + L.O_QTY] >= 0).all() and (si[base + L.O_QTY] <= p.lot_size).all()
    # cash moves = fills x price -/+ fees (episodes still running)
    b = fills.column("backtest").to_numpy()
    side = fills.column("side").to_numpy().astype(np.float64)
    qty = fills.column("quantity").to_numpy().astype(np.float64)
    price = fills.column("price").to_numpy()
    fee = fills.column("fee").to_numpy()
    moves = np.zeros(sim.B)
    np.add.at(moves, b, -side * qty * price - fee)
    running = ~done
    np.testing.assert_allclose(sf[L.F_CASH][running], (sf0[L.F_CASH] + moves)[running], rtol=0, atol=1e-7)
    signed = np.zeros(sim.B, np.int64)
    np.add.at(signed, b, (side * qty).astype(np.int64))
    assert (si[L.S_INVENTORY][running] == (si0[L.S_INVENTORY] + signed)[running]).all()
    # at flat, realised PnL (net of fees) is the cash
    flat = running & (inv == 0)
    np.testing.assert_allclose(sf[L.F_REALISED][flat], sf[L.F_CASH][flat], atol=1e-7)
    # no fill at a price the book did not offer
    if stream is not None:
        check_fill_prices(fills, stream)
    # a trade's PnL is 0 unless a trade ended
    assert (out[L.OUT_TRADE_PNL][out[L.OUT_TRADE_DONE] == 0] == 0).all()
    # the trades' PnLs sum to the episode's final equity = its summed rewards (a holding penalty
    # takes from the rewards only: test_episodes checks it); one trade per round-trip episode
    reward_sum += out[L.OUT_REWARD]
    if p.inventory_penalty == 0:
        if pnl_sum is not None:
            pnl_sum += out[L.OUT_TRADE_PNL]
            np.testing.assert_allclose(pnl_sum[done], reward_sum[done], rtol=1e-5, atol=1e-3)
            pnl_sum[done] = 0.0
        if p.episode_end == "round_trip":
            ended = done & (out[L.OUT_TRADE_DONE] != 0)
            np.testing.assert_allclose(out[L.OUT_TRADE_PNL][ended], reward_sum[ended], rtol=1e-5, atol=1e-3)
    reward_sum[done] = 0.0
    # reset leaves a clean state
    check_clean(now, done, sim.params.obs_levels)


def check_fill_prices(fills, stream) -> None:
    """Takers fill at a price listed on the opposite side of the snapshot; makers at their limit
    price only when the event traded at or through it, or the opposite best reached it."""
    ev, book = stream.events, stream.book
    nl = stream.levels
    for rec in fills.to_pylist():
        row, px, side = rec["event_row"], rec["price_ticks"], rec["side"]
        if not rec["maker"]:
            cols = np.arange(nl) * BOOK_COLS_PER_LEVEL + (ASK_PRICE if side > 0 else BID_PRICE)
            assert px in book[row, cols], f"taker fill at {px} not in the book of row {row}"
            continue
        t, d, p = ev[row, L.EV_TYPE], ev[row, L.EV_DIR], ev[row, L.EV_PRICE]
        traded = t in L.TRADE_TYPES and d == side and (p <= px if side > 0 else p >= px)
        opp = book[row, ASK_PRICE] if side > 0 else book[row, BID_PRICE]
        crossed = opp <= px if side > 0 else opp >= px
        assert traded or crossed, f"maker fill at {px} on row {row} without a trade or a crossing book"


def check_clean(state: dict, done: np.ndarray, obs_levels: int) -> None:
    """Backtests that were just reset hold a fresh episode: flat, no orders, no money, full window
    (the market's volatility estimate is not the episode's: it carries on)."""
    si, sf, obs = state["state_i"], state["state_f"], state["obs"]
    for r in (L.S_STEP_IN_EP, L.S_INVENTORY, L.S_WAS_OPEN, L.S_TRADE_STEPS, L.S_BOUGHT, L.S_SOLD,
              L.S_BUY_QTY, L.S_SELL_QTY, L.S_MKT_QTY, L.S_MKT_FLAT):
        assert (si[r][done] == 0).all(), L.STATE_I_NAMES[r]
    assert (sf[:L.N_EPISODE_F, done] == 0.0).all()
    hist = si[L.S_MID_HIST:L.S_MID_HIST + L.N_MID_HIST][:, done]
    assert (hist == hist[:1]).all()
    x = L.obx_base(obs_levels)
    for k, v in ((L.OBX_POSITION, 0.0), (L.OBX_UPNL, 0.0), (L.OBX_BUY_FLAG, 0.0), (L.OBX_SELL_FLAG, 0.0),
                 (L.OBX_TIME_IN_TRADE, 0.0), (L.OBX_TIME_LEFT, 1.0)):
        assert (obs[done, x + k] == v).all()
    for k in range(L.N_RET):
        assert (obs[done, x + L.OBX_RET + k] == 0.0).all()


def device_actions(a: np.ndarray):
    return cuda.to_device(np.ascontiguousarray(a, dtype=np.int32))
