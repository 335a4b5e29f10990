"""The parts of a debug plan: hook and collections, rules, profiler settings."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, model_validator
from pydantic_core import PydanticCustomError

from smx_debug.config.actions import RuleAction
from smx_debug.config.base import (
    FrozenModel,
    NonNegativeInt,
    PositiveInt,
    Regex,
    S3Uri,
    unknown_name_error,
)
from smx_debug.errors import UnknownNameError
from smx_debug.rules.catalog import get_rule
from smx_debug.rules.definitions import RuleSpec
from smx_debug.rules.params import CONFIGURATION_NAME_PATTERN, split_profiler_report_key

PositiveFloat = Annotated[StrictFloat, Field(gt=0, allow_inf_nan=False)]
ParamValue = StrictBool | StrictInt | StrictFloat | StrictStr
# What smdebug's hooks (and ours) compute: smx_debug.tensors.reductions' REDUCTIONS and NORMS, each also of |x|
# (a test pins this list to them); no median.
Reduction = Literal[
    "min", "max", "mean", "std", "variance", "sum", "prod", "l1", "l2",
    "abs_min", "abs_max", "abs_mean", "abs_std", "abs_variance", "abs_sum", "abs_prod", "abs_l1", "abs_l2",
]


def encode_value(value: bool | int | float | str) -> str:
    """The one place typed values become the API's strings (booleans as ``True``/``False``, as
    sagemaker's ``str()`` of profiler rule parameters emits them)."""
    return str(value)


class CollectionConfig(FrozenModel):
    """One tensor collection to save (``CollectionConfigurations[]``)."""

    name: StrictStr = Field(min_length=1, max_length=256)
    save_interval: PositiveInt | None = None
    include_regex: Regex | None = None
    save_steps: tuple[NonNegativeInt, ...] | None = None
    start_step: NonNegativeInt | None = None
    end_step: PositiveInt | None = None
    reductions: tuple[Reduction, ...] | None = None
    save_histogram: StrictBool | None = None
    parameters: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    """Other smdebug collection parameters passed through as strings (e.g. ``train.save_interval``)."""

    def to_parameters(self) -> dict[str, str]:
        """``CollectionParameters``: every set field as a string; None fields are omitted."""
        out: dict[str, str] = {}
        if self.include_regex is not None:
            out["include_regex"] = self.include_regex
        if self.save_interval is not None:
            out["save_interval"] = encode_value(self.save_interval)
        if self.save_steps is not None:
            out["save_steps"] = ",".join(str(s) for s in self.save_steps)
        if self.start_step is not None:
            out["start_step"] = encode_value(self.start_step)
        if self.end_step is not None:
            out["end_step"] = encode_value(self.end_step)
        if self.reductions is not None:
            out["reductions"] = ",".join(self.reductions)
        if self.save_histogram is not None:
            out["save_histogram"] = encode_value(self.save_histogram)
        out.update(self.parameters)
        return out


class HookConfig(FrozenModel):
    """What the training job's Debugger hook saves (``DebugHookConfig``)."""

    save_interval: PositiveInt | None = None
    collections: tuple[CollectionConfig, ...] = ()
    local_path: StrictStr | None = None
    parameters: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    """Other hook parameters passed through as strings."""

    @model_validator(mode="after")
    def _unique(self) -> HookConfig:
        seen: set[str] = set()
        for i, coll in enumerate(self.collections):
            if coll.name in seen:
                raise PydanticCustomError(
                    "smx_field",
                    "collection '{name}' is listed twice; give it once with all its settings",
                    {"subpath": f"collections[{i}].name", "bad_value": repr(coll.name), "name": coll.name},
                )
            seen.add(coll.name)
        return self

    def hook_parameters(self) -> dict[str, str]:
        """``HookParameters``: the hook-wide save interval plus pass-through parameters."""
        out: dict[str, str] = {}
        if self.save_interval is not None:
            out["save_interval"] = encode_value(self.save_interval)
        out.update(self.parameters)
        return out


