"""The one output convention of every command (aws-cli's): ``--output table|text|json`` on stdout.

``table`` (the default) is for people: aligned columns with a header; ``text`` is for ``cut``/``awk``: one
tab-separated line per row, no header; ``json`` is for programs. What a command says besides its result
(what it read, what it skipped) goes to stderr, so stdout is only the result. ``--out FILE`` (where a command
has it) writes that result to FILE instead of stdout; a file that is the product itself (``report``,
``trace``) is ``--out FILE`` too, and ``--output json`` then prints what was written.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from smx_debug.errors import ConfigError

Format = Literal["table", "text", "json"]
FORMATS: tuple[Format, ...] = ("table", "text", "json")


def output_format(args: argparse.Namespace, default: Format = "table") -> Format:
    """The ``--output`` given anywhere on the command line, else ``default``."""
    chosen: Format | None = getattr(args, "output", None)
    return chosen or default


def fixed_format(args: argparse.Namespace, only: Format, command: str) -> None:
    """For a command with one form of output: any other ``--output`` is a usage error."""
    chosen = getattr(args, "output", None)
    if chosen not in (None, only):
        raise ConfigError(f"--output {chosen}: {command} writes {only} only", field="--output", value=chosen)


class _JsonTo(argparse.Action):
    """``--json FILE``: ``--output json --out FILE`` (``-``: stdout), the spelling scripts written for earlier
    versions use (``smx-debug rules evaluate TRIAL --plan plan.yaml --json -``), kept working."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        namespace.output = "json"
        namespace.out = values


def add_out_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--out FILE``: the command's stdout result written to FILE instead (checked before any work); and
    ``--json FILE``, the same as ``--output json --out FILE``."""
    parser.add_argument("--out", metavar="FILE", help=f"write {what} to FILE instead of stdout (- : stdout)")
    parser.add_argument("--json", metavar="FILE", action=_JsonTo, dest="out",
                        help="the same as --output json --out FILE (- : stdout)")


def as_table(rows: Sequence[Sequence[Any]], header: Sequence[str] | None = None) -> str:
    """Aligned columns (the last one unpadded), with ``header`` first when given."""
    cells = [[str(c) for c in row] for row in ([header] if header else []) + list(rows)]
    if not cells:
        return ""
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]) - 1)]
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def as_text(rows: Sequence[Sequence[Any]]) -> str:
    """One tab-separated line per row; tabs and newlines inside a cell become spaces."""
    return "\n".join("\t".join(" ".join(str(c).split()) if c is not None else "" for c in row) for row in rows)


def emit(body: str | Any, *, to: str | None = None) -> None:
    """Write the result to stdout, or to the file ``to`` (a command's ``--out``); a non-string ``body`` is written
    as JSON."""
    out = body if isinstance(body, str) else json.dumps(body, indent=2, default=str)
    if to and to != "-":
        Path(to).write_text(out + "\n", encoding="utf-8")
    elif out:
        sys.stdout.write(out + "\n")
