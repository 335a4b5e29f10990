"""Building SageMaker SDK v2 objects from a plan (the SDK is imported here only, lazily)."""

from __future__ import annotations

import importlib
import logging
import warnings
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType
from typing import TYPE_CHECKING, Any

from smx_debug.config.models import FrameworkProfiling, MetricRange
from smx_debug.config.request import rule_parameters
from smx_debug.errors import ConfigError

if TYPE_CHECKING:
    from smx_debug.config._plan_view import PlanView

def _debugger_module() -> ModuleType:
    # The SDK announces at import where it looked for its config file (INFO, on stdout): quiet unless the
    # user configured that logger.
    config_logger = logging.getLogger("sagemaker.config")
    if config_logger.level == logging.NOTSET:
        config_logger.setLevel(logging.WARNING)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # v3 announces the removal before raising
            return importlib.import_module("sagemaker.debugger")
    except ImportError:
        pass
    try:
        importlib.import_module("sagemaker.core.resources")
    except ImportError:
        raise ConfigError(
            "to_estimator_kwargs needs the SageMaker Python SDK v2: pip install 'smx-debug[sagemaker]'",
            field="sagemaker",
            value=None,
        ) from None
    raise ConfigError(
        f"to_estimator_kwargs renders SDK v2 Estimator arguments, and this is the SageMaker Python SDK v3 "
        f"(sagemaker {_sdk_version()}), which has no Estimator: use plan.to_model_trainer_kwargs(...) for "
        "sagemaker.train.ModelTrainer (the stack's evaluator guards the job), or plan.to_training_job_kwargs(...) "
        "for sagemaker.core.resources.TrainingJob.create (Debugger's fields); docs/plan.md, 'SDK v3'",
        field="sagemaker",
        value=_sdk_version(),
    )


def _sdk_version() -> str | None:
    try:
        return version("sagemaker")
    except PackageNotFoundError:
        return None


class _ProfilerBaseConfig:
    """What ``ProfilerRule.sagemaker`` reads from smdebug_rulesconfig's classes: a name and parameters."""

    def __init__(self, rule_name: str, rule_parameters: dict[str, str]) -> None:
        self.rule_name = rule_name
        self.rule_parameters = rule_parameters


def _range_kwargs(rng: MetricRange) -> dict[str, Any]:
    return {
        "start_step": rng.start_step,
        "num_steps": rng.num_steps,
        "start_unix_time": rng.start_unix_time,
        "duration": rng.duration,
    }


def _framework_profile(dbg: ModuleType, fw: FrameworkProfiling) -> Any:
    mc: Any = importlib.import_module("sagemaker.debugger.metrics_config")
    utils: Any = importlib.import_module("sagemaker.debugger.utils")
    PythonProfiler, cProfileTimer = utils.PythonProfiler, utils.cProfileTimer

    kwargs: dict[str, Any] = {
        "local_path": fw.local_path,
        "file_max_size": fw.file_max_size,
        "file_close_interval": fw.file_close_interval,
        "file_open_fail_threshold": fw.file_open_fail_threshold,
    }
    if fw.metric_sections():
        if fw.detailed is not None:
            kwargs["detailed_profiling_config"] = mc.DetailedProfilingConfig(**_range_kwargs(fw.detailed))
        if fw.dataloader is not None:
            kwargs["dataloader_profiling_config"] = mc.DataloaderProfilingConfig(
                **_range_kwargs(fw.dataloader), metrics_regex=fw.dataloader.metrics_regex
            )
        if fw.python is not None:
            kwargs["python_profiling_config"] = mc.PythonProfilingConfig(
                **_range_kwargs(fw.python),
                python_profiler=PythonProfiler(fw.python.profiler),
                cprofile_timer=cProfileTimer(fw.python.cprofile_timer),
            )
        if fw.horovod is not None:
            kwargs["horovod_profiling_config"] = mc.HorovodProfilingConfig(**_range_kwargs(fw.horovod))
        if fw.smdataparallel is not None:
            kwargs["smdataparallel_profiling_config"] = mc.SMDataParallelProfilingConfig(
                **_range_kwargs(fw.smdataparallel)
            )
    else:
        kwargs.update(_range_kwargs(fw))
    return dbg.FrameworkProfile(**kwargs)


def _tag_pair(tag: Any) -> dict[str, str] | None:
    """One tag as ``{"Key", "Value"}``: the API's dict, v3's ``{"key", "value"}`` dict, or a v3 ``Tag`` object."""
    if isinstance(tag, dict):
        key, value = (tag.get("Key"), tag.get("Value")) if "Key" in tag else (tag.get("key"), tag.get("value"))
    else:
        key, value = getattr(tag, "key", None), getattr(tag, "value", None)
    return {"Key": key, "Value": value} if isinstance(key, str) and isinstance(value, str) else None


def _tag_pairs(tags: Any, field: str) -> list[dict[str, str]]:
    """The user's ``tags``: a list of ``{"Key", "Value"}`` dicts (or v3's ``Tag`` shapes), or a ``{key: value}`` dict."""
    if tags is None:
        return []
    if isinstance(tags, dict):
        tags = [{"Key": k, "Value": v} for k, v in tags.items()]
    pairs = [_tag_pair(t) for t in tags] if isinstance(tags, list | tuple) else [None]
    if any(p is None for p in pairs):
        raise ConfigError(f"{field} must be a list of {{'Key': str, 'Value': str}} or a dict of str, got {tags!r}",
                          field=field, value=tags)
    return [p for p in pairs if p is not None]


