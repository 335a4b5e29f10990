"""The run's state: the cursors it keeps per job between runs, and what it works with and yields between its steps.

Below every step of the pipeline (:mod:`smx_debug.watch.run`: lease, discover, read, evaluate, act, save), each of
which reads the cursors and records into the report: the per-job :class:`Cursor` and the :class:`CursorStore` that
holds them and the leases; the run's AWS :class:`Clients`, its time bound (:class:`RunBudget`), each watched job's
:class:`RunOutcome` and the run's :class:`RunReport`. The triggers are the action core's
:class:`smx_debug.actions.verify.Trigger`.

Cursors (DynamoDB): what the evaluator knows about a job and the data it has read so far. One item per watched training job (partition key ``pk`` = job name; an unwatched job has none). It holds the
job's facts read once (hosts, instance type, metric definitions, the rules it gets), ``through`` (epoch seconds: data
before it has been read), the last ``window_minutes`` of datapoints (compressed JSON, a few kB), the rule
configurations that already fired and, for a job with tensor rules, their state and the next step to read
(``tensors``, compressed, at most :data:`smx_debug.watch.evaluate.STATE_BUDGET` bytes of DynamoDB's 400 KB item).
Each run reads all cursors with BatchGetItem (100 a call) and writes the changed ones with BatchWriteItem (25 a call), so the cost of a run does not grow with a job's length. Items
expire (DynamoDB TTL on ``expires_at``) a week after their job was last seen running. The same table holds the
run lease (:data:`RUN_LEASE_KEY`) and the job leases (:func:`smx_debug.contracts.job_lease_key`),
deleted in the same BatchWriteItem calls that save the cursors. An item that cannot be read (not JSON, nested too
deep, a window that is not zlib) is logged and its job starts over, as after another version's item: one damaged
item never fails every run.

Time bound (:class:`RunBudget`): an evaluation starts work only while its worst case fits in what is left of the
invocation, after a margin kept for the finish.

Lambda kills an invocation at its timeout: a run killed mid-way saves no cursor, puts no job error and leaves its
leases held until they expire, and the next run redoes the same work from the same cursors (and may be killed
again). So every evaluation (a whole run's or a shard's, :func:`smx_debug.watch.run.evaluate_jobs`) holds a
:class:`RunBudget` over the invocation's :class:`~smx_debug.actions.runtime.Deadline` (Lambda's
``get_remaining_time_in_millis``; ``call_seconds``: one AWS call's worst case, botocore's retries x timeouts,
:func:`smx_debug.actions.settings.call_budget_seconds`, 24 s by default):

- **the margin** (:attr:`RunBudget.reserve`) is one call's worst case: it is kept for what always happens at the
  end (the cursors saved and the job leases released in the same BatchWriteItem calls, the run lease released, the
  job errors put: a few calls that normally take milliseconds; the margin lets one of them go through its retries);
- **a step that makes AWS calls for many jobs** (the job leases, discovery, the CloudWatch read, the profiler
  read, the fleet append) starts only while one call's worst case fits before the margin;
- **a job's own step** (its rules, its tensors, its actions) starts only while the longest job step measured in
  this run still fits (a job that reads tensors: at least one call's worst case); the measure is what Lambda's
  clock lost during the step, so a slow S3 or an action core that waited shows at once;
- **the action core** gets the invocation's deadline less the margin (:meth:`RunBudget.for_actions`): a claim or
  an action whose call would not fit before the margin is not started (the ledger then does the rest next run).

A job that could not be started keeps its cursor, is counted under ``out-of-time`` (``EvaluatorJobErrors``) and,
being the furthest behind, goes first in the next run. Without a deadline (a direct call, a test, the demo)
nothing is bounded.
"""

from __future__ import annotations

import json
import logging
import math
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from smx_debug import _json as bounded_json
from smx_debug.actions.ledger import Ledger
from smx_debug.actions.runtime import Deadline
from smx_debug.actions.verify import Trigger
from smx_debug.contracts import LEDGER_KEY_ATTRIBUTE, LEDGER_TTL_ATTRIBUTE, job_lease_key
from smx_debug.data.job_errors import AWS_ERROR, INTERNAL, OUT_OF_TIME, JobError, job_error, reason_of
from smx_debug.rules.watch_spec import WatchedRule

