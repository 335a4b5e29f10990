"""Benchmark: cold import of each Lambda handler with only boto3 installed (target well under 300 ms).

Run ``python bench/actions_bench.py``. Each handler is staged as the stack ships it (``infra.assets.asset_files``:
handler.py at the root + the stdlib-only part of ``smx_debug``, no .pyc) and imported in a fresh interpreter of
the boto3-only environment (``.venv/boto3-only``, built by the tests' ``boto3_only_python`` fixture). The
figure judged is the handler's own import on top of ``import boto3`` (which every Python Lambda using boto3
pays); the total with boto3 is printed too. Median of ``--runs`` cold starts.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HANDLERS = ("rule_metrics", "stop_training", "notify", "retrain")
TARGET_MS = 300.0
PROBE = (
    "import time; t = time.perf_counter(); import boto3; b = time.perf_counter(); c = time.process_time(); "
    "import handler; import json; print(json.dumps({'boto3': (b - t) * 1e3, 'own': (time.perf_counter() - b) * 1e3,"
    " 'own_cpu': (time.process_time() - c) * 1e3}))"
)


def stage(tmp: Path, name: str) -> Path:
    """Exactly the files the stack ships for handler ``name`` (infra.assets.asset_files)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from infra.assets import asset_files

    root = tmp / name
    for rel, source in asset_files(name).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, root / rel)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one run per handler")
    args, _ = parser.parse_known_args(argv)
    python = ROOT / ".venv" / "boto3-only" / "bin" / "python"
    if not python.exists():
        print("actions_bench: .venv/boto3-only missing; run the tests once (fixture boto3_only_python) to build it")
        return 1
    runs = 1 if args.quick else args.runs
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name in HANDLERS:
            asset = stage(Path(tmp), name)
            samples = []
            for _ in range(runs):
                out = subprocess.run([str(python), "-c", PROBE], cwd=asset, capture_output=True, text=True,
                                     env={"PYTHONPATH": str(asset), "PYTHONDONTWRITEBYTECODE": "1"}, check=True)
                samples.append(json.loads(out.stdout))
            own = statistics.median(s["own"] for s in samples)
            cpu = statistics.median(s["own_cpu"] for s in samples)
            boto3_ms = statistics.median(s["boto3"] for s in samples)
            worst = max(worst, own)
            print(f"  {name:<14} handler {own:6.1f} ms (CPU {cpu:5.1f} ms), import boto3 {boto3_ms:6.1f} ms, "
                  f"total {own + boto3_ms:6.1f} ms")
    verdict = "OK" if worst < TARGET_MS else "SLOW"
    print(f"actions_bench: slowest handler import {worst:.1f} ms on top of boto3 "
          f"(target {TARGET_MS:.0f} ms, ratio {worst / TARGET_MS:.2f}) {verdict}")
    return 0 if worst < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
