"""Action sampling: ``rl_pi_action_kernel`` (the actor), ``rl_action_kernel``
(Thompson sampling from Q, diagnostics only), and the C51 target's choice at s':
``argmax_expected_q`` (Double DQN's greedy action) or ``policy_mixture_logp``
(the acting policy's mixture, ``--q-target policy``)."""
