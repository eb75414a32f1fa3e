"""The matrix kernels of the networks: register-tiled SGEMMs in a few tile shapes.

``rl_gemm_<TM>x<TN>`` computes C = epilogue(A @ B) for logical matrices A[M, K]
and B[K, N] read through strides, so the same code serves every layer's

- forward  Y = act(X @ W + b)          A = X (row-major), B = W (row-major);
- backward dX = dY @ W^T (x act'(Y))   A = dY, B = W read transposed;
- backward [dW; db] = [X^T @ dY; 1^T dY], A = X read transposed, B = dY,
  split over the batch (K) dimension into partial products that
  ``rl_split_reduce`` then sums in a fixed order.

Every layer keeps its weight and bias as one contiguous [K_in + 1, N] block
(W row-major, then b), so the backward writes [dW; db] in one go: the extra
"ones row" of C holds the column sums of B, i.e. db = sum over the batch of dY.

Determinism: each output element is accumulated by one thread in a fixed k
order; the batch reduction of dW goes through per-split partials (no float
atomics), so the same inputs always give bit-identical results.

Why this tiling. A block of 16 x 16 threads owns a TM x TN tile of C; each
thread accumulates a (2 PM) x (2 PN) register block. The inner loop is bound by
shared-memory load *instructions*, not bytes: an SM issues about one warp-wide
shared load per clock against four warp-wide FMAs. So each thread reads its
operands as float pairs (one 64-bit shared load = two adjacent rows of A or
columns of B, packed with a bit-exact int<->float move) and a thread's rows
and columns are pairs strided by 32 (reads broadcast or conflict-free). With
PM = PN = 4 that is 8 shared loads per 64 FMAs (1 : 8), which leaves the FMA
pipes the bound instead of the load pipe (1 : 2 for the former 4 x 4 scalar
block, a 12.5 % ceiling). K advances in TK-wide slices, double-buffered: the
next slice's global loads are in flight while the current slice is computed,
and one barrier per slice separates the two stages. A thread's slots of a slice are
fixed by its id, so a global load costs one address add, and inner tiles skip bounds tests.
The epilogue stages C through the then idle operand buffers (in one or two passes): every
accumulator index is a constant there, so the accumulators stay in registers (an epilogue
looping over them would put them in local memory), and the bias / activation / store pass
runs on consecutive float pairs a warp (coalesced).

Shapes. One kernel per (PM, PN, TK) (``GEMM_SHAPES``); ``gemm_shape`` picks
one per product: 128 x 128 tiles for big products (128 x 96 where that pads
N less), 128 x 32 / 128 x 64 for narrow outputs, 64 x 64 / 64 x 32 with a wide
TK (fewer dependent slices) when the product is too small to fill the GPU with
big tiles. B = 1 and B = 65536 run the same code.
"""
import math
import struct

from numba import cuda, float32, float64, uint64
from numba.cuda import libdevice

from alpharl import target
from alpharl.cuda_kernels.registry import kernel
from alpharl.sizes import cdiv

#: Block shape: (BLOCK_X, BLOCK_Y) threads (8 x 8 under the CUDA simulator, whose cost is its thread
#: count: every tile is then a quarter of the GPU's, the same code with other constants).
GPU_BLOCK = 16
BLOCK_X = target.gpu_or_sim("nets.gemm.BLOCK", gpu=GPU_BLOCK, sim=8)
BLOCK_Y = BLOCK_X
GEMM_THREADS = BLOCK_X * BLOCK_Y
#: Padding (in float pairs) of the shared tiles' rows: column-wise stores hit distinct banks.
SMEM_PAD = 1
#: Threads per block of the elementwise kernels of this package.
ELEMWISE_BLOCK = 256
#: Register cap: two 256-thread blocks per SM (at the compiler's own choice of ~130 registers only one
#: fits, and the H200 measured 19.4 -> 21.0 TFLOP/s for the 128 x 128 tile, 11.4 -> 15.5 for 128 x 64).
GEMM_MAX_REGISTERS = 128
#: Tile shapes: (PM, PN, TK) -> a (32 PM) x (32 PN) tile of C, K slices of TK.
GEMM_SHAPES = ((4, 4, 16), (4, 3, 16), (4, 2, 16), (4, 1, 16), (2, 2, 32), (2, 1, 32), (1, 1, 64))

_F64, _F32X2 = struct.Struct('<d'), struct.Struct('<ff')

