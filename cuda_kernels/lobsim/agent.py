"""The agent's side of the simulator, one backtest per thread: actions, order
activation (latency), queue-position fills per event, market orders walking
the depth, accounting and the fills log. The semantics are documented once,
in alpharl.reference.lobsim (the NumPy twin of these device functions)."""
from __future__ import annotations

from numba import cuda, float64, int64

from alpharl import actions as A
from alpharl.cuda_kernels.lobsim.book import best_opposite, crosses, level_cap, level_size
from alpharl.lobster.format import (ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE, BOOK_COLS_PER_LEVEL, EV_CANCEL,
                                    EV_DELETE, EV_EXEC, EV_HIDDEN_EXEC)
from alpharl.prng import xorshift32
from alpharl.sim.layout import (ASK_EMPTY, BID_EMPTY, EV_DIR, EV_PRICE, EV_SIZE, EV_TYPE, F_AVG_PX, F_CASH, F_FEES,
                                F_REALISED, FEE_PER_SHARE, FL_MAKER, FL_OID, FL_PRICE, FL_QA0, FL_QTY, FL_ROW, FL_SIDE,
                                FL_STEP, FP_MAKER_FEE, FP_TAKER_FEE, FP_TICK_DOLLARS, IP_FEE_MODE, IP_FILL_CAP,
                                IP_LATENCY, IP_LEVELS, IP_LOT, IP_MAX_POS, IP_PARTIAL, IP_QUEUE_MODEL, LIVE, O_LIVE_AT,
                                O_OID, O_PX, O_QA, O_QA0, O_QTY, QUEUE_PROBABILISTIC, S_BOUGHT, S_BUY_PX, S_BUY_QTY,
                                S_CURSOR, S_FILL_HEAD, S_INVENTORY, S_MKT_FLAT, S_MKT_LIVE_AT, S_MKT_OID, S_MKT_QTY,
                                S_NEXT_OID, S_REFUSED, S_SELL_PX, S_SELL_QTY, S_SOLD, S_STEP, S_WAS_OPEN, SIDE_BUY,
                                SIDE_SELL)

#: Bernoulli draw of the probabilistic queue model: u = top 24 bits of the state / 2^24.
U24_SHIFT = 8
U24_ONE = 1 << 24


@cuda.jit(device=True)
def reduces(inv, side):
    """True when a ``side`` fill shrinks a non-zero position ``inv``."""
    return inv != 0 and ((inv > 0) == (side == SIDE_SELL))


@cuda.jit(device=True)
def book_fill(si, sf, b, side, qty, px, maker, ahead, oid, qa0, ip, fp, fills_i, fills_f):
    """Fill qty shares of a ``side`` order at px ticks (clipped at flat when it reduces the
    position); returns the shares filled. Cash, average price, realised PnL, fees, share
    counts and the fills-log ring are updated; the record's row is the cursor + ``ahead``."""
    inv0 = si[S_INVENTORY, b]
    if reduces(inv0, side):
        qty = min(qty, abs(inv0))
    if qty <= 0:
        return 0
    price = float64(px) * fp[FP_TICK_DOLLARS]
    fq = float64(qty)
    notional = fq * price
    rate = fp[FP_MAKER_FEE] if maker != 0 else fp[FP_TAKER_FEE]
    fee = rate * fq if ip[IP_FEE_MODE] == FEE_PER_SHARE else rate * notional
    sf[F_CASH, b] = sf[F_CASH, b] - float64(side) * notional - fee
    avg = sf[F_AVG_PX, b]
    inv1 = inv0 + side * qty
    if reduces(inv0, side):
        sgn = float64(1.0) if inv0 > 0 else float64(-1.0)
        sf[F_REALISED, b] = sf[F_REALISED, b] + fq * (price - avg) * sgn - fee
        sf[F_AVG_PX, b] = float64(0.0) if inv1 == 0 else avg
    else:
        held = float64(abs(inv0))
        sf[F_REALISED, b] = sf[F_REALISED, b] - fee
        sf[F_AVG_PX, b] = (avg * held + price * fq) / (held + fq)
    sf[F_FEES, b] += fee
    si[S_INVENTORY, b] = inv1
    if side == SIDE_BUY:
        si[S_BOUGHT, b] += qty
    else:
        si[S_SOLD, b] += qty
    if inv1 != 0:
        si[S_WAS_OPEN, b] = 1
    cap = ip[IP_FILL_CAP]
    if cap > 0:
        slot = si[S_FILL_HEAD, b] % cap
        fills_i[b, slot, FL_STEP] = si[S_STEP, b]
        fills_i[b, slot, FL_ROW] = si[S_CURSOR, b] + ahead
        fills_i[b, slot, FL_OID] = oid
        fills_i[b, slot, FL_SIDE] = side
        fills_i[b, slot, FL_PRICE] = px
        fills_i[b, slot, FL_QTY] = qty
        fills_i[b, slot, FL_MAKER] = maker
        fills_i[b, slot, FL_QA0] = qa0
        fills_f[b, slot] = fee
        si[S_FILL_HEAD, b] += 1
    return qty


