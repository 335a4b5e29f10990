"""The tensor rules over trials on disk and in the local S3: incremental refreshes, workers, damaged files, the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from smx_debug.cli import main
from smx_debug.evaluate.tensor_eval import TensorEvaluator, evaluate_trial
from smx_debug.local import LocalAws, execution_role
from smx_debug.tensors import Collection, TrialWriter, create_trial

COLLECTIONS = [Collection(name="gradients", include_regex=("^gradient",)),
               Collection(name="weights", include_regex=("^(?!gradient).*weight",)),
               Collection(name="losses", include_regex=("[Ll]oss_(?!input).*output",))]
RULES = ["VanishingGradient", "ExplodingTensor", "DeadRelu", "WeightUpdateRatio", "LossNotDecreasing",
         "StalledTrainingRule"]


def _step_tensors(step: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A run whose gradients vanish from step 60 and whose ReLUs die from step 80."""
    scale = 1e-9 if step >= 60 else 1e-2
    relu = np.maximum(rng.normal(size=(32, 16)) - (10 if step >= 80 else 0), 0)
    return {"CrossEntropyLoss_output_0": np.float32(2.0 / (1 + step)),
            "gradient/Net_fc.weight": (rng.normal(size=(16, 16)) * scale).astype(np.float32),
            "Net_fc.weight": rng.normal(size=(16, 16)).astype(np.float32),
            "fc_relu_output_0": relu.astype(np.float32)}


def write_run(out: Any, steps: range, *, workers: tuple[str, ...] = ("worker_0",), end: bool = True,
              s3_client: Any = None, seed: int = 0) -> None:
    for k, worker in enumerate(workers):
        rng = np.random.default_rng(seed + k)
        with TrialWriter(out, worker=worker, s3_client=s3_client) as w:
            w.write_collections(COLLECTIONS, num_workers=len(workers))
            for step in steps:
                w.write_step(step, mode="train", mode_step=step, wall_time=1.7e9 + step,
                             tensors=_step_tensors(step, rng))
            if end and k == len(workers) - 1:
                w.training_end()


def _verdicts(results: dict[str, Any]) -> dict[str, tuple[int | None, int, int, int]]:
    return {k: (r.trigger_step, r.rule_triggered, r.violations, r.datapoints) for k, r in results.items()}


def test_tensor_evaluator_second_refresh_reads_only_the_new_steps(tmp_path: Path) -> None:
    whole, live = tmp_path / "whole", tmp_path / "live"
    write_run(whole, range(0, 100, 10))
    expected = _verdicts(evaluate_trial(str(whole), RULES))
    assert expected["VanishingGradient"][0] == 60 and expected["DeadRelu"][0] == 80

    shutil.copytree(whole, live)
    for later in range(50, 100, 10):  # the live trial has written steps 0-40 so far
        for part in ("events", "index"):
            for f in (live / part).rglob(f"{later:012d}_*"):
                f.unlink()
    (live / "training_job_end.ts").unlink()
    ev = TensorEvaluator(create_trial(str(live)), RULES)
    first = ev.refresh()
    assert first["VanishingGradient"].datapoints == 5 and not first["VanishingGradient"].triggered
    for f in (live / "events").rglob("*.tfevents"):  # what was read is damaged now: it must not be read again
        f.write_bytes(b"\0" * f.stat().st_size)
    for path in whole.rglob("*"):
        target = live / path.relative_to(whole)
        if path.is_file() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    assert _verdicts(ev.refresh()) == expected
    assert ev.feed.trial.skipped == {}


