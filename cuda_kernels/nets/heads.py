"""Head-side helpers: the dueling C51 combination, V_dq, and stacking the
encoder's input rows.

Dueling distributional Q (SPEC §4): the advantage stream gives adv[a, z]
(stored action-major, adv[b, a N_ATOMS + z]), the value stream v[z];
logits[a, z] = v[z] + adv[a, z] - mean_a adv[a, z], p(z | s, a) = softmax_z.
Supports z_j = V_MIN + j DELTA_Z with V_MIN, V_MAX read from the ISV
(``support_grid``: RL_SUPPORT_V_MIN / _V_MAX, fixed at +-10 unless
--adaptive-support moves them), so every consumer of one step reads one
support. V_dq = sum_z softmax(v)[z] z_j: the value stream's own expectation
(the baseline the V blend mixes in).
"""
import math

from numba import cuda, float32

from alpharl.cuda_kernels.nets.gemm import ELEMWISE_BLOCK
from alpharl.cuda_kernels.registry import kernel
from alpharl.isv import RL_REWARD_GAIN, RL_SUPPORT_V_MAX, RL_SUPPORT_V_MIN, V_MAX_BOOTSTRAP, V_MIN_BOOTSTRAP
from alpharl.sizes import N_ACTIONS, N_ATOMS

#: Logits of one sample's advantage stream.
N_Q_OUT = N_ACTIONS * N_ATOMS
#: Threads per block of the per-sample kernels (one thread per sample).
ROW_BLOCK = 128


@cuda.jit(device=True)
def support_grid(isv):
    """(V_MIN, V_MAX, DELTA_Z) of the C51 support held in the ISV; DELTA_Z = (V_MAX - V_MIN) / (N_ATOMS - 1).

    Slots still at sentinel (V_MAX <= V_MIN, e.g. both 0) or non-finite read as the bootstrap +-10.
    Every kernel takes the support through here, so one step's consumers agree on it."""
    v_min = isv[RL_SUPPORT_V_MIN]
    v_max = isv[RL_SUPPORT_V_MAX]
    if not (v_max > v_min) or math.isinf(v_max - v_min):
        v_min = float32(V_MIN_BOOTSTRAP)
        v_max = float32(V_MAX_BOOTSTRAP)
    return v_min, v_max, (v_max - v_min) / float32(N_ATOMS - 1)


@cuda.jit(device=True)
def support(j, v_min, dz):
    """The j-th C51 support z_j = V_MIN + j DELTA_Z (V_MIN, DELTA_Z from ``support_grid``)."""
    return v_min + float32(j) * dz


@cuda.jit(device=True)
def reward_gain(isv):
    """The reward normaliser's gain isv[RL_REWARD_GAIN] (learning units per unit of stored reward);
    1 while the slot is at sentinel 0 or not a positive finite number."""
    g = isv[RL_REWARD_GAIN]
    if not (g > float32(0.0)) or math.isinf(g):
        g = float32(1.0)
    return g


@cuda.jit(device=True)
def gained(r, g):
    """r in learning units: r g, and r itself (no multiply, so no fused multiply-add can change a
    rounding) when g == 1 (the reward normaliser off)."""
    if g != float32(1.0):
        r = r * g
    return r


@cuda.jit(device=True)
def adv_mean(adv, b, z):
    """mean_a adv[b, a, z]: the dueling baseline of atom z of row b (adv flat [n, N_ACTIONS, N_ATOMS])."""
    s = float32(0.0)
    for k in range(N_ACTIONS):
        s += adv[b * N_Q_OUT + k * N_ATOMS + z]
    return s / float32(N_ACTIONS)


@cuda.jit(device=True)
def dueling_logit(adv, val, b, action, z, mean):
    """Row b's logit of (action, atom z): v[z] + adv[action, z] - mean, mean = adv_mean(adv, b, z)."""
    return val[b * N_ATOMS + z] + adv[b * N_Q_OUT + action * N_ATOMS + z] - mean


@cuda.jit(device=True)
def log_sum_exp(x, n):
    """log sum_j exp(x[j]) over x[0:n], max-shifted (stable); max, then sum, in index order."""
    mx = x[0]
    for j in range(1, n):
        mx = max(mx, x[j])
    s = float32(0.0)
    for j in range(n):
        s += math.exp(x[j] - mx)
    return mx + math.log(s)


@cuda.jit(device=True)
def log_softmax_inplace(x, n):
    """x[0:n] <- log softmax(x[0:n]) (max-shifted, stable)."""
    lse = log_sum_exp(x, n)
    for j in range(n):
        x[j] = x[j] - lse


