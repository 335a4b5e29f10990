"""Configured secrets never enter the retraining execution's input, yet the next run still gets them.

The ``retrain`` action starts the state machine with the flagged job's CreateTrainingJob fields, hyperparameters and
environment included; Step Functions shows an execution's input (and every state) to anyone who may
DescribeExecution. Keys listed in ``retraining.redact_keys`` (``SMX_REDACT_KEYS``) travel as a placeholder; the
``train`` step reads their values from the flagged job when it launches the next run, and the state it returns
keeps the placeholder.
"""

from __future__ import annotations

import json
from typing import Any

from actions_fakes import JOB, SAMPLE, FakeSageMaker, FakeStates, fake_runtime, settings

from smx_debug.actions import Settings, handle_retrain, handle_stop_training
from smx_debug.actions.retrain import REDACTED

SECRET = "wandb-0123456789abcdef"
TAGS = {"smx-debug:managed": "true", "smx-debug:on:VanishingGradient": "retrain"}


def _flagged() -> FakeSageMaker:
    sagemaker = FakeSageMaker(tags=TAGS)
    job = sagemaker.jobs[JOB]
    job["HyperParameters"] = {**job["HyperParameters"], "wandb_api_key": SECRET}
    job["Environment"] = {"HF_TOKEN": "hf-secret", "STAGE": "dev"}
    return sagemaker


def _start(redact: frozenset[str]) -> tuple[dict[str, Any], FakeSageMaker]:
    sagemaker, states = _flagged(), FakeStates()
    runtime = fake_runtime(settings(redact_keys=redact), sagemaker=sagemaker, stepfunctions=states)
    handle_stop_training(SAMPLE, runtime)
    (started,) = states.started.values()
    return json.loads(started["input"]), sagemaker


def test_retrain_execution_input_carries_no_redacted_value() -> None:
    execution_input, _ = _start(frozenset({"wandb_api_key", "HF_TOKEN"}))
    text = json.dumps(execution_input)
    assert SECRET not in text and "hf-secret" not in text
    request = execution_input["run_spec"]["request"]
    assert request["HyperParameters"]["wandb_api_key"] == REDACTED and request["Environment"]["HF_TOKEN"] == REDACTED
    assert request["Environment"]["STAGE"] == "dev"  # not listed: as it was


def test_retrain_train_step_launches_with_the_flagged_jobs_values_and_keeps_them_out_of_the_state() -> None:
    execution_input, sagemaker = _start(frozenset({"wandb_api_key", "HF_TOKEN"}))
    runtime = fake_runtime(settings(), sagemaker=sagemaker)
    state = handle_retrain({"step": "init", "state": execution_input}, runtime)
    state = handle_retrain({"step": "train", "state": state}, runtime)
    assert state["error"] is None
    (created,) = sagemaker.created
    assert created["HyperParameters"]["wandb_api_key"] == SECRET and created["Environment"]["HF_TOKEN"] == "hf-secret"
    assert SECRET not in json.dumps(state) and "hf-secret" not in json.dumps(state)


def test_retrain_redacted_value_gone_from_the_flagged_job_fails_the_step_naming_the_key() -> None:
    execution_input, sagemaker = _start(frozenset({"wandb_api_key"}))
    del sagemaker.jobs[JOB]["HyperParameters"]["wandb_api_key"]
    runtime = fake_runtime(settings(), sagemaker=sagemaker)
    state = handle_retrain({"step": "init", "state": execution_input}, runtime)
    state = handle_retrain({"step": "train", "state": state}, runtime)
    assert sagemaker.created == [] and state["next_action"] == "end"
    assert "wandb_api_key" in state["error"]["message"] and SECRET not in json.dumps(state)


def test_settings_read_redact_keys_from_the_environment() -> None:
    assert Settings.from_env({"SMX_REDACT_KEYS": "wandb_api_key, HF_TOKEN"}).redact_keys == {"wandb_api_key",
                                                                                             "HF_TOKEN"}
