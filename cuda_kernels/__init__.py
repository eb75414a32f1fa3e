"""Every ``@cuda.jit`` kernel of alpharl, grouped as the design notes name them.

Kernels are declared with :func:`alpharl.cuda_kernels.registry.kernel`, which
records each kernel's Python function and its real launch signature in one
registry; the compile gate walks that registry, so no kernel can be left out.
"""
