"""System-metric profiler rules: GPU utilization, GPU memory, batch size, load balancing, bottlenecks, usage.

Each evaluator follows the semantics of the Debugger rule it is named after (the docstring quotes the
documented definition) and reproduces the rule job's schedule with :mod:`smx_debug.evaluate.scan`.
Counting follows Debugger's (its 2020 code, confirmed by real output; docs/rules.md): each rule's docstring
says what one unit of ``RuleTriggered`` is (a scan, a GPU at a scan, a datapoint, a pair of GPUs at a scan).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from smx_debug.data.frames import JobData, Series
from smx_debug.evaluate.result import RuleResult, encode_parameters
from smx_debug.evaluate.scan import boundaries, counts_before, interval_of, window_quantiles
from smx_debug.rules.registry import RuleParams


def _bounds(data: JobData, params: RuleParams) -> np.ndarray:
    span = data.system_span_ns
    assert span is not None  # callers return early without system metrics
    return boundaries(span[0], span[1], params.scan_interval_us)


def _pick(params: RuleParams, *keys: str) -> str:
    return encode_parameters({k: getattr(params, k) for k in keys})


def _join(reasons: list[str], limit: int = 4) -> str:
    more = f"; and {len(reasons) - limit} more" if len(reasons) > limit else ""
    return "; ".join(reasons[:limit]) + more


def _counted(rule: str, count: int, details: dict[str, Any], datapoints: int, rp: str,
             trigger_step: int | None, reasons: list[str]) -> RuleResult:
    """A result whose every violation counts once in both RuleTriggered and Violations (Debugger's counting)."""
    return RuleResult(rule=rule, rule_triggered=count, violations=count, details=details, datapoints=datapoints,
                      rule_parameters=rp, trigger_step=trigger_step, message=_join(reasons))


def _first_step(hits: np.ndarray) -> int | None:
    idx = np.flatnonzero(hits)
    return int(idx[0]) + 1 if len(idx) else None


def _stats(values: np.ndarray) -> dict[str, float]:
    q = np.quantile(values, [0.25, 0.5, 0.75, 0.95])
    iqr = q[2] - q[0]
    return {
        "p25": float(q[0]),
        "p50": float(q[1]),
        "p75": float(q[2]),
        "p95": float(q[3]),
        "upper": float(min(q[2] + 1.5 * iqr, values.max())),
        "lower": float(max(q[0] - 1.5 * iqr, values.min())),
    }


def _scan_start_us(bounds: np.ndarray, k: int, interval_us: int) -> int:
    """Start of 0-based scan ``k`` in epoch microseconds (Debugger's ``last_timestamp``)."""
    return int(bounds[k] // 1000) - interval_us


def low_gpu_utilization(data: JobData, params: RuleParams) -> RuleResult:
    """LowGPUUtilization: per GPU on each node, low or fluctuating utilization.

    Debugger: "Rule returns True if 95th quantile is below threshold_p95 which indicates
    under-utilization. Rule returns true if 95th quantile is above threshold_p95 and 5th quantile is
    below threshold_p5 which indicates fluctuations." Quantiles are over the last ``window`` values,
    and only once a GPU has more than ``patience`` values. Each scan adds one to RuleTriggered and
    Violations for every violating GPU (the 2020 implementation, and real Debugger output: 464 over
    about 240 scans of two GPUs). Details per GPU hold the box-plot statistics of the GPU's last
    violating scan, and ``last_timestamp`` the start (epoch us) of the last violating scan.
    """
    rp = _pick(params, "threshold_p95", "threshold_p5", "window", "patience")
    series = data.series("GPUUtilization")
    if not series:
        return RuleResult(rule="LowGPUUtilization", rule_parameters=rp)
    bounds = _bounds(data, params)
    interval = params.scan_interval_us
    th95, th5 = params.threshold_p95, params.threshold_p5
    hits = np.zeros(len(bounds), dtype=bool)
    count = 0
    details: dict[str, Any] = {}
    reasons: list[str] = []
    for s in series:
        n = counts_before(s.ts, bounds)
        ok = np.flatnonzero(n > params.patience)
        if not len(ok):
            continue
        p95, p5 = window_quantiles(s.values, n[ok], params.window, [0.95, 0.05])
        low = p95 < th95
        viol = low | ((p95 > th95) & (p5 < th5))
        if not viol.any():
            continue
        count += int(viol.sum())
        hits[ok[viol]] = True
        j = int(np.flatnonzero(viol)[-1])
        seen = s.values[: n[ok[j]]]
        details.setdefault(s.node, {})[s.name] = {
            "gpu_max": float(seen.max()), "gpu_95": float(p95[j]), "gpu_5": float(p5[j]), **_stats(seen)
        }
        kind = "under-utilized" if low[j] else "fluctuating"
        reasons.append(f"{s.node}/{s.name} {kind}: p95 {p95[j]:.0f}%, p5 {p5[j]:.0f}%")
    if count:
        details["last_timestamp"] = _scan_start_us(bounds, int(np.flatnonzero(hits)[-1]), interval)
    # datapoints, as Debugger: the count of the GPU it read last
    return _counted("LowGPUUtilization", count, details, len(series[-1].values), rp, _first_step(hits), reasons)


def gpu_memory_increase(data: JobData, params: RuleParams) -> RuleResult:
    """GPUMemoryIncrease: a large increase of the moving average of GPU memory.

    Debugger: "The rule computes the moving average of continous datapoints and compares it against
    the moving average of previous iteration"; with ``v`` a GPU's values so far, each new value with
    more than ``window + 1`` and more than ``patience`` values is a violation when
    ``mean(v[-window:]) - mean(v[-window-1:-2]) > increase`` (the 2020 implementation's formula). Every
    violating datapoint adds one to RuleTriggered and Violations (real Debugger output: 11,467 over
    about 240 scans). Details per GPU describe its last violation; ``last_timestamp`` is the start
    (epoch us) of the scan that read the last violation.
    """
    rp = _pick(params, "increase", "patience", "window")
    series = data.series("GPUMemoryUtilization")
    if not series:
        return RuleResult(rule="GPUMemoryIncrease", rule_parameters=rp)
    bounds = _bounds(data, params)
    w, inc = params.window, params.increase
    first_scan: int | None = None
    last_scan = -1
    count = 0
    details: dict[str, Any] = {}
    reasons: list[str] = []
    for s in series:
        v = s.values
        if len(v) <= w + 1:
            continue
        cs = np.concatenate([[0.0], np.cumsum(v)])
        i = np.arange(w + 1, len(v))  # index of the newest value; len(values) = i + 1 > w + 1
        cur = (cs[i + 1] - cs[i + 1 - w]) / w  # mean(v[i-w+1 : i+1])
        prev = (cs[i - 1] - cs[i - w]) / (w - 1) if w > 1 else np.full(len(i), np.nan)  # mean(v[i-w : i-1])
        diff = cur - prev
        viol = (diff > inc) & (i + 1 > params.patience)
        if not viol.any():
            continue
        at = i[viol]
        scans = interval_of(s.ts[at], bounds) - 1  # 0-based scan reading each violating value
        count += len(at)
        first_scan = int(scans[0]) if first_scan is None else min(first_scan, int(scans[0]))
        last_scan = max(last_scan, int(scans[-1]))
        seen = v[: at[-1] + 1]
        q05 = float(np.quantile(seen, 0.05))
        details.setdefault(s.node, {})[s.name] = {
            "increase": float(diff[viol][-1]), "gpu_max": float(seen.max()), "p05": q05, **_stats(seen)
        }
        k = int(np.argmax(diff[viol]))
        reasons.append(f"{s.node}/{s.name} memory average rose by {diff[viol][k]:.1f} points to {v[at[k]]:.0f}% "
                       f"({len(at)} violations)")
    if count:
        details["last_timestamp"] = _scan_start_us(bounds, min(last_scan, len(bounds) - 1),
                                                     params.scan_interval_us)
    first = None if first_scan is None else first_scan + 1
    return _counted("GPUMemoryIncrease", count, details, len(series[-1].values), rp, first, reasons)  # datapoints: the GPU read last


def batch_size(data: JobData, params: RuleParams) -> RuleResult:
    """BatchSize: CPU, GPU and GPU memory all low, so the batch could grow or the instance shrink.

    Debugger: "If utilization on CPU, GPU and memory footprint is on average low, it may indicate
    that user can either run on a smaller instance type or that batch size could be increased." It
    checks, per node once more than ``window`` and ``patience`` CPU datapoints exist, that the p95 of
    total CPU over the last ``window`` is below ``cpu_threshold_p95`` and then, per GPU, that the p95
    of utilization and of memory are below ``gpu_threshold_p95`` and ``gpu_memory_threshold_p95``.
    """
    rp = _pick(params, "cpu_threshold_p95", "gpu_threshold_p95", "gpu_memory_threshold_p95", "patience", "window")
    cpu = data.totals("CPUUtilization")
    if not cpu:
        return RuleResult(rule="BatchSize", rule_parameters=rp)
    w, patience = params.window, params.patience
    gpus = {(s.node, s.name): s for s in data.series("GPUUtilization")}
    mems = {(s.node, s.name): s for s in data.series("GPUMemoryUtilization")}
    datapoints = len(list(cpu.values())[-1][0])  # Debugger: the count of the node it read last (nodes sorted)
    if not gpus:
        return RuleResult(rule="BatchSize", datapoints=datapoints, rule_parameters=rp)
    bounds = _bounds(data, params)
    count, last_k = 0, -1
    first: int | None = None
    details: dict[str, Any] = {}
    reasons: list[str] = []
    for node, (ts, total, ncores) in cpu.items():
        share = total / max(ncores, 1)
        n = counts_before(ts, bounds)
        ok = np.flatnonzero((n > w) & (n > patience))
        if not len(ok):
            continue
        cpu95 = window_quantiles(share, n[ok], w, [0.95])[0]
        low_cpu = ok[cpu95 < params.cpu_threshold_p95]
        if not len(low_cpu):
            continue
        for (gnode, gpu), g in gpus.items():
            mem = mems.get((gnode, gpu))
            if gnode != node or mem is None:
                continue
            ng, nm = counts_before(g.ts, bounds[low_cpu]), counts_before(mem.ts, bounds[low_cpu])
            ok_g = (ng > w) & (nm > 0)
            if not ok_g.any():
                continue
            g95 = window_quantiles(g.values, ng[ok_g], w, [0.95])[0]
            m95 = window_quantiles(mem.values, nm[ok_g], w, [0.95])[0]
            viol = (g95 < params.gpu_threshold_p95) & (m95 < params.gpu_memory_threshold_p95)
            if not viol.any():
                continue
            count += int(viol.sum())
            last_k = max(last_k, int(low_cpu[ok_g][viol][-1]))
            k_first = int(low_cpu[ok_g][viol][0]) + 1
            first = k_first if first is None else min(first, k_first)
            last_b = bounds[low_cpu[ok_g][viol][-1]]
            upto = share[ts < last_b]
            d = details.setdefault(node, {})
            d["cpu"] = _stats(upto)
            d[gpu] = _stats(g.values[g.ts < last_b])
            d[f"{gpu}_memory"] = _stats(mem.values[mem.ts < last_b])
            reasons.append(
                f"{node}/{gpu}: p95 GPU {g95[viol][-1]:.0f}%, p95 GPU memory {m95[viol][-1]:.0f}%, "
                f"p95 CPU {cpu95[cpu95 < params.cpu_threshold_p95][-1]:.0f}%"
            )
    if count:  # as Debugger: the start (epoch us) of the last scan that found the condition
        details["last_timestamp"] = _scan_start_us(bounds, last_k, params.scan_interval_us)
    return _counted("BatchSize", count, details, datapoints, rp, first, reasons)


# Debugger's histogram: np.histogram(values, bins=np.arange(0, 100, 2)), 49 bins over [0, 98]; values above 98%
# fall outside it (real Debugger output shows 49-bin "workloads").
_BINS = np.arange(0, 100, 2)


def _js_distance(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon distance (natural log) between rows of two histogram arrays."""
    p = p / np.maximum(p.sum(axis=-1, keepdims=True), 1)
    q = q / np.maximum(q.sum(axis=-1, keepdims=True), 1)
    m = (p + q) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        kl_p = np.where(p > 0, p * np.log(p / m), 0.0).sum(axis=-1)
        kl_q = np.where(q > 0, q * np.log(q / m), 0.0).sum(axis=-1)
    return np.asarray(np.sqrt(np.maximum((kl_p + kl_q) / 2, 0.0)))


def load_balancing(data: JobData, params: RuleParams) -> RuleResult:
    """LoadBalancing: GPUs of one node with different utilization histograms.

    Debugger: "It computes a histogram of utilization per GPU and measures the distance between those
    histograms. If the histogram exceeds a pre-defined threshold then rule triggers." The distance is
    the Jensen-Shannon distance of Debugger's 2%-wide utilization histograms (49 bins over 0-98%), for
    every pair of GPUs of a node once both have more than ``patience`` values; each pair over the
    threshold at a scan counts once. Single-GPU nodes have no pairs and never fire. Details always hold
    every GPU's histogram (``workloads``), as Debugger writes them even when nothing fires; the 2020
    public code never fires at all (its GPU loop is not nested, docs/rules.md), we follow the
    documented intent.
    """
    rp = _pick(params, "threshold", "patience")
    series = data.series("GPUUtilization")
    if not series:
        return RuleResult(rule="LoadBalancing", rule_parameters=rp)
    bounds = _bounds(data, params)
    nb = len(_BINS) - 1
    by_node: dict[str, list[Series]] = {}
    for s in series:
        by_node.setdefault(s.node, []).append(s)
    count = 0
    hits = np.zeros(len(bounds), dtype=bool)
    details: dict[str, Any] = {}
    reasons: list[str] = []
    for node, group in by_node.items():
        cum = []
        ns = []
        for s in group:
            inside = (s.values >= 0) & (s.values <= _BINS[-1])
            b = np.minimum((s.values[inside] // 2).astype(np.int64), nb - 1)
            k = interval_of(s.ts[inside], bounds) - 1  # 0-based scan index
            flat = np.bincount(k * nb + b, minlength=len(bounds) * nb)[: len(bounds) * nb]
            cum.append(np.cumsum(flat.reshape(len(bounds), nb), axis=0))
            ns.append(counts_before(s.ts, bounds))
        details[node] = {"workloads": {s.name: h[-1].tolist() for s, h in zip(group, cum, strict=True)}}
        for a in range(len(group)):
            for c in range(a + 1, len(group)):
                ok = (ns[a] > params.patience) & (ns[c] > params.patience)
                if not ok.any():
                    continue
                dist = _js_distance(cum[a][ok], cum[c][ok])
                over = dist > params.threshold
                if not over.any():
                    continue
                count += int(over.sum())
                hits[np.flatnonzero(ok)[over]] = True
                ga, gc = group[a].name, group[c].name
                details[node].setdefault("distances", {}).setdefault(ga, {})[gc] = float(dist[-1])
                reasons.append(f"{node}: {ga} vs {gc} histogram distance {dist[-1]:.2f}")
    # datapoints, as Debugger: the count of the GPU it read last
    return _counted("LoadBalancing", count, details, len(series[-1].values), rp, _first_step(hits), reasons)


def _bottleneck(
    data: JobData, params: RuleParams, rule: str, dimension: str, th_key: str
) -> RuleResult:
    keys = ("threshold", th_key, "gpu_threshold", "patience")
    rp = _pick(params, *keys)
    snaps = data.snapshots
    if not snaps:
        return RuleResult(
            rule=rule, details={"low_gpu_utilization": 0, "bottlenecks": {}}, rule_parameters=rp
        )
    bounds = _bounds(data, params)
    low_gpu = 0
    total_dp = np.zeros(len(bounds), dtype=np.int64)
    total_bn = np.zeros(len(bounds), dtype=np.int64)
    bn_times: list[np.ndarray] = []
    bn_g: list[np.ndarray] = []
    bn_c: list[np.ndarray] = []
    gpu_by_node: dict[str, list[Series]] = {}
    for s in data.series("GPUUtilization"):
        gpu_by_node.setdefault(s.node, []).append(s)
    hi_by_node: dict[str, list[Series]] = {}
    for s in data.series(dimension):
        hi_by_node.setdefault(s.node, []).append(s)
    for node, snap in snaps.items():
        gcount = np.zeros(len(snap), dtype=np.int64)
        ccount = np.zeros(len(snap), dtype=np.int64)
        for s in gpu_by_node.get(node, []):
            idx = np.searchsorted(snap, s.ts[s.values < params.gpu_threshold], side="right") - 1
            gcount += np.bincount(idx[idx >= 0], minlength=len(snap))
        for s in hi_by_node.get(node, []):
            idx = np.searchsorted(snap, s.ts[s.values > getattr(params, th_key)], side="right") - 1
            ccount += np.bincount(idx[idx >= 0], minlength=len(snap))
        low_gpu += int((gcount > 0).sum())
        bn = (gcount > 0) & (ccount > 0)
        total_dp += counts_before(snap, bounds)
        total_bn += counts_before(snap[bn], bounds)
        bn_times.append(snap[bn])
        bn_g.append(gcount[bn])
        bn_c.append(ccount[bn])
    ok = (total_dp > params.patience) & (total_bn * 100 > params.threshold * np.maximum(total_dp, 1))
    times = np.concatenate(bn_times) if bn_times else np.array([], dtype=np.int64)
    gs, cs = np.concatenate(bn_g) if bn_g else times, np.concatenate(bn_c) if bn_c else times
    bottlenecks: dict[str, dict[str, int]] = {}
    for t, g, c in zip(times.tolist(), gs.tolist(), cs.tolist(), strict=True):  # one entry per bottleneck
        entry = bottlenecks.setdefault(repr(t / 1e9), {"GPUs": 0, "CPUs": 0})
        entry["GPUs"] += int(g)
        entry["CPUs"] += int(c)
    dp, nb = int(total_dp[-1]), int(total_bn[-1])
    what = "CPU" if dimension == "CPUUtilization" else "I/O wait"
    cond = f"had GPU below {params.gpu_threshold}% while {what} was above {getattr(params, th_key)}%"
    whole = f"over the whole job {nb} of {dp} snapshots ({100 * nb / max(dp, 1):.0f}%)"
    judged = total_dp > params.patience
    if ok.any():
        k = int(np.flatnonzero(ok)[0])
        msg = (f"fired at scan {k + 1}: {int(total_bn[k])} of {int(total_dp[k])} snapshots so far "
               f"({100 * total_bn[k] / total_dp[k]:.0f}%) {cond}, more than the threshold {params.threshold}%; "
               f"{whole}")
    elif judged.any():
        share = 100 * total_bn[judged] / total_dp[judged]
        msg = (f"not fired: at most {share.max():.0f}% of the snapshots so far {cond} at any scan, never more than "
               f"the threshold {params.threshold}%; {whole}")
    else:
        msg = f"not judged: {dp} snapshots, not more than patience {params.patience}; {whole}"
    return RuleResult(
        rule=rule,
        rule_triggered=int(ok.sum()),
        violations=nb,
        details={"low_gpu_utilization": low_gpu, "bottlenecks": bottlenecks},
        datapoints=dp,
        rule_parameters=rp,
        trigger_step=_first_step(ok),
        message=msg if nb else "",
    )


def cpu_bottleneck(data: JobData, params: RuleParams) -> RuleResult:
    """CPUBottleneck: GPU idle while the CPU is busy, for too large a share of the time.

    Debugger: "Rule returns True if number of CPU bottlenecks exceeds a predefined threshold" - a
    bottleneck is a system snapshot where a GPU is below ``gpu_threshold`` and a CPU core above
    ``cpu_threshold``; the rule fires when bottlenecks are more than ``threshold`` percent of the
    snapshots, once more than ``patience`` snapshots were seen.
    """
    return _bottleneck(data, params, "CPUBottleneck", "CPUUtilization", "cpu_threshold")


def io_bottleneck(data: JobData, params: RuleParams) -> RuleResult:
    """IOBottleneck: GPU idle while I/O wait is high, for too large a share of the time.

    Debugger: "Rule returns True if number of IO bottlenecks exceeds a predefined threshold" - as
    CPUBottleneck with ``I/OWaitPercentage`` above ``io_threshold`` in place of CPU utilization.
    """
    return _bottleneck(data, params, "IOBottleneck", "I/OWaitPercentage", "io_threshold")


def _percentiles(values: np.ndarray, n: int) -> dict[str, float]:
    q = np.quantile(values, [1.0, 0.99, 0.95, 0.5, 0.0]) / max(n, 1)
    q = np.where(q > 0, q, 0.0)
    return {k: round(float(v), 2) for k, v in zip(("max", "p99", "p95", "p50", "min"), q, strict=True)}


def overall_system_usage(data: JobData, params: RuleParams) -> RuleResult:
    """OverallSystemUsage: per-node max/p99/p95/p50/min of network, GPU, CPU, memory and I/O; never fires.

    Debugger: "The rule currently only aggregates values per node and computes their percentiles. The
    rule does currently not take any threshold parameters into account nor can it trigger." Per
    timestamp the device values are summed and divided by the number of devices (cores, GPUs).
    """
    details: dict[str, Any] = {"Network": {}, "GPU": {}, "CPU": {}, "CPU memory": {}, "GPU memory": {}, "I/O": {}}
    if data.system.empty:
        return RuleResult(rule="OverallSystemUsage", details=details)
    ncores = max((n for _, _, n in data.totals("CPUUtilization").values()), default=1)
    sources = {
        "GPU": ("GPUUtilization", None),
        "CPU": ("CPUUtilization", None),
        "GPU memory": ("GPUMemoryUtilization", None),
        "I/O": ("I/OWaitPercentage", ncores),
    }
    for key, (dim, div) in sources.items():
        for node, (_, total, n) in data.totals(dim).items():
            details[key][node] = _percentiles(total, div or n)
    sysf = data.system
    mem = sysf[sysf["name"] == "MemoryUsedPercent"]
    for mem_node, grp in mem.groupby("node", sort=True):
        details["CPU memory"][str(mem_node)] = _percentiles(grp.groupby("timestamp")["value"].sum().to_numpy(), 1)
    net_types = [t for t in pd.unique(sysf["type"]) if str(t).lower() == "network"]
    net = sysf[sysf["type"].isin(net_types)] if net_types else data.dimension("Algorithm")
    for net_node, grp in net.groupby("node", sort=True):
        details["Network"][str(net_node)] = _percentiles(grp.groupby("timestamp")["value"].sum().to_numpy(), 1)
    cpu = data.totals("CPUUtilization")
    datapoints = len(cpu[min(cpu)][0]) if cpu else 0
    return RuleResult(rule="OverallSystemUsage", details=details, datapoints=datapoints)
