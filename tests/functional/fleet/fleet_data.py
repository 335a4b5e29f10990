"""The generated fleet the fleet tests share: 20 jobs x 2 nodes with known idle windows, triggers and stops,
written in Debugger's layout and appended to a fleet dataset."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from smx_debug import fleet
from smx_debug.data.system import system_metrics
from smx_debug.simulate.fleet import FleetSimulation, FleetSpec

SPEC = FleetSpec(jobs=20, nodes=2, minutes=30, interval_s=10.0, cpus=2)


def build(base: Path) -> tuple[FleetSimulation, Path, Path]:
    """(simulation, raw profiler output folder, fleet dataset root)."""
    sim = FleetSimulation(SPEC)
    raw, root = base / "raw", base / "fleet"
    sim.write_local(raw)
    for job in sim.jobs:
        fleet.append_profiler(root, job.name, raw / job.name)
        fleet.append_job(root, sim.describe(job), sim.tags(job))
    fleet.append_verdicts(root, sim.verdicts())
    return sim, raw, root


def device_minutes(sim: FleetSimulation, raw: Path) -> pd.DataFrame:
    """Independently of the dataset: every job's raw records, averaged per device and minute with pandas."""
    frames = []
    for job in sim.jobs:
        df = system_metrics(raw / job.name)
        df = df.assign(minute=df["timestamp"].dt.floor("min").dt.tz_localize(None), job=job.name,
                       instance_type=job.instance_type, team=job.team, gpus=job.gpus)
        frames.append(df.groupby(["job", "instance_type", "team", "gpus", "node", "name", "dimension", "minute"],
                                 observed=True)["value"].mean().reset_index())
    return pd.concat(frames, ignore_index=True)
