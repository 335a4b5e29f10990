"""The deployment's configuration, read from CDK context (``cdk.json`` or ``-c key=value``).

Context values arrive either as JSON (from ``cdk.json``) or as strings (from ``-c``), so every field
accepts both spellings: lists as JSON arrays or comma-separated strings, booleans as ``true``/``false``,
numbers as digits. Anything else is a ConfigError naming the context key and quoting the value.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from smx_debug.actions.retrain import (
    DEFAULT_MAX_RETRAINING,
    MAX_RETRAINING,
    RETRAIN_PREFIX_MAX,
    STRATEGY_KEYS,
)
from smx_debug.contracts import (
    DEFAULT_NAMESPACE,
    DEFAULT_STACK_NAME,
    MANAGED_TAG,
    SFN_HISTORY_LIMIT,
    retrain_history_events,
)
from smx_debug.errors import ConfigError, UnknownNameError
from smx_debug.rules.watch_spec import WatchSpec
from smx_debug.watch.settings import DEFAULT_JOBS_PER_INVOCATION, MAX_JOBS_PER_INVOCATION

# CloudWatch Logs retention periods (days) -> aws_logs.RetentionDays member; 0 means "never expire".
LOG_RETENTION_DAYS = {
    0: "INFINITE", 1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS",
    30: "ONE_MONTH", 60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS",
    180: "SIX_MONTHS", 365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS",
    1096: "THREE_YEARS", 1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS",
    3288: "NINE_YEARS", 3653: "TEN_YEARS",
}
_JOB_PREFIX = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-]{0,62}$")
_RULE_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}$")
_EMAIL = re.compile(r"^[^@\s,]+@[^@\s,]+\.[^@\s,]+$")
_E164 = re.compile(r"^\+[1-9]\d{6,14}$")
_ROLE_PATTERN = re.compile(r"^arn:aws[a-z-]*:iam::(\d{12}|\*):role/[\w+=,.@*/-]+$")
_SHOW_KEY = re.compile(r"^[A-Za-z0-9_.:/+=@-]{1,256}$")
_TAG_KEY = re.compile(r"^[\w.:/=+\-@]{1,128}$")
_DEFAULT_ACTIONS = ("notify", "stop")

_BASE = ConfigDict(frozen=True, extra="forbid", strict=True)
_STATE_MACHINE_NAME_MAX = 80  # Step Functions' StateMachineName: 1-80 characters


_QUEUE_NAME_MAX = 80  # SQS QueueName: 1-80 characters


def retraining_state_machine_name(stack_name: str) -> str:
    """The retraining state machine's name: fixed, so functions are told its ARN without a reference cycle."""
    return f"{stack_name}-retraining"


def dead_letter_queue_name(stack_name: str) -> str:
    """The dead-letter queue's name: fixed, so the key's policy can name the queue without a reference cycle."""
    return f"{stack_name}-dlq"


def _each(values: tuple[str, ...], pattern: re.Pattern[str], field: str, what: str) -> None:
    for value in values:
        if not isinstance(value, str) or not pattern.match(value):
            raise ConfigError(f"{field}: {value!r} is not {what}", field=field, value=value)
    if len(set(values)) != len(values):
        raise ConfigError(f"{field}: {list(values)!r} lists a value twice", field=field, value=list(values))


