"""examples/quickstart.ipynb runs top to bottom in a real Jupyter kernel (nbclient + ipykernel) on the local AWS.

Any error output fails the test, and so does anything on stderr (warnings, a dependency's INFO lines): the
notebook a new user opens first must be clean. The outputs are checked for what each step promises.
"""

from __future__ import annotations

import re
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


def _html(nb: Any, needle: str) -> str:
    found = [o["data"]["text/html"] for _, o in _outputs(nb) if "text/html" in o.get("data", {})
             and needle in o["data"]["text/html"]]
    assert found, f"no HTML output with {needle!r}"
    return str(found[0])


def test_notebook_runs_without_errors_or_stderr(executed: Any) -> None:
    bad = [(i, o.get("ename") or o.get("name"), o.get("evalue") or o.get("text", "")[:500])
           for i, o in _outputs(executed) if o.output_type == "error" or (o.output_type == "stream"
                                                                          and o.name == "stderr")]
    assert bad == []


def test_notebook_watches_rules_with_a_widget_and_shows_full_reasons(executed: Any) -> None:
    widgets = [o for _, o in _outputs(executed) if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widgets, "wait_for_rules showed no progress widget"
    summary = _html(executed, "smx-rule-summary")
    assert re.search(r"<td>CPUBottleneck</td>\s*<td>profiler</td>\s*<td>IssuesFound</td>", summary)
    assert "RuleEvaluationConditionMet: Evaluation of the rule CPUBottleneck at step" in summary
    assert "resulted in the condition being met" in summary and "NaN" not in summary and "..." not in summary


def test_notebook_profiler_data_tables_have_units_and_plain_numbers(executed: Any) -> None:
    stats = _html(executed, "ReadThroughputInBytesPerSecond")
    assert "MB/s" in stats and "<td>%</td>" in stats
    assert not re.search(r"\de[+-]\d", stats)
    assert "outliers" in _html(executed, "outliers")


def test_notebook_what_if_threshold_changes_the_verdict(executed: Any) -> None:
    table = _html(executed, "threshold (%)")
    verdicts = re.findall(r"<td>(True|False)</td>", table)
    assert verdicts[0] == "True" and verdicts[-1] == "False"


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
