"""Views of fixed buffers made once and handed out again.

Slicing a numba device array builds a new DeviceNDArray every time (a dummy-array
layout, a memory-pointer view, a weakref, a context check): tens of µs of host time
each, about a quarter of an eager step's host time at B = 16, for views of the same
buffers at the same offsets on every step. A step's launches obey the capture rules
(device arrays and per-step constant scalars), so the views it passes are the same at
every step and can be made once. Host numpy arrays work the same way (their views are
cheap; caching them costs nothing).
"""
from __future__ import annotations


class Views:
    """``arr[lo:hi]`` (or a row ``arr[k]``) made on first use and kept, per (array, lo, hi, shape).

    The cache holds the array it sliced, so an id cannot be reused by another array while its entry
    lives; it lives as long as its owner (a learner, a launcher), which already holds the buffers.
    """

    __slots__ = ("_cache",)

    def __init__(self):
        self._cache: dict = {}

    def __call__(self, arr, lo: int, hi: int | None = None, shape: tuple | None = None):
        """``arr[lo:hi]`` (reshaped to ``shape`` when given), or with ``hi`` None the row ``arr[lo]`` of a
        2-D array."""
        key = (id(arr), lo, hi, shape)
        hit = self._cache.get(key)
        if hit is None or hit[0] is not arr:
            v = arr[lo] if hi is None else arr[lo:hi]
            hit = (arr, v if shape is None else v.reshape(shape))
            self._cache[key] = hit
        return hit[1]

    def flat(self, arr):
        """A 1-D view of a C-contiguous array (the array itself when it is 1-D already)."""
        return arr if arr.ndim == 1 else self(arr, 0, arr.shape[0], (arr.size,))

    def of(self, arr, sl: slice):
        """``arr[sl]`` for a step-1 slice (a layer's block of a parameter vector)."""
        return self(arr, sl.start or 0, sl.stop)