def _as_list(value: Any) -> Any:
    """Context from ``-c`` is a string: accept a JSON array or comma-separated items."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return tuple(json.loads(text))
            except json.JSONDecodeError:
                return value
        return tuple(item.strip() for item in text.split(",") if item.strip())
    if isinstance(value, list):
        return tuple(value)
    return value


def _as_bool(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
        return value.strip().lower() == "true"
    return value


def _as_int(value: Any) -> Any:
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return value


def _as_optional_int(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in {"", "none", "null"}:
        return None
    return _as_int(value)


def _as_section(value: Any) -> Any:
    """A section's context value: ``true``/``false`` turns it on or off; a string is its JSON object (a string
    that is not JSON is left for the model to refuse)."""
    parsed = _as_bool(value)
    if isinstance(parsed, bool):
        return {"enabled": parsed}
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


# Field types that accept a context value in either spelling (JSON or a ``-c`` string).
_Int = Annotated[int, BeforeValidator(_as_int)]
_Bool = Annotated[bool, BeforeValidator(_as_bool)]
_Strings = Annotated[tuple[str, ...], BeforeValidator(_as_list)]
_Days = Annotated[int, BeforeValidator(_as_optional_int)]  # "none"/"null"/"" is None: refused where None is
_OptionalDays = Annotated[int | None, BeforeValidator(_as_optional_int)]


# What the retraining workflow may launch by default: general-purpose, compute and single-node GPU families, not
# the 8-GPU p4d/p4de/p5 or Trainium families (add them to retraining.instance_types to allow them).
DEFAULT_RETRAIN_INSTANCE_TYPES = (
    "ml.m5.*", "ml.m6i.*", "ml.c5.*", "ml.c6i.*", "ml.g4dn.*", "ml.g5.*", "ml.g6.*", "ml.p3.*",
)
_INSTANCE_TYPE = re.compile(r"^ml\.[a-z0-9-]+\.([a-z0-9]+|\*)$")


class _Section(BaseModel):
    """A part of the stack that ``cdk.json`` turns on or off (``enabled``: a JSON or string boolean)."""

    model_config = _BASE

    enabled: _Bool = True


class RetrainingConfig(_Section):
    """The retraining workflow (context key ``retraining``, a JSON object).

    ``max_runtime_seconds`` bounds both how long the workflow watches a run and, through IAM
    (``sagemaker:MaxRuntimeInSeconds``), how long a run it launches may last; ``instance_types`` (exact types or
    ``ml.<family>.*``) are the only ones it may launch (``sagemaker:InstanceTypes``). ``redact_keys``: hyperparameter
    and environment names whose values never enter the execution's input (docs/actions.md, "Secrets").
    """

    wait_seconds: _Int = Field(default=300, ge=10, le=86_400)
    max_runtime_seconds: _Int = Field(default=86_400, ge=60, le=2_419_200)
    max_retraining: _Int = Field(default=DEFAULT_MAX_RETRAINING, ge=1, le=MAX_RETRAINING)
    instance_types: _Strings = DEFAULT_RETRAIN_INSTANCE_TYPES
    redact_keys: _Strings = ()

    @model_validator(mode="after")
    def _instance_types(self) -> RetrainingConfig:
        if not self.instance_types:
            raise ConfigError("retraining.instance_types: list at least one instance type the workflow may launch",
                              field="retraining.instance_types", value=list(self.instance_types))
        _each(self.instance_types, _INSTANCE_TYPE, "retraining.instance_types",
              "a SageMaker instance type like ml.g5.2xlarge or ml.g5.*")
        _each(self.redact_keys, _SHOW_KEY, "retraining.redact_keys", "a hyperparameter or environment variable name")
        changed = [k for k in self.redact_keys if k in STRATEGY_KEYS]
        if changed:
            raise ConfigError(
                f"retraining.redact_keys: {changed[0]!r} cannot be redacted: the retraining strategies change it, so its "
                "value travels in the execution's input", field="retraining.redact_keys", value=changed[0])
        return self

    @model_validator(mode="after")
    def _history_budget(self) -> RetrainingConfig:
        """One execution polls every ``wait_seconds`` for up to ``max_runtime_seconds``: its history must fit
        Step Functions' limit (contracts.retrain_history_events counts the worst case)."""
        events = retrain_history_events(wait_seconds=self.wait_seconds, max_runtime_seconds=self.max_runtime_seconds,
                                        max_retraining=self.max_retraining)
        if self.enabled and events > SFN_HISTORY_LIMIT:
            shortest = next(w for w in range(self.wait_seconds, 86_401) if retrain_history_events(
                wait_seconds=w, max_runtime_seconds=self.max_runtime_seconds, max_retraining=self.max_retraining
            ) <= SFN_HISTORY_LIMIT)
            raise ConfigError(
                f"retraining.wait_seconds: polling every {self.wait_seconds} s for {self.max_runtime_seconds} s "
                f"(retraining.max_runtime_seconds) with {self.max_retraining} runs needs up to {events} Step "
                f"Functions history events, over the limit of {SFN_HISTORY_LIMIT}: set retraining.wait_seconds to "
                f"at least {shortest} or lower retraining.max_runtime_seconds",
                field="retraining.wait_seconds",
                value=self.wait_seconds,
            )
        return self


