"""Shared set-up for the evaluator's tests on the local AWS: jobs, their metrics, the cursor table, a clock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from notify_support import inbox, ledger_and_inbox
from profiler_support import set_profiler_config

from smx_debug import local
from smx_debug.actions.verify import Trigger
from smx_debug.contracts import MANAGED_TAG, is_watched
from smx_debug.local import LocalAws
from smx_debug.local.clients import client as cached_client
from smx_debug.local.cloudwatch import metric_data
from smx_debug.local.sagemaker import job_metrics, training_jobs
from smx_debug.local.sagemaker.job_metrics import Scenario, publish_minutes
from smx_debug.rules.watch_spec import WatchSpec
from smx_debug.watch import Clients, EvaluatorSettings

T0 = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)  # every simulated job starts here
TABLE = "smx-debug-cursors"
BUCKET = "smx-guard-bucket"


def clients(aws: LocalAws) -> Clients:
    return Clients(
        sagemaker=cached_client(aws, "sagemaker"),
        cloudwatch=cached_client(aws, "cloudwatch"),
        dynamodb=cached_client(aws, "dynamodb"),
        s3=cached_client(aws, "s3"),
    )


def make_table(aws: LocalAws, table: str = TABLE) -> None:
    metric_data.install()
    job_metrics.install()
    local.install(aws)  # the training-job lifecycle and Search (the evaluator finds opted-in jobs with it)
    aws.client("dynamodb").create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    aws.client("s3").create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": aws.region})


def create_job(
    aws: LocalAws,
    name: str,
    *,
    tags: Mapping[str, str] | None = None,
    hosts: int = 1,
    instance_type: str = "ml.g4dn.2xlarge",
    metrics: Sequence[str] = ("train:loss", "validation:loss"),
    **fields: Any,
) -> None:
    """An InProgress job with no Debugger configuration at all (no rules, profiler disabled), or with the
    CreateTrainingJob ``fields`` given (a ``DebugHookConfig``)."""
    local.create_training_job(
        aws, name, tags,
        AlgorithmSpecification={
            "TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
            "TrainingInputMode": "File",
            "MetricDefinitions": [{"Name": m, "Regex": f"{m}=(.*?);"} for m in metrics],
        },
        ResourceConfig={"InstanceType": instance_type, "InstanceCount": hosts, "VolumeSizeInGB": 5},
        StoppingCondition={"MaxRuntimeInSeconds": 36000},
        ProfilerConfig={"DisableProfiler": True},
        **fields,
    )
    local.set_training_job_status(aws, name, "InProgress")
    job_metrics.set_start_time(aws, name, T0)


def profiled_job(aws: LocalAws, name: str, **profiler_config: Any) -> None:
    """A job (on a 4-GPU instance) created with the profiler off, then writing profiler output under
    ``s3://BUCKET/debugger`` (the local AWS keeps the field); ``profiler_config``: its other ProfilerConfig fields."""
    create_job(aws, name, instance_type="ml.p3.8xlarge")
    set_profiler_config(aws, name, BUCKET, **profiler_config)


def publish(aws: LocalAws, job: str, first: int, last: int, scenario: Scenario, hosts: int = 1) -> None:
    publish_minutes(aws, job, start=T0, first=first, last=last, scenario=scenario, hosts=hosts)


def at(minute: float) -> float:
    """Epoch seconds ``minute`` minutes after T0 (a run's "now")."""
    return T0.timestamp() + minute * 60


def settings(**changes: Any) -> EvaluatorSettings:
    base: dict[str, Any] = {
        "watch_prefixes": ("guarded-",),
        "cursor_table": TABLE,
        "spec_bucket": BUCKET,
        "default_rules": WatchSpec.from_json('[{"rule": "CPUBottleneck"}, {"rule": "LossNotDecreasing"}]'),
    }
    base.update(changes)
    return EvaluatorSettings(**base)


@dataclass
class Recorder:
    """A responder that records what it was asked to act on (the action path has its own tests)."""

    calls: list[tuple[str, list[Trigger]]] = field(default_factory=list)

    def __call__(self, job: str, triggers: Sequence[Trigger], *, deadline: Any = None,
                 description: Any = None) -> Mapping[str, Any]:
        self.calls.append((job, list(triggers)))
        return {"job": job, "acted": [t.rule for t in triggers]}

    def jobs(self) -> list[str]:
        return [job for job, _ in self.calls]


