"""gaca's plugin under ``conventions=verl-agent`` against verl-agent's own GiGPO, on the same batches.

    python audits/verl_agent_parity.py --verl-agent /path/to/verl-agent   # a verl-agent checkout

Two parts.

**Its trainer as it ships** (``trainer``): for every configuration of verl-agent's example scripts
(``gaca.testing.verl_agent_runs.RUNS``: ALFWorld, with dynamic sampling and with groups of one;
WebShop; Sokoban with text grids at γ = 0.95 and γ = 1 and with images for a vision model;
Blackjack; NumberLine; search with similarity grouping), at the scripts' batch sizes, scripted
episodes go through verl-agent's own functions in its trainer's order: the rollout layout
(``gather_rollout_data``, after ``filter_group_data`` for dynamic sampling), its discounted returns,
its ``adjust_batch`` (copies of random rows up to its size divisor; routed through the plugin's
``record_step_index`` as installing the integration does), a shuffle (``balance_batch``), its reward
manager and invalid-action penalty. Then verl-agent's ``compute_gigpo_outcome_advantage`` against
the plugin called with verl-agent's keywords and no config. Reported beside: verl-agent's own
float32 rounding (its GiGPO on the same batch in float64), the plugin against that float64 value,
GACA at κ = 0 with the additive mixture (= GiGPO), and whether the plugin could compute the batch
without the recorded step index (verl-agent's ``adjust_batch`` not routed).

**Shuffled, no step index** (``recovered order``): ALFWorld-like batches without copies, rows
shuffled and no step key, so the plugin recovers each trajectory's order from the returns;
verl-agent's ``compute_gigpo_outcome_advantage`` against the plugin, and gaca's own conventions
(with the true step index given) beside, to show what the setting changes.

Prints a table and writes ``audits/results/verl_agent_parity.json``.
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


def trainer_case(code, name: str, seed: int, groups: int | None) -> dict:
    """One configuration of verl-agent's trainer (see the module docstring), one seed."""
    from gaca.integrations.verl import record_step_index
    from gaca.testing.verl_agent_runs import RUNS, gaca_advantages, trainer_batch, verl_agent_gigpo

    run = RUNS[name] if groups is None else RUNS[name].scaled(groups)
    data = trainer_batch(code, run, seed, adjust_batch=record_step_index(code.adjust_batch),
                         gaca={"conventions": "verl-agent"})
    theirs = verl_agent_gigpo(code, data, run)
    theirs64 = verl_agent_gigpo(code, data, run, float64=True)
    ours = gaca_advantages(data, run)
    additive = gaca_advantages(data, run, {"conventions": "verl-agent", "estimator": "gaca", "mixture": "additive",
                                           "kappa": 0.0})
    own = gaca_advantages(data, run, {})
    diff = (ours - theirs).abs().amax(dim=1)
    # beyond verl-agent's own float32 rounding: |ours − its float32| − |its float64 − its float32|
    excess = ((ours - theirs).abs().double() - (theirs64 - theirs).abs()).amax(dim=1)
    steps = set(zip(data.non_tensor_batch["traj_uid"].tolist(), data.non_tensor_batch["step"].tolist(), strict=True))
    unrouted = trainer_batch(code, run, seed, gaca={"conventions": "verl-agent"})
    try:
        gaca_advantages(unrouted, run)
        without = "computed"
    except ValueError as error:
        without = f"raises ValueError: {str(error).split(';')[0]}"
    return {"seed": seed, "script": run.script, "groups": run.groups, "group_size": run.group_size,
            "size_divisor": run.size_divisor, "rows": len(data), "copies": len(data) - len(steps),
            "invalid_rows": int((~data.non_tensor_batch["is_action_valid"].astype(bool)).sum()),
            "max_abs_diff": float(diff.max()), "rows_over_1e-4": int((diff > 1e-4).sum()),
            "rows_beyond_verl_agent_rounding_by_1e-5": int((excess > 1e-5).sum()),
            "verl_agent_float32_vs_float64_max_abs_diff": float((theirs64 - theirs).abs().max()),
            "plugin_vs_verl_agent_float64_max_abs_diff": float((ours.double() - theirs64).abs().max()),
            "gaca_kappa0_additive_max_abs_diff": float((additive - theirs).abs().max()),
            "gaca_conventions_max_abs_diff": float((own - theirs).abs().max()),
            "without_recorded_step_index": without}