#: Epilogues: identity, tanh, and "times tanh'(.)" = (1 - Y^2) for a stored tanh output Y.
ACT_NONE = 0
ACT_TANH = 1
ACT_TANH_GRAD = 2

GEMM_SIGNATURE = ("void(int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], "
                  "int32, int32, int32, int32, int32, int32, int32, int32, int32, int32, int32, int32)")


if target.sim_override("nets.gemm.pack2"):
    # The CUDA simulator implements no libdevice function: the same bits move through struct.
    @cuda.jit(device=True)
    def pack2(lo, hi):
        """Two float32 in one float64, bit-exact (lo in the low word)."""
        return _F64.unpack(_F32X2.pack(lo, hi))[0]

    @cuda.jit(device=True)
    def lo_of(d):
        return float32(_F32X2.unpack(_F64.pack(d))[0])

    @cuda.jit(device=True)
    def hi_of(d):
        return float32(_F32X2.unpack(_F64.pack(d))[1])
else:
    @cuda.jit(device=True)
    def pack2(lo, hi):
        """Two float32 in one float64 register, bit-exact (lo in the low word): a register move."""
        return libdevice.hiloint2double(libdevice.float_as_int(hi), libdevice.float_as_int(lo))

    @cuda.jit(device=True)
    def lo_of(d):
        return libdevice.int_as_float(libdevice.double2loint(d))

    @cuda.jit(device=True)
    def hi_of(d):
        return libdevice.int_as_float(libdevice.double2hiint(d))


