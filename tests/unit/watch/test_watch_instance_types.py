"""The scheduled evaluator's per-device rules on an instance type the table does not know: judged on what the
data shows, never skipped."""

from __future__ import annotations

import numpy as np
import pandas as pd

from smx_debug.data.frames import series_frame
from smx_debug.watch.evaluate import _evaluate
from smx_debug.watch.state import Cursor

T0 = 1_700_000_000 // 60 * 60  # a minute boundary
DEVICE_RULES = ["CPUBottleneck", "LowGPUUtilization", "GPUMemoryIncrease"]


def _cursor(instance_type: str, data: dict | None = None) -> Cursor:
    rules = [{"name": r, "rule": r, "parameters": {}} for r in DEVICE_RULES]
    return Cursor(job="new-type-job", checked_at=T0, data=data or {},
                  info={"instance_type": instance_type, "rules": rules, "start": T0})


def _profiler_cpu_bottleneck(minutes: int, cores: int = 8, gpus: int = 8) -> pd.DataFrame:
    """Debugger's per-core, per-GPU output: every core at 95%, every GPU at 2% (a CPU bottleneck)."""
    n = minutes * 60 * 2  # 500 ms snapshots
    parts = [series_frame("algo-1", f"cpu{i}", "CPUUtilization", np.full(n, 95.0), start_s=T0, interval_s=0.5)
             for i in range(cores)]
    parts += [series_frame("algo-1", f"gpu{i}", "GPUUtilization", np.full(n, 2.0), start_s=T0, interval_s=0.5)
              for i in range(gpus)]
    parts += [series_frame("algo-1", f"gpu{i}", "GPUMemoryUtilization", np.full(n, 30.0), start_s=T0,
                           interval_s=0.5) for i in range(gpus)]
    return pd.concat(parts, ignore_index=True)


def test_evaluate_unknown_type_with_profiler_output_judges_device_rules_on_it() -> None:
    last = T0 // 60 + 9
    triggers, notes = _evaluate(_cursor("ml.p9.48xlarge"), last, float((last + 1) * 60),
                                profiler=_profiler_cpu_bottleneck(10))
    assert {"CPUBottleneck", "LowGPUUtilization"} <= {t.rule for t in triggers}  # 95% per core, 2% per GPU
    assert not [n for n in notes if "skipped" in n]


def test_evaluate_unknown_type_on_cloudwatch_sums_evaluates_every_device_rule() -> None:
    # ml.p9.48xlarge: not in the table. CloudWatch's host sums: 192 vCPUs at 95%, GPUs summing to 700%.
    minutes = range(T0 // 60, T0 // 60 + 10)
    data = {"host:algo-1": {"CPUUtilization": {m: 192 * 95.0 for m in minutes},
                            "GPUUtilization": {m: 700.0 for m in minutes},
                            "GPUMemoryUtilization": {m: 320.0 for m in minutes}}}
    last = T0 // 60 + 9
    triggers, notes = _evaluate(_cursor("ml.p9.48xlarge", data), last, float((last + 1) * 60))
    assert not [n for n in notes if "skipped" in n]
    said = " ".join(notes)
    assert "ml.p9.48xlarge" in said and "192 vCPUs" in said and "at least 7 GPUs" in said
    assert triggers == []  # 95% per core, but 100% per GPU at most: no bottleneck


def test_evaluate_known_new_type_divides_by_its_table_counts() -> None:
    # ml.p5.48xlarge: 192 vCPUs, 8 GPUs from the table; CPU-bound with the GPUs idle -> CPUBottleneck fires
    minutes = range(T0 // 60, T0 // 60 + 10)
    data = {"host:algo-1": {"CPUUtilization": {m: 192 * 95.0 for m in minutes},
                            "GPUUtilization": {m: 8 * 2.0 for m in minutes},
                            "GPUMemoryUtilization": {m: 8 * 30.0 for m in minutes}}}
    last = T0 // 60 + 9
    triggers, notes = _evaluate(_cursor("ml.p5.48xlarge", data), last, float((last + 1) * 60))
    assert notes == []
    assert "CPUBottleneck" in {t.rule for t in triggers}  # 95% per core, 2% per GPU
