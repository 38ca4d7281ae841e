"""Trackers: each backend really logs (TensorBoard, W&B offline, MLflow's local store) and is read back
with its own reader; a resumed run neither repeats nor loses a step; config and preflight errors are one line."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest
import torch

from gaca.config import ConfigError, from_dict, to_dict
from gaca.train.config import TrainConfig, load_config
from gaca.train.logger import MetricsLogger, read_metrics
from gaca.train.rundir import RunError, clear_run_files, preflight
from gaca.train.trackers import TRACKERS, TrackerBackend, flat_config, mlflow_key

CONFIG = to_dict(TrainConfig())


def missing(module: str) -> str:
    return f"{module} is not installed (pip install 'gaca[{module}]'); its tracker test needs it"


needs_wandb = pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason=missing("wandb"))
needs_mlflow = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason=missing("mlflow"))


@pytest.fixture(autouse=True)
def tracker_env(monkeypatch, tmp_path):
    """The backends' defaults (offline W&B, a store under the run directory), nothing written outside tmp_path."""
    for name in ("WANDB_MODE", "WANDB_PROJECT", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME",
                 "MLFLOW_ALLOW_FILE_STORE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name))


def value(step: int, key: str, attempt: int = 0) -> float:
    """A distinct value per (step, key, attempt): a repeated step's second value differs from its first."""
    return step + 0.01 * len(key) + 100.0 * attempt


# eval/success is a metric and the prefix of eval/success/<family>, as in a real run
KEYS = ("loss/total", "env/success", "eval/success", "eval/success/pick_and_place")


def log_steps(run_dir: Path, trackers: list[str], steps: range, *, resume_after: int | None = None,
              attempt: int = 0) -> None:
    log = MetricsLogger(run_dir, trackers=trackers, config=CONFIG, resume_after=resume_after)
    gen = torch.Generator().manual_seed(attempt)
    for step in steps:
        log.log(step, {**{k: value(step, k, attempt) for k in KEYS}, "policy/nan": float("nan")},
                {"adv/weight": torch.rand(50, generator=gen), "adv/empty": torch.zeros(0)})
    log.close()


def interrupted_and_resumed(run_dir: Path, trackers: list[str]) -> None:
    """Steps 0..3 logged, then the run resumes from its checkpoint after step 1 and logs 2..5 again."""
    log_steps(run_dir, trackers, range(4))
    log_steps(run_dir, trackers, range(2, 6), resume_after=1, attempt=1)


# ---------------------------------------------------------------------------------------------
# config and preflight


def test_trackers_are_checked_when_the_config_is_loaded():
    assert load_config().trackers == ["tensorboard"]
    assert load_config(overrides=['trackers=["wandb", "mlflow"]']).trackers == ["wandb", "mlflow"]
    with pytest.raises(ConfigError, match=r"^trackers\[1\]: unknown tracker 'wandbb'; choices: \['mlflow', "
                                          r"'tensorboard', 'wandb'\]$"):
        load_config(overrides=['trackers=["tensorboard", "wandbb"]'])
    with pytest.raises(ConfigError, match=r"^trackers\[1\]: 'mlflow' is listed twice$"):
        load_config(overrides=['trackers=["mlflow", "mlflow"]'])


def test_the_deprecated_tensorboard_key_still_loads_as_trackers():
    # configs saved before `trackers` (checkpoints, config.json) and the lab's overrides say tensorboard=...
    assert load_config(overrides=["tensorboard=false"]).trackers == []
    assert load_config(overrides=['trackers=["mlflow"]', "tensorboard=true"]).trackers == ["tensorboard", "mlflow"]
    saved = to_dict(TrainConfig())
    del saved["trackers"]
    saved["tensorboard"] = False
    cfg = from_dict(TrainConfig, saved)
    assert cfg.trackers == [] and cfg.tensorboard is None and to_dict(cfg)["tensorboard"] is None


def test_a_tracker_whose_package_is_missing_stops_the_run_before_it_writes(tmp_path, monkeypatch):
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):
        return None if name == "wandb" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)  # as on a machine without the extra
    cfg = load_config(preset="tiny-alfworld", overrides=[f"out_dir={json.dumps(str(tmp_path / 'run'))}",
                                                        'trackers=["tensorboard", "wandb"]'])
    with pytest.raises(RunError) as err:
        preflight(cfg, resume=False, overwrite=False)
    assert str(err.value) == ("trackers: 'wandb' needs the wandb package, which is not installed: "
                              "pip install 'gaca[wandb]' (or drop 'wandb' from trackers)")
    assert not (tmp_path / "run").exists()