@cuda.jit(device=True)
def close_if_flat(si, b):
    """A position back at flat after being open ends the episode: cancel every order, return True."""
    if si[S_WAS_OPEN, b] != 0 and si[S_INVENTORY, b] == 0:
        si[S_BUY_QTY, b] = 0
        si[S_SELL_QTY, b] = 0
        si[S_MKT_QTY, b] = 0
        si[S_MKT_FLAT, b] = 0
        return True
    return False


@cuda.jit(device=True)
def walk(si, sf, b, side, qty, book, row, flatten, oid, ip, fp, fills_i, fills_f):
    """A taker order walking the visible depth of ``row`` level by level; what the depth
    cannot fill is dropped, except for a flatten, which fills it at the deepest visible
    price (or, with that side empty, at the other side's best price)."""
    inv = si[S_INVENTORY, b]
    rem = min(qty, abs(inv)) if reduces(inv, side) else qty
    last_px = 0
    has_last = False
    for lv in range(ip[IP_LEVELS]):
        c = lv * BOOK_COLS_PER_LEVEL
        if side == SIDE_BUY:
            p = book[row, c + ASK_PRICE]
            z = book[row, c + ASK_SIZE]
            valid = p != ASK_EMPTY
        else:
            p = book[row, c + BID_PRICE]
            z = book[row, c + BID_SIZE]
            valid = p != BID_EMPTY
        if valid:
            take = min(rem, z)
            book_fill(si, sf, b, side, take, p, 0, 0, oid, 0, ip, fp, fills_i, fills_f)
            rem -= take
            last_px = p
            has_last = True
    if flatten and rem > 0:
        if has_last:
            book_fill(si, sf, b, side, rem, last_px, 0, 0, oid, 0, ip, fp, fills_i, fills_f)
        else:
            other, ok = best_opposite(book, row, -side)
            if ok:
                book_fill(si, sf, b, side, rem, other, 0, 0, oid, 0, ip, fp, fills_i, fills_f)


@cuda.jit(device=True)
def place_orders(si, b, act, book, row, ip):
    """Action ``act`` against the snapshot ``row``: market orders become the pending market
    order, join/improve (re)place the side's resting order, cancel/flatten drop them.
    Refusals (empty side, position limit, a pending flatten) are counted."""
    lot = ip[IP_LOT]
    maxp = ip[IP_MAX_POS]
    live_at = si[S_CURSOR, b] + ip[IP_LATENCY]
    new_oid = si[S_NEXT_OID, b]
    inv = si[S_INVENTORY, b]
    mkt = si[S_MKT_QTY, b]
    ask1 = book[row, ASK_PRICE]
    bid1 = book[row, BID_PRICE]
    has_ask = ask1 != ASK_EMPTY
    has_bid = bid1 != BID_EMPTY
    refused = False
    placed = False
    if act == A.MARKET_BUY or act == A.MARKET_SELL:
        if act == A.MARKET_BUY:
            side = SIDE_BUY
            ok = has_ask and inv + si[S_BUY_QTY, b] + max(mkt, 0) + lot <= maxp
        else:
            side = SIDE_SELL
            ok = has_bid and inv - si[S_SELL_QTY, b] + min(mkt, 0) - lot >= -maxp
        if ok and si[S_MKT_FLAT, b] == 0:
            if mkt == 0:
                placed = True
                si[S_MKT_OID, b] = new_oid
            si[S_MKT_QTY, b] = mkt + side * lot
            si[S_MKT_LIVE_AT, b] = live_at
        else:
            refused = True
    elif act == A.JOIN_BID or act == A.IMPROVE_BID or act == A.JOIN_ASK or act == A.IMPROVE_ASK:
        improve = act == A.IMPROVE_BID or act == A.IMPROVE_ASK
        if act == A.JOIN_BID or act == A.IMPROVE_BID:
            side = SIDE_BUY
            base = S_BUY_PX
            px = bid1 + 1 if improve and (not has_ask or ask1 - bid1 > 1) else bid1
            ok = has_bid and inv + max(mkt, 0) + lot <= maxp
        else:
            side = SIDE_SELL
            base = S_SELL_PX
            px = ask1 - 1 if improve and (not has_bid or ask1 - bid1 > 1) else ask1
            ok = has_ask and inv + min(mkt, 0) - lot >= -maxp
        if not ok:
            refused = True
        elif not (si[base + O_QTY, b] > 0 and si[base + O_PX, b] == px):
            placed = True
            si[base + O_PX, b] = px
            si[base + O_QTY, b] = lot
            si[base + O_QA, b] = 0
            si[base + O_QA0, b] = 0
            si[base + O_LIVE_AT, b] = live_at
            si[base + O_OID, b] = new_oid
    elif act == A.CANCEL or act == A.FLATTEN:
        si[S_BUY_QTY, b] = 0
        si[S_SELL_QTY, b] = 0
        if act == A.FLATTEN:
            go = inv != 0
            si[S_MKT_FLAT, b] = 1 if go else 0
            si[S_MKT_QTY, b] = 0
            si[S_MKT_LIVE_AT, b] = live_at
            if go:
                placed = True
                si[S_MKT_OID, b] = new_oid
    if placed:
        si[S_NEXT_OID, b] = new_oid + 1
    if refused:
        si[S_REFUSED, b] += 1


