"""gaca's ``gigpo`` under ``conventions=verl-agent`` against verl-agent's own GiGPO, on the same batches.

    python benchmarks/verl_agent_parity.py --verl-agent /path/to/verl-agent   # a verl-agent checkout

Each batch is built the way verl-agent's trainer builds one: step rows with string uids, ALFWorld-like
observation texts (several near-identical ones per state), an episode reward of 10 on the last step
of won trajectories, half the groups failing entirely, about 30% invalid actions. verl-agent's own
code then computes the discounted returns (``compute_step_discounted_returns``), the rows are
shuffled (``trainer.balance_batch``), and its ``apply_invalid_action_penalty`` subtracts the penalty.
On that batch: verl-agent's ``compute_gigpo_outcome_advantage`` against gaca's plugin, which gets no
step key (it recovers the order) and reads the penalty back from the scores. gaca's own conventions
(with the true step index given) are reported beside, to show what the setting changes.

Prints a table and writes ``benchmarks/results/verl_agent_parity.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import sys
import uuid
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]

ITEMS = ["a mug 1", "a apple 2", "a knife 3", "a bowl 1", "a spatula 2", "a peppershaker 1", "a potato 1", "a plate 2"]
OBSERVATION = ("You arrive at countertop {k}. On the countertop {k}, you see {items}. You are carrying nothing. Around "
               "you are a cabinet 1, a cabinet 2, a coffeemachine 1, a drawer 1, a fridge 1, a garbagecan 1, a "
               "microwave 1, a sinkbasin 1.")

CASES = {
    "exact anchors": dict(long_text=False, similarity=False, thresh=0.95, mode="mean_std_norm", omega=1.0),
    "similarity 0.95, long texts": dict(long_text=True, similarity=True, thresh=0.95, mode="mean_std_norm", omega=1.0),
    "similarity 0.9, mean_norm, w=0.5": dict(long_text=True, similarity=True, thresh=0.9, mode="mean_norm", omega=0.5),
}


def episode_rows(seed: int, *, long_text: bool, groups: int = 16, group_size: int = 8, max_steps: int = 30,
                 p_invalid: float = 0.3, p_failed_group: float = 0.5) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(groups):
        uid = str(uuid.UUID(int=rng.getrandbits(128)))
        failed_group = rng.random() < p_failed_group
        for _ in range(group_size):
            traj = str(uuid.UUID(int=rng.getrandbits(128)))
            length = rng.randint(3, max_steps)
            won = not failed_group and rng.random() < 0.5
            for step in range(length):
                k = rng.randint(1, 3)
                text = (OBSERVATION.format(k=k, items=", ".join(rng.sample(ITEMS, rng.randint(2, 5))))
                        if long_text else f"state {k}")
                rows.append({"uid": uid, "traj": traj, "step": step, "text": text,
                             "reward": 10.0 if won and step == length - 1 else 0.0,
                             "valid": rng.random() >= p_invalid, "response": rng.randint(4, 24)})
    return rows


def verl_agent_proto(rows: list[dict], *, length: int = 24, prompt: int = 6, seed: int = 0):
    """A ``DataProto`` as verl-agent's rollout and ``EpisodeRewardManager`` leave it."""
    from verl import DataProto

    size = len(rows)
    episode = {}
    for r in rows:
        episode[r["traj"]] = episode.get(r["traj"], 0.0) + r["reward"]
    response = torch.tensor([r["response"] for r in rows])
    attention = torch.cat([torch.ones(size, prompt, dtype=torch.long),
                           (torch.arange(length)[None] < response[:, None]).long()], 1)
    scores = torch.zeros(size, length)
    scores[torch.arange(size), response - 1] = torch.tensor([episode[r["traj"]] for r in rows])
    gen = torch.Generator().manual_seed(seed)
    return DataProto.from_dict(
        tensors={"prompts": torch.ones(size, prompt, dtype=torch.long),
                 "responses": torch.randint(5, 100, (size, length), generator=gen),
                 "attention_mask": attention, "input_ids": torch.ones(size, prompt + length, dtype=torch.long),
                 "response_mask": attention[:, prompt:], "token_level_scores": scores,
                 "old_log_probs": -torch.rand(size, length, generator=gen) * 3},
        non_tensors={"uid": np.array([r["uid"] for r in rows], dtype=object),
                     "traj_uid": np.array([r["traj"] for r in rows], dtype=object),
                     "anchor_obs": np.array([r["text"] for r in rows], dtype=object),
                     "rewards": np.array([r["reward"] for r in rows], dtype=object),
                     "active_masks": np.ones(size, dtype=bool),
                     "episode_rewards": np.array([episode[r["traj"]] for r in rows], dtype=np.float32),
                     "is_action_valid": np.array([r["valid"] for r in rows], dtype=bool)})


