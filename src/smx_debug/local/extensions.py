"""Everything the embedded local AWS needs that moto 5 lacks, in one place.

moto runs in this process (``LocalAws`` starts a threaded server), so these extensions patch moto's
in-process backends and add what is missing:

- **StopTrainingJob**: moto has no such call. :func:`install` adds it to the server. A stop moves an
  ``InProgress`` job to ``Stopping`` at once; the first DescribeTrainingJob after that still shows
  ``Stopping`` and moves it on, so the next one shows ``Stopped`` (or call :func:`tick`). A stop of a job
  in any other status is a ``ValidationException``, as in SageMaker. Every call is counted:
  :func:`stop_calls`.
- **Profiler fields**: moto drops ``ProfilerConfig`` and ``ProfilerRuleConfigurations`` from
  CreateTrainingJob; they are kept and returned by DescribeTrainingJob (with ``ProfilingStatus``).
- **Job and rule statuses**: moto creates training jobs as ``Completed`` and has no rule evaluation
  statuses. :func:`set_training_job_status` and :func:`set_rule_statuses` set them as SageMaker would,
  and DescribeTrainingJob returns ``DebugRuleEvaluationStatuses`` / ``ProfilerRuleEvaluationStatuses``.
- **EventBridge -> Lambda**: moto cannot run Lambda code without Docker, and its TestEventPattern is a
  stub. :func:`state_change_event` builds the "SageMaker Training Job State Change" event from a job's
  description; :func:`deliver_event` matches it against the default bus's rules (with moto's own
  pattern matcher) and runs each Lambda target's ``lambdas/<dir>/handler.py`` in-process with the
  function's environment, pointed at the local server. The function names its directory with the tag
  ``smx-debug:handler`` (set by the infrastructure).
- **SNS -> Lambda**: publishing to a topic with a Lambda subscription runs the handler the same way.
- **Bucket policy conditions**: moto's S3 applies bucket-policy statements but ignores their
  ``Condition``, so the guard bucket's TLS-only statement (Deny when ``aws:SecureTransport`` is false)
  would deny every request. The local S3 evaluates the unconditional statements only; GetBucketPolicy
  still returns the policy exactly as deployed.
- **Alarm evaluation**: moto never evaluates alarms. :func:`evaluate_alarms` reads each alarm's metric,
  compares it with the threshold, sets the state and publishes CloudWatch's notification JSON to the
  alarm's SNS actions (moto delivers SNS to SQS).

Everything else is moto's own behaviour. This module needs moto, so it is not part of the Lambda assets.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import json
import os
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.local.server import LOCAL_ACCOUNT_ID, LocalAws

__all__ = [
    "HANDLER_TAG",
    "AlarmTransition",
    "Delivery",
    "deliver_event",
    "evaluate_alarms",
    "install",
    "invoke_handler",
    "reset_handlers",
    "rule_status",
    "set_rule_statuses",
    "set_training_job_status",
    "sns_lambda_deliveries",
    "state_change_event",
    "stop_calls",
    "tick",
]

HANDLER_TAG = "smx-debug:handler"
HANDLER_ORDER = ("rule_metrics", "stop_training", "notify", "retrain")
_TERMINAL_FROM_STOPPING = "Stopped"
_REGION_NAMES = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
}

_env_lock = threading.RLock()  # os.environ is process-wide: one in-process Lambda invocation at a time
_lock = threading.RLock()  # moto state we change; never held while a handler runs (the server needs it)
_installed = False
_active: LocalAws | None = None
_stop_counts: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_pending_stop: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_profiler_fields: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_sns_deliveries: list[Delivery] = []
_module_cache: dict[str, ModuleType] = {}
_client_cache: weakref.WeakKeyDictionary[LocalAws, dict[str, Any]] = weakref.WeakKeyDictionary()


def _client(aws: LocalAws, service: str) -> Any:
    # A boto3 session parses each service model from JSON (SageMaker's is large): build clients once.
    clients = _client_cache.setdefault(aws, {})
    if service not in clients:
        clients[service] = aws.client(service)
    return clients[service]


def reset_handlers() -> None:
    """Forget warm in-process handlers, so the next delivery is a cold start (call after ``aws.reset()``)."""
    with _env_lock:
        _module_cache.clear()


@dataclass(frozen=True)
class Delivery:
    """One in-process Lambda invocation: which function/handler ran and what it returned or raised."""

    function: str
    handler: str
    result: Any = None
    error: BaseException | None = None


@dataclass(frozen=True)
class AlarmTransition:
    alarm_name: str
    old_state: str
    new_state: str
    reason: str
    notified: tuple[str, ...]


# --- SageMaker ---------------------------------------------------------------------------------------


def _sagemaker_backend(aws: LocalAws) -> Any:
    from moto.sagemaker.models import sagemaker_backends

    return sagemaker_backends[LOCAL_ACCOUNT_ID][aws.region]


def _job(aws: LocalAws, name: str) -> Any:
    install(aws)
    try:
        return _sagemaker_backend(aws).training_jobs[name]
    except KeyError:
        raise NotFoundError(f"training job {name!r} does not exist in the local AWS") from None


def _now() -> datetime:
    return datetime.now(UTC)


def _transition(job: Any, status: str, secondary: str, message: str) -> None:
    now = _now()
    job.training_job_status = status
    job.secondary_status = secondary
    job.last_modified_time = now
    transitions = list(getattr(job, "secondary_status_transitions", None) or [])
    if transitions and transitions[-1].get("EndTime") is None:
        transitions[-1] = {**transitions[-1], "EndTime": now}
    transitions.append({"Status": secondary, "StartTime": now, "StatusMessage": message})
    job.secondary_status_transitions = transitions
    if status in ("Completed", "Failed", "Stopped"):
        job.training_end_time = now
    elif status == "InProgress":
        job.training_end_time = None


def _stop(backend: Any, name: str) -> None:
    from moto.sagemaker.exceptions import ValidationError

    job = backend.training_jobs.get(name)
    if job is None:
        raise ValidationError(message="Requested resource not found.")
    with _lock:
        _stop_counts[job] = _stop_counts.get(job, 0) + 1
        if job.training_job_status != "InProgress":
            raise ValidationError(
                message=f"The request was rejected because the training job is in status {job.training_job_status}."
            )
        _transition(job, "Stopping", "Stopping", "Stopping the training job")
        _pending_stop[job] = True


def _advance(job: Any) -> None:
    with _lock:
        if _pending_stop.pop(job, False) and job.training_job_status == "Stopping":
            _transition(job, _TERMINAL_FROM_STOPPING, "Stopped", "Training job stopped")


def install(aws: LocalAws | None = None) -> None:
    """Patch moto (once per process) and remember ``aws`` for SNS -> Lambda delivery. Idempotent."""
    global _installed, _active
    if aws is not None:
        _active = aws
    if _installed:
        return
    with _lock:
        if _installed:
            return
        from moto.awslambda.models import LambdaBackend
        from moto.core.responses import EmptyResult
        from moto.s3.models import FakeBucket
        from moto.sagemaker.models import SageMakerModelBackend
        from moto.sagemaker.responses import SageMakerResponse

        def stop_training_job(self: Any) -> Any:
            _stop(self.sagemaker_backend, self._get_param("TrainingJobName"))
            return EmptyResult()

        original_create = SageMakerResponse.create_training_job
        original_describe = SageMakerModelBackend.describe_training_job

        def create_training_job(self: Any) -> Any:
            result = original_create(self)
            # moto drops the profiler fields of the request; keep them as SageMaker does.
            job = self.sagemaker_backend.training_jobs.get(self._get_param("TrainingJobName"))
            if job is not None:
                _profiler_fields[job] = {
                    key: self._get_param(key)
                    for key in ("ProfilerConfig", "ProfilerRuleConfigurations")
                    if self._get_param(key) is not None
                }
            return result

        def describe_training_job(self: Any, training_job_name: str) -> dict[str, Any]:
            response: dict[str, Any] = dict(original_describe(self, training_job_name))
            job = self.training_jobs.get(training_job_name)
            if job is not None and _profiler_fields.get(job):
                response.update(copy.deepcopy(_profiler_fields[job]))
                response.setdefault("ProfilingStatus", "Enabled")
            if job is not None and _pending_stop.get(job):
                _advance(job)  # shown as Stopping this time, Stopped on the next describe
            return response

        def send_sns_message(
            self: Any,
            function_name: str,
            message: str,
            subject: str | None = None,
            qualifier: str | None = None,
        ) -> None:
            if _active is None:
                return
            _sns_deliveries.append(_deliver_sns(_active, function_name, message, subject))

        def get_permission(self: Any, action: str, resource: str) -> Any:
            from moto.iam.access_control import IAMPolicy, PermissionResult

            if self.policy is None:
                return PermissionResult.NEUTRAL
            document = json.loads(self.policy)
            statements = document.get("Statement", [])
            statements = [statements] if isinstance(statements, dict) else statements
            document["Statement"] = [st for st in statements if "Condition" not in st]
            return IAMPolicy(json.dumps(document)).is_action_permitted(action, resource)

        setattr(SageMakerResponse, "stop_training_job", stop_training_job)  # noqa: B010 (moto has no such call)
        setattr(FakeBucket, "get_permission", get_permission)  # noqa: B010
        setattr(SageMakerResponse, "create_training_job", create_training_job)  # noqa: B010
        setattr(SageMakerModelBackend, "describe_training_job", describe_training_job)  # noqa: B010
        setattr(LambdaBackend, "send_sns_message", send_sns_message)  # noqa: B010
        _installed = True


def stop_calls(aws: LocalAws, job: str) -> int:
    """How many StopTrainingJob calls the local server received for ``job`` (accepted or rejected)."""
    return _stop_counts.get(_job(aws, job), 0)


def tick(aws: LocalAws) -> list[str]:
    """Advance every Stopping job to Stopped; returns their names."""
    done: list[str] = []
    for name, job in list(_sagemaker_backend(aws).training_jobs.items()):
        if _pending_stop.get(job):
            _advance(job)
            done.append(name)
    return done


def set_training_job_status(
    aws: LocalAws, job: str, status: str, secondary_status: str | None = None
) -> None:
    """Set a job's TrainingJobStatus (and SecondaryStatus, by default the one SageMaker pairs with it)."""
    allowed = {
        "InProgress": "Training",
        "Completed": "Completed",
        "Failed": "Failed",
        "Stopping": "Stopping",
        "Stopped": "Stopped",
    }
    if status not in allowed:
        raise ConfigError(f"status: {status!r} is not one of {sorted(allowed)}", field="status", value=status)
    fake = _job(aws, job)
    with _lock:
        _pending_stop.pop(fake, None)
        _transition(
            fake, status, secondary_status or allowed[status], f"Set to {status} by smx-debug (local)"
        )