class EvaluatorConfig(_Section):
    """The scheduled evaluator (context key ``evaluator``, a JSON object; ``true``/``false`` turns it on or off).

    ``default_rules``: the rules every watched job gets besides its plan's, as in a watch spec
    (``[{"rule": "CPUBottleneck"}, {"name": "Loss", "rule": "LossNotDecreasing", "parameters": {...}}]``).
    ``jobs_per_invocation``: above this many watched jobs a run sends them in shards of at most this many to the
    shard queue, evaluated in parallel by at most ``max_concurrency`` invocations at once (docs/evaluator.md,
    "Scaling"; 2-1000, Lambda's limits for an SQS event source's maximum concurrency).
    """

    rate_minutes: _Int = Field(default=1, ge=1, le=60)
    window_minutes: _Int = Field(default=10, ge=3, le=60)
    default_rules: tuple[dict[str, Any], ...] = ()
    jobs_per_invocation: _Int = DEFAULT_JOBS_PER_INVOCATION
    max_concurrency: _Int = 5

    @model_validator(mode="after")
    def _fanout(self) -> EvaluatorConfig:
        if not 1 <= self.jobs_per_invocation <= MAX_JOBS_PER_INVOCATION:
            raise ConfigError(
                f"evaluator.jobs_per_invocation: {self.jobs_per_invocation!r} is not from 1 to "
                f"{MAX_JOBS_PER_INVOCATION} (one invocation's jobs must fit its 60 s timeout and one SQS message)",
                field="evaluator.jobs_per_invocation", value=self.jobs_per_invocation)
        if not 2 <= self.max_concurrency <= 1000:
            raise ConfigError(
                f"evaluator.max_concurrency: {self.max_concurrency!r} is not from 2 to 1000 (Lambda's limits for an SQS "
                "event source's MaximumConcurrency)", field="evaluator.max_concurrency", value=self.max_concurrency)
        return self

    @field_validator("default_rules", mode="before")
    @classmethod
    def _rules(cls, value: Any) -> Any:
        items = _as_list(value) if not isinstance(value, str) else tuple(json.loads(value))
        spec = WatchSpec.from_json(json.dumps(list(items)), source="evaluator.default_rules")  # ConfigError if bad
        return tuple(r.as_dict() for r in spec.rules)


class FleetConfig(_Section):
    """Athena over the fleet dataset (context key ``fleet``, a JSON object; ``true``/``false`` turns it on or off).

    ``bytes_scanned_cutoff_per_query``: the workgroup cancels a query that scans more (Athena's minimum is
    10,000,000 bytes; Athena bills at least 10 MB per query anyway). ``collector_rate_minutes``: how often the
    fleet collector writes every job's metadata, the unwatched jobs' CloudWatch minutes and the verdict log (10 to
    1440; its runs must not overlap: its timeout and maximum event age are shorter than 10 minutes).
    """

    bytes_scanned_cutoff_per_query: _Int = 1_000_000_000
    collector_rate_minutes: _Int = 60

    @model_validator(mode="after")
    def _cutoff(self) -> FleetConfig:
        cutoff = self.bytes_scanned_cutoff_per_query
        if cutoff < 10_000_000:
            raise ConfigError(
                f"fleet.bytes_scanned_cutoff_per_query: {cutoff!r} is below Athena's minimum of 10000000 bytes",
                field="fleet.bytes_scanned_cutoff_per_query", value=cutoff)
        if not 10 <= self.collector_rate_minutes <= 1440:
            raise ConfigError(
                f"fleet.collector_rate_minutes: {self.collector_rate_minutes!r} is not from 10 to 1440 (minutes)",
                field="fleet.collector_rate_minutes", value=self.collector_rate_minutes)
        return self


