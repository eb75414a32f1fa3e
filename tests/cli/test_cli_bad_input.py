"""Bad options, config files and run directories: one line ``alpharl: error: ...`` naming what is wrong,
exit 2; a run directory left without a checkpoint is restartable; JSON output is strict."""
import json
import math

import pytest
from typer.testing import CliRunner

from alpharl import jsontext, rundir
from alpharl.cli.app import app
from alpharl.diag import DiagnosticsWriter
from alpharl.rundir import CHECKPOINT_FILE, CONFIG_FILE, DIAG_FILE
from cli_helpers import METRICS, assert_one_line_error, make_run

runner = CliRunner()


def train(*args):
    return runner.invoke(app, ["train", *map(str, args)])


# ----------------------------------------------------------------- item 8: types
@pytest.mark.parametrize("args, names", [
    (["train", "--steps", "abc"], ["alpharl train", "--steps"]),  # each Click words the type its own way
    (["train", "--reward-scale", "lots"], ["--reward-scale"]),
    (["train", "--no-such-option"], ["--no-such-option"]),
    (["eval", "--start", "x"], ["--start"]),
    (["diag"], ["alpharl diag", "run"]),
])
def test_usage_errors_are_one_line(fake_trainer, args, names):
    r = runner.invoke(app, args)
    assert_one_line_error(r, *names)
    assert "╭" not in r.output and "Usage:" not in r.output