def rule_status(
    name: str, status: str, *, step: int | None = None, details: str | None = None, job_arn: str | None = None
) -> dict[str, Any]:
    """One rule evaluation status as SageMaker reports it; IssuesFound with ``step`` gets the real wording."""
    entry: dict[str, Any] = {"RuleConfigurationName": name, "RuleEvaluationStatus": status}
    if job_arn:
        entry["RuleEvaluationJobArn"] = job_arn
    if details is None and status == "IssuesFound" and step is not None:
        details = (
            f"RuleEvaluationConditionMet: Evaluation of the rule {name} at step {step} "
            "resulted in the condition being met\n"
        )
    if details is not None:
        entry["StatusDetails"] = details
    return entry


def _rule_job_arn(aws: LocalAws, job: str, rule: str) -> str:
    # SageMaker names rule jobs <first 26 chars of the job>-<rule lower>-<8 hex>.
    digest = hashlib.sha1(f"{job}/{rule}".encode()).hexdigest()[:8]
    return f"arn:aws:sagemaker:{aws.region}:{LOCAL_ACCOUNT_ID}:processing-job/{job[:26]}-{rule.lower()[:20]}-{digest}"


def _statuses(
    aws: LocalAws, job: str, given: Mapping[str, str] | Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    entries = (
        [rule_status(k, v) for k, v in given.items()]
        if isinstance(given, Mapping)
        else [dict(e) for e in given]
    )
    now = _now()
    out = []
    for entry in entries:
        name = entry.get("RuleConfigurationName")
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"rule status {entry!r}: RuleConfigurationName is required", field="debug", value=entry
            )
        entry.setdefault("RuleEvaluationJobArn", _rule_job_arn(aws, job, name))
        entry.setdefault("LastModifiedTime", now)
        out.append(entry)
    return out


