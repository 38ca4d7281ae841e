"""verl-agent's GiGPO conventions as a slow loop, written from its published description
(docs/verl-agent.md lists them): what ``conventions="verl-agent"`` must reproduce.

Rows are visited in batch order. Each row's episode score is its trajectory's undiscounted return
minus the row's own penalty; episode statistics are over the rows of the group (a group holding a
single row keeps its score, against mean 0 and std 1). Each row's discounted return (over the
trajectory's unpenalised rewards) also loses the row's own penalty. Step groups gather rows of an
episode group with the same anchor text, or, with a similarity threshold, greedily: a row joins
the first cluster whose representative text has ``SequenceMatcher(None, row_text, rep).ratio()``
at or above the threshold (difflib's default autojunk), else founds a cluster; a lone row gets 0.
With ``count``, row i is followed, at the end of the batch (where verl-agent's ``adjust_batch``
appends its padding), by count_i − 1 copies of itself, which every statistic sees as rows; the
returns were computed before the copies were made.
"""

from __future__ import annotations

import difflib
import math
from collections import defaultdict


def _stats(values):
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return mean, std


def verl_agent_gigpo(group, traj, step, text, reward, penalty, *, gamma, omega=1.0, norm="mean_std", eps=1e-6,
                     similarity=None, count=None):
    """Per-row GiGPO advantage under verl-agent's conventions (lists in, list out)."""
    n = len(group)
    rows_seen = list(range(n)) + [i for i in range(n) for _ in range((count[i] if count else 1) - 1)]
    rows_of = defaultdict(list)
    for i in range(n):
        rows_of[(group[i], traj[i])].append(i)
    total = {k: sum(reward[i] for i in rows) for k, rows in rows_of.items()}
    returns = [0.0] * n
    for rows in rows_of.values():
        acc = 0.0
        for i in sorted(rows, key=lambda i: step[i], reverse=True):
            acc = reward[i] + gamma * acc
            returns[i] = acc
    score = [total[(group[i], traj[i])] - penalty[i] for i in range(n)]
    step_return = [returns[i] - penalty[i] for i in range(n)]

    def normalize(values, lone_keeps):
        if len(values) == 1:
            mean, std = (0.0, 1.0) if lone_keeps else (values[0], 1.0)
        else:
            mean, std = _stats(values)
        return [(v - mean) / (std + eps) if norm == "mean_std" else v - mean for v in values]

    episode = [0.0] * n
    members = defaultdict(list)
    for i in rows_seen:
        members[group[i]].append(i)
    for rows in members.values():
        for i, a in zip(rows, normalize([score[i] for i in rows], True), strict=True):
            episode[i] = a  # a copy gets what its original got

    cluster_of = {}  # position in rows_seen -> cluster
    for g, rows in members.items():
        clusters = []  # [(representative text, id)]
        positions = [k for k, i in enumerate(rows_seen) if group[i] == g]
        for k, i in zip(positions, rows, strict=True):
            if similarity is None:
                found = next((c for rep, c in clusters if rep == text[i]), None)
            else:
                found = next((c for rep, c in clusters
                              if difflib.SequenceMatcher(None, text[i], rep).ratio() >= similarity), None)
            if found is None:
                found = (g, len(clusters))
                clusters.append((text[i], found))
            cluster_of[k] = found
    step_level = [0.0] * n
    by_cluster = defaultdict(list)
    for k, i in enumerate(rows_seen):
        by_cluster[cluster_of[k]].append(i)
    for rows in by_cluster.values():
        for i, a in zip(rows, normalize([step_return[i] for i in rows], False), strict=True):
            step_level[i] = a
    return [episode[i] + omega * step_level[i] for i in range(n)], episode, step_level
