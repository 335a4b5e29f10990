"""The contracts between smx-debug's parts, owned here and nowhere else.

Config, actions, evaluation, reports, infra and the demo import these names; none keeps a copy. Where a
decision has a second form (the opt-in rule as an EventBridge pattern or an IAM condition), the second form
is generated here from the first, so the places cannot disagree. Imports only the standard library: the
Lambda assets ship this module.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeGuard
from urllib.parse import quote

# ---------------------------------------------------------------------------------------------- tags
TAG_PREFIX: Final = "smx-debug:"
MANAGED_TAG: Final = "smx-debug:managed"  # the default opt-in tag key (a deployment may choose another)
PLAN_TAG: Final = "smx-debug:plan"
RULE_TAG_PREFIX: Final = "smx-debug:on:"  # + RuleConfigurationName -> action tokens
HANDLER_TAG: Final = "smx-debug:handler"  # on deployed functions: which handler they run (handler_entry)
# The action functions, in the order the local AWS delivers one event to them; one entry module, four names.
ACTION_HANDLERS: Final = ("rule_metrics", "stop_training", "notify", "retrain")
OPT_IN_VALUE: Final = "true"
# The evaluator's rules for a job: key (in the stack's bucket) of the watch spec its plan rendered. A tag value
# holds at most 256 characters, so the tag names the spec instead of carrying it.
EVALUATOR_TAG: Final = "smx-debug:evaluator"
EVALUATOR_SPEC_PREFIX: Final = "smx-debug/watch-specs/"  # + <sha256 of the spec>.json
# Debugger writes profiler data under ProfilerConfig.S3OutputPath/<job>/PROFILER_OUTPUT/ (the readers look there;
# the evaluator's role may read there and nowhere else in the bucket besides the watch specs).
PROFILER_OUTPUT: Final = "profiler-output"
# ... and the hook's tensors under DebugHookConfig.S3OutputPath/<job>/DEBUG_OUTPUT/ (the evaluator's role may read
# there too, for the tensor rules).
DEBUG_OUTPUT: Final = "debug-output"
# A job launched without a DebugHookConfig (SDK v3's ModelTrainer) carries its hook's settings in its Environment,
# as DescribeTrainingJob returns it: HOOK_OUTPUT_ENV is the S3OutputPath its hook writes the trial under
# (hook_trial_uri: <output>/<job>/DEBUG_OUTPUT/, where the evaluator reads it), HOOK_CONFIG_ENV the rest of the
# DebugHookConfig (HookParameters, CollectionConfigurations) as compact JSON. SageMaker refuses an Environment
# value over ENVIRONMENT_VALUE_MAX characters (botocore's TrainingEnvironmentValue) and more than
# ENVIRONMENT_ENTRIES_MAX entries (TrainingEnvironmentMap), so a longer JSON is split across HOOK_CONFIG_ENV,
# HOOK_CONFIG_ENV_1, HOOK_CONFIG_ENV_2, ... (hook_config_environment; join_hook_config reads it back).
HOOK_OUTPUT_ENV: Final = "SMX_DEBUG_OUTPUT"
# SageMaker sets it in every training container (Developer Guide, "How Amazon SageMaker Provides Training
# Information": the TrainingJobName of the CreateTrainingJob request); the hook's trial goes under it, and its
# presence tells the hook and the framework callbacks that they run in a SageMaker training job.
TRAINING_JOB_NAME_ENV: Final = "TRAINING_JOB_NAME"
HOOK_CONFIG_ENV: Final = "SMX_DEBUG_HOOK"
ENVIRONMENT_VALUE_MAX: Final = 512
ENVIRONMENT_ENTRIES_MAX: Final = 100
# On every run the retraining workflow launches (value: the workflow run, ``<job_name_prefix>-<run_id>``): the
# execution that launched it monitors it, stops it and plans the next run, so the ``retrain`` action never
# starts a second workflow for it (which would also escape the first one's retraining budget).
RETRAIN_RUN_TAG: Final = "smx-debug:retrain-run"


def hook_trial_uri(output: str, job_name: str) -> str:
    """The trial of ``job_name``'s hook under ``output`` (a DebugHookConfig's S3OutputPath or the job's
    :data:`HOOK_OUTPUT_ENV`): ``<output>/<job>/debug-output/``, where SageMaker uploads a DebugHookConfig's tensors."""
    return "/".join([output.rstrip("/"), job_name, DEBUG_OUTPUT]) + "/"


