"""The lab: how right is each estimator's credit (``accuracy``), and which estimator learns best.

    from gaca.lab import AccuracyConfig, measure_accuracy, analyze_accuracy, write_accuracy_report
    data = measure_accuracy("runs/tiny-alfworld", AccuracyConfig())
    write_accuracy_report(data, analyze_accuracy(data), "lab/accuracy", command="...")

Command line: ``gaca lab accuracy RUN_DIR [key=value ...] [--quick]``.
"""

from gaca.lab.accuracy import AccuracyConfig, AccuracyData, analyze_accuracy, measure_accuracy, subsets
from gaca.lab.grid import DEFAULT_GACA, EstimatorSetting, estimator_grid
from gaca.lab.report import write_accuracy_report
from gaca.lab.truth import RecordedStep, TruthTable, monte_carlo_truth, recorded_steps

__all__ = [
    "DEFAULT_GACA",
    "AccuracyConfig",
    "AccuracyData",
    "EstimatorSetting",
    "RecordedStep",
    "TruthTable",
    "analyze_accuracy",
    "estimator_grid",
    "measure_accuracy",
    "monte_carlo_truth",
    "recorded_steps",
    "subsets",
    "write_accuracy_report",
]
