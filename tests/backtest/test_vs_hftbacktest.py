"""alpharl's reference simulator against hftbacktest 2.4.4, fill for fill, on the five LOBSTER
samples: the whole days when they lie beside the repository, else their 3,000-event cuts
(support.real_sample). The conversion, the strategies and the comparison are
benchmarks/vs_hftbacktest.py; its docstring says how the settings are matched."""
import functools
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from alpharl.lobster.load import load_lobster
from alpharl.sim.params import SimParams
from support import AMZN1, AMZN5, GOOG1, GOOG5, GOOG10, LOBSTER_SAMPLES, real_sample

pytest.importorskip("hftbacktest", reason="hftbacktest (the test extra) is not installed")

MODULE = Path(__file__).parents[2] / "benchmarks" / "vs_hftbacktest.py"
SAMPLES = (AMZN1, AMZN5, GOOG1, GOOG5, GOOG10)


def _load_module():
    spec = importlib.util.spec_from_file_location("vs_hftbacktest", MODULE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["vs_hftbacktest"] = mod
    spec.loader.exec_module(mod)
    return mod


V = _load_module()


class Day:
    """One sample: its data, the segments of each strategy and one feed holding all their starts."""

    def __init__(self, name: str):
        path, _ = real_sample(name)
        whole = path.parent == LOBSTER_SAMPLES
        self.md = load_lobster(path, cache=whole)
        self.plan = V.PLANS["day" if whole else "cut"]
        self.starts = {k: V.segment_starts(self.md.n_events, every, steps) for k, (every, steps) in self.plan.items()}
        self.feed = V.lobster_feed(self.md, np.unique(np.concatenate(list(self.starts.values()))))

    def check(self, strategy: str, **match) -> "V.Comparison":
        every, steps = self.plan[strategy]
        m = V.Match(strategy=strategy, every=every, **match)
        return V.cross_check(self.md, m, steps, feed=self.feed, starts=self.starts[strategy])


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
    than its best level, and there alpharl's first fill is that level: same row, side and price,
    fewer shares."""
    lot = 100
    c = day(name).check("market", lot=lot)
    assert c.equal_segments + len(c.first_differences) == c.segments
    for seg, ours, theirs in c.first_differences:
        row, side, price, qty, maker = ours
        assert theirs == [row, side, price, lot, 0], (seg, ours, theirs)
        assert maker == 0 and 0 < qty < lot, (seg, ours, theirs)


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
