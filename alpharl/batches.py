"""The step's batch types: one container and one spelling per field, on every backend.

Fields are device arrays (cuda and sim backends) or NumPy arrays (the numpy
backend, the references, tests); a container only groups views, it never
copies. Every batch is a set of transitions (obs, action, reward, done,
obs_next) = (s, a, r, done, s'):

- ``EnvBatch``: the current env step's B transitions (s_t, a_t, r_t, done_t,
  s_{t+1}) and what acting and the simulator add (log pi_old(a_t | s_t), the
  BCE and AUX labels);
- ``ReplayBatch``: M transitions drawn from the prioritized replay, with their
  importance weights (and the slots they came from);
- ``LearnerOutputs``: the per-sample outputs of one learning update.
"""
from __future__ import annotations

from typing import Any, NamedTuple


class EnvBatch(NamedTuple):
    """The current env step; float32 unless said, B rows."""

    obs: Any        #: s_t [B, obs_dim]
    action: Any     #: a_t int32 [B]
    logp_old: Any   #: log pi_old(a_t | s_t) [B]
    reward: Any     #: r_t [B] (the simulator's reward times reward_scale)
    done: Any       #: done_t [B], 1.0 where the episode ended (s_{t+1} is the next episode's start)
    obs_next: Any   #: s_{t+1} [B, obs_dim]
    label_up: Any   #: [B], 1.0 where the mid rose over the step (BCE target)
    label_ret: Any  #: [B], the relative mid change over the step (AUX target)


class ReplayBatch(NamedTuple):
    """A prioritized-replay minibatch; float32 unless said, M rows."""

    obs: Any        #: s [M, obs_dim]
    action: Any     #: a int32 [M]
    reward: Any     #: r [M]
    done: Any       #: [M]
    obs_next: Any   #: s' [M, obs_dim]
    is_weight: Any  #: importance weights [M] in (0, 1] (0 only while the buffer is empty)
    idx: Any = None  #: int32 [M], the buffer slots the rows came from (None: not drawn from a buffer)


class LearnerOutputs(NamedTuple):
    """Per-sample outputs of one learning update (float32 unless said)."""

    q_priority: Any  #: [M] per-sample C51 cross-entropy: the new PER priorities
    td: Any          #: [M] TD error of the expected Q
    entropy: Any     #: [B] policy entropy at s_t
    kl: Any          #: [B] KL(pi_old || pi) at s_t
    ratio: Any       #: [B] pi(a_t | s_t) / pi_old(a_t | s_t)
    advantage: Any   #: [B]
    ret: Any         #: [B] the return target of V
    a_star: Any      #: int32 [M] Double-DQN's argmax action at s'
    v_used: Any      #: [B] the blended value at s_t
    v_used_next: Any  #: [B] the blended value at s_{t+1}
    v_scalar: Any    #: [B] the V head at s_t
    v_dq: Any        #: [B] the Q distribution's value at s_t
    v_scalar_next: Any  #: [B] the V head at s_{t+1}
    v_dq_next: Any   #: [B] the Q distribution's value at s_{t+1}
    pi_logits: Any   #: [B, N_ACTIONS] the policy's logits at s_t


class GaeInputs(NamedTuple):
    """What GAE(lambda) reads of a rollout (``rl_gae``; [T B] each, float32) and its lambda; it writes the
    last slice of v_used (the blended values at s_t that acted)."""

    reward: Any
    done: Any
    v_used: Any
    lam: float


#: The outputs the step reads (priorities and step 14's statistics); the numpy backend keeps them float32.
STEP_OUTPUTS = ("q_priority", "td", "entropy", "kl", "ratio", "advantage", "ret")
