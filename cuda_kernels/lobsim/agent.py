"""The agent's side of the simulator, one backtest per thread: actions, order
activation (latency), queue-position fills per event, market orders walking
the depth, accounting and the fills log. The semantics are documented once,
in alpharl.reference.lobsim.step; their NumPy twins are in alpharl.reference.lobsim.agent.

Every function here works on the thread's register copy of its backtest's
state (see lobsim_step): ``st`` int32[N_STATE_I] and ``fs`` float64[N_STATE_F]
are ``cuda.local.array`` rows indexed by the layout's row names (S_*, F_*),
``rs`` uint32[1] holds the PRNG state and ``pi`` / ``pf`` the packed
parameters. Every index is a compile-time constant once these functions are
inlined, so the arrays live in registers. The book is read flat, ``at`` the word
offset of a snapshot (book.py). Only the fills ring (``fills_i`` / ``fills_f`` /
``fills_t``, row b) is written to global memory."""
from __future__ import annotations

from numba import cuda, float64, int64, uint32

from alpharl import actions as A
from alpharl.cuda_kernels.lobsim.book import beyond_view, crosses, find_level, level_size, side_cols, word
from alpharl.cuda_kernels.lobsim.switches import FILLS_LOG, L3_FIFO, LAST_SEEN, PEG, POST_ONLY, SYNTHETIC
from alpharl.lobster.format import BOOK_COLS_PER_LEVEL, EV_CANCEL, EV_DELETE, EV_EXEC, EV_HIDDEN_EXEC
from alpharl.prng import U24_ONE, U24_SHIFT, xorshift32
from alpharl.sim.layout import (ASK_EMPTY, BID_EMPTY, EPISODE_ROUND_TRIP, FEE_PER_SHARE, FILL_PARTIAL,
                                FILL_WHOLE_ORDER, FL_MAKER, FL_OID, FL_PRICE, FL_QA0, FL_QA_FILL, FL_QTY, FL_ROW,
                                FL_SIDE, FL_STEP, FP_MAKER_FEE, FP_TAKER_FEE, FP_TICK_DOLLARS, F_AVG_PX, F_CASH,
                                F_FEES, F_REALISED, F_TRIP_BASE, IP_ENTRY_QUEUE, IP_EPISODE_END, IP_FEE_MODE,
                                IP_FILL_CAP, IP_FILL_RULE, IP_LEVELS, IP_LOT, IP_MAX_POS, IP_PEG, IP_POST_ONLY,
                                IP_QUEUE_MODEL, IP_REFILL, IP_REQUOTE, IP_SYNTHETIC, LIVE, NO_TIME, OI_OP, OI_POST, OI_PX, OI_QTY,
                                OP_CANCEL, OP_PLACE, ORD_BUY, ORD_MKT_QTY, ORD_SELL, O_LIVE_AT, O_OID, O_PX, O_QA,
                                O_QA0, O_QTY, PEG_IMPROVE, PEG_JOIN, PEG_NONE, QUEUE_L3_FIFO, QUEUE_PROBABILISTIC,
                                REQUOTE_KEEP, SIDE_BUY, SIDE_SELL, S_BOUGHT, S_BUY_LIVE_ROW, S_BUY_PEG, S_BUY_POST,
                                S_BUY_PX, S_BUY_QTY, S_CURSOR, S_FILL_HEAD, S_INVENTORY, S_MKT_FLAT, S_MKT_LIVE_AT,
                                S_MKT_OID, S_MKT_QTY, S_NEXT_OID, S_POST_CANCELLED, S_REFUSED, S_SELL_LIVE_ROW,
                                S_SELL_PEG, S_SELL_POST, S_SELL_PX, S_SELL_QTY, S_SOLD, S_STEP, S_TRADE_STEPS, S_TRIPS,
                                S_WAS_OPEN)

@cuda.jit(device=True)
def reduces(inv, side):
    """True when a ``side`` fill shrinks a non-zero position ``inv``."""
    return inv != 0 and ((inv > 0) == (side == SIDE_SELL))


