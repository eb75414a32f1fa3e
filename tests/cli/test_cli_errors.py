"""Every bad input of ``alpharl train`` / ``alpharl diag``: one line ``alpharl: error: ...``, exit 2, no traceback,
and nothing written before is lost."""
import errno
import zipfile

import numpy as np
from typer.testing import CliRunner

from alpharl.checkpoint import CheckpointError
from alpharl.cli.app import app
from alpharl.diag import DiagnosticsWriter, read_diagnostics
from alpharl.rundir import DIAG_FILE
from cli_helpers import assert_one_line_error, make_run

runner = CliRunner()


def train(*args):
    return runner.invoke(app, ["train", *map(str, args)])


def test_b_zero(fake_trainer, tmp_path):
    assert_one_line_error(train("--b", 0, "--run-dir", tmp_path / "r"), "--b 0")
    assert not fake_trainer.calls


def test_steps_negative(fake_trainer):
    assert_one_line_error(train("--steps", -1), "--steps -1")


def test_bad_backend(fake_trainer):
    assert_one_line_error(train("--backend", "tpu"), "--backend 'tpu'")


def test_diag_every_zero(fake_trainer):
    assert_one_line_error(train("--diag-every", 0), "--diag-every 0")


def test_missing_data_file(fake_trainer, tmp_path):
    missing = tmp_path / "nope.zip"
    assert_one_line_error(train("--data", missing), str(missing))


def test_corrupt_data_file(fake_trainer, tmp_path):
    bad = tmp_path / "AMZN_2012-06-21_34200000_57600000_message_5.zip"
    bad.write_bytes(b"this is not a zip archive")
    r = train("--data", bad, "--run-dir", tmp_path / "r")
    assert_one_line_error(r, bad.name)


def test_data_with_synthetic(fake_trainer, tmp_path):
    assert_one_line_error(train("--synthetic", "--data", tmp_path), "--synthetic")


def test_missing_config_file(fake_trainer, tmp_path):
    assert_one_line_error(train("--config", tmp_path / "none.toml"), "none.toml")


def test_invalid_config_toml(fake_trainer, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("steps = = 3\n")
    assert_one_line_error(train("--config", bad), "bad.toml", "not valid TOML")


def test_unknown_config_option(fake_trainer, tmp_path):
    bad = tmp_path / "typo.toml"
    bad.write_text("stepz = 3\n")
    assert_one_line_error(train("--config", bad), "typo.toml", "stepz")


def test_resume_missing_run_dir(fake_trainer, tmp_path):
    assert_one_line_error(train("--resume", tmp_path / "gone"), "--resume", "gone")


def test_resume_of_a_directory_that_is_not_a_run(fake_trainer, tmp_path):
    (tmp_path / "empty").mkdir()
    assert_one_line_error(train("--resume", tmp_path / "empty"), "config.toml", "not an alpharl run directory")


def test_resume_incompatible_checkpoint(fake_trainer, tmp_path, rng):
    run = make_run(tmp_path / "run", rows=2, rng=rng)
    fake_trainer.raise_exc = CheckpointError(f"{run}/checkpoint.npz: B=2 in the checkpoint, B=4 asked")
    assert_one_line_error(train("--resume", run), "checkpoint.npz", "B=2")


def test_resume_refuses_a_fixed_option(fake_trainer, tmp_path, rng):
    run = make_run(tmp_path / "run", rows=2, rng=rng)
    assert_one_line_error(train("--resume", run, "--b", 4), "--b 4", "keeps its b = 2", "--steps")
    assert not fake_trainer.calls


def test_run_dir_is_a_file(fake_trainer, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    assert_one_line_error(train("--run-dir", f), "--run-dir", "not a directory")


def test_run_dir_holds_a_run_is_not_overwritten(fake_trainer, tmp_path, rng):
    run = make_run(tmp_path / "run", rows=3, rng=rng)
    before = (run / DIAG_FILE).read_bytes()
    assert_one_line_error(train("--run-dir", run), "--resume")
    assert (run / DIAG_FILE).read_bytes() == before


def test_run_dir_not_writable(fake_trainer, tmp_path):
    fake_trainer.raise_exc = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "ro"))
    assert_one_line_error(train("--run-dir", tmp_path / "ro"), "Permission denied", "ro")


