"""The report's single source of truth: every number shown is computed here once, from the evaluation result.

The renderer only formats a :class:`ReportModel`; nothing downstream recounts. The step table's outliers are
the StepOutlier result's own ``step_details`` (with its typed ``stddev``), the verdict's rules and times are
the same rows as the rule table, and every cost figure derives from one :class:`CostEstimate`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from smx_debug.analysis.dips import BETWEEN_STEPS, IN_STEP, NO_TRACE, dip_causes, gpu_dips
from smx_debug.analysis.loop import dataloader_share, slow_loading_steps, slowest_operators, step_loading
from smx_debug.data.frames import ns
from smx_debug.evaluate import JobData, RuleResult
from smx_debug.htmlreport.advice import ADVICE, DESCRIPTION
from smx_debug.htmlreport.cost import CostEstimate
from smx_debug.htmlreport.fmt import duration, money, utc
from smx_debug.htmlreport.outcome import JobOutcome

_SCALAR_RULES = {"LossNotDecreasing", "Overfit", "Overtraining", "StalledTrainingRule"}


@dataclass(frozen=True)
class TensorInput:
    """The job's tensors (its trial): where they are, which result configurations were judged on them, and each
    saved step's wall time (global step -> epoch ns), which places a tensor rule's trigger step in time."""

    path: str
    configurations: frozenset[str]
    step_times: Mapping[int, int] = field(default_factory=dict)
    steps: int = 0
    tensors: int = 0


@dataclass
class ReportInput:
    """Everything the report shows. ``results`` are keyed by rule configuration name (profiler, scalar and, with
    ``tensors``, tensor rules)."""

    job_name: str
    data: JobData
    results: Mapping[str, RuleResult]
    cost: CostEstimate | None = None
    source: str = ""
    skipped: Mapping[str, int] = field(default_factory=dict)
    events: pd.DataFrame | None = None
    outcome: JobOutcome = field(default_factory=JobOutcome)
    tensors: TensorInput | None = None


@dataclass(frozen=True)
class RuleRow:
    """One rule configuration as the report shows it."""

    name: str
    rule: str
    triggered: bool
    trigger_count: int
    violations: int
    datapoints: int
    first_trigger_ns: int | None
    trigger_source: str
    why: str | None
    advice: str | None
    description: str
    parameters: Mapping[str, Any]

    @property
    def has_data(self) -> bool:
        """False when the rule saw no datapoint (OverallSystemUsage reports none by design)."""
        return self.triggered or self.datapoints > 0 or self.rule == "OverallSystemUsage"


@dataclass(frozen=True)
class StepRow:
    """Step durations of one node and phase; ``outliers`` from the StepOutlier result when there is one."""

    node: str
    phase: str
    steps: int
    mean_s: float
    p50_s: float
    p95_s: float
    max_s: float
    threshold_s: float
    outliers: int
    outlier_steps: tuple[int, ...]


@dataclass(frozen=True)
class TensorRow:
    """A fired tensor rule as its chart shows it: the tensor, its statistic per saved step, the bounds outside which
    the rule fires, and the step it fired first."""

    name: str
    rule: str
    tensor: str
    statistic: str
    steps: tuple[int, ...]
    values: tuple[float, ...]
    lower: float | None
    upper: float | None
    trigger_step: int | None
    why: str


@dataclass(frozen=True)
class Mark:
    """A moment marked on every timeline."""

    kind: str  # onset, trigger, stop
    label: str
    time_ns: int


@dataclass(frozen=True)
class ReportHeader:
    """The header: healthy or not, what fired first and when, the stop, and the money."""

    healthy: bool | None  # None: no rule had data to judge
    headline: str
    details: tuple[str, ...]
    cost_so_far: float | None
    cost_after_trigger: float | None
    saved: float | None
    saved_basis: str


Series = tuple[np.ndarray, np.ndarray]
"""Times (epoch ns) and values of one line."""

DeviceSeries = tuple[str, np.ndarray, np.ndarray]
"""One device's line: its name, times (epoch ns) and values."""


