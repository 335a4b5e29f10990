"""The SDK v2 on the local AWS, as the README's notebook code uses it: no real STS, no real default bucket,
the user's tags next to the plan's, and a connection pool that fits the readers' concurrency."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest

from smx_debug import DebugPlan, SmxDebugWarning, data
from smx_debug.local import LOCAL_ACCOUNT_ID, LocalAws, execution_role
from smx_debug.local.sdk import sagemaker_session
from smx_debug.simulate import Simulation, SimulationSpec

ROOT = Path(__file__).resolve().parents[3]


def test_local_sdk_session_account_and_default_bucket_stay_local(local_aws: LocalAws) -> None:
    session = sagemaker_session(local_aws)
    assert session.account_id() == LOCAL_ACCOUNT_ID
    bucket = session.default_bucket()
    assert bucket == f"sagemaker-{local_aws.region}-{LOCAL_ACCOUNT_ID}"
    assert bucket in [b["Name"] for b in local_aws.client("s3").list_buckets()["Buckets"]]


def test_local_session_clients_with_explicit_endpoint_go_local(local_aws: LocalAws) -> None:
    sts = local_aws.session().client("sts", endpoint_url="https://sts.us-west-2.amazonaws.com")
    assert sts.meta.endpoint_url == local_aws.endpoint_url
    assert sts.get_caller_identity()["Account"] == LOCAL_ACCOUNT_ID


def test_readme_notebook_code_launches_pytorch_estimator_on_local_aws(local_aws: LocalAws, tmp_path: Path) -> None:
    from sagemaker.pytorch import PyTorch

    (tmp_path / "train.py").write_text("print('training')\n")
    session = sagemaker_session(local_aws)
    local_aws.client("s3").create_bucket(Bucket="guard-out",
                                         CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    plan = DebugPlan.from_file(ROOT / "examples" / "plans" / "profiling_only.yaml")
    plan = plan.with_output_path("s3://guard-out/debugger")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmxDebugWarning)
        kwargs = plan.to_estimator_kwargs(tags=[{"Key": "team", "Value": "a"}])
    estimator = PyTorch(entry_point="train.py", source_dir=str(tmp_path), role=execution_role(local_aws), instance_type="ml.p3.2xlarge",
                        instance_count=1, framework_version="1.13", py_version="py39", base_job_name="team-a-resnet",
                        sagemaker_session=session, **kwargs)
    estimator.fit(wait=False)
    job = estimator.latest_training_job.name
    sm = local_aws.client("sagemaker")
    desc = sm.describe_training_job(TrainingJobName=job)
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=desc["TrainingJobArn"])["Tags"]}
    assert tags["team"] == "a" and tags["smx-debug:managed"] == "true"
    code = local_aws.client("s3").list_objects_v2(Bucket=session.default_bucket())["Contents"]
    assert any(o["Key"].endswith("sourcedir.tar.gz") for o in code)


def test_local_clients_pool_fits_the_readers(local_aws: LocalAws, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    s3 = local_aws.client("s3")
    s3.create_bucket(Bucket="prof", CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    Simulation(SimulationSpec(duration_s=600.0, nodes=4, cpus=2, gpus=1, seed=2)).write_s3("prof", "j/profiler-output",
                                                                                           s3_client=s3)
    with caplog.at_level(logging.WARNING, logger="urllib3"):
        frame = data.system_metrics("s3://prof/j/profiler-output", s3_client=s3, progress=False, workers=16)
    assert len(frame) > 0
    assert not [r for r in caplog.records if "Connection pool is full" in r.getMessage()]


def test_local_environment_default_sdk_session_stays_local_and_is_restored(local_aws: LocalAws) -> None:
    import boto3
    import sagemaker

    before = boto3.DEFAULT_SESSION
    with local_aws.environment():
        session = sagemaker.Session()
        assert session.account_id() == LOCAL_ACCOUNT_ID
        assert session.default_bucket() == f"sagemaker-{local_aws.region}-{LOCAL_ACCOUNT_ID}"
    assert boto3.DEFAULT_SESSION is before