def _short(runs: list[dict]) -> str:
    """'computed', or how the plugin failed without the recorded step index, over the seeds."""
    outcomes = [r["without_recorded_step_index"] for r in runs]
    failed = [o for o in outcomes if o != "computed"]
    if not failed:
        return "computed"
    kinds = sorted({"several rows fit a position" if "several" in o else "no row fits a position" for o in failed})
    return f"raises on {len(failed)}/{len(outcomes)} ({', '.join(kinds)})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verl-agent", type=Path, required=True, help="root of a verl-agent checkout")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--groups", type=int, default=None,
                    help="episode groups per trainer batch (default: each example script's own)")
    ap.add_argument("--out", type=Path, default=ROOT / "audits" / "results" / "verl_agent_parity.json")
    args = ap.parse_args(argv)
    from gaca.testing.verl_agent import load_verl_agent
    from gaca.testing.verl_agent_runs import RUNS

    code = load_verl_agent(args.verl_agent)
    trainer = {name: [trainer_case(code, name, seed, args.groups) for seed in range(args.seeds)] for name in RUNS}
    recovered = {name: [compare(code, seed, **case) for seed in range(args.seeds)] for name, case in CASES.items()}
    print("verl-agent's trainer as it ships (max over seeds, rows summed; copies: adjust_batch's padding rows;\n"
          "beyond: rows further from verl-agent's float32 numbers than their own rounding + 1e-5)")
    print(f"{'configuration':32s} {'rows':>6s} {'copies':>6s} {'max|diff|':>10s} {'rows>1e-4':>9s} {'beyond':>6s} "
          f"{'its f32 vs f64':>14s} {'ours vs f64':>11s} {'GACA k=0':>9s}  without the step index")
    for name, runs in trainer.items():
        print(f"{name:32s} {max(r['rows'] for r in runs):6d} {max(r['copies'] for r in runs):6d} "
              f"{max(r['max_abs_diff'] for r in runs):10.2e} {sum(r['rows_over_1e-4'] for r in runs):9d} "
              f"{sum(r['rows_beyond_verl_agent_rounding_by_1e-5'] for r in runs):6d} "
              f"{max(r['verl_agent_float32_vs_float64_max_abs_diff'] for r in runs):14.2e} "
              f"{max(r['plugin_vs_verl_agent_float64_max_abs_diff'] for r in runs):11.2e} "
              f"{max(r['gaca_kappa0_additive_max_abs_diff'] for r in runs):9.2e}  "
              f"{_short(runs)}")
    print("\nshuffled, no step index: the order recovered from the returns")
    print(f"{'case':34s} {'rows':>6s} {'max|diff|':>10s} {'rows>1e-4':>9s} {'gaca conv. max|diff|':>21s} "
          f"{'rows>1e-4':>9s}")
    for name, runs in recovered.items():
        for r in runs:
            label = f"{name} s{r['seed']}"
            print(f"{label:34s} {r['rows']:6d} {r['max_abs_diff']:10.2e} {r['rows_over_1e-4']:9d} "
                  f"{r['gaca_conventions_max_abs_diff']:21.3f} {r['gaca_conventions_rows_over_1e-4']:9d}")
    result = {"command": "python audits/verl_agent_parity.py --verl-agent PATH"
                         + ("" if args.seeds == 3 else f" --seeds {args.seeds}")
                         + ("" if args.groups is None else f" --groups {args.groups}"),
              "trainer": trainer, "recovered order": recovered}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    # pass: no row further from verl-agent's float32 numbers than their own rounding (+1e-5), and
    # (without a float64 reference there) no row over 1e-4 on the recovered-order batches
    ok = all(r["rows_beyond_verl_agent_rounding_by_1e-5"] == 0 for case in trainer.values() for r in case) and all(
        r["rows_over_1e-4"] == 0 for case in recovered.values() for r in case)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
