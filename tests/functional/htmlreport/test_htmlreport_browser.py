"""`smx-debug report` on simulated profiler output, rendered by a real headless browser (Debian chromium)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from smx_debug.cli import main
from smx_debug.simulate import Simulation, SimulationSpec

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    spec = SimulationSpec(scenario="cpu_bottleneck", duration_s=1800.0, onset_s=300.0, nodes=2, cpus=16, gpus=4)
    Simulation(spec).write_local(root / "job" / "profiler-output")
    out = root / "report.html"
    assert main(["report", str(root / "job"), "--out", str(out), "--instance-type", "ml.p3.8xlarge",
                 "--title", "sim-cpu-bottleneck"]) == 0
    return out


def test_report_cli_writes_one_self_contained_file(report):
    html = report.read_text()
    assert "http" not in html.lower() and "<script" not in html
    assert "<tr class='fired' data-rule='CPUBottleneck'>" in html
    assert "2 x ml.p3.8xlarge" in html


def test_report_cli_unknown_instance_type_is_an_error(report, capsys):
    assert main(["report", str(report.parent / "job"), "--out", str(report.parent / "x.html"),
                 "--instance-type", "ml.p3.8xlarg"]) == 2
    assert "did you mean 'ml.p3.8xlarge'" in capsys.readouterr().err


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: run `make browser` (apt-get install chromium)")
def test_report_renders_in_headless_chromium(report, tmp_path):
    assert CHROMIUM is not None
    profile = tmp_path / "profile"
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", report.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert len(re.findall(r"<svg\b", dom)) >= 9  # 2 timelines, 4 histograms, 2 heatmaps, step histograms
    assert len(re.findall(r"<polyline\b", dom)) >= 6
    assert re.search(r"<tr class=\"fired\" data-rule=\"CPUBottleneck\">.*?Issues found", dom, re.S)
    shot = tmp_path / "report.png"
    subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}", "--window-size=1400,3000",
         report.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    print(f"screenshot: {shot}")
