"""NumPy twin of cuda_kernels/lobsim/agent.py: the agent's orders, their activation, their fills
per event, market orders walking the depth, the accounting and the fills log.

Each function updates the host state of a :class:`~alpharl.reference.lobsim.step.ReferenceLobSim`
``sim`` (``state_i`` / ``state_f`` rows named by alpharl.sim.layout, ``rng``, the fills ring),
vectorised over the backtests it is given; ``closed`` bool[B] marks the backtests whose episode
ended at an earlier event of this step (never set with episode_end "horizon"). The rules are those
of step.py's docstring.
"""
from __future__ import annotations

import numpy as np

from alpharl import actions as A
from alpharl.lobster.format import ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE, EV_EXEC
from alpharl.prng import U24_ONE, U24_SHIFT, xorshift32_np
from alpharl.reference.lobsim.book import best_opposite, col, level_cap, level_size
from alpharl.sim import layout as L

_I32 = np.int32


def book_fill(sim, idx, side, qty, px, maker, ahead, oid, qa0, qa_fill):
    """Book fills of qty[k] shares at px[k] ticks for backtests idx[k] (qty 0: no-op), clipped
    at flat when they reduce the position. ``side``/``maker`` scalars or arrays; the fill
    record's row is the cursor + ``ahead`` (1 for a fill by the event being replayed), its time
    that row's, its queue ahead ``qa0`` when the order went live and ``qa_fill`` before the event."""
    si, sf = sim.state_i, sim.state_f
    side = np.broadcast_to(np.asarray(side, _I32), idx.shape)
    maker = np.broadcast_to(np.asarray(maker, bool), idx.shape)
    inv0 = si[L.S_INVENTORY, idx].astype(np.int64)
    reducing = (inv0 != 0) & (np.sign(inv0) == -side)
    qty = np.where(reducing, np.minimum(qty, np.abs(inv0)), qty).astype(np.int64)
    keep = qty > 0
    idx, side, maker, inv0, reducing, qty = idx[keep], side[keep], maker[keep], inv0[keep], reducing[keep], qty[keep]
    px, oid, qa0, qa_fill = (np.broadcast_to(np.asarray(v), keep.shape)[keep] for v in (px, oid, qa0, qa_fill))
    if idx.size == 0:
        return
    price = px.astype(np.float64) * sim.tick_dollars
    notional = qty.astype(np.float64) * price
    rate = np.where(maker, sim.fp[L.FP_MAKER_FEE], sim.fp[L.FP_TAKER_FEE])
    base = qty.astype(np.float64) if sim.ip[L.IP_FEE_MODE] == L.FEE_PER_SHARE else notional
    fee = rate * base
    sf[L.F_CASH, idx] = sf[L.F_CASH, idx] - side * notional - fee
    avg = sf[L.F_AVG_PX, idx]
    held = np.abs(inv0).astype(np.float64)
    inv1 = inv0 + side * qty
    grown = (avg * held + price * qty.astype(np.float64)) / (held + qty.astype(np.float64))
    gain = qty.astype(np.float64) * (price - avg) * np.sign(inv0)
    sf[L.F_REALISED, idx] = sf[L.F_REALISED, idx] + np.where(reducing, gain, 0.0) - fee
    sf[L.F_AVG_PX, idx] = np.where(reducing, np.where(inv1 == 0, 0.0, avg), grown)
    sf[L.F_FEES, idx] += fee
    si[L.S_INVENTORY, idx] = inv1
    si[L.S_BOUGHT, idx] += np.where(side == L.SIDE_BUY, qty, 0).astype(_I32)
    si[L.S_SOLD, idx] += np.where(side == L.SIDE_SELL, qty, 0).astype(_I32)
    si[L.S_WAS_OPEN, idx] |= (inv1 != 0).astype(_I32)
    cap = sim.ip[L.IP_FILL_CAP]
    if cap > 0:
        slot = si[L.S_FILL_HEAD, idx] % cap
        rec = sim.fills_i[idx, slot]
        rec[:, L.FL_STEP] = si[L.S_STEP, idx]
        rec[:, L.FL_ROW] = si[L.S_CURSOR, idx] + ahead
        rec[:, L.FL_OID] = oid
        rec[:, L.FL_SIDE] = side
        rec[:, L.FL_PRICE] = px
        rec[:, L.FL_QTY] = qty
        rec[:, L.FL_MAKER] = maker
        rec[:, L.FL_QA0] = qa0
        rec[:, L.FL_QA_FILL] = qa_fill
        sim.fills_i[idx, slot] = rec
        sim.fills_f[idx, slot] = fee
        sim.fills_t[idx, slot] = L.NO_TIME if sim.synthetic else sim.times[rec[:, L.FL_ROW]]
        si[L.S_FILL_HEAD, idx] += 1


