"""Why the main job's held-out episodes fail: a reading of ``gaca eval RUN --episodes FILE`` logs.

    python experiments/2026-12-main-job-ceiling/failures.py warm-start.jsonl.gz after-100.jsonl.gz

Each failed episode of the main job's two families (pick_and_place_simple, look_at_obj_in_light) is
put in one class by the object it picked up: none ("never took an object"), one the task does not
name ("took a wrong object"), or the task's object ("took the right object, did not finish"). Also
counted: failed episodes whose last four actions alternate between two (A, B, A, B), and the mean
π(a|s) of the first pick-up, split by whether it was the task's object (is a wrong pick a confident
one?). Prints a markdown table, one column per file.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

TASK_OBJECT = re.compile(r"(?:put (?:a|some|two) |examine (?:the |a )?|look at )(\w+)")


def read(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def classify(episodes: list[dict]) -> dict[str, float]:
    counts = {"episodes": len(episodes), "won": 0, "never took an object": 0, "took a wrong object": 0,
              "took the right object, did not finish": 0, "failed, ends alternating A-B-A-B": 0}
    first_take_p: dict[bool, list[float]] = {True: [], False: []}
    for e in episodes:
        match = TASK_OBJECT.search(e["task"])
        if match is None:
            raise ValueError(f"no object in task {e['task']!r} (only the main job's two families are read)")
        target = match.group(1)
        takes = [s for s in e["steps"] if s["action"].startswith("take ")]
        if takes and takes[0]["p"] is not None:
            first_take_p[takes[0]["action"].split()[1] == target].append(takes[0]["p"])
        if e["won"]:
            counts["won"] += 1
            continue
        if not takes:
            counts["never took an object"] += 1
        elif any(s["action"].split()[1] == target for s in takes):
            counts["took the right object, did not finish"] += 1
        else:
            counts["took a wrong object"] += 1
        acts = [s["action"] for s in e["steps"]]
        if len(acts) >= 4 and acts[-1] == acts[-3] and acts[-2] == acts[-4] and acts[-1] != acts[-2]:
            counts["failed, ends alternating A-B-A-B"] += 1
    for right, ps in first_take_p.items():
        which = "the task's object" if right else "another object"
        counts[f"first pick-ups of {which}"] = len(ps)
        counts[f"their mean p = pi(a|s) at the evaluation temperature ({which})"] = (
            round(sum(ps) / len(ps), 3) if ps else float("nan"))
    return counts


def main(paths: list[str]) -> None:
    if not paths:
        sys.exit(__doc__)
    columns = {Path(p).name: classify(read(Path(p))) for p in paths}
    rows = list(next(iter(columns.values())))
    print("| | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for row in rows:
        print(f"| {row} | " + " | ".join(str(c[row]) for c in columns.values()) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
