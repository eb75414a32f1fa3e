"""The networks' parameters on the device, their seeded initialisation, Adam
state, the target network, and the host helpers that launch the layer kernels.

Architecture (SPEC §4): a shared encoder obs_dim -> HIDDEN -> HIDDEN with tanh
after both layers, and five heads on its output h: pi (HIDDEN -> N_ACTIONS
logits), value (HIDDEN -> 1, V_scalar), dueling C51 Q (advantage stream HIDDEN
-> N_ACTIONS x N_ATOMS, value stream HIDDEN -> N_ATOMS), BCE (HIDDEN -> 1 logit)
and AUX (HIDDEN -> 1). tanh: smooth (the backward is checked against finite
differences everywhere, no kinks), its derivative 1 - y^2 needs only the stored
output (no pre-activation buffers), and bounded features keep the scale of all
five heads' inputs fixed whatever the scale of the observation.

Memory layout. Every layer is one contiguous block [W (k_in x n_out, row-major);
b (n_out)], so y = x W + b and the backward writes [dW; db] in one go. Each
module owns one flat slice of four device buffers: ``params``, ``grads``,
``adam_m``, ``adam_v``; modules are stored encoder, Q, pi, V, BCE, AUX, so the
target network (encoder + Q) is the prefix ``params[:n_target]`` and one soft
update covers it. Each head's first block is the weight matrix the seeds name:
``grads_of("q")[:24192]`` is the Q advantage stream's grad_w (128 x 189),
pi's 1152 floats (128 x 9), V's 128. The encoder's grad_w is its whole gradient.

Module index order (``MODULES``) is the ISV's per-head slot order: Q, pi, V,
BCE, AUX, encoder (lr, obs grad-norm and nan-skip slots are consecutive in it).

Initialisation (seeded, numpy PCG64): LeCun-uniform W ~ U(+-sqrt(3 / k_in)),
i.e. variance 1 / k_in, which keeps tanh pre-activations at unit scale; output
layers are scaled down so training starts from a near-uniform policy and a
near-uniform C51 distribution (CE ~ ln 21): pi and both Q streams x OUT_GAIN_SMALL,
V, BCE, AUX x OUT_GAIN_SCALAR. Biases start at 0. The target net starts as an
exact copy of the online encoder + Q.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import cuda

from alpharl import isv as S
from alpharl import tensor_gemm as TG
from alpharl.cuda_kernels.nets import adam as KA
from alpharl.cuda_kernels.nets import gemm as G
from alpharl.cuda_kernels.nets import narrow as KN
from alpharl.sizes import HIDDEN, N_ACTIONS, N_ATOMS, cdiv
from alpharl.views import Views

#: Modules in ISV slot order (module index k <-> RL_LR_Q + k, RL_OBS_Q_GRAD_NORM + k, ...).
MODULES = ("q", "pi", "v", "bce", "aux", "enc")
#: Modules in memory order: encoder + Q first = the target network's prefix.
MEMORY_ORDER = ("enc", "q", "pi", "v", "bce", "aux")
#: The layer whose W is each head's grad_w (first in the head's buffer).
GRAD_W_LAYER = {"q": "q.adv", "pi": "pi.out", "v": "v.out", "bce": "bce.out", "aux": "aux.out"}
#: Output-layer gains of the initialisation.
OUT_GAIN_SMALL = 0.01
OUT_GAIN_SCALAR = 0.1
#: dW batch split: at least this many rows per split, and about this many blocks in all
#: (about two waves of 256-thread blocks on an H200's 132 SMs).
DW_SPLIT_MIN_ROWS = 256
DW_TARGET_BLOCKS = 264

# The module table and rl_loss_means rely on the per-head slots being consecutive in MODULES order.
assert S.RL_LR_ENC == S.RL_LR_Q + MODULES.index("enc")
assert S.RL_OBS_ENC_GRAD_NORM == S.RL_OBS_Q_GRAD_NORM + MODULES.index("enc")
assert S.RL_OBS_ENC_REL_UPDATE == S.RL_OBS_Q_REL_UPDATE + MODULES.index("enc")
assert S.RL_NAN_SKIPS_ENC == S.RL_NAN_SKIPS_Q + MODULES.index("enc")
assert S.RL_LOSS_AUX == S.RL_LOSS_Q + MODULES.index("aux")


@dataclass(frozen=True)
class Layer:
    """One dense layer: block [W (k_in x n_out); b (n_out)] at ``offset`` of the flat buffer."""

    name: str
    offset: int
    k_in: int
    n_out: int
    gain: float

    @property
    def size(self) -> int:
        return (self.k_in + 1) * self.n_out

    @property
    def w(self) -> slice:
        return slice(self.offset, self.offset + self.k_in * self.n_out)

    @property
    def b(self) -> slice:
        return slice(self.offset + self.k_in * self.n_out, self.offset + self.size)

    @property
    def block(self) -> slice:
        return slice(self.offset, self.offset + self.size)


class NetLayout:
    """Offsets of every layer and module in the flat buffers (host-only, no device)."""

    def __init__(self, obs_dim: int, hidden: int = HIDDEN):
        self.obs_dim = int(obs_dim)
        self.hidden = int(hidden)
        h = self.hidden
        shapes = {
            "enc": [("l1", self.obs_dim, h, 1.0), ("l2", h, h, 1.0)],
            "q": [("adv", h, N_ACTIONS * N_ATOMS, OUT_GAIN_SMALL), ("val", h, N_ATOMS, OUT_GAIN_SMALL)],
            "pi": [("out", h, N_ACTIONS, OUT_GAIN_SMALL)],
            "v": [("out", h, 1, OUT_GAIN_SCALAR)],
            "bce": [("out", h, 1, OUT_GAIN_SCALAR)],
            "aux": [("out", h, 1, OUT_GAIN_SCALAR)],
        }
        self.layers: dict[str, Layer] = {}
        self.module_slice: dict[str, slice] = {}
        off = 0
        for mod in MEMORY_ORDER:
            start = off
            for name, k_in, n_out, gain in shapes[mod]:
                layer = Layer(f"{mod}.{name}", off, k_in, n_out, gain)
                self.layers[layer.name] = layer
                off += layer.size
            self.module_slice[mod] = slice(start, off)
        self.n_params = off
        self.n_target = self.module_slice["q"].stop  # encoder + Q: the target network's prefix
        #: Size of the seed's grad_w of each module: the W of its first layer (heads),
        #: the whole flat gradient (encoder: the seeds name none).
        self.n_w = {m: self.layers[GRAD_W_LAYER[m]].k_in * self.layers[GRAD_W_LAYER[m]].n_out
                    for m in GRAD_W_LAYER}
        self.n_w["enc"] = self.module_slice["enc"].stop - self.module_slice["enc"].start
        #: ||W||^2 of a LeCun-initialised grad_w (variance 1 / k_in: the sum of its layers' n_out), the
        #: floor of the norm a relative update is taken against (output layers start at x0.01 or x0.1 of it).
        self.w_ref_sq = {m: self.layers[GRAD_W_LAYER[m]].n_out for m in GRAD_W_LAYER}
        self.w_ref_sq["enc"] = sum(n_out for _, _, n_out, _ in shapes["enc"])

    def module_table(self) -> np.ndarray:
        """int32 [N_MODULES * TABLE_COLS]: offset, size, n_w, lr slot, obs slot, nan slot, reference ||W||^2
        per module."""
        t = np.zeros((len(MODULES), KA.TABLE_COLS), np.int32)
        for k, mod in enumerate(MODULES):
            sl = self.module_slice[mod]
            t[k, KA.COL_OFFSET] = sl.start
            t[k, KA.COL_SIZE] = sl.stop - sl.start
            t[k, KA.COL_N_W] = self.n_w[mod]
            t[k, KA.COL_LR_SLOT] = S.RL_LR_Q + k
            t[k, KA.COL_OBS_SLOT] = S.RL_OBS_Q_GRAD_NORM + k
            t[k, KA.COL_NAN_SLOT] = S.RL_NAN_SKIPS_Q + k
            t[k, KA.COL_W_REF_SQ] = self.w_ref_sq[mod]
        return t.reshape(-1)

    def init_params(self, seed: int) -> np.ndarray:
        """Seeded initial parameters (see the module docstring), float32 [n_params]."""
        rng = np.random.default_rng(seed)
        p = np.zeros(self.n_params, np.float32)
        for layer in self.layers.values():  # insertion order = memory order: deterministic
            bound = layer.gain * math.sqrt(3.0 / layer.k_in)
            p[layer.w] = rng.uniform(-bound, bound, layer.k_in * layer.n_out).astype(np.float32)
        return p


class Nets:
    """Device buffers of all parameters, gradients, Adam moments, Adam state and the target net.

    ``params``, ``grads``, ``adam_m``, ``adam_v``: float32 [n_params]; ``target``:
    float32 [n_target] (encoder + Q); ``adam_state``: int32 [N_MODULES, 2] =
    (step t, armed) per module in MODULES order; ``table``: the module table.
    """

    def __init__(self, obs_dim: int, seed: int = 0, hidden: int = HIDDEN):
        self.layout = NetLayout(obs_dim, hidden)
        self.seed = int(seed)
        p0 = self.layout.init_params(self.seed)
        n = self.layout.n_params
        self.params = cuda.to_device(p0)
        self.grads = cuda.to_device(np.zeros(n, np.float32))
        self.adam_m = cuda.to_device(np.zeros(n, np.float32))
        self.adam_v = cuda.to_device(np.zeros(n, np.float32))
        self.target = cuda.to_device(p0[: self.layout.n_target].copy())
        self.adam_state = cuda.to_device(np.zeros(len(MODULES) * KA.STATE_COLS, np.int32))
        self.table = cuda.to_device(self.layout.module_table())

    # ------------------------------------------------------------ views
    def view(self, buf, layer: str, part: str = "block"):
        """A device view of one layer's W, b or whole block in ``buf`` (params, grads, target...)."""
        return buf[getattr(self.layout.layers[layer], part)]

    def grads_of(self, module: str):
        return self.grads[self.layout.module_slice[module]]

    # ------------------------------------------------------- checkpoints
    def state_dict(self) -> dict:
        """Host copies of everything needed to continue bit-identically."""
        return {
            "obs_dim": self.layout.obs_dim, "hidden": self.layout.hidden, "seed": self.seed,
            "params": self.params.copy_to_host(), "adam_m": self.adam_m.copy_to_host(),
            "adam_v": self.adam_v.copy_to_host(), "target": self.target.copy_to_host(),
            "adam_state": self.adam_state.copy_to_host(),
        }

    def load_state_dict(self, state: dict) -> None:
        if (int(state["obs_dim"]), int(state["hidden"])) != (self.layout.obs_dim, self.layout.hidden):
            raise ValueError(f"checkpoint nets are obs_dim={state['obs_dim']} hidden={state['hidden']}, "
                             f"this run has obs_dim={self.layout.obs_dim} hidden={self.layout.hidden}")
        for name in ("params", "adam_m", "adam_v", "target", "adam_state"):
            dst = getattr(self, name)
            src = np.ascontiguousarray(state[name], dtype=dst.dtype)
            if src.shape != dst.shape:
                raise ValueError(f"checkpoint {name} has shape {src.shape}, expected {dst.shape}")
            dst.copy_to_device(src)


