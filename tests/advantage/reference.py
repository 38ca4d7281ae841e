"""Slow, obvious loop implementations of every estimator, written from the docstrings.

Python lists and dicts only: no sorting tricks, no scatter. The vectorized library is tested
against these on seeded random batches.
"""

from __future__ import annotations

import difflib
import itertools
import math
from collections import defaultdict

import torch

from gaca.advantage import StepBatch


def _mean(xs):
    return sum(xs) / len(xs)


def _std(xs):  # unbiased; a single member has std 0
    if len(xs) < 2:
        return 0.0
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _relative(x, members, *, norm, eps, leave_one_out=False, self_index=None):
    if len(members) < 2:
        return 0.0
    if leave_one_out:
        others = [m for k, m in enumerate(members) if k != self_index]
        centered = x - _mean(others)
    else:
        centered = x - _mean(members)
    return centered / (_std(members) + eps) if norm == "mean_std" else centered


def reference_advantages(batch: StepBatch, estimator: str, **kw) -> dict[str, list[float]]:
    o = dict(gamma=0.95, eps=1e-6, norm=None, episode_stats="trajectory", omega=1.0,
             criticality="zscore", weight_map="clip", w0=0.5, kappa=0.25, w_min=0.0, w_max=1.0,
             mixture="convex", no_peer="episode", similarity=None, uncertainty="auto", empg_k=1.0,
             empg_k_future=1.0, empg_zeta=0.1, empg_scope="batch", hgpo_history=2, hgpo_alpha=1.0,
             hgpo_base=False, hgpo_zero_levels="skip", conventions="gaca")
    o.update(kw)
    step_norm = o["norm"] or "mean_std"
    if o["norm"] is None:  # each estimator's own: classic RLOO centers only
        o["norm"] = "mean" if estimator == "rloo" else "mean_std"
    n = len(batch)
    g = batch.group_id.tolist()
    t = batch.traj_id.tolist()
    s = batch.step.tolist()
    a = batch.anchor.tolist()
    r = batch.reward.double().tolist()
    lp = batch.logprobs.double().tolist()
    mk = batch.mask.tolist()

    trajs = defaultdict(list)  # (g, t) -> rows sorted by step
    for i in range(n):
        trajs[(g[i], t[i])].append(i)
    for rows in trajs.values():
        rows.sort(key=lambda i: s[i])
    ret = {key: sum(r[i] for i in rows) for key, rows in trajs.items()}

    # Episode level.
    episode = [0.0] * n
    if o["episode_stats"] == "trajectory":
        by_group = defaultdict(list)
        for key in trajs:
            by_group[key[0]].append(key)
        for keys in by_group.values():
            values = [ret[k] for k in keys]
            for idx, k in enumerate(keys):
                adv = _relative(ret[k], values, norm=o["norm"], eps=o["eps"],
                                leave_one_out=estimator == "rloo", self_index=idx)
                for i in trajs[k]:
                    episode[i] = adv
    else:
        by_group = defaultdict(list)
        for i in range(n):
            by_group[g[i]].append(i)
        for rows in by_group.values():
            values = [ret[(g[i], t[i])] for i in rows]
            for idx, i in enumerate(rows):
                episode[i] = _relative(values[idx], values, norm=o["norm"], eps=o["eps"],
                                       leave_one_out=estimator == "rloo", self_index=idx)
    if estimator in ("grpo", "rloo"):
        return {"advantage": episode, "episode": episode}
    nll = [-sum(x for x, m in zip(lp[i], mk[i], strict=True) if m) / sum(mk[i]) for i in range(n)]
    if estimator == "empg":
        return _empg(batch, o, trajs, episode, nll, g)

    # Step level: discounted returns, step groups by (group, anchor).
    returns = [0.0] * n
    for rows in trajs.values():
        acc = 0.0
        for i in reversed(rows):
            acc = r[i] + o["gamma"] * acc
            returns[i] = acc
    anchor_key = list(a)
    if o["similarity"] is not None:
        reps = defaultdict(list)  # group -> [(text, key)]
        seen = {}
        for i in sorted(range(n), key=lambda i: (g[i], t[i], s[i])):  # (trajectory, step) order
            if (g[i], a[i]) not in seen:
                text = batch.anchor_text[i]
                match = next((k for rt, k in reps[g[i]]
                              if difflib.SequenceMatcher(None, rt, text, autojunk=False).ratio()
                              >= o["similarity"]), None)
                if match is None:
                    match = a[i]
                    reps[g[i]].append((text, a[i]))
                seen[(g[i], a[i])] = match
            anchor_key[i] = seen[(g[i], a[i])]
    if estimator == "hgpo":
        return _hgpo(o, trajs, episode, returns, anchor_key, g, ret)
    step_groups = defaultdict(list)
    for i in range(n):
        step_groups[(g[i], anchor_key[i])].append(i)
    step_level = [0.0] * n
    has_peer = [False] * n
    for rows in step_groups.values():
        values = [returns[i] for i in rows]
        for i in rows:
            step_level[i] = _relative(returns[i], values, norm=step_norm, eps=o["eps"])
            has_peer[i] = len(rows) > 1
    if estimator == "gigpo":
        adv = [episode[i] + o["omega"] * step_level[i] for i in range(n)]
        return {"advantage": adv, "episode": episode, "step_level": step_level, "has_peer": has_peer}

    # GACA / fixed mixing.
    kappa = 0.0 if estimator == "fixed_mix" else o["kappa"]
    crit = [0.0] * n
    if kappa != 0.0:
        for rows in trajs.values():
            values = [nll[i] for i in rows]
            for i in rows:
                if len(rows) < 2:
                    crit[i] = 0.0
                elif o["criticality"] == "zscore":
                    crit[i] = (nll[i] - _mean(values)) / (_std(values) + o["eps"])
                elif o["criticality"] == "ratio":
                    crit[i] = (nll[i] - _mean(values)) / (abs(_mean(values)) + o["eps"])
                else:  # rank with ties averaged
                    less = sum(v < nll[i] for v in values)
                    equal = sum(v == nll[i] for v in values)
                    crit[i] = 2 * (less + (equal - 1) / 2) / (len(rows) - 1) - 1
    weight = [0.0] * n
    for i in range(n):
        if o["weight_map"] == "clip":
            w = o["w0"] + kappa * crit[i]
        else:
            w = 1 / (1 + math.exp(-(math.log(o["w0"] / (1 - o["w0"])) + kappa * crit[i])))
        w = min(max(w, o["w_min"]), o["w_max"])
        if o["no_peer"] == "episode" and not has_peer[i]:
            w = 0.0
        weight[i] = w
    if o["mixture"] == "convex":
        adv = [(1 - weight[i]) * episode[i] + weight[i] * step_level[i] for i in range(n)]
    else:
        adv = [episode[i] + o["omega"] * weight[i] / o["w0"] * step_level[i] for i in range(n)]
    return {"advantage": adv, "episode": episode, "step_level": step_level, "has_peer": has_peer,
            "weight": weight, "criticality": crit, "nll": nll if kappa != 0.0 else [0.0] * n}


