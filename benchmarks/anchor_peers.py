"""How often does a step find a step-level peer, under each anchor (``rollout.anchor``)?

GiGPO's step level compares a step only with steps of its episode group that start from the same
anchor state; a step without such a peer gets no step-level credit. Which texts count as "the same
state" is the anchor: the observation alone, the observation with the admissible actions, or the
environment's own state key (WebShop reports one: page, query, result page, item, selected
options). This plays one rollout of a trained run on its training games, exactly as training
samples, and recomputes the anchors of the same steps under every kind.

    python benchmarks/anchor_peers.py RUN_DIR [--groups 16] [--seed 0] [--threads 1]

Prints a table and writes ``benchmarks/results/anchor_peers.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch

from gaca.advantage import compute_advantages, hash_text
from gaca.envs import EnvPool
from gaca.rollout.collect import anchor_text, collect_rollouts
from gaca.train.run import load_checkpoint_policy

KINDS = ("observation", "observation+actions", "state")


def peer_stats(batch, kind: str) -> dict[str, float] | None:
    """Share of rows with a peer and the number of step groups, with the anchors of ``kind``."""
    steps = [s for e in batch.episodes if e.error is None for s in e.steps]
    by_key = {(s.turn.episode, s.turn.step): s for s in steps}
    table = batch.steps
    rows = [by_key[(int(k), int(t))] for k, t in zip(table.traj_id.tolist(), table.step.tolist(), strict=True)]
    if kind == "state" and any("state_key" not in s.turn.info for s in rows):
        return None  # this environment reports no state key
    texts = [anchor_text(s.turn.observation, s.turn.admissible_actions, kind, s.turn.info.get("state_key"))
             for s in rows]
    anchors = torch.tensor([hash_text(a) for a in texts], dtype=torch.int64)
    out = compute_advantages(dataclasses.replace(table, anchor=anchors, anchor_text=texts), "gigpo")
    groups = {(g, a) for g, a in zip(table.group_id.tolist(), anchors.tolist(), strict=True)}
    return {"has_peer": float(out.has_peer.double().mean()), "step_groups": len(groups),
            "rows_per_step_group": table.group_id.numel() / len(groups)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--groups", type=int, default=16, help="episode groups (training games) to play")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/results/anchor_peers.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    policy, cfg = load_checkpoint_policy(args.run_dir)
    env = dataclasses.replace(cfg.env, num_workers=0)
    gen = torch.Generator().manual_seed(args.seed)
    seeds = torch.randperm(env.num_train_games, generator=gen)[: args.groups].tolist()
    t0 = time.perf_counter()
    with torch.no_grad(), EnvPool.for_split(env, env.train_split, len(seeds) * cfg.rollout.group_size,
                                            num_games=env.num_train_games) as pool:
        batch = collect_rollouts(policy, pool, seeds, cfg.rollout, generator=gen)
    seconds = time.perf_counter() - t0
    result = {"run_dir": str(args.run_dir), "env": env.name, "groups": len(seeds),
              "group_size": cfg.rollout.group_size, "rows": batch.num_rows, "rollout_s": seconds,
              "success": sum(e.won for e in batch.episodes) / len(batch.episodes),
              "invalid_ratio": float(batch.invalid.double().mean()),
              "anchors": {kind: peer_stats(batch, kind) for kind in KINDS}}
    print(f"{env.name}: {batch.num_rows} step rows in {len(seeds)} groups of {cfg.rollout.group_size} "
          f"(success {result['success']:.3f}, invalid {result['invalid_ratio']:.2f}; {seconds:.0f} s)")
    print("| anchor | rows with a peer | step groups | rows per step group |\n|---|---|---|---|")
    for kind, stats in result["anchors"].items():
        if stats is None:
            print(f"| {kind} | (no state key) | | |")
        else:
            print(f"| {kind} | {stats['has_peer']:.3f} | {stats['step_groups']} | {stats['rows_per_step_group']:.2f} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
