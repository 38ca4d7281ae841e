"""Nothing lost, nothing hangs, every mistake gets one clear line: the trainer and the CLI as a careless
user meets them (the audit's cases, each pinned)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal

import pytest
import torch

from gaca.cli import main
from gaca.train.checkpoint import load_checkpoint
from gaca.train.loop import train
from gaca.train.run import evaluate_checkpoint
from tests.small_run import small_config, small_overrides

pytest.importorskip("alfworld")


def snapshot(run_dir):
    """Every file of a run directory and its hash."""
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory, cache):
    """A finished small run (2 iterations), kept pristine: tests copy it."""
    run = tmp_path_factory.mktemp("finished") / "run"
    train(small_config(run, cache, "iterations=2"))
    return run


@pytest.fixture
def run_copy(finished, tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(finished, dst)
    return dst


def cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.err.strip()


def one_line(err):
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_a_new_run_refuses_a_finished_run_directory(run_copy, cache, capsys):
    before = snapshot(run_copy)
    code, err = cli(capsys, "train", "--preset", "tiny-alfworld", *small_overrides(run_copy, cache))
    assert code == 2 and "is not empty" in one_line(err) and "--resume" in err and "--overwrite" in err
    # configs that fail validation never touch the directory either
    for bad in ("estimator=nope", "eval.batch_size=0"):
        code, err = cli(capsys, "train", "--preset", "tiny-alfworld", *small_overrides(run_copy, cache, bad))
        assert code == 2 and one_line(err).startswith("gaca: config error:")
    assert snapshot(run_copy) == before


def test_overwrite_starts_over_and_keeps_foreign_files(run_copy, cache, capsys):
    (run_copy / "notes.txt").write_text("mine")
    code, _ = cli(capsys, "train", "--preset", "tiny-alfworld", "--overwrite",
                  *small_overrides(run_copy, cache, "iterations=1"))
    assert code == 0 and (run_copy / "notes.txt").read_text() == "mine"
    assert [json.loads(line)["iteration"] for line in (run_copy / "metrics.jsonl").read_text().splitlines()] == [0, 1]
    code, err = cli(capsys, "train", "--preset", "tiny-alfworld", "--overwrite", "--resume",
                    *small_overrides(run_copy, cache))
    assert code == 2 and "give one of them" in one_line(err)


def test_a_failing_new_run_writes_nothing(tmp_path, cache, capsys):
    run = tmp_path / "never"
    code, err = cli(capsys, "train", "--preset", "tiny-alfworld",
                    *small_overrides(run, cache, "policy.model=/nonexistent/model", "sft.episodes=0"))
    assert code == 2 and "nothing is downloaded" in one_line(err) and not run.exists()


def test_the_checkpoint_carries_its_tokenizer(run_copy, cache, tmp_path):
    expected, _ = evaluate_checkpoint(run_copy)
    # another run's tokenizer lands in the directory (the audit's case: the old checkpoint stayed)
    other = tmp_path / "other"
    train(small_config(other, cache, "iterations=0", "policy.tiny_vocab=300", "seed=5"))
    shutil.rmtree(run_copy / "tokenizer")
    shutil.copytree(other / "tokenizer", run_copy / "tokenizer")
    again, _ = evaluate_checkpoint(run_copy)
    assert again.metrics() == expected.metrics()  # the checkpoint's own tokenizer, not the directory's
    assert load_checkpoint(run_copy)["policy"].tokenizer_files


def test_resume_with_another_model_size_is_one_line(run_copy, cache, capsys):
    code, err = cli(capsys, "train", "--preset", "tiny-alfworld", "--resume",
                    *small_overrides(run_copy, cache, "iterations=3", "policy.tiny_hidden=64"))
    assert code == 2 and "policy.tiny_hidden=32 (config: 64)" in one_line(err)


def test_corrupt_and_foreign_checkpoints_are_one_line(run_copy, cache, tmp_path, capsys):
    data = (run_copy / "checkpoint.pt").read_bytes()
    (run_copy / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    code, err = cli(capsys, "eval", str(run_copy))
    assert code == 2 and "not a readable gaca checkpoint" in one_line(err)
    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {}}, foreign)
    code, err = cli(capsys, "eval", str(foreign))
    assert code == 2 and "not a gaca checkpoint" in one_line(err)
    code, err = cli(capsys, "train", "--preset", "tiny-alfworld", "--resume", *small_overrides(run_copy, cache))
    assert code == 2 and "not a readable gaca checkpoint" in one_line(err)


def test_unwritable_out_dir_and_missing_device_are_one_line(tmp_path, cache, capsys):
    (tmp_path / "a_file").write_text("x")
    code, err = cli(capsys, "train", "--preset", "tiny-alfworld", *small_overrides(tmp_path / "a_file" / "run", cache))
    assert code == 2 and "is a file, not a directory" in one_line(err)
    if not torch.cuda.is_available():
        code, err = cli(capsys, "train", "--preset", "tiny-alfworld",
                        *small_overrides(tmp_path / "run", cache, "policy.device=cuda"))
        assert code == 2 and "policy.device='cuda'" in one_line(err) and "set policy.device=cpu" in err
    code, err = cli(capsys, "train", "--preset", "tiny-alfworld", "policy.device=tpu")
    assert code == 2 and "policy.device must be cpu, cuda or cuda:N" in one_line(err)


def test_a_full_disk_is_said_as_such(run_copy, cache, capsys, monkeypatch):
    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", "checkpoint.pt.tmp")

    monkeypatch.setattr(torch, "save", no_space)
    code, err = cli(capsys, "train", "--preset", "tiny-alfworld", "--resume",
                    *small_overrides(run_copy, cache, "iterations=3"))
    assert code == 1 and "the disk is full (writing checkpoint.pt.tmp)" in one_line(err) and "--resume" in err
    assert load_checkpoint(run_copy)["trainer"]["iteration"] == 2  # the last good checkpoint is intact


def test_debug_shows_the_traceback(run_copy, cache, monkeypatch):
    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", "x")

    monkeypatch.setattr(torch, "save", no_space)
    with pytest.raises(OSError, match="No space left"):
        main(["--debug", "train", "--preset", "tiny-alfworld", "--resume",
              *small_overrides(run_copy, cache, "iterations=3")])


def test_truncated_metrics_stale_tmp_and_flags_after_overrides(run_copy, cache, capsys):
    with open(run_copy / "metrics.jsonl", "a") as f:
        f.write('{"iteration": 3, "env/succ')  # a write cut short by a crash
    (run_copy / ".checkpoint.pt.x1y2.tmp").write_bytes(b"half a checkpoint")  # an atomic write cut short
    overrides = small_overrides(run_copy, cache, "iterations=3")
    # --resume between the overrides
    code, _ = cli(capsys, "train", "--preset", "tiny-alfworld", *overrides[:3], "--resume", *overrides[3:])
    assert code == 0 and not (run_copy / ".checkpoint.pt.x1y2.tmp").exists()
    recs = [json.loads(line) for line in (run_copy / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in recs] == [0, 1, 2, 3]
    assert cli(capsys, "plot", str(run_copy))[0] == 0


def test_sigterm_checkpoints_like_ctrl_c(tmp_path, cache):
    def terminate(done, metrics):
        if done == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    run = tmp_path / "run"
    result = train(small_config(run, cache, "iterations=3", "checkpoint_every=0"), on_iteration=terminate)
    assert result.interrupted and result.iterations == 1
    assert load_checkpoint(run)["trainer"]["iteration"] == 1
