"""One whole learning update (SPEC §1 steps 7-12) as a fixed sequence of launches.

``Learner.update`` only launches kernels (on its stream, and on side branches
joined back to it): no host sync, no host<->device copy, no allocation (every
scratch buffer is sized once for the largest batch), so the trainer can capture
it in a CUDA graph and repeat it K times per env step, predicated by ``gate``
(int32[1] on the device; 0 = every kernel exits at once and writes nothing).

Rows. One encoder pass serves everything: the stacked input is
[s_t (B) | s (M) | s' (M) | s_{t+1} (B)] (env batch at t, replay minibatch at s
and s', env batch at t+1). Only [s_t | s] get gradients, and they come first.

Sequence (all at the current parameters theta, then one Adam step), 29 launches
(fewer when a [dW; db] product has one batch split: it needs no reduce, ``dw_split``).
Independent chains run on side branches (``alpharl.graph.Branches``: side
streams eagerly, parallel branches of the captured graph), marked [branch]:
 1. rl_stack_obs; [branch] the target encoder (2 GEMMs) and the target's Q
    advantage and value streams on s'; the online encoder (2 GEMMs) on all
    2B + 2M rows;
 2. heads forward: [branch] the Q advantage stream (GEMM) on [s | s']; every
    narrow layer as one GEMM (Launcher.narrow_forward: [branch, from the start]
    gather the five layers' weights side by side, the GEMM, scatter into the
    layers' outputs with V_dq:
    Q value stream and V on all rows, pi, BCE, AUX on s_t);
 3. [branch] (b) V blend: rl_v_blend_alpha_controller (V_scalar, V_dq at s_t: a
    whole-batch reduction, so its own launch), then rl_env_rows, one thread per env
    row: V_used at s_t and s_{t+1}, (c) advantage and return, (d) PPO, (e) value
    (Huber to the return), (f) BCE and AUX losses -> d(loss)/d(head output);
 4. (a) Q: argmax_expected_q on the online net at s' -> a*; rl_c51_loss (target
    net's distribution at (s', a*), projection, CE with IS weights); [branch] the
    advantage stream's dW (GEMM + split reduce); its dX -> dh(s);
 5. narrow layers' backward: [branch] rl_narrow_backward_dw + rl_narrow_dw_reduce
    (dW, db of q.val, pi, V, BCE, AUX); rl_narrow_backward_dx (dh(s_t); q.val's part added
    to dh(s); times tanh');
 6. (g) encoder backward over [s_t | s]: [branch] layer 2's dW + reduce and the
    loss means -> RL_LOSS_*; layer 2's dX, layer 1's dW + reduce. The encoder
    gradient is the sum of all heads' gradients, each head's loss being a mean
    over its own batch;
 7. (h) rl_grad_guard: grad norms -> RL_OBS_*_GRAD_NORM (and with rel_update the
    relative Adam step -> RL_OBS_*_REL_UPDATE), non-finite -> RL_NAN_SKIPS_* and no
    step; rl_adam on every armed module.
A branch writes only buffers nothing else touches until it is joined (the
concurrent dW products have a partials buffer each). All modules step from
gradients taken at the same theta, so the order of the per-module Adam steps
does not matter: one Adam launch updates all six.

Modes (``--rollout T``, the step's phase: ``mode`` of ``update``; see
cuda_kernels/nets/advantage.py). ENV_ONE_STEP (T = 1): as above. ENV_COLLECT
(T > 1, a step that only collects): PPO and V do not learn (zero d(loss)/d(output)
into the backward, the guard leaves pi and V out: ``PPO_V_MASK``, their loss slots
hold). ENV_GAE (every T-th step): the env rows are the rollout's T B transitions
and the t+1 rows only the last slice's s_{t+1} (B rows, ``env.obs_next``); on the
first K-loop iteration (``gae`` given) ``rl_gae`` runs on the ENV_ROWS branch after
the V blend and writes the advantages every later iteration reuses.

Mirror (``mirror``, ``--mirror-policy``): the actor is mirror-equivariant
(cuda_kernels/nets/mirror.py): the stacked rows are [s_t (B) | M s_t (B) | s | s' |
s_{t+1}], the narrow layers run on both env halves, ``rl_mirror_logits`` averages the
pi logits (z = (f(s) + P f(M s)) / 2) before the PPO loss and ``rl_mirror_grads`` splits
its gradient over the two passes (zero V/BCE/AUX gradient on the mirror rows); the
encoder's backward then covers [s_t | M s_t | s]. Acting (``act_forward``) samples from
the same z. Two more launches an update (the average, the split), two an act (the stacked rows, the average).

Policy target (``policy_target``, ``--q-target policy``): the C51 target bootstraps from the acting
policy's mixture sum_a pi(a | s') p_target(. | s', a) instead of Double DQN's (s', a*)
(cuda_kernels/sampling/policy_mixture.py): ``policy_mixture_logp`` reads the policy head's logits at the
s' rows from the narrow layers' output and writes the mixture's log-probabilities, which rl_c51_loss
projects as a target value stream with a zero advantage stream. One more launch an update; a* is still
computed (an output). The policy at s' is the head's own logits f(s'), not the mirror average.

Fused (``fused="on"``, ``--fused-update on``): the whole sequence above as one cooperative launch,
``rl_update_fused`` (cuda_kernels/nets/fused.py: the same maths in nine phases separated by grid
barriers), with one rank and no GAE pass to run (the first iteration of a rollout's update keeps the
sequence). Off by default: on the H200 it measured slower than the sequence at every batch
(benchmarks/results/NOTES.md, 2026-12-03).

``soft_update`` (once per env step, not gated) moves the target net.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from alpharl.batches import EnvBatch, GaeInputs, LearnerOutputs, ReplayBatch
from alpharl.config import FUSED_MODES
from alpharl.cuda_kernels.controllers import v_blend as VB
from alpharl.cuda_kernels.nets import adam as KA
from alpharl.cuda_kernels.nets import fused as KF
from alpharl.cuda_kernels.nets import gemm as G
from alpharl.cuda_kernels.nets import heads as KH
from alpharl.cuda_kernels.nets import losses as KL
from alpharl.cuda_kernels.nets import mirror as KM
from alpharl.cuda_kernels.nets import narrow as KN
from alpharl.cuda_kernels.nets.advantage import ENV_COLLECT, ENV_GAE, ENV_ONE_STEP, ENV_ROWS_BLOCK, rl_env_rows
from alpharl.cuda_kernels.nets.rollout import GAE_BLOCK, rl_gae
from alpharl.cuda_kernels.sampling.argmax_expected_q import argmax_expected_q, argmax_expected_q_grid
from alpharl.cuda_kernels.sampling.policy_mixture import policy_mixture_grid, policy_mixture_logp
from alpharl.graph import Branches
from alpharl.mirror import MIRROR_ACTION, levels_of, mirror_index
from alpharl.nets import MODULES, Launcher, Nets, dw_partial_size
from alpharl.sizes import N_ACTIONS, N_ATOMS, cdiv
from alpharl.tensor_gemm import tensor_gemm
from alpharl.views import Views


#: The update's side branches (``Branches`` indices): the narrow layers' weight gather, the target
#: net's forward, the Q advantage stream's forward, the V blend + per-env-row losses, the Q advantage
#: stream's [dW; db], the narrow layers' [dW; db], the encoder's layer-2 [dW; db] + loss means.
NARROW_W, TARGET, Q_FORWARD, ENV_ROWS, Q_DW, NARROW_DW, ENC_DW = range(7)
N_BRANCHES = 7


#: The guard's module mask of an update that collects only (ENV_COLLECT): every module but pi and V.
PPO_V_MASK = KA.MASK_ALL & ~((1 << MODULES.index("pi")) | (1 << MODULES.index("v")))


class Learner:
    """Scratch buffers and the launch sequence of one learning update for ``nets``.

    max_b / max_m: the largest env batch B and replay minibatch M an update may get;
    max_next: the largest t+1 batch (max_b unless a rollout's env rows are T B and its t+1 rows B).
    Outputs (device, valid for the last update's batches): see ``outputs(b, m, n_next)``.
    """

    def __init__(self, nets: Nets, max_b: int, max_m: int, stream=0, max_next: int | None = None,
                 rel_update: bool = False, ranks=None, tensor_cores: str = "off", fused: str = "off",
                 mirror: bool = False, policy_target: bool = False):
        """rel_update: the grad guard also writes each module's relative update (--adaptive-anchors).
        ranks: alpharl.ranks.RankSync with data-parallel ranks (None: one rank).
        tensor_cores: off | auto | on, which large-layer products run on cuBLASLt's TF32 tensor cores
        (alpharl.tensor_gemm; always none under the CUDA simulator).
        fused: off | on, whether an update runs as the one cooperative launch rl_update_fused (module
        docstring; with ranks, mirror or policy_target always off).
        mirror: the mirror-equivariant actor (module docstring); needs a market observation
        (alpharl.sim.layout's, of whole book levels).
        policy_target: the C51 target under the acting policy instead of Double DQN (module docstring)."""
        if fused not in FUSED_MODES:
            raise ValueError(f"fused {fused!r}: expected one of {', '.join(FUSED_MODES)}")
        self.fused = fused if ranks is None and not mirror and not policy_target else "off"
        self.mirror = bool(mirror)
        self.policy_target = bool(policy_target)
        #: env rows of the encoder per env sample: 2 with the mirror rows
        self.em = 2 if self.mirror else 1
        self.nets = nets
        self.ranks = ranks
        self.rel_update = np.int32(1 if rel_update else 0)
        self.max_b, self.max_m = int(max_b), int(max_m)
        self.max_next = self.max_b if max_next is None else int(max_next)
        self.stream = stream
        self.tc = tensor_gemm(tensor_cores)
        self.launch = Launcher(stream, self.tc)
        self.views = Views()  # the update's row ranges of its buffers, sliced once (alpharl.views)
        self.branches = Branches(stream, N_BRANCHES)
        self.side_launch = [Launcher(side, self.tc) for side in self.branches.sides]
        if self.tc is not None:   # the ones vector of the db products: up to B + M rows (the encoder's)
            self.tc.reserve(stream, self.em * self.max_b + self.max_m)
        lay = nets.layout
        d, h = lay.obs_dim, lay.hidden
        eb_max = self.em * self.max_b   # env rows, the mirror's included
        rows = eb_max + 2 * self.max_m + self.max_next
        grows = eb_max + self.max_m
        nq = N_ACTIONS * N_ATOMS
        f32 = np.float32

        def buf(n, dtype=f32):
            return cuda.device_array(max(int(n), 1), dtype)

        self.x0, self.h1, self.h = buf(rows * d), buf(rows * h), buf(rows * h)
        self.th1, self.th = buf(self.max_m * h), buf(self.max_m * h)
        self.q_adv, self.q_val = buf(2 * self.max_m * nq), buf(rows * N_ATOMS)
        self.t_adv, self.t_val = buf(self.max_m * nq), buf(self.max_m * N_ATOMS)
        self.pi_logits = buf(eb_max * N_ACTIONS)
        self.v_out, self.v_dq = buf(rows), buf(rows)
        self.bce_out, self.aux_out = buf(eb_max), buf(eb_max)
        self.a_star = buf(self.max_m, np.int32)
        if self.policy_target:   # the mixture as a target value stream, a zero advantage stream and action
            self.t_mix = buf(self.max_m * N_ATOMS)
            self.zero_adv = cuda.to_device(np.zeros(self.max_m * nq, f32), stream=stream)
            self.zero_a = cuda.to_device(np.zeros(self.max_m, np.int32), stream=stream)
        self.d_adv, self.d_val, self.td = buf(self.max_m * nq), buf(self.max_m * N_ATOMS), buf(self.max_m)
        self.loss_stride = max(self.max_b, self.max_m)
        self.losses = buf(KL.N_LOSSES * self.loss_stride)
        self.v_used, self.v_used_next = buf(self.max_b), buf(self.max_next)
        self.advantage, self.ret, self.ppo_adv = buf(self.max_b), buf(self.max_b), buf(self.max_b)
        self.d_pi = buf(eb_max * N_ACTIONS)
        self.entropy, self.kl, self.ratio = buf(self.max_b), buf(self.max_b), buf(self.max_b)
        self.dv, self.dbce, self.daux = buf(eb_max), buf(eb_max), buf(eb_max)
        self.dh, self.dh1 = buf(grows * h), buf(grows * h)
        # dW partials for any B <= max_b, M <= max_m (the split count grows with the rows); one buffer
        # per dW product that may run concurrently (the Q advantage stream's, the encoder's two).
        self.partial_q = buf(dw_partial_size(self.max_m, h, nq))
        self.partial_e2 = buf(dw_partial_size(grows, h, h))
        self.partial = buf(dw_partial_size(grows, d, h))
        self.narrow_partial = buf(KN.dw_partial_size(max(eb_max, self.max_m), h))
        # the mirror maps (alpharl.mirror) on the device; one-element stand-ins without the mirror
        src, sign = mirror_index(levels_of(d)) if self.mirror else (np.zeros(1), np.ones(1))
        self.mirror_src = cuda.to_device(np.asarray(src, np.int32), stream=stream)
        self.mirror_sign = cuda.to_device(np.asarray(sign, f32), stream=stream)
        self.mirror_perm = cuda.to_device(np.asarray(MIRROR_ACTION, np.int32), stream=stream)
        self.narrow_offsets = cuda.to_device(KN.layer_offsets(lay))
        self.w_narrow, self.y_narrow = buf((h + 1) * KN.N_COLS), buf(rows * KN.N_COLS)
        self._outputs: dict = {}
        self.fused_grid = KF.fused_grid()
        self.fused_last_phase = KF.N_PHASES   # fewer only when a benchmark times the phases one by one
        self.guard_partial = (buf(KF.guard_partial_size(KF.fused_grid(KF.FUSED_MAX_BLOCKS_PER_SM)))
                              if self.fused != "off" else None)

    # -------------------------------------------------------------- outputs
    def outputs(self, b: int, m: int, n_next: int | None = None) -> LearnerOutputs:
        """Views of the last update's outputs for batch sizes (b, m, n_next = b) (fields: ``LearnerOutputs``)."""
        n_next = b if n_next is None else n_next
        key = (b, m, n_next)
        if key not in self._outputs:
            o_tp1 = self.em * b + 2 * m
            self._outputs[key] = LearnerOutputs(
                q_priority=self.losses[:m], td=self.td[:m], a_star=self.a_star[:m],
                entropy=self.entropy[:b], kl=self.kl[:b], ratio=self.ratio[:b],
                advantage=self.advantage[:b], ret=self.ret[:b], v_used=self.v_used[:b],
                v_used_next=self.v_used_next[:n_next], v_scalar=self.v_out[:b], v_dq=self.v_dq[:b],
                v_scalar_next=self.v_out[o_tp1:o_tp1 + n_next], v_dq_next=self.v_dq[o_tp1:o_tp1 + n_next],
                pi_logits=self.pi_logits[:b * N_ACTIONS].reshape(b, N_ACTIONS))
        return self._outputs[key]

    # --------------------------------------------------------------- update
    def update(self, env: EnvBatch, rep: ReplayBatch, isv, gate, mode: int = ENV_ONE_STEP,
               gae: GaeInputs | None = None) -> LearnerOutputs:
        """Launch one whole learning update (see the module docstring); returns ``outputs(B, M, n_next)``.

        mode: ENV_ONE_STEP, ENV_COLLECT or ENV_GAE; gae (ENV_GAE only, the first K-loop iteration):
        run ``rl_gae`` on the rollout before the env-row tail (later iterations reuse its advantages)."""
        nets, lay, ln, st = self.nets, self.nets.layout, self.launch, self.stream
        L = lay.layers
        p, tg, gr = nets.params, nets.target, nets.grads
        b, m, n_next = env.action.shape[0], rep.action.shape[0], env.obs_next.shape[0]
        if not (1 <= b <= self.max_b and 1 <= m <= self.max_m and 1 <= n_next <= min(b, self.max_next)):
            raise ValueError(f"batch B={b}, M={m}, t+1 rows {n_next} outside this learner's 1..{self.max_b}, "
                             f"1..{self.max_m}, 1..min(B, {self.max_next})")
        rollout_rows = b > n_next and b % n_next == 0  # ENV_GAE: T B env rows, B t+1 rows
        if mode not in (ENV_ONE_STEP, ENV_COLLECT, ENV_GAE) or (mode == ENV_GAE) != rollout_rows or (
                mode != ENV_GAE and b != n_next) or (gae is not None and mode != ENV_GAE):
            raise ValueError(f"mode {mode} with B={b}, t+1 rows {n_next}, gae {gae is not None}")
        d, h = lay.obs_dim, lay.hidden
        nq = N_ACTIONS * N_ATOMS
        bm = self.em * b   # env rows of the encoder: [s_t | M s_t] with the mirror
        rows, grows = bm + 2 * m + n_next, bm + m
        if gae is None and self.fused == "on":
            self._update_fused(env, rep, isv, gate, mode, b, m, n_next)
            return self.outputs(b, m, n_next)
        o_s, o_sp, o_tp1 = bm, bm + m, bm + 2 * m
        i32 = np.int32
        TANH, NONE = G.ACT_TANH, G.ACT_NONE
        eb = lambda n: (cdiv(n, G.ELEMWISE_BLOCK), G.ELEMWISE_BLOCK, st)  # noqa: E731
        V = self.views
        hv = lambda buf, r0, r1: V(buf, r0 * h, r1 * h)  # noqa: E731  (rows [r0, r1) of a [*, hidden] buffer)
        offs = self.narrow_offsets

        br, sl = self.branches, self.side_launch
        # 1-2. forward at the current parameters; the target net's forward on its own branch
        KH.rl_stack_obs[eb(rows * d)](gate, V.flat(env.obs), V.flat(rep.obs), V.flat(rep.obs_next),
                                      V.flat(env.obs_next), i32(b), i32(m), i32(n_next), i32(d), i32(bm - b),
                                      self.mirror_src, self.mirror_sign, self.x0)
        br.fork(NARROW_W)
        sl[NARROW_W].narrow_gather_w(gate, p, offs, self.w_narrow)
        br.fork(TARGET)
        sl[TARGET].forward(gate, V(self.x0, o_sp * d, o_tp1 * d), m, L["enc.l1"], tg, self.th1, TANH)
        sl[TARGET].forward(gate, self.th1, m, L["enc.l2"], tg, self.th, TANH)
        sl[TARGET].forward(gate, self.th, m, L["q.adv"], tg, self.t_adv, NONE)
        sl[TARGET].forward(gate, self.th, m, L["q.val"], tg, self.t_val, NONE)
        ln.forward(gate, self.x0, rows, L["enc.l1"], p, self.h1, TANH)
        ln.forward(gate, self.h1, rows, L["enc.l2"], p, self.h, TANH)
        br.fork(Q_FORWARD)
        sl[Q_FORWARD].forward(gate, hv(self.h, o_s, o_tp1), 2 * m, L["q.adv"], p, self.q_adv, NONE)
        br.join(NARROW_W)
        ln.narrow_forward(gate, self.h, rows, bm, p, offs, self.w_narrow, self.y_narrow, isv,
                          (self.q_val, self.v_out, self.pi_logits, self.bce_out, self.aux_out, self.v_dq), gather=False)
        br.join(Q_FORWARD)

        # 3. on a branch: (b) V blend (seed phase-4.4: alpha from V_scalar vs V_dq at s_t, a whole-batch
        # reduction), then per env row V_used at t and t+1, (c) advantage and return, (d) PPO, (e) value,
        # (f) BCE and AUX
        s = self.loss_stride
        pst = br.fork(ENV_ROWS)
        VB.rl_v_blend_alpha_controller[1, VB.V_BLEND_CTRL_BLOCK, pst](V(self.v_out, 0, b), V(self.v_dq, 0, b), i32(b),
                                                                      isv, gate)
        if gae is not None:  # GAE over the rollout: its last slice's and s_T's values from this forward
            last = b - n_next
            rl_gae[1, GAE_BLOCK, pst](
                gate, gae.reward, gae.done, gae.v_used, V(self.v_out, last, b), V(self.v_dq, last, b),
                V(self.v_out, o_tp1, o_tp1 + n_next), V(self.v_dq, o_tp1, o_tp1 + n_next), i32(b // n_next),
                i32(n_next), np.float32(gae.lam), isv, self.advantage, self.ret, self.ppo_adv)
        mg = (cdiv(b * N_ACTIONS, KM.MIRROR_BLOCK), KM.MIRROR_BLOCK, pst)
        if self.mirror:   # z = (f(s) + P f(M s)) / 2 into the s_t rows, before the PPO loss reads them
            KM.rl_mirror_logits[mg](gate, self.pi_logits, i32(b), self.mirror_perm)
        rl_env_rows[cdiv(b, ENV_ROWS_BLOCK), ENV_ROWS_BLOCK, pst](
            gate, i32(mode), V(self.v_out, 0, b), V(self.v_dq, 0, b), V(self.v_out, o_tp1, o_tp1 + n_next),
            V(self.v_dq, o_tp1, o_tp1 + n_next), env.reward, env.done, self.pi_logits, env.action, env.logp_old,
            self.ppo_adv, self.bce_out, env.label_up, self.aux_out, env.label_ret, i32(b), i32(n_next), isv, i32(s),
            self.v_used, self.v_used_next, self.advantage, self.ret, self.d_pi, self.entropy, self.kl, self.ratio,
            self.dv, self.dbce, self.daux, self.losses)
        if self.mirror:   # dL/dz over the two passes; the mirror rows feed no other head
            KM.rl_mirror_grads[mg](gate, self.d_pi, self.dv, self.dbce, self.daux, i32(b), self.mirror_perm)

        # 4. (a) Q: Double-DQN C51 target, CE with IS weights; the advantage stream's [dW; db] on a branch, its dX
        argmax_expected_q[(*argmax_expected_q_grid(m), st)](
            gate, V(self.q_adv, m * nq, 2 * m * nq), V(self.q_val, o_sp * N_ATOMS, o_tp1 * N_ATOMS), i32(m), isv,
            self.a_star)
        br.join(TARGET)
        t_adv, t_val, a_t = self.t_adv, self.t_val, self.a_star
        if self.policy_target:   # the target under the acting policy at s' (module docstring)
            policy_mixture_logp[(*policy_mixture_grid(m), st)](gate, self.y_narrow, i32(o_sp), self.t_adv,
                                                               self.t_val, i32(m), self.t_mix)
            t_adv, t_val, a_t = self.zero_adv, self.t_mix, self.zero_a
        KL.rl_c51_loss[(*KL.c51_grid(m), st)](
            gate, V(self.q_adv, 0, m * nq), V(self.q_val, o_s * N_ATOMS, o_sp * N_ATOMS), rep.action, t_adv,
            t_val, a_t, rep.reward, rep.done, rep.is_weight, i32(m), isv, self.d_adv, self.d_val,
            V(self.losses, 0, m), self.td)
        h_s = hv(self.h, o_s, o_sp)
        br.fork(Q_DW)
        sl[Q_DW].backward_dw(gate, h_s, self.d_adv, m, L["q.adv"], gr, self.partial_q)
        ln.backward_dx(gate, self.d_adv, m, L["q.adv"], p, hv(self.dh, o_s, o_sp), accumulate=False)
        br.join(ENV_ROWS)

        # 5. narrow layers' backward: [dW; db] of q.val (rows s), pi, V, BCE, AUX (rows s_t); dh(s_t), dh(s) += q.val's
        n_chunks, chunk_rows = KN.dw_split(max(bm, m))
        wst = br.fork(NARROW_DW)
        KN.rl_narrow_backward_dw[KN.dw_grid(max(bm, m), h), KN.DW_THREADS, wst](
            gate, self.h, self.d_val, self.dv, self.d_pi, self.dbce, self.daux, i32(bm), i32(m), i32(h),
            i32(chunk_rows), self.narrow_partial)
        KN.rl_narrow_dw_reduce[cdiv((h + 1) * KN.N_COLS, KN.NARROW_BLOCK), KN.NARROW_BLOCK, wst](
            gate, self.narrow_partial, offs, i32(n_chunks), i32(h), gr)
        KN.rl_narrow_backward_dx[KN.dx_grid(grows, h), KN.NARROW_BLOCK, st](
            gate, self.h, p, offs, self.d_val, self.dv, self.d_pi, self.dbce, self.daux, i32(bm), i32(m), i32(h),
            self.dh)

        # 6. (g) encoder backward over [s_t | s]: dh holds d(loss)/d(pre-activation of layer 2); layer 2's
        # [dW; db] and the loss means on a branch, layer 2's dX and layer 1's [dW; db] on the main stream
        h1_g = hv(self.h1, 0, grows)
        dh_g = hv(self.dh, 0, grows)
        est = br.fork(ENC_DW)
        sl[ENC_DW].backward_dw(gate, h1_g, dh_g, grows, L["enc.l2"], gr, self.partial_e2)
        n_pv = 0 if mode == ENV_COLLECT else b
        KL.rl_loss_means[KL.N_LOSSES, KL.REDUCE_BLOCK, est](gate, self.losses, i32(s), i32(m), i32(b), i32(n_pv), isv)
        ln.backward_dx(gate, dh_g, grows, L["enc.l2"], p, hv(self.dh1, 0, grows), accumulate=False, y_tanh=h1_g)
        ln.backward_dw(gate, V(self.x0, 0, grows * d), hv(self.dh1, 0, grows), grows, L["enc.l1"], gr, self.partial)
        br.join(NARROW_DW)
        br.join(Q_DW)
        br.join(ENC_DW)

        # 7. with data-parallel ranks: every head's gradient is complete here (all branches joined), so the
        # gradient and the batch statistics of the ISV are averaged over the ranks before the guard reads them
        if self.ranks is not None:
            self.ranks.learn(gr, isv, gate)
        # (h) grad norms + non-finite guard, Adam on every module
        mask = PPO_V_MASK if mode == ENV_COLLECT else KA.MASK_ALL
        KA.rl_grad_guard[KA.N_MODULES, KA.GUARD_BLOCK, st](gate, gr, p, nets.adam_m, nets.adam_v, nets.table, isv,
                                                            nets.adam_state, i32(mask), self.rel_update)
        KA.rl_adam[eb(lay.n_params)](gate, p, gr, nets.adam_m, nets.adam_v, i32(lay.n_params), nets.table, isv,
                                     nets.adam_state)
        return self.outputs(b, m, n_next)

    def _update_fused(self, env: EnvBatch, rep: ReplayBatch, isv, gate, mode: int, b: int, m: int, n_next: int):
        """The whole update as one cooperative launch (cuda_kernels/nets/fused.py), the sequence's buffers."""
        nets, lay = self.nets, self.nets.layout
        L = lay.layers
        i32 = np.int32
        mask = PPO_V_MASK if mode == ENV_COLLECT else KA.MASK_ALL
        KF.rl_update_fused[self.fused_grid, KF.FUSED_BLOCK, self.stream](
            gate, i32(mode), isv, nets.params, nets.target, nets.grads, nets.adam_m, nets.adam_v, nets.table,
            nets.adam_state, self.narrow_offsets, i32(lay.obs_dim), i32(lay.hidden), i32(L["enc.l1"].offset),
            i32(L["enc.l2"].offset), i32(L["q.adv"].offset), i32(L["q.val"].offset), i32(lay.n_params),
            self.views.flat(env.obs), self.views.flat(env.obs_next),
            env.reward, env.done, env.action, env.logp_old, env.label_up, env.label_ret, self.ppo_adv,
            self.views.flat(rep.obs), self.views.flat(rep.obs_next), rep.action, rep.reward, rep.done,
            rep.is_weight, i32(b), i32(m), i32(n_next), i32(self.loss_stride), i32(mask), self.rel_update,
            i32(self.fused_last_phase),
            self.h1, self.h, self.th1, self.th, self.q_adv, self.q_val, self.t_adv, self.t_val, self.pi_logits,
            self.v_out, self.v_dq, self.bce_out, self.aux_out, self.a_star, self.d_adv, self.d_val, self.td,
            self.losses, self.v_used, self.v_used_next, self.advantage, self.ret, self.d_pi, self.entropy, self.kl,
            self.ratio, self.dv, self.dbce, self.daux, self.dh, self.dh1, self.guard_partial)

    def act_forward(self, obs, gate):
        """pi logits [b, N_ACTIONS] of the online net at obs [b, obs_dim] (b <= max_b), for acting.

        Three launches (encoder, pi head; five with the mirror: the stacked rows [obs | M obs] and the
        average) into this learner's scratch rows; the
        next update overwrites them, so sample the action before it runs.
        """
        b = obs.shape[0]
        if not 1 <= b <= self.max_b:
            raise ValueError(f"batch B={b} outside this learner's 1..{self.max_b}")
        L, p, ln = self.nets.layout.layers, self.nets.params, self.launch
        x, n = self.views.flat(obs), b
        if self.mirror:   # [obs | M obs] through encoder and pi head, then z into the first b rows
            n, d = 2 * b, self.nets.layout.obs_dim
            KH.rl_stack_obs[cdiv(n * d, G.ELEMWISE_BLOCK), G.ELEMWISE_BLOCK, self.stream](
                gate, x, x, x, x, np.int32(b), np.int32(0), np.int32(0), np.int32(d), np.int32(b), self.mirror_src,
                self.mirror_sign, self.x0)
            x = self.x0
        ln.forward(gate, x, n, L["enc.l1"], p, self.h1, G.ACT_TANH)
        ln.forward(gate, self.h1, n, L["enc.l2"], p, self.h, G.ACT_TANH)
        ln.forward(gate, self.h, n, L["pi.out"], p, self.pi_logits, G.ACT_NONE)
        if self.mirror:
            KM.rl_mirror_logits[cdiv(b * N_ACTIONS, KM.MIRROR_BLOCK), KM.MIRROR_BLOCK, self.stream](
                gate, self.pi_logits, np.int32(b), self.mirror_perm)
        return self.views(self.pi_logits, 0, b * N_ACTIONS, (b, N_ACTIONS))

    def soft_update(self, isv) -> None:
        """theta_target <- tau theta + (1 - tau) theta_target over encoder + Q (once per env step, not gated)."""
        n = self.nets.layout.n_target
        KA.rl_soft_update[cdiv(n, G.ELEMWISE_BLOCK), G.ELEMWISE_BLOCK, self.stream](
            self.nets.target, self.nets.params, np.int32(n), isv)