def _hook_config_part(index: int) -> str:
    return HOOK_CONFIG_ENV if index == 0 else f"{HOOK_CONFIG_ENV}_{index}"


_HOOK_CONFIG_PART = re.compile(re.escape(HOOK_CONFIG_ENV) + r"(?:_[1-9][0-9]*)?")


def is_hook_config_part(name: str) -> bool:
    """Whether ``name`` is one of the variables :func:`hook_config_environment` splits the hook's JSON across."""
    return _HOOK_CONFIG_PART.fullmatch(name) is not None


def hook_config_environment(settings_json: str) -> dict[str, str]:
    """The hook's settings (JSON) as Environment entries of at most :data:`ENVIRONMENT_VALUE_MAX` characters each:
    ``SMX_DEBUG_HOOK`` holds the first, ``SMX_DEBUG_HOOK_1``, ``SMX_DEBUG_HOOK_2``, ... the rest, in order.

    Example:
        >>> hook_config_environment("x" * 600)["SMX_DEBUG_HOOK_1"] == "x" * 88
        True
    """
    step = ENVIRONMENT_VALUE_MAX
    chunks = [settings_json[i:i + step] for i in range(0, len(settings_json), step)] or [""]
    return {_hook_config_part(i): chunk for i, chunk in enumerate(chunks)}


def join_hook_config(environ: Mapping[str, str]) -> str | None:
    """The hook's settings (JSON) joined from the entries :func:`hook_config_environment` made; None without
    ``SMX_DEBUG_HOOK``.

    Raises:
        KeyError: the name of a missing part when a later one is set (a damaged Environment: joined, the JSON
            would be another one).
    """
    parts = {name for name in environ if is_hook_config_part(name)}
    if not parts:
        return None
    joined = []
    for index in range(len(parts)):
        name = _hook_config_part(index)
        if name not in environ:
            raise KeyError(name)
        joined.append(environ[name])
    return "".join(joined)


def is_opted_in(tags: Mapping[str, str], tag_key: str = MANAGED_TAG) -> bool:
    """The opt-in rule: the tag's value equals ``true`` ignoring case, and nothing else (no trimming).

    EventBridge (``equals-ignore-case``) and IAM (``StringEqualsIgnoreCase``) apply exactly this rule, so the
    handler, the event pattern and the policies agree on every value.
    """
    value = tags.get(tag_key)
    return isinstance(value, str) and value.lower() == OPT_IN_VALUE


def is_watched(job_name: str, tags: Mapping[str, str], prefixes: Sequence[str], tag_key: str | None) -> bool:
    """A deployment watches a job whose name starts with one of ``prefixes`` (case-sensitive, as EventBridge's
    ``prefix``) or that is opted in with ``tag_key`` (None: watching by tag is off)."""
    if any(prefix and job_name.startswith(prefix) for prefix in prefixes):
        return True
    return tag_key is not None and is_opted_in(tags, tag_key)


def prefix_pattern(prefixes: Iterable[str]) -> dict[str, Any]:
    """The ``detail`` fragment that matches job names starting with any of ``prefixes``."""
    return {"TrainingJobName": [{"prefix": p} for p in prefixes]}


def opt_in_pattern(tag_key: str = MANAGED_TAG) -> dict[str, Any]:
    """The ``detail`` fragment that matches :func:`is_opted_in` (the event's ``Tags`` is a key -> value map)."""
    return {"Tags": {tag_key: [{"equals-ignore-case": OPT_IN_VALUE}]}}


def watch_pattern(prefixes: Sequence[str], tag_key: str | None) -> dict[str, Any] | None:
    """The EventBridge ``detail`` pattern for :func:`is_watched`; None when the deployment watches nothing."""
    alternatives = []
    if prefixes:
        alternatives.append(prefix_pattern(prefixes))
    if tag_key:
        alternatives.append(opt_in_pattern(tag_key))
    if not alternatives:
        return None
    return alternatives[0] if len(alternatives) == 1 else {"$or": alternatives}