def test_a_registered_tracker_is_selectable_and_overwrite_removes_its_files(tmp_path):
    logged = []

    class ListTracker:
        def __init__(self, ctx):
            (ctx.run_dir / "list.txt").write_text("opened\n")

        def log(self, step, scalars, histograms):
            logged.append((step, dict(scalars), sorted(histograms)))

        def close(self):
            logged.append("closed")

    TRACKERS.register("list", TrackerBackend(ListTracker, module="json", extra="none", files=("list.txt",)))
    try:
        cfg = load_config(overrides=['trackers=["list"]'])
        log_steps(tmp_path, cfg.trackers, range(1))
        for name in ("tb", "wandb", "mlruns"):  # the built-in trackers' files go too
            (tmp_path / name).mkdir()
        for name in ("wandb-run.json", "mlflow-run.json", "notes.txt"):
            (tmp_path / name).write_text("{}")
        clear_run_files(tmp_path)
    finally:
        TRACKERS.unregister("list")
    nan = logged[0][1].pop("policy/nan")
    assert nan != nan  # the tracker gets the scalars as logged; each backend drops what it cannot show
    assert logged == [(0, {k: value(0, k) for k in KEYS}, ["adv/weight"]), "closed"]  # empty histograms left out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # not the run's: kept


def test_mlflow_names_keep_the_namespace_and_nothing_is_a_directory_of_another():
    assert mlflow_key("eval/success") == "eval/success"
    assert mlflow_key("eval/success/pick_and_place") == "eval/success_pick_and_place"
    assert mlflow_key("adv/weight@1") == "adv/weight_1"


def test_flat_config_names_every_leaf_by_its_dotted_key():
    flat = flat_config(CONFIG)
    assert flat["ppo.lr"] == json.dumps(CONFIG["ppo"]["lr"]) and flat["estimator"] == CONFIG["estimator"]
    assert flat["trackers"] == '["tensorboard"]' and flat["ppo.betas"] == json.dumps(CONFIG["ppo"]["betas"])
    assert not any(isinstance(v, dict) for v in flat.values())


# ---------------------------------------------------------------------------------------------
# the record and TensorBoard


def test_record_and_tensorboard_hold_each_step_once_after_a_resume(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    interrupted_and_resumed(tmp_path, ["tensorboard"])
    records = read_metrics(tmp_path)
    assert [r["iteration"] for r in records] == [0, 1, 2, 3, 4, 5]
    assert records[3]["loss/total"] == value(3, "loss/total", attempt=1) and records[3]["policy/nan"] is None
    assert sum(records[0]["hist/weight"]["counts"]) == 50 and "hist/empty" not in records[0]

    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    events.Reload()
    assert "policy/nan" not in events.Tags()["scalars"]
    for key in KEYS:
        points = [(e.step, e.value) for e in events.Scalars(key)]
        # steps 2 and 3 were purged on resume: the repeated iterations' values, each step once
        assert points == [(s, pytest.approx(value(s, key, int(s >= 2)))) for s in range(6)], key
    assert [e.step for e in events.Histograms("adv/weight")] == list(range(6))
    assert [e.histogram_value.num for e in events.Histograms("adv/weight")] == [50] * 6
    config_texts = [e for e in events.Tensors("config/text_summary")]
    assert len(config_texts) == 1 and '"estimator"' in config_texts[0].tensor_proto.string_val[0].decode()


# ---------------------------------------------------------------------------------------------
# W&B (offline)


def wandb_records(path: Path) -> list:
    """The records of a W&B offline run file, decoded with W&B's own protobuf classes.

    The file is W&B's 7-byte header (":W&B", 0xBEE1, version 0) then LevelDB-log records in 32 KiB
    blocks: each chunk has a 7-byte header (CRC32C, little-endian length, type FULL=1, FIRST=2,
    MIDDLE=3, LAST=4) and a block's tail shorter than a header is padding.
    """
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, pieces, out = 7, 32768, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        pieces = chunk if kind in (1, 2) else pieces + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            out.append(record)
    return out


def finished_wandb_records(path: Path, timeout: float = 60.0) -> list:
    """``wandb_records`` once the file ends with the run's exit record: ``run.finish()`` returns before
    W&B's service process has written everything."""
    deadline = time.monotonic() + timeout
    while True:
        records = wandb_records(path)
        if (records and records[-1].WhichOneof("record_type") == "exit") or time.monotonic() > deadline:
            return records
        time.sleep(0.1)


def wandb_history(run_dir: Path) -> tuple[list[str], dict[str, dict[int, object]], dict[str, object]]:
    """Run ids (one per offline segment), history {key: {step: value}} (a step logged twice fails), the config."""
    ids, history, config, seen = [], {}, {}, set()
    for path in sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb")):
        for record in finished_wandb_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                ids.append(record.run.run_id)
                config.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
            elif kind == "history":
                items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
                step = items["_step"]
                assert step not in seen, f"step {step} logged twice"
                seen.add(step)
                for key, v in items.items():
                    history.setdefault(key, {})[step] = v
    return ids, history, config


@needs_wandb
def test_wandb_logs_offline_under_the_run_directory_and_continues_the_run_on_resume(tmp_path):
    interrupted_and_resumed(tmp_path, ["wandb"])
    ids, history, config = wandb_history(tmp_path)
    assert len(ids) == 2 and ids[0] == ids[1] == json.loads((tmp_path / "wandb-run.json").read_text())["id"]
    for key in KEYS:
        # steps 2 and 3 were logged before the interruption: kept, not repeated; 4 and 5 from the resumed run
        assert history[key] == {s: pytest.approx(value(s, key, int(s >= 4))) for s in range(6)}, key
    assert "policy/nan" not in history
    assert history["adv/weight/_type"] == dict.fromkeys(range(6), "histogram")
    assert all(sum(counts) == 50 for counts in history["adv/weight/values"].values())
    assert config["estimator"] == CONFIG["estimator"] and config["ppo"] == json.loads(json.dumps(CONFIG["ppo"]))
    assert read_metrics(tmp_path)[-1]["iteration"] == 5


# ---------------------------------------------------------------------------------------------
# MLflow (local file store)


@needs_mlflow
def test_mlflow_logs_to_a_file_store_under_the_run_directory_and_continues_the_run_on_resume(tmp_path):
    from mlflow import MlflowClient

    interrupted_and_resumed(tmp_path, ["mlflow"])
    state = json.loads((tmp_path / "mlflow-run.json").read_text())
    assert state["tracking_uri"] == (tmp_path / "mlruns").resolve().as_uri()
    client = MlflowClient(tracking_uri=state["tracking_uri"])
    experiment = client.get_experiment_by_name("gaca")
    runs = client.search_runs([experiment.experiment_id])
    assert [r.info.run_id for r in runs] == [state["run_id"]]  # one run, continued
    run = runs[0]
    assert run.info.status == "FINISHED" and run.info.run_name == tmp_path.name
    for key in KEYS:
        points = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, mlflow_key(key)))
        assert points == [(s, pytest.approx(value(s, key, int(s >= 4)))) for s in range(6)], key
    assert "policy/nan" not in run.data.metrics
    params = run.data.params
    assert params == flat_config(CONFIG)  # the config, once, as dotted parameters
    assert run.data.tags["gaca.run_dir"] == str(tmp_path.resolve())