def _empg(batch, o, trajs, episode, nll, g):
    """EMPG as its docstring states it: min-max normalized uncertainty over the scope, scale
    exp(-k h) over its scope mean, bonus ζ exp(-k_f h) of the next step, centered over the scope."""
    n = len(nll)
    if o["uncertainty"] == "nll" or batch.entropy is None:
        if o["uncertainty"] == "entropy":
            raise ValueError("uncertainty='entropy' without StepBatch.entropy")
        h = list(nll)
    else:
        h = batch.entropy.double().tolist()
    scope = [0 if o["empg_scope"] == "batch" else g[i] for i in range(n)]
    members = defaultdict(list)
    for i in range(n):
        members[scope[i]].append(i)
    hn = [0.0] * n
    for rows in members.values():
        lo, hi = min(h[i] for i in rows), max(h[i] for i in rows)
        for i in rows:
            hn[i] = (h[i] - lo) / (hi - lo + o["eps"])
    raw = [math.exp(-o["empg_k"] * x) for x in hn]
    raw_mean = {key: _mean([raw[j] for j in rows]) for key, rows in members.items()}
    scale = [raw[i] / raw_mean[scope[i]] for i in range(n)]
    following = {}
    for rows in trajs.values():
        for a, b in itertools.pairwise(rows):
            following[a] = b
    modulated = [scale[i] * episode[i]
                 + (o["empg_zeta"] * math.exp(-o["empg_k_future"] * hn[following[i]]) if i in following else 0.0)
                 for i in range(n)]
    modulated_mean = {key: _mean([modulated[j] for j in rows]) for key, rows in members.items()}
    adv = [modulated[i] - modulated_mean[scope[i]] for i in range(n)]
    return {"advantage": adv, "episode": episode, "weight": scale, "criticality": hn, "nll": nll}


