"""Benchmark: smx_debug.data.system_metrics against smdebug's PandasFrame and a plain json.loads.

Generates realistic profiler output with smx_debug.simulate (default 8 nodes x 1 hour of a 96-vCPU,
8-GPU node at 500 ms), locally and in a moto S3 server running in its own process, then times:

- ours from local disk and from S3 (each in a fresh subprocess, which also reports peak RSS growth),
- a plain per-line ``json.loads`` of every line (the floor any Python reader starts from),
- smdebug's ``PandasFrame(path).get_all_system_metrics()`` from disk and from S3, in bench/.venv-smdebug,

checks that smdebug's rows equal ours (same rows, same values) and prints the ratios.

Robustness (issue 11): one node-hour concatenated into one large file (about 110 MB), read clean and with one
garbage line in the middle (and with one line of each kind of bad record, and, issue 29, with one lone-surrogate
line, which pyarrow.json refuses); the reads with a garbage or a lone-surrogate line must stay within 20% of the
clean read (baseline: the same file without them).
Usage: python bench/reports_bench.py [--nodes 8] [--hours 1] [--quick] [--no-smdebug] [--no-s3] [--garbage-only]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "reports"
SMDEBUG_PY = ROOT / "bench" / ".venv-smdebug" / "bin" / "python"
BUCKET = "smx-bench"

_SMDEBUG_SCRIPT = r"""
import os, pickle, sys, time, logging
logging.disable(logging.WARNING)
os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")
from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame
path, out = sys.argv[1], sys.argv[2]
t, c = time.perf_counter(), time.process_time()
pf = PandasFrame(path)
df = pf.get_all_system_metrics()
seconds, cpu = time.perf_counter() - t, time.process_time() - c
import pandas as pd
abs_us = (df["timestamp_us"] + pf.start_time).astype("int64").to_numpy()
def cat(s):
    c = pd.Categorical(s.astype(str))
    return c.set_categories(sorted(c.categories))
cols = {"us": abs_us, "value": df["value"].to_numpy(dtype="float64"), "name": cat(df["system_metric"]),
        "dimension": cat(df["dimension"]), "node": cat(df["nodeID"]), "type": cat(df["type"])}
with open(out, "wb") as f:
    pickle.dump({"seconds": seconds, "cpu": cpu, "rows": len(df), "cols": cols}, f)
