"""The loading benchmark runs end to end (tiny: the embedded sample, one repeat, device upload included)."""
import json

from alpharl.lobster import bench


def test_bench_runs_on_the_embedded_sample(capsys):
    bench.main(["--repeat", "1", "--device"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["events"] == 30_000 and result["levels"] == 5
    assert result["cache_hit_s"] >= 0 and result["upload_s"] >= 0
