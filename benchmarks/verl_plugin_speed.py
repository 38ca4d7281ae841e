"""The verl plugin's whole path against verl's own GRPO and verl-agent's GiGPO, side by side in one run.

    python benchmarks/verl_plugin_speed.py                                   # verl-agent side skipped
    python benchmarks/verl_plugin_speed.py --verl-agent /path/to/verl-agent  # a verl-agent checkout

1. GRPO on 1e6 trajectory rows with verl's string uids (groups of 8, 16 response tokens): verl
   0.9.1's ``compute_grpo_vectorized_outcome_advantage`` against ``gaca_advantage(data, "grpo")``,
   which takes the whole plugin path (ids from the uids, the step table, the advantages, the
   broadcast back to tokens). Target: the plugin at least 3x faster.
2. GiGPO on 30k step rows in verl-agent's layout (string uids and trajectory uids, text anchors,
   invalid-action penalties, rows reordered, no step key): verl-agent's
   ``compute_gigpo_outcome_advantage`` (its ``gigpo/core_gigpo.py``, imported from the checkout
   given with ``--verl-agent``; nothing of it is part of gaca) against the plugin's ``gigpo`` with
   ``conventions=verl-agent``, whose result is checked equal too. Target: at least 20x faster.

Best of ``--repeats`` interleaved runs of each side. Prints a table and writes
``benchmarks/results/verl_plugin_speed.json``. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def best_of(fns: dict, repeats: int) -> dict[str, float]:
    """Best seconds of each function, the functions interleaved so that noise hits all alike."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def grpo_batch(rows: int, group: int, length: int, seed: int):
    from verl import DataProto

    gen = torch.Generator().manual_seed(seed)
    uids = [str(uuid.UUID(int=int(x))) for x in torch.randint(0, 2**62, (rows // group,), generator=gen)]
    index = np.array([uids[i // group] for i in range(rows)], dtype=object)
    resp = torch.randint(4, length + 1, (rows, 1), generator=gen)
    mask = (torch.arange(length)[None] < resp).float()
    rewards = torch.zeros(rows, length)
    rewards[torch.arange(rows), resp[:, 0] - 1] = (torch.rand(rows, generator=gen) < 0.4).float() * 10
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask.long(),
                 "old_log_probs": -torch.rand(rows, length, generator=gen) * 3,
                 "responses": torch.randint(5, 1000, (rows, length), generator=gen)},
        non_tensors={"uid": index})
    return data, rewards, mask, index


def section_grpo(args) -> dict:
    from verl.trainer.ppo import core_algos

    from gaca.integrations.verl import gaca_advantage

    data, rewards, mask, index = grpo_batch(args.grpo_rows, 8, 16, args.seed)
    verl_adv, _ = core_algos.compute_grpo_vectorized_outcome_advantage(rewards, mask, index)
    ours = gaca_advantage(data, "grpo", norm_adv_by_std=True).advantages
    times = best_of({
        "verl_grpo_vectorized_s": lambda: core_algos.compute_grpo_vectorized_outcome_advantage(rewards, mask, index),
        "gaca_plugin_grpo_s": lambda: gaca_advantage(data, "grpo", norm_adv_by_std=True),
    }, args.repeats)
    return {"rows": args.grpo_rows, **times, "max_abs_diff": float((ours - verl_adv).abs().max()),
            "speedup": times["verl_grpo_vectorized_s"] / times["gaca_plugin_grpo_s"]}


def section_gigpo(args) -> dict:
    if args.verl_agent is None:
        return {"skipped": "no --verl-agent checkout given"}
    from gaca.integrations.verl import compute_advantage
    from gaca.testing.synthetic import synthetic_batch
    from gaca.testing.verl_agent import load_verl_agent
    from gaca.testing.verl_batches import verl_agent_batch

    core_gigpo = load_verl_agent(args.verl_agent).core_gigpo  # from the user's checkout
    sb = synthetic_batch(args.gigpo_rows, group_size=8, tokens=16, seed=args.seed)
    invalid = torch.rand(len(sb), generator=torch.Generator().manual_seed(args.seed)) < 0.2
    data, _, _ = verl_agent_batch(sb, invalid, coef=0.1, gamma=0.95, seed=args.seed)
    data.non_tensor_batch["anchor_obs"] = np.array(
        [f"You arrive at loc {int(a) % 997}. You see a desk {int(a) % 7}." for a in sb.anchor.tolist()], dtype=object)
    for key in ("uid", "traj_uid"):  # verl's string uuids
        names = {v: str(uuid.uuid4()) for v in set(data.non_tensor_batch[key].tolist())}
        data.non_tensor_batch[key] = np.array([names[v] for v in data.non_tensor_batch[key].tolist()], dtype=object)
    batch = data.batch
    nt = data.non_tensor_batch

    def theirs():
        with contextlib.redirect_stdout(io.StringIO()):  # it prints the mean step-group size
            return core_gigpo.compute_gigpo_outcome_advantage(
                batch["token_level_rewards"], batch["step_rewards"], batch["response_mask"], nt["anchor_obs"],
                nt["uid"], nt["traj_uid"], step_advantage_w=1.0, mode="mean_std_norm")[0]

    def ours():
        compute_advantage(data, "gigpo", gamma=0.95, config={"gaca": {"conventions": "verl-agent"}},
                          step_advantage_w=1.0, gigpo_mode="mean_std_norm")
        return data.batch["advantages"]

    diff = float((theirs() - ours()).abs().max())
    times = best_of({"verl_agent_gigpo_s": theirs, "gaca_plugin_gigpo_s": ours}, args.repeats)
    return {"rows": len(sb), **times, "max_abs_diff": diff,
            "speedup": times["verl_agent_gigpo_s"] / times["gaca_plugin_gigpo_s"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grpo-rows", type=int, default=1_000_000)
    ap.add_argument("--gigpo-rows", type=int, default=30_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verl-agent", type=Path, default=None, help="root of a verl-agent checkout")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "verl_plugin_speed.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    result = {"machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                          "torch": torch.__version__, "threads": torch.get_num_threads()},
              "grpo": section_grpo(args), "gigpo": section_gigpo(args)}
    g, v = result["grpo"], result["gigpo"]
    print(f"{'case':44s} {'theirs s':>10s} {'gaca s':>10s} {'speedup':>8s} {'target':>7s} {'max|diff|':>10s}")
    print(f"{'GRPO, ' + str(g['rows']) + ' rows (verl vectorized)':44s} {g['verl_grpo_vectorized_s']:10.3f} "
          f"{g['gaca_plugin_grpo_s']:10.3f} {g['speedup']:8.1f} {'>= 3':>7s} {g['max_abs_diff']:10.2e}")
    if "skipped" in v:
        print(f"GiGPO vs verl-agent: skipped ({v['skipped']})")
    else:
        print(f"{'GiGPO, ' + str(v['rows']) + ' step rows (verl-agent)':44s} {v['verl_agent_gigpo_s']:10.3f} "
              f"{v['gaca_plugin_gigpo_s']:10.3f} {v['speedup']:8.1f} {'>= 20':>7s} {v['max_abs_diff']:10.2e}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
