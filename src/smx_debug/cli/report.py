"""`smx-debug report`: one self-contained HTML report, verdict first; several jobs give a side-by-side page."""

from __future__ import annotations

import argparse
import math
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from smx_debug.cli._args import check_output_file, non_negative_float, positive_int, require_data, table_name
from smx_debug.cli._aws import Clients
from smx_debug.cli._output import emit, output_format
from smx_debug.cli.evaluate import RuleSelection, add_rule_options
from smx_debug.contracts import Env
from smx_debug.errors import ConfigError

__all__ = ["add_outcome_options", "load_framework_events", "load_outcome", "onset_of", "parse_time", "register"]


_LAST_SECOND = 253_402_300_799  # 9999-12-31T23:59:59Z, the last time datetime (and the report) can show


def parse_time(text: str, option: str) -> int:
    """An ISO-8601 time (UTC when no offset is given) or epoch seconds from 1970 to 9999, as epoch ns."""
    from datetime import UTC

    def bad(why: str) -> ConfigError:
        return ConfigError(f"{option} {why}, got {text!r}", field=option, value=text)

    try:
        seconds = float(text)
    except ValueError:
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise bad("must be an ISO-8601 time or epoch seconds") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        try:
            seconds = when.timestamp()
        except (OverflowError, ValueError):
            raise bad("is outside the years 1970-9999") from None
    if not math.isfinite(seconds) or not 0 <= seconds <= _LAST_SECOND:
        raise bad("must be a time from 1970 to 9999 (epoch seconds 0 to 253402300799)")
    return int(seconds * 1e9)


def load_framework_events(job_or_path: str, args: argparse.Namespace) -> Any:
    """The job's framework events, or None when it has no framework trace."""
    from smx_debug.errors import NotFoundError
    from smx_debug.reports import framework_metrics

    try:
        return framework_metrics(job_or_path, **Clients(args).injected("sagemaker", "s3"))  # progress: on a terminal, after a second
    except NotFoundError:
        return None


def add_outcome_options(parser: argparse.ArgumentParser) -> None:
    """``--onset`` and ``--ledger-table``: what :func:`load_outcome` reads besides the job."""
    parser.add_argument("--onset", metavar="TIME",
                        help="when the problem started, if known (ISO-8601 UTC or epoch seconds): marked on timelines")
    parser.add_argument("--ledger-table", type=table_name, default=os.environ.get(Env.LEDGER_TABLE) or None,
                        metavar="TABLE",
                        help=f"DynamoDB actions ledger to read the stop from (default: ${Env.LEDGER_TABLE})")


def onset_of(args: argparse.Namespace) -> int | None:
    """``--onset`` as epoch ns (None when not given); checked before any work, so a typo costs no evaluation."""
    return parse_time(args.onset, "--onset") if args.onset else None


def load_outcome(info: Any, args: argparse.Namespace, onset: int | None) -> Any:
    """Status, rule trigger times and stop from DescribeTrainingJob and the ledger (job names only), with the
    onset of :func:`onset_of`."""
    ledger_table: str | None = args.ledger_table
    from smx_debug.htmlreport import JobOutcome, fetch_outcome

    outcome = JobOutcome()
    if info.instance_type is not None:  # a training job, not a folder or an s3:// prefix
        aws = Clients(args)
        outcome = fetch_outcome(info.name, sagemaker_client=aws.client("sagemaker"),
                                dynamodb_client=aws.client("dynamodb") if ledger_table else None,
                                ledger_table=ledger_table)
    return outcome.with_onset(onset)


def _trial_of(job_or_path: str, args: argparse.Namespace) -> Any:
    """The tensors of the job (its DebugHookConfig output) or of the path (a hook's trial), or None."""
    from smx_debug.errors import NoDataYetError, NotFoundError
    from smx_debug.evaluate.tensor_feed import is_trial
    from smx_debug.tensors import create_trial

    if args.source == "cloudwatch":
        return None
    if Path(job_or_path).expanduser().exists() or job_or_path.startswith("s3://"):
        aws = Clients(args).injected("s3")
        return create_trial(job_or_path, **aws) if is_trial(job_or_path, **aws) else None
    try:
        return create_trial(job_or_path, **Clients(args).injected("s3", "sagemaker"))
    except (NotFoundError, NoDataYetError):  # no DebugHookConfig, or nothing saved yet
        return None


def _tensor_job_info(job_or_path: str, trial: Any, args: argparse.Namespace) -> Any:
    """What the report knows of a job (or path) that has tensors and no profiler or CloudWatch data."""
    from smx_debug.data.jobs import JobInfo

    if Path(job_or_path).expanduser().exists() or job_or_path.startswith("s3://"):
        return JobInfo(name=trial.name, source=trial.path)
    sm = Clients(args).client("sagemaker")
    desc = sm.describe_training_job(TrainingJobName=job_or_path)
    res = desc.get("ResourceConfig") or {}
    return JobInfo(name=job_or_path, instance_type=res.get("InstanceType"),
                   instance_count=int(res.get("InstanceCount") or 1), status=desc.get("TrainingJobStatus"),
                   source=trial.path)


