"""`make demo`'s tensor job: a real small PyTorch run guarded by the stack's scheduled evaluator alone.

The job's plan says ``guard: evaluator`` and lists ExplodingTensor (stop the job, notify): it renders the
DebugHookConfig (the hook saves gradients and losses every 5 steps) and no Debugger rule. The entry point
(``examples/train_cnn.py``: a small CNN on the CPU with smx_debug.hook) multiplies its learning rate by 10^7 at a
known step; the local container uploads its tensors to the local S3 while it trains, as SageMaker does. The
deployed evaluator function runs on its schedule (its role's calls authorized by ``smx_debug.local.iam``), reads
the new steps, finds ExplodingTensor, and the action core stops the job once: StopTrainingJob sends the training
SIGTERM, which ends it. Printed: onset -> trigger -> stop, in training steps.

Runs when torch is installed (``pip install 'smx-debug[torch]'``; ``make install`` does); otherwise says so in
one line. Run alone: ``python examples/demo_tensors.py``.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from smx_debug import local  # noqa: E402
from smx_debug.config import DebugPlan  # noqa: E402
from smx_debug.local import LocalAws  # noqa: E402

__all__ = ["tensor_job"]

IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-cpu-py311"
ENTRY_POINT = ROOT / "examples" / "train_cnn.py"
Say = Callable[..., None]


def tensor_job(aws: LocalAws, bucket: str, *, job: str, say: Say, steps: int = 400, explode_at: int = 150,
               step_seconds: float = 0.03, timeout: float = 90.0) -> int:
    """Train ``job`` with an exploding learning rate under the deployed evaluator; 0 when it was stopped once."""
    if importlib.util.find_spec("torch") is None:
        say("tensors", "tensor job skipped: torch is not installed (pip install 'smx-debug[torch]')")
        return 0
    from smx_debug.local.sagemaker.training_run import start_training

    plan = DebugPlan(region=aws.region, s3_output_path=f"s3://{bucket}/debugger", guard="evaluator",
                     hook={"save_interval": 5, "collections": [{"name": "gradients"}, {"name": "losses"}]},
                     rules=[{"name": "ExplodingTensor", "actions": ["stop_job", "notify"]}])
    s3, sagemaker = aws.client("s3"), aws.client("sagemaker")
    spec = plan.watch_spec().store(bucket, s3_client=s3)
    fields: dict[str, Any] = plan.to_request_dict(job_name=job)
    sagemaker.create_training_job(
        TrainingJobName=job, RoleArn=local.execution_role(aws),
        AlgorithmSpecification={"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": f"s3://{bucket}/model"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        StoppingCondition={"MaxRuntimeInSeconds": 3600}, **fields,
    )
    say("tensors", f"{job}: plan guard 'evaluator' with ExplodingTensor (stop_job, notify): "
        f"{', '.join(sorted(k for k in fields if k != 'Tags'))}, no DebugRuleConfigurations; watch spec "
        f"s3://{bucket}/{spec}")
    say("tensors", f"a small CNN on the CPU with smx_debug.hook, {steps} steps; learning rate x 10^7 at step "
        f"{explode_at}; the tensors reach S3 while it trains; the deployed evaluator runs on its schedule")
    fired_step: int | None = None
    runs = 0
    with tempfile.TemporaryDirectory(prefix="smx-container-") as container:
        running = start_training(aws, job, ENTRY_POINT, workdir=container, upload_interval=0.5, timeout=timeout,
                                 args=["--steps", str(steps), "--explode-at", str(explode_at),
                                       "--step-seconds", str(step_seconds)])
        while running.returncode is None:
            for run in local.deliver_schedule(aws, handlers=["evaluator"]):  # the collector ticks hourly
                runs += 1
                if run.error is not None:
                    say("tensors", f"evaluator run failed: {run.error!r}")
                    continue
                for trigger in run.result.get("triggers", []):
                    if trigger["job"] == job and fired_step is None:
                        fired_step = int(trigger["step"])
                        say("evaluator", f"run {runs}: {trigger['rule']} fired at saved step {fired_step}; the "
                            f"action core stops {job} (StopTrainingJob -> SIGTERM to its training)")
            time.sleep(0.5)
        done = running.wait()
    stopped = re.search(r"stopped by SIGTERM at step (\d+)", done.stdout)
    say("tensors", f"training ended: job {done.status}, {done.stdout.strip()}; {done.uploaded} files uploaded to "
        f"{done.debug_output} while and after it trained; StopTrainingJob calls: {local.stop_calls(aws, job)}")
    if done.status != "Stopped" or stopped is None or fired_step is None or local.stop_calls(aws, job) != 1:
        say("result", f"{job} was NOT stopped once by the evaluator (status {done.status}, trigger {fired_step})")
        return 1
    at = int(stopped.group(1))
    say("result", f"job 3 ({job}, no Debugger, tensors judged by the smx-debug evaluator): onset at step "
        f"{explode_at} -> ExplodingTensor at step {fired_step} -> stopped at step {at}: {at - explode_at} steps "
        f"from onset to stop, {runs} evaluator runs")
    return 0


if __name__ == "__main__":
    from datetime import UTC, datetime

    from examples.demo import DEPLOY_CONTEXT, STACK, say
    from infra.cdk_app import build_app
    from smx_debug.local import deploy_stack

    with tempfile.TemporaryDirectory() as tmp, LocalAws() as aws, aws.environment():
        local.install(aws)
        build_app(dict(DEPLOY_CONTEXT), outdir=f"{tmp}/cdk.out").synth()
        deployed = deploy_stack(aws, Path(tmp) / "cdk.out" / f"{STACK}.template.json", stack_name=STACK)
        raise SystemExit(tensor_job(aws, deployed.output("OutputBucketName"),
                                    job=f"smx-demo-cnn-{datetime.now(UTC):%H%M%S}", say=say))
