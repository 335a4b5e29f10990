"""The ``smx-debug`` command line.

The parser (every command, option and help text) is ``cli._parser``, light; each command runs in its own
module (``cli.plan``, ``cli.rules``, ``cli.evaluate``, ``cli.report``, ``cli.trace``, ``cli.fleet``), loaded
only when that command runs. Every SmxDebugError, AWS error, bad option value or unusable path becomes a one-line ``error:`` message and the exit
status of its kind (:class:`ExitStatus`: 2 usage, 3 missing data, 4 AWS): users never see a traceback.
Dependencies' INFO lines and warnings are hidden unless ``-v``. The global options (``-v``, ``--output``) are
taken anywhere on the line; the result goes to stdout in the ``--output`` format (``cli._output``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from smx_debug.cli._exit import ExitStatus
from smx_debug.cli._parser import build_parser
from smx_debug.quiet import quiet_dependencies

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """``smx-debug``: parse ``argv`` (the light parser of ``cli._parser``), run the command, return its status."""
    args = build_parser().parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s - %(message)s")
    with quiet_dependencies(verbose=args.verbose):  # the command modules' imports (the SDK, pandas) too
        from smx_debug.cli import (  # local: pandas, SDK: fast --help
            _failure,
            evaluate,
            fleet,
            plan,
            report,
            rules,
            trace,
        )

        module, function = args.run
        commands = {"evaluate": evaluate, "fleet": fleet, "plan": plan, "report": report, "rules": rules,
                    "trace": trace}
        try:
            return int(getattr(commands[module], function)(args) or 0)
        except BrokenPipeError:  # `smx-debug ... | head`
            return ExitStatus.OK
        except Exception as exc:
            named = getattr(args, "job_or_path", None)
            found = _failure.failure(exc, [named] if isinstance(named, str) else named or [])
            if found is None:
                raise
            line, status = found
            print(f"error: {line}", file=sys.stderr)
            return status