LEDGER = "smx-ledger"


def action_env(aws: LocalAws, **extra: str) -> dict[str, str]:
    """A ledger table, a topic with a queue subscribed (to read the messages) and the handlers' environment."""
    from smx_debug.local.server import LOCAL_ACCOUNT_ID

    local.install(aws)
    topic, queue = ledger_and_inbox(aws, LEDGER)
    return {
        "SMX_LEDGER_TABLE": LEDGER, "SMX_TOPIC_ARN": topic, "SMX_ACCOUNT": LOCAL_ACCOUNT_ID,
        "AWS_REGION": aws.region, "SMX_WATCH_PREFIXES": "guarded-", "SMX_DEFAULT_ACTIONS": "stop notify",
        "SMX_CURSOR_TABLE": TABLE, "SMX_SPEC_BUCKET": BUCKET,
        "SMX_DEFAULT_RULES": '[{"rule": "CPUBottleneck"}, {"rule": "LossNotDecreasing"}]',
        "SMX_INBOX": queue, **extra,
    }


def messages(aws: LocalAws, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The notifications published so far (SNS envelopes; ``Message`` is the text)."""
    return inbox(aws, env["SMX_INBOX"])


class WatchedJobsOnly:
    """A SageMaker client that refuses, as the evaluator role's policy does, ListTags, DescribeTrainingJob and
    StopTrainingJob on a job the deployment does not watch (no watched prefix, opt-in tag not ``true``):
    AccessDeniedException, HTTP 400, AWS's message. Every refusal is recorded in ``denied``.

    It stands in for the IAM enforcement the local AWS gains on the ``iam`` branch; the decision is the
    policy's (name prefix or ``aws:ResourceTag`` condition), read from the job's tags at call time.
    """

    ACTIONS = frozenset({"ListTags", "DescribeTrainingJob", "StopTrainingJob"})

    def __init__(self, aws: LocalAws, prefixes: Sequence[str] = ("guarded-",), tag_key: str = MANAGED_TAG) -> None:
        self.aws, self.prefixes, self.tag_key = aws, tuple(prefixes), tag_key
        self.denied: list[tuple[str, str]] = []
        self.client = aws.client("sagemaker")  # its own client: the hook must not reach the cached one
        self.client.meta.events.register("before-call.sagemaker.*", self._authorize)

    def _authorize(self, model: Any, params: Mapping[str, Any], **_: Any) -> Any:
        import json

        from botocore.awsrequest import AWSResponse

        if model.name not in self.ACTIONS:
            return None
        body = json.loads(params.get("body") or b"{}")
        name = body.get("TrainingJobName") or str(body.get("ResourceArn", "")).rsplit("/", 1)[-1]
        tags = {t["Key"]: t["Value"] for t in training_jobs.training_job(self.aws, name).tags}
        if is_watched(name, tags, self.prefixes, self.tag_key):
            return None
        self.denied.append((model.name, name))
        arn = f"arn:aws:sagemaker:{self.aws.region}:123456789012:training-job/{name.lower()}"
        message = (f"User: arn:aws:sts::123456789012:assumed-role/SmxDebugGuard-Evaluator/evaluator is not authorized "
                   f"to perform: sagemaker:{model.name} on resource: {arn} because no identity-based policy allows "
                   f"the sagemaker:{model.name} action")
        error = {"Error": {"Code": "AccessDeniedException", "Message": message},
                 "ResponseMetadata": {"HTTPStatusCode": 400}}
        return AWSResponse(self.aws.endpoint_url, 400, {}, None), error


def with_clients(aws: LocalAws, **changes: Any) -> Clients:
    """The local AWS's clients with some replaced (a client with fewer retries, or a refusing one)."""
    from dataclasses import replace

    return replace(clients(aws), **changes)


def tight(aws: LocalAws, service: str) -> Any:
    """A client of ``service`` that gives up after 2 attempts (a call throttled twice fails)."""
    from botocore.config import Config

    return aws.client(service, config=Config(retries={"mode": "standard", "total_max_attempts": 2}))



def end_job(aws: LocalAws, name: str, minute: float, status: str = "Stopped") -> None:
    """The job ends ``minute`` minutes after T0 (its status, TrainingEndTime and LastModifiedTime)."""
    local.set_training_job_status(aws, name, status)
    job_metrics.set_end_time(aws, name, datetime.fromtimestamp(at(minute), UTC))