@cuda.jit(device=True)
def expectation_of_logp(logp, v_min, dz):
    """sum_z exp(logp[z]) z_j: the mean of a C51 distribution given its log-probs (support V_MIN, DELTA_Z)."""
    e = float32(0.0)
    for z in range(N_ATOMS):
        e += math.exp(logp[z]) * support(z, v_min, dz)
    return e


@cuda.jit(device=True)
def v_dq_of(val, off, v_min, dz):
    """V_dq = sum_z softmax(val[off:off + N_ATOMS])[z] z_j of one value-stream row (global or shared)."""
    x = cuda.local.array(N_ATOMS, float32)
    for z in range(N_ATOMS):
        x[z] = val[off + z]
    log_softmax_inplace(x, N_ATOMS)
    return expectation_of_logp(x, v_min, dz)


@kernel("void(int32[::1], float32[::1], int32, float32[::1], float32[::1])", test_only=True)
def rl_v_dq(gate, val, n, isv, out):
    """out[b] = V_dq = sum_z softmax(val[b, :])[z] z_j for b < n (val is [n, N_ATOMS]), support from the ISV.

    Launch [ceil(n / ROW_BLOCK), ROW_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    b = cuda.grid(1)
    if b < n:
        v_min, _, dz = support_grid(isv)
        out[b] = v_dq_of(val, b * N_ATOMS, v_min, dz)


@kernel("void(int32[::1], float32[::1], float32[::1], int32, float32[::1])", test_only=True)
def rl_dueling_logits(gate, adv, val, n, out):
    """out[b, a, z] = v[z] + adv[a, z] - mean_a adv[a, z] (flat [n, N_ACTIONS * N_ATOMS]).

    The combined C51 logits for acting/diagnostics (rl_action_kernel reads them
    as [n, N_ACTIONS, N_ATOMS]); the learning update works on the streams
    directly. Launch [ceil(n / ROW_BLOCK), ROW_BLOCK]. gate[0] == 0: writes nothing.
    """
    if gate[0] == 0:
        return
    b = cuda.grid(1)
    if b < n:
        for z in range(N_ATOMS):   # the baseline once an atom, not once an (action, atom)
            mean = adv_mean(adv, b, z)
            for a in range(N_ACTIONS):
                out[b * N_Q_OUT + a * N_ATOMS + z] = dueling_logit(adv, val, b, a, z, mean)


@kernel("void(int32[::1], float32[::1], float32[::1], float32[::1], float32[::1], int32, int32, int32, int32, "
        "int32, int32[::1], float32[::1], float32[::1])")
def rl_stack_obs(gate, obs_t, obs_s, obs_sp, obs_tp1, n_b, n_m, n_next, dim, n_mirror, mirror_src, mirror_sign, out):
    """Stack the encoder's input rows:
    out = [obs_t (n_b) | M obs_t (n_mirror) | obs_s (n_m) | obs_sp (n_m) | obs_tp1 (n_next)].

    One encoder pass then serves the env batch at t and t+1 and the replay
    minibatch at s and s'; the rows that get gradients ([obs_t | M obs_t | obs_s]) come
    first and are contiguous. All arrays row-major with `dim` columns. n_next = n_b
    but on a rollout's update step (``--rollout T``): the env rows are then the
    rollout's T B and the t+1 rows only the last slice's s_{t+1} (B).
    n_mirror = n_b with --mirror-policy (else 0): the env rows' mirror images
    (alpharl.mirror), (M x)[j] = mirror_sign[j] x[mirror_src[j]], for the actor's second pass.
    Launch [ceil((n_b + n_mirror + 2 n_m + n_next) dim / ELEMWISE_BLOCK), ELEMWISE_BLOCK].
    """
    if gate[0] == 0:
        return
    i = cuda.grid(1)
    row = i // dim
    col = i - row * dim
    n_e = n_b + n_mirror
    if row < n_b:
        out[i] = obs_t[row * dim + col]
    elif row < n_e:
        out[i] = mirror_sign[col] * obs_t[(row - n_b) * dim + mirror_src[col]]
    elif row < n_e + n_m:
        out[i] = obs_s[(row - n_e) * dim + col]
    elif row < n_e + 2 * n_m:
        out[i] = obs_sp[(row - n_e - n_m) * dim + col]
    elif row < n_e + 2 * n_m + n_next:
        out[i] = obs_tp1[(row - n_e - 2 * n_m) * dim + col]
