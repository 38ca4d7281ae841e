"""Multi-turn group rollout: N trajectories per task from one initial state -> the step table.

For each task seed s_g (episode group g), N environments are reset with s_g, so they start from
the same state. At every step all still-running environments are prompted in one batch
(``policy.sample``), each response is parsed for ``<action>…</action>``, the action is sent to the
environment, and one step row is recorded:

    group_id = g, traj_id = the trajectory's index, step = t,
    anchor   = hash_text(anchor_text(observation, admissible actions) before the step)  (GiGPO's anchor state),
    reward   = r_t − invalid_penalty · [response malformed or action not admissible],
    logprobs, mask = the sampled response's per-token log-probs and token mask.

The rollout is environment-agnostic: it needs a pool with ``reset(seeds)`` and ``step(actions)``
(``gaca.envs.pool.EnvPool``) and a policy with ``build_prompt``/``sample`` (``gaca.policy.Policy``).
It makes exactly one model call per step batch; nothing else (GACA reuses these log-probs).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch

from gaca.advantage import StepBatch, hash_text
from gaca.rollout.prompt import format_response, parse_response, render_prompt

logger = logging.getLogger(__name__)

StepResult = tuple[str, float, bool, bool, dict[str, Any]]


class EnvPoolLike(Protocol):
    """What the rollout needs from an environment pool (``gaca.envs.pool.EnvPool`` provides it)."""

    num_envs: int

    def reset(self, seeds: list[int]) -> list[tuple[str, dict[str, Any]]]: ...

    def step(self, actions: list[str | None]) -> list[StepResult | None]: ...


@dataclass
class RolloutConfig:
    """How trajectories are sampled."""

    group_size: int = 8
    """N: trajectories per task, all reset with the task's seed (the episode group)."""
    tasks_per_iter: int = 4
    """Tasks (episode groups) per training iteration; the env pool holds tasks_per_iter * group_size envs."""
    max_steps: int = 30
    """Cap on the steps of one episode (the environment's own step limit applies as well)."""
    history_length: int = 2
    """K: how many recent (observation, action) pairs the prompt shows."""
    max_new_tokens: int = 48
    """Token limit of one response."""
    temperature: float = 1.0
    """Sampling temperature (the PPO ratio and the NLL use the same temperature); 0 is greedy
    decoding, for evaluation only (training needs a sampling distribution)."""
    top_p: float = 1.0
    """Nucleus sampling threshold (1.0: off)."""
    invalid_penalty: float = 0.1
    """Subtracted from a step's reward when its response is malformed or its action is not admissible."""
    stop: str = "</action>"
    """Each response stops after this string (or eos, or max_new_tokens)."""
    intro: str = "You are an expert agent acting in a text-based household environment (ALFWorld)."
    """First line of every prompt: who the agent is and where (set it per environment)."""
    anchor: Literal["observation", "observation+actions"] = "observation+actions"
    """What identifies a step's starting state for step-level grouping (GiGPO's anchor).
    ``observation``: the observation text alone, as verl-agent does; in ALFWorld every failed
    command yields "Nothing happens.", which then merges unrelated states into one step group.
    ``observation+actions``: the observation together with the admissible actions, which in ALFWorld
    also pin the agent's location, what it holds and which receptacles are open."""

    def __post_init__(self) -> None:
        if self.group_size < 1 or self.tasks_per_iter < 1 or self.max_steps < 1:
            raise ValueError("rollout.group_size, rollout.tasks_per_iter and rollout.max_steps must be >= 1")
        if self.history_length < 0 or self.max_new_tokens < 1:
            raise ValueError("rollout.history_length must be >= 0 and rollout.max_new_tokens >= 1")
        if not (0.0 < self.top_p <= 1.0) or self.temperature < 0.0:
            raise ValueError("rollout.top_p must be in (0, 1] and rollout.temperature >= 0")
        if self.invalid_penalty < 0.0:
            raise ValueError("rollout.invalid_penalty must be >= 0")
        if self.anchor not in ("observation", "observation+actions"):
            raise ValueError(f"rollout.anchor must be 'observation' or 'observation+actions', got {self.anchor!r}")


