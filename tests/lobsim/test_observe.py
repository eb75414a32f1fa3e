"""The observation alone: the kernel (lobsim_observe, through lobsim_step's write_obs) against
its NumPy twin on random books of several depths and observation level counts, every element
written; the "no level" padding and the cut; units free of the instrument's price and size scale."""
import numpy as np
import pytest
from numba import cuda

from alpharl.cuda_kernels.lobsim.step import SIM_BLOCK, lobsim_observe, sim_grid
from alpharl.lobster.format import ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE, BOOK_COLS_PER_LEVEL
from alpharl.reference.lobsim.observe import write_obs
from alpharl.sim import layout as L
from alpharl.sim.params import SimParams
from support import assert_all_written, poisoned

#: Backtests (one snapshot row each): more than one block of SIM_BLOCK threads on the GPU.
B = 40
TICK = 100
TICK_DOLLARS = TICK / 10_000


def random_books(rng, n: int, levels: int) -> np.ndarray:
    """int32[n, 4L] snapshots in the simulator's layout: each side lists 0..L levels (mostly all),
    prices strictly moving away from a random touch by 1-3 ticks, sizes 1..1e5 shares
    (log-uniform); unlisted levels at the empty sentinels with size 0."""
    book = np.zeros((n, BOOK_COLS_PER_LEVEL * levels), np.int64)
    for r in range(n):
        bid1 = int(rng.integers(1_000, 200_000))
        ask1 = bid1 + int(rng.integers(1, 5))
        for side, (pc, zc, best, sgn, empty) in enumerate(((ASK_PRICE, ASK_SIZE, ask1, 1, L.ASK_EMPTY),
                                                           (BID_PRICE, BID_SIZE, bid1, -1, L.BID_EMPTY))):
            listed = levels if rng.random() < 0.6 else int(rng.integers(0, levels + 1))
            px = best
            for lv in range(levels):
                c = lv * BOOK_COLS_PER_LEVEL
                if lv < listed:
                    book[r, c + pc] = px
                    book[r, c + zc] = int(np.exp(rng.uniform(0, np.log(1e5))))
                    px += sgn * int(rng.integers(1, 4))
                else:
                    book[r, c + pc] = empty
    return book.astype(np.int32)


