"""``alpharl export``: a really trained tiny run to ONNX (run by onnxruntime against alpharl's own
logits) and safetensors (every tensor against the checkpoint), and the bad inputs."""
import errno
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file
from typer.testing import CliRunner

import alpharl
from alpharl import export as X
from alpharl.actions import Action
from alpharl.checkpoint import load_checkpoint
from alpharl.cli.app import app
from alpharl.config import TrainConfig
from alpharl.mirror import MIRROR_ACTION, mirror_obs
from alpharl.nets import NetLayout
from alpharl.reference.learner import pi_logits
from alpharl.rundir import CHECKPOINT_FILE
from alpharl.sim import layout as L
from alpharl.sim.params import SimParams
from cli_helpers import assert_one_line_error, make_run

runner = CliRunner()
TINY = ["--backend", "numpy", "--b", "2", "--minibatch", "4", "--replay-capacity", "64", "--steps", "3"]
#: Largest |ONNX logit - alpharl logit|: both float32, the same products summed in another order.
LOGITS_TOL = 1e-5


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(run directory, checkpoint arrays, meta) of a 3-step numpy-backend run on the embedded sample."""
    run = tmp_path_factory.mktemp("export") / "run"
    with pytest.MonkeyPatch.context() as mp:   # the module's run parses the sample into a temporary cache
        mp.setenv("ALPHARL_CACHE_DIR", str(tmp_path_factory.mktemp("alpharl-cache")))
        r = runner.invoke(app, ["train", *TINY, "--run-dir", str(run), "--quiet"])
    assert r.exit_code == 0, r.output
    arrays, meta = load_checkpoint(run)
    layout = NetLayout(meta["obs_dim"])
    assert meta["obs_dim"] == L.obs_dim(SimParams().obs_levels)   # not the data's depth
    # learned: the weights moved from their seeded initialisation, the target from its copy of them
    assert not np.array_equal(arrays["nets.params"], layout.init_params(meta["config"]["seed"]))
    return run, arrays, meta


def test_onnx_runs_in_onnxruntime_and_gives_alpharls_logits(trained, tmp_path, rng):
    run, arrays, meta = trained
    out = tmp_path / "policy.onnx"
    r = runner.invoke(app, ["export", str(run), "--onnx", str(out)])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == f"wrote {out}"
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (inp,), (outp,) = session.get_inputs(), session.get_outputs()
    obs_dim = meta["obs_dim"]
    assert (inp.name, inp.type, inp.shape[1]) == ("obs", "tensor(float)", obs_dim)
    assert (outp.name, outp.type, outp.shape[1]) == ("logits", "tensor(float)", len(Action))
    assert isinstance(inp.shape[0], str) and isinstance(outp.shape[0], str)   # dynamic batch
    layout = NetLayout(obs_dim)
    for batch in (1, 7, 64):   # one dynamic batch dimension serves every size
        obs = rng.normal(0.0, 2.0, size=(batch, obs_dim)).astype(np.float32)
        got = session.run(["logits"], {"obs": obs})[0]
        want = pi_logits(arrays["nets.params"], layout, obs)
        assert got.shape == (batch, len(Action)) and got.dtype == np.float32
        assert np.abs(got - want).max() <= LOGITS_TOL, np.abs(got - want).max()
        assert np.abs(want).max() > 100 * LOGITS_TOL   # the logits are not all near zero


def test_onnx_metadata_is_the_observation_spec(trained, tmp_path):
    run, _, meta = trained
    out = tmp_path / "policy.onnx"
    assert runner.invoke(app, ["export", str(run), "--onnx", str(out)]).exit_code == 0
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    props = {p.key: p.value for p in model.metadata_props}
    config = meta["config"]
    assert int(props["obs_dim"]) == meta["obs_dim"]
    assert json.loads(props["obs_names"]) == L.obs_names(SimParams().obs_levels)
    assert json.loads(props["action_names"]) == ["HOLD", "MARKET_BUY", "MARKET_SELL", "JOIN_BID", "JOIN_ASK",
                                                 "IMPROVE_BID", "IMPROVE_ASK", "CANCEL", "FLATTEN"]
    assert json.loads(props["sim"]) == {k: config["sim"][k] for k in X.OBS_SIM_KEYS}
    assert props["alpharl_version"] == alpharl.__version__ == model.producer_version
    assert props["market"] == "embedded sample" and int(props["step"]) == meta["step"] == 3
    # the acting path alone: encoder and pi, nothing of V, Q or the perception heads
    assert sorted(i.name for i in model.graph.initializer) == sorted(
        f"{layer}.{part}" for layer, _ in X.ACTING_PATH for part in ("weight", "bias"))


def test_safetensors_holds_every_tensor_of_the_checkpoint(trained, tmp_path):
    run, arrays, meta = trained
    out = tmp_path / "weights.safetensors"
    r = runner.invoke(app, ["export", str(run), "--safetensors", str(out)])
    assert r.exit_code == 0, r.output
    tensors = load_file(str(out))
    layout = NetLayout(meta["obs_dim"])
    online = [n for n in layout.layers]
    target = [n for n in online if n.split(".")[0] in ("enc", "q")]
    want_names = {f"{p}{n}.{part}" for p, names in (("", online), ("target.", target)) for n in names
                  for part in ("weight", "bias")}
    assert set(tensors) == want_names
    for prefix, names, flat in (("", online, arrays["nets.params"]), ("target.", target, arrays["nets.target"])):
        pieces = []
        for name in names:
            lay = layout.layers[name]
            w, b = tensors[f"{prefix}{name}.weight"], tensors[f"{prefix}{name}.bias"]
            assert w.shape == (lay.k_in, lay.n_out) and b.shape == (lay.n_out,) and w.dtype == np.float32
            np.testing.assert_array_equal(w.ravel(), flat[lay.w])
            pieces += [w.ravel(), b]
        np.testing.assert_array_equal(np.concatenate(pieces), flat)   # every element, each once, in order
    with safe_open(str(out), "np") as f:
        md = f.metadata()
    assert int(md["obs_dim"]) == meta["obs_dim"] and int(md["hidden"]) == layout.hidden
    assert md["alpharl_version"] == alpharl.__version__
    assert json.loads(md["obs_names"]) == L.obs_names(SimParams().obs_levels)
    assert json.loads(md["layers"])["pi.out"] == {"offset": layout.layers["pi.out"].offset,
                                                  "k_in": layout.hidden, "n_out": len(Action)}


def test_both_at_once_from_the_checkpoint_file(trained, tmp_path):
    run, _, _ = trained
    a, b = tmp_path / "p.onnx", tmp_path / "w.safetensors"
    r = runner.invoke(app, ["export", str(run / CHECKPOINT_FILE), "--safetensors", str(b), "--onnx", str(a)])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == [f"wrote {a}", f"wrote {b}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.onnx", "w.safetensors"]   # no temporaries left


def test_feature_process_names_and_bad_obs_dim():
    assert X.observation_names(TrainConfig(features=True), 16) == [f"feature{k}" for k in range(16)]
    three = TrainConfig.from_dict({"sim": {"obs_levels": 3}})
    assert X.observation_names(three, L.obs_dim(3)) == L.obs_names(3)
    with pytest.raises(X.ExportError, match="obs_dim=16"):
        X.observation_names(TrainConfig(), 16)


# ------------------------------------------------------------------ bad input
def test_nothing_to_export(trained):
    assert_one_line_error(runner.invoke(app, ["export", str(trained[0])]), "--onnx", "--safetensors")


def test_missing_run_and_missing_checkpoint(tmp_path, rng):
    out = tmp_path / "p.onnx"
    assert_one_line_error(runner.invoke(app, ["export", str(tmp_path / "nope"), "--onnx", str(out)]), "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(runner.invoke(app, ["export", str(empty), "--onnx", str(out)]), "no checkpoint")
    no_nets = make_run(tmp_path / "no_nets", rows=2, rng=rng)   # a checkpoint without networks
    assert_one_line_error(runner.invoke(app, ["export", str(no_nets), "--onnx", str(out)]), "nets.params")
    assert not out.exists()


@pytest.mark.parametrize("missing", ["onnx", "safetensors"])
def test_missing_optional_package_says_how_to_install(trained, tmp_path, monkeypatch, missing):
    monkeypatch.setitem(sys.modules, missing, None)   # `import <missing>` now raises ImportError
    a, b = tmp_path / "p.onnx", tmp_path / "w.safetensors"
    r = runner.invoke(app, ["export", str(trained[0]), "--onnx", str(a), "--safetensors", str(b)])
    assert_one_line_error(r, f"--{missing}", "pip install 'alpharl[export]'")
    assert list(tmp_path.iterdir()) == []   # checked before anything is written


def test_unwritable_outputs(trained, tmp_path, monkeypatch):
    run = str(trained[0])
    r = runner.invoke(app, ["export", run, "--onnx", str(tmp_path / "no_dir" / "p.onnx")])
    assert_one_line_error(r, "--onnx", "no such directory")
    r = runner.invoke(app, ["export", run, "--safetensors", str(tmp_path)])
    assert_one_line_error(r, "--safetensors", "is a directory")

    def disk_full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(X, "atomic_write", disk_full)
    r = runner.invoke(app, ["export", run, "--onnx", str(tmp_path / "p.onnx")])
    assert_one_line_error(r, "--onnx", "No space left on device")


def test_a_mirror_trained_policy_exports_its_mirror_average(tmp_path, rng, monkeypatch):
    """--mirror-policy: the ONNX graph runs the acting path on obs and on its mirror and averages the logits:
    onnxruntime gives alpharl's z = (f(s) + f(M s)[P]) / 2, equivariant; the metadata says so."""
    monkeypatch.setenv("ALPHARL_CACHE_DIR", str(tmp_path / "cache"))
    run = tmp_path / "run"
    r = runner.invoke(app, ["train", *TINY, "--mirror-policy", "--run-dir", str(run), "--quiet"])
    assert r.exit_code == 0, r.output
    arrays, meta = load_checkpoint(run)
    out = tmp_path / "policy.onnx"
    assert runner.invoke(app, ["export", str(run), "--onnx", str(out)]).exit_code == 0
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    layout = NetLayout(meta["obs_dim"])
    levels = SimParams().obs_levels
    obs = rng.normal(0.0, 2.0, size=(7, meta["obs_dim"])).astype(np.float32)
    got = session.run(["logits"], {"obs": obs})[0]
    want = pi_logits(arrays["nets.params"], layout, obs, mirror=True)
    assert np.abs(got - want).max() <= LOGITS_TOL, np.abs(got - want).max()
    plain = pi_logits(arrays["nets.params"], layout, obs)
    assert np.abs(plain - want).max() > 100 * LOGITS_TOL   # the average is not the plain head
    got_m = session.run(["logits"], {"obs": mirror_obs(obs, levels).astype(np.float32)})[0]
    assert np.abs(got_m - got[:, MIRROR_ACTION]).max() <= LOGITS_TOL
    props = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    assert props["policy"].startswith("mirror-averaged")
    spec = json.loads(props["mirror"])
    assert len(spec["source"]) == len(spec["sign"]) == meta["obs_dim"] and spec["mirror_action"] == MIRROR_ACTION.tolist()
