"""The report in a real headless browser (Debian chromium): the demo's report and one of real Debugger output.

For each: no console message at error level, every chart drawn (a line with points in every SVG chart), the
verdict first, the stop marked, and a screenshot in ``out/`` that is not blank. The screenshot check and the
console check are each proven able to fail on a control page.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from smx_debug.cli import main
from smx_debug.contracts import stop_key
from smx_debug.data.framework_trace import framework_metrics
from smx_debug.data.jobs import load_job
from smx_debug.evaluate import evaluate
from smx_debug.htmlreport import JobOutcome, ReportInput, write_report
from smx_debug.htmlreport.outcome import outcome_from_ledger_item
from smx_debug.simulate import Simulation, SimulationSpec

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "out"
REAL = ROOT / "tests" / "data" / "third_party" / "awslabs+sagemaker-debugger" / "tests" / "profiler" / "resources" \
    / "merge_traces"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0"]


def _chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
                          capture_output=True, text=True, timeout=180, check=True)


def _console_errors(stderr: str) -> list[str]:
    """Every console message of the page (chromium logs them as ``...:CONSOLE...``): the report has no script,
    so any message at all is an error, a warning or an uncaught exception."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln]


def _png_is_blank(path: Path) -> bool:
    """True when the PNG has (almost) no variation: its filtered scanlines take very few distinct values."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    distinct = len(set(raw[:: max(1, len(raw) // 2_000_000)]))
    nonzero = sum(1 for b in raw[:: max(1, len(raw) // 200_000)] if b not in (0, 255))
    return distinct < 32 or nonzero < 500


def _check_report(html: Path, name: str, tmp_path: Path, *, timelines: bool = True) -> tuple[str, Path]:
    profile = tmp_path / f"profile-{name}"
    done = _chromium(html, profile, "--dump-dom")
    assert _console_errors(done.stderr) == []
    dom = done.stdout
    # the verdict comes first and says healthy or not
    assert dom.index('id="verdict"') < dom.index('id="rules"')
    assert re.search(r'<p class="headline">(Not healthy|Healthy|No verdict): ', dom)
    # every chart drawn: each SVG chart has a line with at least two points, none says "no data"
    charts = re.findall(r'<svg class="chart[^"]*".*?</svg>', dom, re.S)
    assert charts
    for chart in charts:
        lines = re.findall(r'<polyline[^>]*points="([^"]*)"', chart)
        assert lines and max(len(p.split()) for p in lines) >= 2, chart[:200]
        assert 'class="nodata"' not in chart
    # the stop is marked on the timelines (a job with tensors only has none)
    assert 'class="mark mark-stop"' in dom or not timelines
    OUT.mkdir(exist_ok=True)
    shot = OUT / f"{name}.png"
    shot.unlink(missing_ok=True)
    _chromium(html, profile, f"--screenshot={shot}", "--window-size=1300,2200")
    assert not _png_is_blank(shot)
    print(f"screenshot: {shot}")
    return dom, shot


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: run `make browser` (apt-get install chromium)")
def test_checks_can_fail_on_control_pages(tmp_path):
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body style='background:#fff'></body></html>")
    shot = tmp_path / "blank.png"
    _chromium(blank, tmp_path / "p1", f"--screenshot={shot}", "--window-size=800,600")
    assert _png_is_blank(shot)
    noisy = tmp_path / "noisy.html"
    noisy.write_text("<!DOCTYPE html><html><body><script>console.error('boom-error');</script></body></html>")
    assert any("boom-error" in ln for ln in _console_errors(_chromium(noisy, tmp_path / "p2", "--dump-dom").stderr))
    thrown = tmp_path / "thrown.html"
    thrown.write_text("<!DOCTYPE html><html><body><script>undefined_fn();</script></body></html>")
    assert any("Uncaught" in ln for ln in _console_errors(_chromium(thrown, tmp_path / "p3", "--dump-dom").stderr))


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}_browser", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "demo-report.html"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = _example("demo").run(minutes=14, onset_min=3.0, speed=1e6, out=out)
    assert code == 0
    return out


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: run `make browser` (apt-get install chromium)")
def test_demo_report_in_headless_chromium(demo_report, tmp_path):
    dom, _ = _check_report(demo_report, "demo-report", tmp_path)
    verdict = dom[dom.index('id="verdict"'):dom.index('id="rules"')]
    assert "Not healthy: " in verdict and "Stopped at " in verdict and "(ledger)" in verdict
    assert "Cost so far $" in verdict
    for kind in ("onset", "trigger", "stop"):
        assert f'class="mark mark-{kind}"' in dom
    assert len(re.findall(r"<details data-node=", dom)) == 2  # one per node, closed by default


@pytest.fixture(scope="module")
def real_report(tmp_path_factory) -> Path:
    """Real smdebug output (a TF job's python and model timelines); the stop is a ledger item we write.

    No public job has both its profiler output and a stop, so the stop comes from the ledger item our
    stop_training function would write (``contracts.stop_key``), at the last recorded step.
    """
    data, info = load_job(str(REAL))
    events = framework_metrics(REAL, progress=False)
    last_end = int(data.steps["end"].max().value)
    item = {"pk": stop_key("tf-merge-traces"), "state": "done", "done_at": last_end / 1e9,
            "actor": "smx-debug stop_training"}
    outcome = outcome_from_ledger_item(JobOutcome(status="Stopped"), item)
    out = tmp_path_factory.mktemp("real") / "real-debugger-report.html"
    write_report(ReportInput(job_name="tf-merge-traces (real smdebug output)", data=data, results=evaluate(data),
                             source=info.source, events=events, outcome=outcome), out)
    return out


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: run `make browser` (apt-get install chromium)")
def test_real_debugger_output_report_in_headless_chromium(real_report, tmp_path):
    dom, _ = _check_report(real_report, "real-debugger-report", tmp_path)
    assert "Stopped at " in dom and "smx-debug stop_training (ledger)" in dom
    loop = dom[dom.index('id="loop"'):dom.index('id="steps"')]
    assert "dataset::GetNext" in loop and "Data loading share" in loop


def test_report_cli_writes_one_self_contained_file(tmp_path):
    spec = SimulationSpec(scenario="cpu_bottleneck", duration_s=900.0, onset_s=300.0, nodes=2, cpus=8, gpus=2)
    Simulation(spec).write_local(tmp_path / "job" / "profiler-output")
    out = tmp_path / "report.html"
    assert main(["report", str(tmp_path / "job"), "--out", str(out), "--instance-type", "ml.p3.8xlarge",
                 "--title", "sim-cpu-bottleneck", "--onset", spec.onset.isoformat()]) == 0
    html = out.read_text()
    assert "http" not in html.lower() and "<script" not in html
    assert "<tr class='fired' data-rule='CPUBottleneck'>" in html
    assert "2 x ml.p3.8xlarge" in html and "mark mark-onset" in html


def test_report_cli_several_jobs_side_by_side(tmp_path):
    for name, scenario in (("a", "healthy"), ("b", "cpu_bottleneck")):
        spec = SimulationSpec(scenario=scenario, duration_s=600.0, onset_s=120.0, cpus=4, gpus=2)
        Simulation(spec).write_local(tmp_path / name / "profiler-output")
    out = tmp_path / "cmp.html"
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out),
                 "--instance-type", "ml.g4dn.12xlarge"]) == 0
    html = out.read_text()
    rows = dict(re.findall(r"<tr><td><b>(\w)</b></td>.*?<td><span data-count='job\d-rules-fired'>\d+</span>: ([^<]*)<",
                           html))
    assert set(rows) == {"a", "b"}
    assert "CPUBottleneck" in rows["b"] and "CPUBottleneck" not in rows["a"]
    assert "GPU utilization, mean of all GPUs" in html and html.count("<details data-job=") == 2


def test_report_cli_unknown_instance_type_is_an_error(tmp_path, capsys):
    Simulation(SimulationSpec(duration_s=300.0, cpus=2, gpus=1)).write_local(tmp_path / "job" / "profiler-output")
    assert main(["report", str(tmp_path / "job"), "--out", str(tmp_path / "x.html"),
                 "--instance-type", "ml.p3.8xlarg"]) == 2
    assert "did you mean 'ml.p3.8xlarge'" in capsys.readouterr().err


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: run `make browser` (apt-get install chromium)")
def test_report_of_a_job_that_wrote_tensors_shows_the_fired_tensor_rule_in_headless_chromium(local_aws, tmp_path):
    """`smx-debug report JOB` for a job guarded by tensor rules alone (no profiler output, no CloudWatch metrics):
    the verdict names the fired tensor rule, the tensor section charts its statistic against the threshold with the
    trigger step marked, and the stop is read from DescribeTrainingJob."""
    import numpy as np

    from smx_debug import local
    from smx_debug.tensors import Collection, TrialWriter

    local.install(local_aws)
    s3, sagemaker = local_aws.client("s3"), local_aws.client("sagemaker")
    s3.create_bucket(Bucket="smx-out", CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    job = "cnn-explodes"
    sagemaker.create_training_job(
        TrainingJobName=job, RoleArn=local.execution_role(local_aws),
        AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://smx-out/model"},
        ResourceConfig={"InstanceType": "ml.g4dn.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
        StoppingCondition={"MaxRuntimeInSeconds": 3600}, ProfilerConfig={"DisableProfiler": True},
        DebugHookConfig={"S3OutputPath": "s3://smx-out/debug", "CollectionConfigurations": [
            {"CollectionName": "gradients"}]})
    local.set_training_job_status(local_aws, job, "InProgress")
    rng = np.random.default_rng(0)
    with TrialWriter(f"s3://smx-out/debug/{job}/debug-output", s3_client=s3) as w:
        w.write_collections([Collection(name="gradients", include_regex=("^gradient",))])
        start = time.time()  # the job trains now: a step saved every 10 ms
        for step in range(0, 300, 10):
            grad = rng.normal(size=(16, 16)).astype(np.float32) * (1e-2 if step < 200 else 1e-10)
            w.write_step(step, mode="train", wall_time=start + step / 1000,
                         tensors={"gradient/Net_fc1.weight": grad, "CrossEntropyLoss_output_0": np.float32(1.0)})
        w.training_end()
    time.sleep(max(0.0, start + 0.4 - time.time()))  # stopped after its last step
    sagemaker.stop_training_job(TrainingJobName=job)
    local.tick(local_aws)
    out = tmp_path / "tensor-report.html"
    with local_aws.environment():
        assert main(["report", job, "--rule", "VanishingGradient", "--rule", "ExplodingTensor", "--out", str(out)]) == 0
    html = out.read_text()
    assert "1 x ml.g4dn.xlarge" in html  # cost from the job's instance over its saved steps' time
    dom, _ = _check_report(out, "tensor-report", tmp_path, timelines=False)
    verdict = dom[dom.index('id="verdict"'):dom.index('id="rules"')]
    assert "Not healthy: VanishingGradient fired first" in verdict and "Stopped at " in verdict
    assert "do not match the data" not in verdict and "after the first trigger" in verdict  # wall times of steps
    assert re.search(r"fired first at [^(]+\(\d+ ms into the job\)", verdict), verdict
    tensors = dom[dom.index('id="tensors"'):dom.index('id="timeline"')]
    assert "VanishingGradient (VanishingGradient) on gradient/Net_fc1.weight" in tensors
    assert 'class="threshold"' in tensors and "fires below 1e-07" in tensors and "fired at step 200" in tensors
    assert "mean absolute gradient (log scale)" in tensors
    assert "ExplodingTensor" not in tensors  # did not fire: no chart
