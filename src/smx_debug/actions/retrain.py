"""The retraining workflow (Debugger + Step Functions): ``train``, ``monitor`` and ``end`` steps over a state document.

The published case is a very deep ResNet with ELU whose tensors explode: each run that a Debugger rule
flags is stopped and the next run is planned by an ordered list of strategies (by default: halve the
warmup learning rate while it stays above a floor, then add batch normalisation, then scale the
learning rate down, else end), within a retraining budget.

State document (JSON, the Step Functions payload)::

    {"run_spec": {"job_name_prefix", "request": <CreateTrainingJob template>, "hyperparameters": {...},
                  "strategies": [...], "max_retraining": 10, "rules": null, "topic_arn": null},
     "history": {"run_id", "num_retraining", "num_warmup_adjustments", "num_batch_layer_adjustments",
                 "num_learning_rate_adjustments", "num_errors", "latest_job_name", "jobs": [...]},
     "next_action": "launch_new" | "monitor" | "end", "job_status": str | None, "error": {...} | None}

``request`` is a CreateTrainingJob request already rendered by ``DebugPlan.to_request_dict`` (so this
module needs no pydantic); ``train`` sets the job name and the hyperparameters the strategies change.
The ``retrain`` rule action builds the run spec from the flagged job itself (:func:`run_spec_from_job`,
``after_job`` names it) and ``init`` then plans the first change straight away.

Expected failures (a bad run spec, an AWS error) land in ``error`` and the state tells the next step what
to do; anything else (a bug) raises, and the state machine's catch publishes it. ``end`` always publishes
the final message (finished, budget used up, no strategy left, history budget, failure), so the loop ends
with a notification whichever way it ends. Monitor polls are capped so that one execution cannot outrun
Step Functions' 25,000-event history (:func:`smx_debug.contracts.retrain_max_polls`). Messages name
hyperparameters but show values only for the deployment's ``SMX_SHOW_KEYS``.
Imports only boto3 and the standard library.
"""

from __future__ import annotations

import copy
import fnmatch
import logging
import math
import re
import time
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError
from botocore.validate import ParamValidator

from smx_debug.actions.events import rule_statuses_from_description
from smx_debug.actions.notify import safe_subject, shown_values
from smx_debug.actions.once import ClaimInProgressError, describe_status, stop_once
from smx_debug.actions.runtime import Deadline, Runtime, log_json
from smx_debug.contracts import (
    DEFAULT_RETRAIN_WAIT_SECONDS,
    ISSUES_FOUND,
    JOB_IN_PROGRESS,
    JOB_STOPPING,
    RETRAIN_RUN_TAG,
    RULE_FIELDS,
    RULE_KINDS,
    SFN_HISTORY_LIMIT,
    retrain_history_events,
    retrain_max_polls,
)
from smx_debug.errors import OutOfTimeError
from smx_debug.tags import MAX_TAGS

if TYPE_CHECKING:
    from smx_debug.actions.verify import Trigger, VerifiedJob


# The handler's answer in ``$.next_action``, where the state machine goes next; and the steps it is asked for
# (``{"step": ...}``). One owner: infra/components/retraining.py builds its states and choices from these.
LAUNCH_NEW, MONITOR, END = NEXT_ACTIONS = ("launch_new", "monitor", "end")
STEP_INIT, STEP_TRAIN, STEP_MONITOR, STEP_END = STEPS = ("init", "train", "monitor", "end")
# The hyperparameters the strategies change: they travel in run_spec.hyperparameters, so they are never redacted.
STRATEGY_KEYS = ("warmup_learning_rate", "learning_rate", "add_batch_norm")
# The value a redacted hyperparameter or environment variable has in the run spec (SMX_REDACT_KEYS).
REDACTED = "(redacted by smx-debug: read from the flagged job at launch)"
_REDACTABLE = ("HyperParameters", "Environment")
DEFAULT_STRATEGIES: tuple[dict[str, Any], ...] = (
    {"name": "halve_warmup", "floor": 0.005},
    {"name": "add_batch_norm"},
    {"name": "scale_learning_rate", "factor": 0.5, "floor": 1e-5},
)
_STRATEGY_NAMES = {"halve_warmup", "add_batch_norm", "scale_learning_rate"}
_COUNTERS = {
    "halve_warmup": "num_warmup_adjustments",
    "add_batch_norm": "num_batch_layer_adjustments",
    "scale_learning_rate": "num_learning_rate_adjustments",
}
DEFAULT_MAX_RETRAINING = 10
MAX_RETRAINING = 100  # the deployment's retraining.max_retraining allows 1-100: a run number has at most 3 digits
MAX_ERRORS = 3
JOB_NAME_MAX = 63  # SageMaker's TrainingJobName
_RUN_ID_LENGTH = 10  # init's run id: mmddHHMMSS
# A run is named <job_name_prefix>-<run id>-<run number>: the suffix takes at most 1 + 10 + 1 + 3 = 15 characters,
# which leaves 48 for the prefix, kept whole. The retrain action's prefix is the flagged job's name cut to this
# length, so a watched name prefix of at most this many characters survives in every run's name (the IAM policies
# and the EventBridge pattern are built from it); the deployment's config refuses longer ones with retraining on.
RETRAIN_PREFIX_MAX = JOB_NAME_MAX - len(f"-{'0' * _RUN_ID_LENGTH}-{MAX_RETRAINING}")
_NOT_NAME = re.compile(r"[^A-Za-z0-9-]+")
_QUOTED_VALUE = re.compile(r"(value: ).*?(, type: )", re.DOTALL)
_NOT_RETRYABLE = {"ValidationException", "ResourceLimitExceeded", "AccessDeniedException"}


