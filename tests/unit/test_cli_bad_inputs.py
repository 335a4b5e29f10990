"""Every bad value and path on the CLI: one line naming it, no traceback, nothing half-written; exit 2 (usage),
or 3 for a job, folder or file that does not exist or holds nothing to evaluate.

The first eight rows are the ones issue 16 found (four tracebacks, four silently accepted); the rest walk the
other options and paths a new user mistypes.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest

from smx_debug.cli import main
from smx_debug.simulate import Simulation, SimulationSpec

ROOT = Path(__file__).resolve().parents[2]
PLAN = str(ROOT / "examples" / "plans" / "cpu_bottleneck_guard.yaml")


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("cli-bad")
    data = base / "job"
    Simulation(SimulationSpec(duration_s=120.0, nodes=1, cpus=2, gpus=1, seed=1)).write_local(data)
    (base / "empty").mkdir()
    (base / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    (base / "a_file").write_text("not a folder\n")
    (base / "folder").mkdir()
    (base / "bad.yaml").write_text("rules: [\n")
    (base / "bad.json").write_text("{\"rules\": \n")
    (base / "empty.yaml").write_text("")
    (base / "unknown_rule.yaml").write_text("rules:\n  - rule: not_a_rule\n")
    (base / "nan.yaml").write_text("rules:\n  - name: CPUBottleneck\n    parameters: {threshold: .nan}\n")
    (base / "inf.yaml").write_text("rules:\n  - name: CPUBottleneck\n    parameters: {threshold: .inf}\n")
    (base / "inf_duration.yaml").write_text(
        "profiler:\n  framework:\n    start_step: 5\n    duration: .inf\nrules:\n  - name: CPUBottleneck\n")
    (base / "big.yaml").write_text("rules:\n  - name: CPUBottleneck\n" + "# padding\n" * 200_000)
    (base / "plan.txt").write_text(Path(PLAN).read_text())  # a sound plan, but not a .yaml/.yml/.json file
    return {"data": str(data), "base": str(base)}


# (id, argv with {data}/{base} placeholders, words the one line must contain)
CASES: list[tuple[str, list[str], list[str]]] = [
    # the eight from the issue
    ("plan-validate-binary-file", ["plan", "validate", "{base}/binary.yaml"], ["binary.yaml", "UTF-8"]),
    ("out-into-missing-folder", ["rules", "evaluate", "{data}", "--out", "{base}/nope/out.json"],
     ["--out", "nope"]),
    ("output-dir-is-a-file", ["rules", "evaluate", "{data}", "--output-dir", "{base}/a_file"],
     ["--output-dir", "a_file", "not a folder"]),
    ("report-out-is-a-folder", ["report", "{data}", "--out", "{base}/folder"], ["--out", "folder", "a folder"]),
    ("plan-render-invalid-job-name", ["plan", "render", PLAN, "--job-name", "my job!"], ["--job-name", "'my job!'"]),
    ("max-updates-negative", ["rules", "evaluate", "{data}", "--live", "--max-updates", "-3"],
     ["--max-updates", "-3"]),
    ("price-nan", ["report", "{data}", "--out", "{base}/r.html", "--price", "nan"], ["--price", "nan"]),
    ("evaluate-empty-folder", ["rules", "evaluate", "{base}/empty"], ["empty", "no profiler data"]),
    # more values
    ("price-negative", ["report", "{data}", "--out", "{base}/r.html", "--price", "-1"], ["--price", "-1"]),
    ("price-inf", ["report", "{data}", "--out", "{base}/r.html", "--price", "inf"], ["--price", "inf"]),
    ("price-not-a-number", ["report", "{data}", "--out", "{base}/r.html", "--price", "cheap"], ["--price", "cheap"]),
    ("instance-count-zero", ["report", "{data}", "--out", "{base}/r.html", "--instance-count", "0"],
     ["--instance-count", "0"]),
    ("interval-zero", ["rules", "evaluate", "{data}", "--live", "--interval", "0"], ["--interval", "0"]),
    ("interval-nan", ["rules", "evaluate", "{data}", "--live", "--interval", "nan"], ["--interval", "nan"]),
    ("max-updates-not-int", ["rules", "evaluate", "{data}", "--live", "--max-updates", "2.5"],
     ["--max-updates", "2.5"]),
    ("unknown-rule", ["rules", "evaluate", "{data}", "--rule", "CPUBotleneck"], ["CPUBotleneck"]),
    ("set-without-equals", ["rules", "evaluate", "{data}", "--set", "CPUBottleneck.threshold"],
     ["CPUBottleneck.threshold"]),
    ("set-unknown-parameter", ["rules", "evaluate", "{data}", "--set", "CPUBottleneck.treshold=3"], ["treshold"]),
    ("set-bad-value", ["rules", "evaluate", "{data}", "--set", "CPUBottleneck.threshold=abc"], ["abc"]),
    ("source-unknown", ["rules", "evaluate", "{data}", "--source", "prometheus"], ["--source", "prometheus"]),
    ("kind-unknown", ["rules", "list", "--kind", "tensor"], ["--kind", "tensor"]),
    ("rules-show-unknown", ["rules", "show", "loss_not_decreasng"], ["loss_not_decreasng"]),
    ("unknown-command", ["plans", "validate", PLAN], ["plans"]),
    # more paths
    ("evaluate-missing-path", ["rules", "evaluate", "/no/such/folder"], ["/no/such/folder"]),
    ("evaluate-plan-missing", ["rules", "evaluate", "{data}", "--plan", "{base}/missing.yaml"], ["missing.yaml"]),
    ("plan-validate-missing", ["plan", "validate", "{base}/missing.yaml"], ["missing.yaml"]),
    ("plan-validate-folder", ["plan", "validate", "{base}/folder"], ["folder"]),
    ("plan-validate-bad-yaml", ["plan", "validate", "{base}/bad.yaml"], ["bad.yaml", "YAML"]),
    ("plan-validate-bad-json", ["plan", "validate", "{base}/bad.json"], ["bad.json", "JSON"]),
    ("plan-validate-empty-file", ["plan", "validate", "{base}/empty.yaml"], ["empty.yaml"]),
    ("plan-validate-unknown-rule", ["plan", "validate", "{base}/unknown_rule.yaml"], ["not_a_rule"]),
    ("plan-validate-invalid-job-name", ["plan", "validate", PLAN, "--job-name=-lead"], ["--job-name", "'-lead'"]),
    ("plan-render-output-path-not-s3", ["plan", "render", PLAN, "--output-path", "bucket/x"], ["bucket/x"]),
    ("plan-render-job-name-too-long", ["plan", "render", PLAN, "--job-name", "j" * 64], ["--job-name", "63"]),
    ("out-is-a-folder", ["rules", "evaluate", "{data}", "--out", "{base}/folder"], ["--out", "folder"]),
    ("output-dir-under-a-file", ["rules", "evaluate", "{data}", "--output-dir", "{base}/a_file/sub"],
     ["--output-dir", "a_file"]),
    ("report-out-missing-folder", ["report", "{data}", "--out", "{base}/nope/r.html"], ["--out", "nope"]),
    ("report-empty-folder", ["report", "{base}/empty", "--out", "{base}/r2.html"], ["empty", "no profiler data"]),
    ("report-plan-binary", ["report", "{data}", "--plan", "{base}/binary.yaml", "--out", "{base}/r3.html"],
     ["binary.yaml"]),
    # fleet (issue 24)
    ("fleet-unknown-query", ["fleet", "idle_gpu_hour", "--root", "{base}"], ["idle_gpu_hour", "idle_gpu_hours"]),
    ("fleet-since-bad", ["fleet", "idle_gpu_hours", "--root", "{base}", "--since", "3x"], ["since", "3x"]),
    ("fleet-top-zero", ["fleet", "top_wasted_jobs", "--root", "{base}", "--top", "0"], ["--top", "0"]),
    ("fleet-idle-threshold-101", ["fleet", "idle_gpu_hours", "--root", "{base}", "--idle-threshold", "101"],
     ["--idle-threshold", "101"]),
    ("fleet-engine-unknown", ["fleet", "idle_gpu_hours", "--engine", "spark"], ["--engine", "spark"]),
    ("fleet-no-root", ["fleet", "idle_gpu_hours"], ["--root"]),
    ("fleet-root-empty-folder", ["fleet", "idle_gpu_hours", "--root", "{base}/empty"],
     ["system_minutes", "empty"]),
    ("fleet-root-is-a-file", ["fleet", "idle_gpu_hours", "--root", "{base}/a_file"], ["a_file", "a file"]),
    ("fleet-out-missing-folder", ["fleet", "rules_fired", "--root", "{base}", "--out", "{base}/nope/x.json"],
     ["--out", "nope"]),
    # issue 20, defect 11
    ("report-onset-huge", ["report", "{data}", "--out", "{base}/r.html", "--onset", "1e30"], ["--onset", "1e30"]),
    ("report-onset-inf", ["report", "{data}", "--out", "{base}/r.html", "--onset", "inf"], ["--onset", "inf"]),
    ("report-onset-negative", ["report", "{data}", "--out", "{base}/r.html", "--onset", "-5"], ["--onset", "-5"]),
    ("set-nan", ["rules", "evaluate", "{data}", "--set", "CPUBottleneck.threshold=nan"],
     ["CPUBottleneck.threshold", "nan"]),
    ("set-inf", ["rules", "evaluate", "{data}", "--set", "CPUBottleneck.threshold=inf"],
     ["CPUBottleneck.threshold", "inf"]),
    ("set-int-parameter-nan", ["rules", "evaluate", "{data}", "--set", "LossNotDecreasing.num_steps=nan"],
     ["LossNotDecreasing.num_steps", "nan"]),
    ("plan-parameter-nan", ["plan", "validate", "{base}/nan.yaml"], ["nan.yaml", "threshold", "nan"]),
    ("plan-parameter-inf", ["plan", "validate", "{base}/inf.yaml"], ["inf.yaml", "threshold", "inf"]),
    ("plan-duration-inf", ["plan", "validate", "{base}/inf_duration.yaml"], ["inf_duration.yaml", "duration"]),
    ("plan-too-big", ["plan", "validate", "{base}/big.yaml"], ["big.yaml", "MB"]),
    ("source-cloudwatch-for-a-folder", ["rules", "evaluate", "{data}", "--source", "cloudwatch"],
     ["--source", "cloudwatch", "job"]),
    ("report-source-cloudwatch-for-a-folder",
     ["report", "{data}", "--source", "cloudwatch", "--out", "{base}/r4.html"], ["--source", "cloudwatch"]),
    ("trace-ledger-table-bad", ["trace", "{data}", "-o", "{base}/t.json", "--ledger-table", "bad table!"],
     ["--ledger-table", "bad table!"]),
    ("report-ledger-table-too-short", ["report", "{data}", "--out", "{base}/r5.html", "--ledger-table", "ab"],
     ["--ledger-table", "ab"]),
    # issue 29, item 16
    ("fleet-since-past-the-calendar", ["fleet", "rules_fired", "--root", "{base}", "--since", "99999999999d"],
     ["since", "99999999999d"]),
    ("plan-validate-txt", ["plan", "validate", "{base}/plan.txt"], ["plan.txt", ".yaml", ".yml", ".json"]),
    ("evaluate-plan-txt", ["rules", "evaluate", "{data}", "--plan", "{base}/plan.txt"], ["plan.txt", ".yaml"]),
    ("plan-validate-two-files", ["plan", "validate", PLAN, PLAN], ["unrecognized", "cpu_bottleneck_guard.yaml"]),
    ("report-same-path-twice", ["report", "{data}", "{data}", "--out", "{base}/r6.html"],
     ["JOB_OR_PATH", "{data}", "twice"]),
    ("report-same-folder-spelled-twice", ["report", "{data}", "{data}/", "--out", "{base}/r6.html"],
     ["JOB_OR_PATH", "{data}/", "twice"]),
    ("report-plan-twice", ["report", "{data}", "--plan", PLAN, "--plan", PLAN, "--out", "{base}/r7.html"],
     ["--plan", "cpu_bottleneck_guard.yaml", "once"]),
    ("evaluate-plan-twice", ["rules", "evaluate", "{data}", "--plan", PLAN, "--plan", "{base}/nan.yaml"],
     ["--plan", "nan.yaml", "once"]),
]


# the rows whose input does not exist or holds no data: exit 3 (ExitStatus.NO_DATA); every other row is usage, 2
NO_DATA = {"evaluate-empty-folder", "evaluate-missing-path", "evaluate-plan-missing", "plan-validate-missing",
           "report-empty-folder", "fleet-root-empty-folder"}


@pytest.mark.parametrize(("argv", "words", "status"),
                         [pytest.param(a, w, 3 if i in NO_DATA else 2, id=i) for i, a, w in CASES])
def test_cli_bad_input_is_one_line_with_its_exit_status(paths: dict[str, str], argv: list[str], words: list[str],
                                                        status: int) -> None:
    argv = [a.format(**paths) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own errors
            code = exc.code  # type: ignore[assignment]
    text = err.getvalue()
    assert code == status, (code, text, out.getvalue())
    assert "Traceback" not in text and "Traceback" not in out.getvalue()
    lines = text.strip().splitlines()
    # one line; a plan file with several problems lists each below it, indented, one per field
    assert len(lines) == 1 or ("problems:" in lines[0] and all(li.startswith("  ") for li in lines[1:])), text
    assert lines[0].startswith("error: ")
    for word in words:
        assert word.format(**paths) in text, (word, text)


def test_cli_bad_inputs_leave_nothing_half_written(paths: dict[str, str]) -> None:
    base = Path(paths["base"])
    assert not (base / "r.html").exists() and not (base / "nope").exists()
    assert not (base / "t.json").exists() and not (base / "r4.html").exists()
    assert not (base / "r6.html").exists() and not (base / "r7.html").exists()


def test_cli_plan_validate_yaml_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    # 1 KB of YAML whose aliases expand to 10**9 nodes: refused by the loader, never expanded
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\nrules: *a9\n")
    assert bomb.stat().st_size < 1500
    done = subprocess.run([sys.executable, "-m", "smx_debug", "plan", "validate", str(bomb)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and "bomb.yaml" in done.stderr and "alias" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
