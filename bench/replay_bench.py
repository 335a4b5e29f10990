"""Benchmark: exactly-once under replay, concurrency, crashes and throttling (issue 11).

Run ``python bench/replay_bench.py`` (``--quick`` for a smaller run). On the embedded local AWS:

- 30 training jobs: watched by name prefix; opted in by tag in every case variant (``true``, ``True``, ``TRUE``,
  ``tRuE``); not watched (no tag, ``" true"`` with a space, ``false``); rules of both kinds (debugger and
  profiler) in every evaluation status (InProgress, NoIssuesFound, IssuesFound, Error, Stopping, Stopped); jobs
  already finished; rules that ask for notify only; a stop asked by a rule that never fires.
- 500 events: each job's real state-change events (before and after its rules were evaluated), forged ones
  (an opt-in tag or an IssuesFound that SageMaker does not show), duplicates, shuffled.
- Each event is delivered to the three state-change handlers (rule_metrics, stop_training, notify) by a pool
  of threads. 10% of the invocations crash right after winning a ledger claim (a process death: nothing
  releases the claim); 10% of all AWS calls are answered with a throttling error (botocore retries them).
- Failed invocations are redelivered the way Lambda retries them: after the failed round, with the clock
  moved 2 minutes on (past the 90 s claim lease), until none fails.

It prints the counts and checks: every eligible job stopped exactly once, every other job never (StopTrainingJob
calls counted by the local SageMaker), one message per (job, rule, topic) asked for. Baseline: the ideal,
exactly one stop per eligible job (ratio 1.00) and none elsewhere.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import copy
import json
import logging
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse

from smx_debug import local
from smx_debug.actions import (
    Ledger,
    Runtime,
    Settings,
    handle_notify,
    handle_rule_metrics,
    handle_stop_training,
)
from smx_debug.actions.runtime import retry_config
from smx_debug.local import LOCAL_ACCOUNT_ID, LocalAws

HANDLERS: dict[str, Callable[[Any, Runtime], Any]] = {
    "rule_metrics": handle_rule_metrics,
    "stop_training": handle_stop_training,
    "notify": handle_notify,
}
RULE_STATUSES = ("InProgress", "NoIssuesFound", "IssuesFound", "Error", "Stopping", "Stopped")
DEBUG_RULE, PROFILER_RULE, OTHER_RULE = "ExplodingTensor", "LowGPUUtilization-80", "LossNotDecreasing"
LEASE = 90.0
RETRY_DELAY = 120.0  # Lambda retries an async invocation 1 and 2 minutes after a failure


# --- the workload --------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobCase:
    name: str
    tags: Mapping[str, str]
    kind: str  # "debugger" or "profiler": the kind of the rule that may ask for stop
    rule_status: str  # that rule's evaluation status in SageMaker
    other_status: str  # the other rule's status
    finished: bool = False  # the job completed before the events arrive
    watched: bool = True

    @property
    def rule(self) -> str:
        return DEBUG_RULE if self.kind == "debugger" else PROFILER_RULE

    def tokens(self, rule: str) -> set[str]:
        return set(self.tags.get(f"smx-debug:on:{rule}", "").split())

    def eligible(self) -> bool:
        """Stopped exactly once: watched, InProgress, and a rule that asks for stop found issues."""
        firing = {self.rule: self.rule_status, OTHER_RULE: self.other_status}
        asks = any(s == "IssuesFound" and "stop" in self.tokens(r) for r, s in firing.items())
        return self.watched and not self.finished and asks

    def messages(self) -> set[str]:
        """The rules that must produce exactly one message."""
        if not self.watched:
            return set()
        firing = {self.rule: self.rule_status, OTHER_RULE: self.other_status}
        return {r for r, s in firing.items() if s == "IssuesFound" and "notify" in self.tokens(r)}


def job_cases(n_jobs: int) -> list[JobCase]:
    """``n_jobs`` (>= 15) jobs covering every opt-in variant, rule kind and rule status."""
    stop_notify = "stop notify"
    variants: list[tuple[str, dict[str, str], bool]] = [
        ("watch", {}, True),  # watched by prefix
        ("team", {"smx-debug:managed": "true"}, True),
        ("team", {"smx-debug:managed": "True"}, True),
        ("team", {"smx-debug:managed": "TRUE"}, True),
        ("team", {"smx-debug:managed": "tRuE"}, True),
        ("team", {"smx-debug:managed": " true"}, False),  # a space: not opted in
        ("team", {"smx-debug:managed": "false"}, False),
        ("other", {}, False),  # neither
    ]
    cases: list[JobCase] = []
    for i in range(n_jobs):
        prefix, opt_in, watched = variants[i % len(variants)]
        kind = ("debugger", "profiler")[(i // len(variants)) % 2]
        rule = DEBUG_RULE if kind == "debugger" else PROFILER_RULE
        style = i % 5
        tags = {**opt_in}
        if style == 3:  # the firing rule only asks for a message; the other asks for stop but never fires
            tags[f"smx-debug:on:{rule}"] = "notify"
            tags[f"smx-debug:on:{OTHER_RULE}"] = stop_notify
        else:
            tags[f"smx-debug:on:{rule}"] = stop_notify
        rule_status = "IssuesFound" if style in (0, 1, 3) else RULE_STATUSES[i % len(RULE_STATUSES)]
        other_status = RULE_STATUSES[(i + 1) % len(RULE_STATUSES)] if style != 3 else "NoIssuesFound"
        cases.append(
            JobCase(
                name=f"{prefix}-job-{i:02d}",
                tags=tags,
                kind=kind,
                rule_status=rule_status,
                other_status=other_status,
                finished=style == 1 and i % 3 == 0,
                watched=watched,
            )
        )
    return cases


def _create(aws: LocalAws, case: JobCase) -> None:
    local.create_training_job(aws, case.name, case.tags)
    local.set_training_job_status(aws, case.name, "InProgress")


def _statuses(aws: LocalAws, case: JobCase, rule_status: str, other_status: str) -> None:
    main = [local.rule_status(case.rule, rule_status, step=100)]
    other = [local.rule_status(OTHER_RULE, other_status, step=200)]
    if case.kind == "debugger":
        local.set_rule_statuses(aws, case.name, debug=main + other, profiler=[])
    else:
        local.set_rule_statuses(aws, case.name, debug=other, profiler=main)


def build_events(aws: LocalAws, cases: Sequence[JobCase], n_events: int, rng: random.Random) -> list[dict[str, Any]]:
    """Create the jobs and return ``n_events`` shuffled events: real (early and late), forged, duplicated."""
    base: list[dict[str, Any]] = []
    for case in cases:
        _create(aws, case)
        _statuses(aws, case, "InProgress", "InProgress")
        base.append(local.state_change_event(aws, case.name))  # early: nothing found yet
        _statuses(aws, case, case.rule_status, case.other_status)
        late = local.state_change_event(aws, case.name)
        base.append(late)
        forged = copy.deepcopy(late)  # claims an opt-in and an IssuesFound that SageMaker does not show
        forged["id"] = f"forged-{case.name}"
        forged["detail"]["Tags"] = {"smx-debug:managed": "true", f"smx-debug:on:{case.rule}": "stop notify",
                                    f"smx-debug:on:{OTHER_RULE}": "stop notify"}
        for status_list in ("DebugRuleEvaluationStatuses", "ProfilerRuleEvaluationStatuses"):
            for entry in forged["detail"].get(status_list) or []:
                entry["RuleEvaluationStatus"] = "IssuesFound"
        base.append(forged)
        if case.finished:
            local.set_training_job_status(aws, case.name, "Completed")
    events = base + [copy.deepcopy(e) for e in rng.choices(base, k=max(0, n_events - len(base)))]
    rng.shuffle(events)
    return events[:n_events] if n_events >= len(base) else events


# --- faults --------------------------------------------------------------------------------------


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


_THROTTLE_BODIES = {
    "json": (b'{"__type":"ThrottlingException","message":"Rate exceeded"}', "application/x-amz-json-1.1"),
    "query": (b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message>"
              b"</Error><RequestId>1</RequestId></ErrorResponse>", "text/xml"),
}


class Throttler:
    """Answers ``rate`` of the HTTP attempts of the clients it is attached to with the service's throttling
    error (HTTP 400), before they reach the local AWS; botocore's standard retry mode retries them."""

    def __init__(self, rate: float, seed: int) -> None:
        self.rate, self._random, self._lock = rate, random.Random(seed), threading.Lock()
        self.attempts = self.throttled = 0

    def attach(self, client: Any) -> Any:
        model = client.meta.service_model
        body, content_type = _THROTTLE_BODIES.get(model.protocol, _THROTTLE_BODIES["json"])

        def hook(request: Any, **_: Any) -> AWSResponse | None:
            with self._lock:
                self.attempts += 1
                hit = self._random.random() < self.rate
                self.throttled += hit
            return AWSResponse(request.url, 400, {"Content-Type": content_type}, _Raw(body)) if hit else None

        client.meta.events.register(f"before-send.{model.service_id.hyphenize()}", hook)
        return client