def test_disk_full_while_writing_keeps_earlier_rows(fake_trainer, tmp_path, monkeypatch):
    """A writer that hits ENOSPC on its 4th row: one line, exit 2, the 3 rows before it intact."""
    real_append = DiagnosticsWriter._append
    calls = {"n": 0}

    def append(self, data):
        calls["n"] += 1
        if calls["n"] == 4:   # 3 rows went through (the schema is written with the file)
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        real_append(self, data)

    monkeypatch.setattr(DiagnosticsWriter, "_append", append)
    run = tmp_path / "run"
    r = train("--steps", 100, "--diag-every", 10, "--run-dir", run)
    assert_one_line_error(r, "disk full", DIAG_FILE, alone=False)
    assert read_diagnostics(run).num_rows == 3


def test_diag_missing_run(tmp_path):
    assert_one_line_error(runner.invoke(app, ["diag", str(tmp_path / "nope")]), "nope")


def test_diag_dir_without_diagnostics(tmp_path):
    assert_one_line_error(runner.invoke(app, ["diag", str(tmp_path)]), "diagnostics.arrows")


def test_diag_corrupt_diagnostics(tmp_path):
    (tmp_path / DIAG_FILE).write_bytes(b"\x00garbage" * 10)
    assert_one_line_error(runner.invoke(app, ["diag", str(tmp_path)]), DIAG_FILE)


def test_diag_unreadable_diagnostics(tmp_path):
    (tmp_path / DIAG_FILE).mkdir()   # a directory where the file should be: cannot be read
    assert_one_line_error(runner.invoke(app, ["diag", str(tmp_path)]), DIAG_FILE)


def test_diag_unreadable_permission(tmp_path, rng, monkeypatch):
    run = make_run(tmp_path / "run", rows=2, rng=rng)
    import builtins

    real_open = builtins.open

    def no_read(path, *a, **k):
        if str(path).endswith(DIAG_FILE):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", no_read)
    assert_one_line_error(runner.invoke(app, ["diag", str(run)]), "Permission denied")


def test_diag_unknown_slot_pattern(tmp_path, rng):
    run = make_run(tmp_path / "run", rows=2, rng=rng)
    assert_one_line_error(runner.invoke(app, ["diag", str(run), "--slots", "nothing_*"]), "nothing_*")


def test_diag_png_without_matplotlib(tmp_path, rng, monkeypatch):
    import sys

    run = make_run(tmp_path / "run", rows=2, rng=rng)
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # import matplotlib -> ImportError
    r = runner.invoke(app, ["diag", str(run), "--png", str(tmp_path / "x.png")])
    assert_one_line_error(r, "pip install 'alpharl[plot]'")


def test_obs_levels_zero(fake_trainer, tmp_path):
    assert_one_line_error(train("--obs-levels", 0, "--run-dir", tmp_path / "r"), "--obs-levels")
    toml = tmp_path / "bad.toml"
    toml.write_text("[sim]\nobs_levels = 0\n")
    assert_one_line_error(train("--config", toml, "--run-dir", tmp_path / "r"), "bad.toml", "obs_levels=0")
    assert not fake_trainer.calls


def test_resume_keeps_obs_levels(fake_trainer, tmp_path, rng):
    run = make_run(tmp_path / "run", rows=2, rng=rng)
    assert_one_line_error(train("--resume", run, "--obs-levels", 4), "--obs-levels 4", "keeps its sim.obs_levels = 10")
    assert not fake_trainer.calls
