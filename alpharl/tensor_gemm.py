"""Tensor-core (TF32) matrix products of the large layers, through cuBLASLt (nvmath-python's bindings).

Why. At large B the update's time is its big products: the encoder's second layer (hidden x hidden)
and the Q advantage stream (hidden x N_ACTIONS N_ATOMS), forward and backward. The numba kernels
(alpharl.cuda_kernels.nets.gemm) run them on the fp32 SIMT pipes (an H200: ~67 TFLOP/s peak);
cuBLASLt's TF32 tensor-core kernels have ~7x that peak, which turns these products from
FMA-bound into memory-bound. The numba kernels stay where they win (small products, where
a library call's fixed cost dominates) and always under the CUDA simulator.

Which products (``TC_LAYERS``), issued by ``nets.Launcher`` when ``wants`` says so:

- forward  Y = act(X W + b): the bias in cuBLASLt's BIAS epilogue; tanh (no cuBLASLt epilogue)
  as one gated elementwise pass after it (``rl_tanh_rows``);
- backward dX = dY W^T (+ old dX), then x (1 - y^2) as one gated pass (``rl_tanh_grad_rows``);
- backward [dW; db] = [X^T dY; 1^T dY]: dW as one product, db as the product dY^T 1 with a
  ones vector (fp32 compute: a plain sum, no TF32 rounding), written after dW in the layer's block.

Row-major through a column-major library. A row-major [R, C] array is the column-major C x R
matrix (its transpose) with leading dimension C. So a row-major C = A B is issued as the
column-major C^T = B^T A^T with the operands swapped, no copy (M rows, K = k_in, N = n_out):

    forward  Y^T [N x M]  = W^T [N x K] . X^T [K x M]            (W^T: ld N, X^T: ld K)
    dX       dX^T [K x M] = T(W^T) [K x N] . dY^T [N x M]        (transa = T)
    dW       dW^T [N x K] = dY^T [N x M] . T(X^T) [M x K]        (transb = T)
    db       db [N x 1]   = dY^T [N x M] . 1 [M x 1]

Precision. COMPUTE_32F_FAST_TF32 rounds both inputs to TF32 (10 explicit mantissa bits, unit
roundoff 2^-11) and accumulates in fp32: each term a_ik b_kj is off by at most ~2^-10 of itself,
and K such errors of random sign add to ~2^-10 sqrt(K) x the RMS term (the tests' bound).

Determinism. Each plan (one product shape on one stream) asks the heuristic once for one
algorithm and keeps it, so a run never switches kernels; split-K partials are reduced only
through the plan's own workspace (no in-place accumulation in the output: REDUCTION_SCHEME_MASK),
and each plan owns its workspace, so branches running side by side never share one. cuBLAS
gives the same bits for the same algorithm on the same GPU model (and SM count).

Graphs. A call is a kernel launch on the caller's stream with device pointers and host-side
scalars (alpha, beta: read when the call is made, i.e. when captured), so it records into the
step's CUDA graph like a numba launch. Nothing is allocated on the way: the workspaces (one per
stream: the products of one stream run one after another) and the ones vector are reserved up
front (``reserve``), and a plan's first call only asks the heuristic (host work), so a shape first
met under capture records like any other.

The gate. cuBLASLt cannot read the K-loop's device-side gate: in a gated-off K iteration its
products still run, on the scratch the last update left. They write only scratch (h, dh1, the
Q advantage output) and the gradient buffer, which that iteration's gated kernels never read
and which every update rewrites before its guard reads it, so results are unchanged; the cost
is the products' time in every captured K iteration, not only the K the controller picks.
"""
from __future__ import annotations

import numpy as np

from alpharl import target
from alpharl.graph import device_pointer as _ptr
from alpharl.graph import stream_handle as _stream_handle
from alpharl.sizes import cdiv

