"""ProfilerReport output: the real MIT-licensed set, several report folders, corrupt and missing files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from smx_debug.data.profiler_output import REPORT_COLUMNS, parse_rule_parameters, profiler_report
from smx_debug.errors import NotFoundError

MIT = Path("third_party/f3bolarinwa+AWS-Sagemaker---deep_learning_model_tuning_and_deployment/ProfilerReport")


def test_profiler_report_real_outputs_every_rule_parsed(data_dir: Path) -> None:
    root = data_dir / MIT
    report = profiler_report(root)
    files = sorted((root / "profiler-output" / "profiler-reports").glob("*.json"))
    expected = []
    for f in files:
        doc = json.loads(f.read_text())
        expected.append(
            {
                "rule": f.stem,
                "triggered": doc["RuleTriggered"],
                "violations": doc["Violations"],
                "datapoints": doc["Datapoints"],
                "details": doc["Details"],
                "parameters": dict(line.split(":", 1) for line in doc["RuleParameters"].splitlines()),
            }
        )
    assert list(report.rules.columns) == REPORT_COLUMNS
    assert report.rules.astype(object).to_dict("records") == expected
    assert report.html == (root / "profiler-output" / "profiler-report.html").read_text()
    assert report.skipped == {}
    assert report.triggered.empty
    assert "<table" in report._repr_html_()


def test_profiler_report_latest_folder_wins_and_corrupt_json_skipped(data_dir: Path, tmp_path: Path) -> None:
    src = data_dir / MIT / "profiler-output"
    shutil.copytree(src, tmp_path / "ProfilerReport-1600000000" / "profiler-output")
    newer = tmp_path / "ProfilerReport-1700000000" / "profiler-output"
    shutil.copytree(src, newer)
    (newer / "profiler-reports" / "StepOutlier.json").write_text('{"RuleTriggered": 1, "Violations"')
    (newer / "profiler-reports" / "LoadBalancing.json").write_text("[1, 2]")
    doc = json.loads((src / "profiler-reports" / "CPUBottleneck.json").read_text())
    doc["RuleTriggered"] = 7
    (newer / "profiler-reports" / "CPUBottleneck.json").write_text(json.dumps(doc))
    report = profiler_report(tmp_path)
    assert report.folder == "ProfilerReport-1700000000/profiler-output/"
    assert sorted(report.skipped) == [
        "ProfilerReport-1700000000/profiler-output/profiler-reports/LoadBalancing.json",
        "ProfilerReport-1700000000/profiler-output/profiler-reports/StepOutlier.json",
    ]
    assert len(report.rules) == 9
    assert report.triggered["rule"].tolist() == ["CPUBottleneck"]
    out = report.save_html(tmp_path / "copy.html")
    assert out.read_text() == (src / "profiler-report.html").read_text()


def test_profiler_report_rule_json_nested_100000_deep_skipped(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "ProfilerReport-1700000000" / "profiler-output"
    shutil.copytree(data_dir / MIT / "profiler-output", out)
    (out / "profiler-reports" / "StepOutlier.json").write_text("[" * 100_000 + "]" * 100_000)
    report = profiler_report(tmp_path)
    key = "ProfilerReport-1700000000/profiler-output/profiler-reports/StepOutlier.json"
    assert list(report.skipped) == [key] and "not JSON" in report.skipped[key]
    assert "StepOutlier" not in report.rules["rule"].tolist() and len(report.rules) == 10  # of the 11


def test_profiler_report_nothing_there_raises_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no ProfilerReport output"):
        profiler_report(tmp_path)


def test_profiler_report_without_html_save_raises_not_found(data_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(data_dir / MIT / "profiler-output" / "profiler-reports", tmp_path / "profiler-reports")
    report = profiler_report(tmp_path)
    assert report.html is None
    assert len(report.rules) == 11
    with pytest.raises(NotFoundError, match=r"no profiler-report\.html"):
        report.save_html(tmp_path / "x.html")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("threshold:3\nmode:None\nn_outliers:10", {"threshold": "3", "mode": "None", "n_outliers": "10"}),
        ("", {}),
        (None, {}),
        ("no separator\nurl:http://x", {"url": "http://x"}),
        ({"a": 1}, {"a": "1"}),
    ],
)
def test_parse_rule_parameters_text_to_dict(text: object, expected: dict[str, str]) -> None:
    assert parse_rule_parameters(text) == expected
