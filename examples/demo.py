"""`make demo`: smx-debug's whole guardrail loop on an embedded local AWS, with no AWS account.

1. Start the local AWS (moto server on 127.0.0.1, in this process).
2. Deploy the guardrails: the CDK app's synthesized template into the local CloudFormation; what moto's
   CloudFormation skips (alarms, bucket and topic policies) is created from the same template.
3. Launch a training job with a debug plan through the SageMaker SDK v2 ``Estimator``.
4. Stream the job's profiler output into the local S3 minute by minute, the way a real job writes it
   (the ``smx_debug.simulate`` generator: 500 ms system metrics in the Debugger layout and step events),
   with a CPU bottleneck that leaves the GPUs idle from a known onset.
5. Evaluate the plan's rules as the data arrives. When one fires, SageMaker's rule status is set and its
   "Training Job State Change" event goes through EventBridge's rules to the deployed handlers (the same
   code as the Lambda assets): the rule metric lands in CloudWatch, the alarm fires, the messages reach a
   subscribed queue and are printed, and the job is stopped.
6. Print the rule summary, write the HTML report, and print the time from onset to stop.
7. A second job without Debugger, guarded by the stack's scheduled evaluator (examples/demo_evaluator.py); a
   tensor job with smx_debug.hook when torch is installed (examples/demo_tensors.py).
8. The fleet: the stack's fleet collector runs, and one fleet query (idle GPU hours and their cost by job and
   team) answers over every job of the account from the dataset the stack's functions wrote
   (examples/demo_fleet.py).

Job time runs faster than wall time (``--speed`` job seconds per wall second); every figure printed in
job time is what a real job would see. See README "Limits" for what the local AWS emulates.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the CDK app lives in infra/ at the repository root

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")

from smx_debug import local  # noqa: E402
from smx_debug.config import DebugPlan, SmxDebugWarning  # noqa: E402
from smx_debug.contracts import FLEET_TEAM_TAG as TEAM_TAG  # noqa: E402
from smx_debug.contracts import ISSUES_FOUND  # noqa: E402
from smx_debug.errors import NotFoundError  # noqa: E402
from smx_debug.local import LocalAws, deploy_stack  # noqa: E402
from smx_debug.local.sagemaker import job_metrics  # noqa: E402
from smx_debug.local.sagemaker.other_team import start_other_team  # noqa: E402

PLAN = ROOT / "examples" / "plans" / "cpu_bottleneck_guard.yaml"
STACK = "SmxDebugGuard"
JOB_PREFIX = "smx-demo-"
IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
INSTANCE_TYPE = "ml.p3.8xlarge"  # 4 GPUs, 32 vCPUs
TEAM = "vision"  # the demo jobs' team tag (the other team's jobs carry "research")
DEPLOY_CONTEXT = {
    "local": True,
    "watch_prefixes": [JOB_PREFIX],
    "default_actions": ["notify"],
    "alarm_rules": ["CPUBottleneck", "LowGPUUtilization"],
    "retraining": False,
}


@dataclass
class Timeline:
    """Wall-clock and job-clock marks, for the closing figures."""

    started: float = field(default_factory=time.monotonic)
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, name: str) -> None:
        self.marks[name] = time.monotonic()


def say(step: str, text: str = "") -> None:
    print(f"[{step}] {text}" if text else f"\n== {step} ==", flush=True)


def _quiet_logs() -> None:
    """Keep the output to the story: the handlers' JSON log lines and moto's notes are summarised instead."""
    import smx_debug.actions.runtime  # noqa: F401  (sets its logger to INFO on import; override after)

    logging.getLogger("smx_debug.actions").setLevel(logging.WARNING)
    logging.getLogger("moto").setLevel(logging.ERROR)
    for name in ("sagemaker", "sagemaker.config", "botocore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="Tried to parse AWS", category=UserWarning)


def deploy(aws: LocalAws, workdir: Path) -> Any:
    from infra.cdk_app import build_app

    say("2/9 deploy the guardrails")
    t = time.monotonic()
    outdir = workdir / "cdk.out"
    build_app(dict(DEPLOY_CONTEXT), outdir=str(outdir)).synth()
    say("synth", f"CDK app synthesized (cdk-nag checks passed) in {time.monotonic() - t:.1f} s")
    deployed = deploy_stack(aws, outdir / f"{STACK}.template.json", stack_name=STACK)
    say("deploy", f"stack {STACK}: {len(deployed.physical_ids)} resources from moto's CloudFormation, "
        f"{len(deployed.emulated)} created from the template where moto skips them, {deployed.seconds:.1f} s")
    created = Counter(e.resource_type for e in deployed.emulated if e.what == "created")
    patched = Counter(e.resource_type for e in deployed.emulated if e.what != "created")
    say("deploy", "created from the template: " + ", ".join(f"{n} {t}" for t, n in sorted(created.items())))
    say("deploy", "properties moto ignored, applied: " + ", ".join(f"{n} {t}" for t, n in sorted(patched.items())))
    return deployed


def subscribe_queue(aws: LocalAws, topic_arns: Sequence[str]) -> str:
    """An SQS queue subscribed to the notification topics: the team's inbox in this demo."""
    url: str = local.subscribe_queue(aws, topic_arns, "smx-demo-inbox", raw=True)  # its policy admits the topics
    return url