@needs_mlflow
def test_mlflow_tracking_uri_from_the_environment_is_used(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    store = (tmp_path / "elsewhere").resolve().as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "mine")
    log_steps(tmp_path / "run", ["mlflow"], range(2))
    assert not (tmp_path / "run" / "mlruns").exists()
    client = MlflowClient(tracking_uri=store)
    (run,) = client.search_runs([client.get_experiment_by_name("mine").experiment_id])
    assert [m.step for m in client.get_metric_history(run.info.run_id, "loss/total")] == [0, 1]


# ---------------------------------------------------------------------------------------------
# a real training run


def comparable(record: dict) -> dict[str, float]:
    """A record's finite scalars that a resumed run repeats exactly (not the wall-clock speeds)."""
    speeds = ("time/", "perf/rollout_tokens_per_s", "perf/update_tokens_per_s", "perf/advantage_share",
              "sft/seconds", "sft/tokens_per_s")
    return {k: v for k, v in record.items()
            if isinstance(v, float) and k != "iteration" and not k.startswith(speeds)}


@needs_wandb
@needs_mlflow
def test_a_crashed_and_resumed_training_run_gives_every_tracker_each_iteration_once(tmp_path, cache):
    pytest.importorskip("alfworld")
    pytest.importorskip("textworld")
    from mlflow import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from gaca.train.loop import train
    from tests.small_run import small_config

    out, plain = tmp_path / "run", tmp_path / "plain"
    overrides = ("iterations=3", "checkpoint_every=2", 'trackers=["tensorboard", "wandb", "mlflow"]')
    train(small_config(plain, cache, "iterations=3", "trackers=[]"))

    class Crash(Exception):
        pass

    def crash_after_iteration_1(done, metrics):  # logged everywhere, but the last checkpoint is iteration 0's
        if done == 1:
            raise Crash

    with pytest.raises(Crash):
        train(small_config(out, cache, *overrides), on_iteration=crash_after_iteration_1)
    train(small_config(out, cache, *overrides), resume=True)  # repeats iteration 1

    records = read_metrics(out)
    assert [r["iteration"] for r in records] == [0, 1, 2, 3]
    assert [comparable(r) for r in records] == [comparable(r) for r in read_metrics(plain)]  # same numbers
    expected = {key: {r["iteration"]: r[key] for r in records if key in comparable(r)}
                for key in sorted({k for r in records for k in comparable(r)})}
    assert "loss/total" in expected and "eval/success" in expected and "sft/loss_final" in expected

    _, wandb_hist, wandb_config = wandb_history(out)  # fails if a step was logged twice
    state = json.loads((out / "mlflow-run.json").read_text())
    client = MlflowClient(tracking_uri=state["tracking_uri"])
    tb = EventAccumulator(str(out / "tb"), size_guidance={"scalars": 0})
    tb.Reload()
    for key, points in expected.items():
        assert wandb_hist[key] == pytest.approx(points), key
        history = client.get_metric_history(state["run_id"], mlflow_key(key))
        assert {m.step: m.value for m in history} == pytest.approx(points) and len(history) == len(points), key
        assert {e.step: e.value for e in tb.Scalars(key)} == pytest.approx(points, rel=1e-6), key
        assert len(tb.Scalars(key)) == len(points), key
    assert wandb_config["trackers"] == ["tensorboard", "wandb", "mlflow"]
    assert client.get_run(state["run_id"]).data.params["estimator"] == "gaca"