def random_state(rng, book: np.ndarray, params: SimParams) -> tuple[np.ndarray, np.ndarray]:
    """si int32[N_STATE_I, n] / sf float64[N_STATE_F, n]: random positions, entry prices, resting
    orders (live, pending or none) near the touch, queues, mid histories and episode counters."""
    n = book.shape[0]
    si = rng.integers(0, 50, size=(L.N_STATE_I, n)).astype(np.int32)
    sf = rng.normal(size=(L.N_STATE_F, n))
    ask1 = book[:, ASK_PRICE].astype(np.int64)
    bid1 = book[:, BID_PRICE].astype(np.int64)
    mid = np.where(ask1 != L.ASK_EMPTY, ask1, np.where(bid1 != L.BID_EMPTY, bid1, 10_000))
    lots = rng.integers(-params.max_position // params.lot_size, params.max_position // params.lot_size + 1, n)
    si[L.S_INVENTORY] = lots * params.lot_size
    sf[L.F_AVG_PX] = (mid + rng.normal(0, 5, n)) * TICK_DOLLARS
    for base in (L.S_BUY_PX, L.S_SELL_PX):
        si[base + L.O_PX] = mid + rng.integers(-4, 5, n)
        si[base + L.O_QTY] = rng.choice([0, params.lot_size // 2, params.lot_size], n)
        si[base + L.O_LIVE_AT] = np.where(rng.random(n) < 0.7, L.LIVE, rng.integers(0, 1_000, n))
        si[base + L.O_QA] = rng.integers(0, 20_000, n)
    si[L.S_MID_HIST:L.S_MID_HIST + L.N_MID_HIST] = 2 * mid + rng.integers(-20, 21, (L.N_MID_HIST, n))
    si[L.S_STEP_IN_EP] = rng.integers(0, params.episode_steps + 1, n)
    si[L.S_TRADE_STEPS] = rng.integers(0, params.episode_steps + 1, n)
    return si, sf


def kernel_obs(book, rows, ip, fp, si, sf, dim):
    """The kernel's observation, into a NaN-poisoned buffer (every element must be written)."""
    obs = poisoned((si.shape[1], dim))
    rng_state = cuda.to_device(np.ones(si.shape[1], np.uint32))
    lobsim_observe[sim_grid(si.shape[1]), SIM_BLOCK](
        cuda.to_device(book.reshape(-1)), cuda.to_device(rows), cuda.to_device(ip), cuda.to_device(fp),
        cuda.to_device(si), cuda.to_device(sf), rng_state, obs)
    return assert_all_written(obs)


def reference_obs(book, rows, ip, fp, si, sf, dim):
    obs = np.full((si.shape[1], dim), np.nan, np.float32)
    write_obs(obs, book, rows, si, sf, ip, fp)
    return assert_all_written(obs)


def make_case(rng, file_levels, obs_levels):
    params = SimParams(obs_levels=obs_levels, episode_steps=int(rng.integers(5, 300)), lot_size=100,
                       max_position=500)
    book = random_books(rng, B + 3, file_levels)
    rows = rng.permutation(B + 3)[:B].astype(np.int32)
    si, sf = random_state(rng, book[rows], params)
    ip, fp = L.pack_params(params, file_levels, TICK, book.shape[0], False)
    return params, book, rows, si, sf, ip, fp


@pytest.mark.parametrize("file_levels", [1, 5, 10])
@pytest.mark.parametrize("obs_levels", [1, 5, 10, 12])
def test_kernel_matches_reference(file_levels, obs_levels, rng):
    params, book, rows, si, sf, ip, fp = make_case(rng, file_levels, obs_levels)
    dim = L.obs_dim(obs_levels)
    got = kernel_obs(book, rows, ip, fp, si, sf, dim)
    want = reference_obs(book, rows, ip, fp, si, sf, dim)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    # the book block: levels past the file's depth padded, the rest listed exactly where log size > 0
    seen = min(file_levels, obs_levels)
    block = want[:, :L.obx_base(obs_levels)].reshape(B, obs_levels, L.OBS_PER_LEVEL)
    assert (block[:, seen:] == 0).all()
    bk = book[rows]
    for lv in range(seen):
        c = lv * BOOK_COLS_PER_LEVEL
        listed_a, listed_b = bk[:, c + ASK_PRICE] != L.ASK_EMPTY, bk[:, c + BID_PRICE] != L.BID_EMPTY
        np.testing.assert_array_equal(block[:, lv, L.OBS_LEVEL_ASK_LOGSZ] > 0, listed_a)
        np.testing.assert_array_equal(block[:, lv, L.OBS_LEVEL_BID_LOGSZ] > 0, listed_b)
        assert (block[~listed_a, lv, :2] == 0).all() and (block[~listed_b, lv, 2:] == 0).all()
        assert (block[:, lv, [L.OBS_LEVEL_ASK_OFF, L.OBS_LEVEL_BID_OFF]] >= 0).all()
    # the inputs drew every case: one-sided and two-sided books, live / pending / no orders
    x = L.obx_base(obs_levels)
    assert {0.0, 0.5, 1.0} <= set(want[:, x + L.OBX_BUY_FLAG].tolist()) | set(want[:, x + L.OBX_SELL_FLAG].tolist())
    assert (want[:, x + L.OBX_SPREAD] > 0).any() and (want[:, x + L.OBX_UPNL] != 0).any()


def test_deeper_file_is_cut_and_shallower_padded(rng):
    """The first levels of a 10-level book look the same whatever the file keeps: a 5-level cut
    of it observed at 10 levels is the 10-level observation with levels 6-10 zeroed, except the
    depth imbalance (over the observed levels)."""
    params, book, rows, si, sf, _, fp = make_case(rng, 10, 10)
    dim = L.obs_dim(10)
    full = reference_obs(book, rows, L.pack_params(params, 10, TICK, len(book), False)[0], fp, si, sf, dim)
    cut = np.ascontiguousarray(book[:, :5 * BOOK_COLS_PER_LEVEL])
    shallow = reference_obs(cut, rows, L.pack_params(params, 5, TICK, len(cut), False)[0], fp, si, sf, dim)
    x = L.obx_base(10)
    np.testing.assert_array_equal(shallow[:, :5 * L.OBS_PER_LEVEL], full[:, :5 * L.OBS_PER_LEVEL])
    assert (shallow[:, 5 * L.OBS_PER_LEVEL:x] == 0).all()
    others = np.delete(np.arange(x, dim), L.OBX_IMB_DEPTH)
    np.testing.assert_array_equal(shallow[:, others], full[:, others])
    # observed at 5 levels, the 10-level book gives exactly the 5-level file's observation
    p5 = SimParams(obs_levels=5, episode_steps=params.episode_steps)
    five = reference_obs(book, rows, L.pack_params(p5, 10, TICK, len(book), False)[0], fp, si, sf, L.obs_dim(5))
    np.testing.assert_array_equal(five, reference_obs(cut, rows, L.pack_params(p5, 5, TICK, len(cut), False)[0],
                                                      fp, si, sf, L.obs_dim(5)))


def test_units_free_of_price_level_and_size_scale(rng):
    """Shifting every price by c ticks (book, orders, mids, entry price) and multiplying every
    size and queue by k leaves the observation unchanged: nothing reads the instrument's price
    level or share scale."""
    params, book, rows, si, sf, ip, fp = make_case(rng, 5, 10)
    dim = L.obs_dim(10)
    base = reference_obs(book, rows, ip, fp, si, sf, dim)
    c, k = int(rng.integers(1_000, 50_000)), int(rng.integers(2, 9))
    moved = book.astype(np.int64)
    for lv in range(5):
        at = lv * BOOK_COLS_PER_LEVEL
        for pc, zc, empty in ((ASK_PRICE, ASK_SIZE, L.ASK_EMPTY), (BID_PRICE, BID_SIZE, L.BID_EMPTY)):
            listed = book[:, at + pc] != empty
            moved[listed, at + pc] += c
            moved[:, at + zc] *= k
    si2, sf2 = si.copy(), sf.copy()
    for b in (L.S_BUY_PX, L.S_SELL_PX):
        si2[b + L.O_PX] += c
        si2[b + L.O_QA] *= k
    si2[L.S_MID_HIST:L.S_MID_HIST + L.N_MID_HIST] += 2 * c
    sf2[L.F_AVG_PX] += c * TICK_DOLLARS
    other = reference_obs(moved.astype(np.int32), rows, ip, fp, si2, sf2, dim)
    # With one side of the touch empty there is no mid to measure from (the observation falls back
    # to a price of its own): the claim is for two-sided books, which the random cases mostly are.
    two_sided = (book[rows, ASK_PRICE] != L.ASK_EMPTY) & (book[rows, BID_PRICE] != L.BID_EMPTY)
    assert two_sided.sum() >= len(rows) // 2
    np.testing.assert_allclose(other[two_sided], base[two_sided], rtol=1e-5, atol=1e-5)


def test_obs_levels_must_be_positive():
    with pytest.raises(ValueError, match="obs_levels"):
        SimParams(obs_levels=0)
