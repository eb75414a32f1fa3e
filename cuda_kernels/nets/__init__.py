"""Network and learning kernels: the tiled GEMM behind every layer, the heads'
losses and gradients, Adam with its non-finite guard, the target soft update
and the advantage/return kernel (SPEC §1 steps 7-12, §4)."""
