"""The ``smx-debug`` command line as argparse sees it: every command, option and help text, nothing that runs.

Kept light (the standard library and smx_debug's small contract modules): ``--help``, ``--version`` and a usage
error never load pandas, the SDK or the readers. Each command's parser names what runs it (``run``: the command
module and its function, in ``smx_debug.cli``); :func:`smx_debug.cli.main` loads that module only then.
Options are spelled out (``allow_abbrev=False``): an abbreviation would change meaning the day an option
sharing its prefix is added.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from smx_debug import __version__
from smx_debug.cli._args import (
    OneLineParser,
    job_name,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    table_name,
)
from smx_debug.cli._exit import EPILOG
from smx_debug.cli._output import add_out_option
from smx_debug.contracts import RULE_KINDS, Env
from smx_debug.fleet import defaults as fleet

RULE_FAMILIES = ("debugger", "smx")  # smx_debug.rules.definitions.RuleFamily (not imported: pydantic, a slow --help)
RULE_PROFILES = ("recommended",)  # smx_debug.rules.registry.PROFILES but debugger, which adds no rule (same reason)


# the commands' descriptions in their --help
_DESCRIPTIONS = {
    "evaluate": "Evaluate Debugger's built-in profiler rules and the scalar rules (LossNotDecreasing, Overfit, "
        "Overtraining, StalledTrainingRule) on a job's data, or the tensor rules (VanishingGradient, "
        "ExplodingTensor, ...) on a trial (a folder or s3:// prefix of a hook's tensors, or a job with a "
        "DebugHookConfig), in seconds and without rule jobs.",
    "report": "Evaluate the rules and write one HTML file (no network needed to view it): the verdict first "
        "(healthy? which rule fired first and when, the stop, the cost), then the rules, timelines per node and "
        "GPU with onset/trigger/stop marks, why the GPUs dipped, dataloader and framework analysis, steps, usage "
        "and cost. With several JOB_OR_PATHs, one page compares the runs.",
    "trace": "Merge a job's system metrics (counter tracks per node and GPU) and framework events (steps, "
        "dataloader, forward/backward, operators) into one Chrome trace-event JSON file for Perfetto or "
        "chrome://tracing, with marks for onset, each fired rule's first trigger (rules evaluated as in "
        "`smx-debug report`) and the stop when known.",
    "fleet": "Run a named fleet query (`smx-debug fleet list` names them) over the fleet dataset: with "
        "DuckDB over a folder or s3:// prefix (--root), or with Athena in the deployed stack's workgroup. "
        "Prints the rows (--output table, text or json), then what the query scanned and, on Athena, its price. "
        "docs/fleet.md.",
}


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; ``args.run`` is ``(command module, function)`` of the command given."""
    parser = OneLineParser(prog="smx-debug", description="Guardrails for SageMaker training jobs.", top=True,
                           epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"smx-debug {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _plan(sub)
    _rules(sub)
    _report(sub)
    _trace(sub)
    _fleet(sub)
    return parser


def _add(subparsers: Any, name: str, run: tuple[str, str] | None = None, **kwargs: Any) -> argparse.ArgumentParser:
    """A command's parser (options spelled out, like the top one's); ``run``: the function that runs it."""
    parser: argparse.ArgumentParser = subparsers.add_parser(name, allow_abbrev=False,
                                                            description=_DESCRIPTIONS.get(name), **kwargs)
    if run is not None:
        parser.set_defaults(run=run)
    return parser


class _Distinct(argparse.Action):
    """JOB_OR_PATH given several times: each once (the same run twice would be compared with itself)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        seen: set[str] = set()
        for value in values:
            local = Path(value).expanduser()
            same = str(local.resolve()) if local.exists() else value.rstrip("/")  # ./job, job/ and job are one
            if same in seen:
                parser.error(f"JOB_OR_PATH {value!r} is given twice; give each job or path once")
            seen.add(same)
        setattr(namespace, self.dest, values)


class _Once(argparse.Action):
    """An option that takes one value: a second one is a usage error, not silently the one used."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} is given twice ({getattr(namespace, self.dest)!r} and {values!r}); "
                         f"give it once")
        setattr(namespace, self.dest, values)


def _rule_options(parser: argparse.ArgumentParser, *, many: bool = False) -> None:
    """Which rules, with which parameters, from which source (``rules evaluate``, ``report``, ``trace``).

    ``many``: JOB_OR_PATH may be given several times (``args.job_or_path`` is then a list), each once.
    """
    parser.add_argument("job_or_path", metavar="JOB_OR_PATH", nargs="+" if many else None,
                        action=_Distinct if many else "store",
                        help="training job name, s3:// profiler-output prefix, or local folder/file")
    parser.add_argument("--plan", metavar="FILE", action=_Once,
                        help="debug plan whose rules and parameters to evaluate (once)")
    parser.add_argument("--rule", action="append", default=[], metavar="NAME", help="evaluate only this rule (repeatable)")
    parser.add_argument("--set", action="append", default=[], metavar="Rule.param=value", dest="sets",
                        help="override a parameter (repeatable): what-if thresholds without re-running the job")
    parser.add_argument("--source", choices=["auto", "debugger", "cloudwatch"], default="auto",
                        help="for a job name: Debugger profiler output, CloudWatch instance metrics, or auto")


def _outcome_options(parser: argparse.ArgumentParser) -> None:
    """``--onset`` and ``--ledger-table``: what ``report`` and ``trace`` read besides the job."""
    parser.add_argument("--onset", metavar="TIME",
                        help="when the problem started, if known (ISO-8601 UTC or epoch seconds): marked on timelines")
    parser.add_argument("--ledger-table", type=table_name, default=os.environ.get(Env.LEDGER_TABLE) or None,
                        metavar="TABLE",
                        help=f"DynamoDB actions ledger to read the stop from (default: ${Env.LEDGER_TABLE})")