"""


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _measure(target: str, out: str, traced: bool = False) -> None:
    """Child process: read ``target`` with our reader; report time, rows, DataFrame size and peak memory.

    Peak memory is the RSS growth (includes allocator retention) and, with ``traced``, the live peak:
    tracemalloc's peak of Python allocations plus the Arrow memory pool's peak (tracemalloc slows the
    read, so its time is not reported).
    """
    import pandas as pd
    import pyarrow  # noqa: F401

    from smx_debug.data.system import system_metrics

    # Warm up on the first file (lazy imports, thread pools, allocator arenas): a notebook's steady state.
    warm = DATA / "warmup" / "system"
    if not warm.exists() and Path(target).exists():
        first = min(Path(target).rglob("*.algo-1.json"))
        warm.mkdir(parents=True)
        shutil.copy(first, warm / first.name)
    if warm.exists():
        system_metrics(warm.parent, progress=False)
    import tracemalloc

    import pyarrow as pa

    base = _rss_bytes()
    pool_before = pa.default_memory_pool().max_memory()
    if traced:
        tracemalloc.start()
    t, c = time.perf_counter(), time.process_time()
    df = system_metrics(target, progress=False)
    seconds, cpu = time.perf_counter() - t, time.process_time() - c
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    live_peak = 0
    if traced:
        live_peak = tracemalloc.get_traced_memory()[1] + max(0, pa.default_memory_pool().max_memory() - pool_before)
        tracemalloc.stop()
    def cat(s: Any) -> Any:
        c = s.cat.add_categories(["None"]).fillna("None") if s.isna().any() else s
        c = c.cat.rename_categories([str(x) for x in c.cat.categories])
        return pd.Categorical(c).set_categories(sorted(c.cat.categories))

    cols = {
        "us": df["timestamp"].astype("int64").to_numpy() // 1000,
        "value": df["value"].to_numpy(),
        "name": cat(df["name"]),
        "dimension": cat(df["dimension"]),
        "node": cat(df["node"]),
        "type": cat(df["type"]),
    }
    with open(out, "wb") as f:
        pickle.dump(
            {
                "seconds": seconds,
                "cpu": cpu,
                "rows": len(df),
                "df_bytes": int(df.memory_usage(deep=True).sum()),
                "peak_growth": peak - base,
                "live_peak": live_peak,
                "skipped": df.attrs.get("skipped_lines", 0),
                "per_line": df.attrs.get("lines_parsed_one_by_one", 0),
                "cols": cols,
            },
            f,
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _aws_env(endpoint: str) -> dict[str, str]:
    return {
        **os.environ,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-west-2",
        "AWS_REGION": "us-west-2",
    }


def _run_child(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    out = DATA / f"result-{os.getpid()}-{time.monotonic_ns()}.pkl"
    subprocess.run([*cmd, str(out)], check=True, env=env, cwd=ROOT)
    with open(out, "rb") as f:
        result: dict[str, Any] = pickle.load(f)
    out.unlink()
    return result


def _ours(target: str, env: dict[str, str] | None = None, *, traced: bool = False) -> dict[str, Any]:
    flag = ["--_traced"] if traced else []
    return _run_child([sys.executable, str(Path(__file__).resolve()), *flag, "--_measure", target], env)


def _smdebug(target: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    script = DATA / "smdebug_read.py"
    script.write_text(_SMDEBUG_SCRIPT)
    return _run_child([str(SMDEBUG_PY), str(script), target], env)


def _json_loads_baseline(root: Path) -> tuple[float, int]:
    files = sorted((root / "system").rglob("*.json"))
    t = time.perf_counter()
    n = 0
    for f in files:
        with open(f, "rb") as fh:
            for line in fh:
                json.loads(line)
                n += 1
    return time.perf_counter() - t, n


def _against_smdebug(results: dict[str, Any], where: str, target_path: str, env: dict[str, str] | None,
                     ours: dict[str, Any], *, label: str, target: int) -> None:
    """smdebug's PandasFrame on the same output: its wall and CPU seconds and whether its frames equal ours,
    recorded in ``results`` as ``smdebug_<where>_s``, ``smdebug_<where>_cpu_s`` and ``equal_<where>``, and printed
    with our speed-up against ``target``."""
    sm = _smdebug(target_path, env)
    results[f"smdebug_{where}_s"] = sm["seconds"]
    results[f"smdebug_{where}_cpu_s"] = sm["cpu"]
    results[f"equal_{where}"], why = _same(ours, sm)
    print(f"{label:<22} {sm['seconds']:.2f} s wall, {sm['cpu']:.2f} s CPU  -> ours is "
          f"{sm['seconds'] / ours['seconds']:.1f}x faster (target >= {target}x; CPU: {sm['cpu'] / ours['cpu']:.1f}x); "
          f"results: {why}")


def _same(a: dict[str, Any], b: dict[str, Any]) -> tuple[bool, str]:
    import numpy as np

    if a["rows"] != b["rows"]:
        return False, f"row counts differ: {a['rows']} vs {b['rows']}"
    keys = ["node", "us", "type", "name", "dimension", "value"]
    cat_keys = ["node", "type", "name", "dimension"]
    for k in cat_keys:
        ca, cb = list(a["cols"][k].categories), list(b["cols"][k].categories)
        if ca != cb:
            return False, f"{k} values differ: {sorted(set(ca) ^ set(cb))[:5]}"

    def ordered(cols: dict[str, Any]) -> dict[str, Any]:
        arrays = {k: (np.asarray(cols[k].codes) if k in cat_keys else np.asarray(cols[k])) for k in keys}
        order = np.lexsort([arrays[k] for k in reversed(keys)])
        return {k: v[order] for k, v in arrays.items()}

    fa, fb = ordered(a["cols"]), ordered(b["cols"])
    for k in keys:
        x, y = fa[k], fb[k]
        if not np.array_equal(x, y):
            bad = int(np.flatnonzero(x != y)[0])
            return False, f"column {k} differs at sorted row {bad}: {x[bad]!r} vs {y[bad]!r}"
    return True, "same rows, same values"


class _MotoProcess:
    """A moto S3 server in its own process, so it does not compete with the reader for the GIL."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> _MotoProcess:
        moto = Path(sys.executable).with_name("moto_server")
        self.proc = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for _ in range(100):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("moto_server did not start")

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def _upload(root: Path, endpoint: str, prefix: str) -> float:
    from concurrent.futures import ThreadPoolExecutor

    import boto3
    from botocore.config import Config

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-west-2", aws_access_key_id="testing",
                      aws_secret_access_key="testing", config=Config(max_pool_connections=32))
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    files = [p for p in root.rglob("*") if p.is_file()]
    t = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: s3.put_object(Bucket=BUCKET, Key=prefix + p.relative_to(root).as_posix(),
                                              Body=p.read_bytes()), files))
    return time.perf_counter() - t