def set_rule_statuses(
    aws: LocalAws,
    job: str,
    debug: Mapping[str, str] | Sequence[Mapping[str, Any]] | None = None,
    profiler: Mapping[str, str] | Sequence[Mapping[str, Any]] | None = None,
) -> None:
    """Set DebugRuleEvaluationStatuses / ProfilerRuleEvaluationStatuses (None keeps the current list).

    Entries are ``{rule: status}`` or dicts from :func:`rule_status`; the rule job ARN and
    LastModifiedTime are filled in as SageMaker would.
    """
    fake = _job(aws, job)
    with _lock:
        if debug is not None:
            fake.debug_rule_evaluation_statuses = _statuses(aws, job, debug)
        if profiler is not None:
            fake.profiler_rule_evaluation_statuses = _statuses(aws, job, profiler)
        fake.last_modified_time = _now()


def _epoch_ms(value: Any) -> Any:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, dict):
        return {k: _epoch_ms(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_epoch_ms(v) for v in value]
    return value


def state_change_event(aws: LocalAws, job: str, *, include_tags: bool = True) -> dict[str, Any]:
    """The EventBridge event SageMaker would emit now for ``job`` (detail = its description, epoch ms)."""
    install(aws)
    sagemaker = _client(aws, "sagemaker")
    detail = sagemaker.describe_training_job(TrainingJobName=job)
    detail.pop("ResponseMetadata", None)
    detail = _epoch_ms(detail)
    if include_tags:
        tags: dict[str, str] = {}
        for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=detail["TrainingJobArn"]):
            tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
        detail["Tags"] = tags
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "SageMaker Training Job State Change",
        "source": "aws.sagemaker",
        "account": LOCAL_ACCOUNT_ID,
        "time": _now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": aws.region,
        "resources": [detail["TrainingJobArn"]],
        "detail": detail,
    }


