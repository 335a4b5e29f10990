"""Every example runs against the embedded local AWS, so none can drift from the API.

(examples/quickstart.ipynb runs in a real Jupyter kernel: tests/functional/test_notebook.py.)

The demo test runs `make demo`'s own entry point (examples/demo.py `main`, default `--out`, from a working
directory without `out/`, as on a fresh clone) with job time compressed further:
the deploy, the SDK launch, the streamed profiler output, the live rules, the handlers, the alarm, the
inbox, the stop and the report are all real; only the pacing differs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from smx_debug.local import LocalAws

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    """`make demo` as a user runs it on a fresh clone: no --out, from a working directory without out/."""
    workdir = tmp_path_factory.mktemp("fresh-clone")
    buffer, errors = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(buffer), \
            contextlib.redirect_stderr(errors):
        patch.chdir(workdir)
        code = _example("demo").main(["--minutes", "14", "--onset", "3", "--speed", "1e6"])
    return code, buffer.getvalue() + errors.getvalue(), workdir / "out" / "demo-report.html"


def test_demo_prints_no_warning_no_dependency_info_and_no_nan(demo_run: tuple[int, str, Path]) -> None:
    _, text, _ = demo_run
    assert not re.search(r"warning|Warning|WARNING|\bINFO\b|Connection pool is full|NaN|<NA>|end of life|"
                         r"Traceback", text), text
    (profiler_report,) = re.findall(r"^\s*ProfilerReport\s+profiler\s+(\S+)", text, re.M)
    assert profiler_report == "NoIssuesFound"


def test_demo_checks_every_call_of_the_deployed_functions_against_their_roles(demo_run: tuple[int, str, Path]) -> None:
    _, text, _ = demo_run
    (line,) = [line for line in text.splitlines() if line.startswith("[iam]")]
    found = re.fullmatch(r"\[iam\] (\d+) calls by deployed functions checked against their roles' policies: 0 denied",
                         line)
    assert found and int(found.group(1)) > 20, line


def test_demo_stops_the_guarded_job_once_and_reports(demo_run: tuple[int, str, Path]) -> None:
    code, text, out = demo_run
    assert code == 0, text
    (stop,) = re.findall(r"\[stop\] (smx-demo-\S+) is (Stopping|Stopped) after job minute ([\d.]+); "
                         r"StopTrainingJob calls: (\d+)", text)
    assert stop[3] == "1"
    assert 3.0 < float(stop[2]) <= 14.0  # after the onset, before the job would have ended
    assert "[lambda] stop_training" in text and '"outcome": "stopped"' in text
    # the readable message and the alarm notification both reached the subscribed queue
    assert "SageMaker Debugger: rule CPUBottleneck found issues in training job" in text  # the deciding source first
    assert re.search(r"\[inbox\] CloudWatch alarm '\S*AlarmCPUBottleneck\S*': OK -> ALARM", text)
    assert re.search(r"onset to stop: [\d.]+ job minutes", text)
    assert f"Report: {out.resolve()}" in text
    html = out.read_text()
    assert "data-rule='CPUBottleneck'" in html and "<tr class='fired' data-rule='CPUBottleneck'>" in html


def test_demo_evaluates_two_configurations_of_one_rule_as_two_rules(demo_run: tuple[int, str, Path]) -> None:
    # The demo's plan configures LowGPUUtilization twice; only the default thresholds fire on the bottleneck.
    code, text, out = demo_run
    assert code == 0, text
    summary = dict(re.findall(r"^\s*(LowGPUUtilization\S*)\s+profiler\s+(\S+)", text, re.M))
    assert summary == {"LowGPUUtilization": "IssuesFound", "LowGPUUtilization-idle": "NoIssuesFound"}
    html = out.read_text()
    assert "<tr class='fired' data-rule='LowGPUUtilization'>" in html
    assert "data-rule='LowGPUUtilization-idle'" in html
    assert "<tr class='fired' data-rule='LowGPUUtilization-idle'>" not in html


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: run `make browser` (apt-get install chromium)")
def test_demo_report_shows_the_fired_rule_in_headless_chromium(demo_run: tuple[int, str, Path],
                                                               tmp_path: Path) -> None:
    assert CHROMIUM is not None
    _, _, out = demo_run
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", out.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert re.search(r"<tr class=\"fired\" data-rule=\"CPUBottleneck\">.*?Issues found", dom, re.S)
    shot = tmp_path / "demo-report.png"
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                    "--window-size=1300,2400", out.as_uri()], capture_output=True, text=True, timeout=120, check=True)
    assert shot.stat().st_size > 10_000


def test_retraining_workflow_example_reproduces_the_published_run(capsys: pytest.CaptureFixture[str],
                                                                   local_aws: LocalAws) -> None:
    # moto keeps its accounts per process: the example's own LocalAws sees what the session's server holds, so
    # a stack a previous test left (SmxDebugGuard) made its CreateStack fail. local_aws empties it first.
    assert _example("retraining_workflow").main() == 0
    text = capsys.readouterr().out
    assert text.count("fired: job stopped") == 6 and text.count("quiet: job completed") == 1
    assert "'num_retraining': 7, 'num_warmup_adjustments': 5, 'num_batch_layer_adjustments': 1" in text



def test_demo_other_teams_jobs_run_beside_it_untouched(demo_run: tuple[int, str, Path]) -> None:
    code, text, _ = demo_run
    assert code == 0, text
    assert re.search(r"\[account\] another team's 4 jobs \(ml-research-\*: not watched, bad metrics, damaged "
                     r"profiler output\) ran beside the demo's the whole time: untouched \(0 stops, 0 messages, "
                     r"0 metrics\)", text), text


def test_demo_stops_the_exploding_pytorch_job_once_with_the_evaluator_alone(demo_run: tuple[int, str, Path]) -> None:
    code, text, _ = demo_run
    assert code == 0, text
    assert re.search(r"\[tensors\] smx-demo-cnn-\S+: plan guard 'evaluator' with ExplodingTensor \(stop_job, notify\): "
                     r"DebugHookConfig, ProfilerConfig, no DebugRuleConfigurations", text), text
    (onset, fired, stopped, steps) = re.findall(
        r"\[result\] job 3 \(smx-demo-cnn-\S+, no Debugger, tensors judged by the smx-debug evaluator\): onset at "
        r"step (\d+) -> ExplodingTensor at step (\d+) -> stopped at step (\d+): (\d+) steps from onset to stop",
        text)[0]
    assert int(onset) <= int(fired) <= int(stopped) < 400 and int(steps) == int(stopped) - int(onset)
    assert re.search(r"\[tensors\] training ended: job Stopped, stopped by SIGTERM at step \d+.*StopTrainingJob "
                     r"calls: 1", text), text


def test_demo_fleet_query_prints_idle_gpu_cost_by_job_and_team_including_the_other_team(
        demo_run: tuple[int, str, Path]) -> None:
    # The last step: the deployed evaluator and collector run, then idle_gpu_hours answers from what the stack's
    # functions wrote into the local S3: the watched jobs (team from their tag) and the other team's unwatched jobs.
    code, text, _ = demo_run
    assert code == 0, text
    collected = re.search(r"\[fleet\] fleet collector \(\S+FleetCollector\S+\): (\d+) jobs' metadata, (\d+) unwatched "
                          r"jobs' CloudWatch minutes, (\d+) verdict-log objects compacted into (\d+) rows", text)
    assert collected, text
    jobs, unwatched, objects, verdicts = map(int, collected.groups())
    assert jobs >= 6 and unwatched == 4 and objects >= 1 and verdicts >= 2, collected.group(0)
    assert re.search(r"^\s*job\s+team\s+instance_type\s+idle_gpu_hours\s+idle_cost_usd$", text, re.M), text
    rows = {m.group(1): (m.group(2), float(m.group(3)), float(m.group(4))) for m in re.finditer(
        r"^\s*((?:smx-demo|ml-research)-\S+)\s+(\S+)\s+ml\.\S+\s+([\d.]+)\s+([\d.]+)$", text, re.M)}
    assert any(job.startswith("smx-demo-nodebugger-") and team == "vision" and hours > 0 and cost > 0
               for job, (team, hours, cost) in rows.items()), rows
    assert rows.get("ml-research-opted-out", ("",))[0] == "research", rows
    # job 1, which Debugger's rules stopped before any evaluator run saw it: its minutes, from its profiler output,
    # appended by the evaluator once it ended (idle from the onset: 2 nodes x 4 GPUs)
    assert any(job.startswith("smx-demo-resnet50-") and team == "vision" and hours > 0 and cost > 0
               for job, (team, hours, cost) in rows.items()), rows
    assert re.search(rf"\[fleet\] {len(rows)} jobs idled GPUs: [\d.]+ GPU hours, \$[\d.]+ at list price", text), text
