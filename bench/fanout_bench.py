"""Benchmark: the deployed evaluator fanning out over 2,000 running jobs x 4 hosts on the local AWS.

Run ``python bench/fanout_bench.py`` (``--quick``: 60 jobs, shards of 20). The guard stack is synthesized and
deployed into the local AWS with ``evaluator.jobs_per_invocation`` 200 and ``evaluator.max_concurrency`` 10; the
account runs 2,000 watched jobs (``ml.g4dn.12xlarge`` x 4 hosts, 12 minutes of CloudWatch instance and training
metrics each, as SageMaker publishes them) and 20 of another team's. Each run is the schedule's invocation (the
run lists, decides and sends shards) and then the shard queue's event source mapping (``local.event_sources``,
Lambda's pollers: batch size 1, at most the mapping's maximum concurrency at once) evaluating every shard as the
deployed function, every call authorized by the local IAM. Run 1 meets every job; run 2, after the jobs' minutes
have caught up with the clock (the deployed functions read real time), is the steady state; then the fleet
collector runs once.

Printed per run: the planner's wall time, each shard's wall time (min / median / max; the local pollers run the
shards one at a time here, ``poll(threads=1)``, so each shard's time is its own, not shared with nine others on this
2-core machine: tests/functional/local and tests/functional/infra check they run in parallel; the stack is deployed
with ``rate_minutes`` 10 so the last shard is not older than the period, and dropped as stale, when its turn
comes), the local run's wall
time (planner + every shard in turn), AWS calls per
watched job by API (from the local IAM's records), and the cost per watched job-day (``smx_debug.pricing``:
GetMetricData per metric requested, Lambda arm64 per GB-second of the shards' time and per request, DynamoDB, S3
and SQS per request). On AWS the shards run in parallel, so a run's wall time there is the planner's plus
ceil(shards / max_concurrency) times the slowest shard: that projection is printed beside the local figure.

Targets: every watched job evaluated exactly once per run (no job held, failed or in two shards), no IAM denial,
another team untouched, the slowest shard of the steady-state
run under the function's 60 s timeout, and the projected wall time of a run under the 60 s schedule period.
Baseline: one invocation looping over every job (issue 24: 200 jobs in 25 s, so 2,000 jobs would need ~250 s,
over the 60 s timeout): the ratio of the projected fan-out wall time to that loop is printed.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import HOSTS, bench_parser, publish_job_minutes, start_running_job

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 60.0
MINUTES = 12
LOOP_S_PER_JOB = 25.0 / 200  # issue 24's figure: one invocation, 200 jobs x 4 hosts, 25 s
MEMORY_MB = 1024
RUNS_PER_DAY = 1440


def _deploy(aws: Any, tmp: Path, per_invocation: int, concurrency: int) -> Any:
    from infra.cdk_app import build_app
    from smx_debug.local import deploy_stack

    context = {"local": True, "watch_prefixes": ["bench-"], "retraining": False, "default_actions": ["notify"],
               # rate 10 minutes: the local pollers run the shards one after another (below), and a shard older
               # than the period would be dropped as stale; AWS runs them at once (costs are priced at one a minute)
               "evaluator": {"jobs_per_invocation": per_invocation, "max_concurrency": concurrency, "rate_minutes": 10,
                             "default_rules": [{"rule": "CPUBottleneck"}, {"rule": "LowGPUUtilization"},
                                               {"rule": "LossNotDecreasing"}, {"rule": "Overtraining"}]}}
    build_app(context, outdir=str(tmp), nag=False).synth()
    return deploy_stack(aws, tmp / "SmxDebugGuard.template.json", stack_name="SmxDebugGuard")


def _jobs(aws: Any, bucket: str, count: int, start: datetime) -> list[str]:
    from smx_debug import local

    names, role = [f"bench-{i:04d}" for i in range(count)], local.execution_role(aws)
    for i, name in enumerate(names):
        start_running_job(aws, name, role=role, seed=i, start=start, minutes=MINUTES, output=f"s3://{bucket}/o",
                          profiler={"DisableProfiler": True}, tags=[{"Key": "team", "Value": f"team-{i % 7}"}])
    return names


def _catch_up(aws: Any, names: Sequence[str], start: datetime, first: int) -> int:
    """Publish every job's minutes from ``first`` through the minute that just ended (the deployed functions run on
    the real clock, and a run here takes minutes); returns the next minute to publish."""
    last = int((datetime.now(UTC) - start).total_seconds() // 60) - 1
    for i, name in enumerate(names):
        publish_job_minutes(aws, name, seed=i, start=start, first=first, last=max(first, last))
    return max(first, last) + 1


def _calls(records: Sequence[Any], caller: str) -> Counter[str]:
    """API calls (not authorizations) the ``caller`` function made."""
    seen: dict[int, str] = {}
    for r in records:
        if r.caller == caller:
            seen[r.call] = r.operation
    return Counter(seen.values())


def _run(label: str, aws: Any, watched: int, concurrency: int) -> dict[str, Any]:
    from smx_debug import local
    from smx_debug.local import iam
    from smx_debug.local.awslambda import event_sources

    iam.ledger(aws).reset()
    started = time.perf_counter()
    (planner,) = local.deliver_schedule(aws, handlers=["evaluator"])
    planned = time.perf_counter() - started
    if planner.error is not None:
        raise RuntimeError(f"{label}: the scheduled run failed: {planner.error!r}")
    shards = event_sources.poll(aws, threads=1)  # one at a time: each shard's own time on this loaded machine
    wall = time.perf_counter() - started
    records = iam.ledger(aws).records()
    summaries = [s for inv in shards if isinstance(inv.result, dict) for s in inv.result.get("shards", [])]
    spans = [(inv.started, inv.ended) for inv in shards]
    durations = sorted(b - a for a, b in spans)
    evaluated = sum(s.get("evaluated", 0) for s in summaries)
    held = sum(len(s.get("held", [])) for s in summaries)
    failed = sum(len(s.get("failed", {})) for s in summaries)
    stale = sum(s.get("jobs", 0) for s in summaries if "stale" in s)
    calls = _calls(records, "evaluator")
    metrics = sum(s.get("metrics_requested", 0) for s in summaries)
    waves = -(-len(shards) // concurrency)
    projected = planned + waves * (durations[-1] if durations else 0.0)
    print(f"{label}: planner {planned:.2f} s -> {planner.result['shards']} shards; shards {len(shards)} "
          f"(wall min {durations[0]:.1f} / median {statistics.median(durations):.1f} / max {durations[-1]:.1f} s, "
          f"one at a time here); local run {wall:.1f} s; projected on AWS "
          f"{projected:.1f} s ({waves} wave(s) of {concurrency})")
    print(f"  jobs: {watched} watched, {evaluated} evaluated, {held} held, {failed} failed, {stale} in stale shards, "
          f"{watched - evaluated - held - failed - stale} otherwise not evaluated (no new data, unwatched); "
          f"{metrics / max(evaluated, 1):.0f} metrics requested per job; IAM denials: {len(iam.ledger(aws).denials(records))}")
    print("  AWS calls per watched job: " + ", ".join(f"{op} {n / watched:.3f}" for op, n in sorted(calls.items())))
    return {"planned": planned, "durations": durations, "wall": wall, "projected": projected, "evaluated": evaluated,
            "held": held, "failed": failed, "calls": calls, "metrics": metrics, "shards": len(shards),
            "denials": len(iam.ledger(aws).denials(records)),
            "errors": [inv.error for inv in shards if inv.error is not None]}


def _cost(run: dict[str, Any], watched: int) -> float:
    """USD per watched job-day at one run a minute, from a steady-state run's calls and times."""
    from smx_debug.pricing import evaluator_cost, request_cost

    per_job_s = sum(run["durations"]) / watched  # billed Lambda seconds per job-run (shards' wall, contended here)
    lambda_gmd = evaluator_cost(runs=RUNS_PER_DAY, metrics_per_run=round(run["metrics"] / watched),
                                duration_s_per_run=per_job_s, memory_mb=MEMORY_MB, architecture="arm64")
    calls = run["calls"]
    per_run = {k: v / watched for k, v in calls.items()}
    invocations = (run["shards"] + 1) / watched  # shards and the schedule's run, shared by the jobs
    requests = request_cost(
        s3_put_list=RUNS_PER_DAY * (per_run.get("s3:PutObject", 0) + per_run.get("s3:ListObjectsV2", 0)),
        s3_get=RUNS_PER_DAY * per_run.get("s3:GetObject", 0),
        # a job lease put and delete (1 unit each) and its cursor (~3 KB: 3 units) per run; reads 1 unit
        dynamodb_write_units=RUNS_PER_DAY * 5, dynamodb_read_units=RUNS_PER_DAY * 1,
        # the run's SendMessageBatch and the pollers' receive and delete of each shard
        sqs_requests=RUNS_PER_DAY * (per_run.get("sqs:SendMessageBatch", 0) + 2 * run["shards"] / watched),
    )
    lambda_requests = RUNS_PER_DAY * invocations / 1e6 * 0.20
    total = lambda_gmd.get_metric_data_usd + lambda_gmd.lambda_compute_usd + lambda_requests + requests.total_usd
    print(f"cost per watched job-day (4 hosts, 2 training metrics, a run a minute): ${total:.4f} = GetMetricData "
          f"${lambda_gmd.get_metric_data_usd:.4f} + Lambda ${lambda_gmd.lambda_compute_usd + lambda_requests:.4f} "
          f"({per_job_s * 1000:.0f} ms/job here) + S3 ${requests.s3_usd:.4f} (fleet appends) + DynamoDB "
          f"${requests.dynamodb_usd:.4f} + SQS ${requests.sqs_usd:.6f}")
    return total