CURSOR_RETENTION_SECONDS = 7 * 24 * 3600
RUN_LEASE_KEY = "#evaluator-run"  # the run lease's item (no job name can be it: SageMaker names have no "#")
_log = logging.getLogger(__name__)
_FORMAT = 3  # 3: the tensor rules' state (2: watched jobs only; 1 kept unwatched jobs too): older items start over
# epoch minute -> value, per host and metric (instance data) or per metric name (training data)
Window = dict[str, dict[str, dict[int, float]]]


@dataclass(frozen=True)
class Cursor:
    """What the evaluator keeps per job between runs."""

    job: str
    checked_at: float  # when its tags (opt-in, spec) were last read
    info: Mapping[str, Any] = field(default_factory=dict)  # hosts, instance_type, metrics, spec, ...
    through: int | None = None  # epoch seconds, a minute boundary: data before it was read
    data: Window = field(default_factory=dict)  # {"host:algo-1": {"CPUUtilization": {minute: value}}, "train": ...}
    fired: Mapping[str, int | None] = field(default_factory=dict)  # configuration name -> step it fired at
    tensors: bytes | None = None  # the tensor rules' state and next step (smx_debug.watch.evaluate), compressed
    # info["rules"] decoded and checked once, when the cursor is read or its rules change (None: decode them)
    rules: tuple[WatchedRule, ...] = field(default=None, compare=False, repr=False)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        if self.rules is None:
            object.__setattr__(self, "rules", tuple(
                WatchedRule(r["name"], r["rule"], r.get("parameters", {})) for r in self.info.get("rules", [])))

    def with_changes(self, **changes: Any) -> Cursor:
        """A copy with ``changes``; its typed rules are kept unless ``info`` brings other ones."""
        if "info" in changes and "rules" not in changes and changes["info"].get("rules") is not self.info.get("rules"):
            changes["rules"] = None
        return replace(self, **changes)


def _encode_window(data: Window) -> bytes:
    plain = {s: {m: [[int(t), float(v)] for t, v in sorted(pts.items())] for m, pts in ms.items()} for s, ms in data.items()}
    return zlib.compress(json.dumps(plain, separators=(",", ":")).encode(), 6)


def _decode_window(blob: bytes) -> Window:
    plain = bounded_json.loads(zlib.decompress(blob))
    return {s: {m: {int(t): float(v) for t, v in pts} for m, pts in ms.items()} for s, ms in plain.items()}


def _to_item(cursor: Cursor, now: float) -> dict[str, Any]:
    item: dict[str, Any] = {
        LEDGER_KEY_ATTRIBUTE: {"S": cursor.job},
        "format": {"N": str(_FORMAT)},
        "checked_at": {"N": repr(float(cursor.checked_at))},
        "info": {"S": json.dumps(dict(cursor.info), sort_keys=True, separators=(",", ":"))},
        "fired": {"S": json.dumps(dict(cursor.fired), sort_keys=True)},
        "updated_at": {"N": str(int(now))},
        LEDGER_TTL_ATTRIBUTE: {"N": str(int(now) + CURSOR_RETENTION_SECONDS)},
    }
    if cursor.through is not None:
        item["through"] = {"N": str(int(cursor.through))}
    if cursor.data:
        item["data"] = {"B": _encode_window(cursor.data)}
    if cursor.tensors:
        item["tensors"] = {"B": cursor.tensors}
    return item


