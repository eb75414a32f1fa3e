"""The backtester's order-semantics settings in a config: the fill rule (and older configs'
partial_fills), post-only, off-tick executions; defaults are the simulator's earlier behaviour."""
import dataclasses

import pytest

from alpharl.config import ConfigError, TrainConfig
from alpharl.sim import layout as L
from alpharl.sim.params import SimParams


def test_defaults_pack_as_before():
    """Partial fills, no post-only, off-tick executions dropped: the packed codes of the defaults."""
    p = SimParams()
    assert (p.fill_rule, p.post_only, p.off_tick_trades) == ("partial", False, "drop") and p.partial_fills
    ip, _ = L.pack_params(p, 5, 100, 1000, False)
    assert ip[L.IP_FILL_RULE] == L.FILL_PARTIAL and ip[L.IP_POST_ONLY] == 0


@pytest.mark.parametrize("old, rule", [(True, "partial"), (False, "all_or_nothing")])
def test_older_configs_partial_fills_reads_as_fill_rule(old, rule):
    cfg = TrainConfig.from_dict({"sim": {"partial_fills": old}})
    assert cfg.sim.fill_rule == rule and cfg.sim.partial_fills == old
    assert "partial_fills" not in cfg.to_toml() and f'fill_rule = "{rule}"' in cfg.to_toml()
    # both spellings agreeing is fine
    assert TrainConfig.from_dict({"sim": {"partial_fills": old, "fill_rule": rule}}).sim.fill_rule == rule


def test_config_round_trip_of_the_order_settings(tmp_path):
    sim = SimParams(fill_rule="whole_order", post_only=True, off_tick_trades="nearest")
    cfg = dataclasses.replace(TrainConfig(), sim=sim)
    path = tmp_path / "c.toml"
    path.write_text(cfg.to_toml())
    assert TrainConfig.from_toml(path).sim == sim


@pytest.mark.parametrize("sim, names", [({"fill_rule": "half"}, ["fill_rule", "half"]),
                                        ({"off_tick_trades": "up"}, ["off_tick_trades"]),
                                        ({"partial_fills": False, "fill_rule": "partial"}, ["disagree"]),
                                        ({"post_only": "yes"}, ["post_only", "true or false"])])
def test_bad_order_settings_name_the_key(sim, names):
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict({"sim": sim}, source="c.toml")
    assert all(n in str(e.value) for n in names) and "\n" not in str(e.value)
