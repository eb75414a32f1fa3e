"""LOB simulator kernels: replay step, matching, queue fills, observation, reset, synthetic flow."""
