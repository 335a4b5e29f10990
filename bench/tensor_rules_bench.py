"""Benchmark: every tensor rule over a trial of 10,000 saved steps x 50 tensors (target < 5 s on 2 cores).

The trial is what smx_debug.hook writes for a small model with every tensor rule's collections (raw values, as
the hook saves by default): per step a loss and 5 metric scalars, 8 gradients and 8 weights (8x8), 8 biases,
6 ReLU inputs and 6 ReLU outputs and 4 tanh inputs (batch 16 x 8 units), labels and predictions (16), input images
(16x1x2x2) and token sequences (4x8). Timed, side by side in one process:

- reading alone: the records every rule reads, from disk into arrays (TrialFeed's read, what the rules need);
- all 17 tensor rules with their defaults (TensorVariance with max_threshold 1000) over the trial, reading included.

The ratio is rules / reading. Usage: python bench/tensor_rules_bench.py [--steps 10000] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from _verdict import judged

TARGET_S = 5.0


def tensors(step: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    f32 = np.float32
    out: dict[str, np.ndarray] = {"CrossEntropyLoss_output_0": np.array([2.0 / (1 + step / 100)], f32)}
    out.update({f"metric_{i}": rng.standard_normal(1).astype(f32) for i in range(5)})
    for i in range(8):
        out[f"gradient/layer{i}.weight"] = (rng.standard_normal((8, 8)) * 1e-2).astype(f32)
        out[f"layer{i}.weight"] = rng.standard_normal((8, 8)).astype(f32)
        out[f"layer{i}.bias"] = rng.standard_normal(8).astype(f32)
    for i in range(6):
        pre = rng.standard_normal((16, 8)).astype(f32)
        out[f"layer{i}_relu_input_0"] = pre
        out[f"layer{i}_relu_output_0"] = np.maximum(pre, 0)
    for i in range(4):
        out[f"layer{i}_tanh_input_0"] = rng.standard_normal((16, 8)).astype(f32)
    labels = rng.integers(0, 4, 16).astype(np.int64)
    out.update({"labels": labels, "predictions": labels.copy(),
                "hybridsequential0_input_0": rng.standard_normal((16, 1, 2, 2)).astype(f32),
                "embedding0_input_0": rng.integers(0, 50, (4, 8)).astype(np.int64)})
    return out


def write_trial(root: Path, steps: int) -> int:
    """The trial; returns the number of tensors per step."""
    from smx_debug.tensors import Collection, TrialWriter

    rng = np.random.default_rng(0)
    n = 0
    with TrialWriter(root, worker="worker_0") as w:
        w.write_collections([Collection(name="gradients", include_regex=("^gradient",)),
                             Collection(name="weights", include_regex=("^(?!gradient).*weight",)),
                             Collection(name="biases", include_regex=("^(?!gradient).*bias",)),
                             Collection(name="losses", include_regex=("[Ll]oss_(?!input).*output",))])
        for step in range(steps):
            values = tensors(step, rng)
            n = len(values)
            w.write_step(step, mode="train", mode_step=step, wall_time=1.7e9 + step, tensors=values)
        w.training_end()
    return n


def main(argv: Sequence[str] = ()) -> int:
    from smx_debug.evaluate import configured_rule
    from smx_debug.evaluate.tensor_eval import TensorEvaluator
    from smx_debug.rules.params import TENSOR_RULES
    from smx_debug.tensors import create_trial

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="1,000 steps")
    args, _ = parser.parse_known_args(list(argv))
    steps = 1000 if args.quick else args.steps
    tmp = Path(tempfile.mkdtemp(prefix="smx-tensor-rules-bench-"))
    try:
        t = time.perf_counter()
        per_step = write_trial(tmp, steps)
        print(f"tensor_rules_bench: wrote {steps:,} steps x {per_step} tensors in {time.perf_counter() - t:.1f} s")
        configs = [configured_rule(r, overrides={"max_threshold": 1000.0} if r == "TensorVariance" else None)
                   for r in TENSOR_RULES]

        trial = create_trial(str(tmp))
        t = time.perf_counter()
        records = trial.arrays(trial.tensor_names(), start_step=0, end_step=steps)
        reading = time.perf_counter() - t
        n_records = sum(len(s) for s in records.values.values())
        del records

        trial = create_trial(str(tmp))
        t = time.perf_counter()
        results = TensorEvaluator(trial, configs).refresh()
        total = time.perf_counter() - t
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"  reading alone       {reading:6.2f} s  ({n_records:,} records)")
    print(f"  all {len(configs)} tensor rules {total:6.2f} s  (reading included; ratio to reading {total / reading:.2f})")
    for name, r in results.items():
        print(f"    {name:<26} RuleTriggered={r.rule_triggered:<6} Datapoints={r.datapoints}")
    return judged(f"tensor_rules_bench: {total:.2f} s for {steps:,} steps x {per_step} tensors "
                  f"(target {TARGET_S:.0f} s)", total, TARGET_S, quick=args.quick)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