class RetrainSpecError(ValueError):
    """Raised when the run spec or state document cannot drive the workflow (reported in ``error``)."""


def _number(hyper: Mapping[str, Any], key: str, default: float) -> float:
    value = hyper.get(key, default)
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        raise RetrainSpecError(f"run_spec.hyperparameters.{key}: {str(value)[:40]!r} is not a number") from None
    if not math.isfinite(out) or out < 0:
        raise RetrainSpecError(f"run_spec.hyperparameters.{key}: {value!r} must be a finite number >= 0")
    return out


def plan_next(
    hyperparameters: Mapping[str, Any], strategies: list[Mapping[str, Any]]
) -> tuple[str, dict[str, Any]] | None:
    """The first strategy that still applies and the hyperparameters it produces; None: nothing left."""
    hyper = dict(hyperparameters)
    for strategy in strategies:
        name = strategy.get("name")
        if name == "halve_warmup":
            warmup = _number(hyper, "warmup_learning_rate", 0.0)
            if warmup > float(strategy.get("floor", 0.005)):
                return name, {**hyper, "warmup_learning_rate": warmup / 2}
        elif name == "add_batch_norm":
            if not int(_number(hyper, "add_batch_norm", 0)):
                return name, {**hyper, "add_batch_norm": 1}
        elif name == "scale_learning_rate":
            lr = _number(hyper, "learning_rate", 0.0)
            scaled = lr * float(strategy.get("factor", 0.5))
            if scaled >= float(strategy.get("floor", 1e-5)):
                return name, {**hyper, "learning_rate": scaled}
    return None


def _check_spec(run_spec: object) -> dict[str, Any]:
    if not isinstance(run_spec, Mapping):
        raise RetrainSpecError(f"run_spec: expected an object, got {type(run_spec).__name__}")
    spec = dict(run_spec)
    if not isinstance(spec.get("request"), Mapping):
        raise RetrainSpecError(
            "run_spec.request: a CreateTrainingJob request (DebugPlan.to_request_dict) is required"
        )
    prefix = spec.get("job_name_prefix") or spec["request"].get("TrainingJobName") or "smx-retrain"
    if not isinstance(prefix, str):
        raise RetrainSpecError(f"run_spec.job_name_prefix: {prefix!r} is not a string")
    # Only leading dashes go: a trailing one may belong to a watched prefix ("team--"), and a suffix follows it.
    spec["job_name_prefix"] = _NOT_NAME.sub("-", prefix).lstrip("-")[:RETRAIN_PREFIX_MAX] or "smx-retrain"
    hyper = spec.get("hyperparameters", {})
    if not isinstance(hyper, Mapping):
        raise RetrainSpecError(f"run_spec.hyperparameters: expected an object, got {type(hyper).__name__}")
    for key in STRATEGY_KEYS:
        if key in hyper:
            _number(hyper, key, 0.0)
    spec["hyperparameters"] = dict(hyper)
    strategies = spec.get("strategies")
    if strategies is None:
        strategies = [dict(s) for s in DEFAULT_STRATEGIES]
    if not isinstance(strategies, list) or not all(
        isinstance(s, Mapping) and isinstance(s.get("name"), str) and s["name"] in _STRATEGY_NAMES
        for s in strategies
    ):
        raise RetrainSpecError(
            f"run_spec.strategies: {strategies!r} must be a list of objects named one of {sorted(_STRATEGY_NAMES)}"
        )
    for i, strategy in enumerate(strategies):
        for key in ("floor", "factor"):
            if key in strategy:
                _number(strategy, key, 0.0)  # raises naming the key
                if isinstance(strategy[key], bool):
                    raise RetrainSpecError(
                        f"run_spec.strategies[{i}].{key}: {strategy[key]!r} is not a number"
                    )
    spec["strategies"] = [dict(s) for s in strategies]
    budget = spec.get("max_retraining", DEFAULT_MAX_RETRAINING)
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_RETRAINING:
        raise RetrainSpecError(f"run_spec.max_retraining: {budget!r} must be an integer from 1 to {MAX_RETRAINING}")
    spec["max_retraining"] = budget
    rules = spec.get("rules")
    if rules is not None and not (isinstance(rules, list) and all(isinstance(r, str) for r in rules)):
        raise RetrainSpecError(f"run_spec.rules: {rules!r} must be a list of rule configuration names")
    types = spec.get("instance_types")
    if types is not None and not (isinstance(types, list) and all(isinstance(t, str) for t in types)):
        raise RetrainSpecError(f"run_spec.instance_types: {str(types)[:200]!r} must be a list of instance types")
    _check_history_budget(spec)
    return spec


