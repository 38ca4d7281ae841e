"""Trainer configuration: one dataclass per component, TOML files, ``key=value`` overrides.

A config file is TOML whose top-level keys are the fields of :class:`TrainConfig` and whose
tables are its components (``[policy]``, ``[env]`` (the fields of the family ``env.name`` selects,
e.g. ``gaca.envs.AlfworldConfig``), ``[rollout]``, ``[advantage]``, ``[ppo]``, ``[sft]``,
``[eval]``). Overrides use dotted keys (``advantage.kappa=0.5``, ``iterations=10``) and TOML values
(``policy.cache_dir="/tmp/c"``; bare words are read as strings). Everything is validated when the
config is built, before anything else happens: an unknown key lists the valid ones, a name
(estimator, loss, environment) must be registered, every number must be in its range, and the
components must fit together (``gaca.config``). ``gaca config show`` prints it with its documentation.
"""

from __future__ import annotations

import importlib.resources
import logging
from dataclasses import dataclass, field
from pathlib import Path

from gaca import validate
from gaca.advantage import ESTIMATORS, AdvantageOptions
from gaca.config import ConfigError, apply_overrides, from_dict, read_toml, to_dict
from gaca.envs import AlfworldConfig, EnvConfig
from gaca.persist import write_json
from gaca.policy.config import PolicyConfig
from gaca.policy.sft import LR_SCHEDULES
from gaca.rollout.config import RolloutConfig
from gaca.train.losses import AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES
from gaca.train.trackers import TRACKERS

logger = logging.getLogger(__name__)


@dataclass
class PPOConfig:
    """The policy update (one call of ``ppo_update`` per iteration)."""

    lr: float = 1e-5
    """AdamW learning rate."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up over this many optimizer steps (0: none). Adam's first steps move
    every parameter by about ``lr`` whatever its gradient's size; a warm-up lets its second-moment
    estimate settle first, so a larger ``lr`` does not wreck a fine-tuned policy in the first updates."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas, each in [0, 1)."""
    epochs: int = 1
    """Passes over the iteration's step rows."""
    num_minibatches: int = 2
    """Optimizer steps per epoch; the rows are shuffled and split into this many minibatches."""
    micro_batch_size: int = 16
    """Rows per forward/backward (gradients accumulate over a minibatch's micro-batches)."""
    policy_loss: str = "ppo_clip"
    """A name in ``gaca.train.losses.POLICY_LOSSES`` (``ppo_clip``, ``dual_clip``, or one registered)."""
    clip_ratio: float = 0.2
    """PPO clip ε: the ratio is clipped to [1−ε, 1+ε]."""
    clip_ratio_c: float = 3.0
    """Dual-clip bound c (> 1) on the loss of negative-advantage tokens (``dual_clip`` only)."""
    loss_agg: str = "token-mean"
    """A name in ``gaca.train.losses.AGGREGATIONS`` (``token-mean``, ``seq-mean-token-mean``): how token
    losses become one number."""
    kl_coef: float = 0.0
    """Coefficient of the KL loss to the reference policy (0: no reference forward pass)."""
    kl_estimator: str = "k3"
    """A name in ``gaca.train.losses.KL_ESTIMATORS`` (``k1``, ``k2``, ``k3``: the low-variance one)."""
    entropy_coef: float = 0.0
    """Coefficient of the entropy bonus (subtracted from the loss)."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm (<= 0: off)."""

    def __post_init__(self) -> None:
        validate.number("ppo.lr", self.lr, 0.0, None, lo_open=True)
        validate.integer("ppo.warmup_steps", self.warmup_steps, 0)
        validate.number("ppo.weight_decay", self.weight_decay, 0.0)
        for k, beta in enumerate(self.betas):
            validate.number(f"ppo.betas[{k}]", beta, 0.0, 1.0, hi_open=True)
        for name in ("epochs", "num_minibatches", "micro_batch_size"):
            validate.integer(f"ppo.{name}", getattr(self, name), 1)
        POLICY_LOSSES.check(self.policy_loss, "ppo.policy_loss")
        AGGREGATIONS.check(self.loss_agg, "ppo.loss_agg")
        KL_ESTIMATORS.check(self.kl_estimator, "ppo.kl_estimator")
        validate.number("ppo.clip_ratio", self.clip_ratio, 0.0, 1.0, lo_open=True, hi_open=True)
        validate.number("ppo.clip_ratio_c", self.clip_ratio_c, 1.0, None, lo_open=True)
        validate.number("ppo.kl_coef", self.kl_coef, 0.0)
        validate.number("ppo.entropy_coef", self.entropy_coef, 0.0)
        validate.number("ppo.max_grad_norm", self.max_grad_norm)


