"""One typed configuration of a training run, with derived values.

``TrainConfig`` holds every option of ``alpharl train``; a TOML file
(``--config run.toml``) fills it, command-line options override the file.
Nested sections ``[sim]`` and ``[synth]`` map onto ``SimParams`` and
``SynthParams``. A file's values are checked against each field's type
(``steps = "many"`` names the key); ``validate()`` checks ranges, every float
(of the options and of both sections) finite, and gives one-line errors naming
the option.
"""
from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from alpharl.isv import K_MAX
from alpharl.sim.params import SimParams, SynthParams
from alpharl.tensor_gemm import MODES as TENSOR_CORE_MODES
from alpharl.windows import DEFAULT_TRAIN_WINDOW, WindowError, parse_window

#: The choices of ``fused_update`` (alpharl.learner takes them from here, where the options are checked
#: before anything heavy is imported).
FUSED_MODES = ("off", "on")
#: The choices of ``q_target``: the C51 target's action at s' (Double DQN's greedy a*, or the acting policy's
#: mixture over its actions).
Q_TARGET_GREEDY = "greedy"
Q_TARGET_POLICY = "policy"
Q_TARGETS = (Q_TARGET_GREEDY, Q_TARGET_POLICY)

BACKENDS = ("auto", "cuda", "sim", "numpy")
#: Largest --reward-scale: a reward of $1 then already spans 1000 units, far past any C51 support.
REWARD_SCALE_MAX = 1e3
#: Longest --rollout, and most transitions in one rollout (T x B): the rollout lives on the device and its
#: update step runs the learning update on all of them at once (2^21 rows: B = 65536 at T = 32).
ROLLOUT_MAX = 1024
ROLLOUT_ROWS_MAX = 2**21
#: Largest |fee| ([sim] maker_fee, taker_fee): $1 a share, or the whole value of a fill.
FEE_MAX = 1.0


#: A training run's reward and episodes, picked by the held-out study (benchmarks/results/LEARNING.md):
#: horizon episodes and a linear holding penalty of 0.3 of the market's own per-step move. With them,
#: the three scale-free signals (reward_norm, adaptive_support, adaptive_anchors) and T = 16 rollouts with
#: GAE (the TrainConfig defaults), five LOBSTER days x five seeds held out made 12.0k-49.4k $ a day with
#: per-value fees (at or above join on 3 of 5 days) where the seeds' plain path made 3.2k-28.4k (0 of 5);
#: with per-share fees neither meets a target: the agent stops trading on three days (mean over the days
#: -1.8k, worst seed -26.0k) where the plain path's seeds spread over +-37k (mean +0.9k).
#: The simulator's own defaults (SimParams) stay the plain market's; the study's market options (fees,
#: queue, pegged quotes) are a config's choice, not a learning default.
STUDY_SIM_DEFAULTS = {"episode_end": "horizon", "inventory_penalty": 0.3, "inventory_penalty_unit": "sigma"}
#: The seeds' plain path, the defaults before the study picked them: PPO / V on every step's one-step TD
#: advantage, fixed signals, and (SimParams' own defaults) round-trip episodes without a holding penalty.
#: ``TrainConfig.plain()``; benchmarks/studies/default.toml is the same in a file.
PLAIN_OPTIONS = {"reward_norm": False, "adaptive_support": False, "adaptive_anchors": False, "rollout": 1}


class ConfigError(ValueError):
    """A bad option or config file (message names it)."""


