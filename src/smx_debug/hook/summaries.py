"""Per-layer summary statistics: what the hook saves instead of a collection's whole tensors for the recommended
profile (``Hook(summaries=True)``, ``HookParameters.save_summaries``).

Each rule of our own names the statistics it reads in its :class:`~smx_debug.rules.definitions.CollectionRequirement`;
:func:`statistics_by_collection` gathers them per collection from the rules of the ``recommended`` profile. The
hook computes them on the tensor's device at the save step, as reductions (a few numbers per tensor, or the
512-value ``sample``: never a whole tensor copied to the host), and writes ``abs_mean``/``l2`` as smdebug's
reduction records and the others as named summary tensors (:func:`smx_debug.rules.definitions.summary_tensor_name`).
The rules compute the same statistic from the raw values when a trial has no summary (:mod:`smx_debug.rules.own`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from smx_debug.rules.definitions import SMDEBUG_STATISTICS, summary_tensor_name
from smx_debug.rules.registry import rule_defs
from smx_debug.tensors.reductions import reduction_tensor_name

SAMPLE_SIZE = 512
_SHARE_BEYOND = "share_abs_gt_"
_STATISTICS = frozenset({"share_zero", "count_nonfinite", "init_scale", "sample", *SMDEBUG_STATISTICS})


@functools.cache
def statistics_by_collection(profile: str = "recommended") -> dict[str, tuple[str, ...]]:
    """Collection name -> the statistics the ``profile``'s rules read from it (rule order, each once)."""
    out: dict[str, dict[str, None]] = {}
    for rule in rule_defs():
        if profile not in rule.profiles:
            continue
        for req in rule.spec.collections:
            for stat in req.statistics:
                check_statistic(stat)
                out.setdefault(req.name, {})[stat] = None
    return {name: tuple(stats) for name, stats in out.items()}


def check_statistic(stat: str) -> None:
    """Raise ValueError for a statistic name the hook cannot compute (a rule's CollectionRequirement is wrong)."""
    if stat in _STATISTICS:
        return
    if stat.startswith(_SHARE_BEYOND):
        try:
            limit = float(stat[len(_SHARE_BEYOND):])
        except ValueError:
            limit = math.nan
        if math.isfinite(limit):
            return
    raise ValueError(f"unknown summary statistic {stat!r} (known: {', '.join(sorted(_STATISTICS))}, "
                     f"{_SHARE_BEYOND}<limit>)")


def record_name(tensor: str, stat: str) -> str:
    """The name statistic ``stat`` of ``tensor`` is written under."""
    if stat == "abs_mean":
        return reduction_tensor_name(tensor, "mean", abs=True)
    if stat == "l2":
        return reduction_tensor_name(tensor, "l2")
    return summary_tensor_name(tensor, stat)


@functools.lru_cache(maxsize=256)
def _sample_index(numel: int, device: torch.device) -> torch.Tensor:
    """The rules' sample positions (numpy's linspace, truncated: the same as ``SmxStalledWeights``)."""
    idx = np.linspace(0, numel - 1, min(numel, SAMPLE_SIZE)).astype(np.int64)
    return torch.as_tensor(idx, device=device)


def compute(tensor: torch.Tensor, stats: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """The statistics ``stats`` of a float tensor, on its device (counts as integers, the others in float64 except
    the ``sample``, in the tensor's dtype); an empty dict for integer, boolean or empty tensors. ``init_scale`` is
    only computed for tensors of two or more dimensions."""
    t = tensor.detach()
    if not t.is_floating_point() or t.numel() == 0:
        return {}
    out: dict[str, torch.Tensor] = {}
    wide: torch.Tensor | None = None
    for stat in stats:
        if stat == "share_zero":
            out[stat] = torch.count_nonzero(t == 0)
        elif stat.startswith(_SHARE_BEYOND):
            out[stat] = torch.count_nonzero(t.abs() > float(stat[len(_SHARE_BEYOND):]))
        elif stat == "count_nonfinite":
            out[stat] = torch.count_nonzero(~torch.isfinite(t))
        elif stat == "sample":
            flat = t.reshape(-1)
            out[stat] = flat[_sample_index(flat.numel(), flat.device)]
        else:
            wide = t.double() if wide is None else wide
            if stat == "abs_mean":
                out[stat] = wide.abs().mean()
            elif stat == "l2":
                out[stat] = torch.linalg.vector_norm(wide)
            elif stat == "init_scale" and t.dim() >= 2:
                out[stat] = wide.std(correction=0) * math.sqrt(math.prod(t.shape[1:]))
    return out


def to_host(tensor: torch.Tensor, stats: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """The computed statistics as the arrays to write, by record name: the counts become shares of the tensor's
    size (float64, divided on the host: the same number numpy's mean of a boolean array gives)."""
    numel = tensor.numel()
    out: dict[str, np.ndarray] = {}
    for stat, value in stats.items():
        host = value.cpu().numpy()
        if stat == "share_zero" or stat.startswith(_SHARE_BEYOND):
            host = np.asarray(float(host) / numel)
        elif stat == "count_nonfinite":
            host = np.asarray(float(host))
        out[stat] = np.array(host, copy=True)
    return out