def compare(code, seed: int, *, long_text: bool, similarity: bool, thresh: float, mode: str, omega: float,
            gamma: float = 0.95, coef: float = 0.1) -> dict:
    from gaca.integrations.verl import compute_advantage

    rows = episode_rows(seed, long_text=long_text)
    data = verl_agent_proto(rows, seed=seed)
    data.batch["step_rewards"] = code.core_gigpo.compute_step_discounted_returns(data, gamma)
    order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed + 1))
    data = data[order]  # trainer.balance_batch
    data, _ = code.apply_invalid_action_penalty(data, coef)
    data.batch["token_level_rewards"] = data.batch["token_level_scores"]
    ours, gaca_conventions = data[torch.arange(len(rows))], data[torch.arange(len(rows))]  # copies
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its step-group sizes
        theirs, _ = code.core_gigpo.compute_gigpo_outcome_advantage(
            data.batch["token_level_rewards"], data.batch["step_rewards"], data.batch["response_mask"],
            data.non_tensor_batch["anchor_obs"], data.non_tensor_batch["uid"], data.non_tensor_batch["traj_uid"],
            step_advantage_w=omega, mode=mode, enable_similarity=similarity, similarity_thresh=thresh)
    keywords = dict(step_advantage_w=omega, gigpo_mode=mode, gigpo_enable_similarity=similarity,
                    gigpo_similarity_thresh=thresh)
    compute_advantage(ours, "gigpo", gamma=gamma, config={"gaca": {"conventions": "verl-agent"}}, **keywords)
    gaca_conventions.non_tensor_batch["step"] = np.array([rows[i]["step"] for i in order.tolist()])
    compute_advantage(gaca_conventions, "gigpo", gamma=gamma, config={"gaca": {}}, **keywords)
    diff = (ours.batch["advantages"] - theirs).abs().amax(dim=1)
    other = (gaca_conventions.batch["advantages"] - theirs).abs().amax(dim=1)
    return {"seed": seed, "rows": len(rows), "invalid_rows": int((~data.non_tensor_batch["is_action_valid"]).sum()),
            "max_abs_diff": float(diff.max()), "rows_over_1e-4": int((diff > 1e-4).sum()),
            "gaca_conventions_max_abs_diff": float(other.max()),
            "gaca_conventions_rows_over_1e-4": int((other > 1e-4).sum())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verl-agent", type=Path, required=True, help="root of a verl-agent checkout")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "verl_agent_parity.json")
    args = ap.parse_args(argv)
    from gaca.testing.verl_agent import load_verl_agent

    code = load_verl_agent(args.verl_agent)
    result = {name: [compare(code, seed, **case) for seed in range(args.seeds)] for name, case in CASES.items()}
    print(f"{'case':34s} {'rows':>6s} {'max|diff|':>10s} {'rows>1e-4':>9s} {'gaca conv. max|diff|':>21s} "
          f"{'rows>1e-4':>9s}")
    for name, runs in result.items():
        for r in runs:
            label = f"{name} s{r['seed']}"
            print(f"{label:34s} {r['rows']:6d} {r['max_abs_diff']:10.2e} {r['rows_over_1e-4']:9d} "
                  f"{r['gaca_conventions_max_abs_diff']:21.3f} {r['gaca_conventions_rows_over_1e-4']:9d}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0 if all(r["rows_over_1e-4"] == 0 for runs in result.values() for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
