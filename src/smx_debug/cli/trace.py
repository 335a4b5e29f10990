"""`smx-debug trace` (options in ``cli._parser``): system metrics and framework events as one Chrome trace-event / Perfetto JSON file."""

from __future__ import annotations

import argparse
import sys

from smx_debug.analysis.trace_export import TraceMark, chrome_trace, write_chrome_trace
from smx_debug.cli._args import check_output_file, require_data
from smx_debug.cli._aws import Clients
from smx_debug.cli._output import emit, output_format
from smx_debug.cli.evaluate import RuleSelection
from smx_debug.cli.report import load_framework_events, load_outcome, onset_of
from smx_debug.data.jobs import load_job
from smx_debug.evaluate import LoadReport, evaluate
from smx_debug.htmlreport import ReportInput, build_model


def run(args: argparse.Namespace) -> int:
    rules, _ = RuleSelection(args).profiler()
    check_output_file(args.out, "--out")
    onset = onset_of(args)
    data, info = load_job(args.job_or_path, source=args.source, report=LoadReport(),
                          **Clients(args).injected("sagemaker", "cloudwatch", "s3"))
    require_data(data, info.name, info.source)
    events = load_framework_events(args.job_or_path, args)
    outcome = load_outcome(info, args, onset)
    # the report's own model: the same first-trigger times and stop as the HTML report shows
    model = build_model(ReportInput(job_name=info.name, data=data, results=evaluate(data, rules),
                                    events=events, outcome=outcome))
    marks = [TraceMark(f"first trigger: {r.name}", r.first_trigger_ns, "trigger") for r in model.fired
             if r.first_trigger_ns is not None]
    marks += [TraceMark(m.label if m.kind != "stop" else f"stop ({outcome.stopped_by or 'stopped'})", m.time_ns,
                        m.kind) for m in model.marks if m.kind != "trigger"]
    trace = chrome_trace(data, events, marks=marks, job_name=info.name)
    path = write_chrome_trace(trace, args.out)
    size, n_events = path.stat().st_size, len(trace["traceEvents"])
    if output_format(args) == "json":  # the file is the product; stdout says what was written
        emit({"out": str(path), "bytes": size, "events": n_events})
    else:
        print(f"wrote {path} ({size:,} bytes, {n_events:,} events); open it in Perfetto (Open trace file) or "
              "chrome://tracing", file=sys.stderr)
    return 0