@dataclass
class SFTConfig:
    """Supervised warm start on expert trajectories before RL (the ``tiny`` preset needs it)."""

    episodes: int = 0
    """Expert episodes played to build the SFT data (0: no warm start). This is the budget knob:
    fewer episodes or steps leave a weaker starting policy with more headroom for RL."""
    steps: int = 200
    """SFT optimizer steps."""
    lr: float = 1e-3
    """SFT learning rate."""
    lr_schedule: str = "constant"
    """How the SFT learning rate changes over the steps: "constant", or "cosine" (from ``lr`` down
    to 0 at the last step; ``gaca.policy.sft.LR_SCHEDULES``)."""
    batch_size: int = 16
    """SFT examples per step."""
    detour_prob: float = 0.0
    """Probability that an expert step is replaced by a random admissible action (not trained on);
    the expert's re-planned steps after it teach recovery from places the expert never visits
    (see ``gaca.rollout.collect_expert_examples``)."""
    repeat_prob: float = 0.0
    """Probability that an expert step repeats the previous action when the environment no longer
    accepts it (ALFWorld's "go to X" on arriving at X, answered "Nothing happens."), so that the SFT
    data shows what to do after a failed action (not trained on; see
    ``gaca.rollout.collect_expert_examples``)."""
    cache_dir: str = ""
    """Directory of warm-start checkpoints shared between runs ('': off). A run whose warm start
    (seed, policy, SFT and environment settings) matches a cached one loads it instead of repeating
    SFT; ``gaca lab compare`` uses it so that every estimator of a seed starts from one policy."""
    progress_every: int = 200
    """With ``cache_dir`` set: keep SFT's whole training state there every this many steps
    (``warm-start-<key>.sft-progress.pt``), so that a run interrupted during SFT continues from it
    when started again (the same warm start, bit for bit); removed once the warm start is cached.
    0: never."""

    def __post_init__(self) -> None:
        validate.integer("sft.episodes", self.episodes, 0)
        validate.integer("sft.steps", self.steps, 0)
        validate.integer("sft.batch_size", self.batch_size, 1)
        validate.integer("sft.progress_every", self.progress_every, 0)
        validate.number("sft.lr", self.lr, 0.0, None, lo_open=True)
        LR_SCHEDULES.check(self.lr_schedule, "sft.lr_schedule")
        validate.number("sft.detour_prob", self.detour_prob, 0.0, 1.0, hi_open=True)
        validate.number("sft.repeat_prob", self.repeat_prob, 0.0, 1.0, hi_open=True)


@dataclass
class EvalConfig:
    """Held-out evaluation."""

    every: int = 5
    """Evaluate every this many iterations (and before the first and after the last; 0: only those two)."""
    temperature: float = 1.0
    """Sampling temperature during evaluation (0: greedy)."""
    top_p: float = 1.0
    """Nucleus threshold during evaluation."""
    batch_size: int = 24
    """Held-out tasks played at once (the evaluation pool's size)."""

    def __post_init__(self) -> None:
        validate.integer("eval.every", self.every, 0)
        validate.number("eval.temperature", self.temperature, 0.0)
        validate.number("eval.top_p", self.top_p, 0.0, 1.0, lo_open=True)
        validate.integer("eval.batch_size", self.batch_size, 1)


