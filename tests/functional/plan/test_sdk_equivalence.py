"""Our request dict against what the SageMaker SDK v2 itself sends for our estimator objects.

``Estimator.fit(wait=False)`` runs against moto; a botocore ``before-call`` handler on the SDK's
sagemaker client captures the CreateTrainingJob parameters. moto's SageMaker drops ProfilerConfig and
ProfilerRuleConfigurations from the stored job, so those are compared on the captured request, not
on DescribeTrainingJob.

Documented differences (docs/plan.md), normalised here before comparing:
- CollectionConfigurations: the SDK keeps them in a ``set``, so their order is arbitrary; we sort both.
- Tags: the SDK may add its own tags; we compare ours as a subset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from smx_debug.config import DebugPlan
from smx_debug.local import execution_role

ROOT = Path(__file__).resolve().parents[3]
PLANS = sorted((ROOT / "examples" / "plans").glob("*.yaml"))
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:latest"
FIELDS = (
    "DebugHookConfig",
    "DebugRuleConfigurations",
    "ProfilerConfig",
    "ProfilerRuleConfigurations",
    "TensorBoardOutputConfig",
)


def _normalise(request: dict[str, Any]) -> dict[str, Any]:
    out = {k: request[k] for k in FIELDS if k in request}
    hook = out.get("DebugHookConfig")
    if hook and "CollectionConfigurations" in hook:
        hook = dict(hook)
        hook["CollectionConfigurations"] = sorted(hook["CollectionConfigurations"], key=lambda c: c["CollectionName"])
        out["DebugHookConfig"] = hook
    return out


@pytest.fixture(autouse=True)
def _no_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """fit() reports telemetry to an AWS endpoint; a no-op stands in (the TelemetryOptOut config
    would work too, but the SDK re-validates that config against its JSON schema on every lookup:
    10 s per fit)."""
    from sagemaker.telemetry import telemetry_logging

    monkeypatch.setattr(telemetry_logging, "_send_telemetry_request", lambda *args, **kwargs: None)


def _fit(local_aws: Any, plan: DebugPlan, job_name: str) -> tuple[dict[str, Any], Any]:
    import sagemaker
    from sagemaker.estimator import Estimator

    local_aws.client("s3").create_bucket(
        Bucket="smx-debug-demo-output", CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    sm = local_aws.client("sagemaker")
    captured: dict[str, Any] = {}

    def capture(params: dict[str, Any], **_: Any) -> None:
        captured.update(params)

    sm.meta.events.register("before-parameter-build.sagemaker.CreateTrainingJob", capture)
    session = sagemaker.Session(boto_session=local_aws.session(), sagemaker_client=sm)
    estimator = Estimator(
        image_uri=IMAGE,
        role=execution_role(local_aws),
        instance_type="ml.m5.xlarge",
        instance_count=1,
        output_path="s3://smx-debug-demo-output/model",
        sagemaker_session=session,
        **plan.to_estimator_kwargs(),
    )
    estimator.fit(wait=False, job_name=job_name)
    return captured, sm


@pytest.mark.filterwarnings("ignore::smx_debug.config.SmxDebugWarning")
@pytest.mark.parametrize("path", PLANS, ids=[p.stem for p in PLANS])
def test_estimator_fit_example_plan_sdk_request_equals_ours(local_aws: Any, path: Path) -> None:
    plan = DebugPlan.from_file(path)
    job_name = f"smx-{path.stem.replace('_', '-')}-1"

    sent, sm = _fit(local_aws, plan, job_name)
    ours = plan.to_request_dict(job_name=job_name)

    assert _normalise(sent) == _normalise(ours)
    sent_tags = {t["Key"]: t["Value"] for t in sent.get("Tags", [])}
    assert {t["Key"]: t["Value"] for t in ours["Tags"]}.items() <= sent_tags.items()
    # the job exists in moto and carries our hook and rules
    job = sm.describe_training_job(TrainingJobName=job_name)
    assert job["DebugHookConfig"]["S3OutputPath"] == plan.s3_output_path
    assert [r["RuleConfigurationName"] for r in job.get("DebugRuleConfigurations", [])] == [
        r.rule_configuration_name for r in plan.debugger_rules
    ]


@pytest.mark.filterwarnings("ignore::smx_debug.config.SmxDebugWarning")
def test_estimator_fit_framework_sections_sdk_request_equals_ours(local_aws: Any) -> None:
    plan = DebugPlan(
        region="us-west-2",
        s3_output_path="s3://smx-debug-demo-output/fw",
        tensorboard_output_path="s3://smx-debug-demo-output/tb",
        hook={
            "local_path": "/opt/ml/output/tensors",
            "save_interval": 20,
            "parameters": {"include_workers": "one"},
            "collections": [
                {"name": "losses", "save_interval": 1000, "reductions": ["mean"]},
                {"name": "weights", "save_steps": [0, 10], "save_histogram": False},
            ],
        },
        rules=[
            {"name": "loss_not_decreasing", "actions": [{"stop_training": {}}, {"email": "team@example.com"}]},
            {"name": "overfit", "configuration_name": "overfit-2", "parameters": {"patience": 2}},
            {"name": "BatchSize"},
            {"name": "ProfilerReport", "parameters": {"CPUBottleneck_threshold": 40}},
        ],
        profiler={
            "system_monitor_interval_millis": 1000,
            "framework": {
                "detailed": {"start_step": 3},
                "dataloader": {"start_unix_time": 1700000000, "duration": 30, "metrics_regex": "Get.*"},
                "python": {"profiler": "pyinstrument", "num_steps": 2},
            },
        },
    )
    sent, _ = _fit(local_aws, plan, "smx-fw-sections-1")
    assert _normalise(sent) == _normalise(plan.to_request_dict(job_name="smx-fw-sections-1"))


@pytest.mark.parametrize(
    "framework",
    [{}, {"start_step": 4}, {"num_steps": 2}, {"start_unix_time": 1700000000, "duration": 12.5}],
    ids=["defaults", "start-only", "num-only", "time-range"],
)
def test_profiling_parameters_framework_range_equals_sdk_framework_profile(framework: dict[str, Any]) -> None:
    from sagemaker.debugger import FrameworkProfile

    from smx_debug.config import FrameworkProfiling
    from smx_debug.config.request import profiling_parameters

    assert profiling_parameters(FrameworkProfiling(**framework)) == FrameworkProfile(**framework).profiling_parameters
