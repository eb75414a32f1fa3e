"""NumPy references of cuda_kernels/ranks.py."""
import numpy as np


def rl_rank_pack(gate, grads, n_grad, isv, slots, n_slots, stage):
    if gate[0] == 0:
        return
    stage[:n_grad] = grads[:n_grad]
    stage[n_grad:n_grad + n_slots] = isv[slots[:n_slots]]


def rl_rank_unpack(gate, stage, n_grad, slots, n_slots, inv_g, grads, isv):
    if gate[0] == 0:
        return
    inv = np.float32(inv_g)
    grads[:n_grad] = stage[:n_grad] * inv
    isv[slots[:n_slots]] = stage[n_grad:n_grad + n_slots] * inv
