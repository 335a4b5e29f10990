"""Quickstart: a guarded training job in a real account, from the deployed stack to the report.

Real account (after `npx cdk deploy`, see README "Using it with a real account")::

    python examples/quickstart.py --role arn:aws:iam::<account>:role/<SageMakerRole> \
        --image <training image URI> [--stack SmxDebugGuard] [--plan examples/plans/profiling_only.yaml]

CI and laptops (`--local`): the same code against the embedded local AWS. There the stack is deployed into
moto first, and SageMaker's part (the job writing profiler output, the rule jobs settling) is played by the
local extensions and the `smx_debug.simulate` generator.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")

from smx_debug import DebugPlan, SmxDebugWarning, reports  # noqa: E402
from smx_debug.cli import main as smx_debug_cli  # noqa: E402

STACK = "SmxDebugGuard"


def stack_outputs(cloudformation: Any, stack: str) -> dict[str, str]:
    """The deployed guard stack's outputs: OutputBucketName, TopicArn, ..."""
    (described,) = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def launch(session: Any, plan: DebugPlan, *, role: str, image: str, job_name: str) -> None:
    """Step 2 of the README: the plan's SDK v2 objects on an Estimator."""
    import sagemaker
    from sagemaker.estimator import Estimator

    sm_session = sagemaker.Session(boto_session=session, sagemaker_client=session.client("sagemaker"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmxDebugWarning)
        kwargs = plan.to_estimator_kwargs()
    estimator = Estimator(image_uri=image, role=role, instance_type="ml.p3.2xlarge", instance_count=1,
                          output_path=f"{plan.s3_output_path}/model", sagemaker_session=sm_session, **kwargs)
    estimator.fit(wait=False, job_name=job_name)


def notebook(job: str, sagemaker_client: Any, out: Path, plan_file: Path) -> None:
    """What a notebook does during or after the run: rules, utilization, the report."""
    summary = reports.wait_for_rules(job, sagemaker_client=sagemaker_client, poll_s=30.0, timeout_s=6 * 3600)
    print(summary[["rule", "kind", "status", "step"]].to_string(index=False))
    system = reports.system_metrics(job, sagemaker_client=sagemaker_client, progress=False)
    stats = reports.utilization_stats(system)
    print(stats.to_string(max_rows=12))
    smx_debug_cli(["report", job, "--plan", str(plan_file), "--out", str(out)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="smx-debug quickstart")
    parser.add_argument("--local", action="store_true", help="run against the embedded local AWS")
    parser.add_argument("--stack", default=STACK)
    parser.add_argument("--plan", type=Path, default=ROOT / "examples" / "plans" / "profiling_only.yaml")
    parser.add_argument("--role", help="SageMaker execution role ARN (real account)")
    parser.add_argument("--image", help="training image URI (real account)")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "quickstart-report.html")
    args = parser.parse_args(argv)
    if args.local:
        return run_local(args)
    if not (args.role and args.image):
        parser.error("--role and --image are required unless --local")
    import boto3

    session = boto3.Session()
    return run(session, args, job_name=f"smx-quickstart-{datetime.now(UTC):%Y%m%d-%H%M%S}")


def run(session: Any, args: argparse.Namespace, *, job_name: str, before_notebook: Any = None) -> int:
    outputs = stack_outputs(session.client("cloudformation"), args.stack)
    plan = DebugPlan.from_file(args.plan).with_output_path(f"s3://{outputs['OutputBucketName']}/debugger")
    launch(session, plan, role=args.role, image=args.image, job_name=job_name)
    print(f"launched {job_name}; Debugger output under {plan.s3_output_path}; messages on {outputs['TopicArn']}")
    if before_notebook is not None:
        before_notebook(job_name, plan)
    notebook(job_name, session.client("sagemaker"), args.out, args.plan)
    print(f"report: {args.out}")
    return 0


def run_local(args: argparse.Namespace) -> int:
    from infra.cdk_app import build_app
    from smx_debug.local import LocalAws, deploy_stack
    from smx_debug.local import extensions as ext
    from smx_debug.local.sdk import disable_sdk_telemetry
    from smx_debug.simulate import Simulation, SimulationSpec

    disable_sdk_telemetry()  # no network here
    args.role = args.role or "arn:aws:iam::123456789012:role/SageMakerExecution-quickstart"
    args.image = args.image or "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
    with LocalAws() as aws, tempfile.TemporaryDirectory() as tmp:
        ext.install(aws)
        build_app({"local": True, "watch_prefixes": ["smx-quickstart-"], "retraining": False}, outdir=tmp).synth()
        deploy_stack(aws, Path(tmp) / f"{args.stack}.template.json", stack_name=args.stack)

        def play_sagemaker(job: str, plan: DebugPlan) -> None:
            # The job trains for 20 minutes and writes its profiler output; its rule jobs then settle with
            # what our local evaluation of the same rules finds.
            from smx_debug.evaluate import LiveEvaluator, rules_from_plan

            spec = SimulationSpec(scenario="healthy", job_start=datetime.now(UTC) - timedelta(minutes=20),
                                  duration_s=1200.0, nodes=1, cpus=8, gpus=1, seed=3)
            bucket, _, prefix = plan.s3_output_path.removeprefix("s3://").partition("/")
            Simulation(spec).write_s3(bucket, f"{prefix}/{job}/profiler-output")
            ext.set_training_job_status(aws, job, "Completed")
            live = LiveEvaluator(rules=rules_from_plan(plan, expand_profiler_report=False)[0])
            details = {t.rule: t.status_details for t in live.update(system=reports.system_metrics(job, progress=False))}
            live.finish()
            statuses = [ext.rule_status(name, status, details=details.get(name)) for name, status in live.status.items()]
            ext.set_rule_statuses(aws, job, profiler=[*statuses, ext.rule_status("ProfilerReport", "NoIssuesFound")])

        # Default clients (the SDK's, the CLI's) reach the local AWS through AWS_ENDPOINT_URL, as they would
        # reach a real account through its credentials.
        with aws.environment():
            return run(aws.session(), args, job_name="smx-quickstart-local-1", before_notebook=play_sagemaker)


if __name__ == "__main__":
    raise SystemExit(main())
