"""Trainer speed on real ALFWorld prompts (issue 4, item 7).

    python benchmarks/train_speed.py [--preset tiny-alfworld] [--rows 16] [--repeats 2] [key=value ...]

Measures, with the preset's policy (warm-started as the trainer does it):
1. rollout throughput: ``CausalLMPolicy.sample`` (generated tokens/s) against plain ``model.generate`` on
   the same prompts, same length limit and stop string (target: >= 1x);
2. update throughput: ``ppo_update`` (response tokens/s) against a bare forward+backward+AdamW
   loop of the same model over the same micro-batches (target: >= 0.8x);
3. the share of one training iteration (rollout + advantages + update) spent in
   ``compute_advantages`` (target: < 1%);
4. model forward passes of one iteration for ``grpo`` and ``gaca`` from the same seed (must be equal);
5. the two action modes on the same policy and the same train games: the cost of choosing among the
   admissible actions (``rollout.action_mode="choose"``) against generating, per step row, for the
   rollout (wall time of ``collect_rollouts``) and the update (``ppo_update``), interleaved repeats
   (target: choose <= 2x generate for both). Each mode runs with the prompt it needs: generate mode
   always lists the admissible actions; choose mode as the preset says (``rollout.list_actions``).
Prints a table and writes benchmarks/results/train_speed.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

from gaca.advantage import compute_advantages  # noqa: E402
from gaca.envs import EnvPool  # noqa: E402
from gaca.rollout import collect_expert_examples, collect_rollouts  # noqa: E402
from gaca.testing.generate_baseline import generate_baseline  # noqa: E402
from gaca.train.config import load_config  # noqa: E402
from gaca.train.schedule import iteration_generator, train_task_seeds  # noqa: E402
from gaca.train.update import make_optimizer, ppo_update  # noqa: E402
from gaca.train.warm_start import warm_start  # noqa: E402


def best(fn, repeats: int):
    """(best seconds, last result) over ``repeats`` calls."""
    out, t_best = None, float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        t_best = min(t_best, time.perf_counter() - t0)
    return t_best, out


def bare_update(policy, optimizer, batch, adv, micro: int, num_mb: int, perm: torch.Tensor) -> None:
    """The reference loop: score, −mean(A·logp), backward, AdamW step; same micro-batches
    (rows sorted by prompt length within each minibatch, as ``ppo_update`` does)."""
    rows = batch.rows  # generate mode: GeneratedResponses
    prompt_len = rows.prompt_lengths
    for mb_idx in torch.tensor_split(perm, num_mb):
        mb_idx = mb_idx[torch.argsort(prompt_len[mb_idx], stable=True)]
        optimizer.zero_grad(set_to_none=True)
        total = int(rows.mask[mb_idx].sum())
        for s in range(0, len(mb_idx), micro):
            idx = mb_idx[s : s + micro]
            width = max(1, int(rows.mask[idx].sum(1).max()))
            mask = rows.mask[idx, :width]
            out = policy.score([rows.prompt_ids[int(i)] for i in idx], rows.response_ids[idx, :width], mask)
            loss = -(out.logprobs * adv[idx, None] * mask).sum() / total
            loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), 1.0)
        optimizer.step()


def action_mode_costs(cfg, policy, state: dict, repeats: int) -> dict:
    """Seconds per step row of one iteration's rollout and update in each action mode (same seeds)."""
    seeds = train_task_seeds(cfg, 0)
    adv_opts = cfg.advantage
    out: dict = {mode: {"rollout_s_per_row": float("inf"), "policy_s_per_row": float("inf"),
                        "update_s_per_row": float("inf")} for mode in ("generate", "choose")}
    with EnvPool.for_split(cfg.env, cfg.env.train_split, cfg.rollout.tasks_per_iter * cfg.rollout.group_size,
                           num_games=cfg.env.num_train_games) as pool:
        for _ in range(repeats):
            for mode in ("generate", "choose"):
                # a generating policy must see the admissible actions; a choosing one may not (list_actions)
                rollout_cfg = dataclasses.replace(cfg.rollout, action_mode=mode,
                                                  list_actions=cfg.rollout.list_actions or mode == "generate")
                policy.model.load_state_dict(state)
                t0 = time.perf_counter()
                batch = collect_rollouts(policy, pool, seeds, rollout_cfg,
                                         generator=iteration_generator(cfg.seed, 0))
                t1 = time.perf_counter()
                adv = compute_advantages(batch.steps, cfg.estimator, adv_opts).advantage
                t2 = time.perf_counter()
                ppo_update(policy, make_optimizer(policy, cfg.ppo), batch, adv, cfg.ppo,
                           generator=torch.Generator().manual_seed(0))
                t3 = time.perf_counter()
                rows, m = batch.num_rows, out[mode]
                m["rows"], m["list_actions"] = rows, rollout_cfg.list_actions
                m["rollout_s_per_row"] = min(m["rollout_s_per_row"], (t1 - t0) / rows)
                m["policy_s_per_row"] = min(m["policy_s_per_row"], batch.generate_s / rows)
                m["update_s_per_row"] = min(m["update_s_per_row"], (t3 - t2) / rows)
                if mode == "choose":
                    m["candidates_per_row"] = sum(c.size for c in batch.rows.choices) / rows
                    m["success"] = sum(e.won for e in batch.episodes) / len(batch.episodes)
                else:
                    m["invalid_ratio"] = float(batch.invalid.float().mean())
                    m["success"] = sum(e.won for e in batch.episodes) / len(batch.episodes)
    out["ratio"] = {k: out["choose"][k] / out["generate"][k]
                    for k in ("rollout_s_per_row", "policy_s_per_row", "update_s_per_row")}
    policy.model.load_state_dict(state)
    return out


