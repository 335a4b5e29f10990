"""`smx-debug rules evaluate` end to end on simulated profiler output and on a job in the local AWS."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from smx_debug.cli import main
from smx_debug.data.cloudwatch import NAMESPACE
from smx_debug.data.jobs import load_job
from smx_debug.evaluate import evaluate
from smx_debug.local import execution_role
from smx_debug.simulate import Simulation, SimulationSpec


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("sim") / "cpu-job"
    spec = SimulationSpec(scenario="cpu_bottleneck", duration_s=1500.0, onset_s=300.0, cpus=8, gpus=2)
    Simulation(spec).write_local(root / "profiler-output")
    return root


def test_evaluate_json_stdout_has_debugger_shape_and_fires_cpu_bottleneck(job_dir, capsys):
    assert main(["rules", "evaluate", str(job_dir), "--rule", "CPUBottleneck", "--rule", "IOBottleneck",
                 "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["CPUBottleneck", "IOBottleneck"]
    assert {k: list(v) for k, v in out.items()} == {
        k: ["status", "reason", "RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters"] for k in out}
    assert out["CPUBottleneck"]["RuleTriggered"] > 0 and out["CPUBottleneck"]["status"] == "IssuesFound"
    assert "had GPU below 10% while CPU was above 90%" in out["CPUBottleneck"]["reason"]
    assert out["IOBottleneck"]["RuleTriggered"] == 0 and out["IOBottleneck"]["status"] == "NoIssuesFound"


def test_evaluate_what_if_threshold_changes_verdict_without_rerun(job_dir, capsys):
    assert main(["rules", "evaluate", str(job_dir), "--rule", "CPUBottleneck", "--set", "CPUBottleneck.threshold=99",
                 "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)["CPUBottleneck"]
    assert (out["RuleTriggered"], out["RuleParameters"].splitlines()[0]) == (0, "threshold:99")


def test_evaluate_table_output_dir_and_fail_on_issues(job_dir, tmp_path, capsys):
    code = main(["rules", "evaluate", str(job_dir), "--output-dir", str(tmp_path / "reports"), "--fail-on-issues"])
    text = capsys.readouterr().out
    assert code == 1
    assert "CPUBottleneck          IssuesFound" in text
    assert sorted(p.name for p in (tmp_path / "reports").iterdir())[:3] == [
        "BatchSize.json", "CPUBottleneck.json", "Dataloader.json"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "CPUBottleneck.threshold=500"], "error: CPUBottleneck.threshold: must be <= 100 (got 500)"),
        (["--set", "CPUBotleneck.threshold=5"], "error: unknown rule 'CPUBotleneck'; did you mean 'CPUBottleneck'?"),
        (["--set", "threshold=5"], "error: --set expects Rule.param=value, got 'threshold=5'"),
    ],
)
def test_evaluate_bad_input_is_one_error_line_exit_2(job_dir, capsys, args, message):
    assert main(["rules", "evaluate", str(job_dir), *args]) == 2
    assert capsys.readouterr().err.strip() == message


def test_evaluate_live_mode_reports_transition(job_dir, capsys):
    assert main(["rules", "evaluate", str(job_dir), "--live", "--rule", "CPUBottleneck", "--max-updates", "1",
                 "--interval", "0.1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any("CPUBottleneck: InProgress -> IssuesFound RuleEvaluationConditionMet: Evaluation of the rule "
               "CPUBottleneck at step" in line for line in out)
    assert json.loads(out[-1]) == [{"RuleConfigurationName": "CPUBottleneck", "RuleEvaluationStatus": "IssuesFound"}]


def test_load_job_without_debugger_uses_cloudwatch(local_aws):
    sm, cw = local_aws.client("sagemaker"), local_aws.client("cloudwatch")
    sm.create_training_job(
        TrainingJobName="cw-job",
        AlgorithmSpecification={"TrainingImage": "123.dkr.ecr.us-west-2.amazonaws.com/x:1", "TrainingInputMode": "File",
                                "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=(.*)"}]},
        RoleArn=execution_role(local_aws),
        OutputDataConfig={"S3OutputPath": "s3://b/out"},
        ResourceConfig={"InstanceType": "ml.p3.8xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
    )
    desc = sm.describe_training_job(TrainingJobName="cw-job")
    start = desc.get("TrainingStartTime") or desc["CreationTime"]
    cw.put_metric_data(Namespace=NAMESPACE, MetricData=[
        {"MetricName": "GPUUtilization", "Dimensions": [{"Name": "Host", "Value": "cw-job/algo-1"}],
         "Timestamp": datetime.now(UTC) - timedelta(minutes=1), "Value": 100.0}])
    data, info = load_job("cw-job", sagemaker_client=sm, cloudwatch_client=cw)
    assert (info.instance_type, info.instance_count, info.source) == (
        "ml.p3.8xlarge", 1, "CloudWatch /aws/sagemaker/TrainingJobs")
    assert start is not None
    assert data.system[["node", "name", "dimension", "value"]].to_dict("records") == [
        {"node": "algo-1", "name": "gpu0", "dimension": "GPUUtilization", "value": 25.0}]  # 100 over 4 GPUs


def test_evaluate_plan_rules_and_profiler_report_parameters(job_dir, tmp_path, capsys):
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "name: p\nregion: us-west-2\ns3_output_path: s3://bucket/out\nrules:\n"
        "  - name: CPUBottleneck\n    parameters: {threshold: 95}\n"
        "  - name: ProfilerReport\n    parameters: {LowGPUUtilization_threshold_p95: 5}\n"
        "  - name: exploding_tensor\n"
    )
    assert main(["rules", "evaluate", str(job_dir), "--plan", str(plan), "--output", "json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert list(out)[:2] == ["CPUBottleneck", "BatchSize"] and len(out) == 10
    assert out["CPUBottleneck"]["RuleParameters"].startswith("threshold:95\n")
    assert out["LowGPUUtilization"]["RuleParameters"].startswith("threshold_p95:5\n")


def test_load_job_s3_prefix_matches_local_copy(local_aws, job_dir):
    s3 = local_aws.client("s3")
    s3.create_bucket(Bucket="out", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    spec = SimulationSpec(scenario="cpu_bottleneck", duration_s=1500.0, onset_s=300.0, cpus=8, gpus=2)
    Simulation(spec).write_s3("out", "cpu-job/profiler-output", s3_client=s3)
    remote, info = load_job("s3://out/cpu-job/profiler-output", s3_client=s3)
    assert info.source == "s3://out/cpu-job/profiler-output"
    local, _ = load_job(str(job_dir))
    assert (len(remote.system), len(remote.steps)) == (len(local.system), len(local.steps))
    ours = {k: v.to_debugger_json() for k, v in evaluate(remote, ["CPUBottleneck", "StepOutlier"]).items()}
    assert ours == {k: v.to_debugger_json() for k, v in evaluate(local, ["CPUBottleneck", "StepOutlier"]).items()}


TWO_LOW_GPU = (
    "name: p\nregion: us-west-2\ns3_output_path: s3://bucket/out\nrules:\n"
    "  - name: LowGPUUtilization\n    configuration_name: LowGPU-strict\n"
    "    parameters: {threshold_p95: 90, patience: 2, window: 5}\n"
    "  - name: LowGPUUtilization\n    configuration_name: LowGPU-lax\n"
    "    parameters: {threshold_p95: 0, threshold_p5: 0, patience: 2, window: 5}\n"
    "  - name: CPUBottleneck\n"
)


def test_evaluate_plan_one_rule_two_configurations_two_verdicts_json(job_dir, tmp_path, capsys):
    plan = tmp_path / "plan.yaml"
    plan.write_text(TWO_LOW_GPU)
    assert main(["rules", "evaluate", str(job_dir), "--plan", str(plan), "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["LowGPU-strict", "LowGPU-lax", "CPUBottleneck"]
    assert out["LowGPU-strict"]["RuleParameters"].startswith("threshold_p95:90\n")
    assert out["LowGPU-lax"]["RuleParameters"].startswith("threshold_p95:0\n")
    assert (out["LowGPU-strict"]["RuleTriggered"] > 0, out["LowGPU-lax"]["RuleTriggered"]) == (True, 0)


def test_evaluate_plan_one_rule_two_configurations_two_rows_and_set_by_name(job_dir, tmp_path, capsys):
    plan = tmp_path / "plan.yaml"
    plan.write_text(TWO_LOW_GPU)
    assert main(["rules", "evaluate", str(job_dir), "--plan", str(plan), "--set", "LowGPU-strict.threshold_p95=0",
                 "--set", "LowGPU-strict.threshold_p5=0", "--rule", "LowGPUUtilization"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("LowGPU-strict", "LowGPUUtilization", "NoIssuesFound"), ("LowGPU-lax", "LowGPUUtilization", "NoIssuesFound")]


def test_evaluate_plan_two_configurations_live_two_statuses(job_dir, tmp_path, capsys):
    plan = tmp_path / "plan.yaml"
    plan.write_text(TWO_LOW_GPU)
    assert main(["rules", "evaluate", str(job_dir), "--plan", str(plan), "--live", "--max-updates", "1",
                 "--interval", "0.1"]) == 0
    statuses = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert [s["RuleConfigurationName"] for s in statuses] == ["LowGPU-strict", "LowGPU-lax", "CPUBottleneck"]
    assert statuses[0]["RuleEvaluationStatus"] == "IssuesFound"
    assert statuses[1]["RuleEvaluationStatus"] == "InProgress"


POISON = [b'{"Type": "cpu", "Name": "\\ud800", "Dimension": "CPUUtilization", "Value": 1.0, "NodeId": "algo-1", '
          b'"Timestamp": 1700000000.0}',
          b"[" * 5000 + b"]" * 5000,
          b'{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": NaN, "NodeId": "algo-1", '
          b'"Timestamp": 1700000000.0}']


@pytest.fixture(scope="module")
def poisoned_dir(job_dir, tmp_path_factory):
    import shutil

    root = tmp_path_factory.mktemp("poisoned") / "cpu-job"
    shutil.copytree(job_dir, root)
    first = sorted((root / "profiler-output" / "system").rglob("*.json"))[0]
    first.write_bytes(first.read_bytes() + b"\n".join(POISON) + b"\n")
    trace = sorted((root / "profiler-output" / "framework").rglob("*.json"))[0]  # and a poisoned trace
    events = trace.read_bytes().rstrip()
    assert events.endswith(b"]")
    trace.write_bytes(events[:-1] + b', {"ph": "X", "name": "\\ud800", "ts": 1, "dur": 1}, '
                      + b"[" * 5000 + b"]" * 5000 + b"]")
    return root


def test_evaluate_and_report_poisoned_profiler_lines_skipped_exit_0(poisoned_dir, tmp_path, capsys):
    assert main(["rules", "evaluate", str(poisoned_dir), "--rule", "CPUBottleneck", "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["CPUBottleneck"]["status"] == "IssuesFound"
    assert main(["report", str(poisoned_dir), "--out", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").stat().st_size > 0
    assert "Traceback" not in capsys.readouterr().err