@cuda.jit(device=True)
def best_of(side, ask1, bid1):
    """(best price a ``side`` order trades against, whether that side is non-empty), from the
    snapshot's best ask / bid already in registers."""
    if side == SIDE_BUY:
        return ask1, ask1 != ASK_EMPTY
    return bid1, bid1 != BID_EMPTY


@cuda.jit(device=True)
def book_fill(st, fs, b, side, qty, px, maker, ahead, oid, qa0, qa_fill, pi, pf, fills_i, fills_f, fills_t, times):
    """Fill qty shares of a ``side`` order at px ticks (clipped at flat when it reduces the
    position); returns the shares filled. Cash, average price, realised PnL, fees, share
    counts and the fills-log ring are updated; the record's row is the cursor + ``ahead``, its
    time that row's (``times``, ns; NO_TIME in the synthetic market), its queue ahead ``qa0`` when
    the order went live and ``qa_fill`` just before the filling event."""
    inv0 = st[S_INVENTORY]
    if reduces(inv0, side):
        qty = min(qty, abs(inv0))
    if qty <= 0:
        return 0
    price = float64(px) * pf[FP_TICK_DOLLARS]
    fq = float64(qty)
    notional = fq * price
    rate = pf[FP_MAKER_FEE] if maker != 0 else pf[FP_TAKER_FEE]
    fee = rate * fq if pi[IP_FEE_MODE] == FEE_PER_SHARE else rate * notional
    fs[F_CASH] = fs[F_CASH] - float64(side) * notional - fee
    avg = fs[F_AVG_PX]
    inv1 = inv0 + side * qty
    if reduces(inv0, side):
        sgn = float64(1.0) if inv0 > 0 else float64(-1.0)
        fs[F_REALISED] = fs[F_REALISED] + fq * (price - avg) * sgn - fee
        fs[F_AVG_PX] = float64(0.0) if inv1 == 0 else avg
    else:
        held = float64(abs(inv0))
        fs[F_REALISED] = fs[F_REALISED] - fee
        fs[F_AVG_PX] = (avg * held + price * fq) / (held + fq)
    fs[F_FEES] += fee
    st[S_INVENTORY] = inv1
    if side == SIDE_BUY:
        st[S_BOUGHT] += qty
    else:
        st[S_SOLD] += qty
    if inv1 != 0:
        st[S_WAS_OPEN] = 1
    cap = pi[IP_FILL_CAP]
    if FILLS_LOG and cap > 0:
        # unsigned (head, cap > 0, b >= 0): a 32-bit remainder and no negative-index tests
        ub = uint32(b)
        slot = uint32(st[S_FILL_HEAD]) % uint32(cap)
        fills_i[ub, slot, FL_STEP] = st[S_STEP]
        fills_i[ub, slot, FL_ROW] = st[S_CURSOR] + ahead
        fills_i[ub, slot, FL_OID] = oid
        fills_i[ub, slot, FL_SIDE] = side
        fills_i[ub, slot, FL_PRICE] = px
        fills_i[ub, slot, FL_QTY] = qty
        fills_i[ub, slot, FL_MAKER] = maker
        fills_i[ub, slot, FL_QA0] = qa0
        fills_i[ub, slot, FL_QA_FILL] = qa_fill
        fills_f[ub, slot] = fee
        fills_t[ub, slot] = NO_TIME if SYNTHETIC and pi[IP_SYNTHETIC] != 0 else times[st[S_CURSOR] + ahead]
        st[S_FILL_HEAD] += 1
    return qty


@cuda.jit(device=True)
def close_if_flat(st, fs, pi):
    """A position back at flat after being open closes a round trip: counted, the equity (= cash)
    kept as the next trade's start, time in trade cleared. With episode_end "round_trip" it ends
    the episode: cancel every order, return True (never with "horizon")."""
    if st[S_WAS_OPEN] != 0 and st[S_INVENTORY] == 0:
        st[S_TRIPS] += 1
        fs[F_TRIP_BASE] = fs[F_CASH]
        st[S_WAS_OPEN] = 0
        st[S_TRADE_STEPS] = 0
        if pi[IP_EPISODE_END] == EPISODE_ROUND_TRIP:
            st[S_BUY_QTY] = 0
            st[S_SELL_QTY] = 0
            st[S_MKT_QTY] = 0
            st[S_MKT_FLAT] = 0
            return True
    return False


