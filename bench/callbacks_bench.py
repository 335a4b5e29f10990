"""Benchmark: the framework callbacks cost no more per step than the hook alone (issue 31, "make bench").

Per framework, three variants of the same tiny CPU training (one thread), alternating for 3 rounds (``--quick``: 2
rounds of 300 steps instead of 1,000), each run in a fresh process of the framework's side environment (bench/.venv-transformers, bench/.venv-lightning; built or refreshed with this tree's wheel by
bench/transformers_env.sh and bench/lightning_env.sh first, a few seconds once built, minutes the first time):

- ``none``: no hook;
- ``hook``: ``smd.Hook`` registered by hand (``hook.register_module(model)``; Lightning: ``hook.register_loss`` too,
  its ``training_step`` calling ``self(x)`` so the hand-registered hook's steps follow the forward calls);
- ``callback``: ``callbacks=[SmxDebugCallback(out_dir=..., save_interval=100)]`` instead, the one added line.

Both hooked runs save weights, gradients and losses every 100 steps (``SmxDebugCallback``'s defaults,
``integrations.core.DEFAULT_COLLECTIONS``, given to the hand-registered hook too). Hugging Face: a 2-layer BERT
(hidden 64, sequences of 32, batch 16) in ``transformers.Trainer``; Lightning: an autoencoder (256-128-32-128-256,
batch 64) in ``lightning.Trainer``. A timing callback, first in the list and the same in every run, notes the time
at each 100th optimizer step, in CPU time of the process (one thread: wall time on a shared machine moves with the
other processes' load, by more than the difference measured); the first block (warm-up) is dropped.

Printed per framework: CPU ms per step (best of the rounds of each run's median 100-step block), the callback's cost
ratio against the hook alone (target <= 1.05x: the callback adds nothing but noise) and the hook's against no hook.
Returns 1 when a callback misses its target. A framework whose side environment cannot be built is skipped, saying
why.

``python bench/callbacks_bench.py [--quick] [--framework transformers|lightning]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
INTERVAL = 100
TARGET = 1.05  # callback / hook alone: 1.0x plus the noise of a shared machine
FRAMEWORKS = ("transformers", "lightning")
VARIANTS = ("none", "hook", "callback")


class _Clock:
    """CPU seconds of this process per block of INTERVAL optimizer steps (called once per step by the framework's
    timing callback). CPU time, not wall time: on a shared machine the other processes' load moves wall time by tens
    of percent between runs of the same code, while each run's own CPU time stays put."""

    def __init__(self) -> None:
        self.blocks: list[float] = []
        self._start = time.process_time()

    def step_done(self, step: int) -> None:
        if step % INTERVAL == 0:
            now = time.process_time()
            self.blocks.append(now - self._start)
            self._start = now


def _hand_hook(out_dir: str) -> Any:
    """The hook alone, configured as ``SmxDebugCallback(out_dir=out_dir, save_interval=INTERVAL)`` configures its."""
    import smx_debug.hook as smd
    from smx_debug.integrations.core import DEFAULT_COLLECTIONS

    return smd.Hook(out_dir=out_dir, save_config=smd.SaveConfig(save_interval=INTERVAL),
                    include_collections=list(DEFAULT_COLLECTIONS))


def _transformers(variant: str, steps: int, out_dir: str) -> list[float]:
    import torch
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    torch.set_num_threads(1)
    torch.manual_seed(0)
    clock = _Clock()

    class Timing(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            clock.step_done(state.global_step)

    model = BertForSequenceClassification(BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                                                     num_attention_heads=4, intermediate_size=128, num_labels=2))
    ids = torch.randint(1, 1000, (320, 32), generator=torch.Generator().manual_seed(0))
    data = [{"input_ids": x, "labels": int(x[0] < 500)} for x in ids]
    args = TrainingArguments(output_dir=f"{out_dir}-hf", max_steps=steps + INTERVAL, per_device_train_batch_size=16,
                             learning_rate=1e-3, logging_steps=INTERVAL, save_strategy="no", report_to="none",
                             use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
    callbacks: list[Any] = [Timing()]
    hook = None
    if variant == "hook":
        hook = _hand_hook(out_dir)
        hook.register_module(model)
    elif variant == "callback":
        from smx_debug.integrations.transformers import SmxDebugCallback

        callbacks.append(SmxDebugCallback(out_dir=out_dir, save_interval=INTERVAL))
    Trainer(model=model, args=args, train_dataset=data, callbacks=callbacks).train()
    if hook is not None:
        hook.close()
    return clock.blocks[1:]


def _lightning(variant: str, steps: int, out_dir: str) -> list[float]:
    import lightning as L
    import torch
    from torch import nn

    torch.set_num_threads(1)
    clock = _Clock()

    class Timing(L.Callback):  # type: ignore[misc]
        def on_train_batch_end(self, trainer: Any, *args: Any, **kwargs: Any) -> None:
            clock.step_done(trainer.global_step)

    class AutoEncoder(L.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 32))
            self.decoder = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 256))
            self.loss_fn = nn.MSELoss()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.decoder(self.encoder(x))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            (x,) = batch
            loss = self.loss_fn(self(x), x)  # self(x): the hand-registered hook's steps follow the forward calls
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    L.seed_everything(0, verbose=False)
    module = AutoEncoder()
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(1280, 256)), batch_size=64)
    callbacks: list[Any] = [Timing()]
    hook = None
    if variant == "hook":
        hook = _hand_hook(out_dir)
        hook.register_module(module)
        hook.register_loss(module.loss_fn)
    elif variant == "callback":
        from smx_debug.integrations.lightning import SmxDebugCallback

        callbacks.append(SmxDebugCallback(out_dir=out_dir, save_interval=INTERVAL))
    trainer = L.Trainer(max_steps=steps + INTERVAL, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks)
    trainer.fit(module, data)
    if hook is not None:
        hook.close()
    return clock.blocks[1:]


