"""Trainer configuration: one dataclass per component, TOML files, ``key=value`` overrides.

A config file is TOML whose top-level keys are the fields of :class:`TrainConfig` and whose
tables are its components (``[policy]``, ``[env]``, ``[rollout]``, ``[advantage]``, ``[ppo]``,
``[sft]``, ``[eval]``). Overrides use dotted keys (``advantage.kappa=0.5``, ``iterations=10``) and
TOML values (``policy.cache_dir="/tmp/c"``; bare words are read as strings). An unknown key is an
error that lists the valid ones; a ``Literal`` field rejects values outside its choices.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gaca.advantage import AdvantageOptions
from gaca.policy.config import PolicyConfig
from gaca.rollout.collect import RolloutConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - python 3.10
    import tomli as tomllib


@dataclass
class EnvConfig:
    """Which environment to train and evaluate on."""

    name: str = "alfworld"
    """A key of ``gaca.envs.ENVIRONMENTS`` (``alfworld``, ``webshop``)."""
    train_split: str = "train"
    """Split the training tasks are drawn from."""
    eval_split: str = "eval"
    """Held-out split for evaluation."""
    num_train_games: int = 64
    """Training tasks (games) built for the train split."""
    num_eval_games: int = 24
    """Held-out tasks; every evaluation plays each of them once."""
    num_workers: int = 2
    """Worker processes of the environment pool (0 or 1: in-process)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for ``make_env`` (environment-specific)."""


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
    """AdamW betas."""
    epochs: int = 1
    """Passes over the iteration's step rows."""
    num_minibatches: int = 2
    """Optimizer steps per epoch; the rows are shuffled and split into this many minibatches."""
    micro_batch_size: int = 16
    """Rows per forward/backward (gradients accumulate over a minibatch's micro-batches)."""
    policy_loss: Literal["ppo_clip", "dual_clip"] = "ppo_clip"
    """A key of ``gaca.train.losses.POLICY_LOSSES``."""
    clip_ratio: float = 0.2
    """PPO clip ε: the ratio is clipped to [1−ε, 1+ε]."""
    clip_ratio_c: float = 3.0
    """Dual-clip bound c (> 1) on the loss of negative-advantage tokens (``dual_clip`` only)."""
    loss_agg: Literal["token-mean", "seq-mean-token-mean"] = "token-mean"
    """A key of ``gaca.train.losses.AGGREGATIONS``: how token losses become one number."""
    kl_coef: float = 0.0
    """Coefficient of the KL loss to the reference policy (0: no reference forward pass)."""
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    """A key of ``gaca.train.losses.KL_ESTIMATORS`` (k3: the low-variance estimator)."""
    entropy_coef: float = 0.0
    """Coefficient of the entropy bonus (subtracted from the loss)."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm (<= 0: off)."""

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.num_minibatches < 1 or self.micro_batch_size < 1:
            raise ValueError("ppo.epochs, ppo.num_minibatches and ppo.micro_batch_size must be >= 1")
        if not 0.0 < self.clip_ratio < 1.0:
            raise ValueError(f"ppo.clip_ratio must be in (0, 1), got {self.clip_ratio}")
        if self.clip_ratio_c <= 1.0:
            raise ValueError(f"ppo.clip_ratio_c must be > 1, got {self.clip_ratio_c}")
        if self.lr <= 0.0 or self.kl_coef < 0.0 or self.warmup_steps < 0:
            raise ValueError("ppo.lr must be > 0, ppo.kl_coef >= 0 and ppo.warmup_steps >= 0")


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
    batch_size: int = 16
    """SFT examples per step."""
    thought: str = ""
    """Text put inside <think></think> of the expert responses."""
    detour_prob: float = 0.0
    """Probability that an expert step is replaced by a random admissible action (not trained on);
    the expert's re-planned steps after it teach recovery from places the expert never visits
    (see ``gaca.rollout.collect_expert_examples``)."""

    def __post_init__(self) -> None:
        if self.episodes < 0 or self.steps < 0 or self.batch_size < 1 or self.lr <= 0:
            raise ValueError("sft.episodes and sft.steps must be >= 0, sft.batch_size >= 1 and sft.lr > 0")
        if not 0.0 <= self.detour_prob < 1.0:
            raise ValueError(f"sft.detour_prob must be in [0, 1), got {self.detour_prob}")


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