@cuda.jit(device=True)
def walk(st, fs, b, side, qty, book, at, flatten, oid, pi, pf, fills_i, fills_f, fills_t, times):
    """A taker order walking the visible depth of the snapshot at ``at`` level by level; what
    the depth cannot fill is dropped, except for a flatten, which fills it at the deepest
    visible price (or, with that side empty, at the other side's best price). Under the
    whole-order fill rule the best level takes it all. One book_fill call site: the remainder
    is the pass after the last level (the fill is inlined once)."""
    inv = st[S_INVENTORY]
    rem = min(qty, abs(inv)) if reduces(inv, side) else qty
    whole = pi[IP_FILL_RULE] == FILL_WHOLE_ORDER
    pc, zc, empty = side_cols(-side)         # the side this order takes from
    oc, _, other_empty = side_cols(side)     # its own side: the fallback price of a flatten
    last_px = 0
    has_last = False
    nl = pi[IP_LEVELS]
    for lv in range(nl + 1):
        if lv < nl:
            c = at + lv * BOOK_COLS_PER_LEVEL
            p = word(book, c + pc)
            take = rem if whole else min(rem, word(book, c + zc))
            valid = p != empty
        else:
            other = word(book, at + oc)
            p = last_px if has_last else other
            take = rem
            valid = flatten and rem > 0 and (has_last or other != other_empty)
        if valid:
            book_fill(st, fs, b, side, take, p, 0, 0, oid, 0, 0, pi, pf, fills_i, fills_f, fills_t, times)
            rem -= take
            last_px = p
            has_last = True


@cuda.jit(device=True)
def replace_limit(st, base, px, qty, live_at, oid, seen, keep, post_row, post):
    """(Re)place the resting order at row ``base`` (S_BUY_PX / S_SELL_PX, a constant at each call
    so the state stays in registers) at px for qty shares, unless an order already rests there and
    ``keep`` (requote "keep"); returns whether an order was placed. Until it goes live its queue
    ahead holds ``seen``, the size its price showed when it was sent (entry_queue "last_seen"; 0
    otherwise). ``post`` (1: post-only, an instruction's flag) goes to the side's ``post_row``."""
    if keep and st[base + O_QTY] > 0 and st[base + O_PX] == px:
        return False
    st[base + O_PX] = px
    st[base + O_QTY] = qty
    st[base + O_QA] = seen
    st[base + O_QA0] = 0
    st[base + O_LIVE_AT] = live_at
    st[base + O_OID] = oid
    st[post_row] = post
    return True


@cuda.jit(device=True)
def queue_when_sent(book, at, vbook, vat, side, px, pi):
    """The queue ahead a new order at px starts with. entry_queue "visible": 0 (set when it goes
    live). "last_seen": the last size px showed as the order is sent: its size on the cursor's
    snapshot at ``at`` if listed there; out of view there, its size on the snapshot the agent sees
    (``vat``, older with a feed latency); else 0."""
    if not (LAST_SEEN and pi[IP_ENTRY_QUEUE] != 0):
        return 0
    nl = pi[IP_LEVELS]
    found, size = find_level(book, at, side, px, nl)
    if not found and beyond_view(book, at, side, px, nl):
        size = level_size(vbook, vat, side, px, nl)
    return size


@cuda.jit(device=True)
def quote_price(side, improve, ask1, bid1, has_ask, has_bid):
    """The price of a join (improve False) or an improve on ``side``: its best, or a tick inside
    it where the spread is wider than one tick (or the other side is empty)."""
    if side == SIDE_BUY:
        return bid1 + 1 if improve and (not has_ask or ask1 - bid1 > 1) else bid1
    return ask1 - 1 if improve and (not has_bid or ask1 - bid1 > 1) else ask1