def test_tensor_evaluator_step_waits_until_every_worker_wrote_it(tmp_path: Path) -> None:
    write_run(tmp_path, range(0, 30, 10), workers=("worker_0", "worker_1"), end=False)
    (tmp_path / "events" / f"{20:012d}" / f"{20:012d}_worker_1.tfevents").unlink()
    for f in (tmp_path / "index").rglob(f"{20:012d}_worker_1.json"):
        f.unlink()
    ev = TensorEvaluator(create_trial(str(tmp_path)), ["ExplodingTensor"])
    assert ev.refresh()["ExplodingTensor"].datapoints == 2 * 2 * 4  # steps 0 and 10, two workers, 4 tensors
    write_run(tmp_path / "w1", range(0, 30, 10), workers=("worker_0", "worker_1"), end=False)
    for part in ("events", "index"):
        for f in (tmp_path / "w1" / part).rglob(f"{20:012d}_worker_1.*"):
            target = tmp_path / f.relative_to(tmp_path / "w1")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, target)
    assert ev.refresh()["ExplodingTensor"].datapoints == 3 * 2 * 4


def test_tensor_evaluator_damaged_record_is_skipped_and_counted_other_steps_judged(tmp_path: Path) -> None:
    write_run(tmp_path, range(0, 100, 10))
    event = tmp_path / "events" / f"{70:012d}" / f"{70:012d}_worker_0.tfevents"
    index = json.loads(next((tmp_path / "index").rglob(f"{70:012d}_worker_0.json")).read_text())
    start = next(e["start_idx"] for e in index["tensor_payload"] if e["tensorname"].startswith("gradient/"))
    data = bytearray(event.read_bytes())
    data[start:start + 8] = (10**9).to_bytes(8, "little")  # the gradient record's length is wrong
    event.write_bytes(bytes(data))
    trial = create_trial(str(tmp_path))
    results = TensorEvaluator(trial, ["VanishingGradient"]).refresh()
    assert (results["VanishingGradient"].trigger_step, results["VanishingGradient"].datapoints) == (60, 9)
    assert trial.skipped == {"index entries that point at no record": 1}


