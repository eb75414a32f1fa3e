"""The mirror-equivariant actor (``--mirror-policy``; alpharl.mirror has the maps).

The policy acts on z(s) = (f(s) + P f(M s)) / 2, f the pi head's logits, M the
observation's buy/sell mirror, P the actions' (an involution: (P y)[a] = y[P[a]]).
z(M s) = P z(s) exactly, so a constant tilt of f toward one side cancels and any
dependence on the position survives. The learning update runs the encoder and the
pi head on both s_t and M s_t (rl_stack_obs's mirror rows), averages the logits
before the PPO loss (``rl_mirror_logits``) and sends its gradient back through
both passes: dL/df(s) = dL/dz / 2, dL/df(M s)[P[a]] = dL/dz[a] / 2
(``rl_mirror_grads``). The mirror rows feed no other head.
"""
from numba import cuda, float32

from alpharl.cuda_kernels.registry import kernel
from alpharl.sizes import N_ACTIONS

#: Threads per block: one thread per (row, action).
MIRROR_BLOCK = 128


@kernel("void(int32[::1], float32[::1], int32, int32[::1])")
def rl_mirror_logits(gate, logits, n, perm):
    """logits [2 n, N_ACTIONS]: rows [0, n) at s, rows [n, 2 n) at M s. Rows [0, n) become
    z[r, a] = (f[r, a] + f[n + r, perm[a]]) / 2 in place (each thread reads and writes its own
    element of row r; the mirror rows are only read). Launch [ceil(n N_ACTIONS / MIRROR_BLOCK),
    MIRROR_BLOCK]. gate[0] == 0: writes nothing."""
    if gate[0] == 0:
        return
    i = cuda.grid(1)
    if i >= n * N_ACTIONS:
        return
    r = i // N_ACTIONS
    a = i - r * N_ACTIONS
    logits[i] = float32(0.5) * (logits[i] + logits[(n + r) * N_ACTIONS + perm[a]])


@kernel("void(int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], int32, int32[::1])")
def rl_mirror_grads(gate, d_pi, dv, dbce, daux, n, perm):
    """d_pi [2 n, N_ACTIONS] holds dL/dz in rows [0, n): rows [0, n) become dL/dz / 2 (the pass at s),
    rows [n, 2 n) the pass at M s, d_pi[n + r, perm[a]] = dL/dz[r, a] / 2 (perm is a permutation, so
    every mirror element is written once); dv, dbce, daux [2 n]: zero on the mirror rows (no other head
    reads them). Launch [ceil(n N_ACTIONS / MIRROR_BLOCK), MIRROR_BLOCK]. gate[0] == 0: writes nothing."""
    if gate[0] == 0:
        return
    i = cuda.grid(1)
    if i >= n * N_ACTIONS:
        return
    r = i // N_ACTIONS
    a = i - r * N_ACTIONS
    g = float32(0.5) * d_pi[i]
    d_pi[i] = g
    d_pi[(n + r) * N_ACTIONS + perm[a]] = g
    if a == 0:
        dv[n + r] = float32(0.0)
        dbce[n + r] = float32(0.0)
        daux[n + r] = float32(0.0)