@cuda.jit(device=True)
def room(st, side, pi):
    """Whether one more lot on ``side`` keeps the worst case of the position and the pending market
    order within max_position (a join's test)."""
    if side == SIDE_BUY:
        return st[S_INVENTORY] + max(st[S_MKT_QTY], 0) + pi[IP_LOT] <= pi[IP_MAX_POS]
    return st[S_INVENTORY] + min(st[S_MKT_QTY], 0) - pi[IP_LOT] >= -pi[IP_MAX_POS]


@cuda.jit(device=True)
def follow_peg(st, side, base, peg_row, post_row, ask1, bid1, has_ask, has_bid, book, at, vbook, vat, live_at, oid,
               pi):
    """SimParams.peg_quotes: the ``side`` order (constant rows ``base``, ``peg_row``, ``post_row``)
    placed by a join / improve, off its reference price on the snapshot the agent sees (best ask /
    bid ask1 / bid1, whether listed: has_ask / has_bid), is sent again there with its remaining size
    as order ``oid`` (nothing while the side is empty). With refill_quotes a pegged side with no order
    (it filled) is quoted there again, one lot, while the worst case stays within max_position (room).
    Returns the next order id."""
    peg = st[peg_row]
    if peg == PEG_NONE or not (has_bid if side == SIDE_BUY else has_ask):
        return oid
    px = quote_price(side, peg == PEG_IMPROVE, ask1, bid1, has_ask, has_bid)
    qty = st[base + O_QTY]
    post = st[post_row]
    if qty <= 0:
        if pi[IP_REFILL] == 0 or not room(st, side, pi):
            return oid
        qty = pi[IP_LOT]
        post = 0
    elif px == st[base + O_PX]:
        return oid
    seen = queue_when_sent(book, at, vbook, vat, side, px, pi)
    replace_limit(st, base, px, qty, live_at, oid, seen, False, post_row, post)
    return oid + 1