@dataclass(frozen=True)
class Timelines:
    """The timeline series, per node (node -> times and values); devices per node for the per-GPU charts."""

    gpu: Mapping[str, Series]  # mean of the node's GPUs
    gpu_memory: Mapping[str, Series]
    cpu: Mapping[str, Series]  # mean of the node's cores
    io: Mapping[str, Series]  # read + write bytes/s
    network: Mapping[str, Series]  # receive + transmit bytes/s
    steps: Mapping[str, Series]  # each step a plateau at its duration from its start to its end
    gpu_devices: Mapping[str, tuple[DeviceSeries, ...]]
    gpu_memory_devices: Mapping[str, tuple[DeviceSeries, ...]]


@dataclass(frozen=True)
class UsageRow:
    """One node and metric of the OverallSystemUsage result: max, p99, p95, p50 and min, in ``unit``."""

    node: str
    metric: str
    unit: str
    values: tuple[float, float, float, float, float]


@dataclass(frozen=True)
class JobFacts:
    """What the header and the comparison say of the job and its data."""

    job_name: str
    source: str
    nodes: tuple[str, ...]
    step_count: int
    step_median_s: float | None
    has_metrics: bool  # system metrics or steps to draw
    has_gpu: bool
    gpu_mean: float | None  # over every GPU sample
    gpu_p95: float | None
    cpu_mean: float | None  # over every core sample
    gpu_per_minute: Series  # minutes since the start of the data, mean GPU utilization of all nodes
    skipped: Mapping[str, int]


@dataclass(frozen=True)
class ReportModel:
    """Everything the renderer formats: it reads these fields only, never ``inp`` (the inputs the model was built
    from, kept for callers)."""

    inp: ReportInput
    span: tuple[int, int] | None
    start_ns: int | None
    end_ns: int | None
    rows: tuple[RuleRow, ...]
    step_rows: tuple[StepRow, ...]
    step_rule: str | None
    marks: tuple[Mark, ...]
    verdict: ReportHeader
    dips: pd.DataFrame
    causes: pd.DataFrame
    loader_share: pd.DataFrame
    slow_loads: pd.DataFrame
    operators: pd.DataFrame
    facts: JobFacts
    outcome: JobOutcome
    timelines: Timelines
    usage: tuple[UsageRow, ...]
    cost: CostEstimate | None
    tensors: TensorInput | None
    tensor_rows: tuple[TensorRow, ...] = ()

    @property
    def fired(self) -> list[RuleRow]:
        """Fired rows, earliest first trigger first (unknown times last)."""
        rows = [r for r in self.rows if r.triggered]
        return sorted(rows, key=lambda r: (r.first_trigger_ns is None, r.first_trigger_ns or 0, r.name))


def _span(data: JobData, tensors: TensorInput | None = None) -> tuple[int, int] | None:
    pts: list[int] = []
    if data.system_span_ns is not None:
        pts.extend(data.system_span_ns)
    if not data.steps.empty:
        pts += [int(ns(data.steps["start"]).min()), int(ns(data.steps["end"]).max())]
    if tensors is not None and tensors.step_times:
        pts += [min(tensors.step_times.values()), max(tensors.step_times.values())]
    return (min(pts), max(pts)) if pts else None


def _trigger_time(r: RuleResult, data: JobData, span: tuple[int, int] | None,
                  outcome: JobOutcome, tensors: TensorInput | None = None) -> tuple[int | None, str]:
    name = r.configuration_name or r.rule
    if name in outcome.triggers:
        return int(outcome.triggers[name]), "IssuesFound time in DescribeTrainingJob"
    k = r.trigger_step
    if tensors is not None and name in tensors.configurations:
        if k is not None and k in tensors.step_times:
            return int(tensors.step_times[k]), f"wall time of saved step {k}"
        return None, f"step {k} (time not known)"
    if k is None or span is None:
        return None, "time not known"
    if r.rule in _SCALAR_RULES:
        steps = data.steps[data.steps["step"] >= k]
        if len(steps):
            return int(ns(steps["end"]).min()), f"end of training step {k}"
        sc = data.scalars[data.scalars["step"] >= k]
        if len(sc):
            return int(ns(sc["timestamp"]).min()), f"first value at step {k}"
        return None, f"step {k} (time not known)"
    interval = r.parameters.get("scan_interval_us")
    if interval:
        return span[0] + int(k) * int(interval) * 1000, f"scan evaluation {k} (every {duration(int(interval) / 1e6)})"
    return None, "time not known"


