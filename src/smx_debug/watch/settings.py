"""The evaluator's deployment settings, read from the environment once per cold start (names: contracts.Env)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from smx_debug.contracts import (
    DEFAULT_FUNCTION_TIMEOUT_SECONDS,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_NAMESPACE,
    MANAGED_TAG,
    Env,
)
from smx_debug.errors import ConfigError
from smx_debug.rules.watch_spec import WatchSpec

if TYPE_CHECKING:
    from smx_debug.actions.settings import Settings

# Watched jobs one invocation evaluates (above it the scheduled run fans out). 200 jobs x 4 hosts took 25-35 s on
# the benchmark, inside the 60 s timeout with room for cold starts and throttling; a shard message of this many
# jobs is ~50 kB, under SQS's 256 KiB.
DEFAULT_JOBS_PER_INVOCATION = 200
MAX_JOBS_PER_INVOCATION = 500


def _int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = env.get(name, "") or str(default)
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ConfigError(f"{name}: {raw!r} is not an integer from {low} to {high}", field=name, value=raw)
    return value


@dataclass(frozen=True)
class EvaluatorSettings:
    """What the scheduled evaluator watches and where it keeps its state.

    Attributes:
        watch_prefixes, opt_in_tag: which jobs are watched (contracts.is_watched; None: not by tag).
        cursor_table: DynamoDB table of per-job cursors (partition key ``pk``).
        spec_bucket: the stack's bucket holding the watch specs that jobs name in their evaluator tag.
        default_rules: rules every watched job gets (cdk.json), after its own plan's.
        window_minutes: the longest window any rule looks at; the cursor keeps this many minutes per job.
        overlap_minutes: minutes re-read each run, so datapoints CloudWatch publishes late are still seen.
        settle_seconds: how long after a minute ends before it is read (CloudWatch's publication delay).
        missing_after_minutes: a job running this long without any instance metric is reported as missing data.
        retag_minutes: how often a job's tags (watched or not, which spec) are read again.
        workers: concurrent SageMaker / CloudWatch calls of one run (well under their default request rates).
        metric_namespace: where the run puts its job errors (``EvaluatorJobErrors``): the deployment's namespace.
        lease_seconds: how long a run holds the run lease, and an evaluation its job leases
            (:mod:`smx_debug.watch.run`); must outlast ``function_timeout``, the function's timeout.
        fleet_bucket: the stack's bucket, where each job's system minutes are appended to the fleet dataset
            (:mod:`smx_debug.watch.save`); None: nothing is appended.
        jobs_per_invocation: above this many watched jobs, the scheduled run sends shards of at most this many
            jobs to ``shard_queue_url`` (:mod:`smx_debug.watch.handler`) instead of evaluating them itself.
        shard_queue_url: the SQS queue feeding the evaluator with shards; None: the run evaluates every job.
        rate_minutes: the schedule's period; a shard older than that is dropped (a newer run covers its jobs).
        ended_lookback_minutes: with a fleet bucket, each run appends the last minutes of the watched jobs that
            ended this long ago at most (:mod:`smx_debug.watch.save`); a job's tail that fails is tried again
            until then.
        ended_minutes_per_run: at most this many of an ended job's minutes are appended per run (a long job no
            run saw is caught up over several runs).
    """

    watch_prefixes: tuple[str, ...] = ()
    opt_in_tag: str | None = MANAGED_TAG
    cursor_table: str = "smx-debug-cursors"
    spec_bucket: str | None = None
    default_rules: WatchSpec = field(default_factory=WatchSpec)
    window_minutes: int = 10
    overlap_minutes: int = 2
    settle_seconds: int = 60
    missing_after_minutes: int = 5
    retag_minutes: int = 10
    workers: int = 8
    region: str | None = None
    metric_namespace: str = DEFAULT_NAMESPACE
    function_timeout: int = DEFAULT_FUNCTION_TIMEOUT_SECONDS
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    fleet_bucket: str | None = None
    jobs_per_invocation: int = DEFAULT_JOBS_PER_INVOCATION
    shard_queue_url: str | None = None
    rate_minutes: int = 1
    ended_lookback_minutes: int = 60
    ended_minutes_per_run: int = 30

    def __post_init__(self) -> None:
        if self.lease_seconds <= self.function_timeout:
            raise ConfigError(
                f"{Env.LEASE_SECONDS}: a {self.lease_seconds} s run lease must outlast the function timeout "
                f"({self.function_timeout} s, {Env.FUNCTION_TIMEOUT})",
                field=Env.LEASE_SECONDS, value=self.lease_seconds,
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, actions: Settings | None = None
                 ) -> EvaluatorSettings:
        """Read ``SMX_*`` variables; a bad value fails the cold start with a ConfigError naming the variable.

        The variables the action core reads too (which jobs are watched, the namespace, the region, the function
        timeout and lease, the fleet bucket) are decoded once, by :meth:`smx_debug.actions.settings.Settings.
        from_env`: pass its ``actions`` settings when the cold start has them (the evaluator's handler does)."""
        env = os.environ if environ is None else environ
        if actions is None:
            from smx_debug.actions.settings import Settings  # local: stdlib-only module for debug plans

            actions = Settings.from_env(env)
        shared = actions
        table = env.get(Env.CURSOR_TABLE, "")
        if not table:
            raise ConfigError(f"{Env.CURSOR_TABLE} is not set", field=Env.CURSOR_TABLE, value="")
        rules = env.get(Env.DEFAULT_RULES, "")
        return cls(
            watch_prefixes=shared.watch_prefixes,
            opt_in_tag=shared.opt_in_tag,
            cursor_table=table,
            spec_bucket=env.get(Env.SPEC_BUCKET) or None,
            default_rules=WatchSpec.from_json(rules, source=Env.DEFAULT_RULES) if rules else WatchSpec(),
            window_minutes=_int(env, Env.WINDOW_MINUTES, 10, 3, 60),
            region=shared.region,
            metric_namespace=shared.namespace,
            function_timeout=_whole(Env.FUNCTION_TIMEOUT, shared.function_timeout),
            lease_seconds=_whole(Env.LEASE_SECONDS, shared.lease_seconds),
            fleet_bucket=shared.fleet_bucket,
            jobs_per_invocation=_int(env, Env.JOBS_PER_INVOCATION, DEFAULT_JOBS_PER_INVOCATION, 1,
                                     MAX_JOBS_PER_INVOCATION),
            shard_queue_url=env.get(Env.SHARD_QUEUE_URL) or None,
            rate_minutes=_int(env, Env.RATE_MINUTES, 1, 1, 60),
        )


def _whole(name: str, value: float) -> int:
    """A number of seconds the action settings decoded (and bounded), which the evaluator needs whole."""
    if value != int(value):
        raise ConfigError(f"{name}: {value:g} is not a whole number of seconds", field=name, value=value)
    return int(value)
