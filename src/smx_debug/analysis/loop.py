"""Where the training loop's time goes, from the framework trace: dataloader share, slow loads, slow operators."""

from __future__ import annotations

import numpy as np
import pandas as pd

from smx_debug.analysis.dips import classify_event
from smx_debug.data.frames import ns

SHARE_COLUMNS = ["node", "steps", "training_s", "dataloader_s", "compute_s", "dataloader_percent"]
LOADING_COLUMNS = ["node", "step", "step_s", "dataloader_s", "compute_s"]
OPERATOR_COLUMNS = ["name", "category", "count", "total_s", "mean_ms", "max_ms", "share_percent"]


def _phases(events: pd.DataFrame) -> pd.DataFrame:
    """X events other than steps, with their category."""
    if events.empty:
        return events.assign(category=pd.Series([], dtype=object))
    sel = events[(events["phase"] == "X") & events["duration"].notna()
                 & ~events["name"].astype(str).str.startswith("Step:")]
    codes, uniques = pd.factorize(sel["name"].astype(str))
    cats = np.asarray([classify_event(str(n)) for n in uniques], dtype=object)
    return sel.assign(category=cats[codes] if len(uniques) else np.zeros(0, object))


def _per_step(events: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per (node, step): step seconds, dataloader seconds and forward+backward seconds inside the step."""
    phases = _phases(events)
    e_node = phases["node"].astype(str).to_numpy() if len(phases) else np.zeros(0, object)
    e_start = ns(phases["start"]) if len(phases) else np.zeros(0, np.int64)
    e_dur = phases["duration"].to_numpy(dtype=float) if len(phases) else np.zeros(0)
    e_cat = phases["category"].to_numpy() if len(phases) else np.zeros(0, object)
    is_load_all, is_comp_all = e_cat == "dataloader", np.isin(e_cat, ["forward", "backward"])
    node_codes, node_names = pd.factorize(e_node)
    out = []
    for node, grp in steps.groupby("node", sort=True, observed=True):
        grp = grp.sort_values("start", kind="stable")
        s_start, s_end = ns(grp["start"]), ns(grp["end"])
        load: np.ndarray = np.zeros(len(grp))
        comp: np.ndarray = np.zeros(len(grp))
        k = int(np.flatnonzero(node_names == str(node))[0]) if str(node) in set(node_names) else -1
        if k < 0:  # no framework event on this node: data loading unknown
            load = np.full(len(grp), np.nan)
        else:
            sel = node_codes == k
            start, dur = e_start[sel], e_dur[sel]
            idx = np.searchsorted(s_start, start, side="right") - 1
            inside = (idx >= 0) & (start < s_end[np.clip(idx, 0, None)])
            is_load, is_comp = is_load_all[sel] & inside, is_comp_all[sel] & inside
            load = np.bincount(idx[is_load], weights=dur[is_load], minlength=len(grp))
            comp = np.bincount(idx[is_comp], weights=dur[is_comp], minlength=len(grp))
            if not is_load_all[sel].any():  # the trace has no dataloader events: unknown, not zero
                load = np.full(len(grp), np.nan)
        d = grp["duration"].to_numpy(dtype=float)
        comp = np.where(comp > 0, comp, np.clip(d - np.nan_to_num(load), 0, None))  # no forward/backward: the rest
        out.append(pd.DataFrame({"node": str(node), "step": grp["step"].to_numpy(), "step_s": d, "dataloader_s": load,
                                 "compute_s": comp}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=LOADING_COLUMNS)


def step_loading(events: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per step (:data:`LOADING_COLUMNS`): its duration, the dataloader's time in it and the compute time.

    Pass the result as ``per_step`` to :func:`dataloader_share` and :func:`slow_loading_steps` to compute it once.
    """
    return _per_step(events, steps)


def dataloader_share(events: pd.DataFrame, steps: pd.DataFrame, *, per_step: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per node: time in the training steps, the dataloader's part of it and its share in percent.

    NaN (not 0) for a node whose trace has no dataloader events: the share is then unknown.
    """
    per = _per_step(events, steps) if per_step is None else per_step
    if per.empty:
        return pd.DataFrame(columns=SHARE_COLUMNS)
    g = per.groupby("node", sort=True)
    out = pd.DataFrame({"steps": g.size(), "training_s": g["step_s"].sum(), "dataloader_s": g["dataloader_s"].sum(min_count=1),
                        "compute_s": g["compute_s"].sum()}).reset_index()
    out["dataloader_percent"] = 100.0 * out["dataloader_s"] / out["training_s"].where(out["training_s"] > 0)
    return out[SHARE_COLUMNS]


def slow_loading_steps(events: pd.DataFrame, steps: pd.DataFrame, *,
                       per_step: pd.DataFrame | None = None) -> pd.DataFrame:
    """Steps whose data loading took longer than their compute (forward + backward), slowest loads first."""
    per = _per_step(events, steps) if per_step is None else per_step
    if per.empty:
        return pd.DataFrame(columns=LOADING_COLUMNS)
    slow = per[(per["dataloader_s"] > per["compute_s"]) & (per["dataloader_s"] > 0)]
    return slow.sort_values("dataloader_s", ascending=False, kind="stable").reset_index(drop=True)[LOADING_COLUMNS]


def slowest_operators(events: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """Framework events other than steps, grouped by name, by total time (``top`` rows)."""
    phases = _phases(events)
    if phases.empty:
        return pd.DataFrame(columns=OPERATOR_COLUMNS)
    g = phases.groupby("name", sort=False)["duration"]
    out = pd.DataFrame({"count": g.size(), "total_s": g.sum(), "mean_ms": g.mean() * 1e3, "max_ms": g.max() * 1e3})
    out = out.reset_index()
    out["category"] = out["name"].astype(str).map(classify_event)
    total = float(out["total_s"].sum())
    out["share_percent"] = 100.0 * out["total_s"] / total if total else 0.0
    return out.sort_values("total_s", ascending=False, kind="stable").head(top).reset_index(drop=True)[OPERATOR_COLUMNS]
