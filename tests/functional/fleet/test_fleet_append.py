"""Appending is incremental and idempotent per (job, minute), tolerant of damaged data, and reports by reason."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pyarrow.parquet as pq
import pytest
from botocore.exceptions import ClientError

from smx_debug import fleet
from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.fleet.append import verdicts_from_lines
from smx_debug.fleet.engines import DAMAGED_FILE, OTHER_SCHEMA
from smx_debug.fleet.write import DAMAGED_FILE as DAMAGED_ON_WRITE
from smx_debug.simulate.fleet import FleetSimulation, FleetSpec

SPEC = FleetSpec(jobs=2, nodes=2, minutes=8, interval_s=15.0, cpus=1, start=datetime(2026, 11, 2, 23, 55, tzinfo=UTC))


def _rows(root: Path, table: str) -> pd.DataFrame:
    return pd.concat([pq.read_table(f).to_pandas() for f in sorted((root / table).rglob("*.parquet"))],
                     ignore_index=True)


@pytest.fixture()
def sim_raw(tmp_path: Path) -> tuple[FleetSimulation, Path]:
    sim = FleetSimulation(SPEC)
    sim.write_local(tmp_path / "raw")
    return sim, tmp_path / "raw"


def test_append_profiler_rerun_never_doubles_rows(sim_raw, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sim, raw = sim_raw
    job = sim.jobs[0]
    first = fleet.append_profiler(tmp_path / "ds", job.name, raw / job.name, start=SPEC.start)
    again = fleet.append_profiler(tmp_path / "ds", job.name, raw / job.name, start=SPEC.start)
    rows = _rows(tmp_path / "ds", "system_minutes")
    # 8 minutes x 2 nodes x (4 GPUs x 2 dimensions + 1 CPU)
    assert first.rows["system_minutes"] == len(rows) == 8 * 2 * 9
    assert again.rows["system_minutes"] == 0 and again.replaced["system_minutes"] == len(rows)
    assert not rows.duplicated(["job", "node", "minute", "name", "dimension"]).any()
    # partitioned by hour: the job crosses midnight, so two hour folders, one file per job in each
    assert sorted(p.name for p in (tmp_path / "ds" / "system_minutes").iterdir()) == ["hour=2026110223",
                                                                                     "hour=2026110300"]


def test_append_profiler_incremental_reads_from_the_last_stored_minute(sim_raw, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sim, raw = sim_raw
    job = sim.jobs[0]
    files = sorted((raw / job.name).rglob("*.json"))
    later = [f for f in files if int(f.name.split(".")[0]) >= SPEC.start.timestamp() + 4 * 60]
    held = {f: f.read_bytes() for f in later}
    for f in later:
        f.unlink()  # the job has written its first 4 minutes only
    fleet.append_profiler(tmp_path / "ds", job.name, raw / job.name)
    assert fleet.last_minute(tmp_path / "ds", job.name) == datetime(2026, 11, 2, 23, 58, tzinfo=UTC)
    for f, data in held.items():
        f.write_bytes(data)
    report = fleet.append_profiler(tmp_path / "ds", job.name, raw / job.name)
    assert report.replaced["system_minutes"] == 2 * 9  # the last stored minute, read again
    assert report.rows["system_minutes"] == 4 * 2 * 9
    assert len(_rows(tmp_path / "ds", "system_minutes")) == 8 * 2 * 9


def test_append_profiler_cut_records_are_counted_by_reason(sim_raw, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sim, raw = sim_raw
    job = sim.jobs[0]
    last = sorted((raw / job.name).rglob("*.json"))[-1]
    data = last.read_bytes()
    last.write_bytes(data[: len(data) - 40])  # a file cut mid-write
    report = fleet.append_profiler(tmp_path / "ds", job.name, raw / job.name)
    assert report.skipped == {"malformed lines": 1}


def test_damaged_dataset_file_is_skipped_by_queries_and_replaced_by_appends(sim_raw, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sim, raw = sim_raw
    root = tmp_path / "ds"
    for job in sim.jobs:
        fleet.append_profiler(root, job.name, raw / job.name)
        fleet.append_job(root, sim.describe(job), sim.tags(job))
    victim = sorted((root / "system_minutes").rglob("*.parquet"))[0]
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    result = fleet.execute("dataset_files", root=root, since="2026-11-01")
    assert result.skipped == {DAMAGED_FILE: 1}
    assert str(victim) not in set(result.frame["file"])
    report = fleet.append_profiler(root, sim.jobs[0].name, raw / sim.jobs[0].name, start=SPEC.start)
    assert report.skipped == {DAMAGED_ON_WRITE: 1}
    assert fleet.execute("dataset_files", root=root, since="2026-11-01").skipped == {}


@pytest.mark.parametrize(("table", "name"), [
    ("system_minutes", "0-first.parquet"),  # DuckDB binds the first file's columns: a BinderException
    ("system_minutes", "zz-last.parquet"),  # a later file: "schema mismatch in glob"
    ("training_jobs", "0-first.parquet"),
])
def test_parquet_file_of_another_schema_is_skipped_and_counted_by_queries(sim_raw, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                          table: str, name: str) -> None:
    import pyarrow as pa

    sim, raw = sim_raw
    root = tmp_path / "ds"
    for job in sim.jobs:
        fleet.append_profiler(root, job.name, raw / job.name)
        fleet.append_job(root, sim.describe(job), sim.tags(job))
    before = fleet.execute("top_wasted_jobs", root=root, since="2026-11-01")
    folder = sorted(p.parent for p in (root / table).rglob("*.parquet"))[0]
    stranger = folder / name  # readable Parquet, but not this table's columns
    pq.write_table(pa.table({"job": ["x"], "answer": [42]}), stranger)
    result = fleet.execute("top_wasted_jobs", root=root, since="2026-11-01")
    assert result.skipped == {OTHER_SCHEMA: 1}
    pd.testing.assert_frame_equal(result.frame, before.frame)
    assert result.files == before.files and result.rows_scanned == before.rows_scanned


def test_append_verdicts_rerun_is_one_row_per_job_rule_event_action_and_time(tmp_path: Path) -> None:
    from smx_debug.contracts import SOURCE_DEBUGGER

    when = datetime(2026, 11, 2, 23, 59, 30, tzinfo=UTC)
    rows = [fleet.Verdict(job="a", rule="LowGPU", event="trigger", verdict="IssuesFound", source=SOURCE_DEBUGGER,
                          time=when),
            fleet.Verdict(job="a", rule="LowGPU", event="action", action="stop", verdict="Stopping",
                          source=SOURCE_DEBUGGER, time=when)]
    fleet.append_verdicts(tmp_path, rows)
    fleet.append_verdicts(tmp_path, rows)
    stored = _rows(tmp_path, "verdicts")
    assert len(stored) == 2 and stored["action"].isna().sum() == 1


def test_verdicts_from_lines_reads_rows_and_counts_damaged_lines() -> None:
    good = ('{"job": "j", "rule": "LowGPU", "rule_type": "LowGPUUtilization", "event": "trigger", '
            '"verdict": "IssuesFound", "action": null, "source": "SageMaker Debugger", '
            '"time": "2026-11-03T00:00:00.000+00:00", "detail": null}')
    bad_row = good.replace('"trigger"', '"fired"')
    body = "\n".join([good, "not json", bad_row, good[:40]]).encode()
    rows, skipped = verdicts_from_lines(body)
    assert [(r.job, r.event, r.time) for r in rows] == [("j", "trigger", datetime(2026, 11, 3, tzinfo=UTC))]
    assert skipped == {"verdict lines not JSON": 1, "verdict lines not a valid row": 1,
                       "verdict lines cut mid-write": 1}


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"time": datetime(2026, 1, 1)}, "time"),
    ({"source": "someone"}, "source"),
    ({"event": "fired"}, "event"),
])
def test_verdict_bad_value_names_the_field(kwargs: dict[str, object], field: str) -> None:
    from pydantic import ValidationError

    base: dict[str, object] = {"job": "a", "rule": "r", "event": "trigger", "verdict": "IssuesFound",
                               "source": "smx-debug evaluator", "time": datetime(2026, 1, 1, tzinfo=UTC)}
    with pytest.raises(ValidationError, match=field):
        fleet.Verdict(**{**base, **kwargs})


BAD_JOBS = ["../../../outside", "a/b", "guarded-a\x00x", "-lead", "j" * 64, "guarded-\udc80", ".."]


@pytest.mark.parametrize("job", BAD_JOBS)
def test_append_job_name_not_sagemakers_is_refused_naming_job_and_writes_nothing(tmp_path: Path, job: str) -> None:
    from pydantic import ValidationError

    root = tmp_path / "a" / "b" / "c" / "ds"
    when = datetime(2026, 11, 2, 23, 59, tzinfo=UTC)
    with pytest.raises(ValidationError, match="job"):
        fleet.Verdict(job=job, rule="LowGPU", event="trigger", verdict="IssuesFound", source="smx-debug evaluator",
                      time=when)
    # the same name through every append that takes one: refused where a name becomes a path
    with pytest.raises(ConfigError, match="job"):
        fleet.append_job(root, {"TrainingJobName": job, "TrainingJobStatus": "InProgress"}, {}, now=when)
    system = pd.DataFrame({"timestamp": [when], "node": ["algo-1"], "type": ["gpu"], "name": ["gpu0"],
                           "dimension": ["GPUUtilization"], "value": [50.0]})
    with pytest.raises(ConfigError, match="job"):
        fleet.append_system_minutes(root, job, system, source="debugger")
    with pytest.raises(ConfigError, match="job"):
        fleet.last_minute(root, job)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize(("field", "value"), [
    ("rule", ""), ("rule", "x" * 257), ("rule", "CPU\nBottleneck"), ("rule", "CPU\udc80"),
    ("rule_type", "CPU\udc80"), ("verdict", "\udc80"), ("action", "stop\udc80"), ("detail", "\udc80"),
])
def test_verdict_name_or_text_sagemaker_would_refuse_names_the_field(field: str, value: str) -> None:
    from pydantic import ValidationError

    base: dict[str, object] = {"job": "a", "rule": "r", "event": "trigger", "verdict": "IssuesFound",
                               "source": "smx-debug evaluator", "time": datetime(2026, 1, 1, tzinfo=UTC)}
    with pytest.raises(ValidationError, match=field):
        fleet.Verdict(**{**base, field: value})


def test_verdict_rule_configuration_name_may_be_any_one_line() -> None:
    # SageMaker's RuleConfigurationName is '.*' (1-256): a name with spaces, slashes and dots is a rule's name
    row = fleet.Verdict(job="a", rule="loss / v2 (..)", event="trigger", verdict="IssuesFound",
                        source="smx-debug evaluator", time=datetime(2026, 1, 1, tzinfo=UTC))
    assert row.rule == "loss / v2 (..)"


def test_run_query_missing_dataset_names_the_table_and_root(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"'system_minutes'.*" + str(tmp_path)):
        fleet.run_query("idle_gpu_hours", root=tmp_path)


def test_run_query_without_root_on_duckdb_names_root() -> None:
    with pytest.raises(ConfigError, match="root"):
        fleet.run_query("idle_gpu_hours")


class _FailingSageMaker:
    """DescribeTrainingJob that fails with one error code (collect's first call for a job)."""

    def __init__(self, code: str, message: str) -> None:
        self.code, self.message = code, message
        self.meta = SimpleNamespace(region_name="us-east-1")

    def describe_training_job(self, **_: object) -> dict[str, object]:
        raise ClientError({"Error": {"Code": self.code, "Message": self.message}}, "DescribeTrainingJob")


def test_collect_counts_a_missing_job_as_job_not_found(local_aws, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = fleet.collect(tmp_path / "fleet", ["no-such-job"], sagemaker_client=local_aws.client("sagemaker"))
    assert report.failed_jobs["no-such-job"].startswith("JobNotFoundError: ")


@pytest.mark.parametrize(("code", "message", "reason"), [
    ("ValidationException", "Requested resource not found.", "JobNotFoundError"),
    ("ValidationException", "1 validation error detected: Value 'a b' failed to satisfy constraint", "JobNotFoundError"),
    ("ResourceNotFound", "gone", "JobNotFoundError"),
    ("AccessDeniedException", "not authorized", "AccessDeniedError"),
    ("InternalFailure", "try again", "InternalFailure"),
])
def test_collect_describe_errors_are_translated_by_data_sources(code: str, message: str, reason: str,
                                                                tmp_path: Path) -> None:
    report = fleet.collect(tmp_path / "fleet", ["job-a"], sagemaker_client=_FailingSageMaker(code, message))
    assert report.failed_jobs["job-a"].startswith(f"{reason}: ")
    assert report.skipped == {f"jobs failed ({reason})": 1}