class GuardConfig(BaseModel):
    """Everything a deployment can set; the defaults synthesize a working, notify-only guard."""

    model_config = _BASE

    stack_name: str = DEFAULT_STACK_NAME
    watch_prefixes: _Strings = ()
    opt_in_tag: str | None = MANAGED_TAG
    default_actions: _Strings = ("notify",)
    notification_emails: _Strings = ()
    notification_sms: _Strings = ()
    alarm_rules: _Strings = ("*",)
    alarm_stops_training: _Bool = False
    metric_namespace: str = DEFAULT_NAMESPACE
    log_retention_days: _Days = 30
    output_expiration_days: _OptionalDays = 365
    output_transition_to_ia_days: _OptionalDays = 30
    sagemaker_execution_role_pattern: str = "arn:aws:iam::*:role/*SageMaker*"
    retraining: RetrainingConfig = RetrainingConfig()
    evaluator: EvaluatorConfig = EvaluatorConfig()
    fleet: FleetConfig = FleetConfig()
    show_keys: _Strings = ()
    local: _Bool = False

    @field_validator("opt_in_tag", mode="before")
    @classmethod
    def _opt_in(cls, value: Any) -> Any:
        # true: the default tag key; false/empty: no opt-in by tag; a string: that tag key.
        value = _as_bool(value)
        if value is True:
            return MANAGED_TAG
        if value is False or value == "":
            return None
        return value

    @field_validator("evaluator", "fleet", "retraining", mode="before")
    @classmethod
    def _section(cls, value: Any) -> Any:
        return _as_section(value)

    @model_validator(mode="after")
    def _check(self) -> GuardConfig:
        _each(self.watch_prefixes, _JOB_PREFIX, "watch_prefixes", "a training-job name prefix")
        self._check_retrained_names()
        _each(self.notification_emails, _EMAIL, "notification_emails", "an email address")
        _each(self.notification_sms, _E164, "notification_sms", "an E.164 phone number like +15555550123")
        _each(self.show_keys, _SHOW_KEY, "show_keys", "a hyperparameter or environment variable name")
        if self.alarm_rules != ("*",):
            _each(self.alarm_rules, _RULE_NAME, "alarm_rules", 'a RuleConfigurationName (or ["*"] alone)')
        for action in self.default_actions:
            if action not in _DEFAULT_ACTIONS:
                raise ConfigError(
                    f"default_actions: {action!r} is not one of {', '.join(_DEFAULT_ACTIONS)}",
                    field="default_actions",
                    value=action,
                )
        if self.alarm_stops_training and self.alarm_rules != ("*",):
            raise ConfigError(
                "alarm_stops_training: true stops every watched job whose rule fires, so it needs alarm_rules "
                f'["*"]; got alarm_rules {list(self.alarm_rules)!r} (put a `stop` action on those rules in the '
                "debug plan instead)",
                field="alarm_stops_training",
                value=True,
            )
        if self.opt_in_tag is not None and not _TAG_KEY.match(self.opt_in_tag):
            raise ConfigError(f"opt_in_tag: {self.opt_in_tag!r} is not a valid tag key", field="opt_in_tag",
                              value=self.opt_in_tag)
        if not self.watch_prefixes and self.opt_in_tag is None:
            raise ConfigError(
                "watch_prefixes is empty and opt_in_tag is false: the deployment would watch no training job",
                field="watch_prefixes",
                value=list(self.watch_prefixes),
            )
        if self.log_retention_days not in LOG_RETENTION_DAYS:
            raise ConfigError(
                f"log_retention_days: {self.log_retention_days!r} is not a CloudWatch Logs retention "
                f"(one of {', '.join(map(str, LOG_RETENTION_DAYS))})",
                field="log_retention_days",
                value=self.log_retention_days,
            )
        self._check_lifecycle()
        if not _ROLE_PATTERN.match(self.sagemaker_execution_role_pattern):
            raise ConfigError(
                f"sagemaker_execution_role_pattern: {self.sagemaker_execution_role_pattern!r} is not an IAM role "
                "ARN pattern like 'arn:aws:iam::*:role/SageMaker*'",
                field="sagemaker_execution_role_pattern",
                value=self.sagemaker_execution_role_pattern,
            )
        if not re.match(r"^[A-Za-z][A-Za-z0-9-]{0,127}$", self.stack_name):
            raise ConfigError(f"stack_name: {self.stack_name!r} is not a CloudFormation stack name",
                              field="stack_name", value=self.stack_name)
        queue = dead_letter_queue_name(self.stack_name)
        if len(queue) > _QUEUE_NAME_MAX:
            raise ConfigError(
                f"stack_name: {self.stack_name!r} is {len(self.stack_name)} characters; the dead-letter queue "
                f"{queue!r} would be {len(queue)}, over SQS's {_QUEUE_NAME_MAX}: use at most "
                f"{_QUEUE_NAME_MAX - len(dead_letter_queue_name(''))} characters", field="stack_name", value=self.stack_name)
        machine = retraining_state_machine_name(self.stack_name)
        if self.retraining.enabled and len(machine) > _STATE_MACHINE_NAME_MAX:
            longest = _STATE_MACHINE_NAME_MAX - len(retraining_state_machine_name(""))
            raise ConfigError(
                f"stack_name: {self.stack_name!r} is {len(self.stack_name)} characters; with retraining on, the "
                f"state machine {machine!r} would be {len(machine)}, over Step Functions' {_STATE_MACHINE_NAME_MAX}: "
                f"use at most {longest} characters (or retraining: false)",
                field="stack_name", value=self.stack_name)
        if not re.match(r"^[A-Za-z0-9_./#:-]{1,255}$", self.metric_namespace) or self.metric_namespace.startswith(
            "AWS/"
        ):
            raise ConfigError(f"metric_namespace: {self.metric_namespace!r} is not a custom CloudWatch namespace",
                              field="metric_namespace", value=self.metric_namespace)
        return self

    def _check_retrained_names(self) -> None:
        """A retrained run is named ``<the flagged job's name, cut to RETRAIN_PREFIX_MAX>-<run id>-<run>``
        (SageMaker allows 63 characters): a longer prefix would be cut, and the run would fall outside the policies
        and the event pattern built from it."""
        long = [p for p in self.watch_prefixes if len(p) > RETRAIN_PREFIX_MAX]
        if self.retraining.enabled and long:
            raise ConfigError(
                f"watch_prefixes: {long[0]!r} is {len(long[0])} characters; with retraining on, a prefix may have at "
                f"most {RETRAIN_PREFIX_MAX} characters, so that each retrained run's name (at most 63 characters) "
                "keeps it whole and a run id after it (or retraining: false)",
                field="watch_prefixes", value=long[0])

    def _check_lifecycle(self) -> None:
        expire, to_ia = self.output_expiration_days, self.output_transition_to_ia_days
        if expire is not None and expire < 1:
            raise ConfigError(f"output_expiration_days: {expire!r} must be at least 1 (or null to keep objects)",
                              field="output_expiration_days", value=expire)
        if to_ia is not None and to_ia < 30:
            raise ConfigError(
                f"output_transition_to_ia_days: {to_ia!r} must be at least 30 (S3 Standard-IA minimum)",
                field="output_transition_to_ia_days", value=to_ia)
        if expire is not None and to_ia is not None and to_ia >= expire:
            raise ConfigError(
                f"output_transition_to_ia_days: {to_ia!r} must be less than output_expiration_days ({expire})",
                field="output_transition_to_ia_days", value=to_ia)