def _int_field(spec: Mapping[str, Any], key: str, default: int, low: int) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise RetrainSpecError(f"run_spec.{key}: {value!r} must be an integer >= {low}")
    return value


def _check_history_budget(spec: dict[str, Any]) -> None:
    """Cap monitor polls so that one execution stays inside Step Functions' history limit."""
    cap = retrain_max_polls(spec["max_retraining"])
    if cap < 1:
        raise RetrainSpecError(
            f"run_spec.max_retraining: {spec['max_retraining']} runs leave no room for monitoring within "
            f"{SFN_HISTORY_LIMIT} history events"
        )
    wait = _int_field(spec, "wait_seconds", DEFAULT_RETRAIN_WAIT_SECONDS, 1)
    if "max_runtime_seconds" in spec:
        runtime = _int_field(spec, "max_runtime_seconds", 1, 1)
        events = retrain_history_events(
            wait_seconds=wait, max_runtime_seconds=runtime, max_retraining=spec["max_retraining"]
        )
        if events > SFN_HISTORY_LIMIT:
            raise RetrainSpecError(
                f"run_spec.wait_seconds: polling every {wait} s for {runtime} s (max_runtime_seconds) with "
                f"{spec['max_retraining']} runs needs {events} history events; Step Functions allows "
                f"{SFN_HISTORY_LIMIT}: raise wait_seconds or lower max_runtime_seconds"
            )
    polls = _int_field(spec, "max_polls", cap, 1)
    if polls > cap:
        raise RetrainSpecError(
            f"run_spec.max_polls: {polls} polls would outrun Step Functions' {SFN_HISTORY_LIMIT}-event history "
            f"with {spec['max_retraining']} runs (at most {cap})"
        )
    spec["wait_seconds"], spec["max_polls"] = wait, polls


_HISTORY_COUNTERS = ("num_retraining", *_COUNTERS.values(), "num_errors", "num_polls")
_RUN_ID = re.compile(r"[A-Za-z0-9-]{1,20}")