def generate_mode_costs(cfg, policy, state: dict, args) -> dict:
    """Sections 1-4: sampling and update throughput against their baselines, one iteration per estimator."""
    generating = dataclasses.replace(cfg.rollout, action_mode="generate", list_actions=True)
    # 1. rollout throughput on real prompts (expert play of held-out games, built as the rollout builds them)
    with EnvPool.for_split(cfg.env, cfg.env.eval_split, 4, num_games=cfg.env.num_eval_games, expert=True) as pool:
        data = collect_expert_examples(pool, list(range(8)), prompt=generating.prompt_format(pool.intro))
    prompts = [policy.build_prompt(p) for p, _ in data.examples][: args.rows]
    kw = dict(max_new_tokens=cfg.rollout.max_new_tokens, temperature=cfg.rollout.temperature,
              top_p=cfg.rollout.top_p, stop=cfg.rollout.stop)
    t_s, s_out = best(lambda: policy.sample(prompts, generator=torch.Generator().manual_seed(0), **kw), args.repeats)
    t_g, g_out = best(lambda: generate_baseline(policy, prompts, seed=0, **kw), args.repeats)
    result: dict = {}
    result["rollout"] = {
        "prompts": len(prompts),
        "mean_prompt_tokens": sum(len(policy.encode_prompt(p)) for p in prompts) / len(prompts),
        "sample_tokens": s_out.num_tokens, "sample_s": t_s, "sample_tokens_per_s": s_out.num_tokens / t_s,
        "generate_tokens": g_out.num_tokens, "generate_s": t_g, "generate_tokens_per_s": g_out.num_tokens / t_g,
    }
    result["rollout"]["speedup"] = result["rollout"]["sample_tokens_per_s"] / result["rollout"]["generate_tokens_per_s"]

    # 3./4. one real iteration per estimator from the same seed: forward passes and the advantage share
    # (sections 2-4 measure generate mode; section 5 compares the modes)
    it_pool = EnvPool.for_split(cfg.env, cfg.env.train_split, cfg.rollout.tasks_per_iter * cfg.rollout.group_size,
                                num_games=cfg.env.num_train_games)
    iters = {}
    batch = None
    for name in ("grpo", "gaca"):
        policy.model.load_state_dict(state)
        opt = make_optimizer(policy, cfg.ppo)
        gen = iteration_generator(cfg.seed, 0)
        calls0 = policy.forward_calls
        t0 = time.perf_counter()
        batch = collect_rollouts(policy, it_pool, train_task_seeds(cfg, 0), generating, generator=gen)
        t1 = time.perf_counter()
        calls1 = policy.forward_calls
        adv = compute_advantages(batch.steps, name, cfg.advantage)
        t2 = time.perf_counter()
        upd = ppo_update(policy, opt, batch, adv.advantage, cfg.ppo, generator=gen)
        t3 = time.perf_counter()
        t_adv = min(best(lambda n=name, b=batch: compute_advantages(b.steps, n, cfg.advantage), 20)[0],
                    t2 - t1)
        iters[name] = {
            "rows": batch.num_rows, "rollout_s": t1 - t0, "advantage_s": t_adv, "update_s": t3 - t2,
            "advantage_share": t_adv / (t1 - t0 + t_adv + t3 - t2),
            "forward_passes": policy.forward_calls - calls0,
            "forward_passes_rollout": calls1 - calls0, "forward_passes_update": upd.forward_passes,
        }
    it_pool.close()
    result["iteration"] = iters
    result["forward_passes_equal"] = iters["grpo"]["forward_passes"] == iters["gaca"]["forward_passes"]

    # 2. update throughput: ppo_update vs the bare loop, same batch, same micro-batches
    assert batch is not None
    adv = compute_advantages(batch.steps, "gaca", cfg.advantage).advantage
    tokens = int(batch.rows.mask.sum()) * cfg.ppo.epochs
    num_mb = min(cfg.ppo.num_minibatches, batch.num_rows)

    def run_ppo():
        policy.model.load_state_dict(state)
        ppo_update(policy, make_optimizer(policy, cfg.ppo), batch, adv, cfg.ppo,
                   generator=torch.Generator().manual_seed(0))

    def run_bare():
        policy.model.load_state_dict(state)
        opt = make_optimizer(policy, cfg.ppo)
        for _ in range(cfg.ppo.epochs):
            bare_update(policy, opt, batch, adv, cfg.ppo.micro_batch_size, num_mb,
                        torch.randperm(batch.num_rows, generator=torch.Generator().manual_seed(0)))

    # interleaved (ppo, bare, ppo, bare, ...) so that machine noise hits both alike; best of each
    t_p, t_b = float("inf"), float("inf")
    for _ in range(args.repeats):
        t_p = min(t_p, best(run_ppo, 1)[0])
        t_b = min(t_b, best(run_bare, 1)[0])
    result["update"] = {"tokens": tokens, "ppo_update_s": t_p, "bare_s": t_b, "ppo_tokens_per_s": tokens / t_p,
                        "bare_tokens_per_s": tokens / t_b, "ratio": t_b / t_p}

    return result


