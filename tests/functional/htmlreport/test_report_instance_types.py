"""`smx-debug report --instance-type` for today's instance types: a type without a known price is reported as
such, never an exit 2."""

from __future__ import annotations

from smx_debug.cli import main
from smx_debug.simulate import Simulation, SimulationSpec


def test_report_cli_p5_without_known_price_reports_price_unknown(tmp_path, capsys):
    Simulation(SimulationSpec(duration_s=300.0, cpus=4, gpus=8)).write_local(tmp_path / "job" / "profiler-output")
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "job"), "--out", str(out), "--instance-type", "ml.p5.48xlarge"]) == 0
    html = out.read_text()
    assert "1 x ml.p5.48xlarge" in html
    assert "unknown" in html.split("id='cost'")[1].split("</table>")[0]  # the price row says so


def test_report_cli_p5_with_price_override_costs_the_job(tmp_path):
    Simulation(SimulationSpec(duration_s=300.0, cpus=4, gpus=8)).write_local(tmp_path / "job" / "profiler-output")
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "job"), "--out", str(out), "--instance-type", "ml.p5.48xlarge",
                 "--price", "36.0"]) == 0
    assert "$36.00 per instance-hour" in out.read_text()
