"""A documented generator of realistic SageMaker Debugger profiler output (system metrics and step timelines).

Used by the reports benchmark, the rule-evaluation benchmark and the end-to-end demo. Deterministic for a
given :class:`SimulationSpec` (seeded numpy) and vectorised: one 96-vCPU, 8-GPU node-hour in a few seconds.
"""

from __future__ import annotations

from smx_debug.simulate.generator import Simulation, WriteResult
from smx_debug.simulate.spec import SCENARIOS, ScenarioKind, SimulationSpec

__all__ = ["SCENARIOS", "ScenarioKind", "Simulation", "SimulationSpec", "WriteResult"]
