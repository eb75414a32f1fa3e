"""Fixtures of the CLI tests (helpers in cli_helpers.py)."""
import pytest

from alpharl import run
from cli_helpers import FakeTrainer


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path_factory, monkeypatch):
    """The LOBSTER cache of every CLI test goes to a temporary folder, never the user's."""
    folder = tmp_path_factory.mktemp("alpharl-cache")
    monkeypatch.setenv("ALPHARL_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def fake_trainer(monkeypatch, rng):
    """``alpharl.run.train`` replaced by a FakeTrainer: the CLI's own checks run, the training does not."""
    fake = FakeTrainer(rng)
    monkeypatch.setattr(run, "train", fake.train)
    return fake
