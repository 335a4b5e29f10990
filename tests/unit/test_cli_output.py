"""One output convention for every command (aws-cli's): `--output table|text|json` on stdout, given anywhere;
`--out FILE` where a file is wanted instead of stdout. `--json FILE` (rules evaluate, fleet) is `--output json --out
FILE`, as scripts written for earlier versions spell it; the `--json` flag of rules list/show is gone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smx_debug.cli import main
from smx_debug.simulate import Simulation, SimulationSpec

ROOT = Path(__file__).resolve().parents[2]
PLAN = str(ROOT / "examples" / "plans" / "cpu_bottleneck_guard.yaml")


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("out") / "cpu-job"
    spec = SimulationSpec(scenario="cpu_bottleneck", duration_s=600.0, onset_s=120.0, cpus=4, gpus=1, seed=3)
    Simulation(spec).write_local(root / "profiler-output")
    return str(root)


@pytest.mark.parametrize("argv", [
    pytest.param(["--output", "json", "rules", "list"], id="before"),
    pytest.param(["rules", "list", "--output", "json"], id="after"),
])
def test_cli_rules_list_output_json_is_the_catalog(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(argv) == 0
    rules = json.loads(capsys.readouterr().out)
    assert {"LowGPUUtilization", "CPUBottleneck"} <= {r["name"] for r in rules}


def test_cli_rules_list_output_text_is_tab_separated_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["rules", "list", "--output", "text"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(len(line.split("\t")) == 5 for line in lines)  # function, kind, family, summary, profiles
    assert any(line.startswith("CPUBottleneck\tprofiler\t") and line.endswith("\t-") for line in lines)
    assert any(line.startswith("smx_weight_scale\t") and line.endswith("\trecommended") for line in lines)


def test_cli_rules_show_output_json_is_the_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["rules", "show", "CPUBottleneck", "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "CPUBottleneck"


def test_cli_rules_evaluate_output_json_on_stdout_only(job: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["rules", "evaluate", job, "--rule", "CPUBottleneck", "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["CPUBottleneck"] and out["CPUBottleneck"]["status"] == "IssuesFound"


def test_cli_rules_evaluate_output_text_is_tab_separated(job: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["rules", "evaluate", job, "--rule", "CPUBottleneck", "--rule", "IOBottleneck",
                 "--output", "text"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [r[:3] for r in rows] == [["CPUBottleneck", "CPUBottleneck", "IssuesFound"],
                                     ["IOBottleneck", "IOBottleneck", "NoIssuesFound"]]


def test_cli_rules_evaluate_out_file_takes_stdout(job: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "results.json"
    assert _run(["rules", "evaluate", job, "--rule", "CPUBottleneck", "--output", "json", "--out", str(target)]) == 0
    assert capsys.readouterr().out == ""
    assert json.loads(target.read_text())["CPUBottleneck"]["status"] == "IssuesFound"


def test_cli_plan_validate_output_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["plan", "validate", PLAN, "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["file"] == PLAN and out["rules"] >= 1 and isinstance(out["warnings"], list)


def test_cli_plan_render_output_table_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["plan", "render", PLAN, "--output", "table"]) == 2
    assert capsys.readouterr().err.startswith("error: --output")


def test_cli_fleet_list_output_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["fleet", "list", "--output", "json"]) == 0
    assert "idle_gpu_hours" in {q["name"] for q in json.loads(capsys.readouterr().out)}


@pytest.mark.parametrize("argv", [
    pytest.param(["rules", "list", "--json"], id="rules-list"),
    pytest.param(["rules", "show", "CPUBottleneck", "--json"], id="rules-show"),
])
def test_cli_json_flag_is_gone_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(argv) == 2
    assert "--json" in capsys.readouterr().err


@pytest.mark.parametrize("to", ["-", "results.json"])
def test_cli_rules_evaluate_json_file_is_output_json_to_that_file(job: str, to: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert _run(["rules", "evaluate", job, "--plan", PLAN, "--json", to]) == 0
    out = capsys.readouterr().out
    body = out if to == "-" else (tmp_path / to).read_text()
    assert "CPUBottleneck" in json.loads(body)
    assert (out == "") == (to != "-")


def test_cli_output_unknown_format_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["rules", "list", "--output", "yaml"]) == 2
    assert "--output" in capsys.readouterr().err


def test_cli_fleet_passes_only_given_options_library_defaults_apply(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    # the CLI restates no default of smx_debug.fleet and checks nothing the library checks: it passes what was given
    import smx_debug.fleet as fleet
    from smx_debug.fleet.engines import QueryResult

    calls: list[dict[str, object]] = []

    def execute(name: str, **kwargs: object) -> QueryResult:
        calls.append({"name": name, **kwargs})
        import pandas as pd

        return QueryResult(query=name, engine="duckdb", frame=pd.DataFrame(), seconds=0.0)

    monkeypatch.setattr(fleet, "execute", execute)
    assert _run(["fleet", "idle_gpu_hours", "--root", str(tmp_path)]) == 0
    assert calls == [{"name": "idle_gpu_hours", "root": str(tmp_path)}]


def test_cli_fleet_help_says_the_library_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    import inspect

    from smx_debug.fleet import run

    assert _run(["fleet", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    defaults = inspect.signature(run.execute).parameters
    assert f"(default {defaults['since'].default.days}d)" in help_text
    assert f"(default {defaults['engine'].default})" in help_text
    assert f"(default {defaults['n'].default})" in help_text
    assert f"(default {defaults['idle_threshold'].default:g})" in help_text
    assert f"default {defaults['stack_name'].default})" in help_text


def test_cli_report_reads_the_plan_once(job: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from smx_debug.config import DebugPlan

    reads: list[str] = []
    real = DebugPlan.from_file.__func__  # type: ignore[attr-defined]

    def from_file(cls, path, *args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(str(path))
        return real(cls, path, *args, **kwargs)

    monkeypatch.setattr(DebugPlan, "from_file", classmethod(from_file))
    assert _run(["report", job, "--plan", PLAN, "--out", str(tmp_path / "r.html")]) == 0
    assert reads == [PLAN]


LIVE = ["--live", "--rule", "CPUBottleneck", "--max-updates", "1", "--interval", "0.1"]


def test_cli_rules_evaluate_live_fail_on_issues_exits_1(job: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["rules", "evaluate", job, *LIVE, "--fail-on-issues"]) == 1
    assert "CPUBottleneck: InProgress -> IssuesFound" in capsys.readouterr().out


def test_cli_rules_evaluate_live_output_json_is_the_statuses_only(job: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["rules", "evaluate", job, *LIVE, "--output", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == [{"RuleConfigurationName": "CPUBottleneck", "RuleEvaluationStatus": "IssuesFound"}]
    assert "CPUBottleneck: InProgress -> IssuesFound" in err  # the transitions as they happen, on stderr


def test_cli_rules_evaluate_live_with_out_is_usage_error(job: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["rules", "evaluate", job, *LIVE, "--out", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err.startswith("error: --out")
    assert not (tmp_path / "x.json").exists()


def _summary_of_what_it_wrote(args: list[str], target: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """Run the CLI with ``args`` and ``--output json``: the summary it printed, which must name ``target`` and
    its size."""
    assert _run([*args, "--output", "json"]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    assert out["out"] == str(target) and out["bytes"] == target.stat().st_size
    return out


def test_cli_report_output_json_says_what_it_wrote(job: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "r.html"
    out = _summary_of_what_it_wrote(["report", job, "--out", str(target)], target, capsys)
    assert "CPUBottleneck" in out["rules_fired"]
    assert target.read_text().startswith("<!")  # the product is the HTML, untouched by the summary


def test_cli_trace_output_json_says_what_it_wrote(job: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "t.json"
    out = _summary_of_what_it_wrote(["trace", job, "-o", str(target)], target, capsys)
    assert out["events"] == len(json.loads(target.read_text())["traceEvents"])
