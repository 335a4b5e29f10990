"""Warnings for plans that are valid but probably wrong (returned by ``DebugPlan.validate()``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from smx_debug.config._plan_view import PlanView

# smdebug's save_interval when neither the collection nor the hook sets one
DEFAULT_SAVE_INTERVAL = 500
# "a few steps": detailed profiling slows every profiled step down a lot
MAX_DETAILED_STEPS = 3
MAX_DETAILED_SECONDS = 60
# AWS deprecated framework profiling from these versions on
_DEPRECATED_FROM = {"pytorch": (2, 0), "tensorflow": (2, 11)}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def _starvation(plan: PlanView) -> list[str]:
    out: list[str] = []
    merged = {c.name: c for c in plan.collections()}
    for rule in plan.hooked_rules:
        spec = rule.spec
        names = [c.name for c in plan.required_collections(rule)] + list(spec.reads)
        named = rule.parameters.get("collection_names")
        if isinstance(named, str):
            names += [n.strip() for n in named.split(",") if n.strip()]
        intervals = []
        for n in names:
            coll = merged.get(n)
            if coll is not None and coll.save_steps is not None and coll.save_interval is None:
                continue  # saved at explicit steps: nothing to say about intervals
            interval = (coll.save_interval if coll else None) or plan.hook.save_interval or DEFAULT_SAVE_INTERVAL
            intervals.append((n, interval))
        if not intervals:
            continue
        name, interval = max(intervals, key=lambda t: t[1])
        needed = spec.needed_saved_steps(dict(rule.parameters)) * interval
        where = f"rules[{plan.rules.index(rule)}] ({rule.rule_configuration_name})"
        if plan.expected_steps is not None and needed > plan.expected_steps:
            problem = (f" and the rule needs {needed} steps of data before it can fire, but expected_steps is "
                       f"{plan.expected_steps}; lower hook.save_interval or the collection's save_interval")
        elif plan.expected_steps is None and needed > interval and interval >= DEFAULT_SAVE_INTERVAL:
            problem = (f", so the rule cannot fire before step {needed}; lower the save_interval (or set "
                       "expected_steps to check the run length)")
        else:
            continue
        out.append(f"{where}: collection {name!r} is saved every {interval} steps{problem}")
    return out


def _profiling(plan: PlanView) -> list[str]:
    out: list[str] = []
    fw = plan.profiler.framework
    if fw is None or plan.profiler.disable:
        return out
    since = _DEPRECATED_FROM.get(plan.framework or "")
    if since is not None and plan.framework_version is not None and _version(plan.framework_version) >= since:
        out.append(
            f"profiler.framework: AWS deprecated framework profiling for {plan.framework} >= "
            f"{'.'.join(map(str, since))} (plan has {plan.framework_version}); it will not collect data, "
            "use system monitoring only"
        )
    detailed = fw.detailed if fw.metric_sections() else (fw if fw.has_range else None)
    if detailed is not None:
        if detailed.num_steps is not None and detailed.num_steps > MAX_DETAILED_STEPS:
            out.append(
                f"profiler.framework: detailed profiling over {detailed.num_steps} steps (more than "
                f"{MAX_DETAILED_STEPS}) slows training and writes large traces; profile a few steps"
            )
        if detailed.duration is not None and detailed.duration > MAX_DETAILED_SECONDS:
            out.append(
                f"profiler.framework: detailed profiling for {detailed.duration} s (more than "
                f"{MAX_DETAILED_SECONDS} s) slows training and writes large traces"
            )
    return out


def _actions(plan: PlanView, job_name: str | None, sdk: bool) -> list[str]:
    out: list[str] = []
    for i, rule in enumerate(plan.rules):
        for j, action in enumerate(rule.actions):
            if action.stop_training is None or action.stop_training.training_job_prefix is not None:
                continue
            where = f"rules[{i}].actions[{j}] (stop_training)"
            if job_name is None and not sdk:
                target = (
                    f"the prefix {plan.job_name_prefix!r}, which stops nothing if several running jobs match"
                    if plan.job_name_prefix
                    else "no prefix, so the rule container skips the action"
                )
                out.append(
                    f"{where}: the job name is not known, rendered with {target}; pass job_name= "
                    "or use `stop_job` (smx-debug stops exactly this job)"
                )
            elif job_name is not None and job_name != job_name.lower():
                out.append(
                    f"{where}: the rule container lower-cases the action, so prefix {job_name!r} becomes "
                    f"{job_name.lower()!r}; use a lower-case job name or `stop_job`"
                )
    return out


def _frameworks(plan: PlanView) -> list[str]:
    out: list[str] = []
    if plan.framework is None:
        return out
    for i, rule in enumerate(plan.rules):
        fws = rule.spec.frameworks
        if fws and plan.framework not in fws:
            out.append(
                f"rules[{i}] ({rule.rule_configuration_name}): the rule works with {', '.join(fws)} only, "
                f"the plan's framework is {plan.framework}"
            )
    return out


# Default regexes that name tensors of MXNet's Gluon models (smdebug-rulesconfig's and the guide's defaults): in
# another framework's job nothing matches them, and the rule never sees data.
_MXNET_DEFAULTS = {("CheckInputImages", "regex"): "the input of the first layer, e.g. '.*conv1_input_0'",
                   ("NLPSequenceRatio", "tensor_regex"): "the token ids, e.g. '.*embedding_input_0'"}


def _mxnet_defaults(plan: PlanView) -> list[str]:
    out: list[str] = []
    if plan.framework in (None, "mxnet"):
        return out
    for i, rule in enumerate(plan.rules):
        for (name, param), what in _MXNET_DEFAULTS.items():
            if rule.spec.name == name and param not in rule.parameters:
                default = rule.spec.param(param).default
                out.append(
                    f"rules[{i}] ({rule.rule_configuration_name}): its default {param} {default!r} names an MXNet "
                    f"tensor, which a {plan.framework} job never saves, so the rule would see no data; set "
                    f"parameters.{param} to {what} (smx_debug.hook names a module's input '<module>_input_0')"
                )
    return out


# Rules that, at their documented defaults, fired on most runs of bench/detection_bench.py that were healthy by their
# own validation loss (docs/rules.md, "Detection benchmark"): the threshold that decides, and why. LossNotDecreasing
# and Overfit judge the hook's saved losses (single batches, every 500 steps) only in Debugger's rule container;
# the evaluator judges them on the job's training metrics.
_FLAGS_HEALTHY_RUNS = {
    "Confusion": ("min_diag", "its 90% per-class bar fails at the first saved step of any model trained from scratch",
                  False),
    "LossNotDecreasing": ("diff_percent", "a 0.1% decrease between single batches 500 steps apart is noise", True),
    "Overfit": ("ratio_threshold", "a 10% gap between single validation and training batches is noise", True),
}
_STOPPING = ("stop_training", "stop_job", "retrain")


def _stops_healthy_runs(plan: PlanView) -> list[str]:
    out: list[str] = []
    for i, rule in enumerate(plan.rules):
        if rule.spec.name not in _FLAGS_HEALTHY_RUNS:
            continue
        param, why, on_tensors_only = _FLAGS_HEALTHY_RUNS[rule.spec.name]
        stops = [a.kind for a in rule.actions if a.kind in _STOPPING]
        if not stops or param in rule.parameters or (on_tensors_only and plan.guard == "evaluator"):
            continue
        out.append(
            f"rules[{i}] ({rule.rule_configuration_name}): {stops[0]} at the default {param}: {why}, so it fired on "
            f"most healthy runs of bench/detection_bench.py and would stop healthy jobs; set parameters.{param} for "
            "this model, or notify instead (docs/rules.md, 'Detection benchmark')"
        )
    return out


def plan_warnings(plan: PlanView, *, job_name: str | None = None, sdk: bool = False) -> list[str]:
    """Every warning for ``plan``; ``sdk`` means the SDK fills the job name in at ``fit()``."""
    return (_starvation(plan) + _profiling(plan) + _actions(plan, job_name, sdk) + _frameworks(plan)
            + _mxnet_defaults(plan) + _stops_healthy_runs(plan))