def _from_item(item: Mapping[str, Any]) -> Cursor | None:
    if int(item.get("format", {}).get("N", "0")) != _FORMAT:
        return None  # written by another version: start over for this job
    try:
        info, fired = bounded_json.loads(item["info"]["S"]), bounded_json.loads(item["fired"]["S"])
        if not isinstance(info, dict) or not isinstance(fired, dict):
            raise ValueError("info and fired must be JSON objects")
        return Cursor(
            job=item[LEDGER_KEY_ATTRIBUTE]["S"],
            checked_at=float(item["checked_at"]["N"]),
            info=info,
            through=int(item["through"]["N"]) if "through" in item else None,
            data=_decode_window(item["data"]["B"]) if "data" in item else {},
            fired=fired,
            tensors=item["tensors"]["B"] if "tensors" in item else None,
        )
    except (ValueError, KeyError, TypeError, AttributeError, zlib.error) as exc:  # ValueError: also nested too
        # deep, and a rule that is not one (ConfigError)
        # A damaged item would fail every run that reads it: the job starts over, as after another version's item.
        _log.warning("evaluator: cursor of %r cannot be read (%s: %s); the job starts over",
                     str(item.get(LEDGER_KEY_ATTRIBUTE, {}).get("S", "?"))[:100], type(exc).__name__, str(exc)[:200])
        return None


class CursorStore:
    """Batched reads and writes of :class:`Cursor` items in one table (an injected DynamoDB client)."""

    def __init__(self, table: str, dynamodb: Any, *, clock: Any = time.time, max_rounds: int = 8) -> None:
        self.table = table
        self.dynamodb = dynamodb
        self.clock = clock
        self.max_rounds = max_rounds

    def load(self, jobs: Iterable[str]) -> dict[str, Cursor]:
        """The cursors of ``jobs`` that exist (BatchGetItem, 100 keys a call, unprocessed keys retried)."""
        names = list(dict.fromkeys(jobs))
        out: dict[str, Cursor] = {}
        for i in range(0, len(names), 100):
            request: dict[str, Any] = {
                self.table: {"Keys": [{LEDGER_KEY_ATTRIBUTE: {"S": n}} for n in names[i : i + 100]], "ConsistentRead": True}
            }
            for response in self._until_processed(self.dynamodb.batch_get_item, request, "UnprocessedKeys", "keys"):
                for item in response.get("Responses", {}).get(self.table, []):
                    cursor = _from_item(item)
                    if cursor is not None:
                        out[cursor.job] = cursor
        return out

    def claim_run(self, *, lease_seconds: int) -> bool:
        """Take the run lease (:data:`RUN_LEASE_KEY`, the action ledger's lease claim for ``lease_seconds``): False
        when another run holds it."""
        now = self.clock()
        return self._leases(now, lease_seconds).claim(RUN_LEASE_KEY, {"run_at": now})

    def release_run(self) -> None:
        """Give the run lease back (AWS errors propagate: the caller reports them; the lease then expires)."""
        self._leases(self.clock(), 1).release(RUN_LEASE_KEY)

    def _leases(self, now: float, lease_seconds: int) -> Ledger:
        return Ledger(self.dynamodb, self.table, clock=lambda: now, lease_seconds=lease_seconds,
                      retention_seconds=86_400)

    def claim(self, jobs: Iterable[str], *, lease_seconds: int, workers: int = 8) -> set[str]:
        """The jobs whose lease (:func:`smx_debug.contracts.job_lease_key`) this evaluation now holds, for
        ``lease_seconds`` (conditional PutItems, overlapped); the others are held by an evaluation still going
        (another shard, a slow run). :meth:`save` or :meth:`release` gives them back."""
        now = self.clock()
        names = list(dict.fromkeys(jobs))
        leases = self._leases(now, lease_seconds)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            won = list(pool.map(lambda n: leases.claim(job_lease_key(n), {"run_at": now}), names))
        return {n for n, ok in zip(names, won, strict=True) if ok}

    def save(self, cursors: Iterable[Cursor], *, release: Iterable[str] = ()) -> int:
        """Write ``cursors`` and delete the items ``release`` names (the evaluation's job leases) in the same
        BatchWriteItem calls (25 requests a call, unprocessed ones retried); returns the cursors written."""
        now = self.clock()
        items: list[dict[str, Any]] = [{"PutRequest": {"Item": _to_item(c, now)}} for c in cursors]
        written = len(items)
        items += [{"DeleteRequest": {"Key": {LEDGER_KEY_ATTRIBUTE: {"S": key}}}} for key in dict.fromkeys(release)]
        self._write(items)
        return written

    def release(self, keys: Iterable[str]) -> None:
        """Delete the items ``keys`` names (job leases), swallowing nothing: the caller decides."""
        self._write([{"DeleteRequest": {"Key": {LEDGER_KEY_ATTRIBUTE: {"S": key}}}} for key in dict.fromkeys(keys)])

    def _write(self, items: list[dict[str, Any]]) -> None:
        for i in range(0, len(items), 25):
            request: dict[str, Any] = {self.table: items[i : i + 25]}
            for _ in self._until_processed(self.dynamodb.batch_write_item, request, "UnprocessedItems", "items"):
                pass

    def _until_processed(
        self, call: Callable[..., Mapping[str, Any]], request: dict[str, Any], unprocessed: str, what: str
    ) -> Iterator[Mapping[str, Any]]:
        """Each response of ``call(RequestItems=...)``, re-sent with what DynamoDB left ``unprocessed`` until
        nothing is left; RuntimeError after ``max_rounds`` calls."""
        for _ in range(self.max_rounds):
            response = call(RequestItems=request)
            yield response
            request = response.get(unprocessed) or {}
            if not request:
                return
            time.sleep(0.05)
        raise RuntimeError(f"DynamoDB left {what} of {self.table} unprocessed after {self.max_rounds} rounds")


