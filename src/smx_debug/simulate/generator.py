"""Generate realistic SageMaker Debugger profiler output, deterministically and fast.

Layout and record shapes follow real jobs (see tests/data/third_party/INDEX.md), relative to a job's
``profiler-output/`` folder:

- ``system/incremental/<YYYYMMDDHH>/<minute_epoch_s>.algo-<n>.json``: JSON-lines records
  ``{"Type", "Name", "Dimension", "Value", "NodeId", "Timestamp"}``: per sample ``cpu<i>`` and ``total``
  CPUUtilization, ``MemoryUsedPercent``, ``gpu<i>`` GPUUtilization and GPUMemoryUtilization; every
  ``io_every``-th sample IOPS, read/write throughput (type ``io``) and receive/transmit bytes (``network``).
- ``framework/pevents/<YYYYMMDDHH>/<end_us>_<pid>-algo-<n>_pythontimeline.json``: Chrome-trace JSON arrays
  with ``Step:ModeKeys.TRAIN`` X events (``args.step_num`` as a string, like smdebug writes it).

Every minute of every node is generated on its own from a seed derived from (seed, node, minute), so
writing minute by minute (the way a live job does) gives the same bytes as writing all at once.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import numpy as np
from botocore.config import Config

from smx_debug.simulate.spec import SimulationSpec

_IO_DIMS = (
    ("io", "nvme0n1", "IOPS"),
    ("io", "nvme0n1", "ReadThroughputInBytesPerSecond"),
    ("io", "nvme0n1", "WriteThroughputInBytesPerSecond"),
    ("network", "eth0", "ReceiveBytesPerSecond"),
    ("network", "eth0", "TransmitBytesPerSecond"),
)


@dataclass
class WriteResult:
    """What a write produced: file count, bytes, system records, and where the scenario starts."""

    files: int = 0
    bytes: int = 0
    records: int = 0
    keys: list[str] = field(default_factory=list)


_CHECKPOINT_S = 1.0


def _hour_folder(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y%m%d%H")


class Simulation:
    """Profiler output of one simulated job; see :class:`~smx_debug.simulate.SimulationSpec`."""

    def __init__(self, spec: SimulationSpec | None = None) -> None:
        self.spec = spec if spec is not None else SimulationSpec()
        s = self.spec
        self.start_s = s.job_start.timestamp()
        self.end_s = self.start_s + s.duration_s
        self._prefix = self._record_prefixes()
        self._steps: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._stall_from: dict[int, int] = {}

    # ----------------------------------------------------------------------------------------- layout
    def minutes(self) -> list[int]:
        """Epoch seconds of every minute the job spans, in order."""
        first = int(self.start_s // 60) * 60
        return list(range(first, math.ceil(self.end_s / 60) * 60, 60))

    def _record_prefixes(self) -> list[tuple[str, str, str]]:
        s = self.spec
        cols = [("cpu", f"cpu{i}", "CPUUtilization") for i in range(s.cpus)]
        cols.append(("cpu", "total", "CPUUtilization"))
        cols.append(("memory", "MemoryUsedPercent", "MemoryUtilization"))
        for i in range(s.gpus):
            cols.append(("gpu", f"gpu{i}", "GPUUtilization"))
            cols.append(("gpu", f"gpu{i}", "GPUMemoryUtilization"))
        cols.extend(_IO_DIMS)
        return cols

    # ----------------------------------------------------------------------------------------- values
    def _active(self, t: np.ndarray) -> np.ndarray:
        """1.0 inside the training loop, 0.0 during initialization and finalization."""
        s = self.spec
        return ((t >= s.initialization_s) & (t < s.duration_s - s.finalization_s)).astype(np.float64)

    def _after_onset(self, t: np.ndarray, node: int) -> np.ndarray:
        s = self.spec
        if s.scenario in ("healthy", "step_outlier"):
            return np.zeros_like(t, dtype=bool)
        return (t >= s.onset_s) & (self._active(t) > 0)

    def _system_values(self, node: int, minute: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(timestamps, values, mask) of shape (samples, columns) for one node-minute."""
        s = self.spec
        step = s.interval_ms / 1000.0
        k0 = max(0, math.ceil((minute - self.start_s) / step - 1e-9))
        k1 = math.ceil((min(minute + 60, self.end_s) - self.start_s) / step - 1e-9)
        k = np.arange(k0, max(k0, k1), dtype=np.int64)
        rng = np.random.default_rng([s.seed, node, minute])
        t = k * step  # seconds since job start
        n, c, g = len(k), s.cpus, s.gpus
        act = self._active(t)[:, None]
        bad = self._after_onset(t, node)[:, None]

        cpu = np.clip(rng.normal(12 + 23 * act, 8, (n, c)), 0, 100)
        gpu = np.clip(rng.normal(85 * act + 1, 5, (n, g)), 0, 100)
        gmem = np.clip(rng.normal(35 + 25 * act, 2, (n, g)), 0, 100)
        mem = np.clip(rng.normal(30 + 10 * act, 1, (n, 1)), 0, 100)
        io = np.abs(rng.normal([300, 2e7, 1e6, 5e7, 5e7], [50, 3e6, 2e5, 5e6, 5e6], (n, 5)))
        kind = s.scenario
        if kind == "cpu_bottleneck":
            cpu = np.where(bad, np.clip(rng.normal(96, 2, (n, c)), 0, 100), cpu)
            gpu = np.where(bad, np.clip(rng.normal(4, 2, (n, g)), 0, 100), gpu)
        elif kind == "io_bottleneck":
            gpu = np.where(bad, np.clip(rng.normal(6, 3, (n, g)), 0, 100), gpu)
            cpu = np.where(bad, np.clip(rng.normal(8, 3, (n, c)), 0, 100), cpu)
            io = np.where(bad, io * np.array([20.0, 8.0, 1.0, 1.0, 1.0]), io)
        elif kind == "low_gpu_utilization":
            gpu = np.where(bad, np.clip(rng.normal(8, 3, (n, g)), 0, 100), gpu)
        elif kind == "gpu_memory_increase":
            growth = np.clip((t - s.onset_s) / 60.0, 0, None)[:, None] * 1.5  # +1.5 points a minute
            gmem = np.where(bad, np.clip(gmem + growth, 0, 100), gmem)
        elif kind == "gpu_memory_jump":
            gmem = np.where(bad, np.clip(gmem + 30.0, 0, 100), gmem)  # one step of +30 points at the onset
        elif kind == "fluctuating_gpu":
            idle = (k % 10 < 2)[:, None]  # 20% of samples near zero, the rest busy: p95 high, p5 low
            gpu = np.where(bad & idle, np.clip(rng.normal(1, 1, (n, g)), 0, 100), gpu)
        elif kind == "dataloader_stall":
            idle = self._gpu_idle(node, t)[:, None]  # GPUs wait during dataloader stalls and checkpoints
            gpu = np.where(idle, np.clip(rng.normal(2, 1, (n, g)), 0, 100), gpu)
        elif kind == "load_imbalance":
            light = np.arange(g)[None, :] >= max(g // 2, 1)  # the second half of the GPUs gets little work
            gpu = np.where(bad & light, np.clip(rng.normal(15, 5, (n, g)), 0, 100), gpu)
        total = cpu.mean(axis=1, keepdims=True)
        values = np.hstack([cpu, total, mem, np.stack([gpu, gmem], axis=2).reshape(n, 2 * g), io])

        base = self.start_s + t + node * s.clock_offset_s
        # CPU and GPU samplers fire at slightly different moments, as in real files.
        offsets = np.concatenate([np.zeros(c + 2), np.full(2 * g, 0.0125), np.full(5, 0.0031)])
        ts = base[:, None] + offsets[None, :] + rng.uniform(0, 0.002, (n, 1))
        mask = np.ones(values.shape, dtype=bool)
        mask[:, c + 2 + 2 * g:] = (k % s.io_every == 0)[:, None]
        return ts, np.round(values, 2), mask

    def system_file(self, node: int, minute: int) -> tuple[str, bytes, int]:
        """(key, content, records) of node ``node`` (0-based) for ``minute`` (epoch s)."""
        name = f"algo-{node + 1}"
        ts, values, mask = self._system_values(node, minute)
        heads = [f'{{"Type": "{t}", "Name": "{n}", "Dimension": "{d}", "Value": ' for t, n, d in self._prefix]
        tail = f', "NodeId": "{name}", "Timestamp": '
        cols = np.broadcast_to(np.arange(values.shape[1]), values.shape)[mask].tolist()
        lines = [
            f"{heads[j]}{v}{tail}{t:.6f}}}\n"
            for j, v, t in zip(cols, values[mask].tolist(), ts[mask].tolist(), strict=True)
        ]
        key = f"system/incremental/{_hour_folder(minute)}/{minute}.{name}.json"
        return key, "".join(lines).encode(), len(lines)

    # ----------------------------------------------------------------------------------------- steps
    def steps(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        """(start_s, duration_s) of every training step of ``node``, seconds since job start."""
        if node in self._steps:
            return self._steps[node]
        s = self.spec
        rng = np.random.default_rng([s.seed, node, 1_000_003])
        loop_start, loop_end = s.initialization_s, s.duration_s - s.finalization_s
        n_max = int((loop_end - loop_start) / (s.step_s * 0.5)) + 2
        # Bounded jitter (+-2.5 sigma): a healthy job has no step above mean + 3 std, as StepOutlier expects.
        dur = s.step_s * (1.0 + np.clip(rng.normal(0.0, 0.03, n_max), -0.075, 0.075))
        gap = 0.001
        start = loop_start + np.concatenate([[0.0], np.cumsum(dur + gap)[:-1]])
        mult = {"cpu_bottleneck": 3.0, "io_bottleneck": 3.0, "low_gpu_utilization": 2.0}.get(s.scenario)
        if mult is not None or s.scenario == "step_outlier":
            i0 = int(np.searchsorted(start, s.onset_s))
            if mult is not None:
                dur[i0:] *= mult
            else:
                spikes = rng.random(n_max) < 0.01
                spikes[:i0] = False
                dur[spikes] *= 12.0
            start = loop_start + np.concatenate([[0.0], np.cumsum(dur + gap)[:-1]])
        if s.scenario == "dataloader_stall":
            i0 = self._stall_from[node] = int(np.searchsorted(start, s.onset_s))
            dur[i0::s.stall_every] += s.stall_s
            dur[s.checkpoint_every - 1::s.checkpoint_every] += _CHECKPOINT_S
            start = loop_start + np.concatenate([[0.0], np.cumsum(dur + gap)[:-1]])
        keep = start + dur <= loop_end
        self._steps[node] = (start[keep], dur[keep])
        return self._steps[node]

    def stall_steps(self, node: int) -> np.ndarray:
        """dataloader_stall: indices of the steps whose dataloader blocks ``stall_s`` (every n-th after onset)."""
        s = self.spec
        if s.scenario != "dataloader_stall":
            return np.zeros(0, dtype=np.int64)
        start, _ = self.steps(node)
        return np.arange(self._stall_from[node], len(start), s.stall_every, dtype=np.int64)

    def checkpoint_steps(self, node: int) -> np.ndarray:
        """dataloader_stall: indices of the steps ending in a 1 s checkpoint (a smaller, second cause of dips)."""
        if self.spec.scenario != "dataloader_stall":
            return np.zeros(0, dtype=np.int64)
        start, _ = self.steps(node)
        every = self.spec.checkpoint_every
        return np.arange(every - 1, len(start), every, dtype=np.int64)

    def _gpu_idle(self, node: int, t: np.ndarray) -> np.ndarray:
        """True where ``t`` (s since job start) falls in a dataloader stall or a checkpoint of ``node``."""
        start, dur = self.steps(node)
        st, ck = self.stall_steps(node), self.checkpoint_steps(node)
        lo = np.concatenate([start[st], start[ck] + dur[ck] - _CHECKPOINT_S])
        hi = np.concatenate([start[st] + self.spec.stall_s, start[ck] + dur[ck]])
        order = np.argsort(lo)
        lo, hi = lo[order], hi[order]
        i = np.searchsorted(lo, t, side="right") - 1
        return (i >= 0) & (t < hi[np.clip(i, 0, None)])

    def _phase_events(self, node: int, sel: np.ndarray, start: np.ndarray, dur: np.ndarray) -> list[dict[str, Any]]:
        """dataloader_stall: the phases inside each selected step (dataloader, forward, backward, checkpoint)."""
        stalls, ckpts = set(self.stall_steps(node).tolist()), set(self.checkpoint_steps(node).tolist())
        out: list[dict[str, Any]] = []
        for i in sel.tolist():
            a, d = float(start[i]), float(dur[i])
            load = self.spec.stall_s if i in stalls else 0.004
            tail = _CHECKPOINT_S if i in ckpts else 0.0
            compute = max(d - load - tail, 0.0)
            phases = [("DataLoaderIter.__next__", 2, a, load), ("forward", 3, a + load, 0.4 * compute),
                      ("backward", 3, a + load + 0.4 * compute, 0.6 * compute)]
            if tail:
                phases.append(("save_checkpoint", 3, a + d - tail, tail))
            out.extend({"name": name, "pid": p, "ph": "X", "ts": round(ts * 1e6), "dur": round(du * 1e6)}
                       for name, p, ts, du in phases)
        return out

    def timeline_file(self, node: int, minute: int) -> tuple[str, bytes] | None:
        """The python-timeline trace of ``node`` holding the steps that end in ``minute``, if any."""
        s = self.spec
        start, dur = self.steps(node)
        clock = self.start_s + node * s.clock_offset_s  # this node's clock at job start
        end_abs = clock + start + dur
        sel = np.nonzero((end_abs >= minute) & (end_abs < minute + 60))[0]
        if not len(sel):
            return None
        t0_us = round(clock * 1e6)
        pid = s.pid + node
        events: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": t0_us}},
            {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},
            {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Step:ModeKeys.TRAIN"}},
            {"name": "process_sort_index", "ph": "M", "pid": 1, "args": {"sort_index": 1}},
        ]
        ts_us = np.round(start[sel] * 1e6).astype(np.int64).tolist()
        dur_us = np.round(dur[sel] * 1e6).astype(np.int64).tolist()
        for i, a, d in zip(sel.tolist(), ts_us, dur_us, strict=True):
            events.append(
                {"name": "Step:ModeKeys.TRAIN", "pid": 1, "ph": "X", "ts": a, "dur": d,
                 "args": {"pid": pid, "step_num": str(i)}}
            )
        if s.scenario == "dataloader_stall":
            events[4:4] = [
                {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "DataLoader"}},
                {"name": "process_name", "ph": "M", "pid": 3, "args": {"name": "Forward/Backward"}},
            ]
            events.extend(self._phase_events(node, sel, start, dur))
        end_us = t0_us + ts_us[-1] + dur_us[-1]
        key = f"framework/pevents/{_hour_folder(end_us / 1e6)}/{end_us}_{pid}-algo-{node + 1}_pythontimeline.json"
        body = "[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n"
        return key, body.encode()

    # ----------------------------------------------------------------------------------------- output
    def files_for_minute(self, minute: int, *, framework: bool = True) -> Iterator[tuple[str, bytes, int]]:
        """Every file of ``minute`` across nodes: (key, content, system records)."""
        for node in range(self.spec.nodes):
            yield self.system_file(node, minute)
            if framework:
                tl = self.timeline_file(node, minute)
                if tl is not None:
                    yield tl[0], tl[1], 0

    def iter_files(
        self, minutes: list[int] | None = None, *, framework: bool = True
    ) -> Iterator[tuple[str, bytes, int]]:
        for minute in self.minutes() if minutes is None else minutes:
            yield from self.files_for_minute(minute, framework=framework)

    def write_local(
        self, directory: str | os.PathLike[str], minutes: list[int] | None = None, *, framework: bool = True
    ) -> WriteResult:
        """Write into ``directory`` (the job's ``profiler-output`` folder)."""
        root = Path(directory)
        result = WriteResult()
        for key, data, records in self.iter_files(minutes, framework=framework):
            path = root / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            result.files += 1
            result.bytes += len(data)
            result.records += records
            result.keys.append(key)
        return result

    def write_s3(
        self,
        bucket: str,
        prefix: str,
        minutes: list[int] | None = None,
        *,
        s3_client: Any = None,
        framework: bool = True,
        workers: int = 16,
    ) -> WriteResult:
        """Upload under ``s3://bucket/prefix`` (the job's ``profiler-output/`` prefix), in parallel."""
        s3 = s3_client if s3_client is not None else boto3.client(
            "s3", config=Config(retries={"mode": "standard"}, max_pool_connections=32)
        )
        base = prefix if not prefix or prefix.endswith("/") else prefix + "/"
        result = WriteResult()

        def put(item: tuple[str, bytes, int]) -> tuple[str, int, int]:
            key, data, records = item
            s3.put_object(Bucket=bucket, Key=base + key, Body=data)
            return key, len(data), records

        def record(done: tuple[str, int, int]) -> None:
            result.files += 1
            result.bytes += done[1]
            result.records += done[2]
            result.keys.append(done[0])

        with ThreadPoolExecutor(max_workers=workers) as pool:
            # Generation is lazy and at most 2*workers files are in flight: memory stays small for big jobs.
            pending: list[Future[tuple[str, int, int]]] = []
            for item in self.iter_files(minutes, framework=framework):
                pending.append(pool.submit(put, item))
                if len(pending) >= 2 * workers:
                    record(pending.pop(0).result())
            for fut in pending:
                record(fut.result())
        return result