def close_if_flat(sim, closed):
    """A position back at flat after being open closes a round trip: counted, the equity (= cash)
    kept as the next trade's start, time in trade cleared; with episode_end "round_trip" it also
    ends the episode (every order cancelled)."""
    si, sf = sim.state_i, sim.state_f
    now = ~closed & (si[L.S_WAS_OPEN] != 0) & (si[L.S_INVENTORY] == 0)
    si[L.S_TRIPS] += now
    sf[L.F_TRIP_BASE] = np.where(now, sf[L.F_CASH], sf[L.F_TRIP_BASE])
    for r in (L.S_WAS_OPEN, L.S_TRADE_STEPS):
        si[r, now] = 0
    if sim.ip[L.IP_EPISODE_END] == L.EPISODE_ROUND_TRIP:
        closed |= now
        for r in (L.S_BUY_QTY, L.S_SELL_QTY, L.S_MKT_QTY, L.S_MKT_FLAT):
            si[r, now] = 0


def walk(sim, idx, side, qty, rows, flatten, oid):
    """Taker order(s) of qty[k] shares, side[k], walking the visible depth of rows[k].
    A flatten fills what the depth cannot at the deepest visible price (or, with
    that side empty, at the best price of the other side)."""
    si = sim.state_i
    if idx.size == 0:
        return
    inv = si[L.S_INVENTORY, idx]
    reducing = (inv != 0) & (np.sign(inv) == -side)
    rem = np.where(reducing, np.minimum(qty, np.abs(inv)), qty).astype(np.int64)
    last_px = np.zeros(idx.size, np.int64)
    has_last = np.zeros(idx.size, bool)
    whole = sim.ip[L.IP_FILL_RULE] == L.FILL_WHOLE_ORDER     # the best level takes the whole order
    for lv in range(sim.levels):
        pc = np.where(side == L.SIDE_BUY, col(lv, ASK_PRICE), col(lv, BID_PRICE))
        zc = np.where(side == L.SIDE_BUY, col(lv, ASK_SIZE), col(lv, BID_SIZE))
        p = sim.book[rows, pc].astype(np.int64)
        z = sim.book[rows, zc].astype(np.int64)
        valid = np.where(side == L.SIDE_BUY, p != L.ASK_EMPTY, p != L.BID_EMPTY)
        take = np.where(valid, rem if whole else np.minimum(rem, z), 0)
        book_fill(sim, idx, side, take, p, False, 0, oid, 0, 0)
        rem -= take
        last_px = np.where(valid, p, last_px)
        has_last |= valid
    if flatten:
        other = np.where(side == L.SIDE_BUY, sim.book[rows, BID_PRICE], sim.book[rows, ASK_PRICE])
        other_ok = np.where(side == L.SIDE_BUY, other != L.BID_EMPTY, other != L.ASK_EMPTY)
        px = np.where(has_last, last_px, other)
        ok = (rem > 0) & (has_last | other_ok)
        book_fill(sim, idx, side, np.where(ok, rem, 0), px, False, 0, oid, 0, 0)


def _queue_when_sent(sim, cursor_rows, seen_rows, side, px):
    """The queue ahead a new order at px starts with. entry_queue "visible": 0 (set when it goes live);
    "last_seen": until it goes live the queue holds the size its price shows as it is sent: on the
    cursor's book, or, out of view there, on the book the agent sees (``seen_rows``)."""
    if sim.ip[L.IP_ENTRY_QUEUE] == 0:
        return np.zeros(sim.B, np.int64)
    now = level_size(sim.book, cursor_rows, side, px, sim.levels)
    out = level_cap(sim.book, cursor_rows, side, px, sim.levels) == L.CAP_UNKNOWN
    return np.where(out, level_size(sim.book, seen_rows, side, px, sim.levels), now)