# ------------------------------------------------------------------ what a run works with and yields
ENDED = "ended"  # a RunOutcome status: the ended job's last minutes are appended, its cursor marked complete


@dataclass(frozen=True)
class Clients:
    """The AWS clients a run uses (injected; the handler builds them once per cold start)."""

    sagemaker: Any
    cloudwatch: Any
    dynamodb: Any
    s3: Any


@dataclass
class RunOutcome:
    """What a run did for one watched job: status ``evaluated``, ``no data``, ``failed`` (an error stopped it;
    its cursor did not advance) or ``held`` (another evaluation holds its job lease), its triggers, notes, the
    action core's answer and the errors met."""

    job: str
    status: str = "skipped"
    triggers: list[Trigger] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    response: Mapping[str, Any] | None = None
    errors: list[JobError] = field(default_factory=list)

    def fail(self, error: JobError) -> None:
        """Record an error that ends this job's run (its cursor keeps its data and ``through``)."""
        self.status = "failed"
        self.record(error)

    def fail_on(self, exc: BaseException, *, doing: str, otherwise: str = INTERNAL) -> None:
        """Fail the job for ``exc``, met while ``doing`` (its reason: the AWS error's, else ``otherwise``)."""
        self.fail(job_error(exc, job=self.job, doing=doing, otherwise=otherwise))

    def record(self, error: JobError) -> None:
        """Record an error the job survived (a bad watch spec: the default rules applied)."""
        self.errors.append(error)
        self.notes.append(error.message)


