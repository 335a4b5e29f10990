"""Benchmark: the HTML report of an 8-node, 8-GPU (96 vCPU), one-hour job renders in < 5 s and stays < 5 MB.

Run ``python bench/report_bench.py`` (or ``make bench``). The job is bench/rules_bench.py's (8 nodes x 1 hour
at 500 ms, 96 cores + 8 GPUs, a CPU bottleneck from minute 20, a step every 250 ms) plus a framework trace
built here (per step: dataloader, forward, backward; every 40th step after minute 20 the dataloader stalls
1.5 s), so the GPU-dip and dataloader sections have real work. "Render" is everything after evaluation:
building the report model (dips, dataloader analysis, step table, verdict) and writing the HTML; the
evaluation time is printed for context. Baselines: the targets (5 s, 5 MB), printed as ratios.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from smx_debug.data.frames import ns
from smx_debug.evaluate import evaluate
from smx_debug.htmlreport import JobOutcome, ReportInput, estimate_cost, write_report

TARGET_S = 5.0
TARGET_BYTES = 5_000_000
HERE = Path(__file__).resolve().parent


def _rules_bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("rules_bench", HERE / "rules_bench.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def framework_events(steps: pd.DataFrame, stall_from_ns: int) -> pd.DataFrame:
    """Dataloader / forward / backward events inside every step; stalled loads every 40th step after a time."""
    start, dur = ns(steps["start"]), steps["duration"].to_numpy(dtype=float)
    stall = (start >= stall_from_ns) & (steps["step"].to_numpy() % 40 == 0)
    load = np.where(stall, 1.5, 0.004)
    comp = np.clip(dur - load, 0.001, None)
    parts = [("DataLoaderIter.__next__", start, load), ("forward", start + (load * 1e9).astype(np.int64), 0.4 * comp),
             ("backward", start + ((load + 0.4 * comp) * 1e9).astype(np.int64), 0.6 * comp)]
    frames = [pd.DataFrame({
        "node": steps["node"].to_numpy(), "pid": steps["rank"].to_numpy(), "kind": "pythontimeline",
        "process": "Forward/Backward" if name != "DataLoaderIter.__next__" else "DataLoader", "name": name,
        "phase": "X", "start": pd.to_datetime(s, utc=True), "end": pd.to_datetime(s + (d * 1e9).astype(np.int64), utc=True),
        "duration": d, "step": pd.array([pd.NA] * len(s), dtype="Int64"), "args": None,
    }) for name, s, d in parts]
    return pd.concat(frames, ignore_index=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 nodes x 15 minutes")
    args, _ = parser.parse_known_args(argv)
    if args.quick:
        args.nodes, args.hours = 2, 0.25
    t = time.perf_counter()
    data = _rules_bench().build(nodes=args.nodes, hours=args.hours)
    t0 = data.system_span_ns[0] if data.system_span_ns else 0
    onset = t0 + int(args.hours * 3600e9) // 3
    events = framework_events(data.steps, onset)
    print(f"report_bench: built {len(data.system):,} system rows, {len(data.steps):,} steps, {len(events):,} framework "
          f"events ({args.nodes} nodes x {args.hours:g} h, 96 vCPU / 8 GPU) in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    results = evaluate(data)
    evaluation = time.perf_counter() - t
    cost = estimate_cost("ml.p4d.24xlarge", args.nodes, args.hours * 3600)
    outcome = JobOutcome(status="Stopped", onset_ns=onset, stop_ns=t0 + int(args.hours * 3600e9) - 60 * 10**9,
                         stopped_by="bench", max_runtime_s=int(args.hours * 3600 * 2))
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        path = write_report(ReportInput(job_name="bench-8x8-1h", data=data, results=results, cost=cost, source="bench",
                                        events=events, outcome=outcome), Path(tmp) / "report.html")
        render = time.perf_counter() - t
        size = path.stat().st_size
    ok = render < TARGET_S and size < TARGET_BYTES
    print(f"report_bench: evaluation {evaluation:.2f} s (context); render {render:.2f} s (target {TARGET_S:.0f} s, "
          f"ratio {render / TARGET_S:.2f}); file {size / 1e6:.2f} MB (target {TARGET_BYTES / 1e6:.0f} MB, ratio "
          f"{size / TARGET_BYTES:.2f}) {'OK' if ok else 'OVER TARGET'}")
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
