"""step_synthetic: the feature/reward process (kernel vs reference) and learning on it."""
import math

import numpy as np
from numba import cuda

from alpharl import isv as S
from alpharl.config import TrainConfig
from alpharl.cuda_kernels.lobsim.features import FEATURES_DIM
from alpharl.sim import layout as L
from alpharl.sim.features import FeatureEnv, ReferenceFeatureEnv
from alpharl.trainer import IntegratedTrainer
from support import assert_all_written


def test_feature_env_matches_reference(rng):
    b = 37
    dev, ref = FeatureEnv(b, seed=11), ReferenceFeatureEnv(b, seed=11)
    dev.reset()
    ref.reset()
    for _ in range(6):
        a = rng.integers(0, 9, b).astype(np.int32)
        dev.out.copy_to_device(np.full((L.N_OUT, b), np.nan, np.float32))
        dev.step(cuda.to_device(a))
        ref.step(a)
        out = assert_all_written(dev.out)
        np.testing.assert_array_equal(out, ref.out)
        np.testing.assert_array_equal(dev.obs.copy_to_host(), ref.obs)
        np.testing.assert_array_equal(dev.rng.copy_to_host(), ref.rng)
    obs = ref.obs
    assert obs.shape == (b, FEATURES_DIM) and (obs >= -1).all() and (obs < 1).all() and obs.std() > 0.4


def test_reward_is_the_chosen_feature(rng):
    env = ReferenceFeatureEnv(5, seed=2)
    env.reset()
    x = env.obs.copy()
    a = rng.integers(0, 9, 5).astype(np.int32)
    env.step(a)
    np.testing.assert_array_equal(env.reward, x[np.arange(5), a])
    np.testing.assert_array_equal(env.label_up, (x[:, -1] > 0).astype(np.float32))


def test_step_synthetic_learns_to_pick_the_paying_action():
    """On features with a known best action, the policy's reward per step rises above
    the random policy's 0 and l_q falls below ln 21 (numpy backend, a few hundred steps)."""
    cfg = TrainConfig.plain(b=16, backend="numpy", features=True, minibatch=64, replay_capacity=4096, seed=1,
                      reward_scale=1.0)
    tr = IntegratedTrainer(cfg)
    rewards = []
    for _ in range(300):
        tr.step()
        rewards.append(float(np.mean(tr.ops.sim.reward)))
    isv = tr.read_isv()
    # a random policy earns 0 on average, the best action E[max of 9 U(-1,1)] = 0.8
    assert np.mean(rewards[-100:]) > 0.35, np.mean(rewards[-100:])
    assert isv[S.RL_LOSS_Q] < math.log(21)
    assert all(np.isfinite(isv[s.index]) for s in S.SLOTS)
