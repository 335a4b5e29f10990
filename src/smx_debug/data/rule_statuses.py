"""Which rules fired, when and why: rule evaluation statuses from DescribeTrainingJob as DataFrames."""

from __future__ import annotations

import html
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pandas as pd

from smx_debug._lazy import lazy_module
from smx_debug.contracts import (
    ISSUES_FOUND,
    RULE_FIELDS,
    RULE_KINDS,
    RULE_SETTLED_STATUSES,
    details_step,
    rule_logs_url_from_arn,
)
from smx_debug.data._util import TimeLike, to_epoch_ns
from smx_debug.data.sources import default_sagemaker, describe_job
from smx_debug.errors import AwsError, ConfigError

if TYPE_CHECKING:
    import tqdm.auto as tqdm_auto
    import tqdm.notebook as tqdm_notebook
else:  # imported when a wait shows its bar, under the warnings filter there (tqdm.auto announces its notebook mode)
    tqdm_auto = lazy_module("tqdm.auto")
    tqdm_notebook = lazy_module("tqdm.notebook")

RULE_COLUMNS = [
    "job_name", "rule", "kind", "status", "step", "details", "last_modified", "rule_job_arn", "logs_url",
]
SETTLED_STATUSES = frozenset(RULE_SETTLED_STATUSES)


def _as_time(value: Any) -> pd.Timestamp | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return pd.Timestamp(float(value), unit="s", tz="UTC")
    ts = pd.Timestamp(value)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def _rows(desc: dict[str, Any]) -> list[dict[str, Any]]:
    job = desc.get("TrainingJobName", "")
    rows: list[dict[str, Any]] = []
    for kind in RULE_KINDS:
        status_key, config_key = RULE_FIELDS[kind]
        seen = set()
        for st in desc.get(status_key) or ():
            name = st.get("RuleConfigurationName", "")
            seen.add(name)
            details = st.get("StatusDetails")
            arn = st.get("RuleEvaluationJobArn")
            rows.append(
                {
                    "job_name": job,
                    "rule": name,
                    "kind": kind,
                    "status": st.get("RuleEvaluationStatus"),
                    "step": details_step(details),
                    "details": details.strip() if isinstance(details, str) else None,
                    "last_modified": _as_time(st.get("LastModifiedTime")),
                    "rule_job_arn": arn,
                    "logs_url": rule_logs_url_from_arn(arn),
                }
            )
        # Configured rules appear in the statuses only once their evaluation job exists.
        for cfg in desc.get(config_key) or ():
            name = cfg.get("RuleConfigurationName", "")
            if name and name not in seen:
                rows.append({"job_name": job, "rule": name, "kind": kind, "status": None, "step": None,
                             "details": None, "last_modified": None, "rule_job_arn": None, "logs_url": None})
    return rows


_SUMMARY_CSS = (
    ".smx-rule-summary td{white-space:pre-wrap !important;text-align:left !important;vertical-align:top;"
    "max-width:60em;word-break:break-word}"
)


