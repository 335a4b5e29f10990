"""The evaluator's Lambda asset (code directory + dependency layer, built without Docker) runs on a bare runtime.

The layer is built by infra/evaluator_asset.py for THIS machine's platform (the deployed one is arm64 /
Python 3.14, which cannot run here) from the same pins and strip rules, unzipped beside the code directory and
imported by an interpreter that has only boto3 (the Lambda runtime's libraries). The handler then runs one
scheduled invocation against the local AWS and stops a bottlenecked job through the action path.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from watch_support import BUCKET, action_env, create_job, publish_minutes

from infra.evaluator_asset import (
    LAMBDA_LIMIT_BYTES,
    LAMBDA_TARGET,
    build_layer,
    host_target,
    stage_evaluator_code,
    unzipped_size,
)
from smx_debug import local
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker import job_metrics
from smx_debug.local.sagemaker.job_metrics import Scenario

pytestmark = pytest.mark.slow

RUN = """
import json, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[2]]
started = time.perf_counter()
import handler
imported = time.perf_counter()
result = handler.handler({"source": "aws.events", "detail-type": "Scheduled Event"}, None)
done = time.perf_counter()
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"moto", "sagemaker", "yaml", "aws_cdk", "pytest"})
print(json.dumps({"result": result, "import_s": imported - started, "run_s": done - imported, "heavy": heavy,
                  "numpy": sys.modules["numpy"].__file__, "package": sys.modules["smx_debug"].__file__}))
"""


def test_lambda_asset_imports_on_a_bare_runtime_and_stops_a_job(
    boto3_only_python: Path, local_aws: LocalAws, tmp_path: Path
) -> None:
    layer_zip = build_layer(host_target())
    layer = tmp_path / "opt"
    with zipfile.ZipFile(layer_zip) as archive:
        archive.extractall(layer)
    code = stage_evaluator_code()
    from watch_support import make_table

    make_table(local_aws)
    env = action_env(local_aws, SMX_DEFAULT_RULES='[{"rule": "CPUBottleneck"}, {"rule": "ExplodingTensor"}]')
    create_job(local_aws, "guarded-asset")
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=15)
    job_metrics.set_start_time(local_aws, "guarded-asset", start)
    publish_minutes(local_aws, "guarded-asset", start=start, first=0, last=16,
                    scenario=Scenario(kind="cpu_bottleneck", onset=0))
    _exploding_tensor_job(local_aws, "guarded-asset-tensors", start)
    completed = subprocess.run(
        [str(boto3_only_python), "-I", "-c", RUN, str(code), str(layer / "python")],
        env={"PATH": os.environ.get("PATH", ""), **local_aws.environ(),
             **{k: v for k, v in env.items() if k != "SMX_INBOX"}, "SMX_FLEET_BUCKET": BUCKET},
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    out = json.loads(completed.stdout.strip().splitlines()[-1])
    assert out["heavy"] == []
    assert out["package"] == str(code / "smx_debug" / "__init__.py")
    assert out["numpy"].startswith(str(layer))
    fired = sorted((t["job"], t["rule"]) for t in out["result"]["triggers"])
    assert fired == [("guarded-asset", "CPUBottleneck"), ("guarded-asset-tensors", "ExplodingTensor")], json.dumps(out["result"])
    assert local.stop_calls(local_aws, "guarded-asset") == 1
    assert local.stop_calls(local_aws, "guarded-asset-tensors") == 1  # its tensors read with the layer's protobuf
    keys = [o["Key"] for o in local_aws.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="smx-debug/").get(
        "Contents", [])]
    assert any(k.startswith("smx-debug/fleet/system_minutes/") for k in keys)  # the fleet sink, on the layer
    assert any(k.startswith("smx-debug/fleet-inbox/verdicts/") for k in keys)  # the action core's verdict log
    print(f"\nevaluator cold start here: import {out['import_s']:.2f} s, first run {out['run_s']:.2f} s")
    collector = subprocess.run(
        [str(boto3_only_python), "-I", "-c", RUN, str(stage_evaluator_code(handler="fleet_collector")),
         str(layer / "python")],
        env={"PATH": os.environ.get("PATH", ""), **local_aws.environ(), "SMX_FLEET_BUCKET": BUCKET,
             "SMX_WATCH_PREFIXES": "guarded-", "SMX_EVALUATOR_APPENDS": "true", "AWS_REGION": local_aws.region},
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )
    assert collector.returncode == 0, collector.stderr[-3000:]
    collected = json.loads(collector.stdout.strip().splitlines()[-1])
    assert collected["heavy"] == [] and collected["result"]["inbox_objects"] == len(fired)  # one line per action call
    assert collected["result"]["rows"]["training_jobs"] >= 1 and collected["result"]["failed"] == {}


def _exploding_tensor_job(aws: LocalAws, name: str, start: datetime) -> None:
    """A watched job whose hook writes tensors to the bucket, a NaN gradient from step 10."""
    import numpy as np
    from watch_support import BUCKET

    from smx_debug.local.clients import client
    from smx_debug.local.sagemaker import training_jobs
    from smx_debug.tensors import TrialWriter

    create_job(aws, name)
    job_metrics.set_start_time(aws, name, start)
    training_jobs.training_job(aws, name).debug_hook_config = {"S3OutputPath": f"s3://{BUCKET}/debugger"}
    with TrialWriter(f"s3://{BUCKET}/debugger/{name}/debug-output", s3_client=client(aws, "s3")) as w:
        for step in (0, 10):
            w.write_step(step, tensors={"gradient/fc.weight": np.full((4, 4), np.nan if step else 0.1, np.float32)})
        w.training_end()


def test_lambda_layer_for_the_deployed_runtime_fits_lambda_limits() -> None:
    started = time.perf_counter()
    layer_zip = build_layer(LAMBDA_TARGET)
    size = unzipped_size(layer_zip)
    code = stage_evaluator_code()
    code_size = sum(p.stat().st_size for p in code.rglob("*") if p.is_file())
    assert size + code_size < LAMBDA_LIMIT_BYTES
    with zipfile.ZipFile(layer_zip) as archive:
        names = archive.namelist()
    assert all(n.startswith("python/") for n in names)
    assert any(n.startswith("python/pandas/") for n in names) and any("aarch64" in n for n in names)
    assert not any("/tests/" in n for n in names)
    print(f"\nlayer {LAMBDA_TARGET.key}: {size / 2**20:.0f} MB unzipped, {layer_zip.stat().st_size / 2**20:.0f} MB "
          f"zipped; code {code_size / 2**20:.1f} MB ({time.perf_counter() - started:.1f} s, cached)")
