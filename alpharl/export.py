"""A trained policy out of alpharl: the acting path as ONNX, every weight as safetensors.

The network (alpharl.nets) keeps all its parameters in one flat float32 vector,
layer after layer, each layer a block [W (k_in x n_out, row-major); b (n_out)]
with y = x W + b. The exports cut that vector into named tensors:

- ONNX (``onnx_model``): the acting path only, logits = pi(tanh(tanh(obs W1 + b1)
  W2 + b2)), the maths of ``alpharl.reference.learner.pi_logits``. Input ``obs``
  float32 [batch, obs_dim], output ``logits`` float32 [batch, N_ACTIONS], batch
  dynamic; one Gemm per layer (Gemm computes A B + C, our x W + b with W as
  stored), a Tanh after each encoder layer. A run trained with --mirror-policy acts
  on z = (f(obs) + f(M obs)[P]) / 2 (alpharl.mirror): the graph then runs the path
  twice, on obs and on its mirror (a Gather of the elements and a Mul by their signs),
  and averages the logits (a Gather of the actions, Add, Mul by 0.5).
- safetensors (``weight_tensors``): every layer of the online network as
  ``<layer>.weight`` [k_in, n_out] and ``<layer>.bias`` [n_out] (``enc.l1``,
  ``enc.l2``, ``q.adv``, ``q.val``, ``pi.out``, ``v.out``, ``bce.out``,
  ``aux.out``), and the target network (encoder + Q) as ``target.<layer>.*``.

Both carry the observation spec in their metadata (string to string): obs_dim,
the name of every observation element, the action names, the run's settings
that shape the observation, the alpharl version and the checkpoint's step.

onnx and safetensors are optional (``pip install 'alpharl[export]'``): they are
imported inside the functions that use them, so the core install never needs
them.
"""
from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import alpharl
from alpharl.actions import Action
from alpharl.atomic import atomic_write
from alpharl.checkpoint import check_obs_version, load_checkpoint
from alpharl.config import TrainConfig
from alpharl.mirror import MIRROR_ACTION, levels_of, mirror_index
from alpharl.nets import NetLayout
from alpharl.sim import layout as L
from alpharl.sizes import HIDDEN, N_ACTIONS

#: The ONNX operator set and IR version written: opset 17 with IR 8 (onnx 1.12, 2022) loads in every
#: onnxruntime since 1.13; the graph needs nothing newer (Gemm and Tanh).
ONNX_OPSET = 17
ONNX_IR_VERSION = 8
ONNX_INPUT, ONNX_OUTPUT = "obs", "logits"
#: The layers of the acting path, in order, and whether a tanh follows each.
ACTING_PATH = (("enc.l1", True), ("enc.l2", True), ("pi.out", False))
#: The target network's tensors are the online names under this prefix.
TARGET_PREFIX = "target."
#: The [sim] settings that shape the observation: ret_* are mid changes over steps of events_per_step
#: events; position = inventory / max_position; upnl is in ticks per lot_size shares; a pending order
#: (latency_events > 0) shows as flag 0.5; time_in_trade and time_left are fractions of episode_steps.
OBS_SIM_KEYS = ("obs_levels", "events_per_step", "episode_steps", "lot_size", "max_position", "latency_events")
INSTALL_HINT = "pip install 'alpharl[export]'"
#: The optional package each output needs.
PACKAGES = {"--onnx": "onnx", "--safetensors": "safetensors"}


class ExportError(ValueError):
    """An export that cannot be done as asked (checkpoint, output path, missing package): one line."""


