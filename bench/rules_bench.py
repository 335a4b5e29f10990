"""Benchmark: every profiler rule over 8 node-hours of 96-vCPU / 8-GPU system metrics (target < 10 s).

Run ``python bench/rules_bench.py`` (or ``make bench``). The data is built by a vectorised constructor
here (the simulate package writes files; going through files would time the reader, not the rules):
8 nodes x 1 hour at Debugger's default 500 ms, 96 cores + 8 GPUs (utilization and memory) + I/O wait
+ memory per snapshot, about 6.6 million rows, plus one TRAIN step every 250 ms per node.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
from _verdict import judged

from smx_debug.evaluate import JobData, evaluate_rule
from smx_debug.rules.params import PROFILER_RULES

TARGET_S = 10.0


def build(nodes: int = 8, hours: float = 1.0, cpus: int = 96, gpus: int = 8, interval_ms: int = 500,
          seed: int = 0) -> JobData:
    """A JobData with ``nodes * hours`` node-hours of metrics (a CPU bottleneck in the last two thirds)."""
    rng = np.random.default_rng(seed)
    n_snap = int(hours * 3_600_000 / interval_ms)
    t0 = pd.Timestamp("2026-01-01", tz="UTC").value
    snap_ts = t0 + np.arange(n_snap, dtype=np.int64) * interval_ms * 1_000_000
    names = [f"cpu{i}" for i in range(cpus)] + [f"gpu{i}" for i in range(gpus)] * 2 + ["total", "MemoryUsedPercent"]
    dims = (["CPUUtilization"] * cpus + ["GPUUtilization"] * gpus + ["GPUMemoryUtilization"] * gpus
            + ["I/OWaitPercentage", "MemoryUtilization"])
    types = ["cpu"] * cpus + ["gpu"] * (2 * gpus) + ["cpu", "memory"]
    per = len(names)
    late = (np.arange(n_snap) >= n_snap // 3)[:, None]
    frames = []
    for node in range(nodes):
        cpu = np.where(late, rng.uniform(88, 100, (n_snap, cpus)), rng.uniform(30, 70, (n_snap, cpus)))
        gpu = np.where(late, rng.uniform(0, 12, (n_snap, gpus)), rng.uniform(70, 99, (n_snap, gpus)))
        mem = 40 + rng.normal(0, 1, (n_snap, gpus))
        other = np.column_stack([rng.uniform(0, 5, n_snap), np.full(n_snap, 35.0)])
        values = np.hstack([cpu, gpu, mem, other]).ravel()
        jitter = rng.integers(0, 5_000_000, (n_snap, per))  # agent threads a few ms apart
        col = np.tile(np.arange(per), n_snap)
        frames.append(pd.DataFrame({
            "timestamp": pd.DatetimeIndex((snap_ts[:, None] + jitter).ravel().view("datetime64[ns]")).tz_localize("UTC"),
            "node": pd.Categorical.from_codes(np.full(n_snap * per, node), [f"algo-{i + 1}" for i in range(nodes)]),
            "type": pd.Categorical.from_codes(col, types, validate=False) if len(set(types)) == per else
            pd.Categorical(np.asarray(types, dtype=object)[col]),
            "name": pd.Categorical.from_codes(col, names) if len(set(names)) == per else
            pd.Categorical(np.asarray(names, dtype=object)[col]),
            "dimension": pd.Categorical(np.asarray(dims, dtype=object)[col]),
            "value": values,
        }))
    system = pd.concat(frames, ignore_index=True)
    n_steps = int(hours * 3600 / 0.25)
    dur = 0.25 * rng.lognormal(0, 0.05, (nodes, n_steps))
    start = t0 + 60 * 10**9 + np.arange(n_steps)[None, :] * 250_000_000
    steps = pd.DataFrame({
        "node": np.repeat([f"algo-{i + 1}" for i in range(nodes)], n_steps),
        "rank": np.repeat(np.arange(nodes), n_steps).astype(np.int64),
        "mode": "TRAIN",
        "step": np.tile(np.arange(n_steps, dtype=np.int64), nodes),
        "start": pd.to_datetime(np.broadcast_to(start, (nodes, n_steps)).ravel(), utc=True),
        "end": pd.to_datetime((start + (dur * 1e9).astype(np.int64)).ravel(), utc=True),
        "duration": dur.ravel(),
    })
    return JobData(system=system, steps=steps)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 nodes x 15 minutes")
    args, _ = parser.parse_known_args(argv)  # bench/run.py passes its flags to every benchmark
    if args.quick:
        args.nodes, args.hours = 2, 0.25
    t = time.perf_counter()
    data = build(nodes=args.nodes, hours=args.hours)
    print(f"rules_bench: built {len(data.system):,} system rows, {len(data.steps):,} steps "
          f"({args.nodes * args.hours:g} node-hours, 96 vCPU / 8 GPU) in {time.perf_counter() - t:.1f} s")
    total = 0.0
    for rule in PROFILER_RULES:
        t = time.perf_counter()
        result = evaluate_rule(rule, data)
        dt = time.perf_counter() - t
        total += dt
        print(f"  {rule:<22} {dt:6.2f} s  RuleTriggered={result.rule_triggered:<5} Datapoints={result.datapoints}")
    return judged(f"rules_bench: all {len(PROFILER_RULES)} profiler rules {total:.2f} s "
                  f"(target {TARGET_S:.0f} s, ratio {total / TARGET_S:.2f})", total, TARGET_S, quick=args.quick)


if __name__ == "__main__":
    sys.exit(main())