class RuleConfig(FrozenModel):
    """One rule from the catalog with its parameters and actions."""

    name: StrictStr
    configuration_name: StrictStr | None = Field(default=None, max_length=256, pattern=CONFIGURATION_NAME_PATTERN)
    """``RuleConfigurationName`` (default: the rule's class name); needed to use a rule twice."""
    parameters: dict[StrictStr, ParamValue] = Field(default_factory=dict)
    actions: tuple[RuleAction, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> RuleConfig:
        try:
            spec = get_rule(self.name)
        except UnknownNameError as exc:
            raise unknown_name_error("name", exc) from None
        for key, value in self.parameters.items():
            where = f"parameters.{key}"
            if spec.parameter_prefixes:
                resolved = split_profiler_report_key(key)
                if isinstance(resolved, UnknownNameError):
                    raise unknown_name_error(where, resolved)
                target, pname = resolved
                problem = target.param(pname).check(value)
            else:
                try:
                    problem = spec.param(key).check(value)
                except UnknownNameError as exc:
                    raise unknown_name_error(where, exc) from None
            if problem:
                raise PydanticCustomError(
                    "smx_field", "{problem}", {"subpath": where, "bad_value": repr(value), "problem": problem}
                )
        for p in spec.parameters:
            if p.required and p.name not in self.parameters:
                raise PydanticCustomError(
                    "smx_field",
                    "rule {rule} needs parameter '{param}'",
                    {"subpath": f"parameters.{p.name}", "bad_value": "missing", "rule": spec.name, "param": p.name},
                )
        if spec.kind == "profiler":
            for i, action in enumerate(self.actions):
                if action.builtin:
                    raise PydanticCustomError(
                        "smx_field",
                        "{kind} is a Debugger-rule action; profiler rules support stop_job, notify and retrain",
                        {"subpath": f"actions[{i}]", "bad_value": repr(action.kind), "kind": action.kind},
                    )
        return self

    @property
    def spec(self) -> RuleSpec:
        """The catalog entry."""
        return get_rule(self.name)

    @property
    def rule_configuration_name(self) -> str:
        """The ``RuleConfigurationName`` this rule is rendered with."""
        return self.configuration_name or self.spec.name


class MetricRange(FrozenModel):
    """A step range or a time range for framework profiling (not both)."""

    start_step: NonNegativeInt | None = None
    num_steps: PositiveInt | None = None
    start_unix_time: PositiveInt | None = None
    duration: PositiveInt | PositiveFloat | None = None

    @model_validator(mode="after")
    def _one_range(self) -> MetricRange:
        steps = self.start_step is not None or self.num_steps is not None
        time = self.start_unix_time is not None or self.duration is not None
        if steps and time:
            raise PydanticCustomError(
                "smx_range",
                "give either a step range (start_step, num_steps) or a time range "
                "(start_unix_time, duration), not both",
            )
        return self

    @property
    def has_range(self) -> bool:
        """True when any range field is set."""
        return any(v is not None for v in (self.start_step, self.num_steps, self.start_unix_time, self.duration))


class DataloaderProfiling(MetricRange):
    """Data loader profiling, optionally restricted to metrics matching ``metrics_regex``."""

    metrics_regex: Regex = ".*"


class PythonProfiling(MetricRange):
    """Python profiling with cProfile or Pyinstrument."""

    profiler: Literal["cprofile", "pyinstrument"] = "cprofile"
    cprofile_timer: Literal["total_time", "cpu_time", "off_cpu_time"] = "total_time"


class FrameworkProfiling(MetricRange):
    """Framework profiling (deprecated by AWS for PyTorch >= 2.0 and TensorFlow >= 2.11).

    A range at this level applies to every metric, like ``FrameworkProfile(start_step=..)``; the
    per-metric sections profile only the metrics given, like ``FrameworkProfile(detailed_profiling_config=..)``.
    Neither: every metric at its default steps.
    """

    detailed: MetricRange | None = None
    dataloader: DataloaderProfiling | None = None
    python: PythonProfiling | None = None
    horovod: MetricRange | None = None
    smdataparallel: MetricRange | None = None
    local_path: StrictStr = "/opt/ml/output/profiler"
    file_max_size: PositiveInt = 10485760
    file_close_interval: PositiveInt | PositiveFloat = 60
    file_open_fail_threshold: PositiveInt = 50

    @model_validator(mode="after")
    def _not_both(self) -> FrameworkProfiling:
        if self.has_range and self.metric_sections():
            raise PydanticCustomError(
                "smx_range",
                "give a range for all metrics or per-metric sections ({sections}), not both",
                {"sections": ", ".join(self.metric_sections())},
            )
        return self

    def metric_sections(self) -> list[str]:
        """The per-metric sections that are set."""
        return [k for k in ("detailed", "dataloader", "python", "horovod", "smdataparallel") if getattr(self, k)]


class ProfilerSettings(FrozenModel):
    """System monitoring and framework profiling (``ProfilerConfig``)."""

    system_monitor_interval_millis: Literal[100, 200, 500, 1000, 5000, 60000] | None = None
    framework: FrameworkProfiling | None = None
    s3_output_path: S3Uri | None = None
    disable: StrictBool = False