def _plan(subparsers: Any) -> None:
    parser = _add(subparsers, "plan", help="validate and render debug plans")
    sub = parser.add_subparsers(dest="plan_command", required=True, metavar="PLAN_COMMAND")

    validate = _add(sub, "validate", ("plan", "validate"), help="check a plan; print its warnings")
    validate.add_argument("file", help="plan file (.yaml, .yml or .json)")
    validate.add_argument("--job-name", type=job_name, help="the training job name, if known")

    render = _add(sub, "render", ("plan", "render"),
                  help="print the plan as CreateTrainingJob fields or estimator objects (JSON)")
    render.add_argument("file", help="plan file (.yaml, .yml or .json)")
    render.add_argument("--format", choices=("request", "estimator"), default="request")
    render.add_argument("--job-name", type=job_name,
                        help="the training job name (stop_training then stops exactly it)")
    render.add_argument("--output-path", help="override s3_output_path")


def _rules(subparsers: Any) -> None:
    parser = _add(subparsers, "rules", help="the rule catalog and local rule evaluation")
    sub = parser.add_subparsers(dest="rules_command", required=True, metavar="RULES_COMMAND")

    lst = _add(sub, "list", ("rules", "_list"),
               help="list every rule: Debugger's built-in Debugger and profiler rules, and ours")
    lst.add_argument("--kind", choices=RULE_KINDS)
    lst.add_argument("--family", choices=RULE_FAMILIES,
                     help="debugger: Debugger's built-ins; smx: smx-debug's own rules")
    lst.add_argument("--profile", choices=RULE_PROFILES,
                     help="only the rules a plan's profile adds at their defaults (recommended)")

    show = _add(sub, "show", ("rules", "_show"), help="a rule's parameters, defaults and collections")
    show.add_argument("name", help="rule function or class name, e.g. loss_not_decreasing or LowGPUUtilization")

    evaluate = _add(sub, "evaluate", ("evaluate", "run"),
                    help="evaluate the built-in profiler, scalar and tensor rules locally")
    _rule_options(evaluate)
    add_out_option(evaluate, "the results (in the --output format)")
    evaluate.add_argument("--output-dir", metavar="DIR",
                          help="write <Rule>.json files shaped like Debugger's profiler-reports/")
    evaluate.add_argument("--fail-on-issues", action="store_true", help="exit 1 when a rule fires")
    evaluate.add_argument("--live", action="store_true",
                          help="re-evaluate as data arrives and print status transitions")
    evaluate.add_argument("--interval", type=positive_float, default=60.0,
                          help="seconds between live re-evaluations (default 60)")
    evaluate.add_argument("--max-updates", type=non_negative_int, default=0,
                          help="stop live mode after this many evaluations (0: until the rules settle)")


def _report(subparsers: Any) -> None:
    parser = _add(subparsers, "report", ("report", "run"),
                  help="write a self-contained HTML report (several jobs: side by side)")
    _rule_options(parser, many=True)
    parser.add_argument("--out", required=True, metavar="FILE", help="HTML file to write")
    parser.add_argument("--title", help="job name (one job) or page title (several) shown in the report")
    parser.add_argument("--instance-type", help="e.g. ml.p3.8xlarge (default: from DescribeTrainingJob)")
    parser.add_argument("--instance-count", type=positive_int,
                        help="number of instances (default: from the job or the nodes seen)")
    parser.add_argument("--price", type=non_negative_float,
                        help="USD per instance-hour, overriding the bundled price table")
    _outcome_options(parser)


def _trace(subparsers: Any) -> None:
    parser = _add(subparsers, "trace", ("trace", "run"),
                  help="write system metrics + framework events as one Chrome/Perfetto trace JSON")
    _rule_options(parser)  # the rules whose first triggers are marked (default: all)
    parser.add_argument("-o", "--out", required=True, metavar="FILE", help="trace JSON file to write")
    _outcome_options(parser)  # --onset, --ledger-table: the marks of the stop and onset


def _fleet(subparsers: Any) -> None:
    parser = _add(subparsers, "fleet", ("fleet", "run"),
                  help="SQL over every job's utilisation and verdicts (DuckDB or Athena)")
    parser.add_argument("query", help="a named query, or `list`")
    # no defaults here: smx_debug.fleet.execute applies its own (smx_debug.fleet.defaults), which the help says
    parser.add_argument("--since",
                        help=f"how far back: 30d, 12h, 90m or an ISO date (default {fleet.DEFAULT_SINCE.days}d)")
    parser.add_argument("--engine", metavar="|".join(fleet.ENGINES),
                        help=f"the engine (default {fleet.DEFAULT_ENGINE})")
    parser.add_argument("--root", metavar="PATH|s3://...", help="the dataset (DuckDB): a folder or s3://bucket/prefix")
    parser.add_argument("--top", type=int, dest="n", metavar="N",
                        help=f"jobs in top_* queries (default {fleet.DEFAULT_TOP})")
    parser.add_argument("--idle-threshold", type=float, metavar="PCT",
                        help="a GPU-minute under this mean utilisation is idle "
                        f"(default {fleet.DEFAULT_IDLE_THRESHOLD:g})")
    parser.add_argument("--stack", dest="stack_name",
                        help=f"the deployed stack (Athena's database and workgroup; default {fleet.DEFAULT_STACK})")
    parser.add_argument("--database", help="Athena: the Glue database (default: the stack's)")
    parser.add_argument("--workgroup", help="Athena: the workgroup (default: the stack's)")
    add_out_option(parser, "the rows (in the --output format)")
