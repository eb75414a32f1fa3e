"""alpharl.mirror: the buy / sell mirror of observations and actions (involutions, each named field to its
mirror with its sign), and the mirror-averaged policy: exactly equivariant, a constant tilt cancelled, the
evaluation's NetPolicy acting on it."""
import numpy as np
import pytest
from support import nonzero_uniform

from alpharl import mirror as MR
from alpharl.actions import Action as A
from alpharl.evaluate import NetPolicy
from alpharl.nets import NetLayout
from alpharl.reference.learner import pi_logits
from alpharl.sim import layout as L

#: Each observation field's mirror (name -> (name, sign)); the rest map to themselves with sign +1.
SIDE_SWAP = {"buy_flag": "sell_flag", "buy_queue": "sell_queue", "buy_off": "sell_off"}
NEGATED = {"imbalance1", "imbalance_depth", "position"} | {f"ret_{k}" for k in L.RETURN_LAGS}


def _expected(name: str) -> tuple[str, float]:
    if name.startswith(("ask", "bid")):
        return ("bid" if name.startswith("ask") else "ask") + name[3:], 1.0
    for a, b in SIDE_SWAP.items():
        if name in (a, b):
            return (b if name == a else a), 1.0
    return name, -1.0 if name in NEGATED else 1.0


def test_action_mirror_is_an_involution_exchanging_buy_and_sell():
    m = MR.MIRROR_ACTION
    assert (m[m] == np.arange(len(A))).all()
    assert [A(m[a]).name for a in (A.MARKET_BUY, A.JOIN_BID, A.IMPROVE_BID)] == ["MARKET_SELL", "JOIN_ASK",
                                                                                 "IMPROVE_ASK"]
    assert all(m[a] == a for a in (A.HOLD, A.CANCEL, A.FLATTEN))


@pytest.mark.parametrize("levels", [1, 3, 10])
def test_observation_mirror_field_by_field(rng, levels):
    names = L.obs_names(levels)
    obs = nonzero_uniform(rng, (5, len(names)), -2, 2)
    got = MR.mirror_obs(obs, levels)
    for i, name in enumerate(names):
        partner, sign = _expected(name)
        np.testing.assert_array_equal(got[:, i], sign * obs[:, names.index(partner)], err_msg=name)
    np.testing.assert_array_equal(MR.mirror_obs(got, levels), obs)   # an involution
    assert got.flags["C_CONTIGUOUS"]   # row-major as every observation buffer (a device copy keeps the layout)
    assert MR.levels_of(len(names)) == levels
    with pytest.raises(ValueError, match="whole book levels"):
        MR.levels_of(len(names) + 1)


def test_mirror_average_is_equivariant_and_cancels_a_constant_tilt(rng):
    levels = 2
    dim = L.obs_dim(levels)
    w = nonzero_uniform(rng, (dim, len(A)), -1, 1).astype(np.float64)
    tilt = np.zeros(len(A))
    tilt[[A.JOIN_BID, A.IMPROVE_BID]] = 3.0            # a policy that prefers buying whatever it sees
    f = lambda x: x @ w + tilt  # noqa: E731
    s = nonzero_uniform(rng, (7, dim), -2, 2).astype(np.float64)
    z = MR.symmetric_logits(f, s, levels)
    z_m = MR.symmetric_logits(f, MR.mirror_obs(s, levels), levels)
    np.testing.assert_allclose(z_m, z[:, MR.MIRROR_ACTION], atol=1e-12)       # pi(a | M s) = pi(P a | s)
    only_tilt = MR.symmetric_logits(lambda x: np.zeros((len(x), len(A))) + tilt, s, levels)
    np.testing.assert_array_equal(only_tilt[:, A.JOIN_BID], only_tilt[:, A.JOIN_ASK])   # the tilt is gone
    # a lean against the position is kept: logits linear in the position with opposite signs on the sides
    lean = np.zeros((dim, len(A)))
    pos = L.obx_base(levels) + L.OBX_POSITION
    lean[pos, A.JOIN_ASK], lean[pos, A.JOIN_BID] = 1.0, -1.0
    np.testing.assert_allclose(MR.symmetric_logits(lambda x: x @ lean, s, levels), s @ lean, atol=1e-12)


def test_net_policy_acts_on_the_mirror_average(rng):
    levels = 1
    dim = L.obs_dim(levels)
    lay = NetLayout(dim)
    params = nonzero_uniform(rng, lay.n_params, -0.5, 0.5)
    obs = nonzero_uniform(rng, (4, dim), -2, 2)
    plain = NetPolicy(params, dim, greedy=True, b=4, seed=1)
    mirrored = NetPolicy(params, dim, greedy=True, b=4, seed=1, mirror=True)
    np.testing.assert_array_equal(plain.logits(obs), pi_logits(params, lay, obs))
    raw = lambda x: pi_logits(params, lay, np.asarray(x, np.float32))  # noqa: E731
    np.testing.assert_allclose(mirrored.logits(obs), MR.symmetric_logits(raw, obs, levels), rtol=1e-6)
    np.testing.assert_allclose(mirrored.logits(MR.mirror_obs(obs, levels)),
                               mirrored.logits(obs)[:, MR.MIRROR_ACTION], rtol=1e-5, atol=1e-6)
    assert (mirrored(MR.mirror_obs(obs, levels)) == MR.MIRROR_ACTION[mirrored(obs)]).all()
