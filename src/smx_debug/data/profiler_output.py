"""The ProfilerReport rule's output: ``profiler-report.html`` and every ``profiler-reports/<Rule>.json``.

The rule writes to ``rule-output/ProfilerReport[-<epoch>]/profiler-output/``; each JSON is
``{"RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters": "k:v\\nk:v"}``.
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from smx_debug import _json as bounded_json
from smx_debug.data.sources import Source, open_source
from smx_debug.errors import NotFoundError

REPORT_COLUMNS = ["rule", "triggered", "violations", "datapoints", "details", "parameters"]
_JSON_RE = re.compile(r"(?:^|/)(ProfilerReport[^/]*/)?(?:profiler-output/)?profiler-reports/([^/]+)\.json$")
_HTML_RE = re.compile(r"(?:^|/)(ProfilerReport[^/]*/)?(?:profiler-output/)?profiler-report\.html$")


def parse_rule_parameters(text: Any) -> dict[str, str]:
    """``"threshold:3\\nmode:None"`` -> ``{"threshold": "3", "mode": "None"}`` (values stay strings)."""
    if isinstance(text, dict):
        return {str(k): str(v) for k, v in text.items()}
    out: dict[str, str] = {}
    if not isinstance(text, str):
        return out
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


@dataclass
class ProfilerReport:
    """The parsed ProfilerReport output; displays as its rule table in a notebook."""

    source: str
    folder: str
    rules: pd.DataFrame
    html: str | None = None
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def triggered(self) -> pd.DataFrame:
        """The rules that triggered at least once."""
        return self.rules[self.rules["triggered"].fillna(0) > 0]

    def save_html(self, path: str | os.PathLike[str]) -> Path:
        """Write the original ``profiler-report.html``."""
        if self.html is None:
            raise NotFoundError(f"no profiler-report.html under {self.source}{self.folder}")
        out = Path(path)
        out.write_text(self.html, encoding="utf-8")
        return out

    def _repr_html_(self) -> str:
        table = self.rules[["rule", "triggered", "violations", "datapoints"]].to_html(index=False)
        note = "" if self.html is not None else "<p>(no profiler-report.html found)</p>"
        return f"<h4>ProfilerReport {html.escape(self.source + self.folder)}</h4>{table}{note}"


def profiler_report(
    job_or_path: str | os.PathLike[str] | Source,
    *,
    sagemaker_client: Any = None,
    s3_client: Any = None,
) -> ProfilerReport:
    """Find and read the ProfilerReport output of a job (name), an ``s3://`` prefix or a local folder.

    With several ``ProfilerReport-<epoch>`` folders the last one wins. A rule JSON that cannot be parsed is
    skipped and listed in ``skipped`` with the reason.
    """
    source = open_source(job_or_path, sagemaker_client=sagemaker_client, s3_client=s3_client, output="rule")
    objs = source.list("")
    jsons: dict[str, dict[str, str]] = {}
    htmls: dict[str, str] = {}
    for o in objs:
        m = _JSON_RE.search(o.key)
        if m:
            folder = o.key[: m.start(2)].rsplit("profiler-reports/", 1)[0]
            jsons.setdefault(folder, {})[m.group(2)] = o.key
            continue
        m = _HTML_RE.search(o.key)
        if m:
            htmls[o.key.rsplit("profiler-report.html", 1)[0]] = o.key
    if not jsons and not htmls:
        raise NotFoundError(
            f"no ProfilerReport output under {source.uri}: expected "
            "ProfilerReport*/profiler-output/profiler-reports/<Rule>.json (has the rule finished?)"
        )
    folder = sorted(set(jsons) | set(htmls))[-1]
    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    keys = jsons.get(folder, {})
    for rule, key in sorted(keys.items()):
        try:
            doc = bounded_json.loads(source.read(key))
        except ValueError as exc:  # also nested too deep
            skipped[key] = f"not JSON: {exc}"
            continue
        if not isinstance(doc, dict):
            skipped[key] = f"not a JSON object: {type(doc).__name__}"
            continue
        rows.append(
            {
                "rule": rule,
                "triggered": _int_or_none(doc.get("RuleTriggered")),
                "violations": _int_or_none(doc.get("Violations")),
                "datapoints": _int_or_none(doc.get("Datapoints")),
                "details": doc.get("Details") if isinstance(doc.get("Details"), dict) else {},
                "parameters": parse_rule_parameters(doc.get("RuleParameters")),
            }
        )
    rules = pd.DataFrame(rows, columns=REPORT_COLUMNS)
    for col in ("triggered", "violations", "datapoints"):
        rules[col] = pd.array(rules[col].tolist(), dtype="Int64")
    html_key = htmls.get(folder)
    page = source.read(html_key).decode("utf-8", "replace") if html_key else None
    rules.attrs["skipped"] = skipped
    return ProfilerReport(source=source.uri, folder=folder, rules=rules, html=page, skipped=skipped)
