"""`make bench`: every benchmark of the project, run on demand (never part of `make test`).

Each benchmark prints its own figures and the ratios against the baseline its issue names:
- bench/reports_bench.py: reading profiler output (ours vs smdebug's PandasFrame and a plain json.loads loop)
- bench/rules_bench.py: evaluating every profiler rule over 8 node-hours of 96-vCPU/8-GPU metrics
- bench/actions_bench.py: cold import time of each Lambda handler with only boto3 (target: well under 300 ms)
- bench/replay_bench.py: 500 shuffled events over 30 jobs, concurrent, 10% crashes after a claim, 10% throttled
  calls: each eligible job stopped exactly once (baseline: the ideal 1.00), every other job never
- bench/parity.py: our profiler rules vs the last public Debugger rule code on generated jobs (docs/rules.md)
- bench/report_bench.py: the HTML report of an 8-node, 8-GPU, one-hour job (render < 5 s, file < 5 MB)
- bench/tensors_bench.py: reading 10,000 steps x 50 tensors from disk, ours (create_trial + frame) against
  smdebug's create_trial reading every value, side by side (target >= 20x; our peak memory < 3x the frame); then
  every value of 2,000 steps x 50 tensors written by smdebug's own FileWriter, through
  trial.tensor(name).value(step), ours against smdebug (target >= 20x)
- bench/hook_bench.py: the PyTorch hook's overhead per step on a small CNN saving every 100 steps, against no
  hook and against smdebug's own hook (side env, with torch) with the same configuration
- bench/callbacks_bench.py: the Hugging Face and Lightning SmxDebugCallback against the same training with the hook
  registered by hand, per step, in their side envs (target <= 1.05x the hook alone)
- bench/evaluator_bench.py: the scheduled evaluator on a busy local account, 200 running jobs x 4 hosts (50 another
  team's, 5 with poisoned profiler output, 5 throttled past the retries), and the run a minute later (every other
  job evaluated, failures counted per job by reason, each run < 60 s; the second reads only the new minute: vs a
  non-incremental reader)
- bench/fanout_bench.py: the deployed evaluator fanning out over 2,000 running jobs x 4 hosts (shards of 200 through
  its SQS queue and event source mapping on the local AWS): wall time per run and per shard (projected on AWS), calls
  per job, cost per watched job-day, every job evaluated once per run, 0 IAM denials; then the fleet collector
- bench/fleet_bench.py: each named fleet query over 100 node-hours of Parquet on DuckDB (< 2 s on 2 cores; rows
  scanned), and DuckDB over the raw JSON beside it
- bench/tensor_rules_bench.py: every tensor rule over 10,000 saved steps x 50 tensors (target < 5 s; ratio to
  reading alone)
- bench/detection_bench.py: 40 real PyTorch training runs recorded by smx_debug.hook, half healthy, half with one
  injected fault each, judged by every tensor rule at its defaults and by check_finite / detect_anomaly
  (targets >= 95% of faults detected, <= 5% of healthy runs flagged; a few minutes)
- bench/heldout_bench.py: Debugger's tensor rules against the recommended set of smx-debug's own rules, on the
  detection benchmark's architectures (where the recommended thresholds were chosen) and on four held-out ones
  (BatchNorm MLP, residual LayerNorm MLP, GRU, transformer encoder layer) with the same fault classes (targets on the
  held-out runs: >= 95% detected, <= 5% of healthy runs flagged, median delay <= one save interval)
- bench/review_path_bench.py: the recommended profile on the review's path (runs written by Hook.from_plan from a
  `profile: recommended` plan, judged by `smx-debug rules evaluate TRIAL --plan plan.yaml --json -`) on seven more
  architectures (CNNs, LSTM, EmbeddingBag, tanh/sigmoid/GELU MLPs) trained to convergence, saving every 100 steps

Pass `--quick` for a small smoke run; other flags go to both scripts.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec and spec.loader  # our own files: a missing one is a bug, not user input
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses (bench/parity.py) look their module up while it executes
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    status = 0
    for name in ("reports_bench", "rules_bench", "actions_bench", "replay_bench", "parity", "report_bench",
                 "evaluator_bench", "fanout_bench", "tensors_bench", "hook_bench", "callbacks_bench",
                 "tensor_rules_bench", "detection_bench", "heldout_bench", "review_path_bench", "fleet_bench"):
        print(f"\n=== {name} ===", flush=True)
        status |= int(_load(name).main(argv) or 0)
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
