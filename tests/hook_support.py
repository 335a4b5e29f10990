"""Small models, a teacher task and training loops for the hook's tests (tests/unit/hook, tests/functional/hook,
tests/functional/evaluate, bench)."""

from __future__ import annotations

import torch
from torch import nn


class Net(nn.Module):
    """A small MLP with every activation kind the rules look for."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(8, 8)
        self.act = nn.Tanh()
        self.fc3 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(self.act(self.fc2(self.relu(self.fc1(x)))))


def teacher_task(n: int) -> tuple[torch.Generator, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One thread, seeded (torch's seed and a generator's, 0): a random teacher (16 features -> 4 classes) and
    ``n`` inputs labelled by it. Returns (generator, teacher, x, y); draw batches and more inputs with the
    generator."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    teacher = torch.randn(16, 4, generator=g)
    x = torch.randn(n, 16, generator=g)
    return g, teacher, x, (x @ teacher).argmax(1)


def mlp(act: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """The teacher task's student: 16 -> 32 -> 32 -> 4, ``act`` after each hidden layer."""
    return nn.Sequential(nn.Linear(16, 32), act(), nn.Linear(32, 32), act(), nn.Linear(32, 4))


def scale_lr(opt: torch.optim.Optimizer, factor: float) -> None:
    """Multiply every parameter group's learning rate by ``factor`` (a fault injected mid-run)."""
    for group in opt.param_groups:
        group["lr"] *= factor


def sgd_step(model: nn.Module, loss_fn: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
             g: torch.Generator, batch: int = 64) -> torch.Tensor:
    """One optimizer step on a batch of ``x``, ``y`` drawn with ``g``; returns the batch's loss."""
    idx = torch.randint(0, len(x), (batch,), generator=g)
    loss: torch.Tensor = loss_fn(model(x[idx]), y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def train(model: nn.Module, steps: int, *, seed: int = 0, loss_fn: nn.Module | None = None,
          lr: float = 0.1) -> list[torch.Tensor]:
    """Run ``steps`` SGD steps on fixed random data; returns each step's loss."""
    gen = torch.Generator().manual_seed(seed)
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        x = torch.randn(6, 4, generator=gen)
        y = torch.randint(0, 3, (6,), generator=gen)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses
