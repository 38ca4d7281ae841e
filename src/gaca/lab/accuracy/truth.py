"""The true advantage of a recorded step, by Monte Carlo: A(s_t, a_t) = Q(s_t, a_t) − V(s_t).

Environments are deterministic given (seed, actions), so the state s_t of a recorded episode is
restored by replaying its first t actions on an environment reset with the same seed
(``ReplayAgent``), and checked: the observation and the admissible actions at step t must be the
recorded ones. From there, M continuations of each kind run to the end of the episode:

    Q(s_t, a_t): replay a_t too, then the agent acts;   G^Q = r_t + Σ_{k>t} γ^(k−t) r_k
    V(s_t):      the agent acts from step t on;         G^V = Σ_{k≥t} γ^(k−t) r_k

with r_k the training reward (the environment's reward minus the invalid-action penalty of an
invalid step) and r_t of the Q side the recorded step's own reward. Each estimate is the mean over
its M continuations, with standard error sd/√M; A = Q̂ − V̂ with SE = √(SE_Q² + SE_V²). Both the
undiscounted return-to-go (γ = 1: what success depends on) and the γ-discounted one (what GiGPO's
step level targets) are kept. Where all M continuations of a step agree, the sample sd is 0 but the
estimate is not exact: the standard error is then floored Jeffreys-style
(``gaca.lab.stats.monte_carlo_se``, with the returns' range over the whole measurement as the bounds).

All continuations go through ``play_episodes`` in chunks of the pool's size, sorted by prefix
length, so every step of a chunk is one batched agent call for all its live episodes.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from gaca.advantage.criticality import response_nll
from gaca.envs.episodes import Agent, Episode, ReplayAgent, play_episodes
from gaca.envs.pool import EnvPool
from gaca.lab import stats

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordedStep:
    """A step of a recorded episode: what restores its state and what it must look like."""

    seed: int
    """The environment seed the episode was reset with."""
    prefix: tuple[str, ...]
    """The actions of steps 0..t−1."""
    action: str
    """a_t, the action the step took."""
    reward: float
    """r_t, the step's training reward (penalty included)."""
    observation: str
    """The observation at step t (checked after restoring)."""
    admissible_actions: tuple[str, ...]
    """The admissible actions at step t (checked after restoring)."""

    @property
    def t(self) -> int:
        return len(self.prefix)


def recorded_steps(episode: Episode, reward: Callable[[int], float]) -> list[RecordedStep]:
    """Every step of ``episode`` as a ``RecordedStep``; ``reward(t)`` gives step t's training reward."""
    actions = [s.decision.action for s in episode.steps]
    return [
        RecordedStep(episode.seed, tuple(actions[:t]), actions[t], float(reward(t)), s.turn.observation,
                     tuple(s.turn.admissible_actions))
        for t, s in enumerate(episode.steps)
    ]


@dataclass
class TruthTable:
    """Monte-Carlo estimates for K recorded steps (arrays [K]; NaN where no continuation was usable)."""

    q: np.ndarray
    """Q̂(s_t, a_t), undiscounted return-to-go."""
    v: np.ndarray
    q_se: np.ndarray
    v_se: np.ndarray
    q_discounted: np.ndarray
    """Q̂ with the γ-discounted return-to-go."""
    v_discounted: np.ndarray
    q_discounted_se: np.ndarray
    v_discounted_se: np.ndarray
    first_nll: np.ndarray
    """Mean over the V continuations of the first action's per-token NLL: E_a~π[ℓ(a | s_t)] (NaN when
    the agent's decisions carry no log-probs)."""
    usable: np.ndarray
    """int [K, 2]: continuations per step that restored the state (Q, V)."""
    gamma: float
    mismatches: int = 0
    """Continuations whose restored observation or admissible actions differed from the record."""
    continuations: int = 0
    env_steps: int = 0
    """Environment steps taken (replayed prefixes included)."""
    agent_calls: int = 0
    """Batched agent calls (one per step of a chunk with a live episode)."""
    seconds: float = 0.0
    examples: list[str] = field(default_factory=list)
    """A few mismatch descriptions."""

    @property
    def advantage(self) -> np.ndarray:
        """A = Q̂ − V̂ (undiscounted)."""
        return self.q - self.v

    @property
    def advantage_se(self) -> np.ndarray:
        return np.sqrt(self.q_se**2 + self.v_se**2)

    @property
    def advantage_discounted(self) -> np.ndarray:
        return self.q_discounted - self.v_discounted

    @property
    def advantage_discounted_se(self) -> np.ndarray:
        return np.sqrt(self.q_discounted_se**2 + self.v_discounted_se**2)


class _CountingAgent:
    """Counts the batched calls that reach the wrapped agent (the replay answers the rest itself)."""

    def __init__(self, agent: Agent) -> None:
        self.agent, self.calls = agent, 0

    def act(self, turns):
        self.calls += 1
        return self.agent.act(turns)


def _nll(payload: object) -> float:
    """The step NLL of a decision's payload (its step-table row's ``response_nll``); NaN without log-probs."""
    logprobs = getattr(payload, "logprobs", None)
    if logprobs is None or len(logprobs) == 0:
        return math.nan
    row = torch.as_tensor(logprobs, dtype=torch.float64)
    return float(response_nll(row.sum()[None], torch.tensor([row.numel()]))[0])


