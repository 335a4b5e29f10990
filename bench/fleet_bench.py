"""Benchmark: each named fleet query over 100 node-hours of Parquet on DuckDB (target: under 2 s on 2 cores),
with the rows it scanned, and beside it DuckDB over the raw JSON for the same idle-GPU question.

Data: smx_debug.simulate.fleet (50 jobs x 2 nodes x 60 minutes, 4 GPUs and 4 CPU series per node sampled every
0.5 s: about 86,000 records per node-hour, as the issue's 9.0 M records per 100 node-hours), appended to a fleet
dataset with smx_debug.fleet.append_profiler. Usage: python bench/fleet_bench.py [--quick] [--node-hours 100]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

TARGET_S = 2.0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="fleet_bench")
    parser.add_argument("--quick", action="store_true", help="10 node-hours instead of 100")
    parser.add_argument("--node-hours", type=int, default=100)
    args, _ = parser.parse_known_args(argv)
    node_hours = 10 if args.quick else args.node_hours
    import duckdb

    from smx_debug import fleet
    from smx_debug.simulate.fleet import FleetSimulation, FleetSpec

    spec = FleetSpec(jobs=max(1, node_hours // 2), nodes=2, minutes=60, interval_s=0.5, cpus=4, stagger=3,
                     start=datetime(2026, 11, 2, 8, 0, tzinfo=UTC))
    sim = FleetSimulation(spec)
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        raw, root = Path(tmp) / "raw", Path(tmp) / "fleet"
        t = time.perf_counter()
        files = sim.write_local(raw)
        raw_bytes = sum(f.stat().st_size for f in raw.rglob("*.json"))
        print(f"generated {node_hours} node-hours: {files} files, {raw_bytes / 1e6:.0f} MB of JSON "
              f"in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        for job in sim.jobs:
            fleet.append_profiler(root, job.name, raw / job.name)
            fleet.append_job(root, sim.describe(job), sim.tags(job))
        fleet.append_verdicts(root, sim.verdicts())
        parquet = sum(f.stat().st_size for f in root.rglob("*.parquet"))
        print(f"appended in {time.perf_counter() - t:.1f} s: {parquet / 1e6:.2f} MB of zstd Parquet "
              f"({raw_bytes / max(parquet, 1):.0f}x fewer bytes than the JSON)")
        status = 0
        print(f"{'query':<26}{'seconds':>9}{'rows scanned':>14}{'files':>7}  target < {TARGET_S:.0f} s")
        for query in fleet.list_queries():
            result = fleet.execute(query.name, root=root, since="2026-11-01", threads=2, progress=False)
            ok = result.seconds < TARGET_S
            status |= 0 if ok else 1
            print(f"{query.name:<26}{result.seconds:>9.3f}{result.rows_scanned:>14,}{result.files:>7}  "
                  f"{'ok' if ok else 'SLOW'}")
        # the same idle-GPU question over the raw JSON (DuckDB's JSON reader, no dataset)
        con = duckdb.connect(config={"threads": 2})
        pattern = os.path.join(str(raw), "*", "profiler-output", "system", "incremental", "*", "*.json")
        t = time.perf_counter()
        rows = con.execute(
            "SELECT count(*) FROM (SELECT NodeId, Name, floor(Timestamp / 60) AS m, avg(Value) AS v "
            "FROM read_json(?, format='newline_delimited', filename=true) WHERE Dimension = 'GPUUtilization' "
            "GROUP BY filename, NodeId, Name, m) WHERE v < 10", [pattern]).fetchone()
        raw_s = time.perf_counter() - t
        print(f"{'idle GPU minutes, raw JSON':<26}{raw_s:>9.3f}{'(all records)':>14}  "
              f"{rows[0] if rows else 0} idle device-minutes")
    return status


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
