"""The one definition of the simulator's device layouts.

Everything a kernel indexes by a number is named here: the rows of the packed
state arrays, the parameter arrays, the observation vector, the per-step
outputs and the fill records. Kernels import these module-level ints (numba
freezes them as compile-time constants).

Prices on the device are int32 **ticks** (LOBSTER price units // tick). The
LOBSTER padding of empty levels does not fit int32; it maps to the named
sentinels ``ASK_EMPTY`` / ``BID_EMPTY`` (empty levels have size 0). A mid
price is kept doubled, ``mid2 = ask1 + bid1`` in ticks, so it stays an integer.

State is structure-of-arrays: ``state_i int32[N_STATE_I, B]`` and
``state_f float64[N_STATE_F, B]``; row ``k`` is the field ``k`` for every
backtest (a contiguous [B] array, coalesced when thread b reads element b).
Money is float64 (cents over millions of shares must stay exact enough for
conservation checks); the trainer-facing outputs are float32.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from alpharl.lobster.format import BOOK_COLS_PER_LEVEL, EV_CANCEL, EV_DELETE, EV_EXEC, EV_HIDDEN_EXEC, PRICE_SCALE

if TYPE_CHECKING:  # annotations only: this module is a leaf (kernels import it), params is host configuration
    from alpharl.sim.params import SimParams, SynthParams

# ------------------------------------------------------------------ prices
#: int32 sentinels of an empty ask / bid level (LOBSTER pads with +-9999999999).
ASK_EMPTY = 1 << 30
BID_EMPTY = -(1 << 30)
#: Order side / direction: +1 buy, -1 sell (LOBSTER's direction convention).
SIDE_BUY = 1
SIDE_SELL = -1
#: level_cap's answer when a price lies beyond a full visible depth (no cap): int32 max.
CAP_UNKNOWN = 2147483647

# ---------------------------------------------------------------- events
#: Columns of the int32 event table events[n, N_EV_COLS] (LOBSTER message fields we use).
EV_TYPE, EV_DIR, EV_SIZE, EV_PRICE = range(4)
N_EV_COLS = 4
#: Event kinds the queue model reads (LOBSTER codes).
TRADE_TYPES = (EV_EXEC, EV_HIDDEN_EXEC)
CANCEL_TYPES = (EV_CANCEL, EV_DELETE)

# --------------------------------------------------------- order status
#: An order's ``live_at`` once it is live (>= 0: the cursor at which it goes live).
LIVE = -1
#: Arrival row (l3_fifo's per-event table) of an order that arrived before the file's first row.
ARRIVED_BEFORE = -1

# ------------------------------------------------------------- state_i rows
(S_CURSOR,        # row of the current book snapshot (replay) / events generated so far (synthetic)
 S_STEP_IN_EP,    # env steps taken in this episode
 S_STEP,          # env steps taken since reset() (for the fills log; never reset by an episode end)
 S_EPISODE,       # episodes ended since reset()
 S_INVENTORY,     # signed shares held
 S_WAS_OPEN,      # 1 once the position was non-flat in this episode (since its last round trip)
 S_TRADE_STEPS,   # env steps ended with an open position in this episode (since its last round trip)
 S_NEXT_OID,      # id of the next order of this backtest (never reset)
 S_REFUSED,       # actions refused (position limit, empty book side, conflicting flatten) since reset()
 S_BOUGHT,        # shares bought in this episode
 S_SOLD,          # shares sold in this episode
 S_FILL_HEAD,     # fill records written since reset() (ring position = head % capacity)
 S_BUY_PX, S_BUY_QTY, S_BUY_QA, S_BUY_QA0, S_BUY_LIVE_AT, S_BUY_OID,
 S_SELL_PX, S_SELL_QTY, S_SELL_QA, S_SELL_QA0, S_SELL_LIVE_AT, S_SELL_OID,
 S_MKT_QTY,       # signed shares of the pending market order (latency > 0)
 S_MKT_FLAT,      # 1: the pending market order is a flatten (its size is read when it goes live)
 S_MKT_LIVE_AT,
 S_MKT_OID,
 S_POST_CANCELLED,  # post-only orders cancelled because they would have crossed on arrival, since reset()
 S_BUY_LIVE_ROW,  # row at which the resting buy order went live (l3_fifo: who is ahead of it)
 S_SELL_LIVE_ROW,
 S_TRIPS,         # round trips closed (open position back to flat by a fill) since reset()
 S_BUY_POST,      # 1: the resting buy order is post-only by its order instruction (actions follow SimParams.post_only)
 S_SELL_POST,
 S_VOL_STEPS,     # steps in F_VOL_MSQ's mean, up to VOL_HORIZON (a market statistic: kept across episodes)
 S_RESP_STALE,    # observations whose response latency reached past the own ring (oldest shown) since reset()
 S_BUY_PEG,       # PEG_*: the reference price the resting buy order follows (SimParams.peg_quotes)
 S_SELL_PEG,
 S_MID_HIST,      # first of N_MID_HIST rows: mid2 at the last step ends, newest first
 ) = range(39)
#: Offsets of a resting order's fields from S_BUY_PX / S_SELL_PX.
O_PX, O_QTY, O_QA, O_QA0, O_LIVE_AT, O_OID = range(6)
#: What a resting order's price follows under SimParams.peg_quotes (S_BUY_PEG / S_SELL_PEG): nothing
#: (an order instruction's explicit price), its side's best price (a join) or a tick inside it (an
#: improve, the best itself when the spread is one tick).
PEG_NONE, PEG_JOIN, PEG_IMPROVE = range(3)
#: Lags (env steps) of the recent mid returns in the observation.
RETURN_LAGS = (1, 2, 4, 8)
N_RET = len(RETURN_LAGS)
N_MID_HIST = RETURN_LAGS[-1] + 1
RET_LAG_0, RET_LAG_1, RET_LAG_2, RET_LAG_3 = RETURN_LAGS
N_STATE_I = S_MID_HIST + N_MID_HIST

STATE_I_NAMES = ("cursor", "step_in_ep", "step", "episode", "inventory", "was_open", "trade_steps",
                 "next_oid", "refused", "bought", "sold", "fill_head",
                 "buy_px", "buy_qty", "buy_qa", "buy_qa0", "buy_live_at", "buy_oid",
                 "sell_px", "sell_qty", "sell_qa", "sell_qa0", "sell_live_at", "sell_oid",
                 "mkt_qty", "mkt_flat", "mkt_live_at", "mkt_oid", "post_cancelled", "buy_live_row",
                 "sell_live_row", "trips", "buy_post", "sell_post", "vol_steps",
                 "resp_stale", "buy_peg", "sell_peg") + tuple(f"mid_hist{k}" for k in range(N_MID_HIST))
assert len(STATE_I_NAMES) == N_STATE_I

# ---------------------------------------------------- order instructions
#: Rows of the order-level input of a step, orders int32[N_ORD, B] (alpharl.sim.orders): for each
#: side an operation on its one resting order (at ORD_BUY / ORD_SELL, fields OI_*), then a market
#: order. All zeros is no instruction: the step is its action's alone.
OI_OP, OI_PX, OI_QTY, OI_POST = range(4)   # operation (OP_*), price (ticks), shares, 1: post-only
N_OI = 4
ORD_BUY = 0
ORD_SELL = N_OI
ORD_MKT_QTY = 2 * N_OI                     # signed shares of a market order (+ buy, - sell; 0: none)
N_ORD = ORD_MKT_QTY + 1
#: Operations on a side's resting order: none, (re)place it at OI_PX x OI_QTY, cancel it.
OP_NONE, OP_PLACE, OP_CANCEL = range(3)

# ------------------------------------------------------------- state_f rows
(F_CASH,          # $ (starts at 0 each episode)
 F_AVG_PX,        # average entry price of the open position, $ (0 when flat)
 F_REALISED,      # realised PnL net of every fee paid in the episode, $
 F_FEES,          # fees paid in the episode, $ (negative = rebates earned)
 F_EQUITY,        # mark-to-market equity at the last step end: cash + inventory x mid, $
 F_TRIP_BASE,     # equity (= cash: flat) when the episode's last round trip closed, $ (0 before any)
 F_VOL_MSQ,       # running mean of the squared mid change per step, ticks^2 (kept across episodes)
 ) = range(7)
N_STATE_F = 7
STATE_F_NAMES = ("cash", "avg_px", "realised", "fees", "equity", "trip_base", "vol_msq")
#: The rows before it are the episode's money, cleared when an episode ends; F_VOL_MSQ (with
#: S_VOL_STEPS) describes the market the backtest replays, not the episode, so it carries on.
N_EPISODE_F = F_VOL_MSQ
#: Horizon N (env steps) of the market's volatility estimate: sigma^2 = F_VOL_MSQ is the plain mean of
#: the squared mid changes (ticks) over a backtest's first N steps, then an EMA of weight 1 / N. One
#: update, m += (x^2 - m) / min(n, N) with x the step's change and n the steps seen, is both (1 / n is
#: the running mean's weight). Long enough to average over the mid's bursts, short against a day's
#: replay (tens of thousands of steps), so sigma follows the session's changes in activity.
VOL_HORIZON = 1000

# --------------------------------------------------------- per-step outputs
#: Rows of out float32[N_OUT, B]; each row is a contiguous [B] array for the trainer.
#: A trade is a round trip (from flat to flat) or the open position an episode's end truncates. With
#: SimParams.episode_end "round_trip" a trade ends its episode, so a step ends at most one; with
#: "horizon" a step that ends several (possible only with 3+ fills in one step) reports them as one.
(OUT_REWARD,      # equity change over the step, after fees, $ (less SimParams.inventory_penalty's term)
 OUT_DONE,        # 1.0 when the episode ended this step (closed or truncated), else 0.0
 OUT_TRUNCATED,   # 1.0 when it ended because the window ran out
 OUT_TRADE_DONE,  # 1.0 when a trade ended this step
 OUT_TRADE_PNL,   # its PnL: the equity change from its start (flat) to its end, $; 0 otherwise
 OUT_LABEL_UP,    # 1.0 when the mid rose over this step (label of the obs the action saw)
 OUT_LABEL_RET,   # the mid's relative change over this step
 ) = range(7)
N_OUT = 7
OUT_NAMES = ("reward", "done", "truncated", "trade_done", "trade_pnl", "label_up", "label_ret")

# ------------------------------------------------------------- fill records
#: Fields of fills_i int32[B, capacity, N_FILL_I]; the fee is fills_f float64[B, capacity], the time
#: fills_t int64[B, capacity].
(FL_STEP,         # the backtest's step counter when it filled
 FL_ROW,          # cursor (event row) of the book snapshot it filled against
 FL_OID,          # our order id
 FL_SIDE,         # +1 buy, -1 sell
 FL_PRICE,        # ticks
 FL_QTY,          # shares
 FL_MAKER,        # 1 maker (resting order), 0 taker
 FL_QA0,          # queue ahead when the order went live (takers: 0)
 FL_QA_FILL,      # queue ahead just before the event that filled it (takers, and fills on going live: 0)
 ) = range(9)
N_FILL_I = 9
#: fills_t of a fill in the synthetic market, which has no clock (else ns after midnight of its event row).
NO_TIME = -1

# ------------------------------------------------------------ observation
# One observation row per backtest, float32[obs_dim(obs_levels)]. Its length is fixed by
# SimParams.obs_levels, never by the data: a policy moves between files of any depth L.
#
# Book block, levels 1..obs_levels, 4 values each. Levels 1..min(L, obs_levels) are read from
# the snapshot; a deeper book's levels past obs_levels are not observed (the simulator still
# matches, queues and fills against all L levels). "No level" encoding: a level the file does
# not have (L < obs_levels) or the book lists as empty is all four values 0. The size value
# alone tells: a listed level holds at least one share, so its log size is > 0. Zeros also add
# nothing to the first layer's pre-activations (w x 0 = 0), so a network meets a shallower book
# as a deeper one whose far levels are silent.
#
# Units: nothing depends on the instrument's price level or share scale.
#   prices  offsets from mid in ticks; mid = (ask1 + bid1) / 2 (the other best when one side is
#           empty), so a touch level sits spread / 2 ticks away;
#   sizes   log1p(size / u) with u = (ask1 size + bid1 size) / 2, the mean size at the touch in
#           shares. The unit u is the book's own touch depth, which every file has at any depth,
#           so multiplying every size of a book by k leaves the values unchanged; log1p maps an
#           empty level to 0, a level as deep as the touch mean to ln 2, and tames the heavy tail
#           of level sizes (1 to 1e5 shares). u = 0 (both touch sizes 0) gives 0;
#   ratios  imbalances in [-1, 1], position in [-1, 1], times as fractions of the episode;
#   PnL     unrealised PnL / (lot_size x tick $) = lots held x ticks gained since entry.
#: Per book level: ask offset above mid (ticks, >= 0), ask log size, bid offset below mid
#: (ticks, >= 0), bid log size; the "no level" encoding is 0, 0 (above).
OBS_LEVEL_ASK_OFF, OBS_LEVEL_ASK_LOGSZ, OBS_LEVEL_BID_OFF, OBS_LEVEL_BID_LOGSZ = range(4)
OBS_PER_LEVEL = 4
#: Fields after the book block, as offsets from OBS_PER_LEVEL * obs_levels (obx_base).
(OBX_SPREAD,        # best ask - best bid, ticks (0 with a side empty)
 OBX_IMB1,          # (bid size 1 - ask size 1) / (their sum), in [-1, 1]
 OBX_IMB_DEPTH,     # the same over the observed levels 1..min(L, obs_levels)
 OBX_RET,           # N_RET values: mid change over RETURN_LAGS steps, ticks
 ) = (0, 1, 2, 3)
OBX_POSITION = OBX_RET + N_RET          # inventory / max_position, in [-1, 1]
OBX_UPNL = OBX_POSITION + 1             # inventory x (mid - avg entry) / (lot_size x tick): lots x ticks
OBX_BUY_FLAG = OBX_UPNL + 1             # 1 live, 0.5 pending (latency), 0 none
OBX_BUY_QUEUE = OBX_BUY_FLAG + 1        # log1p(queue ahead / u), u as the sizes'; 0 if no live order
OBX_BUY_OFF = OBX_BUY_QUEUE + 1         # (mid - price) ticks, 0 if none
OBX_SELL_FLAG = OBX_BUY_OFF + 1
OBX_SELL_QUEUE = OBX_SELL_FLAG + 1
OBX_SELL_OFF = OBX_SELL_QUEUE + 1       # (price - mid) ticks, 0 if none
OBX_TIME_IN_TRADE = OBX_SELL_OFF + 1    # trade_steps / episode_steps (window_steps: one pass)
OBX_TIME_LEFT = OBX_TIME_IN_TRADE + 1   # (episode_steps - step_in_ep) / episode_steps
N_OBS_EXTRA = OBX_TIME_LEFT + 1
#: The agent's own state in the observation, OBX_POSITION .. OBX_TIME_IN_TRADE (position, unrealised
#: PnL, both orders' flag / queue / offset, time in trade): what a response latency delays.
OBX_OWN = OBX_POSITION
N_OWN_OBS = OBX_TIME_IN_TRADE + 1 - OBX_OWN
#: Entries of a backtest's own-state ring (SimParams.response_latency_ns): the own-state observation
#: values at its last RESP_RING step ends, newest first, each with the row it held at. A latency
#: reaching further back than the oldest entry shows the oldest (counted in S_RESP_STALE).
RESP_RING = 16
#: Words of one entry in resp_ring float64[N_RESP, B]: its row, then the N_OWN_OBS values (float64
#: holds a row and a float32 value exactly).
RESP_ROW = 0
RESP_VALUES = 1
RESP_WIDTH = RESP_VALUES + N_OWN_OBS
N_RESP = RESP_RING * RESP_WIDTH
#: The row an entry is stamped with when it holds since the episode began (an episode starts flat
#: with no orders, which the agent knows at once): no later than any row a latency looks back to.
RESP_SINCE_START = 0
#: Version of the observation's definition, recorded in every checkpoint: a network trained on
#: another version reads different features. 1: the file's L levels, sizes as log1p(shares);
#: 2: obs_levels levels, the units above.
OBS_VERSION = 2


def obx_base(obs_levels: int) -> int:
    """Index of the first field after the book block (add an OBX_* offset)."""
    return OBS_PER_LEVEL * obs_levels


def obs_dim(obs_levels: int) -> int:
    """Length of the observation vector with obs_levels book levels (SimParams.obs_levels)."""
    return obx_base(obs_levels) + N_OBS_EXTRA


def obs_names(obs_levels: int) -> list[str]:
    """Name of every observation element, in order."""
    names = []
    for lv in range(1, obs_levels + 1):
        names += [f"ask{lv}_off", f"ask{lv}_logsz", f"bid{lv}_off", f"bid{lv}_logsz"]
    names += ["spread", "imbalance1", "imbalance_depth"] + [f"ret_{k}" for k in RETURN_LAGS]
    names += ["position", "upnl", "buy_flag", "buy_queue", "buy_off", "sell_flag", "sell_queue", "sell_off",
              "time_in_trade", "time_left"]
    assert len(names) == obs_dim(obs_levels)
    return names


# ---------------------------------------------------------- packed params
#: int32 parameter array ip[N_IP].
(IP_LEVELS, IP_EVENTS_PER_STEP, IP_EPISODE_STEPS, IP_LOT, IP_MAX_POS, IP_LATENCY, IP_FEE_MODE,
 IP_QUEUE_MODEL, IP_FILL_RULE, IP_POST_ONLY, IP_ENTRY_QUEUE, IP_TIMED_ENTRY, IP_FEED_DELAY, IP_FORCE_FLATTEN,
 IP_FILL_CAP, IP_START_SPAN, IP_SYNTHETIC, IP_OBS_LEVELS, IP_REQUOTE, IP_EPISODE_END, IP_PENALTY_UNIT,
 IP_RESP_DELAY, IP_PENALTY_QUADRATIC, IP_PEG, IP_REFILL) = range(25)
N_IP = 25
#: float64 parameter array fp[N_FP].
FP_TICK_DOLLARS, FP_MAKER_FEE, FP_TAKER_FEE, FP_INV_PENALTY, FP_INV_PENALTY_Q2 = range(5)
N_FP = 5
#: The choices of SimParams.fee_mode / queue_model / fill_rule / entry_queue / requote / episode_end /
#: inventory_penalty_unit; a choice's device code is its index here.
FEE_MODES = ("per_share", "per_value")
QUEUE_MODELS = ("risk_averse", "probabilistic", "l3_fifo")
FILL_RULES = ("partial", "all_or_nothing", "whole_order")
ENTRY_QUEUES = ("visible", "last_seen")
REQUOTES = ("keep", "replace")
EPISODE_ENDS = ("round_trip", "horizon")
PENALTY_UNITS = ("tick", "sigma")
FEE_PER_SHARE, FEE_PER_VALUE = range(len(FEE_MODES))
QUEUE_RISK_AVERSE, QUEUE_PROBABILISTIC, QUEUE_L3_FIFO = range(len(QUEUE_MODELS))
FILL_PARTIAL, FILL_ALL_OR_NOTHING, FILL_WHOLE_ORDER = range(len(FILL_RULES))
ENTRY_VISIBLE, ENTRY_LAST_SEEN = range(len(ENTRY_QUEUES))
REQUOTE_KEEP, REQUOTE_REPLACE = range(len(REQUOTES))
EPISODE_ROUND_TRIP, EPISODE_HORIZON = range(len(EPISODE_ENDS))
PENALTY_TICK, PENALTY_SIGMA = range(len(PENALTY_UNITS))
#: The choices of SimParams.off_tick_trades (host side: how the replayed events are built).
OFF_TICK_TRADES = ("drop", "nearest")


def window_steps(p: SimParams, n_rows: int, synthetic: bool) -> int:
    """Env steps of an episode window: ``p.episode_steps``, or with 0 (one pass over the data) the
    steps a replay from row 0 can take, (n_rows - 1) // events_per_step (a step reads the rows
    cursor .. cursor + E). ValueError when one pass has no end (synthetic) or no room for a step."""
    if p.episode_steps > 0:
        return p.episode_steps
    if synthetic:
        raise ValueError("episode_steps = 0 (one pass over the data) needs replayed data: the synthetic "
                         "market has no end")
    steps = (n_rows - 1) // p.events_per_step
    if steps < 1:
        raise ValueError(f"episode_steps = 0: the {n_rows} events of the data hold no step of "
                         f"{p.events_per_step} events")
    return steps


def pack_params(p: SimParams, levels: int, tick: int, n_rows: int, synthetic: bool) -> tuple[np.ndarray, np.ndarray]:
    """(ip int32[N_IP], fp float64[N_FP]) of one simulator configuration (``levels``: the data's L;
    the observation's level count is ``p.obs_levels``)."""
    ip = np.zeros(N_IP, np.int32)
    steps = window_steps(p, n_rows, synthetic)
    ip[IP_LEVELS] = levels
    ip[IP_EVENTS_PER_STEP] = p.events_per_step
    ip[IP_EPISODE_STEPS] = steps
    ip[IP_LOT] = p.lot_size
    ip[IP_MAX_POS] = p.max_position
    ip[IP_LATENCY] = p.latency_events
    ip[IP_FEE_MODE] = FEE_MODES.index(p.fee_mode)
    ip[IP_QUEUE_MODEL] = QUEUE_MODELS.index(p.queue_model)
    ip[IP_FILL_RULE] = FILL_RULES.index(p.fill_rule)
    ip[IP_POST_ONLY] = int(p.post_only)
    ip[IP_ENTRY_QUEUE] = ENTRY_QUEUES.index(p.entry_queue)
    ip[IP_TIMED_ENTRY] = int(p.entry_latency_ns > 0)     # orders go live at the host's live_rows
    ip[IP_FEED_DELAY] = int(p.feed_latency_ns > 0)       # the agent sees the host's seen_rows
    ip[IP_RESP_DELAY] = int(p.response_latency_ns > 0)   # its own state as of the host's resp_rows
    ip[IP_FORCE_FLATTEN] = int(p.force_flatten)
    ip[IP_FILL_CAP] = p.fills_log_capacity
    # episode starts: uniform over the offsets whose window ends before the last row; one pass: row 0
    ip[IP_START_SPAN] = 1 if p.episode_steps == 0 else max(n_rows - p.events_per_step * steps, 1)
    ip[IP_SYNTHETIC] = int(synthetic)
    ip[IP_OBS_LEVELS] = p.obs_levels
    ip[IP_REQUOTE] = REQUOTES.index(p.requote)
    ip[IP_EPISODE_END] = EPISODE_ENDS.index(p.episode_end)
    ip[IP_PENALTY_UNIT] = PENALTY_UNITS.index(p.inventory_penalty_unit)
    ip[IP_PENALTY_QUADRATIC] = int(p.inventory_penalty_quadratic > 0)   # the q^2 term's switch
    ip[IP_PEG] = int(p.peg_quotes)
    ip[IP_REFILL] = int(p.refill_quotes)
    fp = np.zeros(N_FP, np.float64)
    fp[FP_TICK_DOLLARS] = tick / PRICE_SCALE
    fp[FP_MAKER_FEE] = p.maker_fee
    fp[FP_TAKER_FEE] = p.taker_fee
    fp[FP_INV_PENALTY] = p.inventory_penalty
    fp[FP_INV_PENALTY_Q2] = p.inventory_penalty_quadratic
    return ip, fp


# ------------------------------------------------------- synthetic market
#: Rows of the synthetic book state syn_i int32[N_SYN_I(L), B].
SY_ASK0, SY_BID0, SY_SIZES = 0, 1, 2   # best ask / bid ticks; then L ask sizes, then L bid sizes
#: Shares a cancellation leaves on a level behind the best, so every listed level stays occupied.
SYN_KEEP_DEEP = 1


def n_syn_rows(levels: int) -> int:
    return SY_SIZES + 2 * levels


#: int32 synthetic parameter array sp[N_SP_FIXED + L].
(SP_LEVELS, SP_SIZE_UNIT, SP_MAX_UNITS, SP_START_UNITS, SP_INSIDE_RATE, SP_CANCEL_RATE, SP_MARKET_RATE,
 SP_START_PRICE, SP_START_SPREAD, SP_LIMIT_RATE) = range(10)
N_SP_FIXED = SP_LIMIT_RATE


def pack_synth(s: SynthParams) -> np.ndarray:
    sp = np.zeros(N_SP_FIXED + s.levels, np.int32)
    sp[SP_LEVELS] = s.levels
    sp[SP_SIZE_UNIT] = s.size_unit
    sp[SP_MAX_UNITS] = s.max_size_units
    sp[SP_START_UNITS] = s.start_size_units
    sp[SP_INSIDE_RATE] = s.inside_rate
    sp[SP_CANCEL_RATE] = s.cancel_rate
    sp[SP_MARKET_RATE] = s.market_rate
    sp[SP_START_PRICE] = s.start_price_ticks
    sp[SP_START_SPREAD] = s.start_spread_ticks
    sp[SP_LIMIT_RATE:] = s.level_rates()
    return sp


BOOK_COLS = BOOK_COLS_PER_LEVEL
