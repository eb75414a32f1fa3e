"""The PyTorch peer of alpharl's learning update: the same update, written as a PyTorch user would.

What it computes is ``alpharl.reference.learner.update`` in its one-step mode
(ENV_ONE_STEP), at the same shapes: a shared tanh encoder obs_dim -> HIDDEN ->
HIDDEN; a dueling C51 critic (advantage stream N_ACTIONS x N_ATOMS, value stream
N_ATOMS) with the Double-DQN target (a* from the online net at s', the target
net's distribution at (s', a*), projected onto the supports); a PPO actor
(clipped surrogate, dual clip, entropy bonus); a scalar V head (Huber to the
return); the BCE and AUX perception heads; the V blend controller that turns
V_scalar and V_dq into V_used; one Adam step per module at its own learning
rate; the soft update of the target net (encoder + Q).

How it is written: ``torch.nn`` modules, autograd, ``torch.optim.Adam`` (fused
on CUDA) with one parameter group per module, ``torch._foreach_lerp_`` for the
soft update, and a whole-step ``torch.cuda.graphs`` capture over static
tensors. The replay minibatch is drawn and gathered on the device (proportional
PER: cumsum + searchsorted over p^alpha, importance weights, priorities written
back), as alpharl's trainer draws it from the replay of the book's transitions.

Where it differs from alpharl on purpose (what a PyTorch user would not write):
the controllers' outputs (learning rates, clip, entropy coefficient, tau, PER
alpha/beta) are read once from the ISV and held fixed, where alpharl reads
them from the device each step; there is no non-finite gradient guard; the
encoder runs twice (with gradients on [s_t | s], without on [s' | s_{t+1}]),
where alpharl stacks all rows into one pass and its backward only reads the
first ones.

``check_against_reference`` compares one update with alpharl's float64 NumPy
reference from the same weights and minibatch (the GPU run calls it before
timing; tests/benchmarks/test_torch_peer.py runs it on the CPU).
torch is not a dependency of alpharl: this module is imported only where
torch is installed.
"""
from __future__ import annotations

import copy
import time
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from alpharl import isv as S
from alpharl.batches import EnvBatch, ReplayBatch
from alpharl.cuda_kernels.controllers import v_blend as VB
from alpharl.cuda_kernels.nets import adam as KA
from alpharl.cuda_kernels.nets import losses as KL
from alpharl.cuda_kernels.replay import per as KP
from alpharl.nets import MODULES, NetLayout
from alpharl.reference import learner as RL
from alpharl.reference import nets as R
from alpharl.sizes import HIDDEN, N_ACTIONS, N_ATOMS

#: alpharl's layer name -> the peer's submodule path (PeerNet); the target net (QNet) drops "q.".
LAYER_PATHS = {"enc.l1": "q.l1", "enc.l2": "q.l2", "q.adv": "q.adv", "q.val": "q.val", "pi.out": "pi",
               "v.out": "v", "bce.out": "bce", "aux.out": "aux"}
#: float32 tolerances of the check against the float64 reference: losses (relative), gradients (relative
#: to the largest element of the flat gradient), parameters after one Adam step and the soft update
#: (absolute, in units of the largest learning rate: a first Adam step moves every weight by about lr).
#: A first Adam step is lr g / (|g| + eps): where |g| is near eps it turns a gradient error dg into a
#: step error up to lr eps dg / (|g| + eps)^2, so each weight's bound adds that for the allowed dg.
LOSS_RTOL = 1e-4
GRAD_RTOL = 1e-4
PARAM_ATOL_LR = 1e-2


def adam_step_bound(ref_grads: np.ndarray, lr: float) -> np.ndarray:
    """Per weight: how far a first Adam step may differ when the gradient is off by GRAD_RTOL x max|g|."""
    g = np.abs(ref_grads)
    dg = GRAD_RTOL * g.max()
    return PARAM_ATOL_LR * lr + lr * KA.ADAM_EPS * dg / (g + KA.ADAM_EPS) ** 2


