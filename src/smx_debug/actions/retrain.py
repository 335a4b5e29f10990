"""The retraining workflow (Debugger + Step Functions): ``train`` and ``monitor`` steps over a state document.

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
Errors never escape a step: they land in ``error`` and the state tells the next step what to do.
Imports only boto3 and the standard library.
"""

from __future__ import annotations

import copy
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError
from botocore.validate import ParamValidator

from smx_debug.actions.events import ISSUES_FOUND, rule_statuses_from_description
from smx_debug.actions.respond import LedgerLike, stop_key
from smx_debug.actions.runtime import log_json

if TYPE_CHECKING:
    from smx_debug.actions.handlers import Runtime

__all__ = [
    "DEFAULT_STRATEGIES",
    "END",
    "LAUNCH_NEW",
    "MONITOR",
    "RetrainSpecError",
    "init_state",
    "monitor_step",
    "plan_next",
    "run_step",
    "train_step",
    "validate_request",
]

LAUNCH_NEW, MONITOR, END = "launch_new", "monitor", "end"
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
MAX_ERRORS = 3
_NOT_NAME = re.compile(r"[^A-Za-z0-9-]+")
_NOT_RETRYABLE = {"ValidationException", "ResourceLimitExceeded", "AccessDeniedException"}


class RetrainSpecError(ValueError):
    """The run spec or state document cannot drive the workflow (reported in the state's ``error``)."""


def _number(hyper: Mapping[str, Any], key: str, default: float) -> float:
    value = hyper.get(key, default)
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise RetrainSpecError(f"run_spec.hyperparameters.{key}: {value!r} is not a number") from None
    if out != out or out < 0:
        raise RetrainSpecError(f"run_spec.hyperparameters.{key}: {value!r} must be a number >= 0")
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
    spec["job_name_prefix"] = _NOT_NAME.sub("-", prefix).strip("-")[:40] or "smx-retrain"
    hyper = spec.get("hyperparameters", {})
    if not isinstance(hyper, Mapping):
        raise RetrainSpecError(f"run_spec.hyperparameters: expected an object, got {type(hyper).__name__}")
    for key in ("warmup_learning_rate", "learning_rate", "add_batch_norm"):
        if key in hyper:
            _number(hyper, key, 0.0)
    spec["hyperparameters"] = dict(hyper)
    strategies = spec.get("strategies")
    if strategies is None:
        strategies = [dict(s) for s in DEFAULT_STRATEGIES]
    if not isinstance(strategies, list) or not all(
        isinstance(s, Mapping) and s.get("name") in _STRATEGY_NAMES for s in strategies
    ):
        raise RetrainSpecError(
            f"run_spec.strategies: {strategies!r} must be a list of objects named one of {sorted(_STRATEGY_NAMES)}"
        )
    spec["strategies"] = [dict(s) for s in strategies]
    budget = spec.get("max_retraining", DEFAULT_MAX_RETRAINING)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise RetrainSpecError(f"run_spec.max_retraining: {budget!r} must be an integer >= 1")
    spec["max_retraining"] = budget
    rules = spec.get("rules")
    if rules is not None and not (isinstance(rules, list) and all(isinstance(r, str) for r in rules)):
        raise RetrainSpecError(f"run_spec.rules: {rules!r} must be a list of rule configuration names")
    return spec