def opt_in_iam_condition(tag_key: str = MANAGED_TAG, *, on: Literal["resource", "request"] = "resource") -> dict[
    str, dict[str, str]
]:
    """The IAM condition block for :func:`is_opted_in` on the job's tags (``resource``) or a request's."""
    prefix = "aws:ResourceTag" if on == "resource" else "aws:RequestTag"
    return {"StringEqualsIgnoreCase": {f"{prefix}/{tag_key}": OPT_IN_VALUE}}


# ------------------------------------------------------------------------------------ events and rules
EVENT_SOURCE: Final = "aws.sagemaker"
DETAIL_TYPE: Final = "SageMaker Training Job State Change"
# RuleEvaluationStatus values (DescribeTrainingJob, the state-change event, our own evaluation); settled = final.
RULE_IN_PROGRESS: Final = "InProgress"
ISSUES_FOUND: Final = "IssuesFound"
NO_ISSUES_FOUND: Final = "NoIssuesFound"
# A rule evaluation's status while it runs and once it settled clean or not (an in-process evaluator's board).
RuleEvaluationStatus = Literal["InProgress", "IssuesFound", "NoIssuesFound"]
RULE_ERROR: Final = "Error"
RULE_STOPPED: Final = "Stopped"
RULE_SETTLED_STATUSES: Final = (NO_ISSUES_FOUND, ISSUES_FOUND, RULE_ERROR, RULE_STOPPED)
# TrainingJobStatus values; ended = the job will not change again.
JOB_IN_PROGRESS: Final = "InProgress"
JOB_STOPPING: Final = "Stopping"
JOB_STOPPED: Final = "Stopped"
JOB_COMPLETED: Final = "Completed"
JOB_FAILED: Final = "Failed"
JOB_ENDED_STATUSES: Final = (JOB_COMPLETED, JOB_FAILED, JOB_STOPPED)
# The retraining state machine's executions: the ends no step of the execution can report (the stack routes
# these events to the notify function).
EXECUTION_EVENT_SOURCE: Final = "aws.states"
EXECUTION_DETAIL_TYPE: Final = "Step Functions Execution Status Change"
UNREPORTED_EXECUTION_STATUSES: Final = ("TIMED_OUT", "ABORTED")

RuleKind = Literal["debugger", "profiler"]
RULE_KINDS: Final[tuple[RuleKind, ...]] = ("debugger", "profiler")
# rule kind -> (DescribeTrainingJob / event status list, configuration list, CreateTrainingJob config field)
RULE_FIELDS: Final[Mapping[RuleKind, tuple[str, str]]] = {
    "debugger": ("DebugRuleEvaluationStatuses", "DebugRuleConfigurations"),
    "profiler": ("ProfilerRuleEvaluationStatuses", "ProfilerRuleConfigurations"),
}

# Who found the issue, as messages show it: Debugger's rule job, or our own evaluator (issue 14).
SOURCE_DEBUGGER: Final = "SageMaker Debugger"
SOURCE_EVALUATOR: Final = "smx-debug evaluator"
TRIGGER_SOURCES: Final = (SOURCE_DEBUGGER, SOURCE_EVALUATOR)

# SageMaker's own name rules, as botocore's service model states them (CreateTrainingJob; a test compares):
# TrainingJobName is 1-63 letters, digits and inner hyphens (so never a path segment like '..', never a '/' or
# a NUL); RuleConfigurationName is 1-256 characters matching '.*', i.e. one line of text.
TRAINING_JOB_NAME_PATTERN: Final = r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
RULE_CONFIGURATION_NAME_MAX_LENGTH: Final = 256
_TRAINING_JOB_NAME: Final = re.compile(TRAINING_JOB_NAME_PATTERN)
_LINE_BREAKS: Final = re.compile("[\n\r\x85\u2028\u2029]")  # what '.' never matches in AWS's (Java's) regexes


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\udc80" decodes to one): no service takes it
        return False
    return True


def is_training_job_name(name: object) -> TypeGuard[str]:
    """``name`` is a SageMaker training job name (the whole string, no trailing newline)."""
    return isinstance(name, str) and _TRAINING_JOB_NAME.fullmatch(name) is not None


def is_rule_configuration_name(name: object) -> TypeGuard[str]:
    """``name`` is a SageMaker RuleConfigurationName: 1-256 characters of one line of UTF-8 text."""
    return (isinstance(name, str) and 1 <= len(name) <= RULE_CONFIGURATION_NAME_MAX_LENGTH
            and _LINE_BREAKS.search(name) is None and _utf8(name))


