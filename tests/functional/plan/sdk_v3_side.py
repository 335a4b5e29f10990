"""Run inside SDK v3's side environment (bench/.venv-sdkv3) by tests/functional/plan/test_sdk_v3.py; prints JSON.

Every botocore session this process creates captures its CreateTrainingJob call just before the request would be
built and sent: the parameters are validated with botocore's ``ParamValidator`` against the SageMaker service model
of this environment's botocore, recorded, and the call stops there (:class:`Captured`), so nothing leaves the
machine. Telemetry is switched off the same way the v2 test does it.

Modes:
    model-trainer PLAN      ModelTrainer(**plan.to_model_trainer_kwargs(...)).train(wait=False)
    model-trainer-create PLAN ROLE   the same, not captured: the job is created where AWS_ENDPOINT_URL points
    training-job PLAN...    TrainingJob.create(**plan.to_training_job_kwargs(...)) for each plan
    estimator PLAN          plan.to_estimator_kwargs(): the error SDK v3 gets
    snippets FILE           the python blocks in FILE (a JSON list of code strings), in one namespace
"""

from __future__ import annotations

import contextlib
import json
import sys
import traceback
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

from botocore import handlers
from botocore.validate import ParamValidator

CALLS: list[dict[str, Any]] = []
ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:latest"


class Captured(Exception):
    """Raised once CreateTrainingJob's parameters are recorded: the request never leaves the machine."""


def _capture(params: dict[str, Any], model: Any, **_: Any) -> None:
    report = ParamValidator().validate(params, model.input_shape)
    CALLS.append({"params": params, "errors": report.generate_report()})
    raise Captured


if sys.argv[1:2] != ["model-trainer-create"]:  # before any botocore session exists: every session captures
    handlers.BUILTIN_HANDLERS.append(("before-parameter-build.sagemaker.CreateTrainingJob", _capture))

from sagemaker.core.telemetry import telemetry_logging  # noqa: E402 - after the handler, before any session

telemetry_logging._send_telemetry_request = lambda *args, **kwargs: None

import smx_debug  # noqa: E402
from smx_debug import DebugPlan  # noqa: E402
from smx_debug.config.sdk_v3 import hook_environment  # noqa: E402


def _call(fn: Any) -> dict[str, Any]:
    before = len(CALLS)
    with contextlib.suppress(Captured):
        fn()
    if len(CALLS) != before + 1:
        raise SystemExit(f"expected one CreateTrainingJob call, saw {len(CALLS) - before}")
    return CALLS[-1]


def model_trainer(path: str) -> dict[str, Any]:
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.train import ModelTrainer
    from sagemaker.train.configs import Compute, OutputDataConfig, StoppingCondition

    plan = DebugPlan.from_file(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kwargs = plan.to_model_trainer_kwargs(
            training_image=IMAGE, role=ROLE, base_job_name="smx-v3", sagemaker_session=Session(),
            compute=Compute(instance_type="ml.m5.large", instance_count=1),
            output_data_config=OutputDataConfig(s3_output_path="s3://bucket/models"),
            stopping_condition=StoppingCondition(max_runtime_in_seconds=3600),
            tags={"team": "a"}, environment={"EPOCHS": "3"},
        )
    trainer = ModelTrainer(**kwargs)
    call = _call(lambda: trainer.train(wait=False, logs=False))
    return {**call, "warnings": [str(w.message) for w in caught], "hook_environment": hook_environment(plan)}


def model_trainer_create(path: str, role: str) -> dict[str, Any]:
    """ModelTrainer's job created for real on the AWS that ``AWS_ENDPOINT_URL`` names (the local AWS)."""
    from sagemaker.train import ModelTrainer
    from sagemaker.train.configs import Compute, OutputDataConfig

    plan = DebugPlan.from_file(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kwargs = plan.to_model_trainer_kwargs(
            training_image=IMAGE, role=role, base_job_name="smx-v3-local",
            compute=Compute(instance_type="ml.m5.large", instance_count=1),
            output_data_config=OutputDataConfig(s3_output_path="s3://bucket/models"), tags={"team": "a"},
        )
    trainer = ModelTrainer(**kwargs)
    trainer.train(wait=False, logs=False)
    job = trainer._latest_training_job  # what train() created (the SDK keeps it there)
    return {"job_name": job.training_job_name, "status": str(job.training_job_status)}


def training_job(paths: list[str]) -> dict[str, Any]:
    from sagemaker.core.resources import TrainingJob
    from sagemaker.core.shapes import (
        AlgorithmSpecification,
        OutputDataConfig,
        ResourceConfig,
        StoppingCondition,
    )

    out = {}
    for path in paths:
        plan = DebugPlan.from_file(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kwargs = plan.to_training_job_kwargs(training_job_name="smx-v3-debugger", tags={"team": "a"})
        out[path] = _call(lambda kwargs=kwargs: TrainingJob.create(
            role_arn=ROLE, region="us-west-2",
            algorithm_specification=AlgorithmSpecification(training_image=IMAGE, training_input_mode="File"),
            resource_config=ResourceConfig(instance_type="ml.m5.large", instance_count=1, volume_size_in_gb=30),
            output_data_config=OutputDataConfig(s3_output_path="s3://bucket/models"),
            stopping_condition=StoppingCondition(max_runtime_in_seconds=3600),
            **kwargs,
        ))
    return out


def estimator(path: str) -> dict[str, Any]:
    plan = DebugPlan.from_file(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plan.to_estimator_kwargs()
    except Exception as exc:
        return {"type": type(exc).__name__, "message": str(exc), "mro": [c.__name__ for c in type(exc).__mro__]}
    return {"type": None}


def snippets(path: str) -> dict[str, Any]:
    blocks = json.loads(Path(path).read_text(encoding="utf-8"))
    namespace: dict[str, Any] = {"__name__": "__snippet__"}
    out = []
    for code in blocks:
        before = len(CALLS)
        try:
            exec(compile(code, "<snippet>", "exec"), namespace)
        except Captured:
            pass
        except Exception:
            out.append({"error": traceback.format_exc()})
            continue
        out.append({"calls": CALLS[before:]})
    return {"blocks": out}


def main() -> None:
    mode, *args = sys.argv[1:]
    result: dict[str, Any]
    if mode == "model-trainer":
        result = model_trainer(args[0])
    elif mode == "model-trainer-create":
        result = model_trainer_create(args[0], args[1])
    elif mode == "training-job":
        result = training_job(args)
    elif mode == "estimator":
        result = estimator(args[0])
    elif mode == "snippets":
        result = snippets(args[0])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    result["versions"] = {name: version(name) for name in ("sagemaker", "sagemaker-core", "sagemaker-train",
                                                             "botocore", "pydantic", "smx-debug")}
    result["smx_debug_file"] = smx_debug.__file__
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
