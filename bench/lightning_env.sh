#!/usr/bin/env bash
# Build the side environment for the Lightning integration (smx_debug.integrations.lightning; lightning is never a
# project dependency) under bench/.venv-lightning: torch's CPU wheel, lightning, then this working tree's wheel
# (bench/side_env_framework.sh). tests/functional/integrations/ run scripts there.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=bench/side_env_framework.sh
source "$here/side_env_framework.sh"
framework_side_env lightning "import lightning; from lightning.pytorch.callbacks import Callback" \
  "$torch_cpu" "lightning>=2.2"