@dataclass
class TrainConfig:
    """A training run (top-level keys of the TOML file)."""

    estimator: str = "gaca"
    """Advantage estimator, a key of ``gaca.advantage.ESTIMATORS`` (grpo, rloo, gigpo, fixed_mix, gaca)."""
    iterations: int = 20
    """Training iterations (rollout -> advantages -> update)."""
    seed: int = 0
    """Seed of everything (tasks, sampling, model init, minibatch order)."""
    out_dir: str = "runs/gaca"
    """Run directory: config, metrics.jsonl, tb/, checkpoint.pt, plots."""
    checkpoint_every: int = 5
    """Write the checkpoint every this many iterations (and at the end and on Ctrl-C; 0: only those)."""
    threads: int = 0
    """torch intra-op threads (0: leave torch's default)."""
    tensorboard: bool = True
    """Also write TensorBoard event files under out_dir/tb."""
    progress: bool = True
    """Show tqdm progress bars."""
    max_nonfinite: int = 3
    """Stop the run after this many consecutive updates with a non-finite loss."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    advantage: AdvantageOptions = field(default_factory=AdvantageOptions)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def __post_init__(self) -> None:
        if self.iterations < 0 or self.checkpoint_every < 0 or self.max_nonfinite < 1:
            raise ValueError("iterations and checkpoint_every must be >= 0, max_nonfinite >= 1")
        if self.rollout.temperature <= 0.0:
            raise ValueError("rollout.temperature must be > 0 for training (0, greedy, is for eval.temperature)")
        if self.eval.temperature < 0.0:
            raise ValueError(f"eval.temperature must be >= 0 (0: greedy), got {self.eval.temperature}")


class ConfigError(ValueError):
    """A config file or override that does not fit the dataclasses."""


# ---------------------------------------------------------------------------------------------
# dict <-> dataclass


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _check_value(path: str, tp: Any, value: Any) -> Any:
    """Coerce/validate ``value`` against the annotation ``tp``; raise ConfigError on mismatch."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(f"{path} must be one of {list(choices)}, got {value!r}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check_value(path, arg, value)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(f"{path}: {value!r} fits none of {tp}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path} must be a list, got {value!r}")
        args = typing.get_args(tp)
        if len(args) != len(value):
            raise ConfigError(f"{path} must have {len(args)} entries, got {len(value)}")
        return tuple(_check_value(f"{path}[{i}]", a, v) for i, (a, v) in enumerate(zip(args, value, strict=True)))
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path} must be a table, got {value!r}")
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path} must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path} must be a string, got {value!r}")
        return value
    return value


def from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Build dataclass ``cls`` from a (nested) dict; unknown keys raise ``ConfigError`` listing the valid ones."""
    hints = _hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in data if k not in names]
    if unknown:
        where = prefix.rstrip(".") or "the top level"
        raise ConfigError(
            f"unknown config key(s) {[prefix + k for k in unknown]} in {where}; valid keys: "
            + ", ".join(prefix + n for n in names)
        )
    kwargs: dict[str, Any] = {}
    for name in names:
        if name not in data:
            continue
        tp, value = hints[name], data[name]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise ConfigError(f"{prefix}{name} must be a table of {tp.__name__} fields, got {value!r}")
            kwargs[name] = from_dict(tp, value, f"{prefix}{name}.")
        else:
            kwargs[name] = _check_value(prefix + name, tp, value)
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{prefix.rstrip('.') or cls.__name__}: {e}") from e


def to_dict(cfg: Any) -> dict[str, Any]:
    """The config as a nested dict of plain values (tuples become lists; JSON/TOML-ready)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            out[f.name] = to_dict(value)
        elif isinstance(value, tuple):
            out[f.name] = list(value)
        else:
            out[f.name] = value
    return out


# ---------------------------------------------------------------------------------------------
# files, presets, overrides


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


def parse_override(item: str) -> tuple[list[str], Any]:
    """``"a.b=VALUE"`` -> (["a", "b"], value); VALUE is read as TOML, a bare word as a string."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} is not of the form key=value")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {item!r} has an empty key")
    raw = raw.strip()
    if raw.lower() in ("none", "null"):
        return key.split("."), None
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set each dotted ``key=value`` in the nested dict ``data`` (in place; returns it)."""
    for item in overrides:
        keys, value = parse_override(item)
        node = data
        for k in keys[:-1]:
            child = node.setdefault(k, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {item!r}: {k!r} is not a table")
            node = child
        if value is None:
            node.pop(keys[-1], None)
            node[keys[-1]] = None
        else:
            node[keys[-1]] = value
    return data


def load_config(
    path: str | Path | None = None, overrides: list[str] | None = None, *, preset: str | None = None
) -> TrainConfig:
    """Read a TOML file (or a shipped preset), apply overrides, validate.

    Raises:
      ConfigError for unknown keys (listing the valid ones), wrong types or values out of range.
    """
    if path is not None and preset is not None:
        raise ConfigError("give a config file or a preset, not both")
    data: dict[str, Any] = {}
    source = Path(path) if path is not None else preset_path(preset) if preset is not None else None
    if source is not None:
        if not source.is_file():
            raise ConfigError(f"config file {str(source)!r} does not exist")
        with open(source, "rb") as f:
            try:
                data = tomllib.load(f)
            except tomllib.TOMLDecodeError as e:
                raise ConfigError(f"{source}: invalid TOML: {e}") from e
    apply_overrides(data, list(overrides or []))
    return from_dict(TrainConfig, data)


def save_config(cfg: TrainConfig, path: str | Path) -> None:
    """Write the config as JSON (read back with ``from_dict(TrainConfig, json.load(f))``)."""
    Path(path).write_text(json.dumps(to_dict(cfg), indent=2, sort_keys=True) + "\n")


__all__ = [
    "ConfigError",
    "EnvConfig",
    "EvalConfig",
    "PPOConfig",
    "SFTConfig",
    "TrainConfig",
    "apply_overrides",
    "from_dict",
    "load_config",
    "parse_override",
    "preset_names",
    "preset_path",
    "save_config",
    "to_dict",
]
