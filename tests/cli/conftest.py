"""Fixtures of the CLI tests (helpers in cli_helpers.py)."""
import sys
import types

import pytest

from cli_helpers import FakeTrainer


@pytest.fixture
def fake_trainer(monkeypatch, rng):
    fake = FakeTrainer(rng)
    module = types.ModuleType("alpharl.run")
    module.train = fake.train
    from alpharl.run import RESUME_OVERRIDABLE

    module.RESUME_OVERRIDABLE = RESUME_OVERRIDABLE
    monkeypatch.setitem(sys.modules, "alpharl.run", module)
    import alpharl

    monkeypatch.setattr(alpharl, "run", module, raising=False)
    return fake