@dataclass
class Policy:
    """A checkpoint's networks and what its observation looks like."""

    layout: NetLayout
    params: np.ndarray      # float32 [n_params], the online network
    target: np.ndarray      # float32 [n_target], the target network (encoder + Q)
    config: TrainConfig
    step: int
    obs_names: list[str]

    def w(self, layer: str, flat: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(W [k_in, n_out], b [n_out]) of one layer of ``flat`` (default: the online parameters)."""
        lay = self.layout.layers[layer]
        flat = self.params if flat is None else flat
        return flat[lay.w].reshape(lay.k_in, lay.n_out), flat[lay.b]


def observation_names(config: TrainConfig, obs_dim: int) -> list[str]:
    """The name of every observation element of a run (order-book simulator or feature process)."""
    if config.features:
        return [f"feature{k}" for k in range(obs_dim)]
    levels = config.sim.obs_levels
    if L.obs_dim(levels) != obs_dim:
        raise ExportError(f"checkpoint obs_dim={obs_dim} is not the observation of obs_levels={levels} "
                          f"({L.obs_dim(levels)} = {L.OBS_PER_LEVEL} x levels + {L.N_OBS_EXTRA})")
    return L.obs_names(levels)


def load_policy(run: Path | str) -> Policy:
    """The networks of a run directory's checkpoint (or of a checkpoint file)."""
    run = Path(run)
    if not run.exists():
        raise ExportError(f"{run}: no such run directory")
    arrays, meta = load_checkpoint(run)
    if "nets.params" not in arrays or "nets.target" not in arrays:
        raise ExportError(f"{run}: the checkpoint holds no network (no 'nets.params' / 'nets.target')")
    if "obs_dim" not in meta or "config" not in meta:
        raise ExportError(f"{run}: the checkpoint's metadata has no obs_dim or run config")
    # None (no --data, no --run-dir) is how to_dict writes an unset option; TOML, from_dict's usual
    # source, leaves such keys out.
    saved = {k: v for k, v in meta["config"].items() if v is not None}
    config = TrainConfig.from_dict(saved, source=f"{run}: checkpoint config")
    if not config.features:
        check_obs_version(meta, run)   # a network of an older observation layout would export wrong names
    obs_dim = int(meta["obs_dim"])
    layout = NetLayout(obs_dim, int(arrays.get("nets.hidden", HIDDEN)))
    params = np.asarray(arrays["nets.params"], np.float32).ravel()
    target = np.asarray(arrays["nets.target"], np.float32).ravel()
    if (params.size, target.size) != (layout.n_params, layout.n_target):
        raise ExportError(f"{run}: the checkpoint's network has {params.size} + {target.size} parameters; "
                          f"obs_dim={obs_dim} needs {layout.n_params} + {layout.n_target}")
    return Policy(layout, params, target, config, int(meta.get("step", 0)), observation_names(config, obs_dim))


def metadata(policy: Policy) -> dict[str, str]:
    """The observation spec both exports carry (lists and tables as JSON)."""
    c = policy.config
    market = "features" if c.features else "synthetic" if c.synthetic else c.data or "embedded sample"
    meta = {
        "alpharl_version": alpharl.__version__,
        "step": str(policy.step),
        "obs_dim": str(policy.layout.obs_dim),
        "obs_names": json.dumps(policy.obs_names),
        "action_names": json.dumps([a.name for a in Action]),
        "market": market,
    }
    if not c.features:   # the feature process's observation depends on no setting
        meta["sim"] = json.dumps({k: getattr(c.sim, k) for k in OBS_SIM_KEYS})
    if c.synthetic and not c.features:
        meta["tick"] = str(c.synth.tick)   # replayed data: the data's own tick
    if c.mirror_policy:   # the policy is the mirror average of the acting path (module doc)
        src, sign = mirror_index(levels_of(policy.layout.obs_dim))
        meta["policy"] = "mirror-averaged: logits = (f(obs) + f(mirror(obs))[mirror_action]) / 2, f the acting path"
        meta["mirror"] = json.dumps({"source": src.tolist(), "sign": sign.tolist(),
                                     "mirror_action": np.asarray(MIRROR_ACTION).tolist()})
    return meta


# --------------------------------------------------------------------- ONNX
def onnx_model(policy: Policy):
    """The acting path (obs -> pi logits) as an onnx ModelProto, checked by onnx.checker."""
    onnx = require(PACKAGES["--onnx"], "--onnx")
    from onnx import TensorProto, helper, numpy_helper   # optional package (module doc)

    nodes, inits = [], []
    for layer, _ in ACTING_PATH:
        w, b = policy.w(layer)
        inits += [numpy_helper.from_array(w, f"{layer}.weight"), numpy_helper.from_array(b, f"{layer}.bias")]

    def path(x: str, tag: str) -> str:
        """The acting path on x; node and value names carry ``tag`` (one pass of the mirror average)."""
        for layer, tanh in ACTING_PATH:
            y = f"{tag}{layer}.linear" if tanh else f"{tag}{layer}"
            nodes.append(helper.make_node("Gemm", [x, f"{layer}.weight", f"{layer}.bias"], [y],
                                          name=f"{tag}{layer}.gemm"))
            if tanh:
                nodes.append(helper.make_node("Tanh", [y], [f"{tag}{layer}"], name=f"{tag}{layer}.tanh"))
            x = f"{tag}{layer}"
        return x

    f = path(ONNX_INPUT, "")
    if policy.config.mirror_policy:
        src, sign = mirror_index(levels_of(policy.layout.obs_dim))
        inits += [numpy_helper.from_array(np.asarray(src, np.int64), "mirror.source"),
                  numpy_helper.from_array(np.asarray(sign, np.float32)[None, :], "mirror.sign"),
                  numpy_helper.from_array(np.asarray(MIRROR_ACTION, np.int64), "mirror.action"),
                  numpy_helper.from_array(np.array(0.5, np.float32), "mirror.half")]
        nodes += [helper.make_node("Gather", [ONNX_INPUT, "mirror.source"], ["mirror.gathered"], axis=1,
                                   name="mirror.gather_obs"),
                  helper.make_node("Mul", ["mirror.gathered", "mirror.sign"], ["mirror.obs"], name="mirror.sign_obs")]
        f_m = path("mirror.obs", "mirror.")
        nodes += [helper.make_node("Gather", [f_m, "mirror.action"], ["mirror.logits"], axis=1,
                                   name="mirror.gather_actions"),
                  helper.make_node("Add", [f, "mirror.logits"], ["mirror.sum"], name="mirror.add"),
                  helper.make_node("Mul", ["mirror.sum", "mirror.half"], [ONNX_OUTPUT], name="mirror.average")]
    else:
        nodes[-1].output[0] = ONNX_OUTPUT   # the last layer's output is the graph's
    graph = helper.make_graph(
        nodes, "alpharl_policy",
        [helper.make_tensor_value_info(ONNX_INPUT, TensorProto.FLOAT, ["batch", policy.layout.obs_dim])],
        [helper.make_tensor_value_info(ONNX_OUTPUT, TensorProto.FLOAT, ["batch", N_ACTIONS])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)],
                              ir_version=ONNX_IR_VERSION, producer_name="alpharl",
                              producer_version=alpharl.__version__,
                              doc_string="alpharl policy: observation -> logits of the nine actions")
    helper.set_model_props(model, metadata(policy))
    onnx.checker.check_model(model, full_check=True)
    return model