@dataclass
class Trajectory:
    """Summary of one episode."""

    traj_id: int
    group_id: int
    seed: int
    task_id: str
    task_type: str
    won: bool = False
    length: int = 0
    env_return: float = 0.0
    """Sum of the environment's rewards (without the invalid-action penalty)."""
    invalid: int = 0
    """Steps whose response was malformed or whose action was not admissible."""
    truncated: bool = False
    """The episode hit a step limit before it ended by itself."""


@dataclass
class RolloutBatch:
    """The step table plus the token tensors of every step row (row i everywhere is the same step)."""

    steps: StepBatch
    """group_id, traj_id, step, anchor, reward, logprobs [N, L], mask [N, L]."""
    prompt_ids: list[torch.Tensor]
    """Per row, int64 [P_i]: the prompt tokens the response was sampled after."""
    response_ids: torch.Tensor
    """int64 [N, L], right-padded."""
    response_mask: torch.Tensor
    """bool [N, L], True on generated tokens."""
    logprobs: torch.Tensor
    """float [N, L], the sampling log-prob of each generated token (0 on padding) = steps.logprobs."""
    trajectories: list[Trajectory]
    texts: list[str] = field(default_factory=list)
    """Per row, the decoded response."""
    actions: list[str] = field(default_factory=list)
    """Per row, the action sent to the environment."""
    invalid: torch.Tensor | None = None
    """bool [N]: the row got the invalid-action penalty."""
    forward_passes: int = 0
    """Model forward calls spent sampling (prefill + decode steps)."""
    generate_s: float = 0.0
    env_s: float = 0.0

    @property
    def num_rows(self) -> int:
        return int(self.response_ids.shape[0])

    @property
    def generated_tokens(self) -> int:
        return int(self.response_mask.sum())


def anchor_text(observation: str, admissible_actions: list[str], kind: str = "observation+actions") -> str:
    """The text whose hash is a step's anchor (see ``RolloutConfig.anchor``)."""
    if kind == "observation":
        return observation
    return observation + "\n\x1f" + "\x1f".join(admissible_actions)


def _pad_stack(rows: list[torch.Tensor], width: int, value: float | bool | int) -> torch.Tensor:
    out = torch.full((len(rows), width), value, dtype=rows[0].dtype)
    for i, r in enumerate(rows):
        out[i, : r.shape[0]] = r
    return out


