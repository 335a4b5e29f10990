"""smx_debug.local.sagemaker.training_run: a job's entry point runs as in SageMaker's container with its DebugHookConfig,
and LocalPath lands in S3 under the job's debug-output, as SageMaker uploads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from local_support import client, create_job

from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker.training_run import run_training
from smx_debug.tensors import create_trial

HOOK_CONFIG = {
    "S3OutputPath": "s3://smx-out/debug",
    "HookParameters": {"save_interval": "2"},
    "CollectionConfigurations": [{"CollectionName": "losses"},
                                 {"CollectionName": "relu_output", "CollectionParameters": {
                                     "include_regex": ".*relu_output"}}],
}

TRAIN = '''
import json, os, sys
import torch
from torch import nn
import smx_debug.hook as smd

print(json.dumps({"config": json.load(open(os.environ["SMDEBUG_CONFIG_FILE_PATH"])),
                  "job": os.environ["TRAINING_JOB_NAME"]}))
hook = smd.get_hook(create_if_not_exists=True)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
loss_fn = nn.CrossEntropyLoss()
hook.register_module(model)
hook.register_loss(loss_fn)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    opt.zero_grad()
    loss_fn(model(torch.randn(3, 4)), torch.randint(0, 2, (3,))).backward()
    opt.step()
hook.close()
'''


@pytest.fixture
def aws(local_aws: LocalAws) -> LocalAws:
    client(local_aws, "s3").create_bucket(Bucket="smx-out",
                                          CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    return local_aws


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(text)
    return path


def test_run_training_writes_container_config_and_uploads_debug_output(aws: LocalAws, tmp_path: Path) -> None:
    create_job(aws, "tr-ok", DebugHookConfig=HOOK_CONFIG)
    run = run_training(aws, "tr-ok", _script(tmp_path, TRAIN), workdir=tmp_path / "container")
    assert run.status == "Completed", run.stderr
    seen = json.loads(run.stdout.splitlines()[0])
    assert seen["job"] == "tr-ok"
    local_path = str(tmp_path / "container" / "opt" / "ml" / "output" / "tensors")
    assert seen["config"] == {**HOOK_CONFIG, "LocalPath": local_path}
    assert run.debug_output == "s3://smx-out/debug/tr-ok/debug-output/"
    keys = [o["Key"] for o in client(aws, "s3").list_objects_v2(Bucket="smx-out")["Contents"]]
    assert "debug/tr-ok/debug-output/training_job_end.ts" in keys
    assert "debug/tr-ok/debug-output/collections/000000000/worker_0_collections.json" in keys
    assert run.uploaded == len(keys) - 1
    trial = create_trial(run.debug_output, s3_client=client(aws, "s3"))
    assert trial.steps() == [0, 2, 4]
    assert set(trial.tensor_names()) == {"1_relu_output_0", "CrossEntropyLoss_output_0"}
    assert trial.has_training_ended()
    assert client(aws, "sagemaker").describe_training_job(TrainingJobName="tr-ok")["TrainingJobStatus"] == "Completed"


def test_run_training_failing_entry_point_fails_job_with_reason(aws: LocalAws, tmp_path: Path) -> None:
    create_job(aws, "tr-bad", DebugHookConfig=HOOK_CONFIG)
    run = run_training(aws, "tr-bad", _script(tmp_path, "import sys\nsys.exit('out of memory')\n"),
                       workdir=tmp_path / "c")
    assert (run.status, run.returncode) == ("Failed", 1)
    desc = client(aws, "sagemaker").describe_training_job(TrainingJobName="tr-bad")
    assert desc["TrainingJobStatus"] == "Failed"
    assert desc["FailureReason"] == "AlgorithmError: the entry point exited with code 1: out of memory"


def test_run_training_missing_bucket_fails_job_as_client_error(aws: LocalAws, tmp_path: Path) -> None:
    create_job(aws, "tr-nobucket", DebugHookConfig={**HOOK_CONFIG, "S3OutputPath": "s3://smx-missing/debug"})
    run = run_training(aws, "tr-nobucket", _script(tmp_path, "print('trained')\n"), workdir=tmp_path / "c")
    assert run.status == "Failed"
    assert run.failure_reason is not None and "(NoSuchBucket)" in run.failure_reason


def test_run_training_refuses_job_without_hook_config_or_unknown(aws: LocalAws, tmp_path: Path) -> None:
    create_job(aws, "tr-nohook")
    script = _script(tmp_path, "print('trained')\n")
    with pytest.raises(ConfigError) as info:
        run_training(aws, "tr-nohook", script, workdir=tmp_path / "c")
    assert info.value.field == "DebugHookConfig"
    with pytest.raises(NotFoundError, match="tr-missing"):
        run_training(aws, "tr-missing", script, workdir=tmp_path / "c")
    with pytest.raises(NotFoundError, match="nope"):
        run_training(aws, "tr-nohook", tmp_path / "nope.py", workdir=tmp_path / "c")


# Writes one step of a trial every 0.1 s (our writer, as a hook would) until it has written `STEPS` or is told to stop.
LOOP = '''
import json, os, signal, sys, time
import numpy as np
from smx_debug.tensors import TrialWriter

config = json.load(open(os.environ["SMDEBUG_CONFIG_FILE_PATH"]))
stop = []
if "{on_term}" == "handle":
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
elif "{on_term}" == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with TrialWriter(config["LocalPath"]) as w:
    for step in range({steps}):
        if stop:
            print(f"SIGTERM: stopped at step {{step}}", flush=True)
            break
        w.write_step(step, tensors={{"loss": np.float32(1.0 / (step + 1))}})
        time.sleep(0.1)
'''


def _uploaded_steps(aws: LocalAws, job: str, folder: str = "index") -> set[int]:
    listed = client(aws, "s3").list_objects_v2(Bucket="smx-out", Prefix=f"debug/{job}/debug-output/{folder}/")
    return {int(o["Key"].rsplit("/", 1)[-1][:12]) for o in listed.get("Contents", [])}


def _wait_for(predicate: object, seconds: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_run_training_uploads_tensors_while_the_entry_point_still_trains(aws: LocalAws, tmp_path: Path) -> None:
    from smx_debug.local.sagemaker.training_run import start_training

    create_job(aws, "tr-live", DebugHookConfig=HOOK_CONFIG)
    running = start_training(aws, "tr-live", _script(tmp_path, LOOP.format(on_term="default", steps=60)),
                             workdir=tmp_path / "c", upload_interval=0.2)
    _wait_for(lambda: len(_uploaded_steps(aws, "tr-live")) >= 3)
    assert running.returncode is None  # still training: the steps reached S3 while it ran
    assert client(aws, "sagemaker").describe_training_job(TrainingJobName="tr-live")["TrainingJobStatus"] == \
        "InProgress"
    run = running.wait()
    assert run.status == "Completed" and _uploaded_steps(aws, "tr-live") == set(range(60))


@pytest.mark.parametrize(("on_term", "returncode"), [("handle", 0), ("default", -15), ("ignore", -9)])
def test_stop_training_job_sends_sigterm_and_the_job_stops_when_training_ends(
    aws: LocalAws, tmp_path: Path, on_term: str, returncode: int
) -> None:
    from smx_debug.local import stop_calls
    from smx_debug.local.sagemaker.training_run import start_training

    job = f"tr-stop-{on_term}"
    create_job(aws, job, DebugHookConfig=HOOK_CONFIG)
    running = start_training(aws, job, _script(tmp_path, LOOP.format(on_term=on_term, steps=1000)),
                             workdir=tmp_path / "c", upload_interval=0.2, stop_grace=1.0)
    _wait_for(lambda: len(_uploaded_steps(aws, job)) >= 3)
    sagemaker = client(aws, "sagemaker")
    sagemaker.stop_training_job(TrainingJobName=job)
    assert sagemaker.describe_training_job(TrainingJobName=job)["TrainingJobStatus"] == "Stopping"
    run = running.wait()
    assert (run.status, run.returncode) == ("Stopped", returncode), run.stderr
    assert sagemaker.describe_training_job(TrainingJobName=job)["TrainingJobStatus"] == "Stopped"
    assert stop_calls(aws, job) == 1
    if on_term == "handle":
        assert "SIGTERM: stopped at step" in run.stdout
    steps, events = _uploaded_steps(aws, job), _uploaded_steps(aws, job, "events")
    assert 3 <= len(steps) < 1000  # what it wrote until the stop, uploaded, and the end marker
    # A kill between a step's event file and its index leaves that event file without an index (the writer puts
    # each file whole): the reader scans it once training has ended, so the trial holds every uploaded event file.
    assert steps <= events and len(events - steps) <= 1
    trial = create_trial(run.debug_output, s3_client=client(aws, "s3"))
    assert trial.has_training_ended() and trial.steps() == sorted(events)
