"""Benchmark: the PyTorch hook's overhead per training step on a small CNN, saving every 100 steps.

Three runs of the same loop (examples/train_cnn.py's SmallCNN and data, batch 32, SGD, CPU, one thread), each in a
fresh process: no hook; ``smx_debug.hook`` writing weights, gradients, losses and ReLU outputs (the plan's
collections for VanishingGradient, DeadRelu and LossNotDecreasing) to disk every 100 steps; and smdebug 1.0.34's
own PyTorch hook with the same configuration, and ours registered on steps that save nothing (``ours-idle``), in the side environment bench/.venv-smdebug (it needs torch
there: run `bench/.venv-smdebug/bin/pip install torch==2.13.0` once; without it that run is skipped, saying so).
Printed: ms per step (median of the runs' per-100-step blocks) and the ratios against no hook and against smdebug.

``python bench/hook_bench.py [--quick]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SMDEBUG_PY = HERE / ".venv-smdebug" / "bin" / "python"
COLLECTIONS = ["weights", "gradients", "losses", "relu_output"]
INTERVAL = 100


def _loop(variant: str, steps: int, out_dir: str) -> list[float]:
    """Seconds per block of INTERVAL steps (one saving step in each block when hooked)."""
    import importlib.util

    import torch
    from torch import nn

    torch.set_num_threads(1)
    spec = importlib.util.spec_from_file_location("train_cnn", ROOT / "examples" / "train_cnn.py")
    assert spec is not None and spec.loader is not None  # our own file
    train_cnn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train_cnn)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model, loss_fn = train_cnn.SmallCNN(), nn.CrossEntropyLoss()
    hook = None
    if variant != "none":
        if variant.startswith("ours"):
            import smx_debug.hook as smd
        else:
            import smdebug.pytorch as smd  # type: ignore[no-redef]
        interval = 10**9 if variant == "ours-idle" else INTERVAL  # idle: only step 0 saves (a dropped block)
        hook = smd.Hook(out_dir=out_dir, save_config=smd.SaveConfig(save_interval=interval),
                        include_collections=COLLECTIONS)
        hook.get_collection("relu_output").include(".*relu_output")
        hook.register_module(model)
        hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    batches = [train_cnn.batch(gen) for _ in range(20)]
    blocks: list[float] = []
    start = time.perf_counter()
    for step in range(steps + INTERVAL):  # the first block warms up and is dropped
        images, labels = batches[step % len(batches)]
        opt.zero_grad()
        loss_fn(model(images), labels).backward()
        opt.step()
        if (step + 1) % INTERVAL == 0:
            now = time.perf_counter()
            blocks.append(now - start)
            start = now
    if hook is not None:
        hook.close()
    return blocks[1:]


def _run(python: str, variant: str, steps: int) -> list[float] | str:
    with tempfile.TemporaryDirectory(prefix="smx-hook-bench-") as tmp:
        env = {**os.environ, "SMDEBUG_LOG_LEVEL": "error", "PYTHONWARNINGS": "ignore"}
        proc = subprocess.run([python, __file__, "--child", variant, "--steps", str(steps), "--out", f"{tmp}/t"],
                              capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1]
    blocks: list[float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return blocks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 steps instead of 2,000")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args, _ = parser.parse_known_args(argv)
    steps = args.steps or (500 if args.quick else 2000)
    if args.child:
        print(json.dumps(_loop(args.child, steps, args.out)))
        return 0
    runs = (("none", sys.executable), ("ours", sys.executable), ("ours-idle", sys.executable),
            ("smdebug", str(SMDEBUG_PY)))
    rounds = 2 if args.quick else 3
    samples: dict[str, list[float]] = {}
    skipped: dict[str, str] = {}
    for _ in range(rounds):  # the variants alternate, so a busy machine slows them alike
        for variant, python in runs:
            if variant in skipped:
                continue
            if variant == "smdebug" and not SMDEBUG_PY.exists():
                skipped[variant] = "bench/.venv-smdebug missing: bash bench/smdebug_env.sh"
                continue
            result = _run(python, variant, steps)
            if isinstance(result, str):
                skipped[variant] = result
                continue
            samples.setdefault(variant, []).append(statistics.median(result) / INTERVAL * 1000)
    ms = {variant: min(values) for variant, values in samples.items()}
    for variant, value in ms.items():
        print(f"{variant:>9}: {value:7.3f} ms/step  (best of {rounds} runs of the median 100-step block; "
              f"{steps} steps a run)", flush=True)
    for variant, why in skipped.items():
        print(f"{variant:>9}: skipped ({why})")
    if "none" in ms and "ours" in ms:
        print(f"ours / no hook: {ms['ours'] / ms['none']:.3f}x  (+{ms['ours'] - ms['none']:.3f} ms/step)")
    if "none" in ms and "smdebug" in ms:
        print(f"smdebug / no hook: {ms['smdebug'] / ms['none']:.3f}x  (+{ms['smdebug'] - ms['none']:.3f} ms/step)")
    if "none" in ms and "ours-idle" in ms:
        print(f"ours on steps that save nothing / no hook: {ms['ours-idle'] / ms['none']:.3f}x  "
              f"(+{ms['ours-idle'] - ms['none']:.3f} ms/step)")
    if "ours" in ms and "smdebug" in ms:
        print(f"ours / smdebug: {ms['ours'] / ms['smdebug']:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