def test_wrongly_typed_value_in_a_config_file(fake_trainer, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('steps = "many"\n')
    assert_one_line_error(train("--config", cfg), "c.toml", "steps", "many", "integer")
    cfg.write_text('[sim]\ntaker_fee = "cheap"\n')
    assert_one_line_error(train("--config", cfg), "taker_fee", "cheap")
    cfg.write_text('sim = 3\n')
    assert_one_line_error(train("--config", cfg), "sim", "section")
    assert not fake_trainer.calls


# ----------------------------------------------------------------- item 7: floats
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e300", "0", "-1"])
def test_reward_scale_finite_and_in_range(fake_trainer, value):
    assert_one_line_error(train("--reward-scale", value), "--reward-scale")
    assert not fake_trainer.calls


@pytest.mark.parametrize("args, name", [(("--rollout", 0), "--rollout"), (("--rollout", 100000), "--rollout"),
                                        (("--rollout", "x"), "--rollout"), (("--gae-lambda", 1.5), "--gae-lambda"),
                                        (("--gae-lambda", "nan"), "--gae-lambda"), (("--gae-lambda", -1), "--gae-lambda"),
                                        (("--rollout-rows", -1), "--rollout-rows"),
                                        (("--rollout", 16, "--rollout-rows", 8), "--rollout-rows")])
def test_rollout_and_gae_lambda_checked(fake_trainer, args, name):
    assert_one_line_error(train(*args), name)
    assert not fake_trainer.calls


def test_rollout_and_gae_lambda_reach_the_config(fake_trainer, tmp_path):
    r = train("--rollout", 16, "--gae-lambda", 0.9, "--rollout-rows", 4096, "--steps", 10, "--run-dir",
              tmp_path / "r", "--quiet")
    assert r.exit_code == 0, r.output
    config, _ = fake_trainer.calls[-1]
    assert (config.rollout, config.gae_lambda, config.rollout_rows) == (16, 0.9, 4096)


@pytest.mark.parametrize("line", ["reward_scale = inf", "[sim]\ntaker_fee = nan", "[sim]\nmaker_fee = inf",
                                  "[sim]\ntaker_fee = 1e300"])
def test_float_settings_of_a_config_file_finite_and_in_range(fake_trainer, tmp_path, line):
    cfg = tmp_path / "c.toml"
    cfg.write_text(line + "\n")
    key = line.split("\n")[-1].split(" =")[0]
    assert_one_line_error(train("--config", cfg), key.replace("_", "-") if "[" not in line else key)
    assert not fake_trainer.calls


@pytest.mark.parametrize("line, names", [
    ('[sim]\nfill_rule = "sometimes"', ["c.toml", "fill_rule", "sometimes"]),
    ('[sim]\noff_tick_trades = "up"', ["c.toml", "off_tick_trades", "up"]),
    ('[sim]\npartial_fills = true\nfill_rule = "whole_order"', ["c.toml", "partial_fills", "fill_rule", "disagree"]),
    ('[sim]\npartial_fills = "yes"', ["c.toml", "partial_fills", "yes"]),
    ('synthetic = true\n[sim]\nqueue_model = "l3_fifo"', ["queue_model", "l3_fifo", "--synthetic"]),
    ('synthetic = true\n[sim]\nfeed_latency_ns = 1000', ["feed_latency_ns", "--synthetic"]),
    ('synthetic = true\n[sim]\nresponse_latency_ns = 1000', ["response_latency_ns", "--synthetic"]),
    ('[sim]\nresponse_latency_ns = -3', ["c.toml", "response_latency_ns", "-3"]),
    ('[sim]\nepisode_steps = 0\nepisode_end = "round_trip"', ["c.toml", "episode_steps", "horizon"]),  # one pass needs horizon episodes
    ('synthetic = true\n[sim]\nepisode_steps = 0\nepisode_end = "horizon"', ["episode_steps", "--synthetic"]),
    ('[sim]\ninventory_penalty_unit = "ticks"', ["c.toml", "inventory_penalty_unit", "ticks", "sigma"]),
    ('[sim]\ninventory_penalty_unit = 1', ["c.toml", "inventory_penalty_unit"]),
    ('[sim]\ninventory_penalty_quadratic = -0.5', ["c.toml", "inventory_penalty_quadratic", "-0.5"]),
    ('pace_policy = true\nadaptive_anchors = false', ["--pace-policy", "--adaptive-anchors"]),
    ('k_noise_band = true\nadaptive_anchors = false', ["--k-noise-band", "--adaptive-anchors"]),
])
def test_fill_settings_of_a_config_file(fake_trainer, tmp_path, line, names):
    cfg = tmp_path / "c.toml"
    cfg.write_text(line + "\n")
    assert_one_line_error(train("--config", cfg), *names)
    assert not fake_trainer.calls


@pytest.mark.parametrize("args, names", [
    (("--episode-end", "sometimes"), ["episode_end", "sometimes", "horizon"]),
    (("--inventory-penalty", -1), ["inventory_penalty", "-1"]),
    (("--inventory-penalty", "nan"), ["inventory_penalty", "nan"]),
    (("--inventory-penalty", "inf"), ["inventory_penalty", "inf"]),
    (("--inventory-penalty-unit", "dollar"), ["inventory_penalty_unit", "dollar", "tick", "sigma"]),
    (("--inventory-penalty-quadratic", "nan"), ["inventory_penalty_quadratic", "nan"]),
    (("--pace-policy", "--no-adaptive-anchors"), ["--pace-policy", "--adaptive-anchors"]),
    (("--k-noise-band", "--no-adaptive-anchors"), ["--k-noise-band", "--adaptive-anchors"]),
    (("--refill-quotes",), ["refill_quotes"]),
])
def test_episode_options_checked(fake_trainer, args, names):
    assert_one_line_error(train(*args), *names)
    assert not fake_trainer.calls


def test_episode_options_reach_the_config(fake_trainer, tmp_path):
    r = train("--episode-end", "horizon", "--inventory-penalty", 0.25, "--inventory-penalty-unit", "sigma",
              "--inventory-penalty-quadratic", 0.1, "--peg-quotes", "--refill-quotes", "--steps", 10,
              "--run-dir", tmp_path / "r", "--quiet")
    assert r.exit_code == 0, r.output
    config, _ = fake_trainer.calls[-1]
    sim = config.sim
    assert (sim.episode_end, sim.inventory_penalty, sim.inventory_penalty_unit, sim.inventory_penalty_quadratic,
            sim.peg_quotes, sim.refill_quotes) == ("horizon", 0.25, "sigma", 0.1, True, True)
    saved = tmp_path / "config.toml"                 # the run's config.toml records them
    saved.write_text(config.to_toml())
    assert type(config).from_toml(saved).sim == config.sim


def test_fused_update_checked_and_recorded(fake_trainer, tmp_path):
    assert_one_line_error(train("--fused-update", "sometimes"), "--fused-update", "sometimes", "off, on")
    assert not fake_trainer.calls
    r = train("--fused-update", "on", "--steps", 10, "--run-dir", tmp_path / "r", "--quiet")
    assert r.exit_code == 0, r.output
    config, _ = fake_trainer.calls[-1]
    assert config.fused_update == "on"
    saved = tmp_path / "config.toml"
    saved.write_text(config.to_toml())
    assert type(config).from_toml(saved).fused_update == "on"


# ----------------------------------------------------------------- item 9: resume + config
def test_resume_with_a_config_file_of_another_b_is_refused(fake_trainer, tmp_path, rng):
    run = make_run(tmp_path / "run", rows=2, rng=rng)            # b = 2
    other = tmp_path / "other.toml"
    other.write_text("b = 32\nsteps = 100\n")
    assert_one_line_error(train("--resume", run, "--config", other), "other.toml", "b = 32", "b = 2")
    assert_one_line_error(train("--resume", run, "--b", 32), "--b 32", "b = 2")
    assert not fake_trainer.calls


def test_resume_with_a_config_file_may_change_steps(fake_trainer, tmp_path, rng):
    run = make_run(tmp_path / "run", rows=2, rng=rng)
    other = tmp_path / "other.toml"
    other.write_text("b = 2\nsteps = 500\n")                     # the same b: allowed
    r = train("--resume", run, "--config", other)
    assert r.exit_code == 0, r.output
    (cfg, resume), = fake_trainer.calls
    assert cfg.steps == 500 and cfg.b == 2 and resume == str(run)


# ----------------------------------------------------------------- item 5: early kill
def _started_not_checkpointed(run_dir, rng):
    """A run directory as a kill before the first checkpoint leaves it: config, some rows, a temp."""
    run = make_run(run_dir, rows=2, rng=rng)
    (run / CHECKPOINT_FILE).unlink()
    (run / "summary.json").unlink()
    (run / ".checkpoint.npz.k1ll3d_x.tmp").write_bytes(b"half a checkpoint")
    return run


def test_run_dir_killed_before_its_first_checkpoint_is_reused(fake_trainer, tmp_path, rng):
    run = _started_not_checkpointed(tmp_path / "run", rng)
    r = train("--run-dir", run, "--steps", 20, "--diag-every", 10)
    assert r.exit_code == 0, r.output
    assert "before its first checkpoint; starting afresh" in r.stderr
    assert fake_trainer.calls[0][1] is None


def test_resume_before_the_first_checkpoint_starts_again(fake_trainer, tmp_path, rng):
    run = _started_not_checkpointed(tmp_path / "run", rng)
    r = train("--resume", run)
    assert r.exit_code == 0, r.output
    assert "no checkpoint yet" in r.stderr and "step 0" in r.stderr
    assert fake_trainer.calls[0][0].b == 2                    # the recorded config


def test_a_finished_run_is_still_never_overwritten(fake_trainer, tmp_path, rng):
    run = make_run(tmp_path / "run", rows=2, rng=rng)
    (run / CHECKPOINT_FILE).unlink()                           # summary.json alone marks a finished run
    assert_one_line_error(train("--run-dir", run), "--resume")
    assert_one_line_error(train("--resume", run), CHECKPOINT_FILE)


def test_clean_removes_stale_temps_only(tmp_path, rng):
    run = _started_not_checkpointed(tmp_path / "run", rng)
    (run / (CHECKPOINT_FILE + ".tmp")).write_bytes(b"an older version's temp")
    assert sorted(rundir.clean(run)) == [".checkpoint.npz.k1ll3d_x.tmp", "checkpoint.npz.tmp"]
    assert sorted(p.name for p in run.iterdir()) == sorted([CONFIG_FILE, DIAG_FILE])


# ----------------------------------------------------------------- item 7: strict JSON
def test_summary_json_is_strict(tmp_path):
    rundir.write_summary(tmp_path, {"steps_per_s": float("nan"), "losses": {"q": float("inf")}, "step": 3})
    text = (tmp_path / "summary.json").read_text()
    loaded = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert loaded == {"steps_per_s": None, "losses": {"q": None}, "step": 3}


def test_strict_json_maps_numpy_and_refuses_nothing():
    import numpy as np

    out = json.loads(jsontext.dumps({"a": np.float32("nan"), "b": np.arange(2), "c": (1.5, -math.inf)}))
    assert out == {"a": None, "b": [0, 1], "c": [1.5, None]}


def test_diag_json_is_strict(tmp_path):
    import time

    from alpharl import isv as S

    (tmp_path / "run").mkdir()
    w = DiagnosticsWriter(tmp_path / "run", METRICS)
    for step in (10, 20):
        w.write(step, 0.1, time.time(), float("nan"), float("inf"), S.bootstrap_vector(),
                {m: float("nan") for m in METRICS})
    w.close()
    (tmp_path / "run" / CONFIG_FILE).write_text("b = 2\n")
    r = runner.invoke(app, ["diag", str(tmp_path / "run"), "--json"])
    assert r.exit_code == 0, r.output
    json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


def test_numba_launch_size_hints_are_quiet_in_the_cli():
    """The CLI hides numba's low-occupancy hint whichever NumbaPerformanceWarning class raises it
    (numba-cuda's own, which the GPU path uses, and numba's), and no other warning."""
    import warnings

    from numba.core import errors as numba_errors
    from numba.cuda.core import errors as cuda_errors

    from alpharl.cli.app import quiet_numba_warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_numba_warnings()
        hint = "Grid size 16 will likely result in GPU under-utilization due to low occupancy."
        for cls in (cuda_errors.NumbaPerformanceWarning, numba_errors.NumbaPerformanceWarning):
            warnings.warn(cls(hint))
            warnings.warn(cls(f"\x1b[1m{hint}\x1b[0m"))   # as numba highlights it on a terminal
        warnings.warn(cuda_errors.NumbaPerformanceWarning("another hint"))
    assert len(seen) == 1 and "another hint" in str(seen[0].message)   # numba may highlight its text
