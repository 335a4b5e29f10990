"""`smx-debug report` (options in ``cli._parser``): one self-contained HTML report, verdict first; several jobs give a side-by-side page."""

from __future__ import annotations

import argparse
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from smx_debug.cli._args import check_output_file, require_data
from smx_debug.cli._aws import Clients
from smx_debug.cli._output import emit, output_format
from smx_debug.cli.evaluate import RuleSelection
from smx_debug.data.framework_trace import framework_metrics
from smx_debug.data.jobs import JobInfo, load_job
from smx_debug.errors import ConfigError, NoDataYetError, NotFoundError
from smx_debug.evaluate import JobData, LoadReport, evaluate
from smx_debug.evaluate.tensor_eval import TensorEvaluator
from smx_debug.evaluate.tensor_feed import is_trial
from smx_debug.htmlreport import (
    JobOutcome,
    ReportInput,
    TensorInput,
    fetch_outcome,
    write_comparison,
    write_report,
)
from smx_debug.htmlreport.cost import estimate_job_cost
from smx_debug.rules.params import TENSOR_RULES
from smx_debug.tensors import create_trial

_LAST_SECOND = 253_402_300_799  # 9999-12-31T23:59:59Z, the last time datetime (and the report) can show


def _iso_seconds(text: str) -> float:
    """An ISO-8601 time (UTC when no offset is given) as epoch seconds; a ConfigError naming --onset if not."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--onset must be an ISO-8601 time or epoch seconds, got {text!r}", field="--onset",
                          value=text) from None
    try:
        return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()
    except (OverflowError, ValueError):
        raise ConfigError(f"--onset is outside the years 1970-9999, got {text!r}", field="--onset",
                          value=text) from None


def load_framework_events(job_or_path: str, args: argparse.Namespace) -> Any:
    """The job's framework events, or None when it has no framework trace."""
    try:
        return framework_metrics(job_or_path, **Clients(args).injected("sagemaker", "s3"))  # progress: on a terminal, after a second
    except NotFoundError:
        return None


def onset_of(args: argparse.Namespace) -> int | None:
    """``--onset`` (an ISO-8601 time, UTC when no offset is given, or epoch seconds from 1970 to 9999) as epoch
    ns, None when not given; checked before any work, so a typo costs no evaluation."""
    text: str | None = args.onset
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = _iso_seconds(text)
    if not math.isfinite(seconds) or not 0 <= seconds <= _LAST_SECOND:
        raise ConfigError(f"--onset must be a time from 1970 to 9999 (epoch seconds 0 to 253402300799), got "
                          f"{text!r}", field="--onset", value=text)
    return int(seconds * 1e9)


def load_outcome(info: Any, args: argparse.Namespace, onset: int | None) -> Any:
    """Status, rule trigger times and stop from DescribeTrainingJob and the ledger (job names only), with the
    onset of :func:`onset_of`."""
    ledger_table: str | None = args.ledger_table
    outcome = JobOutcome()
    if info.instance_type is not None:  # a training job, not a folder or an s3:// prefix
        aws = Clients(args)
        outcome = fetch_outcome(info.name, sagemaker_client=aws.client("sagemaker"),
                                dynamodb_client=aws.client("dynamodb") if ledger_table else None,
                                ledger_table=ledger_table)
    return outcome.with_onset(onset)


def _trial_of(job_or_path: str, args: argparse.Namespace) -> Any:
    """The tensors of the job (its DebugHookConfig output) or of the path (a hook's trial), or None."""
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
    evaluator = TensorEvaluator(trial, configs)
    results = evaluator.refresh()
    return results, TensorInput(path=trial.path, configurations=frozenset(results),
                                step_times={s: int(t * 1e9) for s, t in evaluator.wall_times.items()},
                                steps=len(trial.steps()), tensors=len(trial.tensor_names()))


def _one(job_or_path: str, args: argparse.Namespace, rules: Any, tensor_rules: Any, title: str | None,
         onset: int | None) -> Any:
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


def run(args: argparse.Namespace) -> int:
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
