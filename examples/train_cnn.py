"""The demo's tensor job entry point: a small CNN trained on the CPU with smx-debug's hook, as on SageMaker.

The hook comes from the job's ``DebugHookConfig`` (``/opt/ml/input/config/debughookconfig.json``, or the file
``SMDEBUG_CONFIG_FILE_PATH`` names), exactly as smdebug's ``Hook.create_from_json_file()`` builds it in a
training container: porting a script from smdebug means changing ``import smdebug.pytorch as smd`` only.
Data is made in code (16x16 images whose class is the quadrant holding a bright square).

``--explode-at N`` multiplies the learning rate by 10,000,000 from step N (the loss and gradients blow up to
infinity and NaN a few steps later: the demo's fault); ``--step-seconds`` waits that long per step, as loading a
real batch would. On SIGTERM (StopTrainingJob) the script ends the step it is in, closes the hook and exits, as a
SageMaker training script should; it prints the step it stopped at.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.fc = nn.Linear(16 * 8 * 8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu1(self.conv1(x)))
        return self.fc(self.relu2(self.conv2(x)).flatten(1))


def batch(gen: torch.Generator, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    labels = torch.randint(0, 4, (size,), generator=gen)
    images = torch.randn(size, 1, 16, 16, generator=gen)
    for i, label in enumerate(labels.tolist()):
        row, col = divmod(label, 2)
        images[i, 0, row * 8 + 2:row * 8 + 6, col * 8 + 2:col * 8 + 6] += 0.5
    return images, labels


def main() -> None:
    import signal
    import time

    import smx_debug.hook as smd  # here, so the model and data are importable without smx-debug (bench/hook_bench.py)

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--explode-at", type=int, default=None, help="learning rate x 10,000,000 from this step")
    parser.add_argument("--step-seconds", type=float, default=0.0, help="time one batch takes to load")
    args = parser.parse_args()
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))  # StopTrainingJob: end this step, then exit
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model, loss_fn = SmallCNN(), nn.CrossEntropyLoss()
    hook = smd.Hook.create_from_json_file()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    hook.set_mode(smd.modes.TRAIN)
    step = 0
    for step in range(args.steps):
        if stop:
            break
        if step == args.explode_at:
            for group in opt.param_groups:
                group["lr"] *= 10_000_000
        time.sleep(args.step_seconds)
        images, labels = batch(gen)
        opt.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        opt.step()
    else:
        step = args.steps
        hook.set_mode(smd.modes.EVAL)
        with torch.no_grad():
            for _ in range(10):
                images, labels = batch(gen)
                loss_fn(model(images), labels)
    hook.close()
    if stop:
        print(f"stopped by SIGTERM at step {step}, last loss {loss.item():.3g}")
    else:
        print(f"trained {args.steps} steps, last loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
