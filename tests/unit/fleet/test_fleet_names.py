"""The names the fleet takes from verdict lines follow SageMaker's own rules, read from botocore's service model:
a job name becomes a file path (``<table>/hour=<h>/<job>.parquet``), so it must never be '..', hold a '/' or a NUL."""

from __future__ import annotations

import re

import botocore.session
import pytest

from smx_debug.contracts import (
    RULE_CONFIGURATION_NAME_MAX_LENGTH,
    TRAINING_JOB_NAME_PATTERN,
    is_rule_configuration_name,
    is_training_job_name,
)


def _shape(name: str) -> dict[str, object]:
    model = botocore.session.get_session().get_service_model("sagemaker")
    metadata: dict[str, object] = model.shape_for(name).metadata
    return metadata


def test_training_job_name_pattern_is_botocores() -> None:
    shape = _shape("TrainingJobName")
    assert shape["pattern"] == TRAINING_JOB_NAME_PATTERN
    assert (shape["min"], shape["max"]) == (1, 63)


def test_rule_configuration_name_limits_are_botocores() -> None:
    shape = _shape("RuleConfigurationName")
    assert (shape["min"], shape["max"], shape["pattern"]) == (1, RULE_CONFIGURATION_NAME_MAX_LENGTH, ".*")


@pytest.mark.parametrize(("name", "ok"), [
    ("a", True), ("guarded-a", True), ("a--b", True), ("j" * 63, True),
    ("", False), ("-lead", False), ("trail-", False), ("j" * 64, False), ("../../../outside", False),
    ("a/b", False), ("a\x00b", False), ("job\n", False), ("jöb", False), ("guarded-\udc80", False), (7, False),
])
def test_is_training_job_name_whole_string(name: object, ok: bool) -> None:
    assert is_training_job_name(name) is ok
    if isinstance(name, str) and name.isascii():  # what botocore's pattern says of the whole string
        assert (re.fullmatch(_shape("TrainingJobName")["pattern"], name) is not None) is ok  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "ok"), [
    ("LossNotDecreasing", True), ("Loss not decreasing / v2 (ü)", True), ("x" * 256, True),
    ("", False), ("x" * 257, False), ("CPU\nBottleneck", False), ("CPU\rBottleneck", False),
    ("CPU\u2028Bottleneck", False), ("CPU\udc80", False), (None, False),
])
def test_is_rule_configuration_name_one_line_of_text(name: object, ok: bool) -> None:
    assert is_rule_configuration_name(name) is ok
