"""Write the verl parquet files that drive the ``gaca_text_env`` agent loop.

Each row names one game (environment + seed); the agent loop builds the real prompt from the
environment, so ``prompt`` is only a short placeholder that verl's dataset loader requires.
verl repeats each row ``actor_rollout_ref.rollout.n`` times under one ``uid``: one episode group.

    python examples/verl/make_dataset.py --env alfworld --out ~/data/gaca_alfworld \
        --train-games 3000 --val-games 128
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger("make_dataset")

AGENT_NAME = "gaca_text_env"  # gaca.integrations.verl.agent_loop.AGENT_NAME (kept literal: no verl import)


def rows(env: str, split: str, num_games: int, first_seed: int, env_kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """One verl dataset row per game seed ``first_seed .. first_seed + num_games - 1``."""
    options = {"num_games": num_games, **env_kwargs, "split": split}
    return [
        {
            "data_source": f"gaca/{env}",
            "prompt": [{"role": "user", "content": f"{env} {split} game {seed}"}],
            "agent_name": AGENT_NAME,
            "ability": "agent",
            "reward_model": {"style": "rule", "ground_truth": ""},
            "extra_info": {"env": env, "seed": seed, "split": split, "index": i,
                           "env_kwargs": options},
        }
        for i, seed in enumerate(range(first_seed, first_seed + num_games))
    ]


def write(path: Path, records: list[dict[str, Any]]) -> None:
    """Parquet with the nested columns as verl's RLHFDataset reads them (via pandas/pyarrow)."""
    import pandas as pd

    frame = pd.DataFrame(records)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path)
    logger.info("wrote %d rows to %s", len(frame), path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="alfworld", help="gaca environment name (gaca.envs.ENVIRONMENTS)")
    parser.add_argument("--out", required=True, type=Path, help="output folder for train.parquet, val.parquet")
    parser.add_argument("--train-games", type=int, default=3000)
    parser.add_argument("--val-games", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0, help="first training game seed")
    parser.add_argument("--env-kwargs", default="{}",
                        help='JSON settings of the environment (fields of its config class, e.g. gaca.envs.'
                        'AlfworldConfig: {"max_steps": 30})')
    parser.add_argument("--val-split", default="eval", help="the environment's held-out split name")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    env_kwargs = json.loads(args.env_kwargs)
    write(args.out / "train.parquet", rows(args.env, "train", args.train_games, args.seed, env_kwargs))
    write(args.out / "val.parquet", rows(args.env, args.val_split, args.val_games, 0, env_kwargs))


if __name__ == "__main__":
    main()
