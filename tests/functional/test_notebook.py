"""examples/quickstart.ipynb runs top to bottom in a real Jupyter kernel (nbclient + ipykernel) on the local AWS.

Any error output fails the test, and so does anything on stderr (warnings, a dependency's INFO lines): the
notebook a new user opens first must be clean. The outputs are checked for what each step promises.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def executed() -> Any:
    nb = nbformat.read(EXAMPLES / "quickstart.ipynb", as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(EXAMPLES)}}).execute()
    return nb


def _outputs(nb: Any) -> list[tuple[int, Any]]:
    return [(i, o) for i, cell in enumerate(nb.cells) if cell.cell_type == "code" for o in cell.get("outputs", [])]


def _html(nb: Any, *needles: str) -> str:
    found = [o["data"]["text/html"] for _, o in _outputs(nb) if "text/html" in o.get("data", {})
             and all(needle in o["data"]["text/html"] for needle in needles)]
    assert found, f"no HTML output with {needles!r}"
    return str(found[0])


def test_notebook_runs_without_errors_or_stderr(executed: Any) -> None:
    bad = [(i, o.get("ename") or o.get("name"), o.get("evalue") or o.get("text", "")[:500])
           for i, o in _outputs(executed) if o.output_type == "error" or (o.output_type == "stream"
                                                                          and o.name == "stderr")]
    assert bad == []


def _table(html_text: str) -> list[dict[str, str]]:
    """The rows of the first HTML table in ``html_text`` as {column: cell text}."""
    head = re.findall(r"<th>(.*?)</th>", html_text.split("</thead>")[0], flags=re.S)
    body = html_text.split("<tbody>")[1].split("</tbody>")[0]
    rows = [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.S)]
            for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body, flags=re.S)]
    cols = head[-len(rows[0]):] if rows else head
    return [dict(zip(cols, r, strict=True)) for r in rows]


def test_notebook_watches_rules_with_a_widget_whose_saved_text_is_the_final_state(executed: Any) -> None:
    widgets = [o for _, o in _outputs(executed) if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widgets, "wait_for_rules showed no progress widget"
    # A viewer without the widget state (GitHub, nbviewer, a closed JupyterLab) shows the text fallback
    fallback = widgets[0]["data"]["text/plain"]
    assert re.search(r"100%.*\b5/5\b", fallback) and "IssuesFound" in fallback, fallback


def test_notebook_rule_summary_details_are_our_full_reasons_not_sagemakers_generic_text(executed: Any) -> None:
    rows = {r["rule"]: r for r in _table(_html(executed, "smx-rule-summary"))}
    assert rows["CPUBottleneck"]["status"] == "IssuesFound" and rows["StepOutlier"]["status"] == "IssuesFound"
    for rule in ("CPUBottleneck", "LowGPUUtilization", "StepOutlier"):
        details = rows[rule]["details"]
        assert "RuleEvaluationConditionMet" not in details and details, (rule, details)
    for rule in ("CPUBottleneck", "StepOutlier"):  # our reason fired at the step (scan) SageMaker's status names
        assert re.match(rf"fired at scan {rows[rule]['step']}\b", rows[rule]["details"]), rows[rule]
    assert "while CPU was above 90%" in rows["CPUBottleneck"]["details"]
    summary = _html(executed, "smx-rule-summary")
    assert "NaN" not in summary and "..." not in summary


def test_notebook_step_statistics_agree_with_step_outlier_verdict(executed: Any) -> None:
    fired_at = int({r["rule"]: r for r in _table(_html(executed, "smx-rule-summary"))}["StepOutlier"]["step"])
    scans = _table(_html(executed, "<th>n_outliers</th>"))
    firing = [r for r in scans if r["fires"] == "True"]
    assert firing, "the notebook shows no scan at which StepOutlier's condition held"
    first = firing[0]
    assert int(first["scan"]) == fired_at
    assert int(first["outliers"]) > int(first["n_outliers"])
    assert float(first["threshold"]) < float(_table(_html(executed, "<th>outliers</th>", "<th>p50</th>"))[0]["max"])


def test_notebook_profiler_data_tables_have_units_and_plain_numbers(executed: Any) -> None:
    stats = _html(executed, "ReadThroughputInBytesPerSecond")
    assert "MB/s" in stats and "<td>%</td>" in stats
    assert not re.search(r"\de[+-]\d", stats)
    assert "outliers" in _html(executed, "outliers")


def test_notebook_what_if_threshold_changes_the_verdict_and_the_full_reason(executed: Any) -> None:
    table = _table(_html(executed, "threshold (%)"))
    assert [r["fires"] for r in table] == ["True", "True", "False"]
    reasons = [r["reason"] for r in table]
    assert len(set(reasons)) == 3 and not any(r.endswith("...") for r in reasons), reasons
    for row in table:
        assert f"{row['threshold (%)']}%" in row["reason"]


def test_notebook_opens_the_report_inline(executed: Any) -> None:
    report = _html(executed, "<iframe srcdoc=")
    assert "CPUBottleneck" in report and "&lt;svg" in report


def test_notebook_runs_as_the_documented_notebook_user_with_nothing_denied(executed: Any) -> None:
    printed = "".join(o.get("text", "") for _, o in _outputs(executed) if o.output_type == "stream")
    found = re.search(r"\[iam\] (\d+) calls by the notebook user checked against docs/permissions\.md's policy: "
                      r"(\d+) denied", printed)
    assert found, "the notebook did not print how many of its calls the local IAM checked"
    calls, denied = int(found[1]), int(found[2])
    assert calls >= 10 and denied == 0  # launch, the rules' polls, the reads of S3: all the user's own


def _readme_notebook_commands() -> list[str]:
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    paragraph = readme[readme.index("Then open **`examples/quickstart.ipynb`**"):].split("\n\n")[0]
    return [c for c in re.findall(r"`([^`]+)`", paragraph) if re.match(r"(\.venv/bin/)?jupyter\b", c)]


def test_readme_notebook_commands_exist_in_the_venv_make_install_builds() -> None:
    commands = _readme_notebook_commands()
    assert commands, "README's notebook paragraph names no jupyter command"
    bindir = Path(sys.executable).parent  # the tests run in .venv, which `make install` builds
    for command in commands:
        words = command.split()
        program = bindir / f"jupyter-{words[1]}"  # `jupyter <sub>` runs jupyter-<sub> from the same directory
        assert program.exists(), f"README says `{command}`, but {program} is not installed by `make install`"
        ran = subprocess.run([str(bindir / "jupyter"), words[1], "--help"], capture_output=True, timeout=120)
        assert ran.returncode == 0, ran.stderr[-500:]