#: --tensor-cores: off = the numba kernels always; on = cuBLASLt for every product of TC_LAYERS;
#: auto = cuBLASLt where TC_MIN_ROWS (measured) says it is faster.
MODES = ("off", "auto", "on")
#: Product kinds.
FORWARD, DX, DW = "forward", "dx", "dw"
#: The layers whose products may run on tensor cores: the large ones.
TC_LAYERS = ("enc.l2", "q.adv")
#: (kind, k_in, n_out) -> the fewest rows M at which cuBLASLt beat the numba kernel on an H200
#: (benchmarks/bench_learn.py --b 4096 65536 --tensor-cores off on: the per-product columns; the
#: smallest row count measured, B = M = 4096, where tensor cores won). µs numba -> cuBLASLt:
#: enc.l2 forward (2B + 2M rows, tanh pass included) 28.7 -> 14.5 and 311 -> 188; enc.l2 dX
#: (B + M rows, tanh' pass included) 16.2 -> 10.6 and 201 -> 104; q.adv forward (2M rows)
#: 28.6 -> 13.0 and 261 -> 122. The [dW; db] products lost at both sizes (q.adv 20.7 -> 29.8 and
#: 120 -> 152; enc.l2 4207 µs at B = 65536: the heuristic's algorithm for a 128 x 128 output over
#: a K of 131072 rows), so they stay on the numba kernels. A shape not here was not measured:
#: auto keeps the numba kernel for it.
TC_MIN_ROWS: dict[tuple[str, int, int], int] = {
    (FORWARD, 128, 128): 16384,
    (DX, 128, 128): 8192,
    (FORWARD, 128, 189): 8192,
}
#: Workspace the heuristic may ask for, per plan (NVIDIA suggests 32 MiB on Hopper; these
#: products are small enough that their split-K partials fit in far less).
WORKSPACE_BYTES = 8 << 20
#: Split-K reductions allowed: through the workspace, in the compute or the output type; never
#: INPLACE (partials accumulated into the output). 0 = no split-K.
_REDUCTION_NONE, _REDUCTION_COMPUTE_TYPE, _REDUCTION_OUTPUT_TYPE = 0, 2, 4
REDUCTION_MASK = _REDUCTION_NONE | _REDUCTION_COMPUTE_TYPE | _REDUCTION_OUTPUT_TYPE
#: cuBLAS enum values (cublas_api.h, library_types.h): fixed by the C API.
CUDA_R_32F = 0
COMPUTE_32F = 68
COMPUTE_32F_FAST_TF32 = 77
OP_N, OP_T = 0, 1
EPILOGUE_DEFAULT, EPILOGUE_BIAS = 1, 4
#: Largest alignment the heuristic is told about (cuBLASLt's default assumption).
MAX_ALIGN = 256


class TensorCoreError(RuntimeError):
    """Tensor cores were asked for and cannot run here, or cuBLASLt refused a product."""


