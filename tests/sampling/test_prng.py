"""Host seeding of the xorshift32 lanes and the NumPy twins of the device PRNG functions.

The device functions themselves are checked bit for bit against these twins
through the kernels that use them (PRNG states in test_action_kernels.py, replay
indices in tests/replay)."""
import numpy as np
import pytest

from alpharl import prng


def test_xorshift32_known_answers():
    # Marsaglia's xorshift32 (13, 17, 5) from state 1, computed by hand once:
    # 1 ^ 1<<13 = 8193; ^ >>17 = 8193; ^ <<5 = 8193 ^ 262176 = 270369.
    assert prng.xorshift32_np(np.array([1], np.uint32))[0] == 270369
    x = np.array([0xFFFFFFFF], np.uint32)
    for _ in range(1000):
        x = prng.xorshift32_np(x)
        assert x[0] != 0  # nonzero states never reach the fixed point 0


def test_seed_states_are_nonzero_distinct_and_prefix_stable():
    s = prng.seed_states(12345, 4096)
    assert s.dtype == np.uint32 and s.shape == (4096,)
    assert (s != 0).all()
    assert len(np.unique(s)) == len(s)
    np.testing.assert_array_equal(prng.seed_states(12345, 100), s[:100])  # lane b depends on (seed, stream, b) only
    assert (prng.seed_states(12346, 4096) != s).mean() > 0.99            # adjacent seeds decorrelate
    other = prng.seed_states(12345, 4096, prng.STREAM_REPLAY)
    assert (other != s).mean() > 0.99                                    # streams decorrelate


def test_seed_states_accepts_any_python_int():
    for seed in (0, -1, 2**64 + 5, 2**80):
        assert (prng.seed_states(seed, 8) != 0).all()
    np.testing.assert_array_equal(prng.seed_states(-1, 8), prng.seed_states(2**64 - 1, 8))  # seeds are taken mod 2^64


def test_uniforms_cover_the_unit_interval_without_reaching_one():
    top = np.array([0xFFFFFFFF], np.uint32)
    assert prng.uniform24_np(top)[0] == np.float32(1.0 - 2.0**-24)
    assert prng.uniform53_np(top, top)[0] == 1.0 - 2.0**-53
    zero = np.array([0], np.uint32)
    assert prng.uniform24_np(zero)[0] == 0.0 and prng.uniform53_np(zero, zero)[0] == 0.0
    s = prng.seed_states(7, 100_000)
    u = prng.uniform53_np(s, prng.xorshift32_np(s))
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1.0 / 12.0) < 0.002


def test_stream_registry_keeps_its_ids_and_catches_a_duplicate():
    # The ids are part of a run's bits: renumbering one changes every draw of its consumer.
    assert {name: sid for name, sid, _ in prng.STREAMS} == {
        "actions": 0, "replay": 1, "eval": 7, "sim": 8, "synth": 9, "features": 10}
    prng.check_streams(prng.STREAMS)
    with pytest.raises(AssertionError, match="ids must be unique"):
        prng.check_streams(prng.STREAMS + [("other", prng.STREAM_SIM, "a second consumer of stream 8")])
    with pytest.raises(AssertionError, match="names must be unique"):
        prng.check_streams(prng.STREAMS + [("sim", 11, "a second stream called sim")])