# --- in-process Lambda -------------------------------------------------------------------------------


def _lambdas_dir(given: Path | None) -> Path:
    if given is not None:
        return given
    candidates = [Path.cwd(), *Path.cwd().parents, *Path(__file__).resolve().parents]
    for base in candidates:
        if (base / "lambdas").is_dir():
            return base / "lambdas"
    raise NotFoundError("no lambdas/ directory found above the working directory; pass lambdas_dir=")


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _load(handler_dir: Path, cache_key: str) -> ModuleType:
    module = _module_cache.get(cache_key)
    if module is None:
        path = handler_dir / "handler.py"
        if not path.is_file():
            raise NotFoundError(f"handler {str(path)!r} does not exist")
        name = f"_smx_lambda_{hashlib.sha1(cache_key.encode()).hexdigest()[:12]}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise NotFoundError(f"handler {str(path)!r} cannot be loaded")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _module_cache[cache_key] = module
    return module


def invoke_handler(
    aws: LocalAws,
    handler: str,
    event: Any,
    environment: Mapping[str, str] | None = None,
    *,
    function_name: str | None = None,
    lambdas_dir: Path | None = None,
) -> Delivery:
    """Run ``lambdas/<handler>/handler.py`` in-process as Lambda would, with ``environment`` and clients
    pointed at the local server. A module is reused while the function's environment is unchanged
    (a warm container); exceptions are captured in the Delivery, as Lambda captures them."""
    env = {**dict(environment or {}), **aws.environ(), "AWS_LAMBDA_FUNCTION_NAME": function_name or handler}
    key = json.dumps([handler, function_name, sorted(env.items())])
    with _env_lock, _environment(env):
        try:
            module = _load(_lambdas_dir(lambdas_dir) / handler, key)
            result = module.handler(copy.deepcopy(event), None)
        except Exception as exc:
            return Delivery(function=function_name or handler, handler=handler, error=exc)
    return Delivery(function=function_name or handler, handler=handler, result=result)


def _function(aws: LocalAws, arn: str) -> tuple[str, str | None, dict[str, str]]:
    response = _client(aws, "lambda").get_function(FunctionName=arn)
    config = response["Configuration"]
    env = (config.get("Environment") or {}).get("Variables") or {}
    return config["FunctionName"], (response.get("Tags") or {}).get(HANDLER_TAG), dict(env)


def _order(name: str) -> int:
    return HANDLER_ORDER.index(name) if name in HANDLER_ORDER else len(HANDLER_ORDER)