def _mean_se(values: list[float], lo: float, hi: float) -> tuple[float, float]:
    """Mean and Monte-Carlo SE of one step's returns, bounded in [lo, hi] (``stats.monte_carlo_se``)."""
    if not values:
        return math.nan, math.nan
    a = np.asarray(values, dtype=np.float64)
    se = float(stats.monte_carlo_se((a - lo)[None, :], upper=max(hi - lo, 1e-12))[0])
    return float(a.mean()), se


def monte_carlo_truth(
    pool: EnvPool,
    steps: Sequence[RecordedStep],
    agent: Agent,
    *,
    continuations: int,
    gamma: float,
    step_reward: Callable[[object], float],
    progress: bool = False,
) -> TruthTable:
    """Q̂, V̂ and their standard errors for each recorded step (see module docstring).

    Args:
      pool: environments of the recorded episodes' kind (their step limit is the episodes' limit).
      steps: the K recorded steps to estimate.
      agent: acts in the continuations (the policy, sampling as in training).
      continuations: M, continuations per step and kind.
      gamma: discount of the discounted return-to-go.
      step_reward: training reward of a continuation's ``Step`` (env reward minus penalty).
      progress: show a progress bar over continuations.
    Returns:
      ``TruthTable`` with arrays [K].
    """
    if continuations < 2:
        raise ValueError(f"continuations must be >= 2 (a standard error needs two), got {continuations}")
    t0 = time.perf_counter()
    # one job per (step, kind, repeat): kind 0 = Q (a_t replayed), kind 1 = V (fresh first action)
    jobs = [(k, kind) for k in range(len(steps)) for kind in (0, 1) for _ in range(continuations)]
    jobs.sort(key=lambda job: steps[job[0]].t + 1 - job[1])  # similar replay lengths share a chunk
    returns: dict[tuple[int, int], list[tuple[float, float]]] = {}
    first_nll: dict[int, list[float]] = {}
    table = TruthTable(*(np.full(len(steps), np.nan) for _ in range(9)), usable=np.zeros((len(steps), 2), int),
                       gamma=gamma)
    counting = _CountingAgent(agent)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc="continuations", unit="ep", dynamic_ncols=True)
    for start in range(0, len(jobs), pool.num_envs):
        chunk = jobs[start : start + pool.num_envs]
        prefixes = [steps[k].prefix + ((steps[k].action,) if kind == 0 else ()) for k, kind in chunk]
        played = play_episodes(pool, [steps[k].seed for k, _ in chunk], ReplayAgent(prefixes, counting))
        for (k, kind), episode in zip(chunk, played.episodes, strict=True):
            table.continuations += 1
            table.env_steps += episode.length
            rec = steps[k]
            problem = _restore_problem(episode, rec)
            if problem is not None:
                table.mismatches += 1
                if len(table.examples) < 5:
                    table.examples.append(f"seed {rec.seed} step {rec.t}: {problem}")
                continue
            live = episode.steps[rec.t + 1 :] if kind == 0 else episode.steps[rec.t :]
            rewards = [step_reward(s) for s in live]
            if kind == 0:
                rewards = [rec.reward, *rewards]
            else:
                first_nll.setdefault(k, []).append(_nll(live[0].decision.payload))
            undiscounted = float(sum(rewards))
            discounted = float(sum(r * gamma**i for i, r in enumerate(rewards)))
            returns.setdefault((k, kind), []).append((undiscounted, discounted))
        if bar is not None:
            bar.update(len(chunk))
    if bar is not None:
        bar.close()
    every = [r for values in returns.values() for r in values]
    bounds = [(min((r[i] for r in every), default=0.0), max((r[i] for r in every), default=0.0)) for i in (0, 1)]
    for k in range(len(steps)):
        for kind in (0, 1):
            values = returns.get((k, kind), [])
            table.usable[k, kind] = len(values)
            mu, su = _mean_se([u for u, _ in values], *bounds[0])
            md, sd = _mean_se([d for _, d in values], *bounds[1])
            if kind == 0:
                table.q[k], table.q_se[k], table.q_discounted[k], table.q_discounted_se[k] = mu, su, md, sd
            else:
                table.v[k], table.v_se[k], table.v_discounted[k], table.v_discounted_se[k] = mu, su, md, sd
        nlls = [x for x in first_nll.get(k, []) if not math.isnan(x)]
        table.first_nll[k] = float(np.mean(nlls)) if nlls else math.nan
    table.agent_calls = counting.calls
    table.seconds = time.perf_counter() - t0
    if table.mismatches:
        logger.warning("%d of %d continuations did not restore the recorded state (e.g. %s)", table.mismatches,
                       table.continuations, table.examples[0])
    return table


def _restore_problem(episode: Episode, rec: RecordedStep) -> str | None:
    """Why ``episode`` did not reach the recorded state at step t (None: it did)."""
    if episode.error is not None:
        return f"the environment failed: {episode.error}"
    if episode.length <= rec.t:
        return f"the episode ended after {episode.length} steps, before step {rec.t}"
    turn = episode.steps[rec.t].turn
    if turn.observation != rec.observation:
        return f"observation {turn.observation[:60]!r} != recorded {rec.observation[:60]!r}"
    if tuple(turn.admissible_actions) != rec.admissible_actions:
        return "the admissible actions differ from the recorded ones"
    return None


__all__ = ["RecordedStep", "TruthTable", "monte_carlo_truth", "recorded_steps"]
