"""The GPU path: one real training iteration per action mode with ``policy.device=cuda``.

Skipped where torch sees no CUDA device (CI has none). On a machine with a GPU:
``.venv/bin/python -m pytest -m gpu tests/train/test_gpu.py``.
"""

from __future__ import annotations

import pytest
import torch

from gaca.train.loop import train
from tests.small_run import small_config

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.mark.parametrize("mode", ["generate", "choose"])
def test_one_iteration_on_the_gpu(tmp_path, cache, mode):
    result = train(small_config(tmp_path / "run", cache, "policy.device=cuda", f"rollout.action_mode={mode}",
                                "ppo.entropy_coef=0.01"))
    assert result.iterations == 1 and result.eval_after is not None
    m = result.last_metrics
    assert torch.isfinite(torch.tensor(m["loss/total"])) and m["policy/updates"] >= 1
    assert m["policy/ratio_mean"] == pytest.approx(1.0, abs=0.05)