# ------------------------------------------------------------------------------------------- ledger
LEDGER_KEY_ATTRIBUTE: Final = "pk"  # the table's partition key (string)
# The DynamoDB TTL attribute (epoch seconds, number) that the stack enables on the ledger table. Every item
# carries it: a completed record lives LEDGER_RETENTION_SECONDS (longer than SageMaker's 28-day maximum
# runtime, so a job can never be acted on twice); an abandoned claim lives its lease plus that retention.
LEDGER_TTL_ATTRIBUTE: Final = "expires_at"
# When an action was claimed, how long the claim holds, when it was done (epoch seconds as strings/numbers): the
# ledger writes them, the report reads them.
LEDGER_CLAIMED_AT_ATTRIBUTE: Final = "claimed_at"
LEDGER_LEASE_ATTRIBUTE: Final = "lease_until"
LEDGER_DONE_AT_ATTRIBUTE: Final = "done_at"
LEDGER_RETENTION_SECONDS: Final = 90 * 86_400
# A claim is a lease: after it expires another invocation may take it over. It must outlast the function
# timeout (a holder cannot act after Lambda kills it), and stays short so Lambda's own retries (1 and 2
# minutes after a failure) find it expired.
DEFAULT_FUNCTION_TIMEOUT_SECONDS: Final = 60
DEFAULT_LEASE_SECONDS: Final = 90


def ledger_key(*parts: str) -> str:
    """Join key parts with ``#``, which never occurs in job or rule configuration names."""
    return "#".join(parts)


def stop_key(job_name: str) -> str:
    """One stop per job."""
    return ledger_key(job_name, "stop")


def retrain_key(job_name: str) -> str:
    """One retraining workflow started per job."""
    return ledger_key(job_name, "retrain")


def rule_action_key(job_name: str, kind: RuleKind, rule: str, action: str) -> str:
    """One ``action`` (``metric``, ``notify:<topic>``) per job, rule configuration and IssuesFound."""
    return ledger_key(job_name, f"{kind}:{rule}", ISSUES_FOUND, action)


def retrain_execution_name(job_name: str) -> str:
    """The retraining execution's name for ``job_name``: deterministic, so StartExecution is idempotent.

    Step Functions allows 1-80 characters ``[A-Za-z0-9_-]``; a digest of the full name keeps long or
    similar names apart.
    """
    digest = hashlib.sha256(job_name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "-" for c in job_name)[:56]
    return f"smx-retrain-{safe}-{digest}"


def alarm_key(alarm_name: str, state: str, when: str) -> str:
    """One notification per alarm state change."""
    return ledger_key("alarm", alarm_name, state, when, "notify")


# ------------------------------------------------------------------------------------------- metric
DEFAULT_NAMESPACE: Final = "SmxDebug"
DEFAULT_STACK_NAME: Final = "SmxDebugGuard"  # the guard stack's default name (cdk.json stack_name; fleet's Athena names)
METRIC_NAME: Final = "RuleTriggered"
# Each triggered rule puts one datapoint per dimension set: all rules (for the ["*"] alarm), per rule, per job.
DIMENSION_SETS: Final[tuple[tuple[str, ...], ...]] = ((), ("RuleName",), ("TrainingJobName", "RuleName"))


def metric_dimensions(job_name: str, rule: str) -> list[list[dict[str, str]]]:
    """The ``Dimensions`` of the datapoints for one triggered rule, in :data:`DIMENSION_SETS` order."""
    values = {"TrainingJobName": job_name, "RuleName": rule}
    return [[{"Name": n, "Value": values[n]} for n in dims] for dims in DIMENSION_SETS]


# The scheduled evaluator's per-job failures (issue 20): each run puts, in the deployment's namespace, the number
# of watched jobs that failed for each reason (dimension ``Reason``) and in all (no dimension: the alarm's). A
# failed job keeps its cursor and is tried again next run; only what breaks the whole run fails the invocation.
JOB_ERRORS_METRIC: Final = "EvaluatorJobErrors"
REASON_DIMENSION: Final = "Reason"
JOB_ERROR_REASONS: Final = (
    "access-denied",  # AWS refused a call for this job (its role's policy, a bucket or key policy)
    "throttled",  # still throttled after botocore's retries
    "aws-error",  # any other AWS error, or no answer (timeouts, connections)
    "watch-spec",  # the job's watch spec is missing, unreadable or invalid: the default rules applied
    "bad-data",  # the job's data could not be read or evaluated (e.g. poisoned profiler output)
    "internal",  # anything else: a defect of ours, logged with its traceback
    "out-of-time",  # not started (or its action not claimed): too little of the invocation left (watch.state.RunBudget)
)