class RuleSummary(pd.DataFrame):
    """A rule summary frame: shows every reason in full (wrapped in HTML, never cut) and blanks, not NaN.

    It is a plain :class:`pandas.DataFrame` otherwise; selections and copies stay ``RuleSummary``.
    """

    @property
    def _constructor(self) -> Any:
        return RuleSummary

    def _for_display(self) -> pd.DataFrame:
        # Nullable integers print <NA> whatever na_rep says: blank every missing cell as an object column.
        plain = pd.DataFrame(self)
        return plain.astype(object).where(plain.notna(), "")

    def to_string(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        """``DataFrame.to_string`` with full cells and blank missing values unless asked otherwise."""
        kwargs.setdefault("max_colwidth", None)
        with pd.option_context("display.max_colwidth", None):
            return str(self._for_display().to_string(*args, **kwargs))

    def __repr__(self) -> str:
        return self.to_string(index=False)

    def with_reasons(self, results: Mapping[str, Any]) -> RuleSummary:
        """This summary with ``details`` replaced by the full reason of our evaluation of the same configuration.

        SageMaker's ``StatusDetails`` only says that a rule's condition was met at a step; the reason (which data,
        which figures, against which parameter) comes from evaluating the configuration on the job's data
        (``smx_debug.evaluate.evaluate(data, plan.evaluated_rules()[0])``: ``results`` keyed by configuration
        name, each with ``triggered`` and ``message``). A row keeps SageMaker's details where ``results`` has no
        reason for it; where our verdict differs from SageMaker's status, both are kept and the difference said.
        """
        out = self.copy()
        for i, rule in zip(out.index, out["rule"], strict=True):
            result = results.get(rule)
            message = getattr(result, "message", "")
            if result is None or not message:
                continue
            if bool(getattr(result, "triggered", False)) == (out.at[i, "status"] == ISSUES_FOUND):
                out.at[i, "details"] = message
            else:
                said = str(out.at[i, "details"] or out.at[i, "status"])
                out.at[i, "details"] = f"{said}; our evaluation of the data differs: {message}"
        return out

    def _repr_html_(self) -> str:
        with pd.option_context("display.max_colwidth", None):
            table = self._for_display().to_html(index=False, escape=True, render_links=True, border=0)
        return f"<div class='smx-rule-summary'><style>{html.escape(_SUMMARY_CSS, quote=False)}</style>{table}</div>"


def _frame(rows: list[dict[str, Any]]) -> RuleSummary:
    df = RuleSummary(pd.DataFrame(rows, columns=RULE_COLUMNS))
    df["step"] = pd.array(df["step"].tolist(), dtype="Int64")
    df["last_modified"] = pd.to_datetime(df["last_modified"], utc=True)
    return df


def rule_summary(
    job_name: str, *, sagemaker_client: Any = None, description: dict[str, Any] | None = None
) -> RuleSummary:
    """One row per Debugger and profiler rule of ``job_name``: columns :data:`RULE_COLUMNS`.

    ``status`` is ``None`` for a configured rule whose evaluation has not started; ``step`` is parsed from
    ``StatusDetails``; ``details`` is the full reason. ``description`` (a DescribeTrainingJob response) skips
    the API call. A mistyped name raises :class:`~smx_debug.errors.JobNotFoundError`.
    """
    if not isinstance(job_name, str) or not job_name:
        raise ConfigError(f"job_name must be a training job name, got {job_name!r}", field="job_name",
                          value=job_name)
    desc = description if description is not None else describe_job(job_name, sagemaker_client)
    desc = {"TrainingJobName": job_name, **desc}
    df = _frame(_rows(desc))
    df.attrs["training_job_status"] = desc.get("TrainingJobStatus")
    return df


def rule_summary_many(
    name_prefix: str | None = None,
    since: TimeLike = None,
    until: TimeLike = None,
    *,
    max_jobs: int = 200,
    sagemaker_client: Any = None,
    workers: int = 8,
) -> RuleSummary:
    """The rule summary of every training job whose name starts with ``name_prefix``, created in the window.

    Jobs are listed with the ListTrainingJobs paginator (newest first, at most ``max_jobs``) and described
    in parallel; the frame has :data:`RULE_COLUMNS` plus ``job_status`` and ``creation_time``.
    """
    if not isinstance(max_jobs, int) or isinstance(max_jobs, bool) or max_jobs < 1:
        raise ConfigError(f"max_jobs must be a positive integer, got {max_jobs!r}", field="max_jobs", value=max_jobs)
    sm = sagemaker_client if sagemaker_client is not None else default_sagemaker()
    kwargs: dict[str, Any] = {"SortBy": "CreationTime", "SortOrder": "Descending"}
    if name_prefix:
        kwargs["NameContains"] = name_prefix
    since_ns, until_ns = to_epoch_ns(since, "since"), to_epoch_ns(until, "until")
    if since_ns is not None:
        kwargs["CreationTimeAfter"] = datetime.fromtimestamp(since_ns / 1e9, tz=UTC)
    if until_ns is not None:
        kwargs["CreationTimeBefore"] = datetime.fromtimestamp(until_ns / 1e9, tz=UTC)
    jobs: list[dict[str, Any]] = []
    for page in sm.get_paginator("list_training_jobs").paginate(**kwargs):
        for js in page.get("TrainingJobSummaries", ()):
            if name_prefix and not js["TrainingJobName"].startswith(name_prefix):
                continue  # NameContains matches anywhere in the name
            jobs.append(js)
        if len(jobs) >= max_jobs:
            break
    jobs = jobs[:max_jobs]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        descs = list(pool.map(lambda js: describe_job(js["TrainingJobName"], sm), jobs))
    rows: list[dict[str, Any]] = []
    for js, desc in zip(jobs, descs, strict=True):
        for row in _rows({"TrainingJobName": js["TrainingJobName"], **desc}):
            row["job_status"] = desc.get("TrainingJobStatus", js.get("TrainingJobStatus"))
            row["creation_time"] = _as_time(js.get("CreationTime"))
            rows.append(row)
    df = RuleSummary(pd.DataFrame(rows, columns=[*RULE_COLUMNS, "job_status", "creation_time"]))
    df["step"] = pd.array(df["step"].tolist(), dtype="Int64")
    df["last_modified"] = pd.to_datetime(df["last_modified"], utc=True)
    df["creation_time"] = pd.to_datetime(df["creation_time"], utc=True)
    df.attrs["jobs"] = len(jobs)
    return df


def _settled(df: pd.DataFrame) -> bool:
    return bool(df["status"].isin(SETTLED_STATUSES).all())


def _in_jupyter() -> bool:
    shell = sys.modules.get("IPython")
    get = getattr(shell, "get_ipython", None)
    return get is not None and type(get()).__name__ == "ZMQInteractiveShell"


class _Progress:
    """A tqdm bar of settled rules: a widget in Jupyter (with ipywidgets), a text bar on a terminal.

    In Jupyter the widget is shown under a display id and shown again when it closes, so the text a viewer
    without the widget's state shows (a saved notebook on GitHub, nbconvert) is the final count, not ``0/N``.
    """

    def __init__(self, job_name: str, total: int) -> None:
        with warnings.catch_warnings():
            # tqdm.auto announces its notebook mode (TqdmExperimentalWarning); that mode is what we want here.
            warnings.simplefilter("ignore")
            bar_type = tqdm_auto.tqdm
            # not the text bar tqdm falls back to
            widget = _in_jupyter() and issubclass(bar_type, tqdm_notebook.tqdm)
            extra: dict[str, Any] = {"display": False} if widget else {}
            self.bar = bar_type(total=total, desc=job_name, unit="rule", file=sys.stderr, leave=True,
                            dynamic_ncols=True, **extra)
        self.handle: Any = None
        if widget:
            from IPython.display import display  # local: IPython is there only in Jupyter (not a dependency)

            self.handle = display(self.bar.container, display_id=True)  # type: ignore[no-untyped-call]

    def show(self, settled: int, total: int, line: str) -> None:
        self.bar.total = total
        self.bar.n = settled
        self.bar.set_postfix_str(line, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()
        if self.handle is not None:
            bundle = dict(self.bar.container._repr_mimebundle_() or {})
            # tqdm's own text fits the bar to a width and cuts the counts per status: say them in full
            bundle["text/plain"] = f"{self.bar.format_meter(**{**self.bar.format_dict, 'ncols': 0})}"
            self.handle.update(bundle, raw=True)


def wait_for_rules(
    job_name: str,
    *,
    poll_s: float = 30.0,
    timeout_s: float = 3600.0,
    sagemaker_client: Any = None,
    progress: bool | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> RuleSummary:
    """Poll until every rule of ``job_name`` has a final status; returns the last rule summary.

    Shows a progress bar of settled rules with the count per status (a widget in Jupyter, a text bar on a
    terminal's stderr); ``progress`` None shows it in Jupyter or when stderr is a terminal. Raises
    :class:`~smx_debug.errors.AwsError` (code ``RulesNotSettled``) after ``timeout_s``.
    """
    for field, value in (("poll_s", poll_s), ("timeout_s", timeout_s)):
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"{field} must be a positive number of seconds, got {value!r}", field=field,
                              value=value)
    sm = sagemaker_client if sagemaker_client is not None else default_sagemaker()
    show = (sys.stderr.isatty() or _in_jupyter()) if progress is None else progress
    deadline = clock() + timeout_s
    bar: _Progress | None = None
    try:
        while True:
            df = rule_summary(job_name, sagemaker_client=sm)
            counts = df["status"].fillna("NotStarted").value_counts().sort_index()
            line = ", ".join(f"{k}: {v}" for k, v in counts.items()) or "no rules"
            if show:
                if bar is None:
                    bar = _Progress(job_name, len(df))
                bar.show(int(df["status"].isin(SETTLED_STATUSES).sum()), len(df), line)
            if _settled(df):
                return df
            if clock() >= deadline:
                raise AwsError(
                    f"rules of training job {job_name!r} not settled after {timeout_s:g} s ({line})",
                    code="RulesNotSettled",
                    operation="DescribeTrainingJob",
                )
            sleep(poll_s)
    finally:
        if bar is not None:
            bar.close()