def join_tags(plan_tags: list[dict[str, str]], user_tags: Any) -> list[dict[str, str]]:
    """The plan's tags, then the user's (a list of tags or a dict); one key with two values is a ConfigError."""
    merged = {t["Key"]: t["Value"] for t in plan_tags}
    for tag in _tag_pairs(user_tags, "tags"):
        old = merged.get(tag["Key"])
        if old is not None and old != tag["Value"]:
            raise ConfigError(
                f"tags: {tag['Key']!r} is {tag['Value']!r} in your tags but {old!r} in the plan; drop one "
                "(the plan's tags come from its `tags:` and its actions)",
                field=f"tags.{tag['Key']}", value=tag["Value"],
            )
        merged[tag["Key"]] = tag["Value"]
    return [{"Key": k, "Value": v} for k, v in merged.items()]


def _rule_name(rule: Any) -> str:
    return str(getattr(rule, "name", None) or getattr(rule, "rule_configuration_name", None) or rule)


def _same(a: Any, b: Any) -> bool:
    if a is b or a == b:
        return True
    render = [getattr(x, "_to_request_dict", None) for x in (a, b)]
    return all(callable(r) for r in render) and render[0]() == render[1]()  # type: ignore[misc]


def merge_estimator_kwargs(plan_kwargs: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """The plan's estimator kwargs with the user's own: tags and rules are joined, other keys passed through.

    A tag key with two different values, a rule configuration name in both, or a debugger/profiler object the
    plan renders and the user passes differently is a real conflict: a :class:`ConfigError` names it.
    """
    out = dict(plan_kwargs)
    for key, value in user.items():
        if key == "tags":
            out["tags"] = join_tags(plan_kwargs.get("tags", []), value)
        elif key == "rules":
            mine = list(value or [])
            names = {_rule_name(r) for r in plan_kwargs.get("rules", [])}
            clash = sorted(n for n in (_rule_name(r) for r in mine) if n in names)
            if clash:
                raise ConfigError(f"rules: {clash} configured both in your rules and in the plan; keep one",
                                  field="rules", value=clash)
            out["rules"] = [*plan_kwargs.get("rules", []), *mine]
        elif key in plan_kwargs and not _same(plan_kwargs[key], value):
            raise ConfigError(
                f"{key}: the plan renders its own {key} and you passed a different one ({value!r}); set it in the "
                "plan instead, or leave it out of the keyword arguments",
                field=key, value=value,
            )
        else:
            out[key] = value
    return out


def estimator_kwargs(plan: PlanView, user: dict[str, Any] | None = None) -> dict[str, Any]:
    """The SDK objects for ``sagemaker.estimator.Estimator(**kwargs)``, merged with the user's ``user`` kwargs."""
    dbg = _debugger_module()
    rule_configs: Any = dbg.rule_configs  # smdebug_rulesconfig, as the SDK re-exports it

    def collection(c: Any) -> Any:
        return dbg.CollectionConfig(name=c.name, parameters=c.to_parameters() or None)

    rules: list[Any] = []
    for rule in plan.debugger_rules:
        params = rule_parameters(rule, job_name=None)
        params.pop("rule_to_invoke")
        params.pop("action_json", None)  # the SDK renders the actions itself at fit()
        builtin = [a for a in rule.actions if a.builtin]
        actions = None
        if builtin:
            objs: list[Any] = []
            for a in builtin:
                if a.stop_training is not None:
                    objs.append(rule_configs.StopTraining(a.stop_training.training_job_prefix))
                elif a.email is not None:
                    objs.append(rule_configs.Email(a.email))
                elif a.sms is not None:
                    objs.append(rule_configs.SMS(a.sms))
            actions = rule_configs.ActionList(*objs)
        base = {
            "DebugRuleConfiguration": {
                "RuleConfigurationName": rule.spec.name,
                "RuleParameters": {"rule_to_invoke": rule.spec.name},
            }
        }
        rules.append(
            dbg.Rule.sagemaker(
                base,
                name=rule.rule_configuration_name,
                rule_parameters=params or None,
                collections_to_save=[collection(c) for c in plan.rule_collections(rule)] or None,
                actions=actions,
            )
        )
    for rule in plan.profiler_rules:
        params = rule_parameters(rule, job_name=None)
        rules.append(
            dbg.ProfilerRule.sagemaker(_ProfilerBaseConfig(rule.spec.name, params), name=rule.rule_configuration_name)
        )

    out: dict[str, Any] = {
        "debugger_hook_config": dbg.DebuggerHookConfig(
            s3_output_path=plan.s3_output_path,
            container_local_output_path=plan.hook.local_path,
            hook_parameters=plan.hook.hook_parameters() or None,
            collection_configs=[collection(c) for c in plan.collections()] or None,
        ),
        "rules": rules,
        "tags": plan.tags_list(),
    }
    prof = plan.profiler
    if plan.guard == "evaluator" and not plan.hooked_rules:  # no Debugger at all: the stack's evaluator guards it
        out["debugger_hook_config"] = False
    if prof.disable or plan.guard == "evaluator":
        out["profiler_config"] = dbg.ProfilerConfig(disable_profiler=True)
        out["disable_profiler"] = True
    else:
        framework = None
        if prof.framework is not None:
            framework = _framework_profile(dbg, prof.framework)
        with warnings.catch_warnings():
            # the SDK's own deprecation notice; our SmxDebugWarning says it with the versions
            warnings.simplefilter("ignore")
            out["profiler_config"] = dbg.ProfilerConfig(
                s3_output_path=prof.s3_output_path or plan.s3_output_path,
                system_monitor_interval_millis=prof.system_monitor_interval_millis,
                framework_profile_params=framework,
            )
    if plan.tensorboard_output_path is not None:
        out["tensorboard_output_config"] = dbg.TensorBoardOutputConfig(s3_output_path=plan.tensorboard_output_path)
    return merge_estimator_kwargs(out, user) if user else out