def _rows(inp: ReportInput, span: tuple[int, int] | None) -> tuple[RuleRow, ...]:
    rows = []
    for name, r in inp.results.items():
        t, source = _trigger_time(r, inp.data, span, inp.outcome, inp.tensors) if r.triggered else (None, "")
        rows.append(RuleRow(
            name=name, rule=r.rule, triggered=r.triggered, trigger_count=r.rule_triggered, violations=r.violations,
            datapoints=r.datapoints, first_trigger_ns=t, trigger_source=source,
            why=(r.message or "the rule's condition was met") if r.triggered else None,
            advice=ADVICE.get(r.rule) if r.triggered else None, description=DESCRIPTION.get(r.rule, ""),
            parameters=dict(r.parameters),
        ))
    return tuple(rows)


def _step_rows(inp: ReportInput) -> tuple[tuple[StepRow, ...], str | None]:
    steps = inp.data.steps
    if steps.empty:
        return (), None
    rule = next((r for r in inp.results.values() if r.rule == "StepOutlier"), None)
    k = float(rule.parameters.get("stddev", 3.0)) if rule is not None else 3.0
    per_node: Mapping[str, Any] = (rule.details.get("step_details") or {}) if rule is not None else {}
    rows = []
    for (node, mode), grp in steps.groupby(["node", "mode"], sort=True, observed=True):
        d = grp["duration"].to_numpy(dtype=float)
        mean, std = float(d.mean()), float(d.std())
        q = np.quantile(d, [0.5, 0.95])
        entry = per_node.get(str(node))
        phase = f"Step:ModeKeys.{mode}"
        if rule is not None and entry is not None and entry.get("phase", phase) == phase:
            outliers = int(entry.get("number_of_outliers", 0))
            numbers = tuple(int(x) for x in entry.get("step_numbers", []))
        elif rule is not None:  # the rule did not look at this phase (mode filter or too few steps)
            outliers, numbers = 0, ()
        else:
            mask = d > mean + k * std
            outliers, numbers = int(mask.sum()), tuple(int(x) for x in grp["step"].to_numpy()[mask])
        rows.append(StepRow(node=str(node), phase=str(mode), steps=len(d), mean_s=mean, p50_s=float(q[0]),
                            p95_s=float(q[1]), max_s=float(d.max()), threshold_s=mean + k * std, outliers=outliers,
                            outlier_steps=numbers))
    return tuple(rows), (rule.configuration_name or rule.rule) if rule is not None else None


