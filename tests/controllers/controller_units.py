"""The step's controller kernels launched one by one: the unit twins of
``rl_step_controllers`` (test-only kernels), for the tests that compare the
fused launch, the units and the references."""
import numpy as np
from numba import cuda

from alpharl import isv as S
from alpharl.cuda_kernels.controllers.anchors import rl_anchor_controller, rl_ppo_informed
from alpharl.cuda_kernels.controllers.lr import LR_CTRL_BLOCK, rl_lr_controller
from alpharl.cuda_kernels.controllers.signals import SIGNAL_EMA_BLOCK, rl_signal_ema
from alpharl.cuda_kernels.controllers.step import SCALAR_CONTROLLERS
from alpharl.reference import controllers as R


def launch_signal_emas(ctl, isv_d) -> None:
    """The PPO signals' gate (``ctl``'s flags) and the signal EMAs of ``ctl``'s (a Controllers) signal table."""
    rl_ppo_informed[1, 1, ctl.stream](isv_d, ctl.flags)
    rl_signal_ema[1, SIGNAL_EMA_BLOCK, ctl.stream](isv_d, ctl.table_d, ctl.beta_d, ctl.n_rows)


def launch_controllers(ctl, isv_d) -> None:
    """The anchors (``ctl``'s flags) and every controller except the V blend (which runs inside the learning
    update)."""
    heads = [np.int32(s) for s in S.GRAD_NORM_EMA_SLOTS]
    rl_anchor_controller[1, 1, ctl.stream](isv_d, ctl.flags)
    rl_lr_controller[1, LR_CTRL_BLOCK, ctl.stream](isv_d, *heads)
    for ctrl in SCALAR_CONTROLLERS:
        ctrl[1, 1, ctl.stream](isv_d)


def seeded_isv(seed: dict, ppo_update: bool = True) -> np.ndarray:
    """A sentinel ISV with ``seed`` ({slot: value}) written in. ``ppo_update``: this step ran the PPO/V
    update (RL_OBS_PPO_SAMPLES > 0, as on every step at --rollout 1), so the controllers that read its
    signals step; False: a collect step of --rollout T > 1, where they hold."""
    v = S.sentinel_vector()
    v[S.RL_OBS_PPO_SAMPLES] = v[S.RL_OBS_PPO_INFORMED] = 16.0 if ppo_update else 0.0
    for k, x in seed.items():
        v[k] = x
    return v


def run_scalar(ctrl, seed: dict, ppo_update: bool = True) -> np.ndarray:
    """A single-thread controller kernel and its NumPy reference on the same seeded ISV: equal; the kernel's ISV."""
    host = seeded_isv(seed, ppo_update)
    d = cuda.to_device(host)
    ctrl[1, 1](d)
    ref = host.copy()
    getattr(R, ctrl.name)(ref)
    out = d.copy_to_host()
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=0)
    return out
