"""The typed spec of a simulated training job: size, timing and one scenario with its onset."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ScenarioKind = Literal[
    "healthy", "cpu_bottleneck", "io_bottleneck", "low_gpu_utilization", "gpu_memory_increase", "step_outlier",
    "fluctuating_gpu", "load_imbalance", "gpu_memory_jump", "dataloader_stall",
]
SCENARIOS: tuple[ScenarioKind, ...] = (
    "healthy",
    "cpu_bottleneck",
    "io_bottleneck",
    "low_gpu_utilization",
    "gpu_memory_increase",
    "step_outlier",
    "fluctuating_gpu",
    "load_imbalance",
    "gpu_memory_jump",
    "dataloader_stall",
)


class SimulationSpec(BaseModel):
    """A simulated job. Defaults: one 96-vCPU, 8-GPU node for an hour at Debugger's default 500 ms.

    ``onset_s`` is when the scenario's problem starts, in seconds after ``job_start``; the generator records
    it (``onset``) so a test or the demo can measure how long detection took.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    scenario: ScenarioKind = "healthy"
    onset_s: float = Field(default=600.0, ge=0)
    job_start: datetime = datetime(2026, 1, 1, tzinfo=UTC)
    duration_s: float = Field(default=3600.0, gt=0)
    nodes: int = Field(default=1, ge=1, le=256)
    cpus: int = Field(default=96, ge=1, le=1024)
    gpus: int = Field(default=8, ge=0, le=64)
    interval_ms: int = Field(default=500, ge=100, le=60_000)
    io_every: int = Field(default=10, ge=1, description="emit IO and network records every n-th sample")
    seed: int = 0
    initialization_s: float = Field(default=60.0, ge=0)
    finalization_s: float = Field(default=30.0, ge=0)
    step_s: float = Field(default=0.25, gt=0)
    pid: int = Field(default=181, ge=1)
    clock_offset_s: float = Field(default=0.0, ge=0, le=60, description="node n's clock runs n * this ahead")
    stall_every: int = Field(default=40, ge=2, description="dataloader_stall: every n-th step after onset stalls")
    stall_s: float = Field(default=1.5, gt=0, description="dataloader_stall: seconds the dataloader blocks")
    checkpoint_every: int = Field(default=500, ge=2, description="dataloader_stall: a 1 s checkpoint every n steps")

    @model_validator(mode="after")
    def _check(self) -> SimulationSpec:
        if self.job_start.tzinfo is None:
            raise ValueError(f"job_start must be timezone-aware (UTC), got {self.job_start!r}")
        if self.initialization_s + self.finalization_s >= self.duration_s:
            raise ValueError(
                f"initialization_s + finalization_s ({self.initialization_s} + {self.finalization_s}) "
                f"must be shorter than duration_s ({self.duration_s})"
            )
        return self

    @property
    def onset(self) -> datetime:
        """When the scenario's problem starts (UTC)."""
        return self.job_start + timedelta(seconds=self.onset_s)

    @property
    def job_end(self) -> datetime:
        return self.job_start + timedelta(seconds=self.duration_s)

    @property
    def node_names(self) -> list[str]:
        return [f"algo-{i + 1}" for i in range(self.nodes)]

    @property
    def records_per_node_hour(self) -> float:
        per_sample = self.cpus + 2 + 2 * self.gpus + 5 / self.io_every
        return per_sample * 3_600_000 / self.interval_ms
