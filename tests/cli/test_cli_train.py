"""``alpharl train`` through CliRunner: config layering, run directory, dashboard lines, Ctrl-C.

The trainer is a stand-in with ``alpharl.run.train``'s signature (``fake_trainer``)."""
from typer.testing import CliRunner

from alpharl.cli.app import app
from alpharl.config import TrainConfig
from cli_helpers import make_run

runner = CliRunner()


def test_train_passes_options_and_prints_plain_lines(fake_trainer, tmp_path):
    run = tmp_path / "run"
    r = runner.invoke(app, ["train", "--steps", "20", "--b", "2", "--run-dir", str(run), "--diag-every", "5",
                            "--backend", "numpy", "--no-graph", "--seed", "7"])
    assert r.exit_code == 0, r.output
    (cfg, resume), = fake_trainer.calls
    assert (cfg.steps, cfg.b, cfg.diag_every, cfg.backend, cfg.graph, cfg.seed) == (20, 2, 5, "numpy", False, 7)
    assert cfg.run_dir == str(run) and resume is None
    # options not given keep TrainConfig's defaults
    d = TrainConfig()
    assert (cfg.minibatch, cfg.replay_capacity, cfg.checkpoint_every, cfg.synthetic) == \
        (d.minibatch, d.replay_capacity, d.checkpoint_every, d.synthetic)
    assert "alpharl train: 20 steps, B=2, backend numpy" in r.output
    assert "step 5/20" in r.output and "steps/s" in r.output and "ETA" in r.output
    assert "alpharl train: done:" in r.output


def test_config_file_then_command_line(fake_trainer, tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('steps = 7\nb = 3\nseed = 5\nminibatch = 32\n[sim]\nlot_size = 50\n')
    r = runner.invoke(app, ["train", "--config", str(toml), "--b", "4", "--run-dir", str(tmp_path / "r"), "--quiet"])
    assert r.exit_code == 0, r.output
    cfg, _ = fake_trainer.calls[0]
    assert (cfg.steps, cfg.b, cfg.seed, cfg.minibatch, cfg.sim.lot_size) == (7, 4, 5, 32, 50)


def test_synthetic_and_data_flags(fake_trainer, tmp_path):
    r = runner.invoke(app, ["train", "--steps", "3", "--synthetic", "--run-dir", str(tmp_path / "s")])
    assert r.exit_code == 0, r.output
    assert fake_trainer.calls[-1][0].synthetic is True
    from alpharl.lobster.sample import embedded_sample_path

    r = runner.invoke(app, ["train", "--steps", "3", "--data", str(embedded_sample_path()), "--run-dir", str(tmp_path / "d")])
    assert r.exit_code == 0, r.output
    assert fake_trainer.calls[-1][0].data == str(embedded_sample_path())


def test_resume_reads_the_runs_config(fake_trainer, tmp_path, rng):
    run = make_run(tmp_path / "old", rows=3, rng=rng)
    r = runner.invoke(app, ["train", "--resume", str(run), "--steps", "40"])
    assert r.exit_code == 0, r.output
    cfg, resume = fake_trainer.calls[0]
    assert resume == str(run) and cfg.run_dir == str(run)
    assert (cfg.b, cfg.steps, cfg.backend) == (2, 40, "numpy")   # b, backend from the run's config.toml


def test_ctrl_c_stops_with_130_and_says_where(fake_trainer, tmp_path):
    fake_trainer.raise_exc = KeyboardInterrupt()
    r = runner.invoke(app, ["train", "--steps", "3", "--run-dir", str(tmp_path / "r")])
    assert r.exit_code == 130, r.output
    assert "interrupted" in r.output and "--resume" in r.output and "Traceback" not in r.output


def test_interrupted_summary_exits_130(fake_trainer, tmp_path, monkeypatch):
    real = fake_trainer.train

    def interrupted(config, *, resume, dashboard):
        return {**real(config, resume=resume, dashboard=dashboard), "interrupted": True}

    import sys

    monkeypatch.setattr(sys.modules["alpharl.run"], "train", interrupted)
    r = runner.invoke(app, ["train", "--steps", "3", "--run-dir", str(tmp_path / "r")])
    assert r.exit_code == 130 and f"--resume {tmp_path / 'r'}" in r.output


def test_obs_levels_option_sets_the_sim_section(fake_trainer, tmp_path):
    """--obs-levels is [sim] obs_levels; on the command line it wins over the file's, the other
    [sim] keys of the file stay."""
    toml = tmp_path / "run.toml"
    toml.write_text("[sim]\nobs_levels = 3\nlot_size = 50\n")
    r = runner.invoke(app, ["train", "--config", str(toml), "--steps", "2", "--run-dir", str(tmp_path / "a"), "-q"])
    assert r.exit_code == 0, r.output
    assert (fake_trainer.calls[-1][0].sim.obs_levels, fake_trainer.calls[-1][0].sim.lot_size) == (3, 50)
    r = runner.invoke(app, ["train", "--config", str(toml), "--obs-levels", "12", "--steps", "2",
                            "--run-dir", str(tmp_path / "b"), "-q"])
    assert r.exit_code == 0, r.output
    assert (fake_trainer.calls[-1][0].sim.obs_levels, fake_trainer.calls[-1][0].sim.lot_size) == (12, 50)
    r = runner.invoke(app, ["train", "--steps", "2", "--run-dir", str(tmp_path / "c"), "-q"])
    assert fake_trainer.calls[-1][0].sim.obs_levels == TrainConfig().sim.obs_levels == 10
