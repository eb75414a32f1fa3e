"""eval and bench tables at 80 columns: every number shown is whole (columns give way instead)."""
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from alpharl.bench import TABLE_COLUMNS, format_table
from alpharl.cli.eval import EVAL_COLUMNS, eval_table
from alpharl.report import fmt


def render(table, width):
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(table)
    return console.export_text()


def _eval_out():
    r = {"pnl": -10843.27, "pnl_per_backtest": -677.7044, "sharpe": -1.0843e4, "sharpe_per_step": -0.0012345,
         "max_drawdown": -12345.678, "trades": 123456, "win_rate": 0.4567, "avg_trade": -0.08783,
         "action_share": {"hold": 0.25, "improve_ask": 0.5, "improve_bid": 0.25}}
    return {"run": "runs/20261130-120000-s0", "window": {"first_row": 300000, "stop_row": 400000, "seconds": 5400.0},
            "b": 16, "steps": 4096, "seed": 0, "fills": None,
            "policies": {name: dict(r) for name in ("sampled", "greedy", "flat", "random", "periodic")}}


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_eval_table_never_cuts_a_number(width):
    out = _eval_out()
    text = render(eval_table(out, width), width)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= width
    kept = [c for c in EVAL_COLUMNS if c.split()[0] in text]
    assert "PnL" in text and "Sharpe" in text
    r = out["policies"]["greedy"]
    for number in (fmt(r["pnl"]), fmt(r["sharpe"])):
        assert number in text
    assert ("left out" in text) == (width <= 120), text    # every column takes about 140
    assert len(kept) == len(EVAL_COLUMNS) or width <= 120
    assert ("improve_ask 50%" in text) == (width > 120)     # the most taken action, first to give way


@pytest.mark.parametrize("width", [80, 200])
def test_bench_table_never_cuts_a_number(width):
    report = json.loads((Path(__file__).parents[2] / "benchmarks/results/bench_2026-11-30.json").read_text())
    text = render(format_table(report, width), width)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    for r in report["rows"]:
        for header, key, form in TABLE_COLUMNS[:2]:   # B and graph µs/step are always shown
            if r.get(key) is not None:
                assert form.format(r[key]) in text, (header, text)