def _child(framework: str, variant: str, steps: int, out_dir: str) -> list[float]:
    blocks = (_transformers if framework == "transformers" else _lightning)(variant, steps, out_dir)
    written = Path(out_dir).exists()
    if (variant == "none") == written:  # a hooked run that saved nothing measured nothing
        raise SystemExit(f"{framework} {variant}: trial {'written' if written else 'missing'} at {out_dir}")
    return blocks


def _side_python(framework: str) -> Path | str:
    """The framework's side python with this tree's wheel, or why there is none."""
    script = HERE / f"{framework}_env.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    python = HERE / f".venv-{framework}" / "bin" / "python"
    if done.returncode != 0 or not python.exists():
        return f"bash {script.relative_to(HERE.parent)} failed: " + (done.stderr.strip().splitlines() or ["?"])[-1]
    return python


def _run(python: Path, framework: str, variant: str, steps: int) -> list[float] | str:
    with tempfile.TemporaryDirectory(prefix="smx-callbacks-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TRAINING_JOB", "SMDEBUG", "SM_"))}
        env.update(PYTHONWARNINGS="ignore", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
        proc = subprocess.run([str(python), __file__, "--steps", str(steps), "--child", f"{framework}:{variant}",
                               f"{tmp}/trial"], capture_output=True, text=True, env=env, cwd=tmp,
                              check=False)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1]
    blocks: list[float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return blocks


def _best_ms_per_step(python: Path, framework: str, rounds: int,
                      steps: int) -> tuple[dict[str, float], dict[str, str]]:
    """CPU ms per step of each variant that ran (the best of its rounds' median block), and why each that failed
    did (it is not run again). The variants alternate, so a busy machine slows them alike."""
    samples: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    failed: dict[str, str] = {}
    for _ in range(rounds):
        for variant in [v for v in VARIANTS if v not in failed]:
            blocks = _run(python, framework, variant, steps)
            if isinstance(blocks, str) or not blocks:
                failed[variant] = (blocks if isinstance(blocks, str) else "") or f"no {INTERVAL}-step block measured"
            else:
                samples[variant].append(statistics.median(blocks) / INTERVAL * 1000)
    return {variant: min(values) for variant, values in samples.items() if values}, failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 steps a run, 2 rounds (default 1,000 steps, 3)")
    parser.add_argument("--framework", choices=FRAMEWORKS, action="append", help="only this one (repeatable)")
    parser.add_argument("--steps", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", nargs=2, metavar=("FRAMEWORK:VARIANT", "OUT"), help=argparse.SUPPRESS)
    args, _ = parser.parse_known_args(argv)
    steps = args.steps or (300 if args.quick else 1000)
    if args.child:  # one measured run, in the side environment's python
        framework, variant = args.child[0].split(":")
        print(json.dumps(_child(framework, variant, steps, args.child[1])))
        return 0
    rounds = 2 if args.quick else 3
    status = 0
    for framework in args.framework or FRAMEWORKS:
        python = _side_python(framework)
        if isinstance(python, str):
            print(f"{framework}: skipped ({python})", flush=True)
            continue
        ms, failed = _best_ms_per_step(python, framework, rounds, steps)
        for variant, value in ms.items():
            print(f"{framework} {variant:>8}: {value:7.3f} CPU ms/step  (best of {rounds} runs of the median "
                  f"{INTERVAL}-step block; {steps} steps a run)", flush=True)
        for variant, why in failed.items():
            print(f"{framework} {variant:>8}: failed ({why})")
            status = 1
        if "none" in ms and "hook" in ms:
            print(f"{framework} hook alone / no hook: {ms['hook'] / ms['none']:.3f}x  "
                  f"(+{ms['hook'] - ms['none']:.3f} ms/step)")
        if "hook" in ms and "callback" in ms:
            ratio = ms["callback"] / ms["hook"]
            verdict = "ok" if ratio <= TARGET else "MISSED"
            print(f"{framework} SmxDebugCallback / hook alone: {ratio:.3f}x  "
                  f"({ms['callback'] - ms['hook']:+.3f} ms/step; target <= {TARGET:.2f}x: {verdict})", flush=True)
            status |= int(ratio > TARGET)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