def _rest(si, base, side, go, px, qty, queue, live_at, oid, post):
    """Where ``go``: the side's resting order (state rows from ``base``) becomes a new one."""
    for off, v in ((L.O_PX, px), (L.O_QTY, qty), (L.O_QA, queue), (L.O_QA0, 0), (L.O_LIVE_AT, live_at),
                   (L.O_OID, oid)):
        si[base + off] = np.where(go, v, si[base + off])
    si[_post_row(side)] = np.where(go, post, si[_post_row(side)])


def place_orders(sim, act, row0):
    """Rule 1: the actions ``act`` int32[B] at the cursor rows ``row0``, on the snapshot the agent
    sees there (the cursor's, or with a feed latency an older one); orders go live latency_events
    later, or with an entry latency in time at the host's live_rows."""
    si, p = sim.state_i, sim.params
    lot, maxp = p.lot_size, p.max_position
    live_at = sim.live_rows[row0] if sim.ip[L.IP_TIMED_ENTRY] else si[L.S_CURSOR] + p.latency_events
    cursor_rows, row0 = row0, sim._seen(row0)
    ask1 = sim.book[row0, ASK_PRICE].astype(np.int64)
    bid1 = sim.book[row0, BID_PRICE].astype(np.int64)
    has_ask, has_bid = ask1 != L.ASK_EMPTY, bid1 != L.BID_EMPTY
    if sim.ip[L.IP_PEG]:
        # pegged quotes first: an order off its reference price is sent again there (buy, then sell);
        # with refill_quotes a pegged side whose order filled is quoted again there (one lot)
        refill = sim.ip[L.IP_REFILL] != 0
        for side, base in ((L.SIDE_BUY, L.S_BUY_PX), (L.SIDE_SELL, L.S_SELL_PX)):
            peg = si[_peg_row(side)]
            px = _quote_price(side, peg == L.PEG_IMPROVE, ask1, bid1)
            listed = has_bid if side == L.SIDE_BUY else has_ask
            resting = si[base + L.O_QTY] > 0
            go = (peg != L.PEG_NONE) & resting & listed & (si[base + L.O_PX] != px)
            again = (peg != L.PEG_NONE) & ~resting & listed & _room(sim, side) & refill
            _rest(si, base, side, go | again, px, np.where(again, p.lot_size, si[base + L.O_QTY]),
                  _queue_when_sent(sim, cursor_rows, row0, side, px), live_at, si[L.S_NEXT_OID].copy(),
                  np.where(again, 0, si[_post_row(side)]))
            si[L.S_NEXT_OID] += go | again
    new_oid = si[L.S_NEXT_OID].copy()
    inv = si[L.S_INVENTORY].astype(np.int64)
    mkt = si[L.S_MKT_QTY].astype(np.int64)
    flat_pending = si[L.S_MKT_FLAT] != 0
    buy_q, sell_q = si[L.S_BUY_QTY].astype(np.int64), si[L.S_SELL_QTY].astype(np.int64)
    refused = np.zeros(sim.B, bool)
    placed = np.zeros(sim.B, bool)

    # market orders join the pending market order (or become it)
    for code, side in ((A.MARKET_BUY, L.SIDE_BUY), (A.MARKET_SELL, L.SIDE_SELL)):
        want = act == code
        if side == L.SIDE_BUY:
            ok = has_ask & (inv + buy_q + np.maximum(mkt, 0) + lot <= maxp)
        else:
            ok = has_bid & (inv - sell_q + np.minimum(mkt, 0) - lot >= -maxp)
        go = want & ok & ~flat_pending
        refused |= want & ~go
        fresh = go & (mkt == 0)
        placed |= fresh
        si[L.S_MKT_QTY] = np.where(go, mkt + side * lot, si[L.S_MKT_QTY])
        si[L.S_MKT_LIVE_AT] = np.where(go, live_at, si[L.S_MKT_LIVE_AT])
        si[L.S_MKT_OID] = np.where(fresh, new_oid, si[L.S_MKT_OID])

    # limit orders: join / improve, replacing the side's resting order
    for codes, side, base in (((A.JOIN_BID, A.IMPROVE_BID), L.SIDE_BUY, L.S_BUY_PX),
                              ((A.JOIN_ASK, A.IMPROVE_ASK), L.SIDE_SELL, L.S_SELL_PX)):
        join, improve = act == codes[0], act == codes[1]
        want = join | improve
        px = _quote_price(side, improve, ask1, bid1)
        ok = (has_bid if side == L.SIDE_BUY else has_ask) & _room(sim, side)   # (one action: no market order moved)
        # requote "keep": an order already resting at px stays (its queue place with it)
        same = (si[base + L.O_QTY] > 0) & (si[base + L.O_PX] == px) & (sim.ip[L.IP_REQUOTE] == L.REQUOTE_KEEP)
        go = want & ok & ~same
        refused |= want & ~ok
        placed |= go
        # actions follow SimParams.post_only: the order's own flag stays 0
        _rest(si, base, side, go, px, lot, _queue_when_sent(sim, cursor_rows, row0, side, px), live_at, new_oid, 0)
        si[_peg_row(side)] = np.where(want & ok, np.where(improve, L.PEG_IMPROVE, L.PEG_JOIN), si[_peg_row(side)])

    # cancel / flatten: drop both resting orders and their pegs; flatten replaces any pending market order
    cancel = (act == A.CANCEL) | (act == A.FLATTEN)
    for r in (L.S_BUY_QTY, L.S_SELL_QTY):
        si[r] = np.where(cancel, 0, si[r])
    for r in (L.S_BUY_PEG, L.S_SELL_PEG):
        si[r] = np.where(cancel, L.PEG_NONE, si[r])
    flatten = act == A.FLATTEN
    go = flatten & (inv != 0)
    placed |= go
    si[L.S_MKT_FLAT] = np.where(flatten, go, si[L.S_MKT_FLAT])
    si[L.S_MKT_QTY] = np.where(flatten, 0, si[L.S_MKT_QTY])
    si[L.S_MKT_LIVE_AT] = np.where(flatten, live_at, si[L.S_MKT_LIVE_AT])
    si[L.S_MKT_OID] = np.where(go, new_oid, si[L.S_MKT_OID])

    si[L.S_NEXT_OID] += placed
    si[L.S_REFUSED] += refused


