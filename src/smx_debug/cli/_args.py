"""The CLI's parser and checked values and paths: a bad one is one ``error:`` line naming the option and value, exit 2.

Numbers are checked by argparse ``type=`` functions; output paths are checked before any work starts, so a
typo never costs a full evaluation and never leaves half-written output.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from smx_debug.cli._exit import ExitStatus
from smx_debug.cli._output import FORMATS
from smx_debug.contracts import is_training_job_name
from smx_debug.errors import ConfigError, NoDataYetError

# DynamoDB's TableName: a name (3-255 of letters, digits, '_', '-', '.') or the table's ARN.
TABLE_NAME_RE = re.compile(r"^([a-zA-Z0-9_.-]{3,255}|arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table/[a-zA-Z0-9_.-]{3,255})$")


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one ``error:`` line (with the command) and exit status 2.

    Every parser of the tree (argparse builds the subcommands' parsers with this class too) takes the global
    options (``-v``, ``--output``, ``--region``, ``--endpoint-url``), so they work before or after any command. Only the top parser (``top=True``) gives them their
    defaults; the others leave them unset unless given (``SUPPRESS``), so a subcommand never resets what was
    given before it.
    """

    def __init__(self, *args: Any, top: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        group = self.add_argument_group("global options")
        group.add_argument("-v", "--verbose", action="store_true", default=False if top else argparse.SUPPRESS,
                           help="show the SDK's and boto's INFO lines and dependency warnings")
        group.add_argument("--output", choices=FORMATS, default=None if top else argparse.SUPPRESS,
                           help="the result on stdout: table (aligned, for people; the default), text (tab-separated, "
                           "no header) or json")
        group.add_argument("--region", default=None if top else argparse.SUPPRESS,
                           help="the AWS region (default: the AWS configuration's, AWS_DEFAULT_REGION)")
        group.add_argument("--endpoint-url", default=None if top else argparse.SUPPRESS, metavar="URL",
                           help="send every AWS call to this endpoint (e.g. the local AWS)")

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(ExitStatus.USAGE)


def _number(text: str, kind: type[int] | type[float]) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _checked(text: str, kind: type[int] | type[float], ok: Callable[[float], bool], requirement: str) -> float:
    value = _number(text, kind)
    if not ok(value):
        raise argparse.ArgumentTypeError(f"{requirement}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return int(_checked(text, int, lambda v: v >= 1, "must be at least 1"))


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    return int(_checked(text, int, lambda v: v >= 0, "must be 0 or more"))


def positive_float(text: str) -> float:
    """A finite number > 0."""
    return float(_checked(text, float, lambda v: v > 0, "must be a positive number"))


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    return float(_checked(text, float, lambda v: v >= 0, "must be a finite number >= 0"))


def job_name(text: str) -> str:
    """A valid SageMaker training job name."""
    if not is_training_job_name(text):
        raise argparse.ArgumentTypeError(
            f"not a valid training job name: {text!r} (1-63 letters, digits and hyphens, starting and ending "
            "with a letter or digit)"
        )
    return text


def table_name(text: str) -> str:
    """A DynamoDB table name or table ARN."""
    if not TABLE_NAME_RE.match(text):
        raise argparse.ArgumentTypeError(
            f"not a DynamoDB table name: {text!r} (3-255 letters, digits, '_', '-' and '.', or a table ARN)"
        )
    return text


def check_output_file(path: str | None, option: str) -> None:
    """``path`` can be written as a file: not a folder, and its folder exists."""
    if path is None or path == "-":
        return
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{option} {path!r} is a folder, expected a file name", field=option, value=path)
    parent = p.parent
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise ConfigError(f"{option} {path!r}: folder {str(parent)!r} {what}", field=option, value=path)


def check_output_dir(path: str | None, option: str) -> None:
    """``path`` is a folder or can be created as one (no file in the way)."""
    if path is None:
        return
    p = Path(path)
    for candidate in (p, *p.parents):
        if candidate.exists():
            if not candidate.is_dir():
                where = "" if candidate == p else f" ({str(candidate)!r} is a file)"
                raise ConfigError(f"{option} {path!r} is not a folder{where}", field=option, value=path)
            return


def require_data(data: Any, name: str, source: str) -> None:
    """Raise :class:`NoDataYetError` when a job or folder has no rows to evaluate at all."""
    frames = [getattr(data, f, None) for f in ("system", "steps", "scalars")]
    if any(f is not None and len(f) for f in frames):
        return
    hint = (
        "CloudWatch shows instance metrics a few minutes after the job starts, and only for jobs that ran"
        if "CloudWatch" in source
        else "expected Debugger's profiler-output layout (system/, framework/) or a training job name"
    )
    raise NoDataYetError(f"{name!r}: no profiler data to evaluate (no system metrics, steps or scalars in "
                         f"{source}); {hint}", job_name=name, where=source)
