"""Quiet by default: no dependency banner, INFO line or warning in our commands (visible with -v)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PLAN = str(ROOT / "examples" / "plans" / "cpu_bottleneck_guard.yaml")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "SAGEMAKER_SUPPRESS_V2_WARNING"}}
    return {**env, **extra}


def test_quiet_cdk_app_import_prints_no_node_end_of_life_banner() -> None:
    done = subprocess.run([sys.executable, "-c", "import infra.cdk_app, aws_cdk; aws_cdk.App()"], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=300, check=True)
    assert "end-of-life" not in done.stderr + done.stdout, done.stderr


def test_quiet_cli_render_estimator_has_no_sdk_info_lines_unless_verbose() -> None:
    cmd = [sys.executable, "-m", "smx_debug", "plan", "render", PLAN, "--format", "estimator"]
    quiet = subprocess.run(cmd, cwd=ROOT, env=_env(SAGEMAKER_SUPPRESS_V2_WARNING="1"), capture_output=True,
                           text=True, timeout=300, check=True)
    assert "INFO" not in quiet.stdout + quiet.stderr and "Warning" not in quiet.stderr, quiet.stderr
    assert quiet.stdout.lstrip().startswith("{")
    verbose = subprocess.run([*cmd[:3], "-v", *cmd[3:]], cwd=ROOT, env=_env(SAGEMAKER_SUPPRESS_V2_WARNING="1"),
                             capture_output=True, text=True, timeout=300, check=True)
    assert "INFO" in verbose.stdout + verbose.stderr
