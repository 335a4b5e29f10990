"""The smx-debug exception family.

Every error a user can cause derives from :class:`SmxDebugError`, and also from the built-in
exception it behaves like, so ``except ValueError`` keeps working. Messages name the field and
quote the offending value. This module imports only the standard library: the Lambda assets ship it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class SmxDebugError(Exception):
    """Raised for every error smx-debug reports on purpose; the root of the family."""


class ConfigError(SmxDebugError, ValueError):
    """Raised when a debug plan, a rule parameter or a setting is invalid; names the field and value."""

    def __init__(self, message: str, *, field: str | None = None, value: object = None) -> None:
        self.field = field
        self.value = value
        super().__init__(message)


class UnknownNameError(SmxDebugError, LookupError):
    """Raised when a rule, parameter or collection name is not known; suggests the closest name."""

    def __init__(self, message: str, *, name: str = "", suggestion: str | None = None) -> None:
        self.name = name
        self.suggestion = suggestion
        super().__init__(message)


class NotFoundError(SmxDebugError, LookupError):
    """Raised when a training job, S3 prefix or output the caller asked for does not exist."""


class DataError(SmxDebugError, ValueError):
    """Raised when data read from S3 or disk cannot be used at all (partial records are skipped, not raised)."""


class UnknownDtypeError(DataError):
    """Raised when a tensor record holds a TensorProto dtype with no numpy form (resource, variant, float8...)."""

    def __init__(self, code: int, *, tensor: str = "") -> None:
        self.code = code
        self.tensor = tensor
        where = f" of tensor {tensor!r}" if tensor else ""
        super().__init__(f"dtype {code}{where} is not a numeric, bool or string TensorProto dtype this reader knows")


class TensorUnavailableError(NotFoundError):
    """Raised when a trial holds no tensor of that name, or not at the step, mode or worker asked for."""

    def __init__(self, message: str, *, tensor: str = "", step: int | None = None, mode: str | None = None,
                 worker: str | None = None) -> None:
        self.tensor = tensor
        self.step = step
        self.mode = mode
        self.worker = worker
        super().__init__(message)


class AwsError(SmxDebugError, RuntimeError):
    """Raised when an AWS call fails for a reason the caller can act on (translated from a ClientError)."""

    def __init__(self, message: str, *, code: str = "", operation: str = "") -> None:
        self.code = code
        self.operation = operation
        super().__init__(message)


class JobNotFoundError(NotFoundError):
    """Raised when no training job of that name exists in the account and region the call went to."""

    def __init__(self, job_name: str, *, region: str | None = None) -> None:
        self.job_name = job_name
        self.region = region
        where = f" in region {region}" if region else ""
        super().__init__(
            f"training job {job_name!r} not found{where}: check the name (`aws sagemaker list-training-jobs "
            f"--name-contains ...`) and the region (AWS_DEFAULT_REGION)"
        )


class NoDataYetError(NotFoundError):
    """Raised when a job exists but has not written the data asked for yet (profiler output, metrics)."""

    def __init__(self, message: str, *, job_name: str = "", where: str = "") -> None:
        self.job_name = job_name
        self.where = where
        super().__init__(message)


class OutOfTimeError(SmxDebugError, TimeoutError):
    """Raised when too little of a Lambda invocation is left to start a call (its deadline:
    :class:`smx_debug.actions.runtime.Deadline`); the redelivery does the rest."""

    def __init__(self, what: str, left: float, needed: float) -> None:
        self.what, self.left, self.needed = what, left, needed
        super().__init__(
            f"{what}: {left:.1f} s of the invocation left, a call may take {needed:g} s; "
            "left for the redelivery"
        )


class AccessDeniedError(AwsError, PermissionError):
    """Raised when the caller's credentials may not make an AWS call; names the action and the resource."""


class RegionError(SmxDebugError, ValueError):
    """Raised when no AWS region is configured, or the one configured does not exist."""

    def __init__(self, message: str = "", *, region: str | None = None) -> None:
        self.region = region
        super().__init__(
            message
            or "no AWS region configured: set AWS_DEFAULT_REGION (e.g. export AWS_DEFAULT_REGION=us-east-1) "
            "or `region` in ~/.aws/config"
        )


_ACCESS_CODES = frozenset({
    "AccessDenied", "AccessDeniedException", "AllAccessDisabled", "403", "UnauthorizedOperation",
    "UnrecognizedClientException", "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException",
})
_MISSING_WORDS = ("not found", "could not find", "does not exist")


def translate_client_error(
    exc: Exception, *, operation: str = "", job_name: str | None = None, where: str | None = None,
    region: str | None = None,
) -> Exception:
    """The SmxDebugError for a botocore ``ClientError``, chosen by its error code; ``exc`` itself when unknown.

    Use at the boundary, then ``raise translated from exc`` (a returned ``exc`` is re-raised unchanged)::

        except ClientError as exc:
            raise translate_client_error(exc, operation="DescribeTrainingJob", job_name=name) from exc
    """
    response: Mapping[str, Any] = getattr(exc, "response", None) or {}
    error: Mapping[str, Any] = response.get("Error") or {}
    code = str(error.get("Code", ""))
    message = str(error.get("Message", ""))
    operation = operation or str(getattr(exc, "operation_name", "") or "")
    target = where or (f"training job {job_name!r}" if job_name else "the resource")
    if code in _ACCESS_CODES:
        return AccessDeniedError(
            f"access denied: {operation or 'the call'} on {target} ({code}); the credentials' policy must allow "
            f"it (see docs/permissions.md)",
            code=code, operation=operation,
        )
    missing = code in {"ResourceNotFound", "ResourceNotFoundException"} or (
        code == "ValidationException" and any(word in message.lower() for word in _MISSING_WORDS)
    )
    if job_name is not None and missing:
        return JobNotFoundError(job_name, region=region)
    if code in {"NoSuchBucket", "NoSuchKey", "404", "NotFound"} or missing:
        return NotFoundError(f"{target} does not exist ({code})")
    return exc