def _check_history(raw: object) -> dict[str, Any]:
    """The ``history`` of a state document from ``init`` (counters, run id, runs); RetrainSpecError naming the
    first field that is not what ``init`` and the steps write."""
    if not isinstance(raw, Mapping):
        raise RetrainSpecError(f"state.history: expected an object from init, got {type(raw).__name__}")
    history = dict(raw)
    for key in _HISTORY_COUNTERS:
        value = history.setdefault(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000_000:
            raise RetrainSpecError(f"state.history.{key}: {str(value)[:40]!r} is not a count")
    run_id = history.get("run_id")
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise RetrainSpecError(f"state.history.run_id: {str(run_id)[:40]!r} is not a run id from init")
    latest = history.setdefault("latest_job_name", None)
    if latest is not None and not isinstance(latest, str):
        raise RetrainSpecError(f"state.history.latest_job_name: {str(latest)[:40]!r} is not a job name")
    jobs = history.setdefault("jobs", [])
    if not isinstance(jobs, list) or not all(isinstance(j, Mapping) for j in jobs):
        raise RetrainSpecError("state.history.jobs: expected a list of runs")
    return history


def init_state(run_spec: object, clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """A fresh state document (raises RetrainSpecError on a bad run spec).

    With ``run_spec.after_job`` (the flagged job the ``retrain`` action started from) the first strategy is
    applied at once, since that job already ran with the spec's hyperparameters.
    """
    spec = _check_spec(run_spec)
    history: dict[str, Any] = {
        "run_id": time.strftime("%m%d%H%M%S", time.gmtime(clock())),
        "num_retraining": 0,
        "num_warmup_adjustments": 0,
        "num_batch_layer_adjustments": 0,
        "num_learning_rate_adjustments": 0,
        "num_errors": 0,
        "num_polls": 0,
        "latest_job_name": None,
        "jobs": [],
    }
    state: dict[str, Any] = {
        "run_spec": spec,
        "history": history,
        "next_action": LAUNCH_NEW,
        "job_status": None,
        "error": None,
    }
    after = spec.get("after_job")
    if isinstance(after, Mapping) and isinstance(after.get("job_name"), str):
        history["jobs"].append(
            {
                "job_name": after["job_name"],
                "rule": after.get("rule"),
                "step": after.get("step"),
                "outcome": "flagged",
            }
        )
        planned = plan_next(spec["hyperparameters"], spec["strategies"])
        if planned is None:
            state.update(next_action=END, end_reason="no strategy left")
        else:
            name, new_hyper = planned
            spec["hyperparameters"] = new_hyper
            history[_COUNTERS[name]] += 1
    return state


def _hyper_str(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return repr(value) if isinstance(value, float) else str(value)


def validate_request(request: Mapping[str, Any], sagemaker: Any) -> None:
    """Check a CreateTrainingJob request against botocore's shape; raises ParamValidationError."""
    shape = sagemaker.meta.service_model.operation_model("CreateTrainingJob").input_shape
    report = ParamValidator().validate(dict(request), shape)
    if report.has_errors():
        raise ParamValidationError(report=report.generate_report())


# Debugger's built-in StopTraining action names its job in RuleParameters.action_json (escaped JSON text).
_ACTION_PREFIX = re.compile(r'(training_job_prefix\\*"\s*:\s*\\*")([A-Za-z0-9-]*)')


def _retarget_rules(request: dict[str, Any], job_name: str) -> None:
    """Point built-in stop_training actions at the new run, or the rule container would stop the old one."""
    for kind in RULE_KINDS:
        rules = request.get(RULE_FIELDS[kind][1])
        for rule in rules if isinstance(rules, list) else []:  # anything else fails botocore's validation
            params = rule.get("RuleParameters") if isinstance(rule, dict) else None
            if isinstance(params, dict) and isinstance(params.get("action_json"), str):
                params["action_json"] = _ACTION_PREFIX.sub(
                    lambda m: m.group(1) + job_name, params["action_json"]
                )


def _owned_tags(tags: object, workflow_run: str) -> list[dict[str, str]]:
    """The request's tags (the flagged job's: opt-in, rule actions, the user's own) plus
    :data:`~smx_debug.contracts.RETRAIN_RUN_TAG`, so the ``retrain`` action leaves the run to this execution."""
    kept = [
        {"Key": str(t["Key"]), "Value": str(t.get("Value", ""))}
        for t in (tags if isinstance(tags, list) else [])
        if isinstance(t, Mapping) and "Key" in t and t["Key"] != RETRAIN_RUN_TAG
    ]
    if len(kept) >= MAX_TAGS:
        raise RetrainSpecError(
            f"run_spec.request.Tags: {len(kept)} tags leave no room for {RETRAIN_RUN_TAG} "
            f"(SageMaker allows {MAX_TAGS} per job)"
        )
    return [*kept, {"Key": RETRAIN_RUN_TAG, "Value": workflow_run}]


def _instance_types(request: Mapping[str, Any]) -> list[str]:
    """The instance types a CreateTrainingJob request asks for (``sagemaker:InstanceTypes``: every group's)."""
    resources = request.get("ResourceConfig")
    resources = resources if isinstance(resources, Mapping) else {}
    groups = resources.get("InstanceGroups")
    found = [resources.get("InstanceType"), *[g.get("InstanceType") for g in groups if isinstance(g, Mapping)]] \
        if isinstance(groups, list) else [resources.get("InstanceType")]
    return [str(t) for t in found if t is not None]


def _within_limits(request: dict[str, Any], spec: Mapping[str, Any]) -> None:
    """The deployment's limits (merged under the run spec by the state machine's Defaults state), which the retrain
    role's policy enforces too: the runtime is capped at ``max_runtime_seconds``; an instance type outside
    ``instance_types`` is refused here, naming it, rather than by an AccessDenied."""
    limit = spec.get("max_runtime_seconds")
    if isinstance(limit, int) and not isinstance(limit, bool):
        stopping = request.get("StoppingCondition")
        stopping = dict(stopping) if isinstance(stopping, Mapping) else {}
        runtime = stopping.get("MaxRuntimeInSeconds")
        if not isinstance(runtime, int) or isinstance(runtime, bool) or runtime > limit:
            stopping["MaxRuntimeInSeconds"] = limit
        request["StoppingCondition"] = stopping
    allowed = spec.get("instance_types")
    if allowed is None:
        return
    for instance_type in _instance_types(request):
        if not any(fnmatch.fnmatchcase(instance_type, pattern) for pattern in allowed):
            raise RetrainSpecError(
                f"run_spec.request.ResourceConfig: instance type {instance_type!r} is not among those this deployment "
                f"lets retraining launch (retraining.instance_types: {', '.join(allowed) or 'none'})"
            )


def build_request(state: Mapping[str, Any]) -> dict[str, Any]:
    """The CreateTrainingJob request for the next run: template + job name + current hyperparameters, within the
    deployment's limits (instance types, runtime)."""
    spec, history = state["run_spec"], state["history"]
    request = copy.deepcopy(dict(spec["request"]))
    _within_limits(request, spec)
    run = history["num_retraining"] + 1
    name = f"{spec['job_name_prefix']}-{history['run_id']}-{run}"
    if len(name) > JOB_NAME_MAX:  # never cut: the prefix must stay whole (only a state init did not write gets here)
        raise RetrainSpecError(
            f"state.history: the next run's name {name!r} would be {len(name)} characters, over SageMaker's "
            f"{JOB_NAME_MAX} (run_id {history['run_id']!r}, run {run})"
        )
    request["TrainingJobName"] = name
    _retarget_rules(request, request["TrainingJobName"])
    request["Tags"] = _owned_tags(request.get("Tags"), f"{spec['job_name_prefix']}-{history['run_id']}")
    given = request.get("HyperParameters") or {}
    if not isinstance(given, Mapping):
        raise RetrainSpecError(f"run_spec.request.HyperParameters: expected an object, got {type(given).__name__}")
    hyper = {str(k): str(v) for k, v in given.items()}
    hyper.update({str(k): _hyper_str(v) for k, v in spec["hyperparameters"].items()})
    request["HyperParameters"] = hyper
    return request


def _publish(runtime: Runtime, state: Mapping[str, Any], subject: str, message: str,
             deadline: Deadline | None = None) -> None:
    topic = state["run_spec"].get("topic_arn") or runtime.settings.topic_arn
    if not topic:
        return
    if deadline is not None and not deadline.fits():  # best effort: never at the cost of the step's answer
        log_json(logging.WARNING, handler="retrain", progress_not_sent=f"no time left ({deadline.left():.1f} s)")
        return
    try:
        runtime.clients("sns").publish(
            TopicArn=topic, Subject=safe_subject(subject), Message=message[:200_000]
        )
    except (ClientError, BotoCoreError) as exc:
        # Progress messages are best effort: the workflow must not fail because a message could not go out.
        log_json(logging.WARNING, handler="retrain", progress_not_sent=str(exc)[:500])


def _with_redacted_values(request: dict[str, Any], spec: Mapping[str, Any], sagemaker: Any) -> dict[str, Any]:
    """The request with each :data:`REDACTED` value read back from the flagged job (``run_spec.after_job``), for
    the CreateTrainingJob call only: the state keeps the placeholder."""
    wanted = [(f, k) for f in _REDACTABLE if isinstance(request.get(f), Mapping)
              for k, v in request[f].items() if v == REDACTED]
    if not wanted:
        return request
    after = spec.get("after_job")
    source = after.get("job_name") if isinstance(after, Mapping) else None
    if not isinstance(source, str):
        raise RetrainSpecError(f"run_spec.request: {wanted[0][0]}.{wanted[0][1]} is redacted and run_spec.after_job "
                               "names no job to read it from")
    description = sagemaker.describe_training_job(TrainingJobName=source)
    filled = {**request}
    for field, key in wanted:
        values = description.get(field) or {}
        if key not in values:
            raise RetrainSpecError(f"run_spec.request.{field}.{key}: redacted, and job {source} no longer has it")
        filled[field] = {**filled[field], key: values[key]}
    return filled


def train_step(state: dict[str, Any], runtime: Runtime, deadline: Deadline | None = None) -> dict[str, Any]:
    """Launch the next run with the current hyperparameters; next_action becomes monitor. The progress message is
    sent only while it fits ``deadline``."""
    if state.get("next_action") != LAUNCH_NEW:
        return state
    sagemaker = runtime.clients("sagemaker")
    request = build_request(state)
    validate_request(request, sagemaker)
    try:
        sagemaker.create_training_job(**_with_redacted_values(request, state["run_spec"], sagemaker))
    except ClientError as exc:
        # Step Functions may rerun a step that timed out: the job name is deterministic, so a second
        # CreateTrainingJob for the same run is recognised instead of launching twice.
        if exc.response.get("Error", {}).get("Code") != "ResourceInUse":
            raise
    history = state["history"]
    history["num_retraining"] += 1
    history["latest_job_name"] = request["TrainingJobName"]
    history["jobs"].append(
        {
            "job_name": request["TrainingJobName"],
            "hyperparameters": dict(state["run_spec"]["hyperparameters"]),
        }
    )
    state.update(next_action=MONITOR, job_status=JOB_IN_PROGRESS, error=None)
    _publish(
        runtime,
        state,
        f"smx-debug retrain: launched run {history['num_retraining']}",
        f"Launched training job {request['TrainingJobName']} (run {history['num_retraining']} of at most "
        f"{state['run_spec']['max_retraining']}) with hyperparameters "
        f"{shown_values(request['HyperParameters'], runtime.settings.show_keys)}.\n",
        deadline,
    )
    return state


def monitor_step(state: dict[str, Any], runtime: Runtime, deadline: Deadline | None = None) -> dict[str, Any]:
    """Look at the latest run: keep monitoring, stop it and plan the next run, or end. The stop's claim and call
    start only while they fit ``deadline`` (else ``OutOfTimeError``, nothing claimed: the next poll stops it); the
    progress message is sent only while it fits."""
    if state.get("next_action") != MONITOR:
        return state
    spec, history = state["run_spec"], state["history"]
    job = history.get("latest_job_name")
    if not isinstance(job, str) or not job:
        raise RetrainSpecError("history.latest_job_name: no run to monitor (call train first)")
    history["num_polls"] += 1
    if history["num_polls"] > spec["max_polls"]:
        # The next turn could outrun the execution's history: end here, with a message (the job keeps
        # running, guarded by its rules' own actions).
        state.update(next_action=END, end_reason=f"history budget used up ({spec['max_polls']} polls)")
        return state
    sagemaker = runtime.clients("sagemaker")
    description = sagemaker.describe_training_job(TrainingJobName=job)
    status = str(description.get("TrainingJobStatus"))
    wanted = spec.get("rules")
    issues = [
        r
        for r in rule_statuses_from_description(description)
        if r.status == ISSUES_FOUND and (r.name in wanted if wanted is not None else r.kind == "debugger")
    ]
    state["error"] = None
    if not issues:
        if status in (JOB_IN_PROGRESS, JOB_STOPPING):
            state.update(next_action=MONITOR, job_status=status)
        else:
            state.update(
                next_action=END, job_status=status, end_reason=f"run finished: {status}, no rule found issues"
            )
        return state
    rule = issues[0]
    stop_outcome = "job had already left InProgress"
    if status == JOB_IN_PROGRESS:
        done = stop_once(
            sagemaker,
            runtime.ledger,
            job,
            {
                "rule": rule.name,
                "rule_kind": rule.kind,
                "step": rule.step,
                "source": "retraining workflow",
                "actor": runtime.settings.actor,
            },
            deadline,
        )
        stop_outcome = str(done.record.get("outcome", "")) if done.acted else "already stopped by smx-debug"
        status = JOB_STOPPING
    history["jobs"][-1:] = [
        {
            **(history["jobs"][-1] if history["jobs"] else {"job_name": job}),
            "rule": rule.name,
            "step": rule.step,
            "outcome": stop_outcome,
        }
    ]
    planned = plan_next(spec["hyperparameters"], spec["strategies"])
    if history["num_retraining"] >= spec["max_retraining"] or planned is None:
        why = "retraining budget used up" if planned is not None else "no strategy left"
        state.update(
            next_action=END,
            job_status=status,
            end_reason=f"{why}; rule {rule.name} found issues in {job} (step {rule.step}); {stop_outcome}",
        )
        return state
    name, new_hyper = planned
    changes = {
        k: (spec["hyperparameters"].get(k), v)
        for k, v in new_hyper.items()
        if spec["hyperparameters"].get(k) != v
    }
    spec["hyperparameters"] = new_hyper
    history[_COUNTERS[name]] += 1
    state.update(next_action=LAUNCH_NEW, job_status=status)
    _publish(
        runtime,
        state,
        f"smx-debug retrain: {rule.name} fired, applying {name}",
        f"Rule {rule.name} found issues in {job} at step {rule.step} ({rule.details or 'no details'}); "
        f"{stop_outcome}. Next run applies {name}, changing "
        + ", ".join(
            f"{k} {old} -> {new}" if k in runtime.settings.show_keys else f"{k} (value hidden)"
            for k, (old, new) in changes.items()
        )
        + ".\n",
        deadline,
    )
    return state


def _fail(state: dict[str, Any], step: str, exc: BaseException, retryable: bool) -> dict[str, Any]:
    history = state.get("history")
    if not isinstance(history, dict):  # the failure may be that history is not an object at all
        history = state["history"] = {}
    errors = history.get("num_errors")
    history["num_errors"] = (errors if isinstance(errors, int) and not isinstance(errors, bool) else 0) + 1
    code = (
        exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else type(exc).__name__
    )
    # botocore's validation messages quote the offending value ("..., value: <v>, type: ..."): names only.
    message = _QUOTED_VALUE.sub(r"\1(value hidden)\2", str(exc))[:1000]
    state["error"] = {"step": step, "code": code, "message": message, "retryable": retryable}
    if not retryable or history["num_errors"] >= MAX_ERRORS:
        state["next_action"] = END
        state["end_reason"] = f"error in step {step}: {code}"
    log_json(
        logging.WARNING,
        handler="retrain",
        step=step,
        error=state["error"],
        next_action=state.get("next_action"),
    )
    return state


def _end_text(state: Mapping[str, Any]) -> tuple[str, str]:
    history = state.get("history") if isinstance(state.get("history"), Mapping) else {}
    error = state.get("error")
    # Error names only: a cause or message may quote request values (hyperparameters, environment), which
    # messages never show; the details stay in the function's log and the execution's history.
    if isinstance(error, Mapping) and ("Error" in error or "Cause" in error):
        # The state machine's catch: a step failed beyond its retries (or a bug raised in one).
        reason = f"failed: {str(error.get('Error'))[:200]}"
    elif isinstance(error, Mapping) and error.get("code"):
        reason = f"failed in step {error.get('step')}: {str(error.get('code'))[:200]}"
    else:
        reason = str(state.get("end_reason") or "ended")
    lines = [f"The smx-debug retraining workflow ended: {reason}.", ""]
    runs = history.get("jobs") if isinstance(history, Mapping) else None
    for run in runs if isinstance(runs, list) else []:
        if isinstance(run, Mapping):
            lines.append(
                f"- {run.get('job_name')}: "
                + (
                    f"rule {run.get('rule')} at step {run.get('step')}; {run.get('outcome')}"
                    if run.get("rule")
                    else "no rule fired"
                )
            )
    latest = history.get("latest_job_name") if isinstance(history, Mapping) else None
    if latest:
        lines.append(f"Latest job: {latest} (status {state.get('job_status') or 'unknown'}).")
    return f"smx-debug retrain: {reason}", "\n".join(lines) + "\n"


def _abandoned(state: Mapping[str, Any]) -> bool:
    """The loop ends without having seen its latest run finish: a failure, or the history budget."""
    error = state.get("error")
    caught = isinstance(error, Mapping) and bool(error)
    return caught or str(state.get("end_reason") or "").startswith("history budget")


def _stop_latest(state: dict[str, Any], runtime: Runtime, deadline: Deadline | None) -> str | None:
    history = state.get("history")
    job = history.get("latest_job_name") if isinstance(history, Mapping) else None
    if not isinstance(job, str) or not job:
        return None
    sagemaker = runtime.clients("sagemaker")
    status = describe_status(sagemaker, job)
    if status != JOB_IN_PROGRESS:
        return None
    try:
        done = stop_once(
            sagemaker,
            runtime.ledger,
            job,
            {
                "rule": "(retraining workflow ended)",
                "source": "retraining workflow",
                "actor": runtime.settings.actor,
            },
            None if deadline is None else deadline.keeping(deadline.call_seconds),  # the final message follows
        )
    except OutOfTimeError as exc:  # the final message matters more: it says so, and nothing is left claimed
        return f"The latest job {job} still runs and nothing monitors it any more: stop it yourself ({exc})."
    state["job_status"] = JOB_STOPPING
    outcome = done.record.get("outcome") if done.acted else "already stopped by smx-debug"
    return f"Stopped the latest job {job}, which nothing would monitor any more ({outcome})."


def end_step(state: dict[str, Any], runtime: Runtime, deadline: Deadline | None = None) -> dict[str, Any]:
    """Publish the final message, whichever way the loop ended; a publish failure raises (Step Functions
    retries the task, then its catch publishes directly). A loop that ends on a failure or on the history
    budget first stops its latest job if it still runs (once, through the ledger, while it fits ``deadline``;
    else the message says the job still runs)."""
    stopped = _stop_latest(state, runtime, deadline) if _abandoned(state) else None
    topic = (
        (state.get("run_spec") or {}).get("topic_arn") if isinstance(state.get("run_spec"), Mapping) else None
    )
    topic = topic or runtime.settings.topic_arn
    subject, message = _end_text(state)
    if stopped:
        message += stopped + "\n"
    if topic:
        runtime.clients("sns").publish(
            TopicArn=topic, Subject=safe_subject(subject), Message=message[:200_000]
        )
    state.update(next_action=END, notified=bool(topic))
    return state


def run_spec_from_job(job: VerifiedJob, trigger: Trigger, sagemaker: Any,
                      redact: Collection[str] = ()) -> dict[str, Any]:
    """The run spec that retrains ``job`` after ``trigger`` flagged it: its own CreateTrainingJob request (the
    fields of DescribeTrainingJob that CreateTrainingJob takes, its tags) and the hyperparameters the
    strategies change; ``after_job`` makes ``init`` plan the first change at once.

    The values of the hyperparameters and environment variables named in ``redact`` become :data:`REDACTED` (the
    run spec is the execution's input, which Step Functions shows); ``train`` reads them from ``job`` at launch.
    :data:`STRATEGY_KEYS` are never redacted (the strategies change them; the deployment's config refuses them)."""
    members = sagemaker.meta.service_model.operation_model("CreateTrainingJob").input_shape.members
    request = {
        key: copy.deepcopy(value)
        for key, value in job.description.items()
        if key in members and key not in ("TrainingJobName", "Tags") and value is not None
    }
    for field in _REDACTABLE:
        values = request.get(field)
        if isinstance(values, dict):
            request[field] = {k: REDACTED if k in redact and k not in STRATEGY_KEYS else v for k, v in values.items()}
    tags = [{"Key": k, "Value": v} for k, v in sorted(job.tags.items()) if not k.startswith("aws:")]
    if tags:
        request["Tags"] = tags
    hyper = request.get("HyperParameters") or {}
    return {
        "request": request,
        "job_name_prefix": job.name[:RETRAIN_PREFIX_MAX],
        "hyperparameters": {k: hyper[k] for k in STRATEGY_KEYS if k in hyper},
        "rules": [trigger.rule],
        "after_job": {
            "job_name": job.name,
            "rule": trigger.rule,
            "step": trigger.step,
            "source": trigger.source,
        },
    }


def run_step(event: object, runtime: Runtime, deadline: Deadline | None = None) -> dict[str, Any]:
    """Dispatch ``{"step": "init"|"train"|"monitor"|"end", "state": {...}}`` within the invocation's ``deadline``
    (:class:`smx_debug.actions.runtime.Deadline`); returns the state document.

    Expected failures land in ``state.error`` (too little time left to start the stop is retryable: the next
    poll does it); an unexpected exception (a bug) propagates.
    """
    if not isinstance(event, Mapping) or event.get("step") not in STEPS:
        step = event.get("step") if isinstance(event, Mapping) else None
        reason = f"event.step: {str(step)[:64]!r} is not one of {', '.join(STEPS)}"
        log_json(logging.WARNING, handler="retrain", rejected=True, reason=reason)
        return {
            "next_action": END,
            "job_status": None,
            "error": {"step": None, "code": "RejectedEvent", "message": reason, "retryable": False},
        }
    step = str(event["step"])
    raw = event.get("state")
    base = copy.deepcopy(dict(raw)) if isinstance(raw, Mapping) else {}
    if step == STEP_END:
        return end_step(base, runtime, deadline)
    try:
        if step == STEP_INIT:
            source = raw if isinstance(raw, Mapping) and "run_spec" in raw else event
            return init_state(source.get("run_spec") if isinstance(source, Mapping) else None)
        if not isinstance(raw, Mapping) or not isinstance(raw.get("history"), Mapping):
            raise RetrainSpecError("state: a state document from init is required")
        state = copy.deepcopy(dict(raw))
        state["history"] = _check_history(state["history"])
        state["run_spec"] = _check_spec(state.get("run_spec"))
        return train_step(state, runtime, deadline) if step == STEP_TRAIN else monitor_step(state, runtime, deadline)
    except (RetrainSpecError, ParamValidationError) as exc:
        return _fail(base, step, exc, retryable=False)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        return _fail(base, step, exc, retryable=code not in _NOT_RETRYABLE)
    except (BotoCoreError, ClaimInProgressError, OutOfTimeError) as exc:
        return _fail(base, step, exc, retryable=True)