def drain(aws: LocalAws, queue_url: str) -> list[str]:
    sqs = aws.client("sqs")
    bodies: list[str] = []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        messages = got.get("Messages", [])
        if not messages:
            return bodies
        for m in messages:
            bodies.append(m["Body"])
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])


def print_message(body: str) -> None:
    try:
        alarm = json.loads(body)
    except json.JSONDecodeError:
        alarm = None
    if isinstance(alarm, dict) and "AlarmName" in alarm:
        say("inbox", f"CloudWatch alarm {alarm['AlarmName']!r}: {alarm.get('OldStateValue')} -> "
            f"{alarm.get('NewStateValue')} ({alarm.get('NewStateReason', '')[:90]})")
        return
    say("inbox", "message:")
    for line in body.strip().splitlines():
        print(f"        | {line}")


def launch(aws: LocalAws, plan: DebugPlan, job_name: str) -> None:
    from sagemaker.estimator import Estimator

    from smx_debug.local.sdk import sagemaker_session

    say("3/9 launch the training job")
    session = sagemaker_session(aws)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmxDebugWarning)
        kwargs = plan.to_estimator_kwargs(tags={TEAM_TAG: TEAM})  # the fleet's queries group by this tag
    estimator = Estimator(
        image_uri=IMAGE,
        role=local.execution_role(aws),  # a real account: your SageMaker execution role
        instance_type=INSTANCE_TYPE,
        instance_count=2,
        output_path=f"{plan.s3_output_path}/model",
        sagemaker_session=session,
        **kwargs,
    )
    estimator.fit(wait=False, job_name=job_name)
    # moto creates jobs as Completed; a real one would now be training.
    local.set_training_job_status(aws, job_name, "InProgress")
    desc = aws.client("sagemaker").describe_training_job(TrainingJobName=job_name)
    rules = [r["RuleConfigurationName"] for r in plan.to_request_dict(job_name=job_name)
             .get("ProfilerRuleConfigurations", [])]
    say("fit", f"Estimator.fit(wait=False) created {job_name} ({INSTANCE_TYPE} x2), "
        f"status {desc['TrainingJobStatus']}; profiler rules: {', '.join(rules)}")


def _profiler_report_status(statuses: dict[str, str], *, final: bool) -> list[dict[str, Any]]:
    """SageMaker runs the ProfilerReport rule job alongside the others (InProgress from the start) and settles
    it with the job: its status, unless the local evaluation already reports it."""
    if "ProfilerReport" in statuses:
        return []
    return [local.rule_status("ProfilerReport", "NoIssuesFound" if final else "InProgress")]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=20, help="simulated job length (job minutes)")
    parser.add_argument("--onset", type=float, default=4.0, help="job minute the CPU bottleneck starts")
    parser.add_argument("--speed", type=float, default=60.0, help="job seconds per wall second")
    parser.add_argument("--out", type=Path, default=Path("out") / "demo-report.html",
                        help="HTML report path; its folder is created (default: out/demo-report.html)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show dependencies' INFO lines and warnings")
    args = parser.parse_args(argv)
    return run(minutes=args.minutes, onset_min=args.onset, speed=args.speed, out=args.out, verbose=args.verbose)