@cuda.jit(device=True)
def place_orders(st, act, ask1, bid1, book, at, vbook, vat, live_at, pi):
    """Action ``act`` at the cursor's snapshot ``at``, decided on the snapshot the agent sees,
    ``vat`` (the same one without a feed latency), whose best ask / bid are ask1 / bid1: market
    orders become the pending market order, join/improve (re)place the side's resting order,
    cancel/flatten drop them; every order goes live at row ``live_at``. Refusals (empty side,
    position limit, a pending flatten) are counted. With peg_quotes the pegged orders follow
    their reference prices first (follow_peg)."""
    has_ask = ask1 != ASK_EMPTY
    has_bid = bid1 != BID_EMPTY
    if PEG and pi[IP_PEG] != 0:   # pegged quotes move first, each a new order (buy, then sell)
        oid = follow_peg(st, SIDE_BUY, S_BUY_PX, S_BUY_PEG, S_BUY_POST, ask1, bid1, has_ask, has_bid, book, at, vbook,
                         vat, live_at, st[S_NEXT_OID], pi)
        st[S_NEXT_OID] = follow_peg(st, SIDE_SELL, S_SELL_PX, S_SELL_PEG, S_SELL_POST, ask1, bid1, has_ask, has_bid,
                                    book, at, vbook, vat, live_at, oid, pi)
    lot = pi[IP_LOT]
    maxp = pi[IP_MAX_POS]
    new_oid = st[S_NEXT_OID]
    inv = st[S_INVENTORY]
    mkt = st[S_MKT_QTY]
    refused = False
    placed = False
    if act == A.MARKET_BUY or act == A.MARKET_SELL:
        if act == A.MARKET_BUY:
            side = SIDE_BUY
            ok = has_ask and inv + st[S_BUY_QTY] + max(mkt, 0) + lot <= maxp
        else:
            side = SIDE_SELL
            ok = has_bid and inv - st[S_SELL_QTY] + min(mkt, 0) - lot >= -maxp
        if ok and st[S_MKT_FLAT] == 0:
            if mkt == 0:
                placed = True
                st[S_MKT_OID] = new_oid
            st[S_MKT_QTY] = mkt + side * lot
            st[S_MKT_LIVE_AT] = live_at
        else:
            refused = True
    elif act == A.JOIN_BID or act == A.IMPROVE_BID or act == A.JOIN_ASK or act == A.IMPROVE_ASK:
        improve = act == A.IMPROVE_BID or act == A.IMPROVE_ASK
        keep = pi[IP_REQUOTE] == REQUOTE_KEEP
        peg = PEG_IMPROVE if improve else PEG_JOIN
        if act == A.JOIN_BID or act == A.IMPROVE_BID:
            px = quote_price(SIDE_BUY, improve, ask1, bid1, has_ask, has_bid)
            ok = has_bid and room(st, SIDE_BUY, pi)
            if ok:
                seen = queue_when_sent(book, at, vbook, vat, SIDE_BUY, px, pi)
                placed = replace_limit(st, S_BUY_PX, px, lot, live_at, new_oid, seen, keep, S_BUY_POST, 0)
                st[S_BUY_PEG] = peg
        else:
            px = quote_price(SIDE_SELL, improve, ask1, bid1, has_ask, has_bid)
            ok = has_ask and room(st, SIDE_SELL, pi)
            if ok:
                seen = queue_when_sent(book, at, vbook, vat, SIDE_SELL, px, pi)
                placed = replace_limit(st, S_SELL_PX, px, lot, live_at, new_oid, seen, keep, S_SELL_POST, 0)
                st[S_SELL_PEG] = peg
        refused = not ok
    elif act == A.CANCEL or act == A.FLATTEN:
        st[S_BUY_QTY] = 0
        st[S_SELL_QTY] = 0
        st[S_BUY_PEG] = PEG_NONE
        st[S_SELL_PEG] = PEG_NONE
        if act == A.FLATTEN:
            go = inv != 0
            st[S_MKT_FLAT] = 1 if go else 0
            st[S_MKT_QTY] = 0
            st[S_MKT_LIVE_AT] = live_at
            if go:
                placed = True
                st[S_MKT_OID] = new_oid
    if placed:
        st[S_NEXT_OID] = new_oid + 1
    if refused:
        st[S_REFUSED] += 1


@cuda.jit(device=True)
def instruct_side(st, orders, b, side, base, post_row, peg_row, ob, book, at, vbook, vat, live_at, new_oid, pi):
    """The instruction orders[ob:ob + N_OI, b] on the resting ``side`` order (constant rows ``base``,
    ``post_row``, ``peg_row``): cancel it, or (re)place it, not pegged, at an explicit price, size and
    post-only flag as order ``new_oid`` (refused when its worst case passes max_position, as a join's
    is). Returns (the next order id, 1 if refused)."""
    op = orders[ob + OI_OP, b]
    if op == OP_CANCEL:
        st[base + O_QTY] = 0
        st[peg_row] = PEG_NONE
    elif op == OP_PLACE:
        px = orders[ob + OI_PX, b]
        qty = orders[ob + OI_QTY, b]
        inv = st[S_INVENTORY]
        mkt = st[S_MKT_QTY]
        if side == SIDE_BUY:
            ok = inv + max(mkt, 0) + qty <= pi[IP_MAX_POS]
        else:
            ok = inv + min(mkt, 0) - qty >= -pi[IP_MAX_POS]
        if not (ok and qty > 0):
            return new_oid, 1
        seen = queue_when_sent(book, at, vbook, vat, side, px, pi)
        replace_limit(st, base, px, qty, live_at, new_oid, seen, False, post_row, orders[ob + OI_POST, b])
        st[peg_row] = PEG_NONE
        return new_oid + 1, 0
    return new_oid, 0


