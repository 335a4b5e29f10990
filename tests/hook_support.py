"""Small models and a training loop for the hook's tests (tests/unit/hook, tests/functional/hook, bench)."""

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