# ----------------------------------------------------------------- networks
class QNet(nn.Module):
    """Shared encoder + dueling C51 head: the part the target network copies."""

    def __init__(self, obs_dim: int, hidden: int = HIDDEN):
        super().__init__()
        self.l1, self.l2 = nn.Linear(obs_dim, hidden), nn.Linear(hidden, hidden)
        self.adv, self.val = nn.Linear(hidden, N_ACTIONS * N_ATOMS), nn.Linear(hidden, N_ATOMS)

    def encode(self, x):
        return torch.tanh(self.l2(torch.tanh(self.l1(x))))

    def logits(self, h):
        """Dueling C51 logits [n, N_ACTIONS, N_ATOMS]: v[z] + adv[a, z] - mean_a adv[a, z]."""
        a = self.adv(h).view(-1, N_ACTIONS, N_ATOMS)
        return self.val(h).unsqueeze(1) + a - a.mean(dim=1, keepdim=True)


class PeerNet(nn.Module):
    """QNet plus the pi, V, BCE and AUX heads on its encoder's output."""

    def __init__(self, obs_dim: int, hidden: int = HIDDEN):
        super().__init__()
        self.q = QNet(obs_dim, hidden)
        self.pi, self.v = nn.Linear(hidden, N_ACTIONS), nn.Linear(hidden, 1)
        self.bce, self.aux = nn.Linear(hidden, 1), nn.Linear(hidden, 1)

    def module_params(self) -> dict[str, list]:
        """Parameters by alpharl module (MODULES order: one Adam group, one learning-rate slot each)."""
        return {"q": [*self.q.adv.parameters(), *self.q.val.parameters()], "pi": list(self.pi.parameters()),
                "v": list(self.v.parameters()), "bce": list(self.bce.parameters()),
                "aux": list(self.aux.parameters()), "enc": [*self.q.l1.parameters(), *self.q.l2.parameters()]}


def _linear_of(net: nn.Module, name: str, target: bool = False) -> nn.Linear:
    path = LAYER_PATHS[name]
    return net.get_submodule(path.removeprefix("q.") if target else path)


@torch.no_grad()
def load_flat(net: nn.Module, layout: NetLayout, flat: np.ndarray, target: bool = False) -> None:
    """Copy alpharl's flat buffer (each layer [W (k_in x n_out); b]) into the nn.Linear layers (weight = W^T)."""
    for name, layer in layout.layers.items():
        if target and not layer.block.stop <= layout.n_target:
            continue
        lin = _linear_of(net, name, target)
        w = torch.as_tensor(np.asarray(flat[layer.w], np.float32).reshape(layer.k_in, layer.n_out))
        lin.weight.copy_(w.T)
        lin.bias.copy_(torch.as_tensor(np.asarray(flat[layer.b], np.float32)))


def flat_of(net: nn.Module, layout: NetLayout, grad: bool = False, target: bool = False) -> np.ndarray:
    """The net's weights (or their gradients) in alpharl's flat layout, float64 on the host."""
    n = layout.n_target if target else layout.n_params
    out = np.zeros(n, np.float64)
    for name, layer in layout.layers.items():
        if layer.block.stop > n:
            continue
        lin = _linear_of(net, name, target)
        w, b = (lin.weight.grad, lin.bias.grad) if grad else (lin.weight, lin.bias)
        out[layer.w] = w.detach().T.double().cpu().numpy().ravel()
        out[layer.b] = b.detach().double().cpu().numpy()
    return out


# ----------------------------------------------------------------- the update
class Hyper(NamedTuple):
    """The ISV values the update reads, held fixed (the peer has no controllers)."""

    gamma: float
    eps: float
    ratio_clamp: float
    entropy_coef: float
    tau: float
    reward_gain: float
    per_alpha: float
    per_beta: float
    lr: tuple  # per module, MODULES order

    @classmethod
    def of(cls, isv) -> "Hyper":
        return cls(float(isv[S.RL_GAMMA]), float(isv[S.RL_PPO_CLIP_EPS]), float(isv[S.RL_PPO_RATIO_CLAMP]),
                   float(isv[S.RL_ENTROPY_COEF]), float(isv[S.RL_TARGET_TAU]), float(R.gain_of(isv)),
                   float(isv[S.RL_PER_ALPHA]), float(isv[S.RL_PER_BETA]),
                   tuple(float(isv[S.RL_LR_Q + k]) for k in range(len(MODULES))))


