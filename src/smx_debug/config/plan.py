"""The debug plan: how a training job is watched, written once, rendered for the SDK or the API."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, StrictStr, model_validator
from pydantic_core import PydanticCustomError

from smx_debug import _json as bounded_json
from smx_debug.config._limits import check_size, load_yaml
from smx_debug.config.base import FrozenModel, PositiveInt, S3Uri
from smx_debug.config.checks import DEFAULT_SAVE_INTERVAL, plan_warnings
from smx_debug.config.estimator import estimator_kwargs
from smx_debug.config.models import CollectionConfig, HookConfig, ProfilerSettings, RuleConfig
from smx_debug.config.request import request_dict
from smx_debug.config.sdk_v3 import model_trainer_kwargs, training_job_kwargs
from smx_debug.config.warnings import SmxDebugWarning
from smx_debug.contracts import EVALUATOR_TAG, RULE_KINDS
from smx_debug.errors import ConfigError, NotFoundError, UnknownNameError
from smx_debug.rules.configured import ConfiguredRule, checked_rule
from smx_debug.rules.definitions import (
    GUARD_KEY,
    GUARD_RULES_KEY,
    GUARD_RULES_PARTS,
    HOOK_PARAMETER_VALUE_MAX,
    CollectionRequirement,
)
from smx_debug.rules.images import RULE_IMAGE_ACCOUNTS
from smx_debug.rules.params import (
    PROFILER_RULES,
    SCALAR_RULES,
    TENSOR_RULES,
    split_profiler_report_key,
    unsupported_reason,
)
from smx_debug.rules.registry import Profile, profile_rules
from smx_debug.rules.watch_spec import EVALUATOR_RULES, TENSOR_WATCH_RULES, WatchedRule, WatchSpec
from smx_debug.tags import MAX_TAGS, ActionSpec, encode_tags

MAX_RULES_PER_KIND = 20
MAX_COLLECTIONS = 20
PLAN_SUFFIXES = (".yaml", ".yml", ".json")  # what from_file reads: YAML, or JSON for .json
Framework = Literal["pytorch", "tensorflow", "mxnet", "xgboost", "other"]
Guard = Literal["debugger", "evaluator", "both"]
InProcessGuard = Literal["warn", "stop"]


class DebugPlan(FrozenModel):
    """How a training job is watched: hook, rules with actions, profiler. See docs/plan.md.

    Example:
        >>> plan = DebugPlan(region="us-west-2", s3_output_path="s3://bucket/debug",
        ...                  rules=[{"name": "exploding_tensor"}])
        >>> plan.to_request_dict(job_name="job-1")["DebugRuleConfigurations"][0]["RuleConfigurationName"]
        'ExplodingTensor'
    """

    name: StrictStr | None = Field(default=None, min_length=1, max_length=256)
    region: StrictStr
    s3_output_path: S3Uri
    job_name_prefix: StrictStr | None = Field(default=None, pattern=r"^[A-Za-z0-9](-*[A-Za-z0-9]){0,62}$")
    framework: Framework | None = None
    framework_version: StrictStr | None = Field(default=None, pattern=r"^\d+(\.\d+)*$")
    expected_steps: PositiveInt | None = None
    """Training steps the job runs; lets the plan warn about rules that cannot fire in time."""
    hook: HookConfig = Field(default_factory=HookConfig)
    rules: tuple[RuleConfig, ...] = ()
    profiler: ProfilerSettings = Field(default_factory=ProfilerSettings)
    tensorboard_output_path: S3Uri | None = None
    tags: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    guard: Guard = "debugger"
    """Who evaluates the rules: Debugger's rule jobs, the stack's scheduled evaluator (no Debugger rules, hook or
    profiler are rendered; docs/evaluator.md), or both (the evaluator takes the rules it can evaluate)."""
    profile: Profile | None = None
    """The set of rules: ``debugger`` (the rules listed, as Debugger has them) or ``recommended`` (the registry's
    recommended rules at their defaults, plus the rules listed, which replace a profile rule of the same class).
    Unset: ``recommended`` under ``guard: evaluator`` when the plan lists no rule, ``debugger`` otherwise
    (:attr:`resolved_profile`: a plan written before profiles existed renders what it rendered). A plan
    that says ``profile: recommended`` and no ``guard`` is guarded by the evaluator. See docs/plan.md."""
    in_process_guard: InProcessGuard | None = None
    """The hook's in-process guard (``smd.Hook(guard=...)``): the plan's tensor rules evaluated in the training
    process at each save; ``warn`` logs a rule that fires, ``stop`` ends the training loop. Only with the recommended
    profile (rendered as ``HookParameters.in_process_guard``; docs/hook.md, "The in-process guard")."""

    @model_validator(mode="before")
    @classmethod
    def _profile_guard(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("profile") == "recommended" and "guard" not in data:
            return {**data, "guard": "evaluator"}  # only the evaluator runs the recommended profile's rules
        return data

    @property
    def resolved_profile(self) -> Profile:
        """The profile the plan's rules come from: ``profile``, or its default for the plan's ``guard``."""
        if self.profile is not None:
            return self.profile
        return "recommended" if self.guard == "evaluator" and not self.rules else "debugger"

    def _expand_profile(self) -> None:
        if self.profile == "recommended" and self.guard != "evaluator":
            raise PydanticCustomError(
                "smx_field",
                "profile 'recommended' holds smx-debug's own rules, which only the evaluator runs (Debugger's rule "
                "container cannot); set guard to 'evaluator', or profile to 'debugger'",
                {"subpath": "profile", "bad_value": repr(self.profile)},
            )
        if self.resolved_profile == "debugger":
            return
        object.__setattr__(self, "profile", "recommended")  # what it resolved to, before rules of the profile join
        listed = {r.spec.name for r in self.rules}
        added = tuple(RuleConfig(name=name) for name in profile_rules(self.resolved_profile) if name not in listed)
        object.__setattr__(self, "rules", (*self.rules, *added))  # the listed rules keep their places (rules[i])

    @model_validator(mode="after")
    def _check(self) -> DebugPlan:
        self._expand_profile()
        if self.region not in RULE_IMAGE_ACCOUNTS:
            raise PydanticCustomError(
                "smx_field",
                "Debugger is not available in region '{region}' (supported: {regions})",
                {
                    "subpath": "region",
                    "bad_value": repr(self.region),
                    "region": self.region,
                    "regions": ", ".join(sorted(RULE_IMAGE_ACCOUNTS)),
                },
            )
        seen: dict[str, int] = {}
        for i, rule in enumerate(self.rules):
            cfg = rule.rule_configuration_name
            if cfg in seen:
                raise PydanticCustomError(
                    "smx_field",
                    "rule configuration name '{cfg}' is used by rules[{j}] too; set configuration_name",
                    {"subpath": f"rules[{i}].configuration_name", "bad_value": repr(cfg), "cfg": cfg, "j": seen[cfg]},
                )
            seen[cfg] = i
        for kind in RULE_KINDS:
            count = sum(1 for r in self.rules if r.spec.kind == kind)
            if count > MAX_RULES_PER_KIND:
                raise PydanticCustomError(
                    "smx_field",
                    "{count} {kind} rules; SageMaker allows at most {limit}",
                    {"subpath": "rules", "bad_value": count, "count": count, "kind": kind, "limit": MAX_RULES_PER_KIND},
                )
        n_collections = len(self.collections())
        if n_collections > MAX_COLLECTIONS:
            raise PydanticCustomError(
                "smx_field",
                "{count} collections (yours plus the ones the rules need); SageMaker allows at most {limit}",
                {"subpath": "hook.collections", "bad_value": n_collections, "count": n_collections, "limit": MAX_COLLECTIONS},
            )
        self._check_guard()
        if self.in_process_guard is not None and self.resolved_profile != "recommended":
            raise PydanticCustomError(
                "smx_field",
                "in_process_guard evaluates the recommended profile's rules in the training process; this plan's "
                "profile is '{profile}': set profile to 'recommended' (guard: evaluator follows), or remove "
                "in_process_guard",
                {"subpath": "in_process_guard", "bad_value": repr(self.in_process_guard),
                 "profile": self.resolved_profile},
            )
        try:
            self.in_process_guard_parameters()
        except ConfigError as exc:
            raise PydanticCustomError("smx_field", "{msg}", {
                "subpath": "in_process_guard", "bad_value": repr(self.in_process_guard), "msg": str(exc)}) from None
        if self.profiler.disable and self.profiler_rules:
            raise PydanticCustomError(
                "smx_field",
                "profiler rules need the profiler; remove them or set profiler.disable to false",
                {"subpath": "profiler.disable", "bad_value": True},
            )
        try:
            self.tags_list()
        except ConfigError as exc:
            raise PydanticCustomError(
                "smx_field", "{msg}", {"subpath": "tags", "bad_value": repr(exc.value), "msg": str(exc)}
            ) from None
        return self

    def in_process_guard_parameters(self) -> dict[str, str]:
        """The ``HookParameters`` of :attr:`in_process_guard` (none without it): the mode, and, as JSON, the
        plan's tensor rule configurations other than a recommended rule at its defaults (the hook adds those), in
        values of at most 256 characters (``in_process_guard_rules``, then ``_1`` ... ``_7``).

        Raises:
            ConfigError: when those configurations need more than eight values."""
        if self.in_process_guard is None:
            return {}
        tensor = [r for r in self.rules if r.spec.name in TENSOR_RULES]
        classes = [r.spec.name for r in tensor]
        profile = set(profile_rules("recommended"))
        own = [[r.rule_configuration_name, r.spec.name, dict(r.parameters)] for r in tensor
               if r.parameters or r.rule_configuration_name != r.spec.name or r.spec.name not in profile
               or classes.count(r.spec.name) > 1]
        out: dict[str, str] = {GUARD_KEY: self.in_process_guard}
        text = json.dumps(own, separators=(",", ":")) if own else ""
        parts = [text[i:i + HOOK_PARAMETER_VALUE_MAX] for i in range(0, len(text), HOOK_PARAMETER_VALUE_MAX)]
        if len(parts) > GUARD_RULES_PARTS:
            raise ConfigError(f"in_process_guard: the plan's tensor rule configurations take {len(text)} characters "
                              f"as HookParameters, more than {GUARD_RULES_PARTS} values of "
                              f"{HOOK_PARAMETER_VALUE_MAX} hold; configure fewer rules or parameters",
                              field="in_process_guard", value=len(text))
        for i, part in enumerate(parts):
            out[GUARD_RULES_KEY if i == 0 else f"{GUARD_RULES_KEY}_{i}"] = part
        return out

    def _check_guard(self) -> None:
        if self.guard != "evaluator":
            for i, rule in enumerate(self.rules):
                if rule.spec.family == "smx":  # Debugger's rule container cannot run a rule of ours
                    raise PydanticCustomError(
                        "smx_field",
                        "rule {rule} is smx-debug's own and only the evaluator runs it; set guard to 'evaluator'",
                        {"subpath": f"rules[{i}].name", "bad_value": repr(rule.name), "rule": rule.spec.name},
                    )
            return
        for i, rule in enumerate(self.rules):
            if rule.spec.name not in EVALUATOR_RULES:
                reason = unsupported_reason(rule.spec.name)
                raise PydanticCustomError(
                    "smx_field",
                    "rule {rule} {why}; with guard 'evaluator' the rules are one of {rules} (or set guard to 'both')",
                    {"subpath": f"rules[{i}].name", "bad_value": repr(rule.name), "rule": rule.spec.name,
                     "why": f"cannot be evaluated by smx-debug: {reason}" if reason else "needs Debugger",
                     "rules": ", ".join(EVALUATOR_RULES)},
                )
            for j, action in enumerate(rule.actions):
                if action.builtin:
                    raise PydanticCustomError(
                        "smx_field",
                        "{kind} runs in Debugger's rule container; with guard 'evaluator' use stop_job, notify "
                        "or retrain",
                        {"subpath": f"rules[{i}].actions[{j}]", "bad_value": repr(action.kind), "kind": action.kind},
                    )

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: object, *, source: str = "") -> DebugPlan:
        """Validate a plain mapping (parsed YAML/JSON); errors are ConfigError naming the field."""
        if not isinstance(data, dict):
            raise ConfigError(
                f"{source or 'plan'}: a debug plan is a mapping of fields, got {type(data).__name__}",
                field="(plan)",
                value=data,
            )
        bad_keys = [k for k in data if not isinstance(k, str)]
        if bad_keys:
            raise ConfigError(
                f"{source or 'plan'}: field names must be strings, got {bad_keys[0]!r}", field="(plan)", value=bad_keys[0]
            )
        try:
            return cls(**data)
        except ConfigError as exc:
            if not source:
                raise
            raise type(exc)(f"{source}: {exc}", field=exc.field, value=exc.value) from None
        except UnknownNameError as exc:
            if not source:
                raise
            raise UnknownNameError(f"{source}: {exc}", name=exc.name, suggestion=exc.suggestion) from None

    @classmethod
    def from_file(cls, path: str | Path) -> DebugPlan:
        """Load a plan from YAML (``.yaml``/``.yml``) or JSON (``.json``); any other suffix is a ConfigError."""
        path = Path(path)
        if path.suffix.lower() not in PLAN_SUFFIXES:
            raise ConfigError(f"plan file {str(path)!r} must end in {', '.join(PLAN_SUFFIXES)} (a YAML or JSON plan), "
                              f"not {path.suffix or 'no extension'!r}", field="path", value=str(path))
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise NotFoundError(f"plan file {str(path)!r} does not exist") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"plan file {str(path)!r} is not UTF-8 text (byte {exc.start}): a YAML or JSON plan "
                              "was expected", field="path", value=str(path)) from None
        except OSError as exc:
            raise ConfigError(f"plan file {str(path)!r}: {exc.strerror}", field="path", value=str(path)) from None
        if path.suffix.lower() == ".json":
            check_size(text, str(path))
            try:
                data = bounded_json.loads(text)
            except json.JSONDecodeError as exc:  # also nested too deep (smx_debug._json)
                raise ConfigError(
                    f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg})",
                    field="(file)",
                    value=str(path),
                ) from None
        else:
            try:
                data = load_yaml(text, str(path))
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
                problem = getattr(exc, "problem", None) or str(exc)
                raise ConfigError(
                    f"{path}: {where}invalid YAML ({problem})", field="(file)", value=str(path)
                ) from None
        return cls.from_dict(data, source=str(path))

    def with_changes(self, **changes: Any) -> DebugPlan:
        """A copy with top-level fields replaced, validated again (``model_copy`` does not validate)."""
        data = self.model_dump(exclude_none=True)
        data.update(changes)
        return DebugPlan.from_dict(data)

    def with_output_path(self, s3_output_path: str) -> DebugPlan:
        """A copy writing to another S3 prefix (e.g. the demo's bucket)."""
        return self.with_changes(s3_output_path=s3_output_path)

    # --- derived views ------------------------------------------------------------------------

    @property
    def debugger_rules(self) -> tuple[RuleConfig, ...]:
        """Rules evaluated on tensors (``DebugRuleConfigurations``); none when the evaluator guards alone."""
        if self.guard == "evaluator":
            return ()
        return tuple(r for r in self.rules if r.spec.kind == "debugger")

    @property
    def hooked_rules(self) -> tuple[RuleConfig, ...]:
        """Rules whose tensors the hook must save: the Debugger rules, or, when the evaluator guards alone, the
        tensor rules it evaluates on the job's tensors (none: no ``DebugHookConfig`` is rendered)."""
        if self.guard != "evaluator":
            return self.debugger_rules
        return tuple(r for r in self.rules if r.spec.name in TENSOR_WATCH_RULES)

    @property
    def profiler_rules(self) -> tuple[RuleConfig, ...]:
        """Rules evaluated on profiling data (``ProfilerRuleConfigurations``); none when the evaluator guards alone."""
        if self.guard == "evaluator":
            return ()
        return tuple(r for r in self.rules if r.spec.kind == "profiler")

    def watch_spec(self) -> WatchSpec:
        """The rules the stack's scheduled evaluator applies to the job (empty when ``guard`` is ``debugger``).

        Store it with ``plan.watch_spec().store(bucket, s3_client=...)`` in the stack's bucket before the job
        starts; the job's ``smx-debug:evaluator`` tag (in :meth:`tags_list`) names it.
        """
        if self.guard == "debugger":
            return WatchSpec()
        return WatchSpec(rules=tuple(
            WatchedRule(name=r.rule_configuration_name, rule=r.spec.name, parameters=dict(r.parameters))
            for r in self.rules if r.spec.name in EVALUATOR_RULES
        ))

    def evaluated_rules(self, *, expand_profiler_report: bool = True) -> tuple[list[ConfiguredRule], list[str]]:
        """The plan's rules smx-debug evaluates on profiling data and scalars, and the configuration names of the
        others (tensor rules: :meth:`tensor_rules`).

        Each profiler or scalar rule is one configuration named by its ``rule_configuration_name``.
        ``ProfilerReport`` expands to the ten profiler rules, named by class, with its ``<Rule>_<param>``
        parameters (unless ``expand_profiler_report=False``); an explicit configuration of the plan with the
        same name takes precedence. Parameters were checked when the plan was read and are not checked again.
        """
        ordered: list[tuple[bool, ConfiguredRule]] = []  # (from ProfilerReport?, configuration) in plan order
        skipped: list[str] = []
        for rc in self.rules:
            cls = rc.spec.name
            if rc.spec.parameter_prefixes:  # ProfilerReport
                if not expand_profiler_report:
                    continue
                params: dict[str, dict[str, Any]] = {}
                for key, value in rc.parameters.items():
                    resolved = split_profiler_report_key(key)
                    if not isinstance(resolved, Exception):  # RuleConfig refused any other key
                        params.setdefault(resolved[0].name, {})[resolved[1]] = value
                ordered.extend((True, checked_rule(r, name=r, parameters=params.get(r, {}))) for r in PROFILER_RULES)
            elif cls in PROFILER_RULES or cls in SCALAR_RULES:
                config = checked_rule(cls, name=rc.rule_configuration_name, parameters=rc.parameters)
                ordered.append((False, config))
            else:
                skipped.append(rc.rule_configuration_name)
        explicit = {c.name for from_report, c in ordered if not from_report}
        return [c for from_report, c in ordered if not (from_report and c.name in explicit)], skipped

    def tensor_rules(self) -> tuple[list[ConfiguredRule], list[str]]:
        """The plan's rules smx-debug evaluates on tensors (each named by its configuration name), and the
        configuration names of the others (profiler rules, SimilarAcrossRuns).

        Raises:
            ConfigError: for an XGBoost rule (TreeDepth, FeatureImportanceOverweight, CreateXgboostReport), naming it.
        """
        configs: list[ConfiguredRule] = []
        skipped: list[str] = []
        for rc in self.rules:
            cls = rc.spec.name
            if cls in TENSOR_RULES:
                configs.append(checked_rule(cls, name=rc.rule_configuration_name, parameters=rc.parameters))
                continue
            reason = unsupported_reason(cls)
            if reason is not None and "xgboost" in rc.spec.frameworks:
                raise ConfigError(f"the plan's rule {rc.rule_configuration_name!r} ({cls}) cannot be evaluated by "
                                  f"smx-debug: {reason}", field="rules", value=cls)
            skipped.append(rc.rule_configuration_name)
        return configs, skipped

    @staticmethod
    def required_collections(rule: RuleConfig) -> tuple[CollectionRequirement, ...]:
        """The collections the hook must save for ``rule`` to see its tensors.

        The catalog's collections (smdebug-rulesconfig's), each following the rule's regex parameter when it is
        that collection's regex and the plan sets another (CheckInputImages' ``regex`` -> ``input_image``);
        then, for every other regex parameter with a value (SaturatedActivation's default ``tensor_regex``, a
        ``tensor_regex`` the plan sets), a collection of that regex named ``<rule function>_<parameter>``
        (``saturated_activation_tensor_regex``) at the default save interval: listing a rule is enough. A rule of
        our own gets its own collections only (its other regexes filter what it reads: ``skip_regex``).
        """
        spec = rule.spec
        regexes = [p for p in spec.parameters if p.type == "regex"]
        out: list[CollectionRequirement] = []
        bound: set[str] = set()
        for req in spec.collections:
            param = next((p for p in regexes if p.default is not None and p.default == req.include_regex), None)
            if param is not None:
                bound.add(param.name)
                req = replace(req, include_regex=str(rule.parameters.get(param.name, param.default)))
            out.append(req)
        for param in regexes:
            value = rule.parameters.get(param.name, param.default)
            # a rule of our own names every collection it reads; its other regexes filter (skip_regex, weight_regex)
            if param.name not in bound and value is not None and spec.family != "smx":
                out.append(CollectionRequirement(f"{spec.function}_{param.name}", include_regex=str(value),
                                                 save_interval=DEFAULT_SAVE_INTERVAL))
        return tuple(out)

    def rule_collections(self, rule: RuleConfig) -> tuple[CollectionConfig, ...]:
        """The merged collection configurations a rule requires."""
        names = {c.name for c in self.required_collections(rule)}
        return tuple(c for c in self.collections() if c.name in names)

    def collections(self) -> tuple[CollectionConfig, ...]:
        """The hook's collections merged with the ones the rules require, one entry per name.

        Order: the user's collections as written, then required ones in rule order. For a required
        collection the smaller of the rule's save_interval and the user's (collection or hook-wide)
        wins: more data, never less. The user's include_regex wins over the rule's.
        """

        required: dict[str, list[CollectionRequirement]] = {}
        for rule in self.hooked_rules:
            for req in self.required_collections(rule):
                required.setdefault(req.name, []).append(req)
        user = {c.name: c for c in self.hook.collections}
        order = [c.name for c in self.hook.collections] + [n for n in required if n not in user]
        out: list[CollectionConfig] = []
        for name in order:
            base = user.get(name) or CollectionConfig(name=name)
            reqs = required.get(name, [])
            if not reqs:
                out.append(base)
                continue
            update: dict[str, Any] = {}
            if base.include_regex is None:
                regex = next((r.include_regex for r in reqs if r.include_regex), None)
                if regex is not None:
                    update["include_regex"] = regex
            rule_intervals = [r.save_interval for r in reqs if r.save_interval is not None]
            if rule_intervals:
                user_interval = base.save_interval or self.hook.save_interval
                update["save_interval"] = min(rule_intervals + ([user_interval] if user_interval else []))
            if base.save_steps is None:
                steps = next((r.save_steps for r in reqs if r.save_steps is not None), None)
                if steps is not None:
                    update["save_steps"] = tuple(int(s) for s in steps.split(","))
            out.append(base.model_copy(update=update))
        return tuple(out)

    def tags_list(self) -> list[dict[str, str]]:
        """CreateTrainingJob ``Tags``: the user's tags, the opt-in tag, the plan name, custom actions."""
        rule_actions: dict[str, list[ActionSpec]] = {}
        for rule in self.rules:
            specs = [s for s in (a.tag_spec() for a in rule.actions) if s is not None]
            if specs:
                rule_actions[rule.rule_configuration_name] = specs
        tags = encode_tags(rule_actions, managed=True, plan=self.name, extra=self.tags)
        spec = self.watch_spec()
        if spec.rules:
            tags.append({"Key": EVALUATOR_TAG, "Value": spec.key})
            if len(tags) > MAX_TAGS:
                raise ConfigError(f"tags: {len(tags)} tags; SageMaker allows at most {MAX_TAGS} per training job",
                                  field="tags", value=len(tags))
        return tags

    # --- validation and rendering -------------------------------------------------------------

    def validate(self, *, job_name: str | None = None) -> list[str]:  # type: ignore[override]
        """Warnings for a valid plan that is probably not what the user wants (nothing is raised).

        Pass ``job_name`` when it is known; without it the stop_training warning applies.
        """

        return plan_warnings(self, job_name=job_name)

    def _warn(self, *, job_name: str | None, sdk: bool = False) -> None:

        for message in plan_warnings(self, job_name=job_name, sdk=sdk):
            warnings.warn(message, SmxDebugWarning, stacklevel=3)

    def to_request_dict(self, *, job_name: str | None = None) -> dict[str, Any]:
        """The debugger-related CreateTrainingJob fields (+ ``Tags``) for boto3, Lambda, Step Functions.

        With ``job_name`` the built-in stop_training action targets exactly that job; without it
        the prefix is ``job_name_prefix`` (or missing) and a SmxDebugWarning says so.
        """

        self._warn(job_name=job_name)
        return request_dict(self, job_name=job_name)

    def to_estimator_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        """``debugger_hook_config``, ``rules``, ``profiler_config`` (``tensorboard_output_config``,
        ``disable_profiler``) and ``tags`` as SageMaker SDK v2 objects for ``Estimator(**kwargs)``.

        Pass your own estimator keyword arguments here rather than next to ``**``: your ``tags`` (list or dict)
        and ``rules`` are joined with the plan's, the rest passed through, and a real conflict (one tag key with
        two values, one rule in both, a different ``profiler_config``) is a ConfigError naming it::

            Estimator(**plan.to_estimator_kwargs(image_uri=..., role=..., tags=[{"Key": "team", "Value": "a"}]))
        """

        # the SDK fills the job name into stop_training at fit(): no "unknown job" warning here
        self._warn(job_name=None, sdk=True)
        return estimator_kwargs(self, kwargs)



    def to_model_trainer_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        """``tags`` and ``environment`` for SDK v3's ``sagemaker.train.ModelTrainer``, for a job the stack's
        evaluator and smx-debug's hook guard (``guard: evaluator``; ModelTrainer has no Debugger fields).

        Pass your own ModelTrainer keyword arguments here: your ``tags`` (``Tag`` shapes, dicts, or a dict) and
        ``environment`` are joined with the plan's, the rest passed through; one key with two values is a
        ConfigError naming it::

            ModelTrainer(**plan.to_model_trainer_kwargs(training_image=..., role=..., tags={"team": "a"}))
        """

        out = model_trainer_kwargs(self, kwargs)  # a plan ModelTrainer cannot carry raises before any warning
        self._warn(job_name=None, sdk=True)
        return out

    def to_training_job_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        """The debugger fields, ``tags`` and ``environment`` as ``sagemaker.core`` objects for SDK v3's
        ``sagemaker.core.resources.TrainingJob.create`` (Debugger's customers on v3).

        Pass your own ``TrainingJob.create`` keyword arguments here: ``training_job_name`` is the job the built-in
        stop_training action stops, your ``tags`` and ``environment`` are joined with the plan's::

            TrainingJob.create(**plan.to_training_job_kwargs(training_job_name="job-1", role_arn=..., ...))
        """

        name = kwargs.get("training_job_name")
        self._warn(job_name=name if isinstance(name, str) else None)
        return training_job_kwargs(self, kwargs)