@dataclass
class RunReport:
    """A run's summary: jobs seen, evaluated, failed and triggered, and what it asked AWS for.

    ``errors`` are the run's own problems that did not fail it (the opt-in Search, the lease release);
    ``skipped`` says why the run did nothing (another run held the lease).
    """

    now: float
    running: int = 0
    watched: int = 0
    outcomes: dict[str, RunOutcome] = field(default_factory=dict)
    metrics_requested: int = 0
    datapoints: int = 0
    get_metric_data_calls: int = 0
    errors: list[JobError] = field(default_factory=list)
    skipped: str | None = None
    shards: int = 0

    @property
    def triggers(self) -> list[Trigger]:
        return [t for o in self.outcomes.values() for t in o.triggers]

    def out_of_time(self, jobs: Iterable[str], why: str) -> None:
        """Fail each of ``jobs`` ``out-of-time`` (its outcome made when the run had none yet): not started, so its
        cursor is kept and it goes first next run (:class:`RunBudget`)."""
        for job in jobs:
            self.outcomes.setdefault(job, RunOutcome(job=job)).fail(JobError(OUT_OF_TIME, why))

    def fail_unfinished(self, jobs: Iterable[str], exc: BaseException, *, of: str, doing: str) -> None:
        """Fail each of ``jobs`` not finished yet (evaluated, without data, held or failed) for ``exc``, which
        broke the evaluation ``of`` (a shard) while ``doing``: one error, counted once per job."""
        error = job_error(exc, job=of, doing=doing)
        for job in jobs:
            outcome = self.outcomes.setdefault(job, RunOutcome(job=job))
            if outcome.status not in ("evaluated", "no data", "held", "failed"):
                outcome.fail(error)

    def run_error(self, exc: BaseException, message: str) -> None:
        """Record an AWS error of the run's own (not a job's) that did not fail it."""
        self.errors.append(JobError(reason_of(exc, AWS_ERROR), message))

    def run_out_of_time(self, message: str) -> None:
        """Record a step of the run's own left to the next run for time."""
        self.errors.append(JobError(OUT_OF_TIME, message))

    def error_counts(self) -> dict[str, int]:
        """This run's errors by reason: each job counted once per reason, plus the run's own."""
        reasons = [r for o in self.outcomes.values() for r in dict.fromkeys(e.reason for e in o.errors)]
        return dict(Counter(reasons + [e.reason for e in self.errors]))

    def summary(self) -> dict[str, Any]:
        """JSON-able, for the Lambda's log line and return value."""
        return {
            "running": self.running,
            "watched": self.watched,
            "evaluated": sum(o.status == "evaluated" for o in self.outcomes.values()),
            "failed": {j: [e.reason for e in o.errors] for j, o in self.outcomes.items() if o.status == "failed"},
            "job_errors": self.error_counts(),
            "triggers": [{"job": j, "rule": t.rule, "step": t.step} for j, o in self.outcomes.items() for t in o.triggers],
            "problems": {j: o.notes for j, o in self.outcomes.items() if o.notes},
            "metrics_requested": self.metrics_requested,
            "get_metric_data_calls": self.get_metric_data_calls,
            "held": sorted(j for j, o in self.outcomes.items() if o.status == "held"),
            "ended": sorted(j for j, o in self.outcomes.items() if o.status == ENDED),
            "errors": [e.message for e in self.errors],
            "skipped": self.skipped,
            "shards": self.shards,
        }


@dataclass
class RunBudget:
    """What is left of one invocation for an evaluation's work, and the longest job step measured so far."""

    deadline: Deadline | None = None
    longest: float = 0.0

    @property
    def bounded(self) -> bool:
        return self.deadline is not None and self.deadline.remaining_ms is not None

    @property
    def call_seconds(self) -> float:
        """One AWS call's worst case (0 when unbounded)."""
        return self.deadline.call_seconds if self.deadline is not None and self.bounded else 0.0

    @property
    def reserve(self) -> float:
        """Seconds kept for the finish: one call's worst case."""
        return self.call_seconds

    def left(self) -> float:
        """Seconds left for work, the margin kept (infinite when unbounded)."""
        return self.deadline.left() - self.reserve if self.deadline is not None and self.bounded else math.inf

    def short_of(self, need: float) -> str | None:
        """None if ``need`` seconds fit before the margin, else why the work is not started."""
        left = self.left()
        if left >= need:
            return None
        return (f"not started: {left + self.reserve:.1f} s of the invocation left, {self.reserve:g} s of them kept "
                f"to save cursors, release leases and put job errors, and this may take {need:.3g} s; tried "
                "again next run from its cursor (the jobs furthest behind go first)")

    def short_of_call(self) -> str | None:
        """None if one AWS call's worst case fits before the margin."""
        return self.short_of(self.call_seconds)

    def short_of_job(self, *, calls: bool) -> str | None:
        """None if a job's step fits: the longest measured in this run, at least one call if the step makes calls."""
        return self.short_of(max(self.longest, self.call_seconds if calls else 0.0))

    @contextmanager
    def step(self) -> Iterator[None]:
        """Measure one job's step on the invocation's clock (its longest becomes the next jobs' estimate)."""
        before = self.left()
        try:
            yield
        finally:
            if self.bounded:
                self.longest = max(self.longest, before - self.left())

    def for_actions(self) -> Deadline | None:
        """The action core's deadline: the invocation's, less the margin (None when unbounded)."""
        return None if self.deadline is None else self.deadline.keeping(self.reserve)
