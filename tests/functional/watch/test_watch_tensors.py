"""The evaluator's tensor rules: a watched job that writes tensors to S3 is judged on them, incrementally, and acted
on once through the same responder."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from s3_support import RecordingS3
from watch_support import BUCKET, T0, Recorder, at, clients, create_job, settings, with_clients

from smx_debug.config import DebugPlan
from smx_debug.config.sdk_v3 import hook_environment
from smx_debug.local import LocalAws
from smx_debug.local.clients import client as cached_client
from smx_debug.tensors import Collection, TrialWriter
from smx_debug.watch import WatchSpec, run_once
from smx_debug.watch.state import CursorStore

JOB = "guarded-cnn"
TRIAL = f"s3://{BUCKET}/debugger/{JOB}/debug-output"
EXPLODING = WatchSpec.from_json('[{"rule": "ExplodingTensor"}, {"rule": "VanishingGradient"}]')


def _job(aws: LocalAws, name: str = JOB, *, hook: bool = True) -> None:
    if hook:
        create_job(aws, name, DebugHookConfig={"S3OutputPath": f"s3://{BUCKET}/debugger",
                                               "CollectionConfigurations": [{"CollectionName": "gradients"}]})
    else:
        create_job(aws, name)


def _steps(aws: LocalAws, steps: range, *, nan_from: int | None = None, first: bool = False) -> None:
    rng = np.random.default_rng(steps.start)
    with TrialWriter(TRIAL, worker="worker_0", s3_client=cached_client(aws, "s3")) as w:
        if first:
            w.write_collections([Collection(name="gradients", include_regex=("^gradient",))])
        for step in steps:
            grad = rng.normal(size=(8, 8)).astype(np.float32) * 0.01
            if nan_from is not None and step >= nan_from:
                grad[0, 0] = np.nan
            w.write_step(step, mode="train", wall_time=T0.timestamp() + step,
                         tensors={"gradient/fc.weight": grad, "CrossEntropyLoss_output_0": np.float32(1.0)})


class Reads(RecordingS3):
    def steps(self) -> set[int]:
        """The global steps whose index or event files were listed or read."""
        return {int(k.rsplit("/", 1)[-1][:12]) for k in self.gets + self.listed if "/index/" in k or "/events/" in k}


def test_run_tensor_rule_fires_once_on_the_new_steps_it_reads(aws: LocalAws) -> None:
    _job(aws)
    _steps(aws, range(0, 50, 10), first=True)
    guard = settings(default_rules=EXPLODING)
    recorder = Recorder()
    reads = Reads(cached_client(aws, "s3"))
    report = run_once(guard, with_clients(aws, s3=reads), recorder, now=at(2))
    assert report.triggers == [] and report.outcomes[JOB].status == "evaluated"
    assert reads.steps() == {0, 10, 20, 30, 40}

    _steps(aws, range(50, 70, 10), nan_from=60)
    reads.clear()
    report = run_once(guard, with_clients(aws, s3=reads), recorder, now=at(3))
    assert reads.steps() == {50, 60}  # only what was saved since the last run
    assert [(t.rule, t.kind, t.step) for t in report.outcomes[JOB].triggers] == [("ExplodingTensor", "debugger", 60)]
    assert "gradient/fc.weight at step 60: 1 NaN or infinite values" in report.triggers[0].details
    assert "smx-debug evaluator" in report.triggers[0].details

    _steps(aws, range(70, 90, 10), nan_from=60)
    report = run_once(guard, clients(aws), recorder, now=at(4))
    assert report.triggers == []  # acted on once; VanishingGradient still judged, quiet
    assert [(job, [t.rule for t in ts]) for job, ts in recorder.calls] == [(JOB, ["ExplodingTensor"])]
    cursor = CursorStore(guard.cursor_table, cached_client(aws, "dynamodb")).load([JOB])[JOB]
    assert cursor.tensors is not None and len(cursor.tensors) < 10_000


def test_run_tensor_rule_job_without_tensors_is_noted_never_stopped(aws: LocalAws) -> None:
    _job(aws, "guarded-nohook", hook=False)
    _job(aws, "guarded-notyet")
    recorder = Recorder()
    report = run_once(settings(default_rules=EXPLODING), clients(aws), recorder, now=at(2))
    assert recorder.calls == []
    assert any("no DebugHookConfig and no SMX_DEBUG_OUTPUT" in n for n in report.outcomes["guarded-nohook"].notes)
    assert any("no tensors under" in n for n in report.outcomes["guarded-notyet"].notes)


def test_run_tensor_rule_job_without_debug_hook_config_judged_on_its_environments_trial(aws: LocalAws) -> None:
    # a ModelTrainer job (issue 31 item 2): no DebugHookConfig, the hook's settings in the Environment its plan
    # rendered; its hook writes the trial under SMX_DEBUG_OUTPUT/<job>/debug-output/ (TRIAL for JOB)
    plan = DebugPlan(region=aws.region, s3_output_path=f"s3://{BUCKET}/debugger", guard="evaluator",
                     rules=[{"name": "ExplodingTensor"}])
    create_job(aws, JOB, Environment={**hook_environment(plan), "EPOCHS": "3"})
    assert "DebugHookConfig" not in cached_client(aws, "sagemaker").describe_training_job(TrainingJobName=JOB)
    _steps(aws, range(0, 30, 10), nan_from=20, first=True)
    recorder = Recorder()
    report = run_once(settings(default_rules=EXPLODING), clients(aws), recorder, now=at(2))
    assert report.outcomes[JOB].status == "evaluated", report.outcomes[JOB].notes
    assert [(t.rule, t.step) for t in report.outcomes[JOB].triggers] == [("ExplodingTensor", 20)]
    assert [(job, [t.rule for t in ts]) for job, ts in recorder.calls] == [(JOB, ["ExplodingTensor"])]


def test_run_tensor_prefix_denied_is_that_jobs_access_denied_and_tried_again(aws: LocalAws) -> None:
    _job(aws)
    _job(aws, "guarded-other")
    _steps(aws, range(0, 30, 10), nan_from=10, first=True)

    class Denied(Reads):
        def get_paginator(self, name: str) -> Any:
            from botocore.exceptions import ClientError

            class Paginator:
                def paginate(self, **kwargs: Any) -> Any:
                    if f"{JOB}/debug-output" in kwargs.get("Prefix", ""):
                        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}},
                                          "ListObjectsV2")
                    yield from real.paginate(**kwargs)

            real = self._client.get_paginator(name)
            return Paginator()

    recorder = Recorder()
    report = run_once(settings(default_rules=EXPLODING), with_clients(aws, s3=Denied(cached_client(aws, "s3"))),
                      recorder, now=at(2))
    outcome = report.outcomes[JOB]
    assert outcome.status == "failed" and [e.reason for e in outcome.errors] == ["access-denied"]
    assert report.outcomes["guarded-other"].status != "failed" and recorder.calls == []
    report = run_once(settings(default_rules=EXPLODING), clients(aws), recorder, now=at(3))
    assert [t.step for t in report.triggers] == [10]  # its cursor did not move: read from the start again


@pytest.mark.parametrize("spec", [{"rule": "VanishingGradient", "parameters": {"threshold": "low"}}])
def test_run_tensor_rule_bad_parameter_is_a_note_and_the_others_run(aws: LocalAws, spec: Mapping[str, Any]) -> None:
    _job(aws)
    _steps(aws, range(0, 30, 10), nan_from=20, first=True)
    guard = settings(default_rules=WatchSpec.from_json([{"rule": "ExplodingTensor"}, spec].__repr__()
                                                       .replace("'", '"')))
    report = run_once(guard, clients(aws), Recorder(), now=at(2))
    assert [t.rule for t in report.triggers] == ["ExplodingTensor"]
    assert any(n.startswith("VanishingGradient: ") and "threshold" in n for n in report.outcomes[JOB].notes)
