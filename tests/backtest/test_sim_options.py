"""The backtester's order-semantics settings: the fill rule (and older configs' partial_fills),
post-only, off-tick executions in a config (defaults are the simulator's earlier behaviour), and
latencies in time as rows of the replay."""
import dataclasses

import numpy as np
import pytest

from alpharl.config import ConfigError, TrainConfig
from alpharl.lobster.market import MarketData
from alpharl.sim import layout as L
from alpharl.sim.market import SyntheticMarket, latency_rows, order_arrivals, time_ns
from alpharl.sim.params import SimParams


def test_defaults_pack_as_before():
    """Partial fills, no post-only, off-tick executions dropped: the packed codes of the defaults."""
    p = SimParams()
    assert (p.fill_rule, p.post_only, p.off_tick_trades) == ("partial", False, "drop") and p.partial_fills
    ip, _ = L.pack_params(p, 5, 100, 1000, False)
    assert ip[L.IP_FILL_RULE] == L.FILL_PARTIAL and ip[L.IP_POST_ONLY] == 0
    assert p.requote == "keep" and ip[L.IP_REQUOTE] == L.REQUOTE_KEEP


@pytest.mark.parametrize("old, rule", [(True, "partial"), (False, "all_or_nothing")])
def test_older_configs_partial_fills_reads_as_fill_rule(old, rule):
    cfg = TrainConfig.from_dict({"sim": {"partial_fills": old}})
    assert cfg.sim.fill_rule == rule and cfg.sim.partial_fills == old
    assert "partial_fills" not in cfg.to_toml() and f'fill_rule = "{rule}"' in cfg.to_toml()
    # both spellings agreeing is fine
    assert TrainConfig.from_dict({"sim": {"partial_fills": old, "fill_rule": rule}}).sim.fill_rule == rule


def test_config_round_trip_of_the_order_settings(tmp_path):
    sim = SimParams(fill_rule="whole_order", post_only=True, off_tick_trades="nearest", requote="replace")
    cfg = dataclasses.replace(TrainConfig(), sim=sim)
    path = tmp_path / "c.toml"
    path.write_text(cfg.to_toml())
    assert TrainConfig.from_toml(path).sim == sim


@pytest.mark.parametrize("sim, names", [({"fill_rule": "half"}, ["fill_rule", "half"]),
                                        ({"off_tick_trades": "up"}, ["off_tick_trades"]),
                                        ({"requote": "cancel"}, ["requote", "cancel"]),
                                        ({"partial_fills": False, "fill_rule": "partial"}, ["disagree"]),
                                        ({"post_only": "yes"}, ["post_only", "true or false"])])
def test_bad_order_settings_name_the_key(sim, names):
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict({"sim": sim}, source="c.toml")
    assert all(n in str(e.value) for n in names) and "\n" not in str(e.value)


# ------------------------------------------------------------------ latency in time
def _timed_market(times):
    """A one-level market (book 1.02 / 1.00) whose events happen at ``times`` (seconds)."""
    n = len(times)
    return MarketData(ticker="T", date="2012-06-21", levels=1, time=np.asarray(times, np.float64),
                      event_type=np.ones(n, np.int8), order_id=np.arange(n), size=np.full(n, 10, np.int32),
                      price=np.full(n, 10_200, np.int64), direction=-np.ones(n, np.int8),
                      book=np.tile(np.array([10_200, 100, 10_000, 300], np.int64), (n, 1)), tick=100, source="t")


def test_latency_rows_follow_the_timestamps():
    md = _timed_market([0.0, 0.5, 0.5, 1.0, 2.0, 2.000000001])
    lat = latency_rows(md, SimParams(entry_latency_ns=500_000_000, feed_latency_ns=1_000_000_000,
                                     response_latency_ns=1_500_000_000))
    # live after the last event at time <= t + 0.5 s (ties included); seen: the last row at <= t - 1 s;
    # own state known as of the last row at <= t - 1.5 s
    assert lat.live_rows.tolist() == [2, 3, 3, 3, 5, 5]
    assert lat.seen_rows.tolist() == [0, 0, 0, 0, 3, 3]
    assert lat.resp_rows.tolist() == [0, 0, 0, 0, 2, 2]
    assert time_ns(md).tolist()[-1] == 2_000_000_001
    off = latency_rows(md, SimParams(latency_events=3))
    assert off.live_rows.size == off.seen_rows.size == 1


@pytest.mark.parametrize("kw", [dict(entry_latency_ns=1, latency_events=1), dict(entry_latency_ns=-1),
                                dict(feed_latency_ns=-5), dict(response_latency_ns=-1)])
def test_bad_latencies_in_time(kw):
    with pytest.raises(ValueError, match="latency"):
        SimParams(**kw)


def test_the_synthetic_market_has_no_clock():
    with pytest.raises(ValueError, match="synthetic"):
        latency_rows(SyntheticMarket(), SimParams(feed_latency_ns=10))
    with pytest.raises(ValueError, match="synthetic"):
        latency_rows(SyntheticMarket(), SimParams(response_latency_ns=10))


def test_order_arrivals_name_the_row_each_order_arrived_at():
    md = _timed_market([0.0, 1.0, 2.0, 3.0, 4.0])
    md = dataclasses.replace(md, event_type=np.array([1, 1, 3, 4, 5], np.int8),
                             order_id=np.array([7, 8, 7, 99, 0], np.int64))
    # order 7 arrived at row 0, 8 at row 1; 99 before the file; a hidden execution names none
    assert order_arrivals(md, SimParams(queue_model="l3_fifo")).tolist() == [0, 1, 0, L.ARRIVED_BEFORE,
                                                                           L.ARRIVED_BEFORE]
    assert order_arrivals(md, SimParams()).size == 1
    with pytest.raises(ValueError, match="synthetic"):
        order_arrivals(SyntheticMarket(), SimParams(queue_model="l3_fifo"))