def _verdict(inp: ReportInput, rows: tuple[RuleRow, ...], start: int | None, end: int | None,
             note: str | None, causes: pd.DataFrame) -> ReportHeader:
    fired = sorted([r for r in rows if r.triggered],
                   key=lambda r: (r.first_trigger_ns is None, r.first_trigger_ns or 0, r.name))
    out = inp.outcome
    details: list[str] = []
    if not fired:
        judged = [r for r in rows if r.has_data]
        blind = [r.name for r in rows if not r.has_data]
        span = f" over {duration((end - start) / 1e9)}" if start is not None and end is not None else ""
        if not judged:
            headline = f"No verdict: none of the {len(rows)} rules had data to judge{span}."
        else:
            headline = f"Healthy: none of the {len(judged)} rules with data fired{span}."
            if blind:
                headline += f" {len(blind)} had no data ({', '.join(blind)})."
    else:
        first = fired[0]
        when = ""
        if first.first_trigger_ns is not None and start is not None:
            when = f" at {utc(first.first_trigger_ns)} ({duration((first.first_trigger_ns - start) / 1e9)} into the job)"
        others = ", ".join(r.name for r in fired[1:4]) + (f" and {len(fired) - 4} more" if len(fired) > 4 else "")
        headline = f"Not healthy: {first.name} fired first{when}" + (f"; then {others}" if others else "") + "."
    if out.stopped:
        stop = f"Stopped at {utc(out.stop_ns)}" if out.stop_ns is not None else f"Status {out.status}"
        if out.stopped_by:
            stop += f" by {out.stopped_by}"
        if out.stop_rule:
            stop += f" for {out.stop_rule}"
        if fired and fired[0].first_trigger_ns is not None and out.stop_ns is not None:
            stop += f", {duration((out.stop_ns - fired[0].first_trigger_ns) / 1e9)} after the first trigger"
        details.append(stop + ".")
    elif out.status:
        details.append(f"Job status: {out.status}; it was not stopped.")
    else:
        details.append("Not stopped as far as the data shows (no DescribeTrainingJob or ledger was read).")
    if len(causes):
        top = causes.iloc[0]
        lost = (f"{duration(float(top['gpu_seconds_lost']))} of GPU time in {int(top['dips']):,} dips, "
                f"{float(top['share_percent']):.0f}% of all GPU time lost in dips")
        if top["cause"] == IN_STEP:
            details.append(f"The GPUs lost most time inside training steps ({lost}); the trace has no finer events "
                           "to say why (profile the framework: dataloader, forward/backward).")
        elif top["cause"] in (NO_TRACE, BETWEEN_STEPS):
            details.append(f"The GPUs lost most time {top['cause']} ({lost}).")
        else:
            event = f" ({top['cause_event']})" if top["cause_event"] else ""
            details.append(f"The GPUs lost most time to {top['cause']}{event}: {lost}.")
    cost = inp.cost
    so_far = after = saved = None
    basis = ""
    if cost is not None and cost.price_per_hour is not None and start is not None and end is not None:
        rate = cost.instance_count * cost.price_per_hour / 3600.0
        so_far = rate * max(end - start, 0) / 1e9
        if fired and fired[0].first_trigger_ns is not None:
            after = rate * max(end - fired[0].first_trigger_ns, 0) / 1e9
        if out.stopped and out.stop_ns is not None and out.max_runtime_s:
            saved = rate * max(start + out.max_runtime_s * 1_000_000_000 - out.stop_ns, 0) / 1e9
            basis = f"the rest of MaxRuntimeInSeconds ({duration(out.max_runtime_s)})"
        elif out.stopped:
            basis = "unknown: no MaxRuntimeInSeconds to compare with"
        money_line = f"Cost so far {money(so_far)}"
        if after is not None:
            money_line += f"; {money(after)} of it after the first trigger"
        if saved is not None:
            money_line += f"; stopping saved up to {money(saved)} ({basis})"
        details.append(money_line + ".")
    if note:
        details.append(note)
    healthy = (None if not any(r.has_data for r in rows) else True) if not fired else False
    return ReportHeader(healthy=healthy, headline=headline, details=tuple(details), cost_so_far=so_far,
                   cost_after_trigger=after, saved=saved, saved_basis=basis)


CLOCK_TOLERANCE_NS = 180 * 1_000_000_000


def _on_data_clock(out: JobOutcome, span: tuple[int, int] | None) -> tuple[JobOutcome, str | None]:
    """``out`` if its times agree with the data's clock; else its times replaced by the data's, and why.

    A simulated job (the demo) writes data on a compressed job clock while SageMaker and the ledger record
    wall-clock times: the timelines and costs then follow the data, the one clock every chart shares.
    """
    times = [t for t in (out.start_ns, out.stop_ns, out.end_ns, *out.triggers.values()) if t is not None]
    if span is None or all(span[0] - CLOCK_TOLERANCE_NS <= t <= span[1] + CLOCK_TOLERANCE_NS for t in times):
        return out, None
    note = ("DescribeTrainingJob/ledger times do not match the data's clock (more than 3 min outside it); "
            "times and costs follow the data" + (", the stop is its last sample." if out.stopped else "."))
    return replace(out, start_ns=None, end_ns=None, stop_ns=span[1] if out.stopped else None, triggers={}), note