def place_instructions(sim, orders, row0):
    """The order instructions ``orders`` int32[N_ORD, B] (layout ORD_*) after the actions, at the cursor
    rows ``row0`` (place_orders' snapshots and entry latency): per side cancel or (re)place the resting
    order at an explicit price, size and post-only flag (refused past max_position, as a join is),
    then a market order of signed size joining the pending one (refused as a market action is). Ids
    go buy, sell, market, one per order placed; refusals are counted."""
    si, p = sim.state_i, sim.params
    maxp = p.max_position
    orders = np.asarray(orders).astype(np.int64)
    live_at = sim.live_rows[row0] if sim.ip[L.IP_TIMED_ENTRY] else si[L.S_CURSOR] + p.latency_events
    seen_rows = sim._seen(row0)
    oid = si[L.S_NEXT_OID].astype(np.int64)
    refused = np.zeros(sim.B, np.int64)
    for side, base, ob in ((L.SIDE_BUY, L.S_BUY_PX, L.ORD_BUY), (L.SIDE_SELL, L.S_SELL_PX, L.ORD_SELL)):
        op, px, qty = orders[ob + L.OI_OP], orders[ob + L.OI_PX], orders[ob + L.OI_QTY]
        si[base + L.O_QTY] = np.where(op == L.OP_CANCEL, 0, si[base + L.O_QTY])
        si[_peg_row(side)] = np.where(op == L.OP_CANCEL, L.PEG_NONE, si[_peg_row(side)])
        inv, mkt = si[L.S_INVENTORY].astype(np.int64), si[L.S_MKT_QTY].astype(np.int64)
        if side == L.SIDE_BUY:
            ok = inv + np.maximum(mkt, 0) + qty <= maxp
        else:
            ok = inv + np.minimum(mkt, 0) - qty >= -maxp
        want = op == L.OP_PLACE
        go = want & ok & (qty > 0)
        refused += want & ~go
        _rest(si, base, side, go, px, qty, _queue_when_sent(sim, row0, seen_rows, side, px), live_at, oid,
              orders[ob + L.OI_POST])
        si[_peg_row(side)] = np.where(go, L.PEG_NONE, si[_peg_row(side)])   # an explicit price is not pegged
        oid = oid + go
    q = orders[L.ORD_MKT_QTY]
    inv, mkt = si[L.S_INVENTORY].astype(np.int64), si[L.S_MKT_QTY].astype(np.int64)
    ok = np.where(q > 0, inv + si[L.S_BUY_QTY] + np.maximum(mkt, 0) + q <= maxp,
                  inv - si[L.S_SELL_QTY] + np.minimum(mkt, 0) + q >= -maxp)
    go = (q != 0) & ok & (si[L.S_MKT_FLAT] == 0)
    refused += (q != 0) & ~go
    fresh = go & (mkt == 0)
    si[L.S_MKT_OID] = np.where(fresh, oid, si[L.S_MKT_OID])
    si[L.S_MKT_QTY] = np.where(go, mkt + q, si[L.S_MKT_QTY])
    si[L.S_MKT_LIVE_AT] = np.where(go, live_at, si[L.S_MKT_LIVE_AT])
    si[L.S_NEXT_OID] = oid + fresh
    si[L.S_REFUSED] += refused


