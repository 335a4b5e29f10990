"""`smx-debug report`: one self-contained HTML profiler report."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from smx_debug.cli._args import check_output_file, non_negative_float, positive_int, require_data
from smx_debug.cli.evaluate import add_rule_options, rule_selection
from smx_debug.errors import ConfigError

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from smx_debug.evaluate import LoadReport, evaluate
    from smx_debug.evaluate.jobs import load_job
    from smx_debug.htmlreport import ReportInput, estimate_cost, write_report

    names, overrides, _ = rule_selection(args)
    if args.instance_count is not None and args.instance_count < 1:
        raise ConfigError(f"--instance-count must be at least 1, got {args.instance_count!r}",
                          field="--instance-count", value=args.instance_count)
    if args.price is not None and args.price < 0:
        raise ConfigError(f"--price must not be negative, got {args.price!r}", field="--price", value=args.price)
    check_output_file(args.out, "--out")
    report = LoadReport()
    data, info = load_job(args.job_or_path, source=args.source, report=report)
    require_data(data, info.name, info.source)
    results = evaluate(data, names, overrides)
    instance_type = args.instance_type or info.instance_type
    cost = None
    span = data.system_span_ns
    if instance_type and span is not None:
        gpus = data.series("GPUUtilization")
        util = [float(s.values.mean()) for s in gpus if len(s.values)]
        p95 = [float(np.quantile(s.values, 0.95)) for s in gpus if len(s.values)]
        count = args.instance_count or info.instance_count or max(len(data.nodes), 1)
        cost = estimate_cost(instance_type, count, (span[1] - span[0]) / 1e9, util, p95, price_per_hour=args.price)
    path = write_report(
        ReportInput(job_name=args.title or info.name, data=data, results=results, cost=cost, source=info.source,
                    skipped=report.skipped),
        args.out,
    )
    fired = [r.rule for r in results.values() if r.triggered]
    print(f"wrote {path} ({path.stat().st_size:,} bytes); rules fired: {', '.join(fired) or 'none'}", file=sys.stderr)
    return 0


def register(subparsers: Any) -> Any:
    """Add the `report` command."""
    parser = subparsers.add_parser(
        "report", help="write a self-contained HTML profiler report",
        description="Evaluate the rules and write one HTML file (no network needed to view it) with the job summary, "
        "system usage, utilization over time, histograms, a heatmap, step durations, the rules and a cost section.",
    )
    add_rule_options(parser)
    parser.add_argument("--out", required=True, metavar="FILE", help="HTML file to write")
    parser.add_argument("--title", help="job name shown in the report (default: from JOB_OR_PATH)")
    parser.add_argument("--instance-type", help="e.g. ml.p3.8xlarge (default: from DescribeTrainingJob)")
    parser.add_argument("--instance-count", type=positive_int,
                        help="number of instances (default: from the job or the nodes seen)")
    parser.add_argument("--price", type=non_negative_float,
                        help="USD per instance-hour, overriding the bundled price table")
    parser.set_defaults(func=_run)
    return parser
