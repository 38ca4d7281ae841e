"""The GPU launch scripts compose a valid verl config (Hydra ``--cfg job``: no Ray, no GPU), and
the dataset script writes rows the agent loop reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hydra")
pytest.importorskip("verl")


ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "verl"
SCRIPTS = {"1.5b": "run_alfworld_qwen2.5_1.5b.sh", "7b": "run_alfworld_qwen2.5_7b.sh"}


def _overrides(script: str, tmp: Path) -> list[str]:
    """The Hydra overrides a launch script passes to ``python3 -m verl.trainer.main_ppo``, read by
    running it with a stand-in ``python3`` that only records its arguments."""
    fake = tmp / "bin" / "python3"
    fake.parent.mkdir(parents=True, exist_ok=True)
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf \'%s\\n\' "$a"; done > "$ARGS_FILE"\n')
    fake.chmod(0o755)
    args_file = tmp / f"{script}.args"
    env = {k: v for k, v in os.environ.items() if k != "VERL_USE_EXTERNAL_MODULES"}
    env.update(DRY_RUN="1", ARGS_FILE=str(args_file), PATH=os.pathsep.join([str(fake.parent), env["PATH"]]))
    subprocess.run(["bash", str(EXAMPLES / script)], env=env, cwd=ROOT, check=True, timeout=60)
    args = args_file.read_text().splitlines()
    assert args[:4] == ["-m", "verl.trainer.main_ppo", "--cfg", "job"]
    return [a for a in args[4:] if a != "--resolve"]


@pytest.fixture(scope="module")
def composed(tmp_path_factory) -> dict:
    """verl's config composed from each launch script's overrides (Hydra's compose API)."""
    import verl.trainer.main_ppo as main_ppo
    from hydra import compose, initialize_config_dir

    tmp = tmp_path_factory.mktemp("launch")
    config_dir = str(Path(main_ppo.__file__).parent / "config")
    out = {}
    for key, script in SCRIPTS.items():
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            out[key] = compose(config_name="ppo_trainer", overrides=_overrides(script, tmp))
    return out


@pytest.mark.parametrize("model", sorted(SCRIPTS))
def test_launch_script_config_is_valid(composed, model):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from gaca.integrations.verl import resolve_config

    cfg = composed[model]
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert not need_critic(cfg) and need_reference_policy(cfg)  # critic-free, KL to the reference
    algorithm = cfg.algorithm
    assert algorithm.adv_estimator == "gaca" and algorithm.gamma == 0.95
    resolved = resolve_config(algorithm, gamma=algorithm.gamma, norm_adv_by_std=algorithm.norm_adv_by_std_in_grpo)
    assert resolved.settings.layout == "trajectory"
    assert resolved.options == {"kappa": 0.25, "w0": 0.5, "norm": "mean_std", "gamma": 0.95}
    # The GiGPO reference hyperparameters.
    actor = cfg.actor_rollout_ref.actor
    assert cfg.data.train_batch_size == 16 and cfg.actor_rollout_ref.rollout.n == 8
    assert actor.optim.lr == 1e-6 and actor.use_kl_loss and actor.kl_loss_coef == 0.01
    assert actor.kl_loss_type == "low_var_kl"
    assert cfg.trainer.use_v1 is False
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "gaca_text_env"
    env_vars = cfg.ray_kwargs.ray_init.runtime_env.env_vars
    assert env_vars.VERL_USE_EXTERNAL_MODULES == "gaca.integrations.verl,gaca.integrations.verl.agent_loop"
    want_model = {"1.5b": "Qwen/Qwen2.5-1.5B-Instruct", "7b": "Qwen/Qwen2.5-7B-Instruct"}[model]
    assert cfg.actor_rollout_ref.model.path == want_model


def test_make_dataset_rows(tmp_path):
    import pandas as pd

    sys.path.insert(0, str(EXAMPLES))
    try:
        import make_dataset
    finally:
        sys.path.remove(str(EXAMPLES))
    make_dataset.main(["--out", str(tmp_path), "--train-games", "5", "--val-games", "3", "--seed", "100",
                       "--env-kwargs", '{"num_games": 60}'])
    train = pd.read_parquet(tmp_path / "train.parquet")
    val = pd.read_parquet(tmp_path / "val.parquet")
    assert len(train) == 5 and len(val) == 3
    extra = train.iloc[2]["extra_info"]
    assert extra["seed"] == 102 and extra["env"] == "alfworld"
    assert dict(extra["env_kwargs"]) == {"num_games": 60, "split": "train"}
    assert val.iloc[0]["extra_info"]["env_kwargs"]["split"] == "eval"
    from gaca.integrations.verl.agent_loop import AGENT_NAME

    assert set(train["agent_name"]) == {AGENT_NAME}