def activate(sim, rows, closed):
    """Rule 2: pending orders whose latency has passed go live on the snapshots ``rows``."""
    si = sim.state_i
    cur = si[L.S_CURSOR]
    b = sim.backtests
    # pending market order
    pend = ~closed & ((si[L.S_MKT_QTY] != 0) | (si[L.S_MKT_FLAT] != 0)) & (si[L.S_MKT_LIVE_AT] <= cur)
    idx = b[pend]
    if idx.size:
        flat = si[L.S_MKT_FLAT, idx] != 0
        inv = si[L.S_INVENTORY, idx]
        q = np.where(flat, -inv, si[L.S_MKT_QTY, idx])
        oid = si[L.S_MKT_OID, idx]
        si[L.S_MKT_QTY, idx] = 0
        si[L.S_MKT_FLAT, idx] = 0
        for fl in (False, True):
            sel = (flat == fl) & (q != 0)
            walk(sim, idx[sel], np.sign(q[sel]).astype(_I32), np.abs(q[sel]), rows[idx[sel]], fl, oid[sel])
        close_if_flat(sim, closed)
    # limit orders going live
    for side, base in ((L.SIDE_BUY, L.S_BUY_PX), (L.SIDE_SELL, L.S_SELL_PX)):
        la = si[base + L.O_LIVE_AT]
        go = ~closed & (si[base + L.O_QTY] > 0) & (la != L.LIVE) & (la <= cur)
        idx = b[go]
        if not idx.size:
            continue
        r = rows[idx]
        px = si[base + L.O_PX, idx]
        opp, empty = best_opposite(sim.book, r, side)
        marketable = (opp != empty) & ((opp <= px) if side == L.SIDE_BUY else (opp >= px))
        qa = level_size(sim.book, r, side, px, sim.levels)
        if sim.ip[L.IP_ENTRY_QUEUE] != 0:
            # out of view (beyond a full visible depth): the size seen when it was placed
            beyond = level_cap(sim.book, r, side, px, sim.levels) == L.CAP_UNKNOWN
            qa = np.where(beyond, si[base + L.O_QA, idx], qa)
        si[base + L.O_QA, idx] = np.where(marketable, 0, qa)
        si[base + L.O_QA0, idx] = np.where(marketable, 0, qa)
        si[base + L.O_LIVE_AT, idx] = L.LIVE
        si[_live_row(side), idx] = cur[idx]
        # post-only: SimParams.post_only, or the order instruction's flag
        post = (si[_post_row(side), idx] != 0) | bool(sim.ip[L.IP_POST_ONLY])
        si[L.S_POST_CANCELLED, idx[marketable & post]] += 1
        t = idx[marketable & ~post]
        book_fill(sim, t, side, si[base + L.O_QTY, t].astype(np.int64), opp[marketable & ~post], False, 0,
                  si[base + L.O_OID, t], 0, 0)
        t = idx[marketable]
        si[base + L.O_QTY, t] = 0
        close_if_flat(sim, closed)


def _room(sim, side):
    """Whether one more lot on ``side`` keeps the worst case of the position and the pending market
    order within max_position (a join's test)."""
    si, lot, maxp = sim.state_i, sim.params.lot_size, sim.params.max_position
    inv, mkt = si[L.S_INVENTORY].astype(np.int64), si[L.S_MKT_QTY].astype(np.int64)
    if side == L.SIDE_BUY:
        return inv + np.maximum(mkt, 0) + lot <= maxp
    return inv + np.minimum(mkt, 0) - lot >= -maxp


def _live_row(side):
    """State row of the row at which the resting ``side`` order went live."""
    return L.S_BUY_LIVE_ROW if side == L.SIDE_BUY else L.S_SELL_LIVE_ROW