def c51_project(q, reward, done, gamma: float, z, v_min: float, v_max: float):
    """Project q [n, N_ATOMS] shifted to r + gamma (1 - done) z onto the supports z.

    b = (Tz - V_MIN) / DELTA_Z falls between atoms lo and hi = lo + 1 and splits its mass by distance; when
    b is an exact integer lo == hi and both weights (hi - b, b - lo) are 0, so all of it goes to lo."""
    dz = (v_max - v_min) / (N_ATOMS - 1)
    tz = (reward.unsqueeze(1) + gamma * (1 - done).unsqueeze(1) * z).clamp(v_min, v_max)
    b = ((tz - v_min) / dz).clamp(0, N_ATOMS - 1)
    lo, hi = b.floor(), b.ceil()
    same = lo == hi
    m = torch.zeros_like(q)
    m.scatter_add_(1, lo.long(), torch.where(same, q, q * (hi - b)))
    m.scatter_add_(1, hi.long(), torch.where(same, torch.zeros_like(q), q * (b - lo)))
    return m


class PeerLearner:
    """The peer's networks, optimiser and V blend state; ``update`` is one learning update.

    Built from alpharl's flat parameters and a host ISV, so that it starts where an alpharl learner starts.
    """

    def __init__(self, layout: NetLayout, params: np.ndarray, isv: np.ndarray, device: str | torch.device):
        self.layout, self.device = layout, torch.device(device)
        self.hp = Hyper.of(isv)
        self.net = PeerNet(layout.obs_dim, layout.hidden).to(self.device)
        load_flat(self.net, layout, params)
        self.target = copy.deepcopy(self.net.q).requires_grad_(False)
        cuda = self.device.type == "cuda"
        groups = [{"params": ps, "lr": self.hp.lr[k]} for k, ps in enumerate(self.net.module_params().values())]
        # fused: one kernel for every parameter; capturable: the step counts live on the device (graphs)
        self.opt = torch.optim.Adam(groups, betas=(KA.ADAM_BETA1, KA.ADAM_BETA2), eps=KA.ADAM_EPS,
                                    fused=cuda or None, capturable=cuda)
        lo, hi = R.support_of(isv)
        self.v_min, self.v_max = float(lo), float(hi)
        self.z = torch.linspace(self.v_min, self.v_max, N_ATOMS, device=self.device)
        # The V blend controller's state (device scalars, updated in place: a captured graph keeps them).
        f = lambda slot: torch.tensor(float(isv[slot]), device=self.device)  # noqa: E731
        self.err_ema, self.mag_ema, self.alpha = f(S.RL_V_TRACK_ERR_EMA), f(S.RL_V_SCALAR_MAG_EMA), f(S.RL_V_BLEND_ALPHA)
        self._online = [p for lin in ("l1", "l2", "adv", "val") for p in getattr(self.net.q, lin).parameters()]
        self._target = [p for lin in ("l1", "l2", "adv", "val") for p in getattr(self.target, lin).parameters()]

    def v_dq(self, h):
        """V_dq = sum_z softmax(value stream)[z] z_j."""
        return (torch.softmax(self.net.q.val(h), dim=-1) * self.z).sum(-1)

    @torch.no_grad()
    def v_blend(self, v_scalar, v_dq):
        """rl_v_blend_alpha_controller (seed phase-4.4), branch-free; returns alpha, updates the state in place."""
        obs_err, obs_mag = (v_dq - v_scalar).abs().mean(), v_scalar.abs().mean()
        fresh = (self.err_ema == 0) & (self.mag_ema == 0)
        ok = torch.isfinite(obs_err) & torch.isfinite(obs_mag)
        beta = VB.V_EMA_BETA
        for ema, obs in ((self.err_ema, obs_err), (self.mag_ema, obs_mag)):
            new = torch.where(ema == 0, obs, beta * ema + (1 - beta) * obs)
            ema.copy_(torch.where(ok, new, ema))
        ratio = self.err_ema / self.mag_ema
        step = torch.where(ratio > VB.V_TRACK_BAND * VB.V_TRACK_TARGET, VB.V_ALPHA_STEP,
                           torch.where(ratio < VB.V_TRACK_TARGET / VB.V_TRACK_BAND, -VB.V_ALPHA_STEP, 0.0))
        alpha = torch.where((self.alpha == 0) & fresh, torch.full_like(self.alpha, VB.V_ALPHA_BOOTSTRAP),
                            torch.where(self.mag_ema >= VB.V_DEAD_SIGNAL, self.alpha + step, self.alpha))
        self.alpha.copy_(alpha.clamp(0.0, 1.0))
        return self.alpha

    def losses(self, env: EnvBatch, rep: ReplayBatch) -> dict:
        """Every head's loss (means) and the per-sample C51 cross-entropy (the new priorities)."""
        hp, q = self.hp, self.net.q
        b, m = env.action.shape[0], rep.action.shape[0]
        h = q.encode(torch.cat([env.obs, rep.obs]))        # rows that get gradients: [s_t | s]
        h_t, h_s = h[:b], h[b:]
        with torch.no_grad():
            h_next = q.encode(torch.cat([rep.obs_next, env.obs_next]))
            h_sp, h_tp1 = h_next[:m], h_next[m:]
            # Double DQN: a* from the online net at s', its distribution from the target net
            a_star = (torch.softmax(q.logits(h_sp), -1) * self.z).sum(-1).argmax(dim=1)
            th = self.target.encode(rep.obs_next)
            p_next = torch.softmax(self.target.logits(th)[torch.arange(m, device=th.device), a_star], -1)
            target_m = c51_project(p_next, rep.reward * hp.reward_gain, rep.done, hp.gamma, self.z,
                                   self.v_min, self.v_max)
            # V blend -> V_used at s_t and s_{t+1} -> one-step advantage and return
            v_t = self.net.v(h_t).squeeze(1).detach()
            alpha = self.v_blend(v_t, self.v_dq(h_t.detach()))
            v_used = alpha * v_t + (1 - alpha) * self.v_dq(h_t.detach())
            v_used_next = alpha * self.net.v(h_tp1).squeeze(1) + (1 - alpha) * self.v_dq(h_tp1)
            advantage = env.reward + hp.gamma * (1 - env.done) * v_used_next - v_used
            ret = advantage + v_used

        rows = torch.arange(m, device=h.device)
        logp_q = torch.log_softmax(q.logits(h_s)[rows, rep.action], -1)
        ce = -(target_m * logp_q).sum(-1)
        loss_q = (rep.is_weight * ce).mean()

        logp = torch.log_softmax(self.net.pi(h_t), -1)
        log_ratio = logp.gather(1, env.action.unsqueeze(1)).squeeze(1) - env.logp_old
        ratio = log_ratio.exp()
        s1, s2 = ratio * advantage, ratio.clamp(1 - hp.eps, 1 + hp.eps) * advantage
        obj = torch.where(s1 <= s2, s1, s2)
        dual = hp.ratio_clamp * advantage  # dual clip: a negative advantage's objective is bounded below
        obj = torch.where((advantage < 0) & (dual > obj), dual, obj)
        entropy = -(logp.exp() * logp).sum(-1)
        loss_pi = (-obj - hp.entropy_coef * entropy).mean()

        loss_v = F.huber_loss(self.net.v(h_t).squeeze(1), ret, delta=KL.HUBER_DELTA)
        loss_bce = F.binary_cross_entropy_with_logits(self.net.bce(h_t).squeeze(1), env.label_up)
        loss_aux = 0.5 * F.mse_loss(self.net.aux(h_t).squeeze(1), env.label_ret)
        return {"q": loss_q, "pi": loss_pi, "v": loss_v, "bce": loss_bce, "aux": loss_aux, "q_ce": ce.detach(),
                "entropy": entropy.detach(), "kl": ((ratio - 1) - log_ratio).clamp_min(0).detach()}

    def update(self, env: EnvBatch, rep: ReplayBatch) -> dict:
        """Losses, backward, the heads' grad-norm signals, one Adam step; returns the losses."""
        out = self.losses(env, rep)
        self.opt.zero_grad(set_to_none=True)
        (out["q"] + out["pi"] + out["v"] + out["bce"] + out["aux"]).backward()
        # each module's first weight matrix: the grad_w whose norm the LR controller reads (alpharl's guard)
        first = [ps[0].grad for ps in self.net.module_params().values()]
        out["grad_norms"] = torch.stack([torch.linalg.vector_norm(g) for g in first])
        self.opt.step()
        return out

    @torch.no_grad()
    def soft_update(self) -> None:
        """theta_target <- tau theta + (1 - tau) theta_target over encoder + Q."""
        torch._foreach_lerp_(self._target, self._online, self.hp.tau)


