"""Held-out success of one run against others, paired game by game, from their compare records.

    python benchmarks/paired_records.py OURS.json THEIRS.json [THEIRS.json ...] [--out FILE.json]

The compare report pairs the estimators of its own matrix; this pairs a run of a side matrix (a
variant of an estimator, run from the same seed's warm start) with the main matrix's runs. Records
are ``gaca.lab.records`` files (``RECORDS/SETTING/ESTIMATOR-seedN.json``). Two runs pair only when
they started from the same warm start and were evaluated on the same games, which is checked. Prints,
per run of THEIRS and held-out split, ours − theirs with its bootstrap interval (the report's
``paired_difference``), and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gaca.lab.compare_report import paired_difference
from gaca.lab.records import read_record


def won(record: dict, split: str) -> tuple[list[str], list[float]]:
    """The split's game ids and outcomes (1 won, 0 lost), in evaluation order."""
    outcomes = record["final"][split]["outcomes"]
    return [o["task_id"] for o in outcomes], [float(o["won"]) for o in outcomes]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ours", type=Path)
    parser.add_argument("theirs", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    def finished(path: Path) -> dict:
        record = read_record(path)
        if not record.get("final"):
            parser.error(f"{path} is not a finished run's record")
        return record

    ours = finished(args.ours)
    result: dict[str, dict] = {"ours": str(args.ours), "theirs": {}}
    print(f"ours: {args.ours} (warm start {ours['warm_start']})\n| theirs | " + " | ".join(ours["final"]) + " |")
    print("|---|" + "---|" * len(ours["final"]))
    for path in args.theirs:
        theirs = finished(path)
        if theirs.get("warm_start") != ours["warm_start"]:
            parser.error(f"{path}: warm start {theirs.get('warm_start')} is not ours ({ours['warm_start']}): "
                         "not paired")
        cells, result["theirs"][str(path)] = [], {}
        for split in ours["final"]:
            if split not in theirs["final"]:
                parser.error(f"{path}: no final evaluation on {split}")
            ids, a = won(ours, split)
            their_ids, b = won(theirs, split)
            if ids != their_ids:
                parser.error(f"{path}: its {split} games are not ours: not paired")
            d = paired_difference([a], [b])
            result["theirs"][str(path)][split] = d
            cells.append(f"{d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]")
        print(f"| {path.stem} | " + " | ".join(cells) + " |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