class Crash(BaseException):
    """A process death right after a claim (Lambda timeout, out of memory): no cleanup runs."""


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


class CrashingLedger(Ledger):
    """The DynamoDB ledger of one invocation; with ``crash`` the invocation dies right after its first claim
    (holding it if it won: nothing releases it, only the lease running out frees it)."""

    def __init__(self, *args: Any, crash: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.crash, self.claimed, self.held = crash, False, False

    def claim_or_holder(self, pk: str, record: Mapping[str, object]) -> dict[str, str] | None:
        holder = super().claim_or_holder(pk, record)
        self.claimed = True
        if self.crash:
            self.crash, self.held = False, holder is None
            raise Crash(pk)
        return holder


# --- the replay ----------------------------------------------------------------------------------

_clients: dict[tuple[int, str], Any] = {}
_clients_lock = threading.Lock()


def _client(aws: LocalAws, service: str) -> Any:
    """A plain client (building one parses the service model: SageMaker's takes ~0.5 s)."""
    with _clients_lock:
        if (id(aws), service) not in _clients:
            _clients[(id(aws), service)] = aws.client(service)
        return _clients[(id(aws), service)]


def _throttled_clients(aws: LocalAws, throttler: Throttler) -> Callable[[str], Any]:
    """The handlers' clients: their retry settings (3 attempts, 2 s / 5 s timeouts) and the throttler."""
    made: dict[str, Any] = {}
    lock = threading.Lock()

    def factory(service: str) -> Any:
        with lock:
            if service not in made:
                made[service] = throttler.attach(aws.client(service, config=retry_config(3, 2.0, 5.0)))
            return made[service]

    return factory


@dataclass
class Report:
    events: int = 0
    invocations: int = 0
    claimed: int = 0  # invocations that reached a claim
    crashes: int = 0
    crashes_holding: int = 0  # crashed while holding a claim they had won
    rounds: list[dict[str, int]] = field(default_factory=list)
    aws_attempts: int = 0
    throttled: int = 0
    seconds: float = 0.0
    eligible: int = 0
    stopped_once: int = 0
    wrong_stops: dict[str, int] = field(default_factory=dict)
    messages_expected: int = 0
    messages_ok: int = 0
    wrong_messages: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (self.stopped_once == self.eligible and not self.wrong_stops
                and self.messages_ok == self.messages_expected and not self.wrong_messages)


def replay(aws: LocalAws, *, n_jobs: int = 30, n_events: int = 500, threads: int = 8, crash_rate: float = 0.1,
           throttle_rate: float = 0.1, seed: int = 20261123, table: str = "smx-replay-ledger") -> Report:
    """Run the replay on ``aws`` (a started LocalAws) and check the outcome; see the module docstring."""
    local.install(aws)
    rng = random.Random(seed)
    ddb, sns, sqs = _client(aws, "dynamodb"), _client(aws, "sns"), _client(aws, "sqs")
    ddb.create_table(TableName=table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")
    topic = sns.create_topic(Name=f"{table}-topic")["TopicArn"]
    queue = local.subscribe_queue(aws, topic, f"{table}-inbox")

    cases = job_cases(n_jobs)
    events = build_events(aws, cases, n_events, rng)
    throttler, clock = Throttler(throttle_rate, seed), Clock()
    settings = Settings(watch_prefixes=("watch-",), ledger_table=table, topic_arn=topic, region=aws.region,
                        account=LOCAL_ACCOUNT_ID, lease_seconds=LEASE, actor="replay")
    report = Report(events=len(events))

    clients = _throttled_clients(aws, throttler)

    def invoke(name: str, event: dict[str, Any], crash: bool) -> tuple[str, CrashingLedger]:
        ledger = CrashingLedger(clients("dynamodb"), table, clock, lease_seconds=LEASE, crash=crash)
        runtime = Runtime(settings=settings, clients=clients, ledger=ledger)
        try:
            HANDLERS[name](copy.deepcopy(event), runtime)
        except Crash:
            return "crash", ledger
        except Exception as exc:  # the platform's view: the invocation failed, so it is redelivered
            return type(exc).__name__, ledger
        return "ok", ledger

    pending = [(name, event) for event in events for name in HANDLERS]
    started = time.perf_counter()
    while pending and len(report.rounds) < 12:
        crashes = [rng.random() < crash_rate for _ in pending]
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            results = list(pool.map(lambda job: invoke(*job[0], job[1]), zip(pending, crashes, strict=True)))
        outcomes = [outcome for outcome, _ in results]
        report.claimed += sum(ledger.claimed for _, ledger in results)
        report.crashes_holding += sum(ledger.held for _, ledger in results)
        report.invocations += len(pending)
        counts = collections.Counter(outcomes)
        report.crashes += counts["crash"]
        report.rounds.append(dict(counts))
        pending = [p for p, outcome in zip(pending, outcomes, strict=True) if outcome != "ok"]
        clock.now += RETRY_DELAY
    report.seconds = time.perf_counter() - started
    report.aws_attempts, report.throttled = throttler.attempts, throttler.throttled

    for case in cases:
        calls = local.stop_calls(aws, case.name)
        if case.eligible():
            report.eligible += 1
            report.stopped_once += calls == 1
        if calls != int(case.eligible()):
            report.wrong_stops[case.name] = calls
    seen = collections.Counter()
    while True:
        batch = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
        if not batch:
            break
        for message in batch:
            subject = json.loads(message["Body"])["Subject"]
            seen[subject] += 1
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    expected = {f"smx-debug: {rule} found issues in {case.name}" for case in cases for rule in case.messages()}
    report.messages_expected = len(expected)
    report.messages_ok = sum(1 for subject in expected if seen[subject] == 1)
    report.wrong_messages = {s: n for s, n in seen.items() if s not in expected or n != 1}
    if len(report.rounds) >= 12 and pending:
        report.wrong_stops["(undelivered after 12 rounds)"] = len(pending)
    return report


def print_report(report: Report) -> None:
    print(f"  events {report.events} x {len(HANDLERS)} handlers; invocations {report.invocations} "
          f"(with redeliveries) in {report.seconds:.1f} s")
    for i, counts in enumerate(report.rounds):
        print(f"  round {i} (+{i * RETRY_DELAY:.0f} s): " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"  injected: {report.crashes} crashes right after a claim ({report.crashes / max(report.claimed, 1):.1%} "
          f"of the {report.claimed} invocations that claimed; {report.crashes_holding} died holding the claim); "
          f"{report.throttled} of {report.aws_attempts} AWS "
          f"attempts throttled ({report.throttled / max(report.aws_attempts, 1):.1%})")
    print(f"  eligible jobs stopped exactly once: {report.stopped_once}/{report.eligible} "
          f"(ratio {report.stopped_once / max(report.eligible, 1):.2f}, baseline 1.00); "
          f"other jobs stopped: {sum(report.wrong_stops.values())} (baseline 0)")
    print(f"  messages exactly once: {report.messages_ok}/{report.messages_expected}; "
          f"unexpected or repeated: {len(report.wrong_messages)}")
    if report.wrong_stops or report.wrong_messages:
        print(f"  WRONG: stops {report.wrong_stops} messages {report.wrong_messages}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="12 jobs, 120 events")
    parser.add_argument("--threads", type=int, default=8)
    args, _ = parser.parse_known_args(argv)
    n_jobs, n_events = (12, 120) if args.quick else (30, 500)
    logging.getLogger("smx_debug.actions").setLevel(logging.CRITICAL)  # one JSON line per invocation otherwise
    with LocalAws() as aws:
        report = replay(aws, n_jobs=n_jobs, n_events=n_events, threads=args.threads)
    print_report(report)
    print(f"replay_bench: {'OK' if report.ok else 'FAILED'}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