@cuda.jit(device=True)
def activate_limit(si, sf, b, side, base, book, row, ip, fp, fills_i, fills_f):
    """A pending limit order whose latency ran out goes live: queue ahead = visible size at its
    price; a marketable one fills at once as a taker at the best opposite price."""
    qty = si[base + O_QTY, b]
    la = si[base + O_LIVE_AT, b]
    if qty > 0 and la != LIVE and la <= si[S_CURSOR, b]:
        px = si[base + O_PX, b]
        opp, ok = best_opposite(book, row, side)
        marketable = ok and crosses(side, opp, px)
        qa = 0 if marketable else level_size(book, row, side, px, ip[IP_LEVELS])
        si[base + O_QA, b] = qa
        si[base + O_QA0, b] = qa
        si[base + O_LIVE_AT, b] = LIVE
        if marketable:
            book_fill(si, sf, b, side, qty, opp, 0, 0, si[base + O_OID, b], 0, ip, fp, fills_i, fills_f)
            si[base + O_QTY, b] = 0


@cuda.jit(device=True)
def activate(si, sf, b, book, row, ip, fp, fills_i, fills_f):
    """Orders whose latency ran out at the cursor act on the snapshot ``row`` (market order
    first, then buy, then sell). Returns True when this closed the round trip."""
    flat = si[S_MKT_FLAT, b]
    if (si[S_MKT_QTY, b] != 0 or flat != 0) and si[S_MKT_LIVE_AT, b] <= si[S_CURSOR, b]:
        q = -si[S_INVENTORY, b] if flat != 0 else si[S_MKT_QTY, b]
        si[S_MKT_QTY, b] = 0
        si[S_MKT_FLAT, b] = 0
        if q != 0:
            side = SIDE_BUY if q > 0 else SIDE_SELL
            walk(si, sf, b, side, abs(q), book, row, flat != 0, si[S_MKT_OID, b], ip, fp, fills_i, fills_f)
        if close_if_flat(si, b):
            return True
    activate_limit(si, sf, b, SIDE_BUY, S_BUY_PX, book, row, ip, fp, fills_i, fills_f)
    if close_if_flat(si, b):
        return True
    activate_limit(si, sf, b, SIDE_SELL, S_SELL_PX, book, row, ip, fp, fills_i, fills_f)
    return close_if_flat(si, b)


@cuda.jit(device=True)
def order_event(si, sf, rng, b, side, base, events, book, r0, r1, ip, fp, fills_i, fills_f):
    """Replay event r1 against the live resting ``side`` order (book r0 before it, r1 after):
    queue-ahead consumption by trades at its price, Bernoulli cancellations (probabilistic
    model), fills by trade-through or a crossing book, then the visible-size cap."""
    qty = si[base + O_QTY, b]
    if qty <= 0 or si[base + O_LIVE_AT, b] != LIVE:
        return
    t = events[r1, EV_TYPE]
    d = events[r1, EV_DIR]
    s = events[r1, EV_SIZE]
    p = events[r1, EV_PRICE]
    px = si[base + O_PX, b]
    qa = si[base + O_QA, b]
    nl = ip[IP_LEVELS]
    full = False
    fill_at = 0
    if (t == EV_EXEC or t == EV_HIDDEN_EXEC) and d == side:
        if (side == SIDE_BUY and p < px) or (side == SIDE_SELL and p > px):
            full = True                      # the market traded through our price
        elif p == px:
            excess = s - qa                  # what the trade took beyond the queue ahead fills us
            if excess > 0:
                if ip[IP_PARTIAL] != 0:
                    fill_at = min(excess, qty)
                elif excess >= qty:
                    fill_at = qty
            qa = max(qa - s, 0)
    elif (ip[IP_QUEUE_MODEL] == QUEUE_PROBABILISTIC and (t == EV_CANCEL or t == EV_DELETE)
          and d == side and p == px):
        big_s = level_size(book, r0, side, px, nl)
        if big_s > 0:
            # The cancelled shares were ahead of us with probability qa / S.
            x = xorshift32(rng[b])
            rng[b] = x
            if int64(x >> U24_SHIFT) * int64(big_s) < int64(qa) * int64(U24_ONE):
                qa = max(qa - s, 0)
    opp, ok = best_opposite(book, r1, side)
    if ok and crosses(side, opp, px):
        full = True
    fillq = qty if full else fill_at
    filled = book_fill(si, sf, b, side, fillq, px, 1, 1, si[base + O_OID, b], si[base + O_QA0, b],
                       ip, fp, fills_i, fills_f)
    si[base + O_QTY, b] = qty - filled
    si[base + O_QA, b] = min(qa, level_cap(book, r1, side, px, nl))
