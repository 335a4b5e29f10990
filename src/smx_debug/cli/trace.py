"""`smx-debug trace`: system metrics and framework events as one Chrome trace-event / Perfetto JSON file."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from smx_debug.cli._args import check_output_file, require_data

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from smx_debug.cli.report import load_framework_events, load_outcome, parse_time
    from smx_debug.evaluate import LoadReport
    from smx_debug.evaluate.jobs import load_job
    from smx_debug.reports.trace_export import TraceMark, chrome_trace, write_chrome_trace

    check_output_file(args.out, "--out")
    data, info = load_job(args.job_or_path, source=args.source, report=LoadReport())
    require_data(data, info.name, info.source)
    events = load_framework_events(args.job_or_path)
    onset = parse_time(args.onset, "--onset") if args.onset else None
    outcome = load_outcome(info, ledger_table=args.ledger_table, onset=onset)
    marks = [TraceMark(f"first trigger: {name}", t, "trigger") for name, t in sorted(outcome.triggers.items(),
                                                                                   key=lambda kv: kv[1])]
    if outcome.onset_ns is not None:
        marks.append(TraceMark("onset", outcome.onset_ns, "onset"))
    if outcome.stop_ns is not None:
        marks.append(TraceMark(f"stop ({outcome.stopped_by})", outcome.stop_ns, "stop"))
    trace = chrome_trace(data, events, marks=marks, job_name=info.name)
    path = write_chrome_trace(trace, args.out)
    print(f"wrote {path} ({path.stat().st_size:,} bytes, {len(trace['traceEvents']):,} events); open it in "
          "Perfetto (Open trace file) or chrome://tracing", file=sys.stderr)
    return 0


def register(subparsers: Any) -> Any:
    """Add the `trace` command."""
    parser = subparsers.add_parser(
        "trace", help="write system metrics + framework events as one Chrome/Perfetto trace JSON",
        description="Merge a job's system metrics (counter tracks per node and GPU) and framework events (steps, "
        "dataloader, forward/backward, operators) into one Chrome trace-event JSON file for Perfetto or "
        "chrome://tracing, with marks for onset, rule triggers and the stop when known.",
    )
    parser.add_argument("job_or_path", metavar="JOB_OR_PATH",
                        help="training job name, s3:// profiler-output prefix, or local folder")
    parser.add_argument("-o", "--out", required=True, metavar="FILE", help="trace JSON file to write")
    parser.add_argument("--source", choices=["auto", "debugger", "cloudwatch"], default="auto",
                        help="for a job name: Debugger profiler output, CloudWatch instance metrics, or auto")
    parser.add_argument("--onset", metavar="TIME", help="when the problem started (ISO-8601 UTC or epoch seconds)")
    parser.add_argument("--ledger-table", default=os.environ.get("SMX_LEDGER_TABLE") or None, metavar="TABLE",
                        help="DynamoDB actions ledger to read the stop from (default: $SMX_LEDGER_TABLE)")
    parser.set_defaults(func=_run)
    return parser