def init_state(run_spec: object, clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """A fresh state document (raises RetrainSpecError on a bad run spec)."""
    return {
        "run_spec": _check_spec(run_spec),
        "history": {
            "run_id": time.strftime("%m%d%H%M%S", time.gmtime(clock())),
            "num_retraining": 0,
            "num_warmup_adjustments": 0,
            "num_batch_layer_adjustments": 0,
            "num_learning_rate_adjustments": 0,
            "num_errors": 0,
            "latest_job_name": None,
            "jobs": [],
        },
        "next_action": LAUNCH_NEW,
        "job_status": None,
        "error": None,
    }


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
    for key in ("DebugRuleConfigurations", "ProfilerRuleConfigurations"):
        for rule in request.get(key) or []:
            params = rule.get("RuleParameters") if isinstance(rule, dict) else None
            if isinstance(params, dict) and isinstance(params.get("action_json"), str):
                params["action_json"] = _ACTION_PREFIX.sub(
                    lambda m: m.group(1) + job_name, params["action_json"]
                )


def build_request(state: Mapping[str, Any]) -> dict[str, Any]:
    """The CreateTrainingJob request for the next run: template + job name + current hyperparameters."""
    spec, history = state["run_spec"], state["history"]
    request = copy.deepcopy(dict(spec["request"]))
    run = int(history["num_retraining"]) + 1
    request["TrainingJobName"] = f"{spec['job_name_prefix']}-{history['run_id']}-{run}"[:63].strip("-")
    _retarget_rules(request, request["TrainingJobName"])
    hyper = {str(k): str(v) for k, v in (request.get("HyperParameters") or {}).items()}
    hyper.update({str(k): _hyper_str(v) for k, v in spec["hyperparameters"].items()})
    request["HyperParameters"] = hyper
    return request


def _publish(runtime: Runtime, state: Mapping[str, Any], subject: str, message: str) -> None:
    topic = state["run_spec"].get("topic_arn") or runtime.settings.topic_arn
    if not topic:
        return
    from smx_debug.actions.notify import safe_subject

    try:
        runtime.clients("sns").publish(
            TopicArn=topic, Subject=safe_subject(subject), Message=message[:200_000]
        )
    except (ClientError, BotoCoreError) as exc:
        # Progress messages are best effort: the workflow must not fail because a message could not go out.
        log_json(logging.WARNING, handler="retrain", progress_not_sent=str(exc)[:500])


def train_step(state: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    """Launch the next run with the current hyperparameters; next_action becomes monitor."""
    if state.get("next_action") != LAUNCH_NEW:
        return state
    sagemaker = runtime.clients("sagemaker")
    request = build_request(state)
    validate_request(request, sagemaker)
    try:
        sagemaker.create_training_job(**request)
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
    state.update(next_action=MONITOR, job_status="InProgress", error=None)
    _publish(
        runtime,
        state,
        f"smx-debug retrain: launched run {history['num_retraining']}",
        f"Launched training job {request['TrainingJobName']} (run {history['num_retraining']} of at most "
        f"{state['run_spec']['max_retraining']}) with hyperparameters {request['HyperParameters']}.\n",
    )
    return state


def _stop(sagemaker: Any, ledger: LedgerLike, job: str, rule: str, actor: str) -> str:
    key = stop_key(job)
    if not ledger.claim(key, {"action": "stop", "job": job, "rule": rule, "actor": actor}):
        return "already stopped by smx-debug"
    try:
        sagemaker.stop_training_job(TrainingJobName=job)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ValidationException":
            ledger.release(key)
            raise
        ledger.complete(key, {"outcome": "not stopped: job was no longer InProgress"})
        return "job was no longer InProgress"
    except Exception:
        ledger.release(key)
        raise
    ledger.complete(key, {"outcome": "stopped", "previous_status": "InProgress"})
    return "stopped"


def monitor_step(state: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    """Look at the latest run: keep monitoring, stop it and plan the next run, or end."""
    if state.get("next_action") != MONITOR:
        return state
    spec, history = state["run_spec"], state["history"]
    job = history.get("latest_job_name")
    if not isinstance(job, str) or not job:
        raise RetrainSpecError("history.latest_job_name: no run to monitor (call train first)")
    sagemaker = runtime.clients("sagemaker")
    description = sagemaker.describe_training_job(TrainingJobName=job)
    status = str(description.get("TrainingJobStatus"))
    wanted = spec.get("rules")
    issues = [
        r
        for r in rule_statuses_from_description(description)
        if r.kind == "debug" and r.status == ISSUES_FOUND and (wanted is None or r.name in wanted)
    ]
    state["error"] = None
    if not issues:
        if status in ("InProgress", "Stopping"):
            state.update(next_action=MONITOR, job_status=status)
        else:
            state.update(next_action=END, job_status=status)
            _publish(
                runtime,
                state,
                f"smx-debug retrain: finished, {status}",
                f"Training job {job} ended with status {status} after {history['num_retraining']} run(s); "
                "no rule found issues.\n",
            )
        return state
    rule = issues[0]
    stop_outcome = "job had already left InProgress"
    if status == "InProgress":
        stop_outcome = _stop(sagemaker, runtime.ledger, job, rule.name, runtime.settings.actor)
        status = "Stopping"
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
        state.update(next_action=END, job_status=status)
        _publish(
            runtime,
            state,
            f"smx-debug retrain: giving up ({why})",
            f"Rule {rule.name} found issues in {job} (step {rule.step}); {stop_outcome}. "
            f"Ending the workflow: {why}.\n",
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
        f"{stop_outcome}. Next run applies {name}: "
        + ", ".join(f"{k} {old} -> {new}" for k, (old, new) in changes.items())
        + ".\n",
    )
    return state


def _fail(state: dict[str, Any], step: str, exc: BaseException, retryable: bool) -> dict[str, Any]:
    history = state.setdefault("history", {})
    history["num_errors"] = int(history.get("num_errors", 0)) + 1
    code = (
        exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else type(exc).__name__
    )
    state["error"] = {"step": step, "code": code, "message": str(exc)[:1000], "retryable": retryable}
    if not retryable or history["num_errors"] >= MAX_ERRORS:
        state["next_action"] = END
    log_json(
        logging.WARNING,
        handler="retrain",
        step=step,
        error=state["error"],
        next_action=state.get("next_action"),
    )
    return state


def run_step(event: object, runtime: Runtime) -> dict[str, Any]:
    """Dispatch ``{"step": ..., "state": {...}}``; always returns a state document, never raises."""
    if not isinstance(event, Mapping) or event.get("step") not in ("init", "train", "monitor"):
        step = event.get("step") if isinstance(event, Mapping) else None
        reason = f"event.step: {str(step)[:64]!r} is not one of init, train, monitor"
        log_json(logging.WARNING, handler="retrain", rejected=True, reason=reason)
        return {
            "next_action": END,
            "job_status": None,
            "error": {"step": None, "code": "RejectedEvent", "message": reason, "retryable": False},
        }
    step = str(event["step"])
    raw = event.get("state")
    try:
        if step == "init":
            source = raw if isinstance(raw, Mapping) and "run_spec" in raw else event
            return init_state(source.get("run_spec") if isinstance(source, Mapping) else None)
        if not isinstance(raw, Mapping) or not isinstance(raw.get("history"), Mapping):
            raise RetrainSpecError("state: a state document from init is required")
        state = copy.deepcopy(dict(raw))
        state["run_spec"] = _check_spec(state.get("run_spec"))
        return train_step(state, runtime) if step == "train" else monitor_step(state, runtime)
    except RetrainSpecError as exc:
        base = copy.deepcopy(dict(raw)) if isinstance(raw, Mapping) else {}
        return _fail(base, step, exc, retryable=False)
    except ParamValidationError as exc:
        return _fail(copy.deepcopy(dict(raw)) if isinstance(raw, Mapping) else {}, step, exc, retryable=False)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        return _fail(
            copy.deepcopy(dict(raw)) if isinstance(raw, Mapping) else {},
            step,
            exc,
            retryable=code not in _NOT_RETRYABLE,
        )
    except BotoCoreError as exc:
        return _fail(copy.deepcopy(dict(raw)) if isinstance(raw, Mapping) else {}, step, exc, retryable=True)
    except (TypeError, KeyError, AttributeError, ValueError) as exc:
        return _fail(copy.deepcopy(dict(raw)) if isinstance(raw, Mapping) else {}, step, exc, retryable=False)