@cuda.jit(device=True)
def place_instructions(st, orders, b, book, at, vbook, vat, live_at, pi):
    """Backtest b's order instructions (orders[:, b], layout ORD_*), after its action and on the same
    snapshots (place_orders): the buy side's, the sell side's, then a market order of signed size
    that joins the pending one (refused, as a market action is, past max_position or with a flatten
    pending). Each order placed takes the next id in that order; refusals are counted."""
    oid, r_buy = instruct_side(st, orders, b, SIDE_BUY, S_BUY_PX, S_BUY_POST, S_BUY_PEG, ORD_BUY, book, at, vbook,
                               vat, live_at, st[S_NEXT_OID], pi)
    oid, r_sell = instruct_side(st, orders, b, SIDE_SELL, S_SELL_PX, S_SELL_POST, S_SELL_PEG, ORD_SELL, book, at,
                                vbook, vat, live_at, oid, pi)
    q = orders[ORD_MKT_QTY, b]
    refused = r_buy + r_sell
    if q != 0:
        inv = st[S_INVENTORY]
        mkt = st[S_MKT_QTY]
        if q > 0:
            ok = inv + st[S_BUY_QTY] + max(mkt, 0) + q <= pi[IP_MAX_POS]
        else:
            ok = inv - st[S_SELL_QTY] + min(mkt, 0) + q >= -pi[IP_MAX_POS]
        if ok and st[S_MKT_FLAT] == 0:
            if mkt == 0:
                st[S_MKT_OID] = oid
                oid += 1
            st[S_MKT_QTY] = mkt + q
            st[S_MKT_LIVE_AT] = live_at
        else:
            refused += 1
    st[S_NEXT_OID] = oid
    st[S_REFUSED] += refused


@cuda.jit(device=True)
def activate_limit(st, fs, b, side, base, book, at, ask1, bid1, pi, pf, fills_i, fills_f, fills_t, times):
    """A pending limit order whose latency ran out goes live: queue ahead = visible size at its
    price (entry_queue "last_seen": the size seen at placement when the price is now out of
    view); a marketable one fills at once as a taker at the best opposite price, or, post-only
    (SimParams.post_only, or its instruction's flag), is cancelled (and counted)."""
    qty = st[base + O_QTY]
    la = st[base + O_LIVE_AT]
    if qty > 0 and la != LIVE and la <= st[S_CURSOR]:
        px = st[base + O_PX]
        opp, ok = best_of(side, ask1, bid1)
        marketable = ok and crosses(side, opp, px)
        nl = pi[IP_LEVELS]
        qa = 0
        if not marketable:
            qa = level_size(book, at, side, px, nl)
            if LAST_SEEN and pi[IP_ENTRY_QUEUE] != 0 and beyond_view(book, at, side, px, nl):
                qa = st[base + O_QA]
        st[base + O_QA] = qa
        st[base + O_QA0] = qa
        st[base + O_LIVE_AT] = LIVE
        st[live_row_of(side)] = st[S_CURSOR]
        if marketable:
            if POST_ONLY and pi[IP_POST_ONLY] != 0 or st[post_row_of(side)] != 0:
                st[S_POST_CANCELLED] += 1
            else:
                book_fill(st, fs, b, side, qty, opp, 0, 0, st[base + O_OID], 0, 0, pi, pf, fills_i, fills_f, fills_t,
                          times)
            st[base + O_QTY] = 0


@cuda.jit(device=True)
def activate(st, fs, b, book, at, ask1, bid1, pi, pf, fills_i, fills_f, fills_t, times):
    """Orders whose latency ran out at the cursor act on the snapshot at ``at`` (best ask / bid
    ask1 / bid1; market order first, then buy, then sell). Returns True when this closed the
    round trip."""
    flat = st[S_MKT_FLAT]
    if (st[S_MKT_QTY] != 0 or flat != 0) and st[S_MKT_LIVE_AT] <= st[S_CURSOR]:
        q = -st[S_INVENTORY] if flat != 0 else st[S_MKT_QTY]
        st[S_MKT_QTY] = 0
        st[S_MKT_FLAT] = 0
        if q != 0:
            side = SIDE_BUY if q > 0 else SIDE_SELL
            walk(st, fs, b, side, abs(q), book, at, flat != 0, st[S_MKT_OID], pi, pf, fills_i, fills_f, fills_t, times)
        if close_if_flat(st, fs, pi):
            return True
    activate_limit(st, fs, b, SIDE_BUY, S_BUY_PX, book, at, ask1, bid1, pi, pf, fills_i, fills_f, fills_t, times)
    if close_if_flat(st, fs, pi):
        return True
    activate_limit(st, fs, b, SIDE_SELL, S_SELL_PX, book, at, ask1, bid1, pi, pf, fills_i, fills_f, fills_t, times)
    return close_if_flat(st, fs, pi)


