"""NumPy references of cuda_kernels/reductions.py."""
import numpy as np

from alpharl.cuda_kernels.reductions import MOM_COUNT, MOM_N


def rl_l2_norm(x, n, out, out_idx):
    out[out_idx] = np.float32(np.sqrt(np.sum(np.asarray(x[:n], np.float32) ** 2, dtype=np.float32)))


def rl_batch_moments(x, w, n, isv, slot_count, slot_mean, slot_var, slot_kurt, slot_max, slot_neg_frac):
    x = np.asarray(x[:n], np.float64)
    w = np.asarray(w[:n], np.float64)
    m = w > 0
    count = w[m].sum()
    if slot_count >= 0:
        isv[slot_count] = count
    if count <= 0:
        return
    mean = (w[m] * x[m]).sum() / count
    d = x[m] - mean
    var = (w[m] * d * d).sum() / count
    if slot_mean >= 0:
        isv[slot_mean] = mean
    if slot_var >= 0:
        isv[slot_var] = var
    if slot_kurt >= 0:
        isv[slot_kurt] = (w[m] * d**4).sum() / count / (var * var) if var > 0 else 3.0
    if slot_max >= 0:
        isv[slot_max] = x[m].max()
    if slot_neg_frac >= 0:
        isv[slot_neg_frac] = w[m][x[m] < 0].sum() / count


def rl_batch_moments_multi(xs, ws, table, isv):
    """``rl_batch_moments`` of (xs[b], ws[b]) with n and slots from table[b], for every row b."""
    for x, w, row in zip(xs, ws, np.asarray(table)):
        rl_batch_moments(x, w, int(row[MOM_N]), isv, *(int(s) for s in row[MOM_COUNT:]))
