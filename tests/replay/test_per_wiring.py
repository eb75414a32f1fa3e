"""Gate G6 per_wiring: priorities written after a Q step move the sampling
distribution to the predicted p^alpha / sum p^alpha."""
import math

import numpy as np
from numba import cuda
from support import nonzero_uniform

from alpharl import isv as S
from alpharl.cuda_kernels.replay import per as K
from alpharl.replay import PrioritizedReplay

CAPACITY, OBS_DIM, Q_BATCH, DRAWS = 64, 2, 32, 4096


def _chi_square_z(counts, probs):
    """Chi-square statistic of counts against probs, as a standard-normal z (Wilson-Hilferty cube root)."""
    expected = probs * counts.sum()
    x = ((counts - expected) ** 2 / expected).sum()
    k = len(counts) - 1
    return ((x / k) ** (1.0 / 3.0) - (1.0 - 2.0 / (9.0 * k))) / math.sqrt(2.0 / (9.0 * k))


def _total_variation(counts, probs):
    return 0.5 * np.abs(counts / counts.sum() - probs).sum()


def test_per_wiring(rng):
    replay = PrioritizedReplay(CAPACITY, OBS_DIM, DRAWS, seed=int(rng.integers(2**63)))
    n = CAPACITY
    replay.insert(cuda.to_device(nonzero_uniform(rng, (n, OBS_DIM))), cuda.to_device(rng.integers(0, 9, n, np.int32)),
                  cuda.to_device(nonzero_uniform(rng, n)), cuda.to_device(np.zeros(n, np.float32)),
                  cuda.to_device(nonzero_uniform(rng, (n, OBS_DIM))))
    alpha = 0.7
    isv = S.bootstrap_vector()
    isv[S.RL_PER_ALPHA] = alpha
    d_isv = cuda.to_device(isv)

    # A Q step: a minibatch, its per-row losses, the priority update.
    q_batch = replay.sample(d_isv, Q_BATCH)
    idx = q_batch.idx.copy_to_host()
    # |loss| >= 3 against the initial max priority 1: each sampled slot's mass grows >= 3^0.7 = 2.2x, so
    # the update moves the distribution by a total variation > 0.1 whatever the draw (>= 10 distinct
    # slots of the 32 draws over 64), not only for most draws
    loss = nonzero_uniform(rng, Q_BATCH, 3.0, 6.0) * rng.choice([-1.0, 1.0], Q_BATCH).astype(np.float32)
    replay.update_priorities(cuda.to_device(loss), Q_BATCH)

    # Predicted priorities: new transitions held the initial max priority; the
    # sampled ones now hold |loss| + eps (a duplicate keeps its largest).
    p = np.full(CAPACITY, K.INITIAL_MAX_PRIORITY)
    p[idx] = 0.0
    np.maximum.at(p, idx, np.abs(loss).astype(np.float64) + K.PRIORITY_EPS)
    predicted = p**alpha / (p**alpha).sum()
    uniform = np.full(CAPACITY, 1.0 / CAPACITY)
    assert 0.5 * np.abs(predicted - uniform).sum() > 0.1  # the update really changes the distribution

    replay.draw(d_isv, DRAWS)  # the sampling kernels alone: gathering 4096 rows adds nothing here
    draws = replay.mb_idx.copy_to_host()
    counts = np.bincount(draws, minlength=CAPACITY).astype(np.float64)
    assert _chi_square_z(counts, predicted) < 3.7            # consistent with p^alpha / sum (p ~ 1e-4)
    assert _chi_square_z(counts, uniform) > 10.0             # and no longer with the pre-update distribution
    # multinomial noise: E[TV] ~ sum sqrt(p (1-p) / n) / sqrt(2 pi); allow 3x
    tv_noise = np.sqrt(predicted * (1 - predicted) / DRAWS).sum() / math.sqrt(2 * math.pi)
    assert _total_variation(counts, predicted) < 3.0 * tv_noise
    ess = (predicted.sum() ** 2) / (CAPACITY * (predicted**2).sum())
    np.testing.assert_allclose(d_isv.copy_to_host()[S.RL_PER_ESS_FRAC], ess, rtol=1e-5)
