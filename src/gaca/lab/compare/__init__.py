"""The learning comparison: a declared matrix of settings × arms × seeds, run resumably, analysed paired.

    matrix = load_matrix("experiments/<name>/matrix.toml")   # gaca.lab.compare.matrix
    run_matrix(matrix, "experiments/<name>/matrix.toml")     # gaca.lab.compare.scheduler (workers: .worker)
    write_compare_report(matrix, out_dir, command=...)       # gaca.lab.compare.report (numbers: .analysis)

Command line: ``gaca lab compare MATRIX.toml [--root DIR] [--report-only]``; records: ``.records``.
"""

from gaca.lab.compare.analysis import ContrastResult, SplitTable, collect, contrasts
from gaca.lab.compare.matrix import (
    AnalysisSpec,
    ArmSpec,
    CompareMatrix,
    RunSpec,
    SettingSpec,
    load_matrix,
    quick_matrix,
)
from gaca.lab.compare.records import RecordStore, RunRecord, SplitEvaluation, WarmStartRecord
from gaca.lab.compare.report import CompareReport, build_report, write_compare_report
from gaca.lab.compare.scheduler import run_finished, run_matrix

__all__ = [
    "AnalysisSpec",
    "ArmSpec",
    "CompareMatrix",
    "CompareReport",
    "ContrastResult",
    "RecordStore",
    "RunRecord",
    "RunSpec",
    "SettingSpec",
    "SplitEvaluation",
    "SplitTable",
    "WarmStartRecord",
    "build_report",
    "collect",
    "contrasts",
    "load_matrix",
    "quick_matrix",
    "run_finished",
    "run_matrix",
    "write_compare_report",
]
