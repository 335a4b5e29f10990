"""Fakes of the few AWS calls the handlers make, for pure unit tests (no network, no moto).

``FakeSageMaker`` is SageMaker's view of the jobs: by default the job of the sample IssuesFound event
(``tests/events/sagemaker_state_change_issues_found.json``), with that event's tags and rule statuses. Tests
that forge an event change the event, not the fake, so the handler must believe the fake.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import botocore.session
from botocore.exceptions import ClientError

from smx_debug.actions import MemoryLedger, Runtime, Settings

EVENTS = Path(__file__).resolve().parents[2] / "events"
SAMPLE = json.loads((EVENTS / "sagemaker_state_change_issues_found.json").read_text())
JOB = SAMPLE["detail"]["TrainingJobName"]
ACCOUNT, REGION = SAMPLE["account"], SAMPLE["region"]
TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:t"
_MODEL: Any = None


def _validation(operation: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": "ValidationException", "Message": message}}, operation)


class FakeSageMaker:
    """Jobs by name: DescribeTrainingJob, ListTags (by ARN), StopTrainingJob, CreateTrainingJob; ``stopped`` and
    ``created`` record stops and creates."""

    def __init__(
        self,
        status: str = "InProgress",
        tags: dict[str, str] | None = None,
        rules: list[dict[str, Any]] | None = None,
    ) -> None:
        detail = copy.deepcopy(SAMPLE["detail"])
        sample_tags = detail.pop("Tags")
        detail["TrainingJobStatus"] = status
        if rules is not None:
            detail["DebugRuleEvaluationStatuses"] = rules
        self.jobs: dict[str, dict[str, Any]] = {JOB: detail}
        self.tags: dict[str, dict[str, str]] = {detail["TrainingJobArn"]: sample_tags if tags is None else tags}
        self.stopped: list[str] = []
        self.created: list[dict[str, Any]] = []
        self.calls: list[str] = []

    @property
    def meta(self) -> Any:
        """botocore's own SageMaker model (what a real client's ``meta`` carries)."""
        global _MODEL
        if _MODEL is None:
            _MODEL = botocore.session.get_session().get_service_model("sagemaker")
        return SimpleNamespace(service_model=_MODEL)

    @property
    def status(self) -> str:
        return str(self.jobs[JOB]["TrainingJobStatus"])

    @status.setter
    def status(self, value: str) -> None:
        self.jobs[JOB]["TrainingJobStatus"] = value

    def add_job(self, name: str, tags: dict[str, str], status: str = "InProgress", **fields: Any) -> str:
        arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name.lower()}"
        detail = {**copy.deepcopy(self.jobs[JOB]), "TrainingJobName": name, "TrainingJobArn": arn}
        detail.update(TrainingJobStatus=status, **fields)
        self.jobs[name], self.tags[arn] = detail, tags
        return arn

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        self.calls.append("DescribeTrainingJob")
        if TrainingJobName not in self.jobs:
            raise _validation("DescribeTrainingJob", "Requested resource not found.")
        return copy.deepcopy(self.jobs[TrainingJobName])

    def stop_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        self.calls.append("StopTrainingJob")
        job = self.jobs[TrainingJobName]
        if job["TrainingJobStatus"] != "InProgress":
            raise _validation("StopTrainingJob", "not InProgress")
        self.stopped.append(TrainingJobName)
        job["TrainingJobStatus"] = "Stopping"
        return {}

    def create_training_job(self, **request: Any) -> dict[str, Any]:
        """Records the request; a name already used is ResourceInUse, as SageMaker answers."""
        self.calls.append("CreateTrainingJob")
        name = request["TrainingJobName"]
        if name in self.jobs:
            raise ClientError({"Error": {"Code": "ResourceInUse", "Message": f"{name} exists"}}, "CreateTrainingJob")
        self.created.append(request)
        self.add_job(name, {t["Key"]: t["Value"] for t in request.get("Tags", [])})
        return {"TrainingJobArn": self.jobs[name]["TrainingJobArn"]}

    def get_paginator(self, name: str) -> Any:
        assert name == "list_tags"
        fake = self

        class _Pages:
            def paginate(self, ResourceArn: str) -> list[dict[str, Any]]:
                fake.calls.append("ListTags")
                tags = fake.tags.get(ResourceArn, {})
                return [{"Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]

        return _Pages()


class FakeSns:
    def __init__(self, refuse: tuple[str, ...] = ()) -> None:
        self.published: list[dict[str, str]] = []
        self.refuse = refuse

    def publish(self, **kwargs: str) -> dict[str, str]:
        if kwargs["TopicArn"] in self.refuse:
            raise ClientError(
                {"Error": {"Code": "AuthorizationError", "Message": "not authorized to perform: SNS:Publish"}},
                "Publish",
            )
        self.published.append(kwargs)
        return {"MessageId": f"m-{len(self.published)}"}


class FakeCloudWatch:
    def __init__(self) -> None:
        self.data: list[dict[str, Any]] = []

    def put_metric_data(self, Namespace: str, MetricData: list[dict[str, Any]]) -> dict[str, Any]:
        self.data.append({"Namespace": Namespace, "MetricData": MetricData})
        return {}


class FakeStates:
    def __init__(self) -> None:
        self.started: dict[str, dict[str, Any]] = {}

    def start_execution(self, stateMachineArn: str, name: str, input: str) -> dict[str, Any]:
        if name in self.started and self.started[name]["input"] != input:
            raise ClientError({"Error": {"Code": "ExecutionAlreadyExists", "Message": name}}, "StartExecution")
        self.started[name] = {"stateMachineArn": stateMachineArn, "input": input}
        return {"executionArn": f"{stateMachineArn.replace(':stateMachine:', ':execution:')}:{name}"}


def settings(**overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "region": REGION,
        "account": ACCOUNT,
        "topic_arn": TOPIC,
        "watch_prefixes": ("smdebugger-",),
        "state_machine_arn": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:smx-retrain",
    }
    return Settings(**{**base, **overrides})


def fake_runtime(settings_: Settings | None = None, ledger: Any = None, **clients: Any) -> Runtime:
    made = {
        "sagemaker": FakeSageMaker(),
        "sns": FakeSns(),
        "cloudwatch": FakeCloudWatch(),
        "stepfunctions": FakeStates(),
        **clients,
    }
    return Runtime(settings=settings_ or settings(), clients=made.__getitem__, ledger=ledger or MemoryLedger())