def deliver_event(
    aws: LocalAws,
    event: Mapping[str, Any],
    handlers: Mapping[str, Callable[[Any, Any], Any] | Mapping[str, str]] | None = None,
    *,
    lambdas_dir: Path | None = None,
) -> list[Delivery]:
    """Deliver ``event`` the way EventBridge would, running Lambda targets in-process.

    With ``handlers`` (no deployed functions, e.g. unit-style tests) each entry runs in turn:
    ``{"stop_training": {"SMX_WATCH_PREFIXES": "demo-"}}`` loads ``lambdas/stop_training/handler.py``
    with that environment; a callable is called as ``fn(event, None)``. Without it, every enabled rule
    on the default bus whose pattern matches is followed to its Lambda targets; functions without the
    ``smx-debug:handler`` tag are skipped. Deliveries run in the order metrics, stop, notify, retrain.
    """
    install(aws)
    deliveries: list[Delivery] = []
    if handlers is not None:
        for name in sorted(handlers, key=_order):
            target = handlers[name]
            if callable(target):
                try:
                    deliveries.append(Delivery(name, name, result=target(copy.deepcopy(dict(event)), None)))
                except Exception as exc:
                    deliveries.append(Delivery(name, name, error=exc))
            else:
                deliveries.append(invoke_handler(aws, name, event, target, lambdas_dir=lambdas_dir))
        return deliveries

    from moto.events.models import EventPattern, EventPatternParser

    events = _client(aws, "events")
    plan: list[tuple[str, str, dict[str, str], Any]] = []
    for page in events.get_paginator("list_rules").paginate(EventBusName="default"):
        for rule in page.get("Rules", []):
            if rule.get("State") != "ENABLED" or not rule.get("EventPattern"):
                continue
            pattern = EventPattern(rule["EventPattern"], EventPatternParser(rule["EventPattern"]).parse())
            if not pattern.matches_event(json.loads(json.dumps(event, default=str))):
                continue
            for target in events.list_targets_by_rule(Rule=rule["Name"], EventBusName="default")["Targets"]:
                if ":lambda:" not in target["Arn"]:
                    continue
                function, handler, env = _function(aws, target["Arn"])
                if handler is None:
                    continue
                payload = json.loads(target["Input"]) if target.get("Input") else event
                plan.append((function, handler, env, payload))
    for function, handler, env, payload in sorted(plan, key=lambda p: (_order(p[1]), p[0])):
        deliveries.append(
            invoke_handler(aws, handler, payload, env, function_name=function, lambdas_dir=lambdas_dir)
        )
    return deliveries


def _deliver_sns(aws: LocalAws, function_arn_or_name: str, message: str, subject: str | None) -> Delivery:
    try:
        function, handler, env = _function(aws, function_arn_or_name)
    except Exception as exc:
        return Delivery(function=function_arn_or_name, handler="", error=exc)
    if handler is None:
        return Delivery(
            function=function,
            handler="",
            error=NotFoundError(f"function {function!r} has no {HANDLER_TAG} tag"),
        )
    record = {
        "EventSource": "aws:sns",
        "EventVersion": "1.0",
        "Sns": {
            "Type": "Notification",
            "MessageId": str(uuid.uuid4()),
            "Subject": subject,
            "Message": message,
            "Timestamp": _now().strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        },
    }
    # moto calls this from the server thread while the publisher waits; run the handler on our own thread
    # so its calls back into the server are served.
    box: list[Delivery] = []
    worker = threading.Thread(
        target=lambda: box.append(
            invoke_handler(aws, handler, {"Records": [record]}, env, function_name=function)
        )
    )
    worker.start()
    worker.join(timeout=60)
    return (
        box[0]
        if box
        else Delivery(function=function, handler=handler, error=TimeoutError("handler did not finish"))
    )


def sns_lambda_deliveries() -> list[Delivery]:
    """SNS -> Lambda deliveries made so far (and clears the list)."""
    out = list(_sns_deliveries)
    _sns_deliveries.clear()
    return out


# --- CloudWatch alarms -------------------------------------------------------------------------------

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "GreaterThanThreshold": lambda v, t: v > t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}


