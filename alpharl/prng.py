"""Per-lane xorshift32 generators: seeding on the host, one step on the device.

Every stochastic kernel (action sampling, replay sampling) owns a uint32 state
per lane (per backtest, per replay sample) and advances it in place, so a run
is reproducible from one integer seed and the lane count alone.

- **Step**: Marsaglia's xorshift32 with the standard (13, 17, 5) shifts. Its
  period is 2^32 - 1 over the nonzero states; 0 is a fixed point, so a state
  must never be 0.
- **Seeding** (host): SplitMix64 (Steele, Lea & Flood 2014), two levels. The
  key of stream ``k`` is SplitMix64 output number ``k`` of the generator started
  at ``seed``; lane ``b``'s state is the high 32 bits of SplitMix64 output
  number ``b`` of the generator started at that key. SplitMix64 outputs are
  decorrelated even for adjacent seeds and indices, so neighbouring lanes and
  streams start far apart on the xorshift32 cycle. A lane whose 32 bits come
  out 0 gets ``ZERO_STATE_REPLACEMENT`` instead.
- **Uniforms**: ``uniform24`` = (top 24 bits of the state) x 2^-24, an exact
  float32 in [0, 1 - 2^-24]; ``uniform53`` joins two consecutive states into a
  53-bit float64 in [0, 1) the way numpy's ``random_sample`` joins two 32-bit
  words ((a >> 5) x 2^26 + (b >> 6)) x 2^-53, for samplers whose categories
  can be finer than 2^-24 of the total mass (large replay buffers).

Each device function has a NumPy twin below it with identical integer and
float semantics (vectorised over lanes); the references use the twins.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, float32, float64, uint32

# ---------------------------------------------------------------- constants
#: xorshift32 shift triple (Marsaglia 2003, the standard full-period choice).
XS_A, XS_B, XS_C = 13, 17, 5
#: Low 32 bits: a left shift is masked to stay a 32-bit word.
MASK32 = 0xFFFFFFFF
#: A fixed nonzero state for a lane whose seeded bits came out 0 (2^32 / golden ratio).
ZERO_STATE_REPLACEMENT = 0x9E3779B9
#: uniform24 keeps the top 24 bits of the state: (x >> 8) * 2^-24.
U24_SHIFT = 8
U24_SCALE = 2.0 ** -24
#: 2^24: a Bernoulli draw with probability p/2^24 compares (x >> U24_SHIFT) < p.
U24_ONE = 1 << 24
#: uniform53: 27 high bits of the first word, 26 of the second.
U53_SHIFT_HI, U53_SHIFT_LO = 5, 6
U53_HI_SCALE = 2.0 ** 26
U53_SCALE = 2.0 ** -53

#: SplitMix64 constants (Steele, Lea & Flood 2014).
_SM_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_SM_M1 = np.uint64(0xBF58476D1CE4E5B9)
_SM_M2 = np.uint64(0x94D049BB133111EB)
_MASK64 = (1 << 64) - 1

# ------------------------------------------------------------ stream ids
#: Every PRNG stream id, (name, id, consumer): each consumer of random numbers seeds
#: its own stream of the run seed (seed_states), so no two consumers share draws. The
#: ids are part of a run's bits: never renumber one; a new consumer takes a free id.
STREAMS: list[tuple[str, int, str]] = []


def _stream(name: str, sid: int, consumer: str) -> int:
    STREAMS.append((name, sid, consumer))
    return sid


STREAM_ACTIONS = _stream("actions", 0, "rl_pi_action_kernel / rl_action_kernel, one lane per backtest")
STREAM_REPLAY = _stream("replay", 1, "PrioritizedReplay sampler, one lane per minibatch row")
STREAM_EVAL = _stream("eval", 7, "the evaluation's own draws (sampled policy, random baseline)")
STREAM_SIM = _stream("sim", 8, "episode start offsets and the probabilistic queue model's Bernoulli draws, "
                               "one lane per backtest")
STREAM_SYNTH = _stream("synth", 9, "the synthetic market's order flow, one lane per backtest")
STREAM_FEATURES = _stream("features", 10, "the synthetic feature/reward process of step_synthetic, "
                                          "one lane per backtest")


def check_streams(streams: list[tuple[str, int, str]]) -> None:
    """Raise when two streams share a name or an id, or an id is negative."""
    names, ids = [s[0] for s in streams], [s[1] for s in streams]
    for what, values in (("name", names), ("id", ids)):
        dup = sorted({v for v in values if values.count(v) > 1})
        if dup:
            raise AssertionError(f"PRNG stream {what}s must be unique: {dup} given twice")
    if min(ids, default=0) < 0:
        raise AssertionError("PRNG stream ids must be >= 0")


check_streams(STREAMS)


# ------------------------------------------------------------ device side
@cuda.jit(device=True)
def xorshift32(x):
    """One xorshift32 step of a nonzero uint32 state; returns the next state."""
    x = uint32(x ^ ((x << XS_A) & MASK32))
    x = uint32(x ^ (x >> XS_B))
    x = uint32(x ^ ((x << XS_C) & MASK32))
    return x


@cuda.jit(device=True)
def uniform24(x):
    """float32 in [0, 1) from a state: the top 24 bits times 2^-24 (exact in float32)."""
    return float32(x >> U24_SHIFT) * float32(U24_SCALE)


@cuda.jit(device=True)
def uniform53(a, b):
    """float64 in [0, 1) from two consecutive states (53 random bits)."""
    hi = float64(a >> U53_SHIFT_HI)
    lo = float64(b >> U53_SHIFT_LO)
    return (hi * float64(U53_HI_SCALE) + lo) * float64(U53_SCALE)


# ------------------------------------------------------------- NumPy twins
def xorshift32_np(x: np.ndarray) -> np.ndarray:
    """The twin of :func:`xorshift32` on a uint32 array (returns a new array)."""
    x = np.asarray(x, dtype=np.uint32)
    x = x ^ (x << np.uint32(XS_A))
    x = x ^ (x >> np.uint32(XS_B))
    return x ^ (x << np.uint32(XS_C))


def uniform24_np(x: np.ndarray) -> np.ndarray:
    """The twin of :func:`uniform24`: float32 array in [0, 1)."""
    return (np.asarray(x, dtype=np.uint32) >> np.uint32(U24_SHIFT)).astype(np.float32) * np.float32(U24_SCALE)


def uniform53_np(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The twin of :func:`uniform53`: float64 array in [0, 1)."""
    hi = (np.asarray(a, dtype=np.uint32) >> np.uint32(U53_SHIFT_HI)).astype(np.float64)
    lo = (np.asarray(b, dtype=np.uint32) >> np.uint32(U53_SHIFT_LO)).astype(np.float64)
    return (hi * U53_HI_SCALE + lo) * U53_SCALE


