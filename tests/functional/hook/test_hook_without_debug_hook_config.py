"""A job without a DebugHookConfig on the local AWS: its hook writes as the job's execution role, and only where a
policy grants that role (issue 31 item 2). The granted path, against the deployed bucket policy, is
tests/functional/infra/test_infra_model_trainer_guard.py."""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

import pytest

from smx_debug import local
from smx_debug.config import DebugPlan
from smx_debug.config.sdk_v3 import hook_environment
from smx_debug.local import LocalAws, iam
from smx_debug.local.sagemaker.container_role import s3_call
from smx_debug.local.sagemaker.training_run import run_training

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")

TRAIN = '''
import json, os, torch
from torch import nn
import smx_debug.hook as smd

hook = smd.get_hook(create_if_not_exists=True)
print(json.dumps({"out_dir": hook.out_dir, "config_file": os.path.exists(os.environ["SMDEBUG_CONFIG_FILE_PATH"])}))
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
loss_fn = nn.CrossEntropyLoss()
hook.register_module(model)
hook.register_loss(loss_fn)
for _ in range(4):
    loss_fn(model(torch.randn(3, 4)), torch.randint(0, 2, (3,))).backward()
hook.close()
print(json.dumps({"write_failures": hook.write_failures}))
'''


@pytest.mark.iam_denials
def test_hook_without_grant_on_the_bucket_is_denied_and_training_goes_on(local_aws: LocalAws, tmp_path: Path) -> None:
    local.install(local_aws)
    s3 = local_aws.client("s3")
    s3.create_bucket(Bucket="no-grant", CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = DebugPlan(region=local_aws.region, s3_output_path="s3://no-grant/debugger", guard="evaluator",
                         rules=[{"name": "ExplodingTensor"}])
    local.create_training_job(local_aws, "v3-denied", Environment=hook_environment(plan), Tags=plan.tags_list())
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    iam.ledger(local_aws).reset()
    run = run_training(local_aws, "v3-denied", script, workdir=tmp_path / "container", timeout=120)

    assert run.status == "Completed", run.stderr  # a hook that cannot write never breaks the training
    first, last = (json.loads(line) for line in run.stdout.splitlines())
    assert first == {"out_dir": "s3://no-grant/debugger/v3-denied/debug-output/", "config_file": False}
    assert last["write_failures"] >= 1 and run.stderr.count("could not write") == 1
    denied = iam.ledger(local_aws).denials([r for r in iam.ledger(local_aws).records() if r.caller == "v3-denied"])
    assert denied and denied[0].action == "s3:PutObject" and "assumed-role/SageMakerExecution-local/SageMaker" \
        in denied[0].message
    assert "Contents" not in s3.list_objects_v2(Bucket="no-grant")


@pytest.mark.parametrize(("request_line", "call"), [
    (("PUT", "127.0.0.1:5000", "/b/k/x.tfevents", ""), ("PutObject", {"Bucket": "b", "Key": "k/x.tfevents"})),
    (("GET", "b.localhost:5000", "/k", ""), ("GetObject", {"Bucket": "b", "Key": "k"})),
    (("HEAD", "127.0.0.1", "/b/k", ""), ("HeadObject", {"Bucket": "b", "Key": "k"})),
    (("GET", "127.0.0.1", "/b", "list-type=2&prefix=p%2F&max-keys=5"),
     ("ListObjectsV2", {"Bucket": "b", "Prefix": "p/", "MaxKeys": "5"})),
    (("POST", "127.0.0.1", "/b/k", "uploads"), ("PutObject", {"Bucket": "b", "Key": "k"})),
    (("GET", "127.0.0.1", "/b", "policy"), None),
    (("PUT", "127.0.0.1", "/b/k", "acl"), None),
])
def test_s3_call_rest_request_maps_to_the_operation_iam_authorizes(
        request_line: tuple[str, str, str, str], call: tuple[str, dict[str, str]] | None) -> None:
    assert s3_call(*request_line) == call
