"""The ``smx-debug`` command line.

Each command group lives in its own module with a ``register(subparsers)`` function. Every
SmxDebugError, AWS error, bad option value or unusable path becomes a one-line ``error:`` message and the exit
status of its kind (:class:`ExitStatus`: 2 usage, 3 missing data, 4 AWS): users never see a traceback.
Dependencies' INFO lines and warnings are hidden unless ``-v``. The global options (``-v``, ``--output``) are
taken anywhere on the line; the result goes to stdout in the ``--output`` format (``cli._output``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from smx_debug import __version__
from smx_debug.cli._args import OneLineParser
from smx_debug.cli._exit import EPILOG, ExitStatus, failure
from smx_debug.quiet import quiet_dependencies

__all__ = ["ExitStatus", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    # Loaded here, not at module level: the command modules pull in the SDK, pandas and the readers, which
    # `import smx_debug.cli` (and the entry point's start-up) should not pay for until a parser is built.
    from smx_debug.cli import evaluate, fleet, plan, report, rules, trace

    parser = OneLineParser(prog="smx-debug", description="Guardrails for SageMaker training jobs.", top=True,
                           epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"smx-debug {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    plan.register(sub)
    rules_sub = rules.register(sub)
    evaluate.register(rules_sub)
    report.register(sub)
    trace.register(sub)
    fleet.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verbose:
        import logging

        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s - %(message)s")
    with quiet_dependencies(verbose=args.verbose):
        try:
            return int(args.func(args) or 0)
        except BrokenPipeError:  # `smx-debug ... | head`
            return ExitStatus.OK
        except Exception as exc:
            named = getattr(args, "job_or_path", None)
            found = failure(exc, [named] if isinstance(named, str) else named or [])
            if found is None:
                raise
            line, status = found
            print(f"error: {line}", file=sys.stderr)
            return status
