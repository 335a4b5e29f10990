"""Rendering a plan for the SageMaker Python SDK v3 (``sagemaker.core`` is imported here only, lazily).

v3 has no Estimator, and its ``ModelTrainer`` has no debugger fields. Two paths (docs/plan.md, "SDK v3"):

- :func:`model_trainer_kwargs`: a job guarded by the stack's evaluator and smx-debug's hook (``guard: evaluator``).
  The plan contributes the job's tags (opt-in, plan name, actions, the evaluator's watch spec) as
  ``sagemaker.core.shapes.Tag`` and the environment the hook reads in a job without a ``DebugHookConfig``
  (:func:`hook_environment`), each joined with the user's own.
- :func:`training_job_kwargs`: Debugger's CreateTrainingJob fields as ``sagemaker.core.shapes`` objects for
  ``sagemaker.core.resources.TrainingJob.create``, whose ``tags`` are ``sagemaker.core.resources.Tag`` (it
  rejects ``sagemaker.core.shapes.Tag``).

Both render from :func:`smx_debug.config.request.request_dict`, the one rendering of the plan's fields.
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import TYPE_CHECKING, Any

from smx_debug.config.estimator import join_tags
from smx_debug.config.request import debug_hook_config, request_dict
from smx_debug.contracts import (
    ENVIRONMENT_ENTRIES_MAX,
    ENVIRONMENT_VALUE_MAX,
    HOOK_OUTPUT_ENV,
    RULE_FIELDS,
    hook_config_environment,
    is_hook_config_part,
)
from smx_debug.errors import ConfigError

if TYPE_CHECKING:
    from smx_debug.config._plan_view import PlanView

def _core(method: str) -> tuple[ModuleType, ModuleType]:
    """``sagemaker.core.shapes`` and ``sagemaker.core.resources``, or a ConfigError saying what to install."""
    try:
        return importlib.import_module("sagemaker.core.shapes"), importlib.import_module("sagemaker.core.resources")
    except ImportError:
        raise ConfigError(
            f"{method} needs the SageMaker Python SDK v3: pip install 'smx-debug[sagemaker-v3]' (in a virtualenv "
            "without SDK v2, whose Estimator takes plan.to_estimator_kwargs())",
            field="sagemaker", value=None,
        ) from None


def hook_environment(plan: PlanView) -> dict[str, str]:
    """The ``Environment`` values smx-debug's hook reads in a job launched without a ``DebugHookConfig``.

    The one place that renders them (their names, the splitting and the trial's place are
    :mod:`smx_debug.contracts`'s; the hook reads them in :func:`smx_debug.hook.json_config.settings_from_environment`,
    the evaluator finds the trial from the job's description by them): ``SMX_DEBUG_OUTPUT``, the plan's
    ``s3_output_path`` (the hook writes its trial to ``<it>/<job>/debug-output/``, as Debugger would), and
    ``SMX_DEBUG_HOOK``, the ``HookParameters`` and ``CollectionConfigurations`` of the plan's ``DebugHookConfig`` as
    compact JSON, continued in ``SMX_DEBUG_HOOK_1``, ``SMX_DEBUG_HOOK_2``, ... past SageMaker's 512 characters per
    ``Environment`` value (:func:`smx_debug.contracts.hook_config_environment`). Empty when the plan has no rule
    that reads tensors (the hook is not needed, as no DebugHookConfig would be rendered).

    Raises:
        ConfigError: an ``s3_output_path`` over SageMaker's 512 characters per ``Environment`` value (the field
            named, with its length), here rather than when SageMaker refuses the job.

    Example:
        >>> hook_environment(plan)  # doctest: +SKIP
        {'SMX_DEBUG_OUTPUT': 's3://bucket/debugger', 'SMX_DEBUG_HOOK': '{"HookParameters":{"save_interval":"5"},...}'}
    """
    if not plan.hooked_rules:
        return {}
    config = debug_hook_config(plan)
    output = str(config["S3OutputPath"])
    if len(output) > ENVIRONMENT_VALUE_MAX:
        raise ConfigError(
            f"environment.{HOOK_OUTPUT_ENV}: the plan's s3_output_path takes {len(output)} characters, and SageMaker "
            f"allows at most {ENVIRONMENT_VALUE_MAX} per Environment value; choose a shorter s3_output_path",
            field=f"environment.{HOOK_OUTPUT_ENV}", value=output,
        )
    settings = {k: config[k] for k in ("HookParameters", "CollectionConfigurations") if k in config}
    return {HOOK_OUTPUT_ENV: output, **hook_config_environment(json.dumps(settings, separators=(",", ":")))}


def _join_environment(plan_env: dict[str, str], user_env: Any) -> dict[str, Any]:
    if user_env is None:
        user_env = {}
    if not isinstance(user_env, dict) or not all(isinstance(k, str) for k in user_env):
        raise ConfigError(f"environment must be a dict of str, got {user_env!r}", field="environment", value=user_env)
    out: dict[str, Any] = dict(plan_env)
    for key, value in user_env.items():
        if key in plan_env and plan_env[key] != value:
            raise ConfigError(
                f"environment: {key!r} is {value!r} in yours but {plan_env[key]!r} in the plan (smx-debug's hook "
                "reads it); drop yours",
                field=f"environment.{key}", value=value,
            )
        if key not in plan_env and is_hook_config_part(key):
            raise ConfigError(
                f"environment: {key!r} is a part of the hook's settings (smx-debug's hook joins the plan's "
                f"{', '.join(k for k in plan_env if is_hook_config_part(k)) or 'none'} with it); drop yours",
                field=f"environment.{key}", value=value,
            )
        out[key] = value
    if len(out) > ENVIRONMENT_ENTRIES_MAX:
        raise ConfigError(
            f"environment: {len(out)} variables ({len(plan_env)} of them the plan's, for smx-debug's hook), and "
            f"SageMaker allows at most {ENVIRONMENT_ENTRIES_MAX} per training job; pass fewer "
            "of yours, or launch the job with Debugger's DebugHookConfig (plan.to_training_job_kwargs())",
            field="environment", value=len(out),
        )
    return out


def _tags(plan: PlanView, user_tags: Any, tag_cls: Any) -> list[Any]:
    tags = join_tags(plan.tags_list(), user_tags)
    for tag in tags:
        if tag["Value"] == "":
            # sagemaker-core's serialize() drops falsy values: the request would lack Tags[i].Value and fail
            raise ConfigError(
                f"tags: {tag['Key']!r} has an empty value, which SDK v3 drops from the request (CreateTrainingJob "
                "then fails: a tag needs a Value); give it a value",
                field=f"tags.{tag['Key']}", value="",
            )
    return [tag_cls(key=t["Key"], value=t["Value"]) for t in tags]


def model_trainer_kwargs(plan: PlanView, user: dict[str, Any]) -> dict[str, Any]:
    """``tags`` (``sagemaker.core.shapes.Tag``) and ``environment`` for ``sagemaker.train.ModelTrainer``, joined
    with the user's ``user`` kwargs (the rest passed through)."""
    if plan.guard != "evaluator":
        raise ConfigError(
            f"guard: {plan.guard!r}: SDK v3's ModelTrainer cannot carry Debugger's hook configuration, rules or "
            "profiler; set guard: evaluator (the stack's evaluator and smx-debug's hook guard the job), or create "
            "the job with plan.to_training_job_kwargs() and sagemaker.core.resources.TrainingJob.create",
            field="guard", value=plan.guard,
        )
    if plan.tensorboard_output_path is not None:
        raise ConfigError(
            "tensorboard_output_path: ModelTrainer takes it from .with_tensorboard_output_config("
            "TensorBoardOutputConfig(s3_output_path=...)), not from a keyword argument; call that and remove it "
            "from the plan",
            field="tensorboard_output_path", value=plan.tensorboard_output_path,
        )
    shapes, _ = _core("to_model_trainer_kwargs")
    out = {k: v for k, v in user.items() if k not in ("tags", "environment")}
    out["tags"] = _tags(plan, user.get("tags"), shapes.Tag)
    environment = _join_environment(hook_environment(plan), user.get("environment"))
    if environment or "environment" in user:
        out["environment"] = environment
    return out