def wants(mode: str, kind: str, layer_name: str, k_in: int, n_out: int, rows: int,
          table: dict | None = None) -> bool:
    """Whether a product runs on tensor cores: never with ``off`` or outside TC_LAYERS; always with
    ``on``; with ``auto`` when the measured table has the shape and rows reach its crossover."""
    if mode not in MODES:
        raise ValueError(f"tensor cores {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "off" or layer_name not in TC_LAYERS:
        return False
    if mode == "on":
        return True
    least = (TC_MIN_ROWS if table is None else table).get((kind, int(k_in), int(n_out)))
    return least is not None and rows >= least


def unavailable() -> str | None:
    """Why cuBLASLt cannot run here (the CUDA simulator, no nvmath-python), or None when it can."""
    if target.on_simulator():
        return "the CUDA simulator runs the numba kernels only"
    try:
        from nvmath.bindings import cublasLt  # noqa: F401
    except Exception as exc:  # ImportError, or a missing CUDA library under it
        return f"nvmath-python is not importable ({type(exc).__name__}: {exc}); install the extra 'tc'"
    return None


def tensor_gemm(mode: str) -> "TensorGemm | None":
    """The product router of ``mode``: None (numba kernels only) for ``off``, for ``auto`` where
    cuBLASLt cannot run, and for any mode under the simulator; ``on`` without nvmath on a GPU raises."""
    if mode not in MODES:
        raise ValueError(f"tensor cores {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "off":
        return None
    why = unavailable()
    if why is not None:
        if mode == "on" and not target.on_simulator():
            raise TensorCoreError(f"--tensor-cores on: {why}")
        return None
    return TensorGemm(mode)


def _align(ptr: int) -> int:
    """Bytes the address is aligned to, at most MAX_ALIGN."""
    return min(MAX_ALIGN, ptr & -ptr) if ptr else MAX_ALIGN


class _Plan:
    """One product shape on one stream: descriptors, one algorithm chosen once, its workspace.

    Column-major D [d_rows x d_cols] = alpha op_a(A) op_b(B) + beta C, C = D (in place)."""

    def __init__(self, handle: int, compute: int, op_a: int, op_b: int, a_shape, b_shape, d_shape,
                 epilogue: int, aligns: tuple[int, int, int], workspace):
        from nvmath.bindings import cublasLt as lt

        self.lt, self.handle = lt, handle
        self.desc = lt.matmul_desc_create(compute, CUDA_R_32F)
        self._set_desc(lt.MatmulDescAttribute.TRANSA, op_a)
        self._set_desc(lt.MatmulDescAttribute.TRANSB, op_b)
        self._set_desc(lt.MatmulDescAttribute.EPILOGUE, epilogue)
        # (rows, cols, ld) of each stored matrix, column-major (ORDER_COL is the default).
        self.a = lt.matrix_layout_create(CUDA_R_32F, *a_shape)
        self.b = lt.matrix_layout_create(CUDA_R_32F, *b_shape)
        self.d = lt.matrix_layout_create(CUDA_R_32F, *d_shape)
        pref = lt.matmul_preference_create()
        try:
            P = lt.MatmulPreferenceAttribute
            for attr, value in ((P.MAX_WORKSPACE_BYTES, WORKSPACE_BYTES), (P.REDUCTION_SCHEME_MASK, REDUCTION_MASK),
                                (P.MIN_ALIGNMENT_A_BYTES, aligns[0]), (P.MIN_ALIGNMENT_B_BYTES, aligns[1]),
                                (P.MIN_ALIGNMENT_C_BYTES, aligns[2]), (P.MIN_ALIGNMENT_D_BYTES, aligns[2])):
                v = np.array([value], dtype=lt.get_matmul_preference_attribute_dtype(attr))
                lt.matmul_preference_set_attribute(pref, attr, v.ctypes.data, v.itemsize)
            self.result = lt.MatmulHeuristicResult(1)
            count = np.zeros(1, np.int32)
            lt.matmul_algo_get_heuristic(handle, self.desc, self.a, self.b, self.d, self.d, pref, 1,
                                         self.result.ptr, count.ctypes.data)
        finally:
            lt.matmul_preference_destroy(pref)
        if count[0] < 1:
            raise TensorCoreError(f"cuBLASLt has no algorithm for A {a_shape} op {op_a}, B {b_shape} op {op_b}, "
                                  f"D {d_shape}, epilogue {epilogue}, alignments {aligns}")
        # The struct's first member is the algorithm: its address is what cublasLtMatmul takes.
        self.algo = self.result.ptr
        self.ws_bytes = int(self.result.workspace_size)
        if self.ws_bytes > workspace.size:
            raise TensorCoreError(f"cuBLASLt's algorithm wants {self.ws_bytes} bytes of workspace, above "
                                  f"WORKSPACE_BYTES = {workspace.size}")
        self.ws_ptr = _ptr(workspace)
        self.alpha = np.ones(1, np.float32)
        self.beta = {False: np.zeros(1, np.float32), True: np.ones(1, np.float32)}

    def _set_desc(self, attr, value) -> None:
        lt = self.lt
        v = np.array([value], dtype=lt.get_matmul_desc_attribute_dtype(attr))
        lt.matmul_desc_set_attribute(self.desc, attr, v.ctypes.data, v.itemsize)

    def run(self, a: int, b: int, d: int, stream: int, accumulate: bool = False, bias: int = 0) -> None:
        if bias:
            self._set_desc(self.lt.MatmulDescAttribute.BIAS_POINTER, bias)
        self.lt.matmul(self.handle, self.desc, self.alpha.ctypes.data, a, self.a, b, self.b,
                       self.beta[accumulate].ctypes.data, d, self.d, d, self.d, self.algo, self.ws_ptr,
                       self.ws_bytes, stream)


class TensorGemm:
    """Routes the large layers' products to cuBLASLt (``wants``) and runs them: one handle, one plan
    per (product, shape, alignments, stream). The caller's ``gate`` reaches only the epilogue passes
    (module docstring, "The gate")."""

    def __init__(self, mode: str, table: dict | None = None):
        from nvmath.bindings import cublasLt as lt

        self.mode = mode
        self.table = TC_MIN_ROWS if table is None else table
        self.handle = lt.create()
        self._plans: dict = {}
        self._workspace: dict = {}
        self._ones = None

    def reserve(self, stream, rows: int = 0) -> None:
        """Allocate, before any capture, ``stream``'s workspace and a ones vector of at least ``rows``
        (the db product's: the most batch rows of a dW product)."""
        from numba import cuda

        h = _stream_handle(stream)
        if h not in self._workspace:
            self._workspace[h] = cuda.device_array(WORKSPACE_BYTES, np.uint8)
        if rows > (0 if self._ones is None else self._ones.size):
            self._ones = cuda.to_device(np.ones(rows, np.float32))

    def wants(self, kind: str, layer, rows: int) -> bool:
        return wants(self.mode, kind, layer.name, layer.k_in, layer.n_out, rows, self.table)

    def _plan(self, key, *args) -> _Plan:
        """The plan of ``key`` (its last element: the stream handle), built on its first call."""
        plan = self._plans.get(key)
        if plan is None:
            ws = self._workspace.get(key[-1])
            if ws is None:
                raise TensorCoreError("tensor-core product on a stream without a workspace: reserve(stream) first")
            plan = self._plans[key] = _Plan(self.handle, *args, ws)
        return plan

    def forward(self, gate, x, rows: int, layer, params, out, act: int, stream) -> None:
        """out[rows, n_out] = act(x[rows, k_in] W + b) (act: gemm.ACT_NONE or ACT_TANH)."""
        from alpharl.cuda_kernels.nets import gemm as G

        m, k, n = int(rows), layer.k_in, layer.n_out
        pa, pb, pd, pbias = _ptr(params[layer.w]), _ptr(x), _ptr(out), _ptr(params[layer.b])
        aligns = (_align(pa), _align(pb), _align(pd))
        h = _stream_handle(stream)
        plan = self._plan((FORWARD, m, k, n, aligns, h), COMPUTE_32F_FAST_TF32, OP_N, OP_N,
                          (n, k, n), (k, m, k), (n, m, n), EPILOGUE_BIAS, aligns)
        plan.run(pa, pb, pd, h, bias=pbias)
        if act == G.ACT_TANH:
            size = m * n
            G.rl_tanh_rows[cdiv(size, G.ELEMWISE_BLOCK), G.ELEMWISE_BLOCK, stream](gate, out, np.int32(size))
        elif act != G.ACT_NONE:
            raise ValueError(f"forward epilogue {act}: tensor cores run ACT_NONE and ACT_TANH")

    def backward_dx(self, gate, dy, rows: int, layer, params, out, accumulate: bool, y_tanh, stream) -> None:
        """out[rows, k_in] (+)= dy[rows, n_out] W^T; then x (1 - y_tanh^2) when y_tanh is given."""
        from alpharl.cuda_kernels.nets import gemm as G

        m, k, n = int(rows), layer.k_in, layer.n_out
        pa, pb, pd = _ptr(params[layer.w]), _ptr(dy), _ptr(out)
        aligns = (_align(pa), _align(pb), _align(pd))
        h = _stream_handle(stream)
        plan = self._plan((DX, m, k, n, aligns, h), COMPUTE_32F_FAST_TF32, OP_T, OP_N,
                          (n, k, n), (n, m, n), (k, m, k), EPILOGUE_DEFAULT, aligns)
        plan.run(pa, pb, pd, h, accumulate=accumulate)
        if y_tanh is not None:
            # (old dX + dY W^T) x (1 - y^2), as the numba kernel's epilogue orders it
            size = m * k
            G.rl_tanh_grad_rows[cdiv(size, G.ELEMWISE_BLOCK), G.ELEMWISE_BLOCK, stream](gate, out, y_tanh, np.int32(size))

    def backward_dw(self, gate, x, dy, rows: int, layer, grads, stream) -> None:
        """grads[layer block] = [x^T dy; 1^T dy] over ``rows``: dW then db (fp32 sum)."""
        m, k, n = int(rows), layer.k_in, layer.n_out
        pdy, px, pw, pbias = _ptr(dy), _ptr(x), _ptr(grads[layer.w]), _ptr(grads[layer.b])
        h = _stream_handle(stream)
        aligns = (_align(pdy), _align(px), _align(pw))
        plan = self._plan((DW, m, k, n, aligns, h), COMPUTE_32F_FAST_TF32, OP_N, OP_T,
                          (n, m, n), (k, m, k), (n, k, n), EPILOGUE_DEFAULT, aligns)
        plan.run(pdy, px, pw, h)
        if self._ones is None or self._ones.size < m:
            raise TensorCoreError(f"dW over {m} rows: reserve(stream, rows >= {m}) first")
        b_aligns = (aligns[0], MAX_ALIGN, _align(pbias))
        plan = self._plan(("db", m, n, b_aligns, h), COMPUTE_32F, OP_N, OP_N,
                          (n, m, n), (m, 1, m), (n, 1, n), EPILOGUE_DEFAULT, b_aligns)
        plan.run(pdy, _ptr(self._ones), pbias, h)

    @property
    def n_plans(self) -> int:
        return len(self._plans)