def print_generate_mode_costs(result: dict) -> dict:
    """Prints sections 1-4; their targets."""
    r, u, iters = result["rollout"], result["update"], result["iteration"]
    targets = {
        "rollout_at_least_generate": r["speedup"] >= 1.0,
        "update_at_least_0.8_bare": u["ratio"] >= 0.8,
        "advantage_under_1pct": max(v["advantage_share"] for v in iters.values()) < 0.01,
        "forward_passes_equal": result["forward_passes_equal"],
    }
    print(f"{'measure':34s} {'gaca':>12s} {'baseline':>12s} {'ratio':>7s}")
    print(f"{'rollout tokens/s (sample|generate)':34s} {r['sample_tokens_per_s']:12.1f} "
          f"{r['generate_tokens_per_s']:12.1f} {r['speedup']:7.2f}")
    print(f"{'update tokens/s (ppo|bare loop)':34s} {u['ppo_tokens_per_s']:12.1f} {u['bare_tokens_per_s']:12.1f} "
          f"{u['ratio']:7.2f}")
    for name, v in iters.items():
        print(f"iteration [{name}]: rows {v['rows']}, rollout {v['rollout_s']:.2f}s, "
              f"advantage {v['advantage_s'] * 1e3:.2f}ms "
              f"({100 * v['advantage_share']:.3f}%), update {v['update_s']:.2f}s, forward passes {v['forward_passes']} "
              f"(rollout {v['forward_passes_rollout']}, update {v['forward_passes_update']})")
    return targets


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny-alfworld")
    ap.add_argument("--rows", type=int, default=16, help="prompts per sampling batch")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--modes-only", action="store_true", help="measure section 5 (the action modes) alone")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "train_speed.json"))
    ap.add_argument("overrides", nargs="*", help="config overrides (e.g. sft.steps=60 policy.model=smollm2)")
    args = ap.parse_args()
    cfg = load_config(preset=args.preset, overrides=[
        "out_dir=" + json.dumps(tempfile.mkdtemp(prefix="gaca-train-speed-")),
        "sft.steps=60", "sft.episodes=16", "env.num_workers=1", *args.overrides])
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    run_dir = Path(cfg.out_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    policy, _ = warm_start(cfg, run_dir)
    state = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
    result: dict = {"preset": args.preset, "model": cfg.policy.model, "threads": torch.get_num_threads(),
                    "platform": platform.platform(), "python": sys.version.split()[0], "torch": torch.__version__}

    if not args.modes_only:
        result.update(generate_mode_costs(cfg, policy, state, args))
    # 5. the action modes, same policy, same games, same seeds; interleaved repeats, best of each
    result["action_modes"] = modes = action_mode_costs(cfg, policy, state, args.repeats)

    targets = {"choose_rollout_at_most_2x_generate": modes["ratio"]["rollout_s_per_row"] <= 2.0,
               "choose_update_at_most_2x_generate": modes["ratio"]["update_s_per_row"] <= 2.0}
    if not args.modes_only:
        targets.update(print_generate_mode_costs(result))
    result["targets"] = targets
    print(f"{'per step row (choose|generate)':34s} {'choose':>12s} {'generate':>12s} {'ratio':>7s}")
    for key in ("rollout_s_per_row", "policy_s_per_row", "update_s_per_row"):
        print(f"{key:34s} {modes['choose'][key]:12.4f} {modes['generate'][key]:12.4f} {modes['ratio'][key]:7.2f}")
    print(f"{'candidates per step (choose)':34s} {modes['choose']['candidates_per_row']:12.1f}")
    print("targets:", json.dumps(result["targets"]))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
