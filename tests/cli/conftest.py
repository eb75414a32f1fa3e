"""Fixtures of the CLI tests (helpers in cli_helpers.py)."""
import pytest

from alpharl import run
from cli_helpers import FakeTrainer


@pytest.fixture
def fake_trainer(monkeypatch, rng):
    """``alpharl.run.train`` replaced by a FakeTrainer: the CLI's own checks run, the training does not."""
    fake = FakeTrainer(rng)
    monkeypatch.setattr(run, "train", fake.train)
    return fake
