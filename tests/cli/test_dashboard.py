"""The Dashboard: live Rich panels on a terminal, plain throttled lines otherwise, quiet mode."""
import io
import re

import numpy as np
from rich.console import Console

from alpharl import isv as S
from alpharl.config import TrainConfig
from alpharl.dashboard import Dashboard, format_duration

ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


def _isv(rng):
    v = S.bootstrap_vector()
    v[S.RL_LOSS_Q] = rng.uniform(2.0, 3.0)
    v[S.RL_K_LOOP_MULT] = 2 * S.K_FIXED_POINT
    return v


def _drive(dash, rng, steps=(10, 20, 30, 40)):
    with dash:
        dash.start(TrainConfig(steps=40, b=4, backend="numpy"), "runs/test")
        for st in steps:
            dash.update(st, _isv(rng), {"losses/q": 2.5, "pnl/mean": float(rng.normal()), "trades/count": 3.0},
                        12.5, 50.0)
        dash.log("checkpoint written at step 40")
        dash.finish({"steps": 40, "wall_s": 1.5, "final": {"loss_q": 2.4}})


def test_live_panels_on_a_terminal(rng):
    buf = io.StringIO()
    dash = Dashboard(40, 4, console=Console(file=buf, force_terminal=True, width=200, height=100))
    assert dash.live_mode
    _drive(dash, rng)
    out = ANSI.sub("", buf.getvalue())
    for text in ("alpharl train", "step 40/40 (100.0%)", "12.5 steps/s", "50 env-steps/s", "ETA", "learning rates",
                 "controllers", "V blend", "signals", "replay", "losses", "reward / PnL / trades", "pnl/mean",
                 "trends", "loss_q (ln21 = 3.04)", "obs", "guard", "checkpoint written at step 40", "run summary",
                 "final/loss_q"):
        assert text in out, text
    assert re.search(r"K\s+2", out)                       # K-loop multiplier read as K
    assert any(g in out for g in "▁▂▃▄▅▆▇█")             # sparklines drawn


def test_plain_lines_when_not_a_terminal(rng):
    buf = io.StringIO()
    dash = Dashboard(40, 4, console=Console(file=buf, width=300), min_interval_s=0.0)
    assert not dash.live_mode
    _drive(dash, rng)
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("alpharl train: 40 steps, B=4, backend numpy")
    progress = [ln for ln in lines if ln.startswith("step ")]
    assert [ln.split()[1] for ln in progress] == ["10/40", "20/40", "30/40", "40/40"]
    assert "loss_q" in progress[0] and "pnl/mean" in progress[0] and "steps/s" in progress[0]
    assert "checkpoint written at step 40" in lines
    assert lines[-1].startswith("alpharl train: done: steps 40")
    assert "\x1b[" not in buf.getvalue()


def test_quiet_throttles_but_keeps_first_and_last(rng):
    buf = io.StringIO()
    dash = Dashboard(40, 4, console=Console(file=buf, force_terminal=True, width=300), quiet=True)
    assert not dash.live_mode
    _drive(dash, rng)
    progress = [ln for ln in ANSI.sub("", buf.getvalue()).splitlines() if ln.startswith("step ")]
    assert [ln.split()[1] for ln in progress] == ["10/40", "40/40"]


def test_eta_and_durations():
    assert format_duration(5) == "5s" and format_duration(65) == "1m05s" and format_duration(3725) == "1h02m05s"
    assert format_duration(float("nan")) == "-"
    dash = Dashboard(100, 1, console=Console(file=io.StringIO()))
    dash.update(50, S.bootstrap_vector(), {}, 10.0, 10.0)
    assert np.isclose(dash.eta_s(), 5.0)   # one update: the reported rate