# ------------------------------------------------------------------- replay
def tensor(a, dtype, device):
    """A tensor of host or device data: a numba device array is read in place (__cuda_array_interface__)
    and copied only when dtype or device differ."""
    src = a if hasattr(a, "__cuda_array_interface__") else np.asarray(a)
    return torch.as_tensor(src).to(device=device, dtype=dtype)


def to_torch(batch, device):
    """The same batch type (EnvBatch, ReplayBatch) with tensors on device (actions int64: torch's index type)."""
    return type(batch)(*(None if a is None else tensor(a, torch.long if k in ("action", "idx") else torch.float32,
                                                       device) for k, a in zip(batch._fields, batch)))


class PeerReplay:
    """A filled replay buffer on the device and its proportional PER draw (Schaul et al.)."""

    def __init__(self, obs_s, action, reward, done, obs_s2, device, priority=None):
        """Rows (host or device arrays) of a filled buffer; priority: theirs (0: an empty slot, never drawn),
        None: all 1."""
        f32 = torch.float32
        self.obs_s, self.obs_s2 = tensor(obs_s, f32, device), tensor(obs_s2, f32, device)
        self.action = tensor(action, torch.long, device)
        self.reward, self.done = tensor(reward, f32, device), tensor(done, f32, device)
        self.priority = (torch.ones(len(self.action), device=device) if priority is None
                         else tensor(priority, f32, device).clone())

    def draw(self, m: int, alpha: float, beta: float) -> ReplayBatch:
        """m stratified proportional draws over p^alpha, their importance weights and the gathered rows."""
        p = self.priority.pow(alpha)
        cdf = p.cumsum(0)
        u = (torch.arange(m, device=p.device) + torch.rand(m, device=p.device)) / m * cdf[-1]
        idx = torch.searchsorted(cdf, u).clamp_max(len(p) - 1)
        w = (p[idx] / cdf[-1] * len(p)).pow(-beta)
        return ReplayBatch(self.obs_s[idx], self.action[idx], self.reward[idx], self.done[idx], self.obs_s2[idx],
                           w / w.max(), idx)

    def update_priorities(self, idx, loss) -> None:
        self.priority[idx] = loss.abs() + KP.PRIORITY_EPS