def _tensors(trial: Any, configs: Any) -> tuple[dict[str, Any], Any]:
    """The tensor rules' results on the trial, and what the report needs of the trial."""
    from smx_debug.evaluate.tensor_eval import TensorEvaluator
    from smx_debug.htmlreport import TensorInput

    evaluator = TensorEvaluator(trial, configs)
    results = evaluator.refresh()
    return results, TensorInput(path=trial.path, configurations=frozenset(results),
                                step_times={s: int(t * 1e9) for s, t in evaluator.wall_times.items()},
                                steps=len(trial.steps()), tensors=len(trial.tensor_names()))


def _one(job_or_path: str, args: argparse.Namespace, rules: Any, tensor_rules: Any, title: str | None,
         onset: int | None) -> Any:
    from smx_debug.data.jobs import load_job
    from smx_debug.errors import NoDataYetError, NotFoundError
    from smx_debug.evaluate import JobData, LoadReport, evaluate
    from smx_debug.htmlreport import ReportInput
    from smx_debug.htmlreport.cost import estimate_job_cost
    from smx_debug.rules.params import TENSOR_RULES

    report = LoadReport()
    trial = _trial_of(job_or_path, args)
    try:
        data, info = load_job(job_or_path, source=args.source, report=report, **Clients(args).injected("sagemaker", "cloudwatch", "s3"))
        require_data(data, info.name, info.source)
    except (NoDataYetError, NotFoundError):
        if trial is None:
            raise
        data, info = JobData(), _tensor_job_info(job_or_path, trial, args)
    tensor_input = None
    results: dict[str, Any] = {}
    if trial is not None:  # a rule that reads tensors is judged on them (the loss rules too), the rest on the data
        results, tensor_input = _tensors(trial, [c for c in tensor_rules if c.rule in TENSOR_RULES])
        asked = bool(args.rule or args.plan or args.sets)
        profiled = any(len(f) for f in (data.system, data.steps, data.scalars))
        rules = [c for c in rules if c.rule not in TENSOR_RULES and (asked or profiled)]
        report.skipped.update(trial.skipped)
    results = {**evaluate(data, rules), **results}
    outcome = load_outcome(info, args, onset)
    instance_type = args.instance_type or info.instance_type
    cost = estimate_job_cost(
        data, instance_type, args.instance_count or info.instance_count,
        step_times=tensor_input.step_times if tensor_input is not None else None, price_per_hour=args.price,
    ) if instance_type else None
    events = load_framework_events(job_or_path, args) if info.source != "CloudWatch /aws/sagemaker/TrainingJobs" else None
    return ReportInput(job_name=title or info.name, data=data, results=results, cost=cost, source=info.source,
                       skipped=report.skipped, events=events, outcome=outcome, tensors=tensor_input)


def _run(args: argparse.Namespace) -> int:
    from smx_debug.htmlreport import write_comparison, write_report

    selection = RuleSelection(args)  # the plan read once, for both kinds of rules
    rules, _ = selection.profiler()
    tensor_rules, _ = selection.tensors()
    check_output_file(args.out, "--out")
    jobs: list[str] = args.job_or_path
    if len(jobs) > 1 and args.onset:
        raise ConfigError("--onset applies to one job; give one JOB_OR_PATH", field="--onset", value=args.onset)
    onset = onset_of(args)
    inputs = [_one(job, args, rules, tensor_rules, args.title if len(jobs) == 1 else None, onset)
              for job in jobs]
    if len(inputs) == 1:
        path = write_report(inputs[0], args.out)
    else:
        path = write_comparison(inputs, args.out, title=args.title or "Runs compared")
    fired = sorted({r.configuration_name or r.rule for inp in inputs for r in inp.results.values() if r.triggered})
    size = path.stat().st_size
    if output_format(args) == "json":  # the file is the product; stdout says what was written
        emit({"out": str(path), "bytes": size, "rules_fired": fired})
    else:
        print(f"wrote {path} ({size:,} bytes); rules fired: {', '.join(fired) or 'none'}", file=sys.stderr)
    return 0


def register(subparsers: Any) -> Any:
    """Add the `report` command."""
    parser = subparsers.add_parser(
        "report", help="write a self-contained HTML report (several jobs: side by side)",
        description="Evaluate the rules and write one HTML file (no network needed to view it): the verdict first "
        "(healthy? which rule fired first and when, the stop, the cost), then the rules, timelines per node and "
        "GPU with onset/trigger/stop marks, why the GPUs dipped, dataloader and framework analysis, steps, usage "
        "and cost. With several JOB_OR_PATHs, one page compares the runs.",
    )
    add_rule_options(parser, many=True)
    parser.add_argument("--out", required=True, metavar="FILE", help="HTML file to write")
    parser.add_argument("--title", help="job name (one job) or page title (several) shown in the report")
    parser.add_argument("--instance-type", help="e.g. ml.p3.8xlarge (default: from DescribeTrainingJob)")
    parser.add_argument("--instance-count", type=positive_int,
                        help="number of instances (default: from the job or the nodes seen)")
    parser.add_argument("--price", type=non_negative_float,
                        help="USD per instance-hour, overriding the bundled price table")
    add_outcome_options(parser)
    parser.set_defaults(func=_run)
    return parser
