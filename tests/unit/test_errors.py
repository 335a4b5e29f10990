"""The exception family: each user mistake is its own SmxDebugError and the matching built-in; AWS errors are
translated by error code at the boundary and unknown codes are left alone (re-raised by the caller)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from smx_debug import errors
from smx_debug.errors import (
    AccessDeniedError,
    AwsError,
    JobNotFoundError,
    NoDataYetError,
    NotFoundError,
    RegionError,
    SmxDebugError,
    translate_client_error,
)


def _client_error(code: str, message: str = "", operation: str = "DescribeTrainingJob") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [(JobNotFoundError, LookupError), (NoDataYetError, LookupError), (AccessDeniedError, PermissionError),
     (RegionError, ValueError)],
)
def test_errors_each_user_mistake_is_smx_debug_error_and_builtin(cls: type[Exception], builtin: type) -> None:
    assert issubclass(cls, SmxDebugError) and issubclass(cls, builtin)
    doc = cls.__doc__ or ""
    assert doc.startswith("Raised when") and "\n" not in doc.strip()


def test_errors_every_public_class_has_a_one_line_raised_when_docstring() -> None:
    classes = [obj for obj in vars(errors).values()
               if isinstance(obj, type) and issubclass(obj, Exception) and obj.__module__ == errors.__name__]
    assert len(classes) >= 12  # the family (smx_debug's face re-exports it)
    for cls in classes:
        assert (cls.__doc__ or "").startswith("Raised "), cls.__name__


@pytest.mark.parametrize(
    ("code", "message"),
    [("ValidationException", "Requested resource not found."), ("ResourceNotFound", ""),
     ("ValidationException", "Could not find requested job with name ghost")],
)
def test_translate_missing_job_is_job_not_found_naming_job_and_fix(code: str, message: str) -> None:
    out = translate_client_error(_client_error(code, message), job_name="ghost", region="eu-west-1")
    assert isinstance(out, JobNotFoundError) and isinstance(out, NotFoundError)
    assert out.job_name == "ghost"
    assert "'ghost' not found in region eu-west-1" in str(out) and "AWS_DEFAULT_REGION" in str(out)


@pytest.mark.parametrize("code", ["AccessDenied", "AccessDeniedException", "UnrecognizedClientException"])
def test_translate_access_denied_names_action_and_resource(code: str) -> None:
    out = translate_client_error(_client_error(code), job_name="j1")
    assert isinstance(out, AccessDeniedError) and isinstance(out, AwsError)
    assert out.code == code and out.operation == "DescribeTrainingJob"
    assert str(out).startswith(f"access denied: DescribeTrainingJob on training job 'j1' ({code})")


def test_translate_missing_bucket_is_not_found_naming_it() -> None:
    out = translate_client_error(_client_error("NoSuchBucket", operation="ListObjectsV2"), where="s3://b/p")
    assert type(out) is NotFoundError and str(out) == "s3://b/p does not exist (NoSuchBucket)"


@pytest.mark.parametrize("code", ["ThrottlingException", "InternalFailure", "ValidationException"])
def test_translate_unknown_code_returns_the_error_itself(code: str) -> None:
    exc = _client_error(code, "1 validation error detected")
    assert translate_client_error(exc, job_name="j") is exc


def test_region_error_advises_aws_default_region() -> None:
    assert "AWS_DEFAULT_REGION" in str(RegionError()) and "AWS_REGION " not in str(RegionError())


def test_cloudwatch_access_denied_is_access_denied_error() -> None:
    from datetime import UTC, datetime

    import boto3
    from botocore.stub import Stubber

    from smx_debug.data.cloudwatch import instance_metrics

    cw = boto3.client("cloudwatch", region_name="us-west-2")
    with Stubber(cw) as stub:
        stub.add_client_error("get_metric_data", "AccessDenied", "not authorized")
        with pytest.raises(AccessDeniedError, match=r"GetMetricData on CloudWatch metrics \(AccessDenied\)"):
            instance_metrics("j", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 1, tzinfo=UTC),
                             cloudwatch_client=cw)
