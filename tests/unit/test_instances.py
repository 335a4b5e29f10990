"""The instance table: every SageMaker training type with accelerators, generated from saved AWS data."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import botocore.session
import pytest

from smx_debug.instances import instance_row, instance_table

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "tools" / "instances" / "generate.py"


def _training_types() -> list[str]:
    model = botocore.session.get_session().get_service_model("sagemaker")
    return list(model.shape_for("TrainingInstanceType").enum)


ACCELERATED = [t for t in _training_types() if re.match(r"ml\.(p|g|trn|inf)\d", t)]


def test_instance_table_every_accelerated_training_type_in_botocore_is_known() -> None:
    assert len(ACCELERATED) > 40  # botocore's enum, not an empty filter
    missing = [t for t in ACCELERATED if instance_row(t) is None]
    assert missing == []
    no_devices = [t for t in ACCELERATED if not (instance_row(t) or {}).get("gpus")
                  and not (instance_row(t) or {}).get("trainium")]
    assert no_devices == []


def test_instance_table_every_training_type_in_botocore_has_vcpus() -> None:
    unknown = [t for t in _training_types() if instance_row(t) is None or not instance_row(t)["vcpus"]]
    assert unknown == []


@pytest.mark.parametrize(("instance", "gpus", "model", "trainium"), [
    ("ml.p5.48xlarge", 8, "H100", 0), ("ml.p5en.48xlarge", 8, "H200", 0), ("ml.p6-b200.48xlarge", 8, "B200", 0),
    ("ml.g6e.12xlarge", 4, "L40S", 0), ("ml.p4de.24xlarge", 8, "A100", 0), ("ml.trn1.32xlarge", 0, None, 16),
    ("ml.trn2.48xlarge", 0, None, 16), ("ml.p3.2xlarge", 1, "V100", 0),
])
def test_instance_row_accelerators_per_node(instance, gpus, model, trainium) -> None:
    row = instance_row(instance)
    assert row is not None
    assert (row["gpus"], row["gpu_model"], row["trainium"]) == (gpus, model, trainium)


def test_instance_table_records_its_sources_and_date() -> None:
    table = instance_table()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", table["as_of"])
    assert "botocore" in table["source"] and "tools/instances" in table["generator"]
    assert table["sources"] and all({"file", "from", "as_of"} <= set(s) for s in table["sources"])


def test_instance_table_unknown_price_is_null_never_invented() -> None:
    rows = instance_table()["instances"]
    assert rows["ml.p3.8xlarge"]["price"] == 14.688  # the published Horovod case's price
    assert all(r["price"] is None or r["price"] > 0 for r in rows.values())


def test_instance_table_committed_output_is_what_the_generator_makes_offline(tmp_path: Path) -> None:
    out = tmp_path / "instances.json"
    done = subprocess.run([sys.executable, str(GENERATOR), "--out", str(out)], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, check=False)
    assert done.returncode == 0, done.stderr
    committed = (ROOT / "src" / "smx_debug" / "htmlreport" / "instances.json").read_text()
    assert out.read_text() == committed


def test_fleet_job_row_type_without_price_keeps_its_gpus_and_a_null_price() -> None:
    from smx_debug.fleet.append import job_row

    row = job_row({"TrainingJobName": "p5-job", "ResourceConfig": {"InstanceType": "ml.p5.48xlarge",
                                                                   "InstanceCount": 2}}, {})
    assert (row["gpus_per_instance"], row["price_per_hour"], row["instance_count"]) == (8, None, 2)