# -------------------------------------------------------------- safetensors
def weight_tensors(policy: Policy) -> dict[str, np.ndarray]:
    """Every layer of the online and target networks by name (module doc), in memory order."""
    out = {}
    for prefix, flat, n in (("", policy.params, policy.layout.n_params),
                            (TARGET_PREFIX, policy.target, policy.layout.n_target)):
        for layer in policy.layout.layers.values():
            if layer.offset < n:   # the target holds the layers of the prefix [0, n_target)
                w, b = policy.w(layer.name, flat)
                out[f"{prefix}{layer.name}.weight"] = np.ascontiguousarray(w)
                out[f"{prefix}{layer.name}.bias"] = np.ascontiguousarray(b)
    return out


def safetensors_metadata(policy: Policy) -> dict[str, str]:
    """``metadata`` plus the network layout: hidden size and each layer's [k_in, n_out] and flat offset."""
    layers = {k: {"offset": v.offset, "k_in": v.k_in, "n_out": v.n_out} for k, v in policy.layout.layers.items()}
    return metadata(policy) | {"hidden": str(policy.layout.hidden), "layers": json.dumps(layers),
                               "layer_maths": "y = x @ weight + bias, weight [in, out]; tanh after enc.l1 and enc.l2",
                               "target": f"{TARGET_PREFIX}*: the target network (encoder + Q)"}


# ------------------------------------------------------------------ writing
def require(module: str, option: str):
    """Import an optional package, or fail in one line saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ExportError(f"{option} needs the {module} package: {INSTALL_HINT}") from None


def check_output(path: Path, option: str) -> None:
    """The output's folder exists and is writable and the path is no folder (before any work)."""
    if path.is_dir():
        raise ExportError(f"{option} {path}: is a directory")
    if not path.parent.is_dir():
        raise ExportError(f"{option} {path}: no such directory {path.parent}")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise ExportError(f"{option} {path}: directory {path.parent} is not writable")


def _write(path: Path, data: bytes, option: str) -> Path:
    try:
        return atomic_write(path, data)
    except OSError as exc:
        raise ExportError(f"{option} {path}: cannot write ({exc.strerror or exc})") from None


def export(run: Path | str, onnx_path: Path | str | None = None,
           safetensors_path: Path | str | None = None) -> list[Path]:
    """Write the ONNX acting path and/or the safetensors weights of a run; the paths written.

    Everything is checked (packages, output paths, checkpoint) before the first file is written."""
    outputs = {opt: Path(p) for opt, p in (("--onnx", onnx_path), ("--safetensors", safetensors_path))
               if p is not None}
    if not outputs:
        raise ExportError("nothing to export: give --onnx FILE, --safetensors FILE or both")
    for opt, path in outputs.items():
        require(PACKAGES[opt], opt)
        check_output(path, opt)
    policy = load_policy(run)
    data = {}
    if "--onnx" in outputs:
        data["--onnx"] = onnx_model(policy).SerializeToString()
    if "--safetensors" in outputs:
        from safetensors.numpy import save   # optional package (module doc)

        data["--safetensors"] = save(weight_tensors(policy), metadata=safetensors_metadata(policy))
    return [_write(outputs[opt], payload, opt) for opt, payload in data.items()]