def _tensor_rows(inp: ReportInput, rows: tuple[RuleRow, ...]) -> tuple[TensorRow, ...]:
    """The fired tensor rules with a chart, in the order they fired."""
    if inp.tensors is None:
        return ()
    out = []
    for row in rows:
        r = inp.results[row.name]
        if row.triggered and row.name in inp.tensors.configurations and r.trace is not None:
            tr = r.trace
            out.append(TensorRow(name=row.name, rule=row.rule, tensor=tr.tensor, statistic=tr.statistic,
                                 steps=tr.steps, values=tr.values, lower=tr.lower, upper=tr.upper,
                                 trigger_step=r.trigger_step, why=row.why or ""))
    return tuple(sorted(out, key=lambda t: (t.trigger_step is None, t.trigger_step or 0, t.name)))


def _node_mean(data: JobData, dim: str) -> dict[str, Series]:
    return {node: (ts, total / max(n, 1)) for node, (ts, total, n) in data.totals(dim).items()}


def _node_sum(data: JobData, dims: Iterable[str]) -> dict[str, Series]:
    out: dict[str, Series] = {}
    for dim in dims:
        for node, (ts, total, _) in data.totals(dim).items():
            if node in out:  # different dimensions share the snapshot grid of the node
                pts, ptot = out[node]
                merged = pd.Series(ptot, index=pts).add(pd.Series(total, index=ts), fill_value=0).sort_index()
                out[node] = (merged.index.to_numpy(), merged.to_numpy())
            else:
                out[node] = (ts, total)
    return out


def _step_series(data: JobData) -> dict[str, Series]:
    """Per node, each step as a plateau at its duration from its start to its end (a 9 s step spans 9 s)."""
    out = {}
    for node, grp in data.steps.groupby("node", sort=True, observed=True):
        grp = grp.sort_values("start", kind="stable")
        d = grp["duration"].to_numpy(dtype=float)
        out[str(node)] = (np.column_stack([ns(grp["start"]), ns(grp["end"])]).ravel(), np.repeat(d, 2))
    return out


def _devices(data: JobData, dim: str) -> dict[str, tuple[DeviceSeries, ...]]:
    out: dict[str, list[DeviceSeries]] = {}
    for s in data.series(dim):
        out.setdefault(s.node, []).append((s.name, s.ts, s.values))
    return {node: tuple(devices) for node, devices in out.items()}


def _timelines(data: JobData) -> Timelines:
    return Timelines(
        gpu=_node_mean(data, "GPUUtilization"), gpu_memory=_node_mean(data, "GPUMemoryUtilization"),
        cpu=_node_mean(data, "CPUUtilization"),
        io=_node_sum(data, ("ReadThroughputInBytesPerSecond", "WriteThroughputInBytesPerSecond")),
        network=_node_sum(data, ("ReceiveBytesPerSecond", "TransmitBytesPerSecond")), steps=_step_series(data),
        gpu_devices=_devices(data, "GPUUtilization"), gpu_memory_devices=_devices(data, "GPUMemoryUtilization"),
    )


