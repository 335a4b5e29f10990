"""The smx-debug exception family.

Every error a user can cause derives from :class:`SmxDebugError`, and also from the built-in
exception it behaves like, so ``except ValueError`` keeps working. Messages name the field and
quote the offending value. This module imports only the standard library: the Lambda assets ship it.
"""

from __future__ import annotations

__all__ = [
    "AwsError",
    "ConfigError",
    "DataError",
    "NotFoundError",
    "SmxDebugError",
    "UnknownNameError",
]


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


class AwsError(SmxDebugError, RuntimeError):
    """Raised when an AWS call fails for a reason the caller can act on (translated from a ClientError)."""

    def __init__(self, message: str, *, code: str = "", operation: str = "") -> None:
        self.code = code
        self.operation = operation
        super().__init__(message)