@dataclass
class TrainConfig:
    """A training run (top-level keys of the TOML file)."""

    estimator: str = "gaca"
    """Advantage estimator, a name in ``gaca.advantage.ESTIMATORS`` (grpo, rloo, gigpo, fixed_mix, gaca,
    or one registered)."""
    iterations: int = 20
    """Training iterations (rollout -> advantages -> update)."""
    seed: int = 0
    """Seed of everything (tasks, sampling, model init, minibatch order)."""
    out_dir: str = "runs/gaca"
    """Run directory: config, metrics.jsonl, the trackers' files (tb/, ...), checkpoint.pt, plots."""
    checkpoint_every: int = 5
    """Write the checkpoint every this many iterations (and at the end and on Ctrl-C; 0: only those)."""
    threads: int = 0
    """torch intra-op threads (0: leave torch's default)."""
    trackers: list[str] = field(default_factory=lambda: ["tensorboard"])
    """Where the metrics also go besides out_dir/metrics.jsonl (the run's record, always written), like
    verl's ``trainer.logger``: names in ``gaca.train.trackers.TRACKERS``. ``tensorboard``: event files
    under out_dir/tb; ``wandb``: a W&B run, offline under out_dir/wandb unless WANDB_MODE says otherwise
    (pip install 'gaca[wandb]'); ``mlflow``: an MLflow run in a file store under out_dir/mlruns unless
    MLFLOW_TRACKING_URI names another (pip install 'gaca[mlflow]'). [] keeps the record alone.
    docs/metrics.md says what each one receives and how a resumed run continues it."""
    tensorboard: bool | None = None
    """Deprecated, replaced by ``trackers``: true adds "tensorboard" to it, false removes it. Read only so
    that configs saved before ``trackers`` existed and ``tensorboard=false`` overrides still load."""
    progress: bool = True
    """Show tqdm progress bars."""
    max_nonfinite: int = 3
    """Stop the run after this many consecutive updates with a non-finite loss."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    env: EnvConfig = field(default_factory=AlfworldConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    advantage: AdvantageOptions = field(default_factory=AdvantageOptions)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def __post_init__(self) -> None:
        ESTIMATORS.check(self.estimator, "estimator")
        validate.integer("iterations", self.iterations, 0)
        validate.integer("seed", self.seed)
        validate.integer("checkpoint_every", self.checkpoint_every, 0)
        validate.integer("threads", self.threads, 0)
        validate.integer("max_nonfinite", self.max_nonfinite, 1)
        if self.tensorboard is not None:
            logger.warning("tensorboard=%s is deprecated: use trackers (tensorboard=false is trackers=[])",
                           str(self.tensorboard).lower())
            others = [name for name in self.trackers if name != "tensorboard"]
            self.trackers, self.tensorboard = (["tensorboard"] if self.tensorboard else []) + others, None
        for k, name in enumerate(self.trackers):
            TRACKERS.check(name, f"trackers[{k}]")
            if name in self.trackers[:k]:
                raise ValueError(f"trackers[{k}]: {name!r} is listed twice")
        unlisted = self.env.unlisted_actions()
        if self.rollout.action_mode == "choose" and unlisted is not None:
            raise ValueError("rollout.action_mode='choose' chooses among the listed admissible actions, but "
                             f"{unlisted}")
        if self.policy.model == "tiny" and self.sft.episodes == 0:
            raise ValueError("policy.model='tiny' needs sft.episodes > 0: its tokenizer and warm start come from "
                             "expert trajectories")


# ---------------------------------------------------------------------------------------------
# files and presets


def preset_names() -> list[str]:
    """Names of the shipped presets (``gaca/configs/*.toml`` without the suffix)."""
    root = importlib.resources.files("gaca") / "configs"
    return sorted(p.name[: -len(".toml")] for p in root.iterdir() if p.name.endswith(".toml"))


def preset_path(name: str) -> Path:
    """The TOML file of preset ``name``; unknown names raise ``ConfigError`` listing the presets."""
    root = importlib.resources.files("gaca") / "configs"
    path = root / f"{name}.toml"
    if not path.is_file():
        raise ConfigError(f"unknown preset {name!r}; presets: {preset_names()}")
    return Path(str(path))


def load_config(
    path: str | Path | None = None, overrides: list[str] | None = None, *, preset: str | None = None
) -> TrainConfig:
    """Read a TOML file (or a shipped preset), apply overrides, validate everything.

    Raises:
      ConfigError (one line naming the key) for unknown keys, wrong types, values out of range,
      unregistered names and inconsistent combinations.
    """
    if path is not None and preset is not None:
        raise ConfigError("give a config file or a preset, not both")
    source = Path(path) if path is not None else preset_path(preset) if preset is not None else None
    data = read_toml(source) if source is not None else {}
    apply_overrides(data, list(overrides or []))
    return from_dict(TrainConfig, data)


def save_config(cfg: TrainConfig, path: str | Path) -> None:
    """Write the config as JSON (read back with ``from_dict(TrainConfig, json.load(f))``)."""
    write_json(path, to_dict(cfg), indent=2, sort_keys=True)


__all__ = [
    "ConfigError",
    "EvalConfig",
    "PPOConfig",
    "SFTConfig",
    "TrainConfig",
    "apply_overrides",
    "from_dict",
    "load_config",
    "preset_names",
    "preset_path",
    "save_config",
    "to_dict",
]
