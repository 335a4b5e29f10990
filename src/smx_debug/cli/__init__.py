"""The ``smx-debug`` command line.

Each command group lives in its own module with a ``register(subparsers)`` function. Every
SmxDebugError, bad option value or unusable path becomes a one-line ``error:`` message and exit status 2:
users never see a traceback. Dependencies' INFO lines and warnings are hidden unless ``-v``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from smx_debug import __version__
from smx_debug.cli._args import OneLineParser
from smx_debug.errors import RegionError, SmxDebugError, translate_client_error
from smx_debug.quiet import quiet_dependencies

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    # Loaded here, not at module level: the command modules pull in the SDK, pandas and the readers, which
    # `import smx_debug.cli` (and the entry point's start-up) should not pay for until a parser is built.
    from smx_debug.cli import evaluate, fleet, plan, report, rules, trace

    parser = OneLineParser(prog="smx-debug", description="Guardrails for SageMaker training jobs.", top=True)
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
    from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verbose:
        import logging

        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s - %(message)s")
    with quiet_dependencies(verbose=args.verbose):
        try:
            return int(args.func(args) or 0)
        except SmxDebugError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        # AWS errors that no module translated (credentials, region, an unexpected API error): one line.
        except NoRegionError:
            print(f"error: {RegionError()}", file=sys.stderr)
            return 2
        except ClientError as exc:
            translated = translate_client_error(exc)
            if translated is not exc:
                print(f"error: {translated}", file=sys.stderr)
                return 2
            err = exc.response.get("Error", {})
            print(f"error: AWS {exc.operation_name}: {err.get('Code', '')}: {err.get('Message', exc)}",
                  file=sys.stderr)
            return 2
        except BotoCoreError as exc:
            print(f"error: AWS: {exc}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # `smx-debug ... | head`
            return 0
        except OSError as exc:  # a path the checks could not foresee (permissions, a full disk)
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
            return 2