# ---------------------------------------------------------------------------------- Lambda environment
class Env:
    """Environment variable names shared by the stack (which sets them) and the handlers (which read them)."""

    NAMESPACE: Final = "SMX_METRIC_NAMESPACE"
    WATCH_PREFIXES: Final = "SMX_WATCH_PREFIXES"
    OPT_IN_TAG: Final = "SMX_OPT_IN_TAG"
    DEFAULT_ACTIONS: Final = "SMX_DEFAULT_ACTIONS"
    LEDGER_TABLE: Final = "SMX_LEDGER_TABLE"
    TOPIC_ARN: Final = "SMX_TOPIC_ARN"
    MAX_ATTEMPTS: Final = "SMX_MAX_ATTEMPTS"
    ACCOUNT: Final = "SMX_ACCOUNT"
    STATE_MACHINE_ARN: Final = "SMX_STATE_MACHINE_ARN"
    # the scheduled evaluator
    CURSOR_TABLE: Final = "SMX_CURSOR_TABLE"
    SPEC_BUCKET: Final = "SMX_SPEC_BUCKET"
    DEFAULT_RULES: Final = "SMX_DEFAULT_RULES"
    WINDOW_MINUTES: Final = "SMX_WINDOW_MINUTES"
    LEASE_SECONDS: Final = "SMX_LEASE_SECONDS"  # ledger claim lease, default DEFAULT_LEASE_SECONDS
    FUNCTION_TIMEOUT: Final = "SMX_FUNCTION_TIMEOUT"  # the function's timeout in seconds (the lease must outlast it)
    SHOW_KEYS: Final = "SMX_SHOW_KEYS"  # comma-separated hyperparameter/environment keys whose values messages may show
    # comma-separated hyperparameter/environment keys whose values never enter a retraining execution's input
    REDACT_KEYS: Final = "SMX_REDACT_KEYS"
    # the fleet dataset (issue 24): the stack's bucket, holding FLEET_PREFIX (the tables) and FLEET_INBOX_PREFIX
    # (the verdict log's lines); unset: nothing is appended
    FLEET_BUCKET: Final = "SMX_FLEET_BUCKET"
    # the evaluator's fan-out: watched jobs per invocation (above it the scheduled run sends shards of at most this
    # many jobs to SHARD_QUEUE_URL, an SQS queue feeding the evaluator), and the schedule's period
    JOBS_PER_INVOCATION: Final = "SMX_JOBS_PER_INVOCATION"
    SHARD_QUEUE_URL: Final = "SMX_SHARD_QUEUE_URL"
    RATE_MINUTES: Final = "SMX_RATE_MINUTES"
    # the fleet collector: "true" when the deployment's evaluator appends its watched jobs' system minutes itself
    EVALUATOR_APPENDS: Final = "SMX_EVALUATOR_APPENDS"


# ------------------------------------------------------------------------ Step Functions history budget
SFN_HISTORY_LIMIT: Final = 25_000  # events per execution; past it the execution fails
DEFAULT_RETRAIN_WAIT_SECONDS: Final = 300
# Events of one loop turn of the retraining state machine: Wait (entered, exited) + Lambda task (entered,
# scheduled, started, succeeded, exited) + Choice (entered, exited).
_EVENTS_PER_POLL: Final = 9
_EVENTS_PER_RUN: Final = 14  # Train task (5) + Choice (2) + slack for retried task attempts
_EVENTS_FIXED: Final = 40  # start, Init, final notify step, end; plus retries