def run(*, minutes: int, onset_min: float, speed: float, out: Path, verbose: bool = False) -> int:
    from smx_debug.quiet import quiet_dependencies

    if not verbose:
        _quiet_logs()
    try:  # the report's folder (out/ on a fresh clone): made now, not after a minute of demo
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"error: --out {str(out)!r}: folder {str(out.parent)!r} cannot be created ({exc.strerror})",
              file=sys.stderr)
        return 2
    timeline = Timeline()
    # aws.environment(): every default boto3 client of this process (the CLI's, the SDK's) talks to the local
    # AWS, never to a real account.
    with quiet_dependencies(verbose=verbose), tempfile.TemporaryDirectory(prefix="smx-demo-") as tmp, \
            LocalAws() as aws, aws.environment():
        say("1/9 start the local AWS")
        local.iam.ledger(aws).reset()  # every call the deployed functions make is checked against their roles
        code = _run(aws, tmp, timeline, minutes=minutes, onset_min=onset_min, speed=speed, out=out)
    print(local.iam.ledger(aws).summary_line())
    for denied in local.iam.ledger(aws).denials():
        print(f"[iam] denied: {denied.caller}: {denied.message}")
        code = code or 1
    say("done", f"{time.monotonic() - timeline.started:.1f} s in all; the local AWS is shut down")
    return code


