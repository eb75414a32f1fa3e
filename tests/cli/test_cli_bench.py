"""alpharl bench: a one-line error without a GPU; the table formatter on a recorded report."""
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from alpharl import target
from alpharl.cli.app import app


@pytest.mark.skipif(not target.on_simulator(), reason="checks the no-GPU path")
def test_bench_without_gpu_is_one_line_exit_2():
    r = CliRunner().invoke(app, ["bench", "--b", "16"])
    assert r.exit_code == 2
    assert r.output.strip().count("\n") == 0 and "needs a GPU" in r.output and "Traceback" not in r.output


def test_bench_table_renders_a_recorded_report():
    from rich.console import Console

    from alpharl.bench import format_table

    report = json.loads((Path(__file__).parents[2] / "benchmarks/results/bench_2026-11-30.json").read_text())
    console = Console(width=200, record=True)
    console.print(format_table(report))
    text = console.export_text()
    for r in report["rows"]:
        assert f"{r['b']:d}" in text
    assert "meas/floor" in text
