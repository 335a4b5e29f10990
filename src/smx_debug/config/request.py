"""Rendering a plan into CreateTrainingJob fields, named and valued exactly as the SDK sends them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smx_debug.config.actions import ACTION_JSON_MAX_LEN, render_action_json
from smx_debug.config.models import FrameworkProfiling, MetricRange, RuleConfig, encode_value
from smx_debug.errors import ConfigError
from smx_debug.rules.definitions import LOSS_MEANS_KEY, SUMMARIES_KEY
from smx_debug.rules.images import rule_evaluator_image

if TYPE_CHECKING:
    from smx_debug.config._plan_view import PlanView

# sagemaker/debugger/profiler_constants.py: config names and default start steps
_METRICS: tuple[tuple[str, str, int, int], ...] = (
    ("detailed", "DetailedProfilingConfig", 5, 1),
    ("dataloader", "DataloaderProfilingConfig", 7, 1),
    ("python", "PythonProfilingConfig", 9, 3),
    ("horovod", "HorovodProfilingConfig", 13, 1),
    ("smdataparallel", "SMDataParallelProfilingConfig", 15, 1),
)


def rule_parameters(rule: RuleConfig, *, job_name: str | None) -> dict[str, str]:
    """``RuleParameters``: ``rule_to_invoke``, the parameters as strings and ``action_json``.

    Debugger rules carry only the parameters the user set (the container has the defaults);
    profiler rules carry every default too, as smdebug_rulesconfig's classes emit them.
    """
    spec = rule.spec
    out: dict[str, str] = {}
    if spec.kind == "profiler" and not spec.parameter_prefixes:
        for p in spec.parameters:
            value = rule.parameters.get(p.name, p.default)
            if value is not None:
                out[p.name] = encode_value(value)
    else:
        out.update({k: encode_value(v) for k, v in rule.parameters.items()})
    for key, value in out.items():
        if len(value) > ACTION_JSON_MAX_LEN:
            raise ConfigError(
                f"rules ({rule.rule_configuration_name}).parameters.{key}: {len(value)} characters; "
                f"SageMaker allows {ACTION_JSON_MAX_LEN} per rule parameter",
                field=f"rules.{rule.rule_configuration_name}.parameters.{key}",
                value=value,
            )
    out["rule_to_invoke"] = spec.name
    builtin = [a for a in rule.actions if a.builtin]
    if builtin:
        action_json = render_action_json(builtin, job_name)
        if len(action_json) > ACTION_JSON_MAX_LEN:
            raise ConfigError(
                f"rules ({rule.rule_configuration_name}).actions: the rendered action_json is "
                f"{len(action_json)} characters; the rule container accepts at most {ACTION_JSON_MAX_LEN} "
                "(use fewer email/sms actions, or `notify` with an SNS topic)",
                field=f"rules.{rule.rule_configuration_name}.actions",
                value=action_json,
            )
        out["action_json"] = action_json
    return out


def _sdk_json(config: dict[str, Any]) -> str:
    # sagemaker.debugger.utils.convert_json_config_to_string, byte for byte (trailing ", " included)
    body = "".join(
        f'"{k}": ' + (f'"{v}"' if isinstance(v, str) else str(v)) + ", " for k, v in config.items()
    )
    return "{" + body + "}"


def _metric_config(kind: str, rng: MetricRange | None, start_default: int, num_default: int) -> dict[str, Any]:
    use_default = rng is None or not rng.has_range
    config: dict[str, Any] = {}
    if use_default or rng is None:
        config = {"StartStep": start_default, "NumSteps": num_default}
    elif rng.start_step is not None or rng.num_steps is not None:
        config = {
            "StartStep": rng.start_step if rng.start_step is not None else 0,
            "NumSteps": rng.num_steps if rng.num_steps is not None else 1,
        }
    else:
        if rng.start_unix_time is not None:
            config["StartTimeInSecSinceEpoch"] = rng.start_unix_time
        if rng.duration is not None:
            config["Duration"] = rng.duration
    if kind == "dataloader":
        config["MetricsRegex"] = getattr(rng, "metrics_regex", ".*")
    if kind == "python":
        profiler = getattr(rng, "profiler", "cprofile")
        config["ProfilerName"] = profiler
        if profiler == "cprofile":
            # FrameworkProfile() with no range at all asks for the container's default timer
            config["cProfileTimer"] = "default" if rng is None else getattr(rng, "cprofile_timer", "total_time")
    return config


def profiling_parameters(fw: FrameworkProfiling) -> dict[str, str]:
    """``ProfilerConfig.ProfilingParameters`` as ``FrameworkProfile.profiling_parameters`` has them."""
    params: dict[str, str] = {
        "LocalPath": fw.local_path,
        "RotateMaxFileSizeInBytes": str(fw.file_max_size),
        "RotateFileCloseIntervalInSeconds": str(fw.file_close_interval),
        "FileOpenFailThreshold": str(fw.file_open_fail_threshold),
    }
    sections = fw.metric_sections()
    for kind, config_name, start, num in _METRICS:
        if sections:
            section = getattr(fw, kind)
            if section is None:
                continue
            rng: MetricRange | None = section
        else:
            rng = fw if fw.has_range else None
        params[config_name] = _sdk_json(_metric_config(kind, rng, start, num))
    return params


def debug_hook_config(plan: PlanView) -> dict[str, Any]:
    """``DebugHookConfig``: where the hook writes and what it saves (what SageMaker hands the container)."""
    hook: dict[str, Any] = {"S3OutputPath": plan.s3_output_path}
    if plan.hook.local_path is not None:
        hook["LocalPath"] = plan.hook.local_path
    hook_params = plan.hook.hook_parameters()
    if plan.resolved_profile == "recommended":  # the loss rules read the interval means of the losses
        hook_params.setdefault(LOSS_MEANS_KEY, encode_value(True))
        hook_params.setdefault(SUMMARIES_KEY, encode_value(True))  # and the own rules' statistics, not tensors
    hook_params.update(plan.in_process_guard_parameters())
    if hook_params:
        hook["HookParameters"] = hook_params
    collections = []
    for coll in plan.collections():
        entry: dict[str, Any] = {"CollectionName": coll.name}
        params = coll.to_parameters()
        if params:
            entry["CollectionParameters"] = params
        collections.append(entry)
    # always present, possibly empty, as the SDK sends it
    hook["CollectionConfigurations"] = collections
    return hook


def _rule_configurations(rules: tuple[RuleConfig, ...], image: str, job_name: str | None) -> list[dict[str, Any]]:
    """``DebugRuleConfigurations`` or ``ProfilerRuleConfigurations``: one entry per rule configuration."""
    return [
        {
            "RuleConfigurationName": r.rule_configuration_name,
            "RuleEvaluatorImage": image,
            "RuleParameters": rule_parameters(r, job_name=job_name),
        }
        for r in rules
    ]


def request_dict(plan: PlanView, *, job_name: str | None) -> dict[str, Any]:
    """All debugger-related CreateTrainingJob fields of ``plan``."""
    image = rule_evaluator_image(plan.region)
    out: dict[str, Any] = {}

    if plan.guard != "evaluator" or plan.hooked_rules:  # the evaluator needs the hook for its tensor rules only
        out["DebugHookConfig"] = debug_hook_config(plan)

    if plan.debugger_rules:
        out["DebugRuleConfigurations"] = _rule_configurations(plan.debugger_rules, image, job_name)

    if plan.tensorboard_output_path is not None:
        out["TensorBoardOutputConfig"] = {"S3OutputPath": plan.tensorboard_output_path}

    prof = plan.profiler
    if prof.disable or plan.guard == "evaluator":
        out["ProfilerConfig"] = {"DisableProfiler": True}
    else:
        config: dict[str, Any] = {"S3OutputPath": prof.s3_output_path or plan.s3_output_path, "DisableProfiler": False}
        if prof.system_monitor_interval_millis is not None:
            config["ProfilingIntervalInMilliseconds"] = prof.system_monitor_interval_millis
        if prof.framework is not None:
            config["ProfilingParameters"] = profiling_parameters(prof.framework)
        out["ProfilerConfig"] = config
    if plan.profiler_rules:
        out["ProfilerRuleConfigurations"] = _rule_configurations(plan.profiler_rules, image, job_name)
    out["Tags"] = plan.tags_list()
    return out


