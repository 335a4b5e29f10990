"""The Lambda assets work with boto3 and the standard library alone (import time printed; the target is
checked by bench/actions_bench.py, not by a timed test).

Each handler is run the way the infrastructure packages it: a directory holding handler.py and the
smx_debug subset (``__init__.py``, ``errors.py``, ``actions/``), in an interpreter whose environment has
only boto3 (the ``boto3_only_python`` fixture). AWS calls go to the local AWS via AWS_ENDPOINT_URL.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from actions_support import Stack, create_job

from infra.assets import asset_files
from smx_debug import local
from smx_debug.contracts import handler_entry

ROOT = Path(__file__).resolve().parents[3]
ALLOWED = {
    "__mp_main__",
    "boto3",
    "botocore",
    "s3transfer",
    "jmespath",
    "urllib3",
    "dateutil",
    "six",
    "smx_debug",
    "handler",
}

# boto3's own import (a fixed cost of every Python Lambda using it) is timed apart from the handler's.
PROBE = """
import json, sys, time
before = {m.split(".")[0] for m in sys.modules}
started = time.perf_counter()
import boto3
boto3_ms = (time.perf_counter() - started) * 1000
started, cpu = time.perf_counter(), time.process_time()
import handler
import_ms = (time.perf_counter() - started) * 1000
import_cpu_ms = (time.process_time() - cpu) * 1000
foreign = sorted({m.split(".")[0] for m in sys.modules} - before - set(sys.stdlib_module_names) - ALLOWED)
event = json.loads(sys.stdin.read())
result = getattr(handler, FUNCTION)(event, None)
print(json.dumps({"boto3_ms": boto3_ms, "import_ms": import_ms, "import_cpu_ms": import_cpu_ms, "foreign": foreign, "result": result}))
"""


def _asset(tmp: Path, name: str) -> Path:
    """Exactly the files the infrastructure ships (infra.assets.asset_files), nothing more."""
    root = tmp / name
    for rel, source in asset_files(name).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, root / rel)
    return root


@pytest.mark.parametrize("name", ["rule_metrics", "stop_training", "notify", "retrain"])
def test_lambda_asset_runs_with_boto3_only_and_imports_under_budget(
    name: str, stack: Stack, boto3_only_python: Path, tmp_path: Path
) -> None:
    aws = stack.aws
    job = f"guard-asset-{name.replace('_', '-')}"
    create_job(
        aws,
        job,
        {"smx-debug:managed": "true", "smx-debug:on:ExplodingTensor": "stop notify"},
        rules=("ExplodingTensor",),
    )
    local.set_rule_statuses(aws, job, debug=[local.rule_status("ExplodingTensor", "IssuesFound", step=12)])
    event = local.state_change_event(aws, job)
    if name == "retrain":
        event = {
            "step": "init",
            "state": json.loads((ROOT / "tests/events/retrain_input.json").read_text())["state"],
        }
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env.update(
        aws.environ(), **stack.env(), PYTHONPATH=str(_asset(tmp_path, name)), PYTHONDONTWRITEBYTECODE="1"
    )
    probe = PROBE.replace("ALLOWED", repr(ALLOWED)).replace("FUNCTION", repr(handler_entry(name)[1].partition(".")[2]))
    proc = subprocess.run(
        [str(boto3_only_python), "-c", probe],
        input=json.dumps(event),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        f"{name}: handler import {out['import_ms']:.1f} ms wall / {out['import_cpu_ms']:.1f} ms CPU on top of "
        f"import boto3 {out['boto3_ms']:.0f} ms (boto3-only interpreter, no .pyc)",
        file=sys.stderr,
    )
    assert out["foreign"] == []
    expected = {
        "rule_metrics": lambda r: r["metrics"] == [{"rule": "ExplodingTensor", "published": True}],
        "stop_training": lambda r: (
            r["stop"] == {"rule": "ExplodingTensor", "outcome": "stopped", "step": 12}
        ),
        "notify": lambda r: [s["rule"] for s in r["notify"]["sent"]] == ["ExplodingTensor"],
        "retrain": lambda r: (r["next_action"], r["history"]["num_retraining"]) == ("launch_new", 0),
    }
    assert expected[name](out["result"]), out["result"]
    assert local.stop_calls(aws, job) == (1 if name == "stop_training" else 0)
