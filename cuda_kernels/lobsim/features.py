"""The synthetic feature/reward process behind ``step_synthetic`` (no order book).

Per backtest, every step: features x ~ U(-1, 1)^D from the backtest's xorshift32
lane; the action a earns reward x[a mod D] (so a policy that reads its
observation can learn which action pays: the best action is the argmax of the
first N_ACTIONS features); the episode ends with probability
FEATURES_DONE_PROB; the perception labels come from the same observation
(label_up = x[D-1] > 0, label_ret = FEATURES_RET_SCALE x[D-2]). Outputs use the
simulator's row layout (alpharl.sim.layout OUT_*), so the trainer reads both
environments alike; a step "closes a trade" when its episode ends.
"""
from numba import cuda, float32, float64

from alpharl.cuda_kernels.registry import kernel
from alpharl.prng import uniform24, xorshift32
from alpharl.sim.layout import (OUT_DONE, OUT_LABEL_RET, OUT_LABEL_UP, OUT_REWARD, OUT_TRADE_DONE, OUT_TRADE_PNL,
                                OUT_TRUNCATED)

#: Features per observation.
FEATURES_DIM = 16
#: Probability that an episode ends at a step.
FEATURES_DONE_PROB = 0.1
#: Scale of the AUX label (a small "return").
FEATURES_RET_SCALE = 0.01
#: Threads per block: one per backtest.
FEATURES_BLOCK = 128


@cuda.jit(device=True)
def draw_features(obs, b, d, rng):
    s = rng[b]
    for j in range(d):
        s = xorshift32(s)
        obs[b, j] = float32(2.0) * uniform24(s) - float32(1.0)
    rng[b] = s


@kernel("void(float32[:, ::1], uint32[::1], float64[::1], int32)")
def rl_features_reset(obs, rng, equity, n):
    """First observation of every backtest; equity 0. Launch [ceil(n/128), 128]."""
    b = cuda.grid(1)
    if b < n:
        draw_features(obs, b, obs.shape[1], rng)
        equity[b] = float64(0.0)


@kernel("void(int32[::1], float32[:, ::1], float32[:, ::1], uint32[::1], float64[::1], int32)")
def rl_features_step(actions, obs, out, rng, equity, n):
    """Reward and labels from the current features, then the next features (see module doc).

    Launch [ceil(n/128), 128]; every output row of ``out`` is written for b < n.
    """
    b = cuda.grid(1)
    if b < n:
        d = obs.shape[1]
        r = obs[b, actions[b] % d]
        out[OUT_REWARD, b] = r
        out[OUT_LABEL_UP, b] = float32(1.0) if obs[b, d - 1] > float32(0.0) else float32(0.0)
        out[OUT_LABEL_RET, b] = float32(FEATURES_RET_SCALE) * obs[b, d - 2]
        eq = equity[b] + float64(r)
        s = xorshift32(rng[b])
        rng[b] = s
        done = uniform24(s) < float32(FEATURES_DONE_PROB)
        out[OUT_DONE, b] = float32(1.0) if done else float32(0.0)
        out[OUT_TRADE_DONE, b] = out[OUT_DONE, b]
        out[OUT_TRADE_PNL, b] = float32(eq) if done else float32(0.0)
        out[OUT_TRUNCATED, b] = float32(0.0)
        equity[b] = float64(0.0) if done else eq
        draw_features(obs, b, d, rng)