def _quote_price(side, improve, ask1, bid1):
    """A join's price on ``side`` (its best), or where ``improve`` a tick inside it when the spread is
    wider than one tick or the other side is empty."""
    if side == L.SIDE_BUY:
        return bid1 + (improve & ((ask1 == L.ASK_EMPTY) | (ask1 - bid1 > 1)))
    return ask1 - (improve & ((bid1 == L.BID_EMPTY) | (ask1 - bid1 > 1)))


def _peg_row(side):
    """The state row of the ``side`` order's peg (layout.PEG_*)."""
    return L.S_BUY_PEG if side == L.SIDE_BUY else L.S_SELL_PEG


def _post_row(side):
    """State row of the resting ``side`` order's post-only flag (an instruction's)."""
    return L.S_BUY_POST if side == L.SIDE_BUY else L.S_SELL_POST


def order_event(sim, side, r0, r1, closed):
    """Rule 3 for the resting orders of ``side``: the event of rows ``r1`` (book before it: ``r0``)."""
    si, ip = sim.state_i, sim.ip
    base = L.S_BUY_PX if side == L.SIDE_BUY else L.S_SELL_PX
    live = ~closed & (si[base + L.O_QTY] > 0) & (si[base + L.O_LIVE_AT] == L.LIVE)
    idx = sim.backtests[live]
    if not idx.size:
        return
    ev = sim.events[r1[idx]]
    t, d, s, p = (ev[:, k].astype(np.int64) for k in (L.EV_TYPE, L.EV_DIR, L.EV_SIZE, L.EV_PRICE))
    px = si[base + L.O_PX, idx].astype(np.int64)
    qty = si[base + L.O_QTY, idx].astype(np.int64)
    qa = si[base + L.O_QA, idx].astype(np.int64)
    qa_before = qa.copy()
    trade = np.isin(t, L.TRADE_TYPES) & (d == side)
    through = trade & ((p < px) if side == L.SIDE_BUY else (p > px))
    l3 = ip[L.IP_QUEUE_MODEL] == L.QUEUE_L3_FIFO
    if l3:
        # l3_fifo: is the order this event names ahead of ours (arrived no later than ours went live)?
        ahead = sim.arrived[r1[idx]] <= si[_live_row(side), idx]
        through |= trade & (t == EV_EXEC) & (p == px) & ~ahead    # an order behind ours traded
    at = trade & (p == px) & ~through
    excess = np.where(at, s - qa, 0)
    rule = ip[L.IP_FILL_RULE]
    whole = (excess >= qty) | (rule == L.FILL_WHOLE_ORDER)
    fill_at = np.where(excess > 0, np.minimum(excess, qty) if rule == L.FILL_PARTIAL else np.where(whole, qty, 0), 0)
    qa = np.where(at, np.maximum(qa - s, 0), qa)
    if l3:
        left = np.isin(t, L.CANCEL_TYPES) & (d == side) & (p == px) & ahead
        qa = np.where(left, np.maximum(qa - s, 0), qa)
    if ip[L.IP_QUEUE_MODEL] == L.QUEUE_PROBABILISTIC:
        canc = np.isin(t, L.CANCEL_TYPES) & (d == side) & (p == px)
        big_s = level_size(sim.book, r0[idx], side, px, sim.levels)
        draw = canc & (big_s > 0)
        k = idx[draw]
        x = xorshift32_np(sim.rng[k])
        sim.rng[k] = x
        ahead = (x >> np.uint32(U24_SHIFT)).astype(np.int64) * big_s[draw] < qa[draw] * U24_ONE
        qa[draw] = np.where(ahead, np.maximum(qa[draw] - s[draw], 0), qa[draw])
    opp, empty = best_opposite(sim.book, r1[idx], side)
    cross = (opp != empty) & ((opp <= px) if side == L.SIDE_BUY else (opp >= px))
    fillq = np.where(through | cross, qty, fill_at)
    inv0 = si[L.S_INVENTORY, idx].astype(np.int64)
    book_fill(sim, idx, side, fillq, px, True, 1, si[base + L.O_OID, idx], si[base + L.O_QA0, idx], qa_before)
    done_q = np.abs(si[L.S_INVENTORY, idx].astype(np.int64) - inv0)
    qty = qty - done_q
    cap = level_cap(sim.book, r1[idx], side, px, sim.levels)
    si[base + L.O_QA, idx] = np.minimum(qa, cap)
    si[base + L.O_QTY, idx] = qty
    close_if_flat(sim, closed)