CONTEXT_KEYS = tuple(GuardConfig.model_fields)


def config_from_context(context: Mapping[str, Any]) -> GuardConfig:
    """Build the configuration from CDK context, ignoring CDK's own keys (feature flags, ``aws:cdk:...``).

    Raises:
        ConfigError: a value is malformed; names the context key and quotes the value.
        UnknownNameError: a context key looks like ours but is not (a typo), with the closest key.
    """
    ours = {key: value for key, value in context.items() if key in CONTEXT_KEYS}
    for key in context:
        if key in CONTEXT_KEYS or key.startswith(("@", "aws:", "aws-cdk:", "cdk")) or ":" in key:
            continue
        close = difflib.get_close_matches(key, CONTEXT_KEYS, n=1)
        if close:
            raise UnknownNameError(
                f"unknown context key {key!r}; did you mean {close[0]!r}?", name=key, suggestion=close[0]
            )
    try:
        return GuardConfig.model_validate(ours)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = ".".join(str(part) for part in error["loc"]) or "context"
        key = str(error["loc"][0]) if error["loc"] else "context"
        value: object = ours.get(key)
        # A ConfigError raised by a validator keeps its own message.
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, ConfigError):
            raise ConfigError(f"cdk context {cause}", field=cause.field, value=cause.value) from None
        raise ConfigError(f"cdk context {loc}: {error['msg']}; got {value!r}", field=key, value=value) from None