def collect_rollouts(
    policy: Any,
    pool: EnvPoolLike,
    seeds: list[int],
    cfg: RolloutConfig,
    *,
    group_size: int | None = None,
    generator: torch.Generator | None = None,
) -> RolloutBatch:
    """Sample ``group_size`` trajectories for each task seed and return the step table.

    Args:
      policy: a ``gaca.policy.Policy`` (``build_prompt``, ``sample``).
      pool: an environment pool with at least ``len(seeds) * group_size`` environments; extra
        environments are reset with the last seed and never stepped.
      seeds: one environment seed per task; task g is episode group g.
      cfg: sampling options.
      group_size: N (default ``cfg.group_size``; evaluation uses 1).
      generator: the sampling RNG (same generator state + same policy -> same rollout).
    Returns:
      A ``RolloutBatch`` with one row per (trajectory, step) in order of generation.
    """
    n = cfg.group_size if group_size is None else group_size
    num_traj = len(seeds) * n
    if num_traj == 0:
        raise ValueError("collect_rollouts needs at least one seed")
    if pool.num_envs < num_traj:
        raise ValueError(f"env pool has {pool.num_envs} envs, the rollout needs {num_traj} ({len(seeds)} x {n})")
    env_seeds = [int(seeds[i // n]) for i in range(num_traj)]
    env_seeds += [env_seeds[-1]] * (pool.num_envs - num_traj)

    t0 = time.perf_counter()
    resets = pool.reset(env_seeds)
    env_s = time.perf_counter() - t0
    obs = [r[0] for r in resets[:num_traj]]
    infos = [r[1] for r in resets[:num_traj]]
    trajs = [
        Trajectory(i, i // n, env_seeds[i], str(infos[i].get("task_id", "")), str(infos[i].get("task_type", "")))
        for i in range(num_traj)
    ]
    history: list[list[tuple[str, str]]] = [[] for _ in range(num_traj)]
    done = [False] * num_traj

    cols: dict[str, list] = {k: [] for k in ("group", "traj", "step", "anchor_text", "reward", "invalid")}
    prompt_ids: list[torch.Tensor] = []
    resp_rows: list[torch.Tensor] = []
    mask_rows: list[torch.Tensor] = []
    logp_rows: list[torch.Tensor] = []
    texts: list[str] = []
    actions_sent: list[str] = []
    forward_passes = 0
    generate_s = 0.0

    for t in range(cfg.max_steps):
        active = [i for i in range(num_traj) if not done[i]]
        if not active:
            break
        prompts = [
            policy.build_prompt(
                render_prompt(
                    str(infos[i].get("task", "")),
                    obs[i],
                    list(infos[i].get("admissible_actions", [])),
                    history[i],
                    history_length=cfg.history_length,
                    step=t,
                    intro=cfg.intro,
                )
            )
            for i in active
        ]
        t0 = time.perf_counter()
        out = policy.sample(
            prompts,
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            stop=cfg.stop,
            generator=generator,
        )
        generate_s += time.perf_counter() - t0
        forward_passes += int(out.forward_passes)
        parsed = [parse_response(text) for text in out.texts]

        step_actions: list[str | None] = [None] * pool.num_envs
        for j, i in enumerate(active):
            step_actions[i] = parsed[j].action
        t0 = time.perf_counter()
        results = pool.step(step_actions)
        env_s += time.perf_counter() - t0

        for j, i in enumerate(active):
            res = results[i]
            if res is None:
                raise RuntimeError(f"env pool returned no result for running environment {i}")
            next_obs, reward, terminated, truncated, info = res
            invalid = (not parsed[j].well_formed) or (not bool(info.get("valid", True)))
            length = int(out.response_mask[j].sum())
            cols["group"].append(trajs[i].group_id)
            cols["traj"].append(i)
            cols["step"].append(t)
            cols["anchor_text"].append(
                anchor_text(obs[i], list(infos[i].get("admissible_actions", [])), cfg.anchor))
            cols["reward"].append(float(reward) - (cfg.invalid_penalty if invalid else 0.0))
            cols["invalid"].append(invalid)
            prompt_ids.append(out.prompt_ids[j])
            resp_rows.append(out.response_ids[j, :length])
            mask_rows.append(out.response_mask[j, :length])
            logp_rows.append(out.logprobs[j, :length].detach().float())
            texts.append(out.texts[j])
            actions_sent.append(parsed[j].action)

            tr = trajs[i]
            tr.length += 1
            tr.env_return += float(reward)
            tr.invalid += int(invalid)
            tr.won = tr.won or bool(info.get("won", False))
            history[i].append((obs[i], parsed[j].action))
            obs[i], infos[i] = next_obs, info
            if terminated or truncated:
                done[i] = True
                tr.truncated = bool(truncated) and not bool(terminated)
    for i in range(num_traj):
        if not done[i]:
            trajs[i].truncated = True

    width = max(1, max(r.shape[0] for r in resp_rows))
    response_ids = _pad_stack(resp_rows, width, 0)
    response_mask = _pad_stack(mask_rows, width, False)
    logprobs = _pad_stack(logp_rows, width, 0.0)
    if not bool((response_mask.sum(1) > 0).all()):
        raise RuntimeError("the policy returned an empty response (no generated token) for some step")
    steps = StepBatch(
        group_id=torch.tensor(cols["group"], dtype=torch.int64),
        traj_id=torch.tensor(cols["traj"], dtype=torch.int64),
        step=torch.tensor(cols["step"], dtype=torch.int64),
        anchor=torch.tensor([hash_text(a) for a in cols["anchor_text"]], dtype=torch.int64),
        reward=torch.tensor(cols["reward"], dtype=torch.float32),
        logprobs=logprobs,
        mask=response_mask,
        anchor_text=cols["anchor_text"],
    )
    return RolloutBatch(
        steps=steps,
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        response_mask=response_mask,
        logprobs=logprobs,
        trajectories=trajs,
        texts=texts,
        actions=actions_sent,
        invalid=torch.tensor(cols["invalid"], dtype=torch.bool),
        forward_passes=forward_passes,
        generate_s=generate_s,
        env_s=env_s,
    )


@dataclass
class ExpertData:
    """Supervised examples from expert play."""

    examples: list[tuple[str, str]]
    """(prompt text before the chat template, canonical response) per expert step."""
    episodes: int
    success_rate: float


def collect_expert_examples(
    pool: EnvPoolLike,
    seeds: list[int],
    cfg: RolloutConfig,
    *,
    thought: str = "",
    detour_prob: float = 0.0,
    seed: int = 0,
) -> ExpertData:
    """Play each seed's episode with the environment's expert plan and record (prompt, response) pairs.

    The environments must be built with ``expert=True`` so that ``info["expert_plan"]`` holds the
    remaining plan from the current state; its first action is the target at every step. Prompts
    are rendered exactly as the rollout renders them, so the SFT targets match what the policy sees
    during RL.

    ALFWorld's expert plans with the whole game state in view: it walks straight to the receptacle
    that hides the object, so its episodes never show a step taken from a wrong place. With
    ``detour_prob`` > 0 each step is, with that probability, replaced by a uniformly drawn
    admissible action (a detour, recorded in the episode's history but not as an example); the
    expert then re-plans from where the detour led, and those recovery steps become examples
    (noise injection into the demonstrator, as in DART: Laskey et al. 2017, arXiv:1703.09327).

    Args:
      pool: environments built with ``expert=True``.
      seeds: one episode per seed.
      cfg: the rollout options (``max_steps``, ``history_length``, ``intro``).
      thought: the text inside ``<think></think>`` of every target.
      detour_prob: probability of a detour at each step, in [0, 1).
      seed: seed of the detour draws (same seed, same examples).
    """
    if not 0.0 <= detour_prob < 1.0:
        raise ValueError(f"detour_prob must be in [0, 1), got {detour_prob}")
    rng = random.Random(seed)
    examples: list[tuple[str, str]] = []
    wins = 0
    for start in range(0, len(seeds), pool.num_envs):
        chunk = [int(s) for s in seeds[start : start + pool.num_envs]]
        m = len(chunk)
        resets = pool.reset(chunk + [chunk[-1]] * (pool.num_envs - m))
        obs = [r[0] for r in resets[:m]]
        infos = [r[1] for r in resets[:m]]
        history: list[list[tuple[str, str]]] = [[] for _ in range(m)]
        done = [False] * m
        won = [False] * m
        for t in range(cfg.max_steps):
            active = [i for i in range(m) if not done[i]]
            if not active:
                break
            acts: list[str | None] = [None] * pool.num_envs
            for i in active:
                plan = infos[i].get("expert_plan")
                if not plan:
                    raise RuntimeError(
                        "expert data needs envs built with expert=True (info['expert_plan'] is missing or empty"
                        f" for task {infos[i].get('task_id')!r})"
                    )
                admissible = list(infos[i].get("admissible_actions", []))
                if detour_prob > 0 and admissible and rng.random() < detour_prob:
                    acts[i] = rng.choice(admissible)
                    continue
                acts[i] = str(plan[0])
                prompt = render_prompt(
                    str(infos[i].get("task", "")),
                    obs[i],
                    admissible,
                    history[i],
                    history_length=cfg.history_length,
                    step=t,
                    intro=cfg.intro,
                )
                examples.append((prompt, format_response(acts[i], thought)))
            results = pool.step(acts)
            for i in active:
                res = results[i]
                assert res is not None
                next_obs, _reward, terminated, truncated, info = res
                history[i].append((obs[i], str(acts[i])))
                obs[i], infos[i] = next_obs, info
                won[i] = won[i] or bool(info.get("won", False))
                if terminated or truncated:
                    done[i] = True
        wins += sum(won)
    rate = wins / max(1, len(seeds))
    logger.info("expert play: %d episodes, success %.2f, %d examples", len(seeds), rate, len(examples))
    return ExpertData(examples=examples, episodes=len(seeds), success_rate=rate)


__all__ = [
    "EnvPoolLike",
    "ExpertData",
    "RolloutBatch",
    "RolloutConfig",
    "Trajectory",
    "anchor_text",
    "collect_expert_examples",
    "collect_rollouts",
]