def _rule(cls: Any, rule: dict[str, Any]) -> Any:
    return cls(rule_configuration_name=rule["RuleConfigurationName"], rule_evaluator_image=rule["RuleEvaluatorImage"],
               rule_parameters=rule["RuleParameters"])


def _shapes(shapes: ModuleType, request: dict[str, Any]) -> dict[str, Any]:
    """The debug fields of ``request`` (CreateTrainingJob names) as ``TrainingJob.create`` keyword arguments."""
    out: dict[str, Any] = {}
    hook = request.get("DebugHookConfig")
    if hook is not None:
        kwargs: dict[str, Any] = {"s3_output_path": hook["S3OutputPath"]}
        if "LocalPath" in hook:
            kwargs["local_path"] = hook["LocalPath"]
        if "HookParameters" in hook:
            kwargs["hook_parameters"] = hook["HookParameters"]
        kwargs["collection_configurations"] = [
            shapes.CollectionConfiguration(collection_name=c["CollectionName"],
                                           **({"collection_parameters": c["CollectionParameters"]}
                                              if "CollectionParameters" in c else {}))
            for c in hook["CollectionConfigurations"]
        ]
        out["debug_hook_config"] = shapes.DebugHookConfig(**kwargs)
    debug_rules = RULE_FIELDS["debugger"][1]
    if debug_rules in request:
        out["debug_rule_configurations"] = [_rule(shapes.DebugRuleConfiguration, r) for r in request[debug_rules]]
    if "TensorBoardOutputConfig" in request:
        out["tensor_board_output_config"] = shapes.TensorBoardOutputConfig(
            s3_output_path=request["TensorBoardOutputConfig"]["S3OutputPath"])
    profiler = request.get("ProfilerConfig")
    if profiler is not None:
        names = {"S3OutputPath": "s3_output_path", "ProfilingIntervalInMilliseconds": "profiling_interval_in_milliseconds",
                 "ProfilingParameters": "profiling_parameters", "DisableProfiler": "disable_profiler"}
        out["profiler_config"] = shapes.ProfilerConfig(**{names[k]: v for k, v in profiler.items()})
    profiler_rules = RULE_FIELDS["profiler"][1]
    if profiler_rules in request:
        out["profiler_rule_configurations"] = [
            _rule(shapes.ProfilerRuleConfiguration, r) for r in request[profiler_rules]
        ]
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def training_job_kwargs(plan: PlanView, user: dict[str, Any]) -> dict[str, Any]:
    """The plan's CreateTrainingJob fields as ``TrainingJob.create`` keyword arguments, joined with ``user``'s.

    ``training_job_name`` in ``user`` is the job the built-in stop_training action stops. Your ``tags`` and
    ``environment`` join the plan's; a debug field you pass that differs from the plan's is a ConfigError.
    """
    shapes, resources = _core("to_training_job_kwargs")
    name = user.get("training_job_name")
    rendered = _shapes(shapes, request_dict(plan, job_name=name if isinstance(name, str) else None))
    rendered["tags"] = _tags(plan, user.get("tags"), resources.Tag)
    # the hook reads the DebugHookConfig rendered above whenever it needs one: no hook environment here
    environment = _join_environment({}, user.get("environment"))
    if environment or "environment" in user:
        rendered["environment"] = environment
    out = dict(rendered)
    for key, value in user.items():
        if key in ("tags", "environment"):
            continue
        if key in rendered and not _same(rendered[key], value):
            raise ConfigError(
                f"{key}: the plan renders its own {key} and you passed a different one ({value!r}); set it in the "
                "plan instead, or leave it out of the keyword arguments",
                field=key, value=value,
            )
        out[key] = value
    return out
