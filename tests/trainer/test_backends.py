"""Both backends implement the trainer's declared interface (alpharl.backends.base.Backend): every
operation the Protocol names, with the Protocol's parameters, and every array it declares."""
import inspect

import pytest

from alpharl import target
from alpharl.backends.base import Backend
from alpharl.backends.device import DeviceBackend
from alpharl.backends.numpy import NumpyBackend
from alpharl.config import TrainConfig
from alpharl.trainer import IntegratedTrainer

OPERATIONS = [name for name, v in vars(Backend).items() if inspect.isfunction(v) and not name.startswith("_")]


@pytest.mark.parametrize("cls", [DeviceBackend, NumpyBackend])
def test_every_operation_has_the_protocols_parameters(cls):
    assert len(OPERATIONS) > 20
    for name in OPERATIONS:
        want = list(inspect.signature(getattr(Backend, name)).parameters)
        assert list(inspect.signature(getattr(cls, name)).parameters) == want, name


@pytest.mark.parametrize("backend", ["numpy", "device"])
def test_a_built_backend_is_a_backend(backend):
    name = backend if backend == "numpy" else ("sim" if target.on_simulator() else "cuda")
    cfg = TrainConfig(b=2, backend=name, features=True, minibatch=2, replay_capacity=8, seed=1)
    ops = IntegratedTrainer(cfg, hidden=8).ops
    assert isinstance(ops, Backend)
    missing = [a for a in Backend.__annotations__ if not hasattr(ops, a)]
    assert not missing, missing