# ===================================================== launch helpers (host)
def dw_split(rows: int, k_in: int, n_out: int) -> tuple[int, int, tuple]:
    """(n_splits, rows per split, tile shape) of a dW product over `rows` batch rows.

    Enough splits for about DW_TARGET_BLOCKS blocks of the product's tile shape, each
    split at least DW_SPLIT_MIN_ROWS rows and a whole number of the shape's K slices."""
    shape = G.gemm_shape(k_in, n_out, cdiv(rows, DW_SPLIT_MIN_ROWS))
    tm, tn = G.tile_of(shape[0], shape[1])
    tiles = cdiv(k_in, tm) * cdiv(n_out, tn)
    want = max(1, min(cdiv(rows, DW_SPLIT_MIN_ROWS), cdiv(DW_TARGET_BLOCKS, tiles)))
    k_split = cdiv(cdiv(rows, want), shape[2]) * shape[2]
    return cdiv(rows, k_split), k_split, shape


def dw_partial_size(rows: int, k_in: int, n_out: int) -> int:
    return dw_split(rows, k_in, n_out)[0] * (k_in + 1) * n_out


class Launcher:
    """Launches the layer kernels of one ``Nets`` on one stream (no host sync, graph-capturable).

    ``dummy`` fills the unused bias / y arguments of the GEMM kernels. ``tc``: an
    alpharl.tensor_gemm.TensorGemm that takes the products it ``wants`` (the large layers' on
    tensor cores), or None: the numba kernels run every product.
    """

    def __init__(self, stream=0, tc=None):
        self.stream = stream
        self.tc = tc
        if tc is not None:
            tc.reserve(stream)
        self.dummy = cuda.to_device(np.zeros(1, np.float32))
        self.views = Views()  # the layers' blocks of params / grads, sliced once (alpharl.views)

    def _tc(self, kind: str, layer: Layer, rows: int) -> bool:
        return self.tc is not None and self.tc.wants(kind, layer, rows)

    def forward(self, gate, x, rows: int, layer: Layer, params, out, act: int) -> None:
        """out[rows, n_out] = act(x[rows, k_in] W + b), W, b = layer's block of ``params``."""
        if self._tc(TG.FORWARD, layer, rows):
            self.tc.forward(gate, x, rows, layer, params, out, act, self.stream)
            return
        k, grid, block = G.gemm_launch(rows, layer.n_out)
        k[grid, block, self.stream](
            gate, x, self.views.of(params, layer.w), self.views.of(params, layer.b), self.dummy, out, np.int32(rows),
            np.int32(layer.n_out), np.int32(layer.k_in), np.int32(layer.k_in), np.int32(1), np.int32(layer.n_out),
            np.int32(1), np.int32(layer.k_in), np.int32(1), np.int32(act), np.int32(0), np.int32(0))

    def narrow_gather_w(self, gate, params, offsets, w_narrow) -> None:
        """w_narrow [(hidden + 1), N_COLS] = the narrow layers' [W; b] blocks side by side (one launch)."""
        hidden = int(w_narrow.shape[0]) // KN.N_COLS - 1
        n_w = (hidden + 1) * KN.N_COLS
        KN.rl_narrow_gather_w[cdiv(n_w, KN.NARROW_BLOCK), KN.NARROW_BLOCK, self.stream](
            gate, params, offsets, np.int32(hidden), w_narrow)

    def narrow_forward(self, gate, h, n_rows: int, n_b: int, params, offsets, w_narrow, y_narrow, isv, out,
                       gather: bool = True) -> None:
        """Every narrow layer (alpharl.cuda_kernels.nets.narrow) on h [n_rows, hidden]: three launches
        (two with gather=False: w_narrow already holds ``narrow_gather_w``'s result for these params).

        w_narrow float32 [(hidden + 1) N_COLS] and y_narrow float32 [>= n_rows N_COLS]: scratch; isv: the
        C51 support V_dq is taken on; out: q_val, v_out, pi_logits, bce_out, aux_out, v_dq (the layers'
        buffers, rl_narrow_scatter's order).
        """
        hidden = int(w_narrow.shape[0]) // KN.N_COLS - 1
        if gather:
            self.narrow_gather_w(gate, params, offsets, w_narrow)
        self.forward(gate, h, n_rows, Layer("narrow", 0, hidden, KN.N_COLS, 1.0), w_narrow, y_narrow, G.ACT_NONE)
        KN.rl_narrow_scatter[cdiv(n_rows * KN.N_COLS, KN.NARROW_BLOCK), KN.NARROW_BLOCK, self.stream](
            gate, y_narrow, np.int32(n_rows), np.int32(n_b), isv, *out)

    def backward_dx(self, gate, dy, rows: int, layer: Layer, params, out, accumulate: bool, y_tanh=None) -> None:
        """out[rows, k_in] (+)= dy[rows, n_out] W^T; times (1 - y_tanh^2) when y_tanh is given."""
        if self._tc(TG.DX, layer, rows):
            self.tc.backward_dx(gate, dy, rows, layer, params, out, accumulate, y_tanh, self.stream)
            return
        k, grid, block = G.gemm_launch(rows, layer.k_in)
        act = G.ACT_NONE if y_tanh is None else G.ACT_TANH_GRAD
        k[grid, block, self.stream](
            gate, dy, self.views.of(params, layer.w), self.dummy, self.dummy if y_tanh is None else y_tanh, out,
            np.int32(rows), np.int32(layer.k_in), np.int32(layer.n_out), np.int32(layer.n_out), np.int32(1),
            np.int32(1), np.int32(layer.n_out), np.int32(layer.n_out), np.int32(0), np.int32(act),
            np.int32(1 if accumulate else 0), np.int32(0))

    def backward_dw(self, gate, x, dy, rows: int, layer: Layer, grads, partial) -> None:
        """grads[layer block] = [x^T dy; 1^T dy] over `rows`: one GEMM when ``dw_split`` gives one piece,
        else split over the batch into `partial` and summed in a fixed order (``rl_split_reduce``)."""
        if self._tc(TG.DW, layer, rows):
            self.tc.backward_dw(gate, x, dy, rows, layer, grads, self.stream)
            return
        splits, k_split, shape = dw_split(rows, layer.k_in, layer.n_out)
        k, grid, block = G.gemm_launch(layer.k_in, layer.n_out, splits, shape)
        # One split (up to DW_SPLIT_MIN_ROWS rows): the GEMM writes [dW; db] itself, no reduce launch.
        out = self.views.of(grads, layer.block) if splits == 1 else partial
        k[grid, block, self.stream](
            gate, x, dy, self.dummy, self.dummy, out, np.int32(layer.k_in), np.int32(layer.n_out),
            np.int32(rows), np.int32(1), np.int32(layer.k_in), np.int32(layer.n_out), np.int32(1),
            np.int32(k_split), np.int32(0), np.int32(G.ACT_NONE), np.int32(0), np.int32(1))
        if splits > 1:
            size = layer.size
            grid, block = G.split_reduce_launch(size)
            G.rl_split_reduce[grid, block, self.stream](
                gate, partial, np.int32(splits), np.int32(size), self.views.of(grads, layer.block))
