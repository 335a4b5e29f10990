"""The CLI's exit statuses, and the one ``error:`` line and status each failure gets."""

from __future__ import annotations

from enum import IntEnum

from smx_debug.errors import (
    AwsError,
    DataError,
    NotFoundError,
    RegionError,
    SmxDebugError,
    translate_client_error,
)

__all__ = ["EPILOG", "ExitStatus", "failure"]


class ExitStatus(IntEnum):
    """What a ``smx-debug`` exit status means (``smx-debug --help`` lists them)."""

    OK = 0
    RULES_FIRED = 1
    USAGE = 2
    NO_DATA = 3
    AWS = 4


_MEANING = {
    ExitStatus.OK: "success",
    ExitStatus.RULES_FIRED: "a rule fired (rules evaluate --fail-on-issues)",
    ExitStatus.USAGE: "usage error: a bad option, value, output path, plan or rule name",
    ExitStatus.NO_DATA: "missing data: no such job, file, folder or s3:// prefix, or nothing to evaluate in it yet",
    ExitStatus.AWS: "AWS error: no region or credentials, access denied, an unreachable endpoint, a failed call",
}
EPILOG = "exit status:\n" + "\n".join(f"  {int(s)}  {_MEANING[s]}" for s in ExitStatus)


def failure(exc: BaseException) -> tuple[str, ExitStatus] | None:
    """The one line (without ``error: ``) and the exit status for ``exc``; None for what is not a failure we
    report (it propagates)."""
    from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

    if isinstance(exc, ClientError):
        translated = translate_client_error(exc)
        if translated is exc:
            err = exc.response.get("Error", {})
            return f"AWS {exc.operation_name}: {err.get('Code', '')}: {err.get('Message', exc)}", ExitStatus.AWS
        exc = translated
    if isinstance(exc, NoRegionError):
        return str(RegionError()), ExitStatus.AWS
    if isinstance(exc, BotoCoreError):
        return f"AWS: {exc}", ExitStatus.AWS
    if isinstance(exc, SmxDebugError):
        if isinstance(exc, AwsError | RegionError):
            return str(exc), ExitStatus.AWS
        if isinstance(exc, NotFoundError | DataError):
            return str(exc), ExitStatus.NO_DATA
        return str(exc), ExitStatus.USAGE
    if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
        # a path the checks could not foresee (a file gone, permissions, a full disk)
        where = f"{exc.filename}: " if exc.filename else ""
        status = ExitStatus.NO_DATA if isinstance(exc, FileNotFoundError) else ExitStatus.USAGE
        return f"{where}{exc.strerror or exc}", status
    return None