@dataclass
class TrainConfig:
    steps: int = 1000
    """Training steps (each steps all B backtests once and runs K learning iterations)."""
    b: int = 16
    """B, the number of backtests run side by side."""
    seed: int = 0
    """Seed of everything: network init, PRNG states, episode starts, replay sampling."""
    data: str | list[str] | None = None
    """LOBSTER zip, CSV pair, cached Arrow file, folder or glob, or a list of them (each file one
    stream of the simulator: alpharl.dataset); None = the embedded sample."""
    train_window: str = DEFAULT_TRAIN_WINDOW
    """A:B, the fractions of each file's event stream training reads (the rest is held out)."""
    holdout_files: str | None = None
    """Glob on the file name: matching files are held out of training whole."""
    synthetic: bool = False
    """Train on the synthetic Poisson order-flow market instead of replayed data."""
    features: bool = False
    """step_synthetic: train on the synthetic feature/reward process (no order book) instead
    of the simulator — exercises learning and controllers on a problem with a known answer."""
    backend: str = "auto"
    """cuda (kernels on the GPU), sim (the same kernels under Numba's CUDA simulator),
    numpy (the NumPy references); auto = cuda when a GPU is present, else numpy."""
    graph: bool = True
    """Capture the step as a CUDA graph and replay it (cuda backend); False = eager launches."""
    replay_capacity: int = 65536
    """Transitions held by the prioritized replay (rounded down to a multiple of B)."""
    minibatch: int = 64
    """Q minibatch size M drawn from the replay per learning iteration."""
    k_max: int = 4
    """Learning iterations captured per step (the K-loop's ceiling, at most isv.K_MAX); the
    K controller picks K <= k_max on the device. 1 = exactly one update per env step."""
    reward_scale: float = 0.01
    """Rewards ($) are multiplied by this before learning, so returns fit the C51 support."""
    rollout: int = 16
    """T, env steps per on-policy rollout: 1 = PPO and V learn every step on its B transitions with the
    one-step TD advantage; T > 1 = they learn every T-th step on the last T x B transitions with GAE(lambda)
    advantages (normalised over the rollout); Q, BCE and AUX learn every step either way. Default 16: the
    held-out study's pick (see STUDY_SIM_DEFAULTS)."""
    gae_lambda: float = 0.95
    """lambda of GAE(lambda) with --rollout T > 1 (0: one-step TD over the rollout, 1: Monte Carlo to its end)."""
    rollout_rows: int = 8192
    """With --rollout T > 1: the most transitions one PPO / V update learns from. 0 = all T x B; R > 0 with
    T x B > R: the whole T-step trajectories of B // ceil(T B / R) backtests, a different subset each update
    (alpharl.rollout). Bounds the update's cost at large B; at T x B <= R (B <= 512 at T = 16) it changes
    nothing. 8192: on the H200 at B = 4096, T = 16 the step is 314 µs against 377 µs with all 65,536 rows,
    the held-out PnL the same on four of five days (benchmarks/results/study_2026-12-03_rows)."""
    reward_norm: bool = True
    """Scale the rewards that enter learning by 1 / RMS of the running discounted return (statistics
    on the device, in the ISV; rl_reward_norm), so returns have RMS 1 whatever the market: reward_scale
    then cancels. Off: reward x reward_scale as is. On by default (see STUDY_SIM_DEFAULTS)."""
    adaptive_support: bool = True
    """Let the C51 support follow the return scale: V_MAX = 5 running return RMS (learning units),
    V_MIN = -V_MAX, moved at the target network's rate tau from the bootstrap +-10. Off: fixed +-10. On by
    default (see STUDY_SIM_DEFAULTS)."""
    adaptive_anchors: bool = True
    """Anchor the controllers on observed, scale-free signals (cuda_kernels/controllers/anchors.py):
    each head's LR aims at a relative Adam step of 1e-3, the PPO clip at a KL relative to the entropy,
    the entropy coefficient at an entropy from tau, K relative to the best baseline fit seen.
    Off: the fixed targets. On by default (see STUDY_SIM_DEFAULTS)."""
    pace_policy: bool = False
    """With adaptive_anchors: the policy head's relative step is not the shared 1e-3 but paced by the KL each PPO
    update's own steps add (against the KL anchor), and the PPO clip is set from that trust region instead of
    its KL law (cuda_kernels/controllers/anchors.py). Measured worse held out (study_2026-12-03_pace), so
    off. Off: the shared target."""
    k_noise_band: bool = False
    """With adaptive_anchors: K steps up only where the advantage-variance ratio is also above its own running
    mean by more than K_NOISE_Z of its standard deviations (both measured over the K floor's memory), so K does
    not walk to K_MAX on the ratio's scatter where the baseline explains little
    (cuda_kernels/controllers/anchors.py). Off: the band alone."""
    mirror_policy: bool = False
    """A mirror-equivariant actor: the policy acts on and learns through the logits averaged with those of the
    market's buy/sell mirror image, z(s) = (f(s) + P f(M s)) / 2 (alpharl.mirror; cuda_kernels/nets/mirror.py),
    so it cannot carry a constant tilt to one side. Off: the pi head's logits f(s) as they are."""
    q_target: str = Q_TARGET_GREEDY
    """greedy | policy: what the C51 target bootstraps from at s'. greedy: Double DQN, the target net's
    distribution at a* = argmax of the online net's expectation (SPEC), so Q values the greedy policy.
    policy: the target net's distributions mixed over the acting policy, sum_a pi(a | s') Z(s', a)
    (cuda_kernels/sampling/policy_mixture.py), so Q values the policy that acts and the C51 mean V_dq can
    track the scalar value head (the V blend's alpha can leave 1)."""
    tensor_cores: str = "off"
    """off | auto | on: run the large layers' products (encoder layer 2, Q advantage stream) on TF32 tensor
    cores through cuBLASLt (needs nvmath-python, the extra 'tc'); auto where measured faster
    (alpharl.tensor_gemm.TC_MIN_ROWS). The numba kernels always run under the CUDA simulator."""
    fused_update: str = "off"
    """off | on: run each learning update as one cooperative launch (rl_update_fused, nine phases between
    grid barriers) instead of its sequence of launches. Measured slower at every batch on the H200
    (benchmarks/results/NOTES.md), so off; the same results up to float32 summation order."""
    gpus: int = 1
    """G, data-parallel ranks (one process per GPU, each with B/G backtests, its own replay and simulator
    state; gradients and the ISV's batch statistics averaged over the ranks every update: alpharl.ranks).
    B must divide by G; replay_capacity and minibatch are per rank."""
    diag_every: int = 50
    """Steps between diagnostic rows (one host read of the ISV each)."""
    checkpoint_every: int = 1000
    """Steps between checkpoints (0: only at the end)."""
    run_dir: str | None = None
    """Run directory; None = runs/<timestamp>-<seed>."""
    sim: SimParams = field(default_factory=lambda: SimParams(**STUDY_SIM_DEFAULTS))
    """The backtests' fixed parameters ([sim] in TOML); a training run's reward and episodes default to
    STUDY_SIM_DEFAULTS, every other field to SimParams' own."""
    synth: SynthParams = field(default_factory=SynthParams)
    """The synthetic market ([synth] in TOML)."""

    # ------------------------------------------------------------ derived
    @property
    def capacity(self) -> int:
        return max(self.b, (self.replay_capacity // self.b) * self.b)

    def validate(self) -> "TrainConfig":
        bad = []
        if self.steps < 0:
            bad.append(f"--steps {self.steps}: must be >= 0")
        if self.b < 1:
            bad.append(f"--b {self.b}: must be >= 1")
        if self.gpus < 1:
            bad.append(f"--gpus {self.gpus}: must be >= 1")
        elif self.b >= 1 and self.b % self.gpus:
            bad.append(f"--b {self.b} does not divide by --gpus {self.gpus}: every rank runs B/G backtests")
        if self.tensor_cores not in TENSOR_CORE_MODES:
            bad.append(f"--tensor-cores {self.tensor_cores!r}: expected one of {', '.join(TENSOR_CORE_MODES)}")
        if self.q_target not in Q_TARGETS:
            bad.append(f"--q-target {self.q_target!r}: expected one of {', '.join(Q_TARGETS)}")
        if self.fused_update not in FUSED_MODES:
            bad.append(f"--fused-update {self.fused_update!r}: expected one of {', '.join(FUSED_MODES)}")
        if self.backend not in BACKENDS:
            bad.append(f"--backend {self.backend!r}: expected one of {', '.join(BACKENDS)}")
        if not 1 <= self.k_max <= K_MAX:
            bad.append(f"--k-max {self.k_max}: must be in 1..{K_MAX}")
        if self.minibatch < 1:
            bad.append(f"--minibatch {self.minibatch}: must be >= 1")
        if self.replay_capacity < 1:
            bad.append(f"--replay-capacity {self.replay_capacity}: must be >= 1")
        if self.diag_every < 1:
            bad.append(f"--diag-every {self.diag_every}: must be >= 1")
        if self.checkpoint_every < 0:
            bad.append(f"--checkpoint-every {self.checkpoint_every}: must be >= 0")
        try:
            parse_window(self.train_window)
        except WindowError as exc:
            bad.append(str(exc))
        bad += _non_finite(self)
        if not 1 <= self.rollout <= ROLLOUT_MAX:
            bad.append(f"--rollout {self.rollout}: must be in 1..{ROLLOUT_MAX}")
        elif self.rollout > 1 and self.rollout * self.b > ROLLOUT_ROWS_MAX:
            bad.append(f"--rollout {self.rollout} x --b {self.b}: a rollout holds at most {ROLLOUT_ROWS_MAX} "
                       "transitions")
        if self.rollout_rows < 0:
            bad.append(f"--rollout-rows {self.rollout_rows}: must be >= 0 (0: all of the rollout's transitions)")
        elif 0 < self.rollout_rows < self.rollout:
            bad.append(f"--rollout-rows {self.rollout_rows}: below --rollout {self.rollout}, not one backtest's "
                       "trajectory")
        if self.pace_policy and not self.adaptive_anchors:
            bad.append("--pace-policy needs --adaptive-anchors: it moves one of the anchors' targets")
        if self.mirror_policy and self.features:
            bad.append("--mirror-policy needs the order book's observation, not --features (which has no buy and "
                       "sell side to exchange)")
        if self.k_noise_band and not self.adaptive_anchors:
            bad.append("--k-noise-band needs --adaptive-anchors: it widens the anchored K band")
        if not 0.0 <= self.gae_lambda <= 1.0:
            bad.append(f"--gae-lambda {self.gae_lambda}: must be in [0, 1]")
        if not 0 < self.reward_scale <= REWARD_SCALE_MAX:
            bad.append(f"--reward-scale {self.reward_scale}: must be in (0, {REWARD_SCALE_MAX:g}]")
        for fee in ("maker_fee", "taker_fee"):
            if not abs(getattr(self.sim, fee)) <= FEE_MAX:
                bad.append(f"[sim] {fee} = {getattr(self.sim, fee)}: must be in [-{FEE_MAX:g}, {FEE_MAX:g}]")
        if self.synthetic:   # the synthetic market has no clock and names no orders
            for key, on in (("entry_latency_ns", self.sim.entry_latency_ns > 0),
                            ("feed_latency_ns", self.sim.feed_latency_ns > 0),
                            ("response_latency_ns", self.sim.response_latency_ns > 0),
                            ("queue_model", self.sim.queue_model == "l3_fifo"),
                            ("episode_steps", self.sim.episode_steps == 0)):   # one pass: the data's end
                if on:
                    bad.append(f"[sim] {key} = {getattr(self.sim, key)!r}: needs replayed LOBSTER data, "
                               "not --synthetic")
        if bad:
            raise ConfigError(bad[0])
        return self

    # ------------------------------------------------------------ (de)serialise
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def plain(cls, **kw) -> "TrainConfig":
        """The seeds' plain path (PLAIN_OPTIONS, SimParams' own defaults), other fields as given."""
        return cls(**({**PLAIN_OPTIONS, "sim": SimParams()} | kw))

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "config") -> "TrainConfig":
        d = dict(d)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown option {unknown[0]!r}")
        _check_types(cls, d, source)
        if isinstance(d.get("sim"), dict):
            try:
                d["sim"] = SimParams.upgrade_keys(d["sim"])   # older configs' partial_fills
            except ValueError as exc:
                raise ConfigError(f"{source}: [sim] {exc}") from None
        for section, params in (("sim", SimParams), ("synth", SynthParams)):
            if isinstance(d.get(section), dict):
                _check_types(params, d[section], source, prefix=f"[{section}] ")
            elif section in d:
                raise ConfigError(f"{source}: {section} = {d[section]!r}: expected a [{section}] section")
        try:
            if "sim" in d:
                d["sim"] = SimParams(**{**STUDY_SIM_DEFAULTS, **d["sim"]})
            if "synth" in d:
                s = dict(d["synth"])
                if "limit_rate" in s:
                    s["limit_rate"] = tuple(s["limit_rate"])
                d["synth"] = SynthParams(**s)
            return cls(**d)
        except TypeError as exc:   # unknown key of a section
            raise ConfigError(f"{source}: {exc}") from None
        except ValueError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    @classmethod
    def from_toml(cls, path: Path | str) -> "TrainConfig":
        return cls.from_dict(read_toml(path), source=str(path))

    def with_overrides(self, **overrides) -> "TrainConfig":
        """Command-line options (None = not given) override the file's values; a dotted key
        (``sim.obs_levels``) overrides one field of a section."""
        given = {k: v for k, v in overrides.items() if v is not None}
        sections: dict[str, dict] = {}
        for key in [k for k in given if "." in k]:
            section, name = key.split(".", 1)
            sections.setdefault(section, {})[name] = given.pop(key)
        for section, values in sections.items():
            try:
                given[section] = dataclasses.replace(given.get(section, getattr(self, section)), **values)
            except ValueError as exc:   # a section's own check (SimParams.__post_init__) names the key
                raise ConfigError(str(exc)) from None
        return dataclasses.replace(self, **given)

    def to_toml(self) -> str:
        """The resolved config as TOML (written into every run directory)."""
        lines = []
        flat = {k: v for k, v in self.to_dict().items() if not isinstance(v, dict)}
        for k, v in flat.items():
            if v is not None:
                lines.append(f"{k} = {_toml_value(v)}")
        for section in ("sim", "synth"):
            lines.append(f"\n[{section}]")
            for k, v in self.to_dict()[section].items():
                lines.append(f"{k} = {_toml_value(v)}")
        return "\n".join(lines) + "\n"


def read_toml(path: Path | str) -> dict[str, Any]:
    """A config file's keys as written (the keys it sets, before any defaults)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


#: What a config file's value must be, by the field's annotation, and how the error names it.
_TYPE_CHECKS = {
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "float": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "str | None": (lambda v: isinstance(v, str), "a string"),
    "str | list[str] | None": (lambda v: isinstance(v, str) or (isinstance(v, list) and v != [] and all(
        isinstance(x, str) for x in v)), "a string or a list of strings"),
    "tuple": (lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool)
                                                             for x in v), "a list of integers"),
}


def _check_types(cls, d: dict, source: str, prefix: str = "") -> None:
    """Every value of ``d`` has its field's type (ints where floats go are fine); one line naming the key."""
    for f in dataclasses.fields(cls):
        check = _TYPE_CHECKS.get(str(f.type))
        if f.name in d and check is not None and not check[0](d[f.name]):
            raise ConfigError(f"{source}: {prefix}{f.name} = {d[f.name]!r}: expected {check[1]}")


def _non_finite(config: TrainConfig) -> list[str]:
    """One message per float option (top level, [sim], [synth]) that is NaN or infinite."""
    bad = []
    for prefix, obj in (("--", config), ("[sim] ", config.sim), ("[synth] ", config.synth)):
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if str(f.type) == "float" and not math.isfinite(v):
                name = f"--{f.name.replace('_', '-')} {v}" if prefix == "--" else f"{prefix}{f.name} = {v}"
                bad.append(f"{name}: must be a finite number")
    return bad


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
