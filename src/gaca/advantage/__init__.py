"""gaca.advantage: critic-free advantage estimators for multi-turn LLM agents (pure torch).

    from gaca.advantage import StepBatch, compute_advantages, ESTIMATORS
    out = compute_advantages(batch, "gaca", gamma=0.95, w0=0.5, kappa=0.25)

Modules, bottom up: ``segments`` (sort + scatter reductions), ``layout`` (trajectory/group
structure), ``normalize`` (group-relative normalization), ``episode`` (A^E), ``step`` (A^S,
GiGPO), ``criticality`` (NLL score), ``mixing`` (weights and mixture), ``uncertainty`` (entropy or
NLL of a step), ``empg`` and ``hgpo`` (the peer methods), ``estimators`` (registry).
This package imports only torch, numpy and the standard library.
"""

from gaca.advantage.batch import StepBatch
from gaca.advantage.estimators import (
    ESTIMATORS,
    AdvantageOutput,
    EstimatorInfo,
    broadcast_to_tokens,
    compute_advantages,
    estimator_info,
    estimator_inputs,
    estimator_options,
    register_estimator,
)
from gaca.advantage.hashing import hash_text, hash_tokens
from gaca.advantage.options import AdvantageOptions

__all__ = [
    "ESTIMATORS",
    "AdvantageOptions",
    "AdvantageOutput",
    "EstimatorInfo",
    "StepBatch",
    "broadcast_to_tokens",
    "compute_advantages",
    "estimator_info",
    "estimator_inputs",
    "estimator_options",
    "hash_text",
    "hash_tokens",
    "register_estimator",
]