def _run(aws: LocalAws, tmp: str, timeline: Timeline, *, minutes: int, onset_min: float, speed: float,
         out: Path) -> int:
    from smx_debug.cli import main as cli_main
    from smx_debug.data import SystemMetricsReader, framework_metrics, rule_summary, step_durations
    from smx_debug.evaluate import LiveEvaluator
    from smx_debug.simulate import Simulation, SimulationSpec

    local.install(aws)
    say("local", f"moto server on {aws.endpoint_url} (loopback only), region {aws.region}")

    deployed = deploy(aws, Path(tmp))
    bucket = deployed.output("OutputBucketName")
    inbox = subscribe_queue(aws, [deployed.output("TopicArn"), deployed.output("AlarmTopicArn")])
    say("inbox", "queue smx-demo-inbox subscribed to the notification and alarm topics")
    # The account is not empty: another team's unwatched jobs, with bad metrics and damaged profiler output.
    team = start_other_team(aws, bucket=bucket, start=datetime.now(UTC) - timedelta(minutes=minutes + 5),
                            minutes=2 * minutes + 10)

    job = f"{JOB_PREFIX}resnet50-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    plan = DebugPlan.from_file(PLAN).with_output_path(f"s3://{bucket}/debugger")
    launch(aws, plan, job)
    timeline.mark("launched")

    say("4/9 stream profiler output, 5/9 evaluate rules as it arrives")
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=minutes)
    spec = SimulationSpec(
        scenario="cpu_bottleneck", onset_s=onset_min * 60, job_start=start, duration_s=minutes * 60.0,
        nodes=2, cpus=32, gpus=4, interval_ms=500, seed=7,
    )
    sim = Simulation(spec)
    job_metrics.set_start_time(aws, job, start)  # the simulated job started `minutes` ago, on its own clock
    profiler_prefix = f"debugger/{job}/profiler-output"
    s3 = aws.client("s3")
    reader = SystemMetricsReader(f"s3://{bucket}/{profiler_prefix}/", s3_client=s3, progress=False)
    # One evaluation per configuration of the plan, keyed by its configuration name (custom names included).
    live = LiveEvaluator(rules=plan.evaluated_rules(expand_profiler_report=False)[0])
    details: dict[str, str] = {}  # rule -> StatusDetails of its last transition
    say("simulate", f"{spec.nodes} nodes x ({spec.cpus} vCPU, {spec.gpus} GPU), {spec.interval_ms} ms samples, "
        f"CPU bottleneck from job minute {onset_min:g}; {speed:g} job seconds per wall second")

    sagemaker = aws.client("sagemaker")
    stopped_at_job_s: float | None = None
    fired_at: dict[str, float] = {}  # rule -> job seconds when it reached IssuesFound
    stopped_by = ""
    for minute in sim.minutes():
        wall = time.monotonic()
        for key, body, _records in sim.files_for_minute(minute):
            s3.put_object(Bucket=bucket, Key=f"{profiler_prefix}/{key}", Body=body)
        job_s = minute + 60 - sim.start_s
        frame = reader.refresh()
        try:
            steps = step_durations(framework_metrics(f"s3://{bucket}/{profiler_prefix}/", s3_client=s3,
                                                     progress=False))
        except NotFoundError:  # still initializing: no training step has been traced yet
            steps = None
        transitions = live.update(system=frame, steps=steps, replace=True)
        status = sagemaker.describe_training_job(TrainingJobName=job)["TrainingJobStatus"]
        skipped = frame.attrs.get("skipped_lines", 0)
        n_steps = 0 if steps is None else len(steps)
        say(f"t+{job_s / 60:4.1f} min", f"{len(frame):>7,} system records, {n_steps:>5,} steps read "
            f"({skipped} partial lines skipped); job {status}")
        for t in transitions:
            details[t.rule] = t.status_details
            say("rule", f"{t.rule}: {t.previous} -> {t.status}  {t.status_details.strip()}")
        fired = [t for t in transitions if t.status == ISSUES_FOUND]
        if fired:
            fired_at.update({t.rule: job_s for t in fired})
            local.set_rule_statuses(aws, job, profiler=[
                local.rule_status(name, st, details=details.get(name))
                for name, st in live.status.items()
            ] + _profiler_report_status(live.status, final=False))
            event = local.state_change_event(aws, job)
            deliveries = local.deliver_event(aws, event)
            for d in deliveries:
                done = _what_it_did(d.result)
                outcome = "error: " + repr(d.error) if d.error else _short(done)
                say("lambda", f"{d.handler} ({d.function}) -> {outcome}")
                if isinstance(done, dict) and done.get("outcome") == "stopped":
                    stopped_by = str(done.get("rule", ""))
            for a in local.evaluate_alarms(aws):
                say("alarm", f"{a.alarm_name}: {a.old_state} -> {a.new_state}")
            for body in drain(aws, inbox):
                print_message(body)
        status = sagemaker.describe_training_job(TrainingJobName=job)["TrainingJobStatus"]
        if status in ("Stopping", "Stopped"):
            stopped_at_job_s = job_s
            timeline.mark("stopped")
            say("stop", f"{job} is {status} after job minute {job_s / 60:.1f}; StopTrainingJob calls: "
                f"{local.stop_calls(aws, job)}")
            break
        time.sleep(max(0.0, 60.0 / speed - (time.monotonic() - wall)))
    local.tick(aws)
    if stopped_at_job_s is not None:  # it ended on its clock, not the wall clock's (the fleet counts its minutes)
        job_metrics.set_end_time(aws, job, start + timedelta(seconds=stopped_at_job_s))
    for t in live.finish():
        say("rule", f"{t.rule}: {t.previous} -> {t.status}")
    local.set_rule_statuses(aws, job, profiler=[
        local.rule_status(name, st, details=details.get(name)) for name, st in live.status.items()
    ] + _profiler_report_status(live.status, final=True))

    say("6/9 summary and report")
    summary = rule_summary(job, sagemaker_client=sagemaker)
    print(summary[["rule", "kind", "status", "step", "details"]].to_string(index=False))
    # The same command a user runs: evaluates the plan's rules on everything the job wrote.
    command = ["report", job, "--plan", str(PLAN), "--onset", spec.onset.isoformat(),
               "--ledger-table", deployed.output("LedgerTableName"), "--out", str(out)]
    say("report", "smx-debug " + " ".join(command[:-1]) + f" {out}")
    if cli_main(command) != 0:
        return 1
    final = sagemaker.describe_training_job(TrainingJobName=job)["TrainingJobStatus"]
    if stopped_at_job_s is None:
        say("result", f"the job was NOT stopped (final status {final}); see the messages above")
        return 1
    onset_s = spec.onset_s
    fired = ", ".join(f"{rule} at minute {at / 60:.1f}" for rule, at in sorted(fired_at.items(), key=lambda i: i[1]))
    say("result", f"CPU bottleneck from job minute {onset_s / 60:.1f}; rules fired: {fired}; "
        f"{stopped_by or 'a rule'} stopped the job ({final}) at minute {stopped_at_job_s / 60:.1f}")
    say("result", f"onset to stop: {(stopped_at_job_s - onset_s) / 60:.1f} job minutes (data arrives in 1-minute "
        f"files; CPUBottleneck needs {plan_param(plan, 'CPUBottleneck', 'threshold')}% of the job's time in "
        f"bottleneck); {timeline.marks['stopped'] - timeline.marks['launched']:.1f} s wall clock from launch")
    print(f"\nReport: {out.resolve()}")
    code = _second_job(aws, bucket, inbox, minutes=minutes, onset_min=onset_min, speed=speed,
                       first_onset_to_stop=(stopped_at_job_s - onset_s) / 60)
    from examples.demo_tensors import tensor_job

    # 8: a real PyTorch run whose training explodes, guarded by the evaluator alone (when torch is installed)
    say("8/9 a PyTorch job whose training explodes, guarded by the scheduled evaluator alone (tensor rules)")
    code = code or tensor_job(aws, bucket, job=f"{JOB_PREFIX}cnn-{datetime.now(UTC):%Y%m%d-%H%M%S}", say=say)
    from examples.demo_fleet import fleet_table

    # the fleet: the collector ticks, then one query over every job, from what the stack's functions wrote
    code = code or fleet_table(aws, bucket, say=say)
    touched = team.touched(aws, ledger_table=deployed.output("LedgerTableName"))
    say("account", team.summary(touched))
    return code or int(bool(touched))


