"""Typed configuration of the simulator: ``SimParams`` (the backtests) and
``SynthParams`` (the synthetic order-flow market). Both are frozen; the device
kernels receive them packed into small int32 / float64 arrays by
:mod:`alpharl.sim.layout`."""
from __future__ import annotations

import math
from dataclasses import dataclass

from alpharl.sim.layout import (ENTRY_QUEUES, EPISODE_ENDS, FEE_MODES, FILL_RULES, OFF_TICK_TRADES, PENALTY_UNITS,
                                QUEUE_MODELS, REQUOTES)

#: What a valid value is, where the check alone would not say.
_HINTS = {"episode_steps": " (>= 1, or 0 for one pass with episode_end 'horizon')",
          "episode_end": f" (one of {', '.join(EPISODE_ENDS)})",
          "inventory_penalty": " (a finite number >= 0)",
          "inventory_penalty_unit": f" (one of {', '.join(PENALTY_UNITS)})",
          "inventory_penalty_quadratic": " (a finite number >= 0)"}

#: Keys older configs may hold, and the fill_rule each value stands for.
LEGACY_PARTIAL_FILLS = {True: "partial", False: "all_or_nothing"}


@dataclass(frozen=True)
class SimParams:
    """Fixed parameters of every backtest (gymnax's ``EnvParams``)."""

    events_per_step: int = 16
    """Market events replayed per env step (per backtest, from its own cursor)."""
    episode_steps: int = 512
    """Episode window in env steps; the episode is truncated (and flattened) when it ends, and the
    next one starts at a random row. 0: one pass over the data (replayed data only; needs
    episode_end "horizon"): every episode starts at the data's first row and is truncated at its
    end, after (rows - 1) // events_per_step steps (a backtest of a whole window, without resets;
    the observation's time fields are fractions of that pass)."""
    episode_end: str = "round_trip"
    """What ends an episode besides its window. "round_trip": the position coming back to flat
    (its orders are then cancelled; the episode's one trade is its whole PnL). "horizon": only the
    window; every round trip is still reported as a trade when it closes (out trade_done /
    trade_pnl: the equity change since the last flat), and the orders stay."""
    inventory_penalty: float = 0.0
    """lambda >= 0 of a holding penalty in the learning reward, in ticks per share per step: each
    step's reward is the equity change less lambda x |inventory at the step's end| x tick ($), as
    if the mid moved lambda ticks against every share held. The tick is the instrument's own price
    unit (the observation's too), so one lambda means the same pressure on any price level. Only
    the reward: equity, trade PnL and evaluation's PnL never include it. inventory_penalty_unit
    "sigma" measures lambda in the market's own moves instead."""
    inventory_penalty_unit: str = "tick"
    """Unit of inventory_penalty's lambda. "tick": ticks per share per step, as above. "sigma":
    standard deviations of the mid's move per step, of the backtest's own market: the term is
    lambda x sigma x |inventory| x tick ($), the linear inventory risk of a market maker (risk of
    holding q shares over a step ~ |q| sigma), so one dimensionless lambda puts the same pressure on
    instruments whose mid moves a different number of ticks per step. sigma (ticks per step) is
    the RMS of the mid changes over the steps before this one (the plain mean of their squares over
    the first layout.VOL_HORIZON steps, then an EMA of that horizon), 0 before any step: the
    penalty of a step uses what was known when its action was taken. A step's mid change is the
    market's (the snapshot before its events to the one after, never the feed-delayed view); a
    step without a mid at either end (both sides of the book empty) is not counted. The estimate is
    the backtest's market statistic: carried across its episodes, cleared by the simulator's
    reset() (a fresh start from the seed) and started afresh in a state saved before it existed."""
    inventory_penalty_quadratic: float = 0.0
    """lambda_2 >= 0 of a second holding-penalty term, quadratic in the position: the step's term is
    (lambda + lambda_2 x |q| / lot_size) [x sigma] x |q| x tick ($), in inventory_penalty_unit like
    lambda: at one lot lambda_2 adds to lambda, at n lots n lambda_2 does. The variance of a held
    position's mark over a step is q^2 sigma^2, so a mean-variance trader's running cost grows with q^2
    (the market maker's inventory penalty of Avellaneda-Stoikov and Gueant), while lambda prices the
    first lot: a position parked at max_position costs lambda_2 x max_position / lot_size more per
    share than one lot of quoting inventory. 0: the linear term alone (bit for bit). Only the reward,
    as lambda's term."""
    lot_size: int = 100
    """Shares per order: every order action trades one lot."""
    max_position: int = 500
    """Largest allowed |inventory| in shares. An order whose worst case (inventory plus
    every resting and pending order on that side plus this lot) would exceed it is
    refused (no order is placed, the refusal counter grows); nothing is clipped."""
    latency_events: int = 0
    """Order entry latency in market events: an order placed at cursor c goes live
    when the replay reaches event c + latency (0: it acts on the snapshot seen)."""
    entry_latency_ns: int = 0
    """Order entry latency in time, ns of the data's timestamps (replayed data only; 0: off,
    else latency_events must be 0). An order sent at row c, time t, goes live after the last
    event at time <= t + latency (events at exactly that time come first, as in hftbacktest;
    with no event by then, at once on the snapshot seen)."""
    feed_latency_ns: int = 0
    """Market-data latency in ns (replayed data only; 0: off). At row c, time t, the agent
    sees the book as of t - latency (the last row at time <= t - latency, else the first
    row): its observation, and the best prices its join / improve orders are placed at.
    Its own position and orders are seen with the response latency."""
    response_latency_ns: int = 0
    """Order response latency in ns (replayed data only; 0: off): what the exchange does to our
    orders (fills, going live, cancellations, refusals) reaches the agent this much later. At row c,
    time t, the own-state part of its observation (position, unrealised PnL, each order's flag /
    queue ahead / offset, time in trade) is as of the last step end at a row of time <= t - latency
    (the values observed then; with none in the episode, its start: flat, no orders). The ring
    holds layout.RESP_RING step ends; a latency reaching further back shows the oldest and counts
    it in the state row resp_stale. Rewards, equity and PnL stay true (the accountant's view)."""
    maker_fee: float = -0.0020
    """Fee of a resting (maker) fill, $/share or fraction of value (fee_mode); negative = rebate."""
    taker_fee: float = 0.0030
    """Fee of a market (taker) fill, $/share or fraction of value (fee_mode)."""
    fee_mode: str = "per_share"
    """"per_share": fee = rate x shares; "per_value": fee = rate x shares x price in $."""
    queue_model: str = "probabilistic"
    """"risk_averse": the queue ahead of a resting order shrinks only by trades at its
    price (and when the visible level itself shrinks below it). "probabilistic": in
    addition, a cancellation of size c at its price, where S shares were visible,
    was ahead of us with probability queue_ahead / S (one Bernoulli draw from the
    backtest's PRNG) and then removes c from the queue ahead. "l3_fifo" (replayed LOBSTER data,
    whose messages name their orders): an execution or cancellation at its price moves it
    forward only when the order it names arrived no later than ours went live (an order from
    before the file counts as ahead); the execution of an order that arrived after ours fills
    ours in whole (price-time priority traded ours first)."""
    fill_rule: str = "partial"
    """How an execution at a resting order's price that passes its queue ahead by ``excess``
    shares fills it (a trade through its price, or the opposite best reaching it, fills it
    whole under every rule). "partial": min(excess, remaining) shares. "all_or_nothing": the
    whole remaining order once excess covers it, else nothing (the excess is lost).
    "whole_order": the whole order once excess > 0, and a market order fills whole at the
    best opposite price instead of walking the depth (hftbacktest's NoPartialFillExchange:
    our size is taken as negligible against the book). Older configs' ``partial_fills =
    true / false`` read as "partial" / "all_or_nothing"."""
    post_only: bool = False
    """Join / improve orders are post-only: one that would cross the book when it goes live
    (the book moved during its latency) is cancelled, not filled as a taker, and counted in
    the state counter ``post_cancelled``. False: it fills at once as a taker at the best
    opposite price."""
    entry_queue: str = "visible"
    """The queue ahead of a limit order when it goes live. "visible": the visible size at its
    price on that snapshot (0 when the price is not listed). "last_seen": the same, except at
    a price beyond a full visible depth (a level that scrolled out of view during the latency,
    not known to be empty), where it is the size the price showed on the snapshot the order
    was placed on, as hftbacktest keeps the last size its feed gave for a price."""
    off_tick_trades: str = "drop"
    """Executions at a price between two ticks (hidden midpoint orders). "drop": they touch no
    displayed queue. "nearest": they are replayed at the nearest tick as hftbacktest rounds
    them (price / tick in float64, halves away from zero, so a half-tick lands on either
    neighbour as the binary division falls)."""
    force_flatten: bool = True
    """At the end of an episode window, close the position at market (taker) before
    the episode is marked truncated. False: the open position is marked to mid and
    dropped by the reset."""
    fills_log_capacity: int = 0
    """Fill records kept per backtest in the device ring (0: no fills log). The host
    must drain at least this often (in fills) or the oldest records are overwritten."""
    obs_levels: int = 10
    """Book levels in the observation, whatever the data's depth: a deeper book's further
    levels are cut, a shallower one's missing levels padded with the "no level" encoding
    (alpharl.sim.layout). Only the observation: matching and fills use all the data's levels."""
    requote: str = "keep"
    """A join / improve at the price of the side's resting order. "keep": nothing happens, the order
    keeps its queue position. "replace": cancel and replace in the one step: the resting order is
    cancelled and a new one (a new order id) is sent at the same price; it goes live after the entry
    latency at the back of the queue, like any new order. An order at another price is replaced
    under both."""
    peg_quotes: bool = False
    """A join / improve order follows its reference price, as an exchange's primary-peg order does:
    at every step, before the action, a resting (or pending) order placed by a join whose side's
    best price on the snapshot the agent sees has moved, or by an improve whose price one tick
    inside it has (the best itself at a one-tick spread), is replaced there: cancelled and sent
    again with its remaining size, a new order id, the entry latency and the back of the queue. An
    order at its reference price keeps its place; a side quoted once stays at the touch until it
    fills or is cancelled instead of going stale when the market moves away, so a policy that
    quotes one side per step can hold a two-sided quote. Not for order instructions' explicit
    prices; nothing moves while the side of the book is empty. False: a resting order stays at
    its price until the action replaces it."""
    refill_quotes: bool = False
    """With peg_quotes: a pegged side whose order has filled is quoted again at its reference price at
    the next step, before the action, as a new order (the entry latency, the back of the queue, one lot),
    so a side quoted once stays quoted, through its fills, until a cancel or flatten ends its peg (an
    order instruction's explicit price ends it too). A re-quote that would take the worst-case position
    past max_position waits (not counted as refused) and is sent once it fits; nothing is sent while the
    side of the book is empty. This is a market maker's standing two-sided quote: a policy that quotes
    each side once holds both, whatever side it picks afterwards. False: a filled order is gone until an
    action sends another."""

    def __post_init__(self):
        checks = {
            "events_per_step": self.events_per_step >= 1,
            "episode_steps": self.episode_steps >= 1 or (self.episode_steps == 0 and self.episode_end == "horizon"),
            "episode_end": self.episode_end in EPISODE_ENDS,
            "inventory_penalty": math.isfinite(self.inventory_penalty) and self.inventory_penalty >= 0.0,
            "inventory_penalty_unit": self.inventory_penalty_unit in PENALTY_UNITS,
            "inventory_penalty_quadratic": (math.isfinite(self.inventory_penalty_quadratic)
                                            and self.inventory_penalty_quadratic >= 0.0),
            "lot_size": self.lot_size >= 1,
            "max_position": self.max_position >= self.lot_size,
            "latency_events": self.latency_events >= 0,
            "entry_latency_ns": self.entry_latency_ns >= 0 and not (self.entry_latency_ns and self.latency_events),
            "feed_latency_ns": self.feed_latency_ns >= 0,
            "response_latency_ns": self.response_latency_ns >= 0,
            "fee_mode": self.fee_mode in FEE_MODES,
            "queue_model": self.queue_model in QUEUE_MODELS,
            "fill_rule": self.fill_rule in FILL_RULES,
            "entry_queue": self.entry_queue in ENTRY_QUEUES,
            "off_tick_trades": self.off_tick_trades in OFF_TICK_TRADES,
            "fills_log_capacity": self.fills_log_capacity >= 0,
            "obs_levels": self.obs_levels >= 1,
            "requote": self.requote in REQUOTES,
            "refill_quotes": self.peg_quotes or not self.refill_quotes,   # it re-quotes at the peg's price
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"SimParams: invalid {', '.join(f'{k}={getattr(self, k)!r}' + _HINTS.get(k, '') for k in bad)}")

    @property
    def timed(self) -> bool:
        """Whether a latency is given in time (the simulator then needs the data's timestamps)."""
        return self.entry_latency_ns > 0 or self.feed_latency_ns > 0 or self.response_latency_ns > 0

    @property
    def partial_fills(self) -> bool:
        """Older spelling of ``fill_rule == "partial"`` (read only)."""
        return self.fill_rule == "partial"

    @staticmethod
    def upgrade_keys(d: dict) -> dict:
        """A [sim] table of keys with an older config's ``partial_fills`` folded into
        ``fill_rule`` (ValueError when both are given and disagree)."""
        if "partial_fills" not in d:
            return d
        d = dict(d)
        old = d.pop("partial_fills")
        rule = LEGACY_PARTIAL_FILLS.get(old) if isinstance(old, bool) else None
        if rule is None:
            raise ValueError(f"partial_fills = {old!r}: expected true or false")
        if d.setdefault("fill_rule", rule) != rule:
            raise ValueError(f"partial_fills = {str(old).lower()} and fill_rule = {d['fill_rule']!r} disagree")
        return d

    @property
    def window_events(self) -> int:
        """Market events one whole episode window spans."""
        return self.events_per_step * self.episode_steps


