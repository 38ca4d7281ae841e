"""How right is each estimator's credit: a checkpoint's steps scored against Monte-Carlo truth.

    data = measure_accuracy("runs/tiny-alfworld-choose", AccuracyConfig())   # .measure (truth: .truth)
    analysis = analyze_accuracy(data)                                        # .analysis (scores: .score)
    write_accuracy_report(data, analysis, out_dir, command=...)              # .report

Command line: ``gaca lab accuracy RUN_DIR [key=value ...] [--quick] [--from-json RESULT]``.
"""

from gaca.lab.accuracy.analysis import AccuracyAnalysis, analyze_accuracy, subsets
from gaca.lab.accuracy.config import AccuracyConfig
from gaca.lab.accuracy.data import AccuracyData, MeasureCounts, ScoredSteps
from gaca.lab.accuracy.grid import DEFAULT_GACA, EstimatorSetting, estimator_grid
from gaca.lab.accuracy.measure import measure_accuracy
from gaca.lab.accuracy.report import load_accuracy_result, write_accuracy_report
from gaca.lab.accuracy.truth import RecordedStep, TruthTable, monte_carlo_truth, recorded_steps

__all__ = [
    "DEFAULT_GACA",
    "AccuracyAnalysis",
    "AccuracyConfig",
    "AccuracyData",
    "EstimatorSetting",
    "MeasureCounts",
    "RecordedStep",
    "ScoredSteps",
    "TruthTable",
    "analyze_accuracy",
    "estimator_grid",
    "load_accuracy_result",
    "measure_accuracy",
    "monte_carlo_truth",
    "recorded_steps",
    "subsets",
    "write_accuracy_report",
]
