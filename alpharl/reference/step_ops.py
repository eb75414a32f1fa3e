"""NumPy references of cuda_kernels/step_ops.py."""
import numpy as np

from alpharl.cuda_kernels.step_ops import ACC_REWARD, ACC_TRADE_PNL, ACC_TRADES, ACC_WINS


def rl_scale(x, n, scale, out):
    out[:n] = np.asarray(x[:n], np.float32) * np.float32(scale)


def rl_step_tick(counter):
    counter[0] += 1


def rl_accumulate_trades(trade_done, trade_pnl, reward, n, acc):
    closed = np.asarray(trade_done[:n]) > 0
    pnl = np.asarray(trade_pnl[:n], np.float64)
    acc[ACC_TRADES] += closed.sum()
    acc[ACC_WINS] += (closed & (pnl > 0)).sum()
    acc[ACC_TRADE_PNL] += pnl[closed].sum()
    acc[ACC_REWARD] += np.asarray(reward[:n], np.float64).sum()
