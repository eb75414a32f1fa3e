"""Action sampling: ``rl_pi_action_kernel`` (the actor), ``rl_action_kernel``
(Thompson sampling from Q, diagnostics only) and ``argmax_expected_q``."""
