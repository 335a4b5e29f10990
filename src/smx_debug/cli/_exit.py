"""The CLI's exit statuses and what each means (``smx-debug --help`` lists them); ``cli._failure`` gives each
failure its status."""

from __future__ import annotations

from enum import IntEnum


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
