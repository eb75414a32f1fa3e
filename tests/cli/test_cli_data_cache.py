"""``alpharl data cache``: where the LOBSTER cache is and how much it holds; ``--clear`` empties it."""
import json

from typer.testing import CliRunner

from alpharl.cli.app import app
from alpharl.lobster.sample import load_embedded

runner = CliRunner()


def test_data_cache_shows_and_clears(cache_in_tmp):
    load_embedded()
    r = runner.invoke(app, ["data", "cache", "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.stdout)
    assert info["dir"] == str(cache_in_tmp) and info["entries"] == 1 and info["bytes"] > 0
    r = runner.invoke(app, ["data", "cache"])
    assert r.exit_code == 0 and str(cache_in_tmp) in r.stdout and "1 entries" in r.stdout
    r = runner.invoke(app, ["data", "cache", "--clear"])
    assert r.exit_code == 0 and "freed" in r.stdout
    assert json.loads(runner.invoke(app, ["data", "cache", "--json"]).stdout)["entries"] == 0