# ------------------------------------------------------------ host seeding
def _splitmix64_mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function (a bijection of uint64) on a uint64 array."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _SM_M1
        z = (z ^ (z >> np.uint64(27))) * _SM_M2
    return z ^ (z >> np.uint64(31))


def _splitmix64_outputs(start: int, n: int) -> np.ndarray:
    """Outputs 0..n-1 of the SplitMix64 generator whose state starts at ``start``."""
    counter = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(start % (1 << 64)) + counter * _SM_GAMMA
    return _splitmix64_mix(z)


def seed_states(seed: int, n: int, stream: int = STREAM_ACTIONS) -> np.ndarray:
    """Initial xorshift32 states of ``n`` lanes of ``stream`` under ``seed`` (host uint32[n], never 0).

    Lane b's state depends on (seed, stream, b) only, so the first lanes are the
    same whatever n is.
    """
    if n < 0 or stream < 0:
        raise ValueError(f"seed_states: n={n} and stream={stream} must be >= 0")
    key = int(_splitmix64_outputs(seed, stream + 1)[stream])
    states = (_splitmix64_outputs(key, n) >> np.uint64(32)).astype(np.uint32)
    states[states == 0] = ZERO_STATE_REPLACEMENT
    return states


def rank_seed(seed: int, rank: int) -> int:
    """The seed of data-parallel rank ``rank``'s own randomness (simulator, replay, actions): ``seed`` itself
    for rank 0, so one rank draws what a single-GPU run draws; SplitMix64 output number ``rank`` of the
    generator at ``seed`` (31 bits) for the others, so no two ranks replay the same backtests."""
    if rank == 0:
        return int(seed)
    return int(_splitmix64_outputs(seed, rank + 1)[rank] >> np.uint64(33))


def seed_lanes(seed: int, lanes, stream: int) -> np.ndarray:
    """The states ``seed_states`` gives the lanes ``lanes`` (indices) of ``stream``: a simulator that
    holds some of a run's backtests draws as those backtests would (host uint32[len(lanes)])."""
    lanes = np.asarray(lanes, dtype=np.int64)
    if lanes.size == 0:
        return np.zeros(0, np.uint32)
    return seed_states(seed, int(lanes.max()) + 1, stream)[lanes]