def _hgpo(o, trajs, episode, returns, anchor_key, g, ret):
    """HGPO as its docstring states it: level j groups the steps of an episode group whose last j
    anchors are equal; each level with a peer and unequal returns contributes its normalized return
    with weight (j+1)^alpha; optionally A^E as level 0 (weight 1) where its group's scores differ."""
    n = len(returns)
    norm = o["norm"] or "mean_std"
    levels = defaultdict(list)  # (j, group, last j anchors) -> rows
    for rows in trajs.values():
        for t, i in enumerate(rows):
            for j in range(1, o["hgpo_history"] + 2):
                if t >= j - 1:
                    levels[(j, g[i], tuple(anchor_key[r] for r in rows[t - j + 1: t + 1]))].append(i)
    items = defaultdict(list)  # row -> [(j, advantage)]
    has_peer = [False] * n
    for (j, _, _), rows in levels.items():
        values = [returns[i] for i in rows]
        for i in rows:
            has_peer[i] = has_peer[i] or (j == 1 and len(rows) > 1)
        if len(rows) < 2 or (o["hgpo_zero_levels"] == "skip" and min(values) == max(values)):
            continue
        m = _mean(values)
        sd = _std(values) if o["conventions"] != "verl-agent" else math.sqrt(_mean([(v - m) ** 2 for v in values]))
        for i in rows:
            items[i].append((j, (returns[i] - m) / (sd + o["eps"]) if norm == "mean_std" else returns[i] - m))
    flat = {}
    for key in ret:
        flat.setdefault(key[0], set()).add(ret[key])
    adv, step_level, weight = [0.0] * n, [0.0] * n, [0.0] * n
    for i in range(n):
        level_sum = sum((j + 1) ** o["hgpo_alpha"] * a for j, a in items[i])
        level_weight = sum((j + 1) ** o["hgpo_alpha"] for j, _ in items[i])
        base = o["hgpo_base"] and (o["hgpo_zero_levels"] == "keep" or len(flat[g[i]]) > 1)
        total = level_weight + (1.0 if base else 0.0) + o["eps"]
        adv[i] = (level_sum + (episode[i] if base else 0.0)) / total
        step_level[i] = level_sum / total
        weight[i] = level_weight / total
    return {"advantage": adv, "episode": episode, "step_level": step_level, "weight": weight, "has_peer": has_peer}


def random_batch(seed: int, *, groups: int = 3, trajs: int = 4, max_steps: int = 6, tokens: int = 5,
                 anchors: int = 3, dense_reward: bool = False, with_text: bool = False,
                 with_entropy: bool = False) -> StepBatch:
    """A small random step table with repeated anchors, T = 1 trajectories included."""
    gen = torch.Generator().manual_seed(seed)
    group_id, traj_id, step = [], [], []
    for gi in range(groups):
        for ti in range(int(torch.randint(1, trajs + 1, (1,), generator=gen))):
            length = int(torch.randint(1, max_steps + 1, (1,), generator=gen))
            steps = torch.randperm(3 * length, generator=gen)[:length].sort().values  # gaps allowed
            for st in steps.tolist():
                group_id.append(100 + 7 * gi)
                traj_id.append(ti * 13)
                step.append(st)
    n = len(group_id)
    anchor = torch.randint(0, anchors, (n,), generator=gen) * 1_000_003
    if dense_reward:
        reward = torch.randn(n, generator=gen)
    else:
        reward = torch.where(torch.rand(n, generator=gen) < 0.3, 10.0, 0.0)
    logprobs = -torch.rand(n, tokens, generator=gen) * 3
    length = torch.randint(1, tokens + 1, (n, 1), generator=gen)
    mask = torch.arange(tokens).unsqueeze(0) < length
    perm = torch.randperm(n, generator=gen)
    entropy = torch.rand(n, generator=gen) * 3 if with_entropy else None  # drawn last: other streams unchanged
    texts = [f"you are in room {int(x) // 1_000_003}. you see a desk." for x in anchor]
    return StepBatch(
        group_id=torch.tensor(group_id)[perm], traj_id=torch.tensor(traj_id)[perm],
        step=torch.tensor(step)[perm], anchor=anchor[perm], reward=reward[perm].float(),
        logprobs=logprobs[perm], mask=mask[perm],
        anchor_text=[texts[i] for i in perm.tolist()] if with_text else None,
        entropy=entropy[perm] if with_entropy else None,
    )
