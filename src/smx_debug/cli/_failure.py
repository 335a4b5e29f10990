"""The one ``error:`` line and exit status each failure of a command gets (loaded with the commands: botocore)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

from smx_debug.cli._exit import ExitStatus
from smx_debug.contracts import is_training_job_name
from smx_debug.errors import (
    AwsError,
    DataError,
    JobNotFoundError,
    NotFoundError,
    RegionError,
    SmxDebugError,
    translate_client_error,
)


def failure(exc: BaseException, job_or_path: Sequence[str] = ()) -> tuple[str, ExitStatus] | None:
    """The one line (without ``error: ``) and the exit status for ``exc``; None for what is not a failure we
    report (it propagates).

    ``job_or_path``: the command's JOB_OR_PATHs. When one of them is no path and looking it up as a training job
    failed (no such job, no region or credentials, ...), the line first says that no such folder exists: a
    mistyped folder name is the likelier mistake than a job in a region not configured.
    """
    found = _failure(exc)
    if found is None:
        return None
    line, status = found
    name = _missing_folder(exc, status, job_or_path)
    if name is not None:
        line = f"{name!r}: no such file or folder in {Path.cwd()}, and as a training job name: {line}"
    return line, status


def _missing_folder(exc: BaseException, status: ExitStatus, job_or_path: Sequence[str]) -> str | None:
    """The JOB_OR_PATH the failed job lookup was for, when it is no path either; else None."""
    if isinstance(exc, JobNotFoundError):
        names = [exc.job_name] if exc.job_name in job_or_path else []
    elif status == ExitStatus.AWS:
        names = list(job_or_path)
    else:
        return None
    bare = [n for n in names if is_training_job_name(n) and not Path(n).expanduser().exists()]
    return bare[0] if bare else None


def _failure(exc: BaseException) -> tuple[str, ExitStatus] | None:
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