def _second_job(aws: LocalAws, bucket: str, inbox: str, *, minutes: int, onset_min: float, speed: float,
                first_onset_to_stop: float) -> int:
    """A second job launched with no Debugger configuration, guarded by the stack's scheduled evaluator."""
    from examples.demo_evaluator import guard_second_job

    say("7/9 a second job without Debugger (no rules, profiler disabled), guarded by the scheduled evaluator")
    second = guard_second_job(aws, bucket, job=f"{JOB_PREFIX}nodebugger-{datetime.now(UTC):%Y%m%d-%H%M%S}",
                              minutes=minutes, onset_min=round(onset_min), speed=speed, say=say,
                              inbox=lambda: drain(aws, inbox), show=print_message)
    say("result", f"onset to stop, job 1 (Debugger profiler rules): {first_onset_to_stop:.1f} job minutes")
    return second.verdict(say, f"job 2 ({second.job}, no Debugger, smx-debug evaluator)")


def plan_param(plan: DebugPlan, rule: str, name: str) -> Any:
    """A rule parameter as the plan sets it, else the catalog default."""
    from smx_debug.rules import get_rule

    for r in plan.profiler_rules:
        if r.rule_configuration_name == rule and name in r.parameters:
            return r.parameters[name]
    return {p.name: p.default for p in get_rule(rule).parameters}.get(name)


def _what_it_did(result: Any) -> Any:
    """A handler's result names its action and keeps what it did under that key; show that part."""
    if isinstance(result, dict) and isinstance(result.get(result.get("action")), dict | list):
        return {"action": result["action"], **(r if isinstance(r := result[result["action"]], dict) else {"done": r})}
    return result


def _short(result: Any) -> str:
    text = json.dumps(result, default=str) if not isinstance(result, str) else result
    return text if len(text) <= 160 else text[:157] + "..."


if __name__ == "__main__":
    raise SystemExit(main())