# --------------------------------------------------------------------- timing


class PeerStep:
    """One timed unit: draw + gather the replay minibatch, update, write the priorities (and, with soft,
    the target's soft update); ``eager()`` runs it, ``graph()`` replays its CUDA graph."""

    def __init__(self, learner: PeerLearner, replay: PeerReplay, env: EnvBatch, m: int, soft: bool):
        self.learner, self.replay, self.env, self.m, self.soft = learner, replay, env, m, soft
        self._graph = None

    def eager(self) -> None:
        hp = self.learner.hp
        rep = self.replay.draw(self.m, hp.per_alpha, hp.per_beta)
        out = self.learner.update(self.env, rep)
        self.replay.update_priorities(rep.idx, out["q_ce"])
        if self.soft:
            self.learner.soft_update()

    def capture(self, warmup: int = 3) -> None:
        """Whole-step capture (torch.cuda.graphs): warm up on a side stream, then record one step."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self.eager()
        torch.cuda.current_stream().wait_stream(side)
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            self.eager()

    def graph(self) -> None:
        self._graph.replay()


def time_us(fn, iters: int, warmup: int) -> float:
    """µs per call of fn, CUDA events around iters calls after warmup calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(iters):
        fn()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) * 1e3 / iters


def bench_peer(layout: NetLayout, params, isv, env: EnvBatch, replay_rows: tuple, m: int, soft: bool,
               iters: int, warmup: int, eager_iters: int | None = None, priority=None) -> dict:
    """µs per step of the peer (eager and CUDA graph) on the GPU torch sees; env and replay_rows
    (obs_s, action, reward, done, obs_s2) and priority (None: all 1) are host or device arrays."""
    dev = torch.device("cuda")
    env = to_torch(env, dev)
    env = env._replace(obs=env.obs.reshape(-1, layout.obs_dim), obs_next=env.obs_next.reshape(-1, layout.obs_dim))
    step = PeerStep(PeerLearner(layout, params, isv, dev), PeerReplay(*replay_rows, dev, priority), env, m, soft)
    eager = time_us(step.eager, eager_iters or iters, warmup)
    step.capture()
    return {"torch_eager_us": eager, "torch_graph_us": time_us(step.graph, iters, warmup),
            "torch": torch.__version__}


