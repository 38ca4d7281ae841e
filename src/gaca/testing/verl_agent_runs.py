"""verl-agent's trainer as it ships, from its rollout to its advantage, on scripted episodes.

Each ``TrainerRun`` is one configuration of verl-agent's example scripts (ALFWorld, WebShop,
Sokoban, gym_cards, search; dynamic sampling; groups of one). ``trainer_batch`` plays a batch of
scripted episodes of that environment's reward and observation kind and hands them through
verl-agent's own functions (``gaca.testing.verl_agent``) in the order its ``RayPPOTrainer.fit``
calls them: the rollout loop's ``gather_rollout_data`` (after dynamic sampling's
``filter_group_data`` where enabled), ``compute_step_discounted_returns``, ``adjust_batch`` (which
pads the batch with copies of random rows), the response mask, ``balance_batch`` (a row shuffle),
the ``EpisodeRewardManager`` and ``apply_invalid_action_penalty``. What comes out is the batch its
trainer passes to ``compute_advantage``; ``verl_agent_gigpo`` is verl-agent's GiGPO on it and
``gaca_advantages`` gaca's plugin called as verl-agent's trainer calls it.

The scripted episodes stand in for the model and the environments only: rewards and anchors follow
each environment's published rules (see ``TrainerRun.reward`` and ``TrainerRun.anchor``), response
lengths, invalid actions and outcomes are random.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import random
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from gaca.testing.verl_agent import VerlAgentCode

Reward = Literal["end", "sokoban", "numberline", "blackjack"]
Anchor = Literal["alfworld", "webshop", "grid", "image", "search"]

PROMPT, RESPONSE = 8, 16  # token widths of the scripted rows


@dataclass(frozen=True)
class TrainerRun:
    """One configuration of verl-agent's trainer (the values of the example script it follows)."""

    script: str
    """The verl-agent example script (under ``examples/``) the values come from."""
    env_name: str
    """Its ``data_source``."""
    reward: Reward
    """'end': 10 on the last step of a won episode, else 0 (ALFWorld, WebShop, search, EZPoints);
    'sokoban': −0.1 every step (an invalid action too), +1 / −1 when a box goes on / off a target,
    +10 when all are on; 'numberline': −1 for a step that does not get closer, 0 for one that does,
    +1 on reaching the goal; 'blackjack': 0 until the last step, then −1, 0, 1 or 1.5."""
    anchor: Anchor
    """What ``anchor_obs`` holds: ALFWorld / WebShop / search texts (long, near-identical ones per
    state), Sokoban's text grid, or an image (a uint8 array: Sokoban's rgb mode, gym_cards)."""
    groups: int
    """``data.train_batch_size``: episode groups per batch."""
    group_size: int
    """``env.rollout.n``."""
    max_steps: int
    """``env.max_steps``."""
    gamma: float = 0.95
    mode: str = "mean_norm"
    """``algorithm.gigpo.mode``."""
    omega: float = 1.0
    """``algorithm.gigpo.step_advantage_w``."""
    similarity: float | None = None
    """``algorithm.gigpo.similarity_thresh`` with ``enable_similarity=True``; None: exact anchors."""
    coef: float = 0.1
    """``actor.invalid_action_penalty_coef``."""
    n_gpus: int = 2
    log_prob_micro: int = 16
    """``rollout.log_prob_micro_batch_size_per_gpu`` (and the reference's)."""
    actor_micro: int = 8
    """``actor.ppo_micro_batch_size_per_gpu``."""
    mini_batch: int = 64
    """``actor.ppo_mini_batch_size`` (``adjust_batch``'s divisor for multi-modal batches)."""
    multi_modal: bool = False
    """Rows carry ``multi_modal_inputs`` (a vision model)."""
    tries: int = 1
    """Dynamic sampling (``algorithm.filter_groups``): rollouts per batch at most; 1: off."""
    p_invalid: float = 0.3
    p_win: float = 0.4

    def trainer_config(self, gaca: dict[str, Any] | None = None) -> Any:
        """The parts of verl-agent's hydra config its trainer reads on this path (an OmegaConf)."""
        from omegaconf import OmegaConf

        return OmegaConf.create({
            "trainer": {"n_gpus_per_node": self.n_gpus, "nnodes": 1},
            "data": {"train_batch_size": self.groups},
            "env": {"rollout": {"n": self.group_size}, "max_steps": self.max_steps},
            "actor_rollout_ref": {
                "rollout": {"log_prob_micro_batch_size_per_gpu": self.log_prob_micro},
                "ref": {"log_prob_micro_batch_size_per_gpu": self.log_prob_micro},
                "actor": {"ppo_micro_batch_size_per_gpu": self.actor_micro, "ppo_mini_batch_size": self.mini_batch,
                          "use_kl_loss": True, "use_invalid_action_penalty": True,
                          "invalid_action_penalty_coef": self.coef}},
            "algorithm": {
                "adv_estimator": "gigpo", "gamma": self.gamma, "use_kl_in_reward": False,
                "gigpo": {"step_advantage_w": self.omega, "mode": self.mode,
                          "enable_similarity": self.similarity is not None,
                          "similarity_thresh": self.similarity if self.similarity is not None else 0.95},
                "filter_groups": {"enable": self.tries > 1, "max_num_gen_batches": self.tries},
                "gaca": dict(gaca or {})},
        })

    @property
    def size_divisor(self) -> int:
        """What ``adjust_batch`` pads the batch to a multiple of (its formula)."""
        world = self.n_gpus
        actor = self.mini_batch if self.multi_modal else self.actor_micro * world
        return math.lcm(self.log_prob_micro * world, actor)

    def scaled(self, groups: int) -> TrainerRun:
        """The same configuration with at most ``groups`` episode groups (quick tests), but enough
        episodes for ``adjust_batch``, which cannot copy more distinct rows than the batch has."""
        least = -(-self.size_divisor // self.group_size)
        return dataclasses.replace(self, groups=min(self.groups, max(groups, least)))


RUNS: dict[str, TrainerRun] = {
    "alfworld": TrainerRun("gigpo_trainer/run_alfworld.sh", "alfworld", "end", "alfworld", 16, 8, 50,
                           mode="mean_std_norm", log_prob_micro=32, actor_micro=32, mini_batch=256),
    "alfworld, dynamic sampling": TrainerRun("gigpo_dynamic_trainer/run_alfworld.sh", "alfworld", "end", "alfworld",
                                             16, 8, 50, mode="mean_std_norm", log_prob_micro=32, actor_micro=32,
                                             mini_batch=256, tries=3),
    "alfworld, groups of one": TrainerRun("gigpo_trainer/run_alfworld.sh with env.rollout.n=1", "alfworld", "end",
                                          "alfworld", 64, 1, 50, mode="mean_std_norm", log_prob_micro=32,
                                          actor_micro=32, mini_batch=256),
    "webshop": TrainerRun("gigpo_trainer/run_webshop.sh", "webshop", "end", "webshop", 16, 8, 15),
    "sokoban": TrainerRun("gigpo_trainer/run_sokoban.sh", "sokoban", "sokoban", "grid", 32, 8, 15),
    "sokoban, gamma 1": TrainerRun("gigpo_trainer/run_sokoban.sh with algorithm.gamma=1", "sokoban", "sokoban",
                                   "grid", 32, 8, 15, gamma=1.0),
    "sokoban, images (vision model)": TrainerRun("gigpo_trainer/run_sokoban_qwen3vl.sh", "sokoban", "sokoban",
                                                 "image", 32, 8, 15, multi_modal=True),
    "blackjack": TrainerRun("gigpo_trainer/run_blackjack.sh", "blackjack", "blackjack", "image", 32, 8, 15,
                            mini_batch=32),
    "numberline": TrainerRun("gigpo_trainer/run_numberline.sh", "numberline", "numberline", "image", 16, 8, 10,
                             log_prob_micro=8, actor_micro=4, mini_batch=16),
    "search, similarity 0.9": TrainerRun("gigpo_trainer/run_search.sh", "search", "end", "search", 256, 5, 4,
                                         mode="mean_std_norm", similarity=0.9, coef=0.01, n_gpus=8,
                                         log_prob_micro=32, actor_micro=16, mini_batch=512),
}

_ITEMS = ["a mug 1", "a apple 2", "a knife 3", "a bowl 1", "a spatula 2", "a peppershaker 1", "a potato 1"]


def _anchor(run: TrainerRun, rng: random.Random, group: int, state: int) -> Any:
    """The observation of state ``state`` of group ``group``: equal states give equal anchors, except
    that texts sometimes vary slightly (near-identical observations, for similarity grouping)."""
    local = random.Random(group * 1000 + state)
    if run.anchor == "image":
        return np.frombuffer(local.randbytes(8 * 8 * 3), dtype=np.uint8).reshape(8, 8, 3).copy()
    if run.anchor == "grid":
        cells = ["#"] * 6 + ["_"] * 24 + ["O", "X", "P"] + ["_"] * 3
        local.shuffle(cells)
        return "\n".join("".join(cells[r * 6:(r + 1) * 6]) for r in range(6))
    items = local.sample(_ITEMS, 3)
    if state and rng.random() < 0.3:  # the same place, a slightly different description (not the start)
        items[-1] = rng.choice(_ITEMS)
    if run.anchor == "alfworld":
        return (f"You arrive at countertop {state}. On the countertop {state}, you see {', '.join(items)}. You are "
                "carrying nothing. Around you are a cabinet 1, a cabinet 2, a coffeemachine 1, a drawer 1, a fridge 1, "
                "a garbagecan 1, a microwave 1, a sinkbasin 1.")
    if run.anchor == "webshop":
        return f"Search results [SEP] B0{state}X [SEP] {' [SEP] '.join(items)} [SEP] Next > [SEP] price: $1{state}.99"
    return (f"Question: which object was found first in room {group}? Information: doc {state}: the "
            f"{' and the '.join(items)} were found in room {group} on day {state}.")


def _episode(run: TrainerRun, rng: random.Random, hard: bool) -> tuple[list[float], list[bool]]:
    """(step rewards, action validity) of one scripted episode."""
    won = not hard and rng.random() < run.p_win
    valid = [rng.random() >= run.p_invalid for _ in range(run.max_steps)]
    if run.reward == "blackjack":
        length = rng.randint(1, min(4, run.max_steps))
        return [0.0] * (length - 1) + [rng.choice([-1.0, 0.0, 1.0, 1.5])], valid[:length]
    length = rng.randint(2, run.max_steps) if won else (run.max_steps if rng.random() < 0.7
                                                        else rng.randint(1, run.max_steps))
    if run.reward == "end":
        return [0.0] * (length - 1) + [10.0 if won else 0.0], valid[:length]
    if run.reward == "numberline":
        steps = [0.0 if rng.random() < 0.5 else -1.0 for _ in range(length)]
        return [*steps[:-1], 1.0 if won else steps[-1]], valid[:length]
    steps = [-0.1 + (1.0 if rng.random() < 0.15 else 0.0) - (1.0 if rng.random() < 0.05 else 0.0)
             for _ in range(length)]
    if won:
        steps[-1] += 11.0  # the last box on its target (+1) and all of them (+10)
    return steps, valid[:length]


def _row(run: TrainerRun, rng: random.Random, gen: torch.Generator, **non_tensors: Any) -> dict[str, Any]:
    """One step row as verl-agent's rollout loop records it (tokens scripted)."""
    prompt = rng.randint(2, PROMPT)
    response = rng.randint(2, RESPONSE)
    attention = torch.cat([(torch.arange(PROMPT) >= PROMPT - prompt).long(),
                           (torch.arange(RESPONSE) < response).long()])
    prompts = torch.randint(5, 1000, (PROMPT,), generator=gen)
    responses = torch.randint(5, 1000, (RESPONSE,), generator=gen)
    row = {"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses]),
           "attention_mask": attention, "data_source": run.env_name, **non_tensors}
    if run.multi_modal:
        row["multi_modal_inputs"] = {"pixel_values": torch.zeros(1, 4), "image_grid_thw": torch.ones(1, 3)}
    return row


def play(run: TrainerRun, seed: int) -> tuple[list[list[dict]], np.ndarray, np.ndarray, dict, np.ndarray, np.ndarray]:
    """One call of verl-agent's ``vanilla_multi_turn_loop`` with scripted episodes: per environment
    the list of its step rows (rows after the episode ended marked inactive), the float32 episode
    rewards and lengths accumulated over the active steps, ``success``, ``traj_uid`` and tool calls."""
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    envs = run.groups * run.group_size
    uid = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(run.groups)]
    traj_uid = np.array([str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(envs)], dtype=object)
    hard = [rng.random() < 0.5 for _ in range(run.groups)]
    episodes = [_episode(run, rng, hard[e // run.group_size]) for e in range(envs)]
    horizon = max(len(rewards) for rewards, _ in episodes)
    rewards_of = np.zeros((envs, horizon), dtype=np.float32)
    for e, (rewards, _) in enumerate(episodes):
        rewards_of[e, :len(rewards)] = rewards
    episode_rewards = np.zeros(envs, dtype=np.float32)
    episode_lengths = np.zeros(envs, dtype=np.float32)
    total: list[list[dict]] = [[] for _ in range(envs)]
    state = [0] * envs  # every episode of a group starts from the group's initial state
    for t in range(horizon):
        active = np.array([t < len(episodes[e][0]) for e in range(envs)])
        episode_rewards[active] += rewards_of[:, t][active]
        episode_lengths[active] += 1
        for e in range(envs):
            valid = episodes[e][1][t] if active[e] else True
            total[e].append(_row(run, rng, gen, uid=uid[e // run.group_size], traj_uid=traj_uid[e],
                                 anchor_obs=_anchor(run, rng, e // run.group_size, state[e]),
                                 rewards=np.float32(rewards_of[e, t]), active_masks=bool(active[e]),
                                 is_action_valid=np.bool_(valid)))
            state[e] = rng.randint(1, 3)
    won = np.array([rewards[-1] > 0 for rewards, _ in episodes], dtype=np.float32)
    return total, episode_rewards, episode_lengths, {"success_rate": won}, traj_uid, np.zeros(envs, dtype=np.float32)


def rollout(code: VerlAgentCode, run: TrainerRun, seed: int) -> Any:
    """verl-agent's ``multi_turn_loop`` on scripted episodes: vanilla, or dynamic sampling (its
    ``dynamic_multi_turn_loop``, with its ``filter_group_data``) when ``run.tries`` > 1; the batch
    its ``gather_rollout_data`` makes of them."""
    config = run.trainer_config()
    parts: list[tuple] = []
    kept, target = 0, run.groups * run.group_size
    for attempt in range(run.tries):
        if attempt and kept >= target:
            break
        played = play(run, seed * 101 + attempt)
        if run.tries > 1:
            with contextlib.redirect_stdout(io.StringIO()):
                played = code.filter_group_data(*played, config=config, last_try=attempt == run.tries - 1)
        parts.append(played)
        kept += len(played[0])
    total = [row for part in parts for row in part[0]]
    success = {key: np.concatenate([part[3][key] for part in parts]) for key in parts[0][3]}
    return code.gather_rollout_data(None, total, *(np.concatenate([part[i] for part in parts]) for i in (1, 2)),
                                    success, *(np.concatenate([part[i] for part in parts]) for i in (4, 5)))


class _Silent:
    """The tokenizer the reward manager decodes with only to print examples."""

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        return ""


def trainer_batch(code: VerlAgentCode, run: TrainerRun, seed: int, *, adjust_batch: Any = None,
                  gaca: dict[str, Any] | None = None) -> Any:
    """The batch verl-agent's trainer passes to ``compute_advantage`` for ``run`` (module docstring).

    Args:
      adjust_batch: the function the trainer calls as ``adjust_batch(config, batch)``: verl-agent's
                    own (None), or it routed through the plugin (``record_step_index(code.adjust_batch)``,
                    what installing the integration does in its trainer's process).
      gaca:         the run's ``algorithm.gaca`` section.
    """
    config = run.trainer_config(gaca)
    batch = rollout(code, run, seed)
    batch.batch["step_rewards"] = code.core_gigpo.compute_step_discounted_returns(batch=batch, gamma=run.gamma)
    state = np.random.get_state()
    np.random.seed(seed)  # adjust_batch draws the rows it copies from numpy's global generator
    try:
        batch = (adjust_batch or code.adjust_batch)(config, batch)
    finally:
        np.random.set_state(state)
    batch.batch["response_mask"] = batch.batch["attention_mask"][:, -RESPONSE:]
    gen = torch.Generator().manual_seed(seed)
    batch.reorder(torch.randperm(len(batch), generator=gen))  # balance_batch
    batch.batch["token_level_scores"] = code.reward_manager(tokenizer=_Silent(), num_examine=0)(batch)
    batch.batch["old_log_probs"] = -torch.rand(len(batch), RESPONSE, generator=gen) * 3
    batch, _ = code.apply_invalid_action_penalty(batch, invalid_action_penalty_coef=run.coef)
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    return batch


def verl_agent_gigpo(code: VerlAgentCode, data: Any, run: TrainerRun, *, float64: bool = False) -> torch.Tensor:
    """verl-agent's GiGPO token advantages [B, L] on ``data``, as its ``compute_advantage`` computes them.

    ``float64``: its functions on float64 inputs instead (its equations without its float32
    rounding): the episode score ``episode_rewards`` − penalty and the discounted return recomputed
    in float64 from the rewards in the recorded step order (needs the recorded ``step``).
    """
    rewards, returns = data.batch["token_level_rewards"], data.batch["step_rewards"]
    if float64:
        invalid = 1.0 - data.non_tensor_batch["is_action_valid"].astype(np.float64)
        penalty = torch.from_numpy(run.coef * invalid)
        score = torch.from_numpy(data.non_tensor_batch["episode_rewards"].astype(np.float64)) - penalty
        last = data.batch["response_mask"].sum(-1) - 1
        rewards = torch.zeros(rewards.shape, dtype=torch.float64)
        rewards[torch.arange(len(data)), last] = score
        returns = float64_returns(data, run.gamma) - penalty
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its step-group sizes
        advantages, _ = code.core_gigpo.compute_gigpo_outcome_advantage(
            token_level_rewards=rewards, step_rewards=returns, response_mask=data.batch["response_mask"],
            anchor_obs=data.non_tensor_batch["anchor_obs"], index=data.non_tensor_batch["uid"],
            traj_index=data.non_tensor_batch["traj_uid"], step_advantage_w=run.omega, mode=run.mode,
            enable_similarity=run.similarity is not None,
            similarity_thresh=run.similarity if run.similarity is not None else 0.95)
    return advantages


def float64_returns(data: Any, gamma: float) -> torch.Tensor:
    """[B] float64 G_t = r_t + γ·G_{t+1} along each trajectory's recorded ``step`` order (a copy
    gets its original's)."""
    traj, step = data.non_tensor_batch["traj_uid"], data.non_tensor_batch["step"].astype(np.int64)
    reward = data.non_tensor_batch["rewards"].astype(np.float64)
    steps: dict[Any, dict[int, float]] = {}
    for u, s, r in zip(traj.tolist(), step.tolist(), reward.tolist(), strict=True):
        steps.setdefault(u, {})[s] = r
    value: dict[tuple[Any, int], float] = {}
    for u, by_step in steps.items():
        acc = 0.0
        for s in sorted(by_step, reverse=True):
            acc = by_step[s] + gamma * acc
            value[(u, s)] = acc
    return torch.tensor([value[(u, s)] for u, s in zip(traj.tolist(), step.tolist(), strict=True)],
                        dtype=torch.float64)


def gaca_advantages(data: Any, run: TrainerRun, gaca: dict[str, Any] | None = None) -> torch.Tensor:
    """The plugin's token advantages [B, L] on a copy of ``data``, called as verl-agent's trainer calls
    ``compute_advantage`` (its keywords); ``gaca``: an ``algorithm.gaca`` to pass as its config
    (None: none is passed, the trainer's as ``record_step_index`` kept it is read)."""
    from gaca.integrations.verl import compute_advantage

    copy = data[torch.arange(len(data))]
    config = None if gaca is None else run.trainer_config(gaca).algorithm
    compute_advantage(
        copy, adv_estimator="gigpo", gamma=run.gamma, lam=1.0, num_repeat=run.group_size,
        norm_adv_by_std_in_grpo=True, multi_turn=False, use_pf_ppo=False, pf_ppo_reweight_method="pow",
        pf_ppo_weight_pow=2.0, step_advantage_w=run.omega, gigpo_mode=run.mode,
        gigpo_enable_similarity=run.similarity is not None,
        gigpo_similarity_thresh=run.similarity if run.similarity is not None else 0.95, config=config)
    return copy.batch["advantages"]


__all__ = ["RUNS", "TrainerRun", "float64_returns", "gaca_advantages", "play", "rollout", "trainer_batch",
           "verl_agent_gigpo"]
