"""alpharl's reference simulator against hftbacktest 2.4.4, fill for fill, on the five LOBSTER
samples: the whole days when they lie beside the repository, else their 3,000-event cuts
(support.real_sample). The conversion, the strategies and the comparison are
benchmarks/vs_hftbacktest.py; its docstring says how the settings are matched."""
import functools

import numpy as np
import pytest

from alpharl.lobster.load import load_lobster
from alpharl.sim.params import SimParams
from support import AMZN1, AMZN5, GOOG1, GOOG5, GOOG10, LOBSTER_SAMPLES, load_benchmark, real_sample

pytest.importorskip("hftbacktest", reason="hftbacktest (the test extra) is not installed")

SAMPLES = (AMZN1, AMZN5, GOOG1, GOOG5, GOOG10)

V = load_benchmark("vs_hftbacktest")


class Day:
    """One sample: its data, the segments of each strategy, and its feeds (one per set of first rows)."""

    def __init__(self, name: str):
        path, _ = real_sample(name)
        whole = path.parent == LOBSTER_SAMPLES
        self.md = load_lobster(path, cache=whole)
        self.plan = V.PLANS["day" if whole else "cut"]
        self.starts = {k: V.segment_starts(self.md.n_events, every, steps) for k, (every, steps) in self.plan.items()}
        self.feeds = {}

    def check(self, strategy: str, **match) -> "V.Comparison":
        every, steps = self.plan[strategy]
        m = V.Match(strategy=strategy, every=every, **match)
        firsts = V.first_rows(V.Timeline(self.md, m, self.starts[strategy], steps))
        key = tuple(firsts.tolist())
        if key not in self.feeds:
            self.feeds[key] = V.lobster_feed(self.md, firsts)
        return V.cross_check(self.md, m, steps, feed=self.feeds[key], starts=self.starts[strategy])


@functools.lru_cache(maxsize=None)
def day(name: str) -> Day:
    return Day(name)


@pytest.mark.parametrize("name", SAMPLES)
def test_market_round_trips_match_hftbacktest(name):
    """One-share market orders (never deeper than the best level): every fill (row, side, price,
    quantity, taker), its fee and each segment's cash and position equal, to the cent."""
    c = day(name).check("market", lot=1)
    assert c.segments >= 10
    assert c.fills[0] == c.fills[1] == 2 * c.segments
    assert c.equal_segments == c.segments, c.first_differences[:3]
    assert c.max_cash_error < 0.005 and c.max_fee_error < 1e-9


@pytest.mark.parametrize("name", SAMPLES)
def test_market_round_trips_of_100_shares_differ_by_the_walk_only(name):
    """100-share market orders: hftbacktest's no-partial exchange fills a taker order whole at the
    best price, alpharl walks the visible depth. Every segment is equal up to an order larger
    than its best level, and there alpharl's fills of that order start at hftbacktest's price:
    its best level, then deeper ones (or less than the lot, when the depth runs out)."""
    lot = 100
    c = day(name).check("market", lot=lot)
    assert c.equal_segments + len(c.first_differences) == c.segments
    for seg, ours, theirs in c.first_differences:
        row, side = ours[0], ours[1]
        walk = [f for f in c.fills_of("alpharl", seg) if f[0] == row and f[1] == side]
        best = min(f[2] for f in walk) if side > 0 else max(f[2] for f in walk)
        assert theirs == [row, side, best, lot, 0], (seg, walk, theirs)
        assert all(f[4] == 0 for f in walk) and (len(walk) > 1 or walk[0][3] < lot), (seg, walk, theirs)


@pytest.mark.parametrize("name", SAMPLES)
def test_market_round_trips_of_100_shares_match_under_the_whole_order_rule(name):
    c = day(name).check("market", sim=SimParams(fill_rule="whole_order"))
    assert c.equal_segments == c.segments and c.fills[0] == c.fills[1] == 2 * c.segments, c.first_differences[:3]
    assert c.max_cash_error < 0.005


@pytest.mark.parametrize("strategy", ["join", "improve"])
@pytest.mark.parametrize("name", SAMPLES)
def test_resting_orders_match_under_hftbacktests_rules(name, strategy):
    """Join (improve) the touch with whole-order fills, post-only orders, the last size seen at a
    price out of view and off-tick trades on the nearest tick: every fill, fee, post-only
    cancellation and each segment's cash and position equal."""
    c = day(name).check(strategy, sim=V.HBT_RULES)
    assert c.fills[0] == c.fills[1] > c.segments
    assert c.equal_segments == c.segments, c.first_differences[:3]
    assert c.rejected[0] == c.rejected[1] and c.late_fills == 0
    assert c.max_cash_error < 0.005 and c.max_fee_error < 1e-9


@pytest.mark.parametrize("strategy", ["market", "improve"])
@pytest.mark.parametrize("name", SAMPLES)
def test_latency_in_time_matches_hftbacktests_constant_latency(name, strategy):
    """LOBSTER's ns as hftbacktest's clock: entry_latency_ns = its constant entry latency (0.1 ms),
    feed_latency_ns = the offset of its local timestamps (20 ms); decisions at rows that end their
    timestamp. Every fill (keyed by its row's time), post-only cancellation, cash and position equal.
    No feed latency for resting orders on the one-level days: there the agent's late view makes
    it replace orders the market is filling (hftbacktest's cancel travels, alpharl's does not)
    and send orders to prices out of view (hftbacktest queues behind the last size its feed
    ever showed there): the two remaining differences, counted in benchmarks/results."""
    d = day(name)
    feed = 20_000_000 if strategy == "market" or d.md.levels > 1 else 0
    c = d.check(strategy, sim=V.HBT_RULES if strategy == "improve" else SimParams(fill_rule="whole_order"),
                clock="time", entry_ns=100_000, feed_ns=feed)
    assert c.fills[0] == c.fills[1] > c.segments
    assert c.equal_segments == c.segments, c.first_differences[:3]
    assert c.rejected[0] == c.rejected[1] and c.late_fills == 0
    assert c.max_cash_error < 0.005 and c.max_fee_error < 1e-9