def _generate(nodes: int, hours: float) -> tuple[Path, dict[str, Any]]:
    from smx_debug.simulate import Simulation, SimulationSpec

    spec = SimulationSpec(nodes=nodes, duration_s=hours * 3600.0)
    root = DATA / f"job-{nodes}n-{hours:g}h" / "profiler-output"
    marker = root.parent / "spec.json"
    if marker.exists() and json.loads(marker.read_text()).get("spec") == spec.model_dump(mode="json"):
        return root, json.loads(marker.read_text())
    shutil.rmtree(root.parent, ignore_errors=True)
    t = time.perf_counter()
    res = Simulation(spec).write_local(root)
    info = {"spec": spec.model_dump(mode="json"), "files": res.files, "bytes": res.bytes,
            "records": res.records, "generate_s": time.perf_counter() - t}
    marker.write_text(json.dumps(info))
    return root, info


def _ensure_smdebug() -> bool:
    if (SMDEBUG_PY.parents[1] / ".ready-v3").exists():  # the marker bench/smdebug_env.sh leaves when done
        return True
    try:
        subprocess.run(["bash", str(ROOT / "bench" / "smdebug_env.sh")], check=True)
    except subprocess.CalledProcessError as exc:
        print(f"smdebug environment could not be built ({exc}); only the json.loads baseline is compared")
        return False
    return True


GARBAGE = b"\x00\x17 garbage: not a record {{{ \xde\xad\n"
# Valid JSON that pyarrow.json refuses (issue 29 item 17: it sent a whole 200 MB file line by line, 37.9 s vs 2.0 s)
SURROGATE = (b'{"Type": "cpu", "Name": "\\ud800", "Dimension": "CPUUtilization", "Value": 1.0, "NodeId": "algo-1", '
             b'"Timestamp": 1704067230.0}\n')
BAD_KINDS = [  # one line of each kind the reader skips and counts
    GARBAGE,
    b'{"Type": "cpu", "Name": "caf\xe9", "Dimension": "CPUUtilization", "Value": 1.0, "NodeId": "algo-1", '
    b'"Timestamp": 1700000000.0}\n',
    b'{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 1.0, "NodeId": "algo-1", '
    b'"Timestamp": 1e20}\n',
    b'{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 1.0, "NodeId": "algo-1", '
    b'"Timestamp": 1700000000000}\n',
]


def _one_large_file(hours: float) -> tuple[Path, int]:
    """One node's system metrics of ``hours`` in a single file (the worst case for a per-file fallback)."""
    from smx_debug.simulate import Simulation, SimulationSpec

    base = DATA / f"large-1n-{hours:g}h"
    target = base / "clean" / "system" / "incremental" / "2024010100" / "1704067200.algo-1.json"
    if not target.exists():
        shutil.rmtree(base, ignore_errors=True)
        sim = Simulation(SimulationSpec(nodes=1, duration_s=hours * 3600.0, seed=11))
        target.parent.mkdir(parents=True)
        with open(target, "wb") as out:
            for minute in sim.minutes():
                _key, body, _n = sim.system_file(0, minute)
                out.write(body)
    return base, target.stat().st_size