def _alarm_message(
    aws: LocalAws, alarm: Mapping[str, Any], old: str, new: str, reason: str, when: datetime
) -> str:
    return json.dumps(
        {
            "AlarmName": alarm["AlarmName"],
            "AlarmDescription": alarm.get("AlarmDescription"),
            "AWSAccountId": LOCAL_ACCOUNT_ID,
            "NewStateValue": new,
            "NewStateReason": reason,
            "StateChangeTime": when.strftime("%Y-%m-%dT%H:%M:%S.000+0000"),
            "Region": _REGION_NAMES.get(aws.region, aws.region),
            "AlarmArn": alarm.get("AlarmArn"),
            "OldStateValue": old,
            "OKActions": alarm.get("OKActions", []),
            "AlarmActions": alarm.get("AlarmActions", []),
            "InsufficientDataActions": alarm.get("InsufficientDataActions", []),
            "Trigger": {
                "MetricName": alarm.get("MetricName"),
                "Namespace": alarm.get("Namespace"),
                "StatisticType": "Statistic",
                "Statistic": str(alarm.get("Statistic", "")).upper(),
                "Unit": None,
                "Dimensions": [{"value": d["Value"], "name": d["Name"]} for d in alarm.get("Dimensions", [])],
                "Period": alarm.get("Period"),
                "EvaluationPeriods": alarm.get("EvaluationPeriods"),
                "ComparisonOperator": alarm.get("ComparisonOperator"),
                "Threshold": alarm.get("Threshold"),
                "TreatMissingData": alarm.get("TreatMissingData", "missing"),
            },
        }
    )


def evaluate_alarms(aws: LocalAws, now: datetime | None = None) -> list[AlarmTransition]:
    """Evaluate every metric alarm once, as CloudWatch would, and notify its SNS actions on a change.

    Simplified: the window is Period x EvaluationPeriods ending ``now``; the alarm is in ALARM if at
    least DatapointsToAlarm (default EvaluationPeriods... capped at the datapoints present, minimum 1)
    datapoints breach. Only single-metric alarms with a Statistic are evaluated.
    """
    install(aws)
    now = now or _now()
    cloudwatch, sns = _client(aws, "cloudwatch"), _client(aws, "sns")
    transitions: list[AlarmTransition] = []
    for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmTypes=["MetricAlarm"]):
        for alarm in page.get("MetricAlarms", []):
            if not alarm.get("Statistic") or alarm.get("ComparisonOperator") not in _COMPARE:
                continue
            period, periods = int(alarm["Period"]), int(alarm["EvaluationPeriods"])
            points = cloudwatch.get_metric_statistics(
                Namespace=alarm["Namespace"],
                MetricName=alarm["MetricName"],
                Dimensions=alarm.get("Dimensions", []),
                StartTime=now - timedelta(seconds=period * periods),
                EndTime=now + timedelta(seconds=1),
                Period=period,
                Statistics=[alarm["Statistic"]],
            )["Datapoints"]
            values = [float(p[alarm["Statistic"]]) for p in points]
            compare = _COMPARE[alarm["ComparisonOperator"]]
            breaching = [v for v in values if compare(v, float(alarm["Threshold"]))]
            needed = min(int(alarm.get("DatapointsToAlarm") or periods), max(len(values), 1))
            if not values:
                treat = alarm.get("TreatMissingData", "missing")
                new = {"breaching": "ALARM", "notBreaching": "OK"}.get(treat, "INSUFFICIENT_DATA")
                reason = f"no datapoints in the last {period * periods} s (TreatMissingData={treat})"
            elif len(breaching) >= needed:
                new = "ALARM"
                reason = (
                    f"Threshold Crossed: {len(breaching)} datapoint(s) {breaching[:5]} "
                    f"{alarm['ComparisonOperator']} {alarm['Threshold']}"
                )
            else:
                new = "OK"
                reason = f"Threshold not crossed: datapoints {values[:5]}"
            old = alarm.get("StateValue", "INSUFFICIENT_DATA")
            if new == old:
                continue
            cloudwatch.set_alarm_state(
                AlarmName=alarm["AlarmName"], StateValue=new, StateReason=reason[:1000]
            )
            notified: list[str] = []
            if alarm.get("ActionsEnabled", True):
                actions = {"ALARM": "AlarmActions", "OK": "OKActions"}.get(new, "InsufficientDataActions")
                message = _alarm_message(aws, alarm, old, new, reason, now)
                subject = f'{new}: "{alarm["AlarmName"]}" in {_REGION_NAMES.get(aws.region, aws.region)}'[
                    :100
                ]
                for arn in alarm.get(actions, []):
                    if ":sns:" in arn:
                        sns.publish(TopicArn=arn, Subject=subject, Message=message)
                        notified.append(arn)
            transitions.append(AlarmTransition(alarm["AlarmName"], old, new, reason, tuple(notified)))
    return transitions
