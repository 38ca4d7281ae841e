"""The lab: how right is each estimator's credit (``accuracy``), and which estimator learns best (``compare``).

    gaca.lab.accuracy   a checkpoint's steps scored against Monte-Carlo truth; the premise statistics
    gaca.lab.compare    a declared matrix of settings × arms × seeds, run resumably, analysed paired
    gaca.lab.stats      the statistics both use (pure numpy/scipy); gaca.lab.premise, GACA's premise
    gaca.lab.diagnostics  diagnostics of runs and rollouts (training dynamics, where credit goes, anchors,
                          the run diff)

Command line: ``gaca lab accuracy|compare|dynamics|credit|anchors|diff ...``; experiments live under
``experiments/`` (docs/lab.md).
"""