def main(argv: Sequence[str] | None = None) -> int:
    parser = bench_parser(__doc__, "60 jobs in shards of 20 (3 at once)")
    parser.add_argument("--jobs", type=int, default=None, help="watched running jobs (default 2000)")
    parser.add_argument("--per-invocation", type=int, default=None, help="evaluator.jobs_per_invocation (200)")
    parser.add_argument("--concurrency", type=int, default=None, help="evaluator.max_concurrency (10)")
    args, _ = parser.parse_known_args(argv)
    count = args.jobs or (60 if args.quick else 2000)
    per_invocation = args.per_invocation or (20 if args.quick else 200)
    concurrency = args.concurrency or (3 if args.quick else 10)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import logging

    logging.getLogger("smx_debug").setLevel(logging.WARNING)
    logging.getLogger("moto").setLevel(logging.ERROR)
    import warnings

    warnings.filterwarnings("ignore", message="Tried to parse AWS", category=UserWarning)
    from smx_debug import local
    from smx_debug.local import LocalAws
    from smx_debug.local.cloudwatch import metric_data
    from smx_debug.local.sagemaker import job_metrics
    from smx_debug.local.sagemaker.other_team import start_other_team

    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=MINUTES + 1)
    with tempfile.TemporaryDirectory() as tmp, LocalAws() as aws:
        local.install(aws)
        metric_data.install()
        job_metrics.install()
        t = time.perf_counter()
        deployed = _deploy(aws, Path(tmp), per_invocation, concurrency)
        bucket = deployed.output("OutputBucketName")
        names = _jobs(aws, bucket, count, start)
        team = start_other_team(aws, bucket=bucket, start=start, minutes=MINUTES, profiler_minutes=1,
                                count=4 if args.quick else 20)
        print(f"setup: stack deployed, {count} watched jobs x {HOSTS} hosts with {MINUTES} minutes of CloudWatch data "
              f"({count * (HOSTS * 5 + 2) * MINUTES:,} datapoints) and {len(team.jobs)} of another team's; "
              f"jobs_per_invocation {per_invocation}, max_concurrency {concurrency}; {time.perf_counter() - t:.1f} s")
        # The setup takes minutes (more on a busy machine) and the deployed functions read the real clock: publish
        # the jobs' minutes through now first, or a new job's window may hold none of its data ("no data").
        published = _catch_up(aws, names, start, MINUTES)
        first = _run("run 1 (every job new)", aws, count, concurrency)
        _catch_up(aws, names, start, published)
        second = _run("run 2 (the next one)", aws, count, concurrency)
        cost = _cost(second, count)
        t = time.perf_counter()
        (collected,) = local.deliver_schedule(aws, handlers=["fleet_collector"])
        print(f"fleet collector: {time.perf_counter() - t:.1f} s, {collected.result and collected.result['jobs']} jobs, "
              f"rows {collected.result and collected.result['rows']}, error {collected.error!r}")
        touched = team.touched(aws, ledger_table=deployed.output("LedgerTableName"))
    loop = LOOP_S_PER_JOB * count
    print(f"projected run on AWS {second['projected']:.1f} s vs one invocation looping over {count} jobs "
          f"~{loop:.0f} s ({second['projected'] / loop:.2f}x; the loop would exceed the {TIMEOUT_S:.0f} s timeout "
          f"from ~{TIMEOUT_S / LOOP_S_PER_JOB:.0f} jobs)")
    print(f"another team's jobs: touched: {touched or 'no'}; cost ${cost:.4f} per watched job-day")
    ok = all(r["evaluated"] == count and not r["held"] and not r["failed"] and not r["denials"] and not r["errors"]
             for r in (first, second))
    ok = ok and not touched and second["durations"][-1] < TIMEOUT_S and second["projected"] < TIMEOUT_S
    print(f"targets (each job once per run, 0 denials, another team untouched, "
          f"slowest steady shard < {TIMEOUT_S:.0f} s, projected run < {TIMEOUT_S:.0f} s): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