@dataclass(frozen=True)
class SynthParams:
    """The synthetic market: a zero-intelligence Poisson order-flow model per
    backtest (Cont, Stoikov & Talreja 2010 style), on an L-level book whose levels
    sit one tick apart from each side's best price.

    Kinds of event and their rates (per side): limit-order arrival at level i
    (``limit_rate[i]``), a limit order improving the best price by one tick when
    the spread is wider than one tick (``inside_rate``), cancellation at level i
    (``cancel_rate`` x the level's size in ``size_unit`` lots, so bigger queues
    thin faster) and a market order (``market_rate``) against level 1. The
    simulator is clocked by events, not time, so only the embedded jump chain is
    drawn: each event's kind has probability rate / total rate. Rates are
    integers so the draw is exact integer arithmetic on GPU and host alike.
    """

    levels: int = 5
    """L, the levels per side of the generated book."""
    tick: int = 100
    """Tick size in price units (1e-4 $)."""
    start_price_ticks: int = 10_000
    """Initial best bid in ticks (the best ask starts one spread above)."""
    start_spread_ticks: int = 2
    """Initial spread in ticks."""
    size_unit: int = 100
    """Order sizes are multiples of this many shares."""
    max_size_units: int = 5
    """Order sizes are uniform in 1..max_size_units units."""
    start_size_units: int = 5
    """Initial size of every level, and of a level exposed at the back when the book shifts, in units."""
    limit_rate: tuple = (12, 8, 6, 4, 3)
    """Arrival rate of limit orders at level i (one entry per level; the last repeats)."""
    inside_rate: int = 6
    """Arrival rate of a limit order one tick inside the spread (when the spread > 1 tick)."""
    cancel_rate: int = 2
    """Cancellation rate per unit of size at a level."""
    market_rate: int = 8
    """Arrival rate of market orders against the best level."""

    def __post_init__(self):
        if self.levels < 1 or self.tick < 1 or self.start_spread_ticks < 1 or self.size_unit < 1:
            raise ValueError("SynthParams: levels, tick, start_spread_ticks and size_unit must be >= 1")
        if self.max_size_units < 1 or self.start_size_units < 1 or not self.limit_rate:
            raise ValueError("SynthParams: size units must be >= 1 and limit_rate non-empty")
        if min(self.limit_rate) < 0 or min(self.inside_rate, self.cancel_rate, self.market_rate) < 0:
            raise ValueError("SynthParams: rates must be >= 0")

    def level_rates(self) -> tuple:
        """limit_rate padded (by repeating its last entry) or cut to ``levels`` entries."""
        r = tuple(int(x) for x in self.limit_rate)
        return (r + (r[-1],) * self.levels)[: self.levels]
