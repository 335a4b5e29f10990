"""One profiler-data reader: the same files give the same frames from disk and from S3 (issue 11 item 4).

The files are real smdebug output (system metrics, a python timeline with two modes) plus a generated
two-node job with several writer processes, uploaded unchanged to the local S3 (moto server).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from smx_debug.data.jobs import load_job
from smx_debug.evaluate import LoadReport, load_path
from smx_debug.simulate import Simulation, SimulationSpec

RES = Path("third_party/awslabs+sagemaker-debugger/tests/profiler/resources")
REAL = [
    "test_traces/system/incremental/1591160699.algo-1.json",
    "test_traces/system/incremental/1591748100.algo-1.json",
    "test_traces/system/incremental/1591748160.algo-1.json",
    "merge_traces/framework/pevents/2020071317/1594662624718694_905-b88ab1bb8259_pythontimeline.json",
]
SYSTEM_DTYPES = {"timestamp": "datetime64[ns, UTC]", "node": "category", "type": "category", "name": "category",
                 "dimension": "category", "value": "float64"}
STEP_DTYPES = {"node": "str", "rank": "int64", "mode": "str", "step": "int64", "start": "datetime64[ns, UTC]",
               "end": "datetime64[ns, UTC]", "duration": "float64"}


@pytest.fixture(scope="module")
def job_root(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    root = tmp_path_factory.mktemp("one-reader") / "job" / "profiler-output"
    for rel in REAL:
        key = rel.split("/", 1)[1]  # system/incremental/... and framework/pevents/...
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(data_dir / RES / rel, root / key)
    spec = SimulationSpec(nodes=2, cpus=4, gpus=2, duration_s=240.0, initialization_s=30.0, finalization_s=30.0,
                          interval_ms=1000)
    Simulation(spec).write_local(root)
    return root


def test_disk_and_s3_give_the_same_frames_for_the_same_files(local_aws, job_root: Path) -> None:
    s3 = local_aws.client("s3")
    s3.create_bucket(Bucket="one-reader", CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    for path in sorted(p for p in job_root.rglob("*") if p.is_file()):
        s3.put_object(Bucket="one-reader", Key=f"job/profiler-output/{path.relative_to(job_root).as_posix()}",
                      Body=path.read_bytes())
    disk_report, s3_report = LoadReport(), LoadReport()
    disk = load_path(job_root.parent, disk_report)
    remote, _info = load_job("s3://one-reader/job/", s3_client=s3, report=s3_report)

    for frame, dtypes in ((disk.system, SYSTEM_DTYPES), (disk.steps, STEP_DTYPES)):
        assert frame.dtypes.astype(str).to_dict() == dtypes
        assert len(frame) > 0
    pd.testing.assert_frame_equal(remote.system, disk.system)
    pd.testing.assert_frame_equal(remote.steps, disk.steps)
    assert (disk_report.files, disk_report.skipped) == (s3_report.files, s3_report.skipped)

    # rank: 0, 1, ... over (node in natural order, writer pid), never the pid itself
    writers = disk.steps.groupby("node")["rank"].unique().map(sorted).to_dict()
    assert sorted(r for ranks in writers.values() for r in ranks) == list(range(disk.steps["rank"].nunique()))
    assert writers["b88ab1bb8259"] != [905]  # the real trace's pid
    # names: as written; smdebug's real files name every record
    assert disk.system["name"].isna().sum() == 0
    assert {"cpu0", "cpu31"} <= set(disk.system["name"].astype(str))


def test_record_without_name_has_a_null_name_and_is_node_level(tmp_path: Path) -> None:
    target = tmp_path / "system" / "incremental" / "1591160640.algo-1.json"
    target.parent.mkdir(parents=True)
    target.write_text(
        '{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 4.5, "NodeId": "algo-1", '
        '"Timestamp": 1591160699.25}\n'
        '{"Type": "memory", "Dimension": "MemoryUsedPercent", "Value": 7.5, "NodeId": "algo-1", '
        '"Timestamp": 1591160699.5}\n'
    )
    data = load_path(tmp_path)
    assert data.system["name"].isna().tolist() == [False, True]  # smdebug: name=None, never "total"
    assert [s.name for s in data.series("MemoryUsedPercent")] == []  # node-level, like "total"
    assert [(s.name, s.values.tolist()) for s in data.series("MemoryUsedPercent", skip_total=False)] == [("", [7.5])]