# ----------------------------------------------------------------- the check
def random_batches(b: int, m: int, obs_dim: int, seed: int) -> tuple[EnvBatch, ReplayBatch]:
    """Host float32 batches with every field random (labels and done 0/1, IS weights in (0, 1])."""
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    bits = lambda n: (rng.uniform(size=n) < 0.5).astype(np.float32)  # noqa: E731
    acts = lambda n: rng.integers(0, N_ACTIONS, n).astype(np.int32)  # noqa: E731
    # log pi_old near the initial policy's -ln 9: ratios on both sides of the clip and the dual clip
    logp_old = (-np.log(N_ACTIONS) + 0.3 * rng.standard_normal(b)).astype(np.float32)
    env = EnvBatch(f(b, obs_dim), acts(b), logp_old, f(b), bits(b), f(b, obs_dim), bits(b), 0.01 * f(b))
    rep = ReplayBatch(f(m, obs_dim), acts(m), f(m), bits(m), f(m, obs_dim),
                      rng.uniform(0.1, 1.0, m).astype(np.float32))
    return env, rep


def check_against_reference(b: int = 32, m: int = 32, obs_dim: int = 24, seed: int = 0,
                            device: str = "cpu") -> dict:
    """One update of the peer against alpharl's float64 NumPy reference (same weights, same minibatch).

    Returns the largest errors and whether each is within its tolerance (LOSS_RTOL, GRAD_RTOL,
    PARAM_ATOL_LR x the largest learning rate) under "ok"."""
    layout = NetLayout(obs_dim)
    p0 = layout.init_params(seed)
    isv = S.bootstrap_vector()
    env_np, rep_np = random_batches(b, m, obs_dim, seed + 1)
    state = {"params": p0, "adam_m": np.zeros_like(p0), "adam_v": np.zeros_like(p0),
             "target": p0[:layout.n_target].copy(), "adam_state": np.zeros(len(MODULES) * KA.STATE_COLS, np.int32)}
    ref = RL.update(state, isv, env_np, rep_np, layout)
    ref_target = RL.soft_update(state["target"], ref.state["params"], layout.n_target, ref.isv)

    dev = torch.device(device)
    peer = PeerLearner(layout, p0, isv, dev)
    out = peer.update(to_torch(env_np, dev), to_torch(rep_np, dev))
    grads = flat_of(peer.net, layout, grad=True)
    peer.soft_update()

    # the loss slots hold plain means (RL_LOSS_Q: the C51 cross-entropy before the IS weights)
    peer_loss = {k: float(out["q_ce"].mean() if k == "q" else out[k].detach()) for k in MODULES[:-1]}
    ref_loss = {k: float(ref.isv[S.RL_LOSS_Q + MODULES.index(k)]) for k in MODULES[:-1]}
    loss_err = max(abs(peer_loss[k] - ref_loss[k]) / max(abs(ref_loss[k]), 1e-30) for k in ref_loss)
    grad_err = float(np.abs(grads - ref.grads).max() / np.abs(ref.grads).max())
    lr = max(peer.hp.lr)
    bound = adam_step_bound(ref.grads, lr)
    param_diff = np.abs(flat_of(peer.net, layout) - ref.state["params"])
    target_diff = np.abs(flat_of(peer.target, layout, target=True) - ref_target)
    param_err, target_err = float(param_diff.max()), float(target_diff.max())
    # the error against each weight's own bound (<= 1 passes); the soft update only shrinks it
    within = max(float((param_diff / bound).max()), float((target_diff / bound[:layout.n_target]).max()))
    alpha_err = abs(float(peer.alpha) - float(ref.isv[S.RL_V_BLEND_ALPHA]))
    res = {"b": b, "m": m, "obs_dim": obs_dim, "device": str(dev), "losses": peer_loss, "loss_rel_err": loss_err,
           "grad_rel_err": grad_err, "param_abs_err": param_err, "target_abs_err": target_err,
           "alpha_abs_err": alpha_err,
           "param_err_over_bound": within,
           "tolerances": {"loss_rel": LOSS_RTOL, "grad_rel": GRAD_RTOL, "param_abs": PARAM_ATOL_LR * lr,
                          "param_abs_near_zero_grad": float(bound.max())}}
    res["ok"] = (loss_err <= LOSS_RTOL and grad_err <= GRAD_RTOL and alpha_err <= 1e-6 and within <= 1.0)
    return res


def main(argv=None) -> int:
    import argparse
    import json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--b", type=int, nargs="+", default=[16, 256])
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    results = [check_against_reference(b, b, device=a.device) for b in a.b]
    print(json.dumps({"torch": torch.__version__, "seconds": round(time.perf_counter() - t0, 1),
                      "checks": results}, indent=1))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