def _per_minute(gpu: Mapping[str, Series], span: tuple[int, int] | None) -> Series:
    """Mean GPU utilization over all nodes, per minute since the start of the data."""
    if not gpu or span is None:
        return np.zeros(0), np.zeros(0)
    ts = np.concatenate([t for t, _ in gpu.values()])
    vals = np.concatenate([v for _, v in gpu.values()])
    minute = ((ts - span[0]) // 60_000_000_000).astype(np.int64)
    cnt = np.bincount(minute)
    keep = cnt > 0
    return np.flatnonzero(keep).astype(float), np.bincount(minute, weights=vals)[keep] / cnt[keep]


def _all_values(data: JobData, dim: str) -> np.ndarray:
    values = [s.values for s in data.series(dim)]
    return np.concatenate(values) if values else np.zeros(0)


def _facts(inp: ReportInput, timelines: Timelines, span: tuple[int, int] | None) -> JobFacts:
    data = inp.data
    gpu, cpu = _all_values(data, "GPUUtilization"), _all_values(data, "CPUUtilization")
    steps = data.steps["duration"].to_numpy(dtype=float)
    return JobFacts(
        job_name=inp.job_name, source=inp.source, nodes=tuple(data.nodes), step_count=len(data.steps),
        step_median_s=float(np.median(steps)) if len(steps) else None,
        has_metrics=not (data.system.empty and data.steps.empty), has_gpu=bool(timelines.gpu),
        gpu_mean=float(gpu.mean()) if len(gpu) else None,
        gpu_p95=float(np.quantile(gpu, 0.95)) if len(gpu) else None,
        cpu_mean=float(cpu.mean()) if len(cpu) else None,
        gpu_per_minute=_per_minute(timelines.gpu, span), skipped=dict(inp.skipped),
    )


_USAGE_UNITS = {"GPU": "%", "CPU": "%", "GPU memory": "%", "CPU memory": "%", "I/O": "%", "Network": "MB/s"}


def _usage(results: Mapping[str, RuleResult]) -> tuple[UsageRow, ...]:
    """The OverallSystemUsage result's statistics per metric and node (none when it was not evaluated)."""
    res = next((r for r in results.values() if r.rule == "OverallSystemUsage"), None)
    if res is None:
        return ()
    rows = []
    for metric, per_node in res.details.items():
        for node, st in sorted(per_node.items()):
            mx, p99, p95, p50, mn = (float(st[k]) for k in ("max", "p99", "p95", "p50", "min"))
            rows.append(UsageRow(node=node, metric=metric, unit=_USAGE_UNITS.get(metric, ""),
                                 values=(mx, p99, p95, p50, mn)))
    return tuple(rows)


def build_model(inp: ReportInput) -> ReportModel:
    """Compute every figure of the report once."""
    span = _span(inp.data, inp.tensors)
    out, clock_note = _on_data_clock(inp.outcome, span)
    if clock_note is not None:
        inp = replace(inp, outcome=out)
    start = out.start_ns if out.start_ns is not None else span[0] if span else None
    end = out.stop_ns if out.stop_ns is not None else out.end_ns if out.end_ns is not None else span[1] if span else None
    rows = _rows(inp, span)
    step_rows, step_rule = _step_rows(inp)
    marks: list[Mark] = []
    if out.onset_ns is not None:
        marks.append(Mark("onset", "onset", out.onset_ns))
    fired = sorted([r for r in rows if r.triggered and r.first_trigger_ns is not None],
                   key=lambda r: r.first_trigger_ns or 0)
    if fired and fired[0].first_trigger_ns is not None:
        marks.append(Mark("trigger", f"first trigger: {fired[0].name}", fired[0].first_trigger_ns))
    if out.stop_ns is not None:
        marks.append(Mark("stop", "stop", out.stop_ns))
    events = inp.events
    dips = gpu_dips(inp.data, events)
    causes = dip_causes(dips)
    has_events = events is not None and len(events) > 0
    empty = pd.DataFrame()
    timelines = _timelines(inp.data)
    per_step = step_loading(events, inp.data.steps) if events is not None and has_events else None
    return ReportModel(
        inp=inp, span=span, start_ns=start, end_ns=end, rows=rows, step_rows=step_rows, step_rule=step_rule,
        marks=tuple(marks), verdict=_verdict(inp, rows, start, end, clock_note, causes), dips=dips, causes=causes,
        loader_share=dataloader_share(events, inp.data.steps, per_step=per_step)
        if per_step is not None and events is not None else empty,
        slow_loads=slow_loading_steps(events, inp.data.steps, per_step=per_step)
        if per_step is not None and events is not None else empty,
        operators=slowest_operators(events) if has_events and events is not None else empty,
        facts=_facts(inp, timelines, span), outcome=out, timelines=timelines, usage=_usage(inp.results),
        cost=inp.cost, tensors=inp.tensors, tensor_rows=_tensor_rows(inp, rows),
    )