def test_evaluate_trial_s3_equals_local(local_aws: LocalAws, tmp_path: Path) -> None:
    s3 = local_aws.client("s3")
    s3.create_bucket(Bucket="tensors", CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    write_run(tmp_path, range(0, 100, 10))
    write_run("s3://tensors/job/debug-output", range(0, 100, 10), s3_client=s3)
    remote = evaluate_trial(create_trial("s3://tensors/job/debug-output", s3_client=s3), RULES)
    assert _verdicts(remote) == _verdicts(evaluate_trial(str(tmp_path), RULES))


def test_evaluate_trial_job_name_reads_its_debug_hook_output(local_aws: LocalAws) -> None:
    s3, sm = local_aws.client("s3"), local_aws.client("sagemaker")
    s3.create_bucket(Bucket="jobs", CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    sm.create_training_job(
        TrainingJobName="vg-job",
        AlgorithmSpecification={"TrainingImage": "123.dkr.ecr.us-west-2.amazonaws.com/x:1", "TrainingInputMode": "File"},
        RoleArn=execution_role(local_aws), OutputDataConfig={"S3OutputPath": "s3://jobs/out"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        StoppingCondition={"MaxRuntimeInSeconds": 3600}, DebugHookConfig={"S3OutputPath": "s3://jobs/tensors"},
    )
    write_run("s3://jobs/tensors/vg-job/debug-output", range(0, 100, 10), s3_client=s3)
    result = evaluate_trial("vg-job", ["VanishingGradient"], s3_client=s3, sagemaker_client=sm)["VanishingGradient"]
    assert result.trigger_step == 60


def test_cli_rules_evaluate_trial_rule_set_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path, range(0, 100, 10))
    assert main(["rules", "evaluate", str(tmp_path), "--rule", "VanishingGradient", "--set", "threshold=1e-12",
                 "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)["VanishingGradient"]
    assert (out["status"], out["RuleTriggered"], out["RuleParameters"]) == ("NoIssuesFound", 0, "threshold:1e-12")
    assert main(["rules", "evaluate", str(tmp_path), "--rule", "VanishingGradient", "--fail-on-issues"]) == 1
    table = capsys.readouterr().out
    assert "VanishingGradient  IssuesFound" in table
    assert "gradient/Net_fc.weight at step 60: mean absolute gradient" in table


def test_cli_rules_evaluate_trial_missing_collection_says_what_to_add(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with TrialWriter(tmp_path, worker="worker_0") as w:
        w.write_collections([Collection(name="losses", include_regex=("loss",))])
        w.write_step(0, tensors={"loss": np.float32(1.0)})
        w.training_end()
    assert main(["rules", "evaluate", str(tmp_path), "--rule", "VanishingGradient", "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)["VanishingGradient"]
    assert out["status"] == "NoData"
    assert "add 'gradients' to the plan's hook collections" in out["reason"]


@pytest.mark.parametrize(("args", "message"), [
    (["--rule", "TreeDepth"], "error: rule TreeDepth cannot be evaluated by smx-debug: it reads what smdebug's "
                              "XGBoost hook saves"),
    (["--rule", "DeadRelu", "--set", "threshold_layer=500"], "error: DeadRelu.threshold_layer: must be <= 100"),
])
def test_cli_rules_evaluate_trial_bad_rule_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             args: list[str], message: str) -> None:
    write_run(tmp_path, range(0, 20, 10))
    assert main(["rules", "evaluate", str(tmp_path), *args]) == 2
    assert capsys.readouterr().err.startswith(message)


def test_tensor_live_evaluator_fires_at_the_update_that_reads_the_bad_step(tmp_path: Path) -> None:
    from smx_debug.evaluate.tensor_live import TensorLiveEvaluator

    write_run(tmp_path, range(0, 50, 10), end=False)
    live = TensorLiveEvaluator(create_trial(str(tmp_path)), ["VanishingGradient", "DeadRelu"], clock=lambda: 1.7e9)
    assert live.update() == [] and live.status == {"VanishingGradient": "InProgress", "DeadRelu": "InProgress"}
    rng = np.random.default_rng(5)
    with TrialWriter(tmp_path, worker="worker_0") as w:
        w.write_step(60, mode="train", mode_step=60, wall_time=1.7e9 + 60, tensors=_step_tensors(60, rng))
    fired = live.update()
    assert [(t.rule, t.previous, t.status, t.step) for t in fired] == [
        ("VanishingGradient", "InProgress", "IssuesFound", 60)]
    assert "gradient/Net_fc.weight at step 60: mean absolute gradient" in fired[0].result.message
    assert live.evaluator.feed.cursor == 61 and live.update() == []  # nothing new: nothing read, nothing fired
    with TrialWriter(tmp_path, worker="worker_0") as w:
        w.training_end()
    assert live.update() == [] and live.ended
    assert [(t.rule, t.status) for t in live.finish()] == [("DeadRelu", "NoIssuesFound")]


def test_cli_tensor_live_prints_the_rule_when_it_fires_while_the_trial_is_written(tmp_path: Path, capsys) -> None:
    import threading
    import time

    write_run(tmp_path, range(0, 30, 10), end=False)

    def train_on() -> None:  # the training keeps saving: gradients vanish from step 60, then it ends
        rng = np.random.default_rng(9)
        with TrialWriter(tmp_path, worker="worker_0") as w:
            for step in range(30, 80, 10):
                time.sleep(0.15)
                w.write_step(step, mode="train", mode_step=step, wall_time=1.7e9 + step,
                             tensors=_step_tensors(step, rng))
            w.training_end()

    writer = threading.Thread(target=train_on)
    writer.start()
    try:
        code = main(["rules", "evaluate", str(tmp_path), "--rule", "VanishingGradient", "--rule", "ExplodingTensor",
                     "--live", "--interval", "0.05", "--max-updates", "400"])
    finally:
        writer.join()
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    fired = [line for line in out if "VanishingGradient: InProgress -> IssuesFound" in line]
    assert len(fired) == 1 and "at step 60 resulted in the condition being met" in fired[0]
    assert "(gradient/Net_fc.weight at step 60: mean absolute gradient" in fired[0]
    assert any("ExplodingTensor: InProgress -> NoIssuesFound" in line for line in out)
    assert json.loads(out[-1]) == [{"RuleConfigurationName": "VanishingGradient", "RuleEvaluationStatus": "IssuesFound"},
                                   {"RuleConfigurationName": "ExplodingTensor", "RuleEvaluationStatus": "NoIssuesFound"}]