def retrain_history_events(*, wait_seconds: int, max_runtime_seconds: int, max_retraining: int) -> int:
    """The worst-case history length of one retraining execution: polling every ``wait_seconds`` for
    ``max_runtime_seconds`` (the execution's timeout) with ``max_retraining`` launches. Must stay below
    :data:`SFN_HISTORY_LIMIT`; the retrain handler and the stack's config both check it."""
    polls = -(-max_runtime_seconds // max(wait_seconds, 1))
    return _EVENTS_FIXED + polls * _EVENTS_PER_POLL + max_retraining * _EVENTS_PER_RUN


# --------------------------------------------------------------------------------------- console URLs
def partition_of_region(region: str) -> str:
    """``aws``, ``aws-cn`` or ``aws-us-gov`` for a region name."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def console_domain(partition: str) -> str:
    """The AWS console's host suffix in ``partition``."""
    return {
        "aws-cn": "console.amazonaws.cn",
        "aws-us-gov": "console.amazonaws-us-gov.com",
    }.get(partition, "console.aws.amazon.com")


def _console(region: str) -> str:
    return f"https://{region}.{console_domain(partition_of_region(region))}"


def console_job_url(region: str, job_name: str) -> str:
    """The training job's page in the SageMaker console."""
    return f"{_console(region)}/sagemaker/home?region={region}#/jobs/{quote(job_name)}"


RULE_LOG_GROUP: Final = "/aws/sagemaker/ProcessingJobs"


def _cw_fragment(text: str) -> str:
    # The CloudWatch console double-encodes fragment parts: '/' -> %2F -> $252F.
    return quote(quote(text, safe=""), safe="").replace("%", "$")


def rule_logs_url(region: str, processing_job_name: str) -> str:
    """The rule evaluation job's logs: group /aws/sagemaker/ProcessingJobs, stream prefix = job name."""
    return (
        f"{_console(region)}/cloudwatch/home?region={region}#logsV2:log-groups/log-group/"
        f"{_cw_fragment(RULE_LOG_GROUP)}$3FlogStreamNameFilter$3D{_cw_fragment(processing_job_name)}"
    )


def rule_logs_url_from_arn(rule_job_arn: str | None) -> str | None:
    """:func:`rule_logs_url` for a rule evaluation job's ARN (``...:processing-job/<name>``); None if not one."""
    if not rule_job_arn:
        return None
    parts = rule_job_arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sagemaker" or not parts[5].startswith("processing-job/"):
        return None
    name = parts[5].split("/", 1)[1]
    return rule_logs_url(parts[3], name) if name and parts[3] else None


def retrain_max_polls(max_retraining: int) -> int:
    """How many monitor polls one execution may make before its history would reach
    :data:`SFN_HISTORY_LIMIT` (the retrain handler ends the loop, with a message, before that)."""
    return max(0, (SFN_HISTORY_LIMIT - _EVENTS_FIXED - max_retraining * _EVENTS_PER_RUN) // _EVENTS_PER_POLL)


# ------------------------------------------------------------------------------------------- fleet dataset
# The fleet dataset (issue 24): Parquet tables under a root (a folder, or FLEET_PREFIX in the stack's bucket).
# smx_debug.fleet writes them (pyarrow schemas built from these columns), the stack's Glue tables declare them
# (the same columns and types), the named queries read them. Types are Glue/Hive's spelling.
FLEET_PREFIX: Final = "smx-debug/fleet/"
FLEET_HOUR_COLUMN: Final = "hour"  # the partition column of the hourly tables: UTC hour as yyyyMMddHH
FLEET_HOUR_FORMAT: Final = ("%Y%m%d%H", "yyyyMMddHH")  # (strftime, Athena partition projection's date format)
FLEET_TEAM_TAG: Final = "team"  # the training-job tag whose value is the training_jobs table's ``team``
SYSTEM_MINUTES_TABLE: Final = "system_minutes"
VERDICTS_TABLE: Final = "verdicts"
TRAINING_JOBS_TABLE: Final = "training_jobs"


@dataclass(frozen=True)
class FleetTable:
    """One table of the fleet dataset: its columns (name, Glue type), the key a row is unique by (an append
    replaces rows with the same key, so a rerun never doubles them), and the column whose UTC hour partitions
    it (None: one file per job, no partitions)."""

    name: str
    description: str
    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...]
    hour_of: str | None

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)


