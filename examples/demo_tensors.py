"""`make demo`'s tensor job: a plan with a DebugHookConfig, a real small PyTorch run on the CPU with smx-debug's
hook, its tensors in the local S3 under the job's debug-output, read back with ``smx_debug.tensors``.

Runs when torch is installed (``pip install 'smx-debug[torch]'``; ``make install`` does); otherwise says so in
one line. Run alone: ``python examples/demo_tensors.py``.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from smx_debug.config import DebugPlan  # noqa: E402
from smx_debug.local import LocalAws  # noqa: E402

__all__ = ["tensor_job"]

ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution-demo"
IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-cpu-py311"
ENTRY_POINT = ROOT / "examples" / "train_cnn.py"
Say = Callable[..., None]


def tensor_job(aws: LocalAws, bucket: str, *, job: str, say: Say, steps: int = 60) -> int:
    """Launch a job whose plan saves the rules' tensors, train it for real, print what was saved. 0 when done."""
    if importlib.util.find_spec("torch") is None:
        say("tensors", "tensor job skipped: torch is not installed (pip install 'smx-debug[torch]')")
        return 0
    from smx_debug.local.training_run import run_training
    from smx_debug.tensors import create_trial

    plan = DebugPlan(region=aws.region, s3_output_path=f"s3://{bucket}/debugger", hook={"save_interval": 10},
                     rules=[{"name": "vanishing_gradient"}, {"name": "dead_relu"}, {"name": "loss_not_decreasing"}],
                     profiler={"disable": True})
    fields: dict[str, Any] = plan.to_request_dict(job_name=job)
    aws.client("sagemaker").create_training_job(
        TrainingJobName=job, RoleArn=ROLE,
        AlgorithmSpecification={"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": f"s3://{bucket}/model"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
        **{k: v for k, v in fields.items() if k in ("DebugHookConfig", "DebugRuleConfigurations", "Tags")},
    )
    collections = [c["CollectionName"] for c in fields["DebugHookConfig"]["CollectionConfigurations"]]
    say("tensors", f"{job}: a small CNN on the CPU with smx_debug.hook; the plan's hook saves "
        f"{', '.join(collections)} every 10 steps")
    with tempfile.TemporaryDirectory(prefix="smx-container-") as container:
        run = run_training(aws, job, ENTRY_POINT, workdir=container, args=["--steps", str(steps)])
    if run.status != "Completed":
        say("tensors", f"the training run failed: {run.failure_reason}")
        return 1
    trial = create_trial(run.debug_output, s3_client=aws.client("s3"))
    say("tensors", f"{run.stdout.strip()}; {run.uploaded} files uploaded to {run.debug_output}")
    say("tensors", f"read back: steps {trial.steps()} (TRAIN {trial.steps(mode='train')[:3]}..., "
        f"EVAL {trial.steps(mode='eval')}), workers {trial.workers()}")
    for name in trial.tensor_names():
        tensor = trial.tensor(name)
        last = tensor.steps()[-1]
        value = tensor.value(last)
        say("tensor", f"{name:<32} {len(tensor.steps()):>2} steps, shape {list(value.shape)}, "
            f"mean |x| at step {last}: {abs(value).mean():.4g}")
    return 0


if __name__ == "__main__":
    from datetime import UTC, datetime

    with LocalAws() as aws, aws.environment():
        from smx_debug.local import install

        install(aws)
        aws.client("s3").create_bucket(Bucket="smx-demo-tensors",
                                       CreateBucketConfiguration={"LocationConstraint": aws.region})
        raise SystemExit(tensor_job(aws, "smx-demo-tensors", job=f"smx-demo-cnn-{datetime.now(UTC):%H%M%S}",
                                    say=lambda step, text="": print(f"[{step}] {text}")))
