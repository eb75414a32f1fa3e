"""NumPy references of every kernel.

Each function here mirrors one kernel's semantics on host arrays. Tests compare
the kernels against them; assembled together they are the ``numpy`` backend
that runs the whole training step on a machine without a GPU.
"""