FLEET_TABLES: Final[Mapping[str, FleetTable]] = {
    t.name: t
    for t in (
        FleetTable(
            SYSTEM_MINUTES_TABLE,
            "One row per job, node, minute and device metric: the minute's mean, min and max. Debugger's profiler "
            "output per device, or CloudWatch's host average (devices = the GPUs or vCPUs it averages).",
            (("job", "string"), ("node", "string"), ("minute", "timestamp"), ("source", "string"),
             ("type", "string"), ("name", "string"), ("dimension", "string"), ("devices", "int"),
             ("value_avg", "double"), ("value_min", "double"), ("value_max", "double"), ("samples", "bigint")),
            ("job", "node", "minute", "source", "name", "dimension"),
            "minute",
        ),
        FleetTable(
            VERDICTS_TABLE,
            "The verdict log: one row per rule trigger (event 'trigger', verdict IssuesFound) and per action taken "
            "on it (event 'action': stop, notify, metric, retrain; verdict its outcome).",
            (("job", "string"), ("rule", "string"), ("rule_type", "string"), ("event", "string"),
             ("verdict", "string"), ("action", "string"), ("source", "string"), ("time", "timestamp"),
             ("detail", "string")),
            ("job", "rule", "event", "action", "time"),
            "time",
        ),
        FleetTable(
            TRAINING_JOBS_TABLE,
            "Training-job metadata, one row per job (the latest DescribeTrainingJob): instance type and count, "
            "the team tag, billable seconds, status, and the instance's list price and GPUs when appended.",
            (("job", "string"), ("instance_type", "string"), ("instance_count", "int"),
             ("gpus_per_instance", "int"), ("price_per_hour", "double"), ("team", "string"), ("tags", "string"),
             ("status", "string"), ("start_time", "timestamp"), ("end_time", "timestamp"),
             ("billable_seconds", "bigint"), ("updated", "timestamp")),
            ("job",),
            None,
        ),
    )
}


# The verdict log's inbox: every producer of verdicts (the action core, for Debugger's events and the evaluator's
# triggers alike) puts one small JSON-lines object per call under FLEET_INBOX_PREFIX; the fleet collector, the
# verdicts table's only writer, compacts them into it and deletes them. One line per row, the verdicts table's
# columns (``time`` as ISO 8601 UTC). Key: ``verdicts/<yyyyMMddHH>/<job>/<digest of the rows>.jsonl``.
FLEET_INBOX_PREFIX: Final = "smx-debug/fleet-inbox/"
# The collector's state (what it last read): one JSON object in the fleet prefix, outside every table's location.
FLEET_STATE_KEY: Final = FLEET_PREFIX + "_state/collector.json"


def job_lease_key(job_name: str) -> str:
    """The evaluator's lease on one job (an item of its cursor table; ``#`` is in no job name): whoever holds it
    evaluates the job, so no two shards or runs evaluate one job at once."""
    return ledger_key("#job-lease", job_name)


def fleet_database_name(stack_name: str) -> str:
    """The Glue database of a deployment's fleet tables (Glue: lowercase letters, digits and underscores)."""
    return "".join(c if c.isalnum() else "_" for c in stack_name.lower()) + "_fleet"


def fleet_workgroup_name(stack_name: str) -> str:
    """The Athena workgroup in which a deployment's fleet queries run."""
    return f"{stack_name}-fleet"


# ---------------------------------------------------------------------------------------------- handlers
def handler_entry(handler: str) -> tuple[str, str]:
    """Where handler ``handler``'s code is: its directory under ``lambdas/`` and the function's Handler setting.

    The four action handlers share ``lambdas/actions/handler.py`` (``handler.<name>``); any other handler (the
    evaluator) is ``lambdas/<name>/handler.py``'s ``handler``. Infrastructure and the local AWS both ask here.
    """
    if handler in ACTION_HANDLERS:
        return "actions", f"handler.{handler}"
    return handler, "handler.handler"


# ------------------------------------------------------------------------------------ rule status details
_DETAILS_STEP = re.compile(r"\bat step (\d{1,18})\b")


def condition_met_details(rule: str, step: int | None, tail: str = "\n") -> str:
    """``StatusDetails`` of a rule that found issues, in SageMaker's words ("... of the rule X at step N resulted in
    the condition being met"); ``tail`` follows them (SageMaker's is a newline)."""
    return f"RuleEvaluationConditionMet: Evaluation of the rule {rule} at step {step} resulted in the condition being met{tail}"


def details_step(details: object) -> int | None:
    """The step in :func:`condition_met_details`' wording, or None (no step, not a string)."""
    if not isinstance(details, str):
        return None
    match = _DETAILS_STEP.search(details[:4096])
    return int(match.group(1)) if match else None
