"""The synthetic order-flow generator: kernels vs the NumPy twin, every output written, and
the generated books well formed."""
import numpy as np
from numba import cuda

from alpharl.cuda_kernels.lobsim.step import SIM_BLOCK, sim_grid
from alpharl.cuda_kernels.lobsim.synthetic import lobsim_synth_flow, lobsim_synth_reset
from alpharl.lobster.format import ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE, EV_CANCEL, EV_DELETE, EV_EXEC, EV_NEW
from alpharl.prng import STREAM_SYNTH, seed_states
from alpharl.reference.lobsim.synthetic import ReferenceSynth
from alpharl.sim import layout as L
from alpharl.sim.market import SyntheticMarket
from alpharl.sim.params import SynthParams
from support import assert_all_written, poisoned

B, E, STEPS = 5, 12, 6


def test_synth_flow_matches_reference(rng):
    params = SynthParams(levels=3, limit_rate=(7, 5, 2), inside_rate=int(rng.integers(1, 9)),
                         cancel_rate=int(rng.integers(1, 4)), market_rate=int(rng.integers(2, 12)),
                         max_size_units=int(rng.integers(1, 6)), start_size_units=int(rng.integers(1, 4)))
    seed = int(rng.integers(1, 2**31))
    ref = ReferenceSynth(SyntheticMarket(params), B, E, seed)
    ref.reset()
    rows = B * (E + 1)
    sp = cuda.to_device(L.pack_synth(params))
    syn = poisoned((L.n_syn_rows(params.levels), B), np.int32)
    events = poisoned((rows, L.N_EV_COLS), np.int32)
    book = poisoned((rows, 4 * params.levels), np.int32)
    rng_d = cuda.to_device(seed_states(seed, B, STREAM_SYNTH))
    lobsim_synth_reset[sim_grid(B), SIM_BLOCK](sp, syn, events, book, np.int32(E))
    np.testing.assert_array_equal(assert_all_written(syn), ref.syn_i)
    np.testing.assert_array_equal(assert_all_written(events), ref.events)
    kinds = set()
    for step in range(STEPS):
        book.copy_to_device(np.full(book.shape, -123456789, np.int32))
        events.copy_to_device(np.full(events.shape, -123456789, np.int32))
        lobsim_synth_flow[sim_grid(B), SIM_BLOCK](sp, syn, rng_d, events, book, np.int32(E))
        ref.generate()
        np.testing.assert_array_equal(assert_all_written(book), ref.book, err_msg=f"step {step}")
        np.testing.assert_array_equal(assert_all_written(events), ref.events, err_msg=f"step {step}")
        np.testing.assert_array_equal(syn.copy_to_host(), ref.syn_i)
        np.testing.assert_array_equal(rng_d.copy_to_host(), ref.rng)
        check_books(ref.book, ref.events, params.levels)
        kinds |= set(ref.events[:, L.EV_TYPE].tolist())
    assert {EV_NEW, EV_EXEC} <= kinds and kinds & {EV_CANCEL, EV_DELETE}


def check_books(book, events, levels):
    """Levels one tick apart, every listed level occupied, never crossed; events move sizes."""
    lv = np.arange(levels) * 4
    ask, bid = book[:, lv + ASK_PRICE], book[:, lv + BID_PRICE]
    assert (np.diff(ask, axis=1) == 1).all() and (np.diff(bid, axis=1) == -1).all()
    assert (book[:, lv + ASK_SIZE] >= 1).all() and (book[:, lv + BID_SIZE] >= 1).all()
    assert (ask[:, 0] > bid[:, 0]).all()
    ev = events[events[:, L.EV_TYPE] != 0]
    assert (ev[:, L.EV_SIZE] >= 1).all()
    assert np.isin(ev[:, L.EV_DIR], (L.SIDE_BUY, L.SIDE_SELL)).all()