def tile_of(pm: int, pn: int) -> tuple[int, int]:
    """(TM, TN) of shape (PM, PN)."""
    return 2 * BLOCK_Y * pm, 2 * BLOCK_X * pn


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _make_stage(n_pairs, tk):
    """Device functions that move one TK x (2 n_pairs) operand slice: global -> registers -> shared.

    A thread's slots of the slice are fixed by its id: its first pair (xp, kk) and one step
    (dxp, dkk) per further load (``plan``), so a load costs an address add, not a division.
    Consecutive threads walk the operand's contiguous dimension so loads coalesce: x when
    x_fast (rows of XW >= n_pairs slots, XW a power of two dividing the block; slots past
    n_pairs idle), else kk (TK divides the block). Index arithmetic is uint64 throughout:
    Numba adds a negative-index wraparound test to every signed array index, which in the
    inner loops costs more than the loads themselves.
    """
    xw = _pow2_at_least(n_pairs)
    assert GEMM_THREADS % xw == 0 and GEMM_THREADS % tk == 0
    n_loads = max(cdiv(xw * tk, GEMM_THREADS), cdiv(n_pairs * tk, GEMM_THREADS))
    exact = xw == n_pairs and n_pairs * tk % GEMM_THREADS == 0   # every slot of every load is in the slice
    u_pairs, u_tk, u_cols, u_xw = uint64(n_pairs), uint64(tk), uint64(n_pairs + SMEM_PAD), uint64(xw)
    x_rows, k_rows = uint64(GEMM_THREADS // xw), uint64(GEMM_THREADS // tk)
    u0, u1, u2 = uint64(0), uint64(1), uint64(2)

    @cuda.jit(device=True)
    def plan(tid, x_fast):
        """(xp, kk, dxp, dkk): a thread's first slot of the slice and its step per further load."""
        if x_fast:
            return tid % u_xw, tid // u_xw, u0, x_rows
        return tid // u_tk, tid % u_tk, k_rows, u0

    @cuda.jit(device=True)
    def fetch(src, regs, tid, x0, x_len, k0, k_end, s_x, s_k, x_fast):
        """regs[2r], regs[2r+1] = S(x, k), S(x+1, k) for this thread's r-th pair of the slice at k0,
        S(x, k) = src[x s_x + k s_k], 0 outside x < x_len, k < k_end (all uint64; k0 < k_end)."""
        xp, kk, dxp, dkk = plan(tid, x_fast)
        gx = x0 + u2 * xp
        off = gx * s_x + (k0 + kk) * s_k
        step = u2 * dxp * s_x + dkk * s_k
        if exact and x0 + u2 * u_pairs <= x_len and k0 + u_tk <= k_end:   # an inner tile: no bounds
            for r in range(n_loads):
                regs[2 * r] = src[off]
                regs[2 * r + 1] = src[off + s_x]
                off += step
        else:
            k_lim = min(k_end - k0, u_tk)
            for r in range(n_loads):
                v0 = float32(0.0)
                v1 = float32(0.0)
                if kk < k_lim and xp < u_pairs:
                    if gx < x_len:
                        v0 = src[off]
                    if gx + u1 < x_len:
                        v1 = src[off + s_x]
                regs[2 * r] = v0
                regs[2 * r + 1] = v1
                off += step
                gx += u2 * dxp
                xp += dxp
                kk += dkk

    @cuda.jit(device=True)
    def store(regs, sh, base, tid, x_fast):
        """sh[base + kk (n_pairs + SMEM_PAD) + xp] = the pair fetched for (kk, xp)."""
        xp, kk, dxp, dkk = plan(tid, x_fast)
        o = base + kk * u_cols + xp
        step = dkk * u_cols + dxp
        for r in range(n_loads):
            if exact or (xp < u_pairs and kk < u_tk):
                sh[o] = pack2(regs[2 * r], regs[2 * r + 1])
            o += step
            xp += dxp
            kk += dkk

    return fetch, store, n_loads


def gemm_k_unroll(pm: int, pn: int) -> int:
    """K steps whose operands a thread loads before their FMAs: 4 for the 2 x 2 register block,
    2 for 4 x 2, else 1. A small block is a chain of shared loads each followed by a few FMAs;
    the big ones have the FMAs to hide the load and no registers to spare (128-register cap)."""
    return {1: 4, 2: 2}.get(pm * pn, 1)


def _epilogue_passes(pm: int, tile_pairs: int, smem_pairs: int) -> int:
    """Passes of the C tile through shared memory: 1, or 2 (half the row blocks each) when the
    whole tile does not fit in the operand buffers."""
    for n in (1, 2):
        if pm % n == 0 and tile_pairs // n <= smem_pairs:
            return n
    raise ValueError(f"C tile of {tile_pairs} pairs does not fit {smem_pairs} in two passes")


def _make_gemm(pm: int, pn: int, tk: int):
    """The kernel of tile shape (PM, PN, TK); see the module docstring."""
    tm, tn = tile_of(pm, pn)
    a_pairs, b_pairs = tm // 2, tn // 2
    a_cols, b_cols = a_pairs + SMEM_PAD, b_pairs + SMEM_PAD
    a_stage, b_stage = tk * a_cols, tk * b_cols   # one buffer stage, in float pairs
    a_size, b_size = 2 * a_stage, 2 * b_stage
    sh_size = a_size + b_size
    rm, rn = 2 * pm, 2 * pn          # register block of one thread
    ku = gemm_k_unroll(pm, pn)
    assert tk % ku == 0
    n_ra, n_rb = ku * rm, ku * rn
    n_acc = rm * rn                  # local array sizes must be plain constants for the typer
    fetch_a, store_a, a_loads = _make_stage(a_pairs, tk)
    fetch_b, store_b, b_loads = _make_stage(b_pairs, tk)
    n_pa, n_pb = 2 * a_loads, 2 * b_loads
    # The epilogue stages C through the (then idle) operand buffers, n_pass row blocks at a time.
    n_pass = _epilogue_passes(pm, a_pairs * tn, sh_size)
    pass_rows, pass_pm = tm // n_pass, pm // n_pass
    pass_items = pass_rows * b_pairs
    u1, u2 = uint64(1), uint64(2)
    u_bp, u_b0 = uint64(b_pairs), uint64(a_size)

    @cuda.jit(device=True)
    def stash(acc, sh, p, tx, ty):
        """sh[r b_pairs + cp] = this thread's C pair (row r, columns 2 cp, 2 cp + 1) of pass p, for its
        rows r = 2 (ty + BLOCK_Y a) + b. Every acc index is a constant once p is (the caller's literal):
        the accumulators stay in registers."""
        for a in range(pass_pm):
            for bb in range(2):
                i = 2 * (p * pass_pm + a) + bb
                row = (u2 * (ty + uint64(a * BLOCK_Y)) + uint64(bb)) * u_bp
                for jj in range(pn):
                    sh[row + tx + uint64(jj * BLOCK_X)] = pack2(acc[i * rn + 2 * jj], acc[i * rn + 2 * jj + 1])

    @cuda.jit(device=True)
    def write_out(sh, p, tid, m0, n0, mr, nc, c0, c, bias, y, use_bias, act, beta):
        """C rows of pass p from shared memory to global, a float pair a thread, consecutive threads
        on consecutive pairs of a row (coalesced): + bias, + old C, then act."""
        e = tid
        while e < uint64(pass_items):
            d = sh[e]
            gm = m0 + uint64(p * pass_rows) + e // u_bp
            gn = n0 + u2 * (e % u_bp)
            if gm < mr:
                for q in range(2):
                    if gn < nc:
                        v = lo_of(d) if q == 0 else hi_of(d)
                        off = c0 + gm * nc + gn
                        if use_bias != 0:
                            v += bias[gn]
                        if beta != 0:
                            v += c[off]
                        if act == ACT_TANH:
                            v = math.tanh(v)
                        elif act == ACT_TANH_GRAD:
                            yv = y[gm * nc + gn]
                            v *= float32(1.0) - yv * yv
                        c[off] = v
                    gn += u1
            e += uint64(GEMM_THREADS)

    def gemm(gate, a, b, bias, y, c, m_rows, n_cols, k_len, a_sm, a_sk, b_sk, b_sn, k_split,
             use_bias, act, beta, ones_row):
        if gate[0] == 0:
            return
        sh = cuda.shared.array(sh_size, float64)   # A stages, then B stages
        acc = cuda.local.array(n_acc, float32)
        ra = cuda.local.array(n_ra, float32)
        rb = cuda.local.array(n_rb, float32)
        pa = cuda.local.array(n_pa, float32)
        pb = cuda.local.array(n_pb, float32)
        tx = uint64(cuda.threadIdx.x)
        ty = uint64(cuda.threadIdx.y)
        tid = ty * uint64(BLOCK_X) + tx
        n0 = uint64(cuda.blockIdx.x) * uint64(tn)
        m0 = uint64(cuda.blockIdx.y) * uint64(tm)
        z = uint64(cuda.blockIdx.z)
        mr, nc = uint64(m_rows), uint64(n_cols)
        asm, ask, bsk, bsn = uint64(a_sm), uint64(a_sk), uint64(b_sk), uint64(b_sn)
        k_begin = z * uint64(k_split)
        k_end = min(uint64(k_len), k_begin + uint64(k_split))
        a_fast = a_sk != 1
        b_fast = b_sn == 1
        # Column sums for the ones row: thread tid < b_pairs owns columns 2 tid, 2 tid + 1.
        cs0 = float32(0.0)
        cs1 = float32(0.0)
        sums_cols = ones_row != 0 and cuda.blockIdx.y == 0 and tid < uint64(b_pairs)
        for i in range(n_acc):
            acc[i] = float32(0.0)

        n_slices = (int(k_end) - int(k_begin) + tk - 1) // tk if k_end > k_begin else 0
        if n_slices > 0:
            fetch_a(a, pa, tid, m0, mr, k_begin, k_end, asm, ask, a_fast)
            fetch_b(b, pb, tid, n0, nc, k_begin, k_end, bsn, bsk, b_fast)
            store_a(pa, sh, uint64(0), tid, a_fast)
            store_b(pb, sh, u_b0, tid, b_fast)
        cuda.syncthreads()
        s = uint64(0)
        for t in range(n_slices):
            nxt = k_begin + uint64((t + 1) * tk)
            if nxt < k_end:   # next slice's global loads in flight during this slice's FMAs
                fetch_a(a, pa, tid, m0, mr, nxt, k_end, asm, ask, a_fast)
                fetch_b(b, pb, tid, n0, nc, nxt, k_end, bsn, bsk, b_fast)
            ka = s * uint64(a_stage) + ty
            kb = u_b0 + s * uint64(b_stage) + tx
            for kk in range(tk // ku):
                # ku K steps' operand pairs loaded first, then their FMAs in k order: one shared-load
                # latency per ku steps instead of per step (small tiles are that latency chain).
                for u in range(ku):
                    for i in range(pm):
                        d = sh[ka + uint64(u * a_cols + i * BLOCK_Y)]
                        ra[u * rm + 2 * i] = lo_of(d)
                        ra[u * rm + 2 * i + 1] = hi_of(d)
                    for j in range(pn):
                        d = sh[kb + uint64(u * b_cols + j * BLOCK_X)]
                        rb[u * rn + 2 * j] = lo_of(d)
                        rb[u * rn + 2 * j + 1] = hi_of(d)
                for u in range(ku):
                    for i in range(rm):
                        for j in range(rn):
                            acc[i * rn + j] += ra[u * rm + i] * rb[u * rn + j]
                ka += uint64(ku * a_cols)
                kb += uint64(ku * b_cols)
            if sums_cols:
                kc = u_b0 + s * uint64(b_stage) + tid
                for kk in range(tk):
                    d = sh[kc + uint64(kk * b_cols)]
                    cs0 += lo_of(d)
                    cs1 += hi_of(d)
            if nxt < k_end:
                store_a(pa, sh, (u1 - s) * uint64(a_stage), tid, a_fast)
                store_b(pb, sh, u_b0 + (u1 - s) * uint64(b_stage), tid, b_fast)
            cuda.syncthreads()
            s = u1 - s

        c0 = z * (mr + uint64(ones_row)) * nc
        stash(acc, sh, 0, tx, ty)
        cuda.syncthreads()
        write_out(sh, 0, tid, m0, n0, mr, nc, c0, c, bias, y, use_bias, act, beta)
        if n_pass > 1:
            cuda.syncthreads()
            stash(acc, sh, 1, tx, ty)
            cuda.syncthreads()
            write_out(sh, 1, tid, m0, n0, mr, nc, c0, c, bias, y, use_bias, act, beta)
        if sums_cols:
            gn = n0 + u2 * tid
            if gn < nc:
                c[c0 + mr * nc + gn] = cs0
            if gn + u1 < nc:
                c[c0 + mr * nc + gn + u1] = cs1

    # Named by the shape's tile on the GPU, on either target (the simulator's tiles are a quarter of it), so
    # a kernel has one name in the registry, the compile gate and the benchmarks.
    gemm.__name__ = gemm.__qualname__ = f"rl_gemm_{2 * GPU_BLOCK * pm}x{2 * GPU_BLOCK * pn}"
    gemm.__doc__ = f"""C[z] = epilogue(A[:, Kz] @ B[Kz, :]) in {tm} x {tn} tiles, K slices of {tk}.

    Kz = [z k_split, (z+1) k_split). A(m, k) = a[m a_sm + k a_sk], B(k, n) = b[k b_sk + n b_sn];
    C is row-major [M (+1 with ones_row), N] per split z, splits stacked: c[z (M + ones_row) N + m N + n].
    Epilogue, in order: + bias[n] (use_bias); + old C (beta = 1); then act:
    ACT_TANH -> tanh, ACT_TANH_GRAD -> x (1 - y[m N + n]^2).
    ones_row = 1: row M of C gets the column sums of B over Kz (db of a dW product),
    written by the blocks of the first M tile.

    Launch grid (ceil(N / {tn}), ceil(M / {tm}), n_splits), block (BLOCK_X, BLOCK_Y) (``gemm_launch``).
    gate[0] == 0: the block exits at once and writes nothing (K-loop predication).
    """
    return kernel(GEMM_SIGNATURE, max_registers=GEMM_MAX_REGISTERS)(gemm)


#: The registered kernels, by shape.
GEMM_KERNELS = {shape: _make_gemm(*shape) for shape in GEMM_SHAPES}
#: Blocks that fill an H200 (132 SMs, two 256-thread blocks each) about once.
FULL_WAVE_BLOCKS = 264


def gemm_shape(m: int, n: int, splits: int = 1) -> tuple[int, int, int]:
    """The tile shape (PM, PN, TK) for an M x N product (per split): the big 128-row tiles
    when they give at least one full wave of blocks; else 64-row tiles with wide K slices;
    32 x 32 tiles (2 x 2 outputs a thread, K slices of 64) when even 64-row tiles leave most
    SMs idle: a small product is a latency chain, each thread's share of the K loop and the
    number of K slices (one memory round trip each) are its length.
    The narrowest N tile that covers N."""
    big = cdiv(m, 128) * cdiv(n, 128 if n > 64 else 64) * splits >= FULL_WAVE_BLOCKS // 2
    if big:
        if n <= 64:
            return (4, 1 if n <= 32 else 2, 16)
        # 128- or 96-wide N tiles, whichever pads N less (the Q advantage stream's 189 outputs:
        # two 96-wide tiles waste 2%, two 128-wide ones 35%); a tie keeps the squarer tile.
        pn = min((4, 3), key=lambda p: cdiv(n, 32 * p) * 32 * p - n)
        return (4, pn, 16)
    # The CUDA simulator runs every thread as Python: its cost is threads x K steps, so it keeps
    # the 64-row tiles (a quarter of the 32 x 32 tiles' threads); the 32 x 32 shape has its own tests.
    if cdiv(m, 64) * cdiv(n, 64) * splits < FULL_WAVE_BLOCKS // 8 and not target.sim_override("nets.gemm.small_tiles"):
        return (1, 1, 64)
    return (2, 1 if n <= 32 else 2, 32)


def gemm_launch(m: int, n: int, splits: int = 1, shape=None):
    """(kernel, grid, block) of an M x N product with ``splits`` batch splits (shape: gemm_shape's)."""
    shape = shape or gemm_shape(m, n, splits)
    tm, tn = tile_of(shape[0], shape[1])
    return GEMM_KERNELS[shape], (cdiv(n, tn), cdiv(m, tm), splits), (BLOCK_X, BLOCK_Y)


#: rl_split_reduce block: SPLIT_COLS consecutive outputs x SPLIT_GROUPS interleaved groups of splits.
#: Under the CUDA simulator, whose cost is its thread count (a Python thread each), one group of
#: 256: the same code at one thread an output (the GPU suite runs the grouped sum).
SPLIT_COLS = target.gpu_or_sim("nets.gemm.SPLIT_COLS", gpu=32, sim=256)
SPLIT_GROUPS = target.gpu_or_sim("nets.gemm.SPLIT_GROUPS", gpu=8, sim=1)


def split_reduce_launch(size: int) -> tuple[int, tuple[int, int]]:
    """(grid, block) of ``rl_split_reduce`` over `size` outputs."""
    return cdiv(size, SPLIT_COLS), (SPLIT_COLS, SPLIT_GROUPS)


@kernel("void(int32[::1], float32[::1], int32, int32, float32[::1])")
def rl_split_reduce(gate, partial, n_splits, size, out):
    """out[i] = sum over s < n_splits of partial[s size + i], in a fixed order (deterministic).

    Why grouped: the partials sit in L2 right after the GEMM, so the reduce is a chain of L2
    round trips; one thread an output walked all its splits one after another (~10 µs for 64
    splits of the encoder's 16512 gradients, on a grid of 65 blocks). Here group g of a
    block's SPLIT_GROUPS sums splits g, g + G, g + 2G, ... in that order, four loads in flight,
    and thread g = 0 then adds the G group sums in g order.

    Launch ``split_reduce_launch(size)``. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    sums = cuda.shared.array((SPLIT_GROUPS, SPLIT_COLS), float32)
    x = cuda.threadIdx.x
    g = cuda.threadIdx.y
    i = uint64(cuda.blockIdx.x) * uint64(SPLIT_COLS) + uint64(x)
    n, u_size, step = uint64(n_splits), uint64(size), uint64(SPLIT_GROUPS)
    acc = float32(0.0)
    if i < u_size:
        s = uint64(g)
        while s + uint64(3) * step < n:   # the four loads are independent: all in flight at once
            v0 = partial[s * u_size + i]
            v1 = partial[(s + step) * u_size + i]
            v2 = partial[(s + uint64(2) * step) * u_size + i]
            v3 = partial[(s + uint64(3) * step) * u_size + i]
            acc += v0
            acc += v1
            acc += v2
            acc += v3
            s += uint64(4) * step
        while s < n:
            acc += partial[s * u_size + i]
            s += step
    sums[g, x] = acc
    if SPLIT_GROUPS > 1:   # with one group a thread reads back only its own sum
        cuda.syncthreads()
    if g == 0 and i < u_size:
        tot = sums[0, x]
        for q in range(1, SPLIT_GROUPS):
            tot += sums[q, x]
        out[i] = tot


# The epilogues the tensor-core path (alpharl.tensor_gemm) cannot fuse into cuBLASLt's products:
# cuBLASLt has no tanh epilogue, so these run as one elementwise pass over the product's output.
@kernel("void(int32[::1], float32[::1], int32)")
def rl_tanh_rows(gate, y, size):
    """y[i] = tanh(y[i]) for i < size (ACT_TANH after a product). Launch [ceil(size / ELEMWISE_BLOCK),
    ELEMWISE_BLOCK]. gate[0] == 0: writes nothing."""
    if gate[0] == 0:
        return
    i = cuda.grid(1)
    if i < size:
        y[i] = math.tanh(y[i])


@kernel("void(int32[::1], float32[::1], float32[::1], int32)")
def rl_tanh_grad_rows(gate, dx, y, size):
    """dx[i] *= 1 - y[i]^2 for i < size (ACT_TANH_GRAD after a dX product: y the stored tanh output).
    Launch [ceil(size / ELEMWISE_BLOCK), ELEMWISE_BLOCK]. gate[0] == 0: writes nothing."""
    if gate[0] == 0:
        return
    i = cuda.grid(1)
    if i < size:
        yv = y[i]
        dx[i] *= float32(1.0) - yv * yv
