"""alpharl.views.Views: a view made once per (array, range, shape), the same memory as slicing, on host
and device arrays; an array that replaces another gets views of its own."""
import numpy as np
from numba import cuda

from alpharl.views import Views


def test_same_view_object_and_same_memory_on_device():
    rng = np.random.default_rng(7)
    host = rng.standard_normal(48).astype(np.float32)
    arr = cuda.to_device(host)
    v = Views()
    a = v(arr, 8, 20)
    assert v(arr, 8, 20) is a                      # made once
    assert v(arr, 8, 21) is not a                  # another range, another view
    np.testing.assert_array_equal(a.copy_to_host(), host[8:20])
    a.copy_to_device(np.full(12, 3.5, np.float32))  # a view: writes reach the array
    np.testing.assert_array_equal(arr.copy_to_host()[8:20], np.full(12, 3.5, np.float32))
    r = v(arr, 0, 12, (3, 4))
    assert r.shape == (3, 4) and v(arr, 0, 12, (3, 4)) is r and v(arr, 0, 12) is not r
    np.testing.assert_array_equal(r.copy_to_host(), arr.copy_to_host()[:12].reshape(3, 4))


def test_rows_of_a_host_array_and_layer_slices():
    rng = np.random.default_rng(8)
    out = rng.standard_normal((5, 6)).astype(np.float32)
    v = Views()
    row = v(out, 3)
    assert v(out, 3) is row and np.shares_memory(row, out)
    np.testing.assert_array_equal(row, out[3])
    flat = out.reshape(-1)
    assert v.of(flat, slice(4, 10)) is v(flat, 4, 10)
    np.testing.assert_array_equal(v.of(flat, slice(None, 7)), flat[:7])


def test_a_new_array_is_never_served_an_old_view():
    v = Views()
    first = np.arange(10, dtype=np.float32)
    old = v(first, 0, 5)
    second = np.arange(10, 20, dtype=np.float32)
    new = v(second, 0, 5)
    assert new is not old and np.shares_memory(new, second)
    # an entry whose id now names another object (the cache holds its array, so only a forged key
    # can do this) is rebuilt, not returned
    v._cache[(id(second), 1, 3, None)] = (first, first[1:3])
    np.testing.assert_array_equal(v(second, 1, 3), second[1:3])


def test_rollout_flat_hands_out_the_same_views_until_an_array_changes():
    from alpharl.rollout import FIELDS, Rollout

    r = Rollout(3, 2, 4, device=False)
    flat = r.flat()
    assert all(a is b for a, b in zip(r.flat(), flat))
    assert [a.ndim for a in flat] == [1] * len(FIELDS) and np.shares_memory(flat[0], r.obs)
    r.obs = np.ones_like(r.obs)  # a buffer replaced (e.g. a restore that rebinds it): views of the new one
    again = r.flat()
    assert again[0] is not flat[0] and np.shares_memory(again[0], r.obs) and again[1] is flat[1]


def test_flat_is_made_once_and_one_d_arrays_pass_through():
    v = Views()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    flat = v.flat(a)
    assert v.flat(a) is flat and flat.shape == (12,) and np.shares_memory(flat, a)
    np.testing.assert_array_equal(flat, a.reshape(-1))
    one = np.arange(5, dtype=np.int32)
    assert v.flat(one) is one
