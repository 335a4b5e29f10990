"""Building a plan must not import what runs in a Lambda (issue 11 item 9).

``python -X importtime -c "import smx_debug.config"`` lists every module the import loads; none may be the
Lambda core (``smx_debug.actions``) or the AWS SDK (``boto3``, ``botocore``).
"""

from __future__ import annotations

import re
import subprocess
import sys

FORBIDDEN = re.compile(r"\|\s+(smx_debug\.actions|boto3|botocore)(\.|$)")


def _imported(module: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True, text=True, check=True, timeout=120,
    )
    return [line for line in proc.stderr.splitlines() if line.startswith("import time:")]


def test_config_import_loads_no_actions_boto3_or_botocore():
    lines = _imported("smx_debug.config")
    assert any(line.rstrip().endswith("smx_debug.config") for line in lines)  # the probe sees the import
    assert [line for line in lines if FORBIDDEN.search(line)] == []


def test_forbidden_pattern_matches_the_lambda_core_lines():
    # Guards the guard: the lines importtime prints for these modules are caught.
    lines = ["import time:      4336 |       5908 |         smx_debug.actions.events",
             "import time:       527 |        527 |             botocore",
             "import time:       527 |        527 |   boto3.session"]
    assert all(FORBIDDEN.search(line) for line in lines)
    assert not FORBIDDEN.search("import time:   100 |   100 | smx_debug.contracts")