@cuda.jit(device=True)
def live_row_of(side):
    """State row of the row at which the resting ``side`` order went live."""
    return S_BUY_LIVE_ROW if side == SIDE_BUY else S_SELL_LIVE_ROW


@cuda.jit(device=True)
def post_row_of(side):
    """State row of the resting ``side`` order's post-only flag (an instruction's)."""
    return S_BUY_POST if side == SIDE_BUY else S_SELL_POST


@cuda.jit(device=True)
def order_event(st, fs, rs, b, side, base, t, d, s, p, ask1, bid1, cap, book, at0, arrived, pi, pf, fills_i,
                fills_f, fills_t, times):
    """Replay one event (type t, direction d, size s, price p; row cursor + 1) against the live
    resting ``side`` order (book at ``at0`` before it; after it, best ask / bid ask1 / bid1 and the
    order's queue cap ``cap`` = level_cap at its price): queue-ahead consumption by trades at its
    price, Bernoulli cancellations (probabilistic model) or those of orders ahead (l3_fifo: the
    row each event's order arrived at, ``arrived``), fills by trade-through, by the execution of
    an order behind ours (l3_fifo) or a crossing book, then the visible-size cap."""
    qty = st[base + O_QTY]
    if qty <= 0 or st[base + O_LIVE_AT] != LIVE:
        return
    px = st[base + O_PX]
    qa = st[base + O_QA]
    full = False
    fill_at = 0
    model = pi[IP_QUEUE_MODEL]
    if (t == EV_EXEC or t == EV_HIDDEN_EXEC) and d == side:
        if (side == SIDE_BUY and p < px) or (side == SIDE_SELL and p > px):
            full = True                      # the market traded through our price
        elif (L3_FIFO and model == QUEUE_L3_FIFO and t == EV_EXEC and p == px
              and arrived[st[S_CURSOR] + 1] > st[live_row_of(side)]):
            full = True                      # an order behind ours traded: ours traded before it
        elif p == px:
            excess = s - qa                  # what the trade took beyond the queue ahead fills us
            if excess > 0:
                rule = pi[IP_FILL_RULE]
                if rule == FILL_PARTIAL:
                    fill_at = min(excess, qty)
                elif rule == FILL_WHOLE_ORDER or excess >= qty:
                    fill_at = qty
            qa = max(qa - s, 0)
    elif (L3_FIFO and model == QUEUE_L3_FIFO and (t == EV_CANCEL or t == EV_DELETE) and d == side and p == px
          and arrived[st[S_CURSOR] + 1] <= st[live_row_of(side)]):
        qa = max(qa - s, 0)                  # an order ahead of ours left
    elif (model == QUEUE_PROBABILISTIC and (t == EV_CANCEL or t == EV_DELETE)
          and d == side and p == px):
        big_s = level_size(book, at0, side, px, pi[IP_LEVELS])
        if big_s > 0:
            # The cancelled shares were ahead of us with probability qa / S.
            x = xorshift32(rs[0])
            rs[0] = x
            if int64(x >> U24_SHIFT) * int64(big_s) < int64(qa) * int64(U24_ONE):
                qa = max(qa - s, 0)
    opp, ok = best_of(side, ask1, bid1)
    if ok and crosses(side, opp, px):
        full = True
    fillq = qty if full else fill_at
    filled = book_fill(st, fs, b, side, fillq, px, 1, 1, st[base + O_OID], st[base + O_QA0], st[base + O_QA],
                       pi, pf, fills_i, fills_f, fills_t, times)
    st[base + O_QTY] = qty - filled
    st[base + O_QA] = min(qa, cap)
