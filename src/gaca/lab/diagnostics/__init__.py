"""Diagnostics of runs and rollouts: what a comparison's report does not show.

    gaca.lab.diagnostics.dynamics   each arm's training rollouts over iterations, mean over seeds
                                    (``gaca lab dynamics MATRIX.toml SETTING``)
    gaca.lab.diagnostics.credit     where each estimator puts its credit: invalid against valid steps,
                                    and its coupling to the step's NLL (``gaca lab credit RUN_DIR``)
    gaca.lab.diagnostics.anchors    how often a step finds a step-level peer under each anchor kind
                                    (``gaca lab anchors RUN_DIR``)
    gaca.lab.diagnostics.diff       two run directories metric for metric and weight for weight, the
                                    reproducibility check (``gaca lab diff RUN_A RUN_B``)

Each diagnostic returns a dataclass (JSON through ``gaca.lab.figures.write_result``) and formats it
as a markdown table (``table``), which the command line prints.
"""

from gaca.lab.diagnostics.anchors import AnchorPeers, AnchorResult, anchor_peers
from gaca.lab.diagnostics.common import DiagnosticError
from gaca.lab.diagnostics.credit import CreditResult, CreditRows, measure_credit
from gaca.lab.diagnostics.diff import RunDiff, diff_runs
from gaca.lab.diagnostics.dynamics import DynamicsResult, training_dynamics

__all__ = [
    "AnchorPeers",
    "AnchorResult",
    "CreditResult",
    "CreditRows",
    "DiagnosticError",
    "DynamicsResult",
    "RunDiff",
    "anchor_peers",
    "diff_runs",
    "measure_credit",
    "training_dynamics",
]
