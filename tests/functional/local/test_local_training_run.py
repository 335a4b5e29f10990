"""smx_debug.local.training_run: a job's entry point runs as in SageMaker's container with its DebugHookConfig,
and LocalPath lands in S3 under the job's debug-output, as SageMaker uploads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from local_support import client, create_job

from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.local import LocalAws
from smx_debug.local.training_run import run_training
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
