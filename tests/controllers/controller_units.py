"""The step's controller kernels launched one by one: the unit twins of
``rl_step_controllers`` (test-only kernels), for the tests that compare the
fused launch, the units and the references."""
import numpy as np

from alpharl import isv as S
from alpharl.cuda_kernels.controllers.anchors import rl_anchor_controller
from alpharl.cuda_kernels.controllers.lr import LR_CTRL_BLOCK, rl_lr_controller
from alpharl.cuda_kernels.controllers.signals import SIGNAL_EMA_BLOCK, rl_signal_ema
from alpharl.cuda_kernels.controllers.step import SCALAR_CONTROLLERS


def launch_signal_emas(ctl, isv_d) -> None:
    """The signal EMAs of ``ctl``'s (a Controllers) signal table."""
    rl_signal_ema[1, SIGNAL_EMA_BLOCK, ctl.stream](isv_d, ctl.table_d, ctl.beta_d, ctl.n_rows)


def launch_controllers(ctl, isv_d) -> None:
    """The anchors (``ctl``'s flags) and every controller except the V blend (which runs inside the learning
    update)."""
    heads = [np.int32(s) for s in S.GRAD_NORM_EMA_SLOTS]
    rl_anchor_controller[1, 1, ctl.stream](isv_d, ctl.flags)
    rl_lr_controller[1, LR_CTRL_BLOCK, ctl.stream](isv_d, *heads)
    for ctrl in SCALAR_CONTROLLERS:
        ctrl[1, 1, ctl.stream](isv_d)