def _with_lines(base: Path, clean: Path, name: str, lines: list[bytes]) -> Path:
    root = base / name
    target = root / clean.relative_to(base / "clean")
    if not target.exists():
        data = clean.read_bytes()
        mid = data.index(b"\n", len(data) // 2) + 1
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data[:mid] + b"".join(lines) + data[mid:])
    return root


def robustness(hours: float, runs: int = 5) -> dict[str, Any]:
    """Clean large file vs the same with one garbage line, with one lone-surrogate line, and with one bad line of
    each kind."""
    base, size = _one_large_file(hours)
    clean_root = base / "clean"
    clean_file = next(clean_root.rglob("*.json"))
    garbage_root = _with_lines(base, clean_file, "garbage", [GARBAGE])
    bad_root = _with_lines(base, clean_file, "every-kind", BAD_KINDS)
    surrogate_root = _with_lines(base, clean_file, "lone-surrogate", [SURROGATE])
    # Round-robin, not one variant after another: on a shared machine the load drifts over seconds, and three
    # clean reads followed by three garbage reads measured the drift (0.80x to 1.39x for the same code).
    # Each round starts with another variant: the first fresh process of a round read 1.6x slower (the clean
    # file, always first, measured 0.47 s against 0.29 s for the garbage one; in one process both take 0.24 s).
    roots = (clean_root, garbage_root, bad_root, surrogate_root)
    rounds: list[dict[int, dict[str, Any]]] = []
    for k in range(runs):
        order = [(k + j) % len(roots) for j in range(len(roots))]
        rounds.append({i: _ours(str(roots[i])) for i in order})
    clean, garbage, bad, surrogate = (min((r[i] for r in rounds), key=lambda r: r["seconds"])
                                      for i in range(len(roots)))
    ratio, ratio_bad = garbage["seconds"] / clean["seconds"], bad["seconds"] / clean["seconds"]
    ratio_surrogate = surrogate["seconds"] / clean["seconds"]
    print(f"one {size / 1e6:.0f} MB file ({clean['rows']:,} records), best of {runs} fresh processes, taken in turn:")
    print(f"  clean:                 {clean['seconds']:.2f} s, peak RSS growth {clean['peak_growth'] / 1e6:.0f} MB")
    # The target is the node-hour file's (about 110 MB, a read of ~0.4 s); a quarter of it reads in ~0.08 s, where a
    # fresh process's noise on a shared machine is as large as the 20% allowed (1.18x and 1.21x in two runs).
    judged = hours >= 1.0
    print(f"  one garbage line:      {garbage['seconds']:.2f} s, peak RSS growth {garbage['peak_growth'] / 1e6:.0f} MB"
          f", {garbage['skipped']} skipped -> {ratio:.2f}x the clean read (target <= 1.20x"
          f"{'' if judged else ', judged on the node-hour file only'})")
    print(f"  one line of each kind: {bad['seconds']:.2f} s, {bad['skipped']} skipped -> {ratio_bad:.2f}x the clean "
          f"read (garbage, non-UTF-8 byte, Timestamp 1e20, millisecond Timestamp)")
    print(f"  one lone surrogate:    {surrogate['seconds']:.2f} s, {surrogate['skipped']} skipped, "
          f"{surrogate['per_line']} line(s) parsed one by one -> {ratio_surrogate:.2f}x the clean read (target <= "
          f"1.20x{'' if judged else ', judged on the node-hour file only'})")
    ok = ((ratio <= 1.2 and ratio_surrogate <= 1.2) or not judged) and garbage["skipped"] == 1 \
        and bad["skipped"] == len(BAD_KINDS) and surrogate["skipped"] == 1
    if not ok:
        print("FAILED: the garbage or lone-surrogate read is more than 20% slower than the clean read, or a bad "
              "line was not counted")
    return {"large_mb": size / 1e6, "clean_s": clean["seconds"], "garbage_s": garbage["seconds"],
            "garbage_ratio": ratio, "every_kind_s": bad["seconds"], "every_kind_ratio": ratio_bad,
            "surrogate_s": surrogate["seconds"], "surrogate_ratio": ratio_surrogate,
            "surrogate_per_line": surrogate["per_line"], "ok": ok}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="1 node, 15 minutes")
    parser.add_argument("--no-smdebug", action="store_true")
    parser.add_argument("--no-s3", action="store_true")
    parser.add_argument("--garbage-only", action="store_true", help="only the one-garbage-line robustness bench")
    parser.add_argument("--_measure", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--_traced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._measure:
        _measure(*args._measure, traced=args._traced)
        return 0
    nodes, hours = (1, 0.25) if args.quick else (args.nodes, args.hours)
    DATA.mkdir(parents=True, exist_ok=True)
    print("robustness: bad lines in one large file", flush=True)
    robust = robustness(0.25 if args.quick else 1.0)
    if args.garbage_only:
        return 0 if robust["ok"] else 1
    root, info = _generate(nodes, hours)
    mb = info["bytes"] / 1e6
    print(f"data: {nodes} node(s) x {hours:g} h, {info['files']} files, {mb:.0f} MB, "
          f"{info['records']:,} system records (generated in {info.get('generate_s', 0):.1f} s) at {root}")
    results: dict[str, Any] = {"nodes": nodes, "hours": hours, "mb": mb, "records": info["records"],
                               "robustness": robust}

    ours = _ours(str(root))
    results["ours_local_s"] = ours["seconds"]
    results["df_mb"] = ours["df_bytes"] / 1e6
    results["peak_growth_mb"] = ours["peak_growth"] / 1e6
    results["ours_local_cpu_s"] = ours["cpu"]
    print(f"ours, local disk:      {ours['seconds']:.2f} s wall, {ours['cpu']:.2f} s CPU  ({ours['rows']:,} rows, "
          f"{mb / ours['seconds']:.0f} MB/s)")
    traced = _ours(str(root), traced=True)
    results["live_peak_mb"] = traced["live_peak"] / 1e6
    print(f"  DataFrame {results['df_mb']:.0f} MB; peak live memory (tracemalloc + Arrow pool) "
          f"{results['live_peak_mb']:.0f} MB = {traced['live_peak'] / ours['df_bytes']:.2f}x the DataFrame "
          f"(target < 3x); peak RSS growth {results['peak_growth_mb']:.0f} MB = "
          f"{ours['peak_growth'] / ours['df_bytes']:.2f}x (includes allocator retention)")
    jl, n = _json_loads_baseline(root)
    results["json_loads_s"] = jl
    print(f"plain json.loads:      {jl:.2f} s  ({n:,} lines)  -> ours is {jl / ours['seconds']:.1f}x faster "
          f"(target > 1x; CPU: {jl / ours['cpu']:.1f}x)")
    have_smdebug = not args.no_smdebug and _ensure_smdebug()
    if have_smdebug:
        _against_smdebug(results, "local", str(root), None, ours, label="smdebug PandasFrame:", target=20)
    if not args.no_s3:
        with _MotoProcess() as moto:
            prefix = f"jobs/bench-{nodes}n/profiler-output/"
            up = _upload(root, moto.endpoint, prefix)
            print(f"uploaded to local S3 (moto_server process) in {up:.1f} s")
            env = _aws_env(moto.endpoint)
            uri = f"s3://{BUCKET}/{prefix}"
            ours_s3 = _ours(uri, env)
            results["ours_s3_s"] = ours_s3["seconds"]
            results["ours_s3_cpu_s"] = ours_s3["cpu"]
            traced3 = _ours(uri, env, traced=True)
            results["s3_live_peak_mb"] = traced3["live_peak"] / 1e6
            print(f"ours, local S3:        {ours_s3['seconds']:.2f} s wall, {ours_s3['cpu']:.2f} s CPU  "
                  f"({ours_s3['rows']:,} rows); peak live memory {traced3['live_peak'] / ours_s3['df_bytes']:.2f}x "
                  f"the DataFrame, peak RSS growth {ours_s3['peak_growth'] / ours_s3['df_bytes']:.2f}x")
            if have_smdebug:
                _against_smdebug(results, "s3", uri, env, ours_s3, label="smdebug from S3:", target=10)
    (DATA / "results.json").write_text(json.dumps(results, indent=2))
    failed = [k for k in ("equal_local", "equal_s3") if results.get(k) is False]
    if not robust["ok"]:
        failed.append("robustness")
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
