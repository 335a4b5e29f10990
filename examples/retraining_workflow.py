"""The retraining workflow, step by step, on the embedded local AWS.

The Debugger + Step Functions case: a very deep ResNet with ELU activations explodes. The guard stack's
state machine runs ``init -> train -> wait -> monitor -> (launch_new | monitor | end)`` over the
``retrain`` Lambda. moto cannot run Lambda code without Docker, so this script plays the state machine's
part: it calls the *deployed* retrain function's handler (its code, its environment) once per state,
and plays SageMaker's part by scripting each run's rule outcome (ExplodingTensor fires on the first six
runs, the seventh trains cleanly). The run spec is rendered from a debug plan.

    .venv/bin/python examples/retraining_workflow.py
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from smx_debug import local  # noqa: E402
from smx_debug.config import DebugPlan, SmxDebugWarning  # noqa: E402
from smx_debug.contracts import HANDLER_TAG  # noqa: E402
from smx_debug.local import LocalAws, deploy_stack  # noqa: E402
from smx_debug.local.awslambda.invoke import invoke_handler  # noqa: E402

STACK = "SmxDebugGuard"
RULE = "ExplodingTensor"
OUTCOMES = ["explodes"] * 6 + ["completes"]  # the published run: 5 warmup halvings, then batch norm


def run_spec(bucket: str, role_arn: str) -> dict[str, Any]:
    """What the state machine's input carries: the CreateTrainingJob request (run as the SageMaker execution
    role ``role_arn``) and the strategies."""
    plan = DebugPlan.from_file(ROOT / "examples" / "plans" / "exploding_gradient_guard.yaml")
    plan = plan.with_output_path(f"s3://{bucket}/debugger")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmxDebugWarning)
        debug_fields = plan.to_request_dict(job_name="resnet-elu-deep")
    request = {
        "TrainingJobName": "resnet-elu-deep",
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:1.13.1-gpu-py39",
            "TrainingInputMode": "File",
        },
        "HyperParameters": {"depth": "110", "activation": '"elu"', "epochs": "30"},
        "RoleArn": role_arn,
        "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/model"},
        "ResourceConfig": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        **debug_fields,
    }
    return {
        "job_name_prefix": "resnet-elu-deep",
        "hyperparameters": {"warmup_learning_rate": 0.1, "learning_rate": 0.1, "add_batch_norm": 0},
        "strategies": [
            {"name": "halve_warmup", "floor": 0.005},
            {"name": "add_batch_norm"},
            {"name": "scale_learning_rate", "factor": 0.5, "floor": 1e-05},
        ],
        "max_retraining": 10,
        "rules": [RULE],
        "request": request,
    }


def deployed_retrain_environment(aws: LocalAws) -> tuple[str, dict[str, str]]:
    """The deployed retrain function (found by its smx-debug:handler tag) and its environment."""
    lam = aws.client("lambda")
    for page in lam.get_paginator("list_functions").paginate():
        for fn in page["Functions"]:
            got = lam.get_function(FunctionName=fn["FunctionName"])
            if (got.get("Tags") or {}).get(HANDLER_TAG) == "retrain":
                return fn["FunctionName"], dict((fn.get("Environment") or {}).get("Variables") or {})
    raise SystemExit("the stack has no retrain function (is retraining enabled in the context?)")


def main() -> int:
    from infra.cdk_app import build_app

    with LocalAws() as aws:
        local.install(aws)
        import tempfile

        with tempfile.TemporaryDirectory() as out:
            build_app({"local": True, "watch_prefixes": ["resnet-elu-deep"]}, outdir=out).synth()
            deployed = deploy_stack(aws, Path(out) / f"{STACK}.template.json", stack_name=STACK)
        function, env = deployed_retrain_environment(aws)
        print(f"deployed {STACK}; retrain function {function}")

        def step(name: str, state: dict[str, Any]) -> dict[str, Any]:
            delivery = invoke_handler(aws, "retrain", {"step": name, "state": state}, env,
                                          function_name=function)
            if delivery.error is not None:
                raise SystemExit(f"{name} failed: {delivery.error!r}")
            result: dict[str, Any] = delivery.result
            if result.get("error"):
                raise SystemExit(f"{name} returned an error state: {result['error']}")
            return result

        state = step("init", {"run_spec": run_spec(deployed.output("OutputBucketName"), local.execution_role(aws))})
        for run, outcome in enumerate(OUTCOMES, start=1):
            state = step("train", state)
            job = state["history"]["latest_job_name"]
            hyper = state["run_spec"]["hyperparameters"]
            print(f"run {run}: launched {job} warmup_learning_rate={hyper['warmup_learning_rate']} "
                  f"learning_rate={hyper['learning_rate']} add_batch_norm={hyper['add_batch_norm']}")
            # SageMaker's part: the job trains and its rule is evaluated.
            local.set_training_job_status(aws, job, "InProgress")
            local.set_rule_statuses(aws, job, debug={RULE: "InProgress"})
            state = step("monitor", state)  # nothing yet: keep monitoring
            if outcome == "explodes":
                local.set_rule_statuses(aws, job, debug=[local.rule_status(RULE, "IssuesFound", step=200 * run)])
            else:
                local.set_training_job_status(aws, job, "Completed")
                local.set_rule_statuses(aws, job, debug={RULE: "NoIssuesFound"})
            state = step("monitor", state)
            print(f"       {RULE} {'fired: job stopped' if outcome == 'explodes' else 'quiet: job completed'}; "
                  f"next_action={state['next_action']}")

        history, hyper = state["history"], state["run_spec"]["hyperparameters"]
        print("final state:", {k: history[k] for k in ("num_retraining", "num_warmup_adjustments",
                                                        "num_batch_layer_adjustments",
                                                        "num_learning_rate_adjustments")},
              {"add_batch_norm": hyper["add_batch_norm"], "warmup_learning_rate": hyper["warmup_learning_rate"],
               "job_status": state["job_status"], "next_action": state["next_action"]})
        ok = (history["num_retraining"], history["num_warmup_adjustments"], history["num_batch_layer_adjustments"],
              hyper["add_batch_norm"], state["job_status"], state["next_action"]) == (7, 5, 1, 1, "Completed", "end")
        return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
