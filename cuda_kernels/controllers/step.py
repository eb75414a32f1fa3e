"""``rl_step_controllers``: a training step's signal EMAs, every controller and the
step counter in one launch.

In the step's CUDA graph each node costs a few µs however little it does, and
these ten were each a single block or a single thread: the gate of the PPO
signals (``rl_ppo_informed``), the signal EMAs (``rl_signal_ema``), the controllers' anchors (``rl_anchor_controller``: with
--adaptive-anchors, else only its sentinel bootstraps), the per-head learning
rates (``rl_lr_controller``), the six scalar controllers (clip, ratio bound,
entropy coefficient, tau, PER, K) and the device step counter. The fused kernel runs the very same Python functions,
compiled as device functions, in the same order, with a block barrier between
the stages that read what the previous one wrote; the separate kernels stay the
units the controller tests and gates exercise one by one.
"""
from numba import cuda

from alpharl.cuda_kernels.controllers.anchors import rl_anchor_controller, rl_ppo_informed
from alpharl.cuda_kernels.controllers.k_loop import rl_k_loop_controller
from alpharl.cuda_kernels.controllers.lr import N_LR_HEADS, rl_lr_controller
from alpharl.cuda_kernels.controllers.per import rl_per_controller
from alpharl.cuda_kernels.controllers.ppo import (rl_entropy_coef_controller, rl_ppo_clip_controller,
                                                 rl_ratio_clamp_controller)
from alpharl.cuda_kernels.controllers.signals import SIGNAL_EMA_BLOCK, rl_signal_ema
from alpharl.cuda_kernels.controllers.target_tau import rl_target_tau_controller
from alpharl.cuda_kernels.registry import kernel
from alpharl.cuda_kernels.step_ops import rl_step_tick

#: Launch [1, STEP_CONTROLLERS_BLOCK]: the signal EMAs' block, which also covers one thread per LR head.
STEP_CONTROLLERS_BLOCK = SIGNAL_EMA_BLOCK
assert STEP_CONTROLLERS_BLOCK >= N_LR_HEADS


def _as_device(k):
    """A registered kernel's Python function compiled as a device function (same code, inlined)."""
    return cuda.jit(device=True)(k.py_func)


#: The scalar controllers, in run order (each a [1, 1] kernel on its own).
SCALAR_CONTROLLERS = (
    rl_ppo_clip_controller,
    rl_ratio_clamp_controller,
    rl_entropy_coef_controller,
    rl_target_tau_controller,
    rl_per_controller,
    rl_k_loop_controller,
)
_informed = _as_device(rl_ppo_informed)
_signal_ema = _as_device(rl_signal_ema)
_anchors = _as_device(rl_anchor_controller)
_lr = _as_device(rl_lr_controller)
_c0, _c1, _c2, _c3, _c4, _c5 = (_as_device(k) for k in SCALAR_CONTROLLERS)
_tick = _as_device(rl_step_tick)


@kernel("void(float32[::1], int32[:, ::1], float32[::1], int32, int32, int32, int32, int32, int32, int32, "
        "int64[::1], int32)")
def rl_step_controllers(isv, table, beta, n_rows, q_signal_slot, pi_signal_slot, v_signal_slot, bce_signal_slot,
                        aux_signal_slot, enc_signal_slot, counter, flags):
    """The PPO signals' gate (rl_ppo_informed, thread 0; flags as rl_anchor_controller's), the signal EMAs
    (table rows < n_rows), then the anchors (thread 0; flags as rl_anchor_controller's),
    then the LR controller (signal slots as rl_lr_controller's), then SCALAR_CONTROLLERS (thread 0, in that
    order: clip, ratio bound, entropy coefficient, tau, PER, K), then counter[0] += 1.
    Launch [1, STEP_CONTROLLERS_BLOCK]."""
    if cuda.threadIdx.x == 0:
        _informed(isv, flags)
    cuda.syncthreads()
    _signal_ema(isv, table, beta, n_rows)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        _anchors(isv, flags)
    cuda.syncthreads()
    _lr(isv, q_signal_slot, pi_signal_slot, v_signal_slot, bce_signal_slot, aux_signal_slot, enc_signal_slot)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        _c0(isv)
        _c1(isv)
        _c2(isv)
        _c3(isv)
        _c4(isv)
        _c5(isv)
        _tick(counter)
