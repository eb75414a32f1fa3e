"""benchmarks/value_heads.py on a small run whose replay has wrapped: the ring read back in step order
(every s' is the next step's s where the episode went on), the realised return equal to its sum over
time, and the residual identity."""
import numpy as np
from support import load_benchmark

from alpharl import isv as S
from alpharl.checkpoint import load_checkpoint
from alpharl.config import TrainConfig
from alpharl.run import train


def test_value_heads_on_a_wrapped_replay(tmp_path):
    vh = load_benchmark("value_heads")
    run = tmp_path / "run"
    b, cap = 4, 64   # 40 steps x 4 rows through a ring of 64: it wraps twice, 16 steps held
    train(TrainConfig.plain(steps=40, b=b, backend="numpy", replay_capacity=cap, minibatch=8, rollout=2, seed=1,
                            run_dir=str(run), diag_every=20))
    d = vh.diagnose(run, tail=4)
    assert d["steps_per_backtest"] == cap // b and d["states"] == (cap // b - 4) * b
    assert d["chained"] == 1.0
    # the realised return by its sum over time, from the ring in step order (oldest step at the cursor)
    a, _ = load_checkpoint(run)
    gamma, gain = float(a["isv"][S.RL_GAMMA]), float(a["isv"][S.RL_REWARD_GAIN])
    cursor, n = int(a["replay.meta"][0]), cap // b
    steps = [[(cursor + k * b + j) % cap for j in range(b)] for k in range(n)]
    r = np.array([[a["replay.reward"][i] * gain for i in row] for row in steps])
    done = np.array([[a["replay.done"][i] for i in row] for row in steps])
    assert np.count_nonzero(r) > b and done[:-1].sum() < done[:-1].size  # rewards, and episodes that go on
    rets = []
    for t in range(n - 4):
        g, alive = np.zeros(b), np.ones(b)
        for k in range(t, n):
            g += gamma ** (k - t) * alive * r[k]
            alive = alive * (1 - done[k])
        rets.append(g)
    np.testing.assert_allclose(d["return_mean"], np.mean(rets), rtol=1e-9, atol=1e-12)
    assert set(d["heads"]) == {"V_scalar", "V_dq", "E_pi Q", "max_a Q", "Q(s, a taken)"}
    assert d["heads"]["V_scalar"]["off_v_scalar"] == 0.0
    assert all(np.isfinite(v) for h in d["heads"].values() for v in h.values())
    np.testing.assert_allclose(d["residual_greedy"] - d["residual_policy"], d["greedy_gain_per_step"], atol=1e-12)
    assert 0 < d["policy_max_prob"] <= 1 and d["policy_entropy"] > 0
    assert "realised return" in vh.report(d)
    # a replay too short for the return: the heads and the residuals over every held state, no return
    short = vh.diagnose(run, tail=cap // b)
    assert short["return_mean"] is None and short["states"] == cap
    assert all(h["corr_return"] is None and h["explained_variance"] is None for h in short["heads"].values())
    for key in ("residual_greedy", "residual_policy", "greedy_gain_per_step"):
        assert short[key] == d[key]
    assert short["heads"]["V_scalar"]["mean"] != d["heads"]["V_scalar"]["mean"]  # over all 16 steps, not 12
    assert "not measured" in vh.report(short)
