#!/usr/bin/env bash
# Build the side environment for the Hugging Face integration (smx_debug.integrations.transformers; transformers is
# never a project dependency) under bench/.venv-transformers: torch's CPU wheel, transformers with accelerate (its
# Trainer needs it), then this working tree's wheel (bench/side_env_framework.sh). tests/functional/integrations/
# run scripts there.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=bench/side_env_framework.sh
source "$here/side_env_framework.sh"
framework_side_env transformers \
  "import transformers, accelerate; from transformers import Trainer, TrainerCallback" \
  "$torch_cpu" "transformers>=4.46" accelerate
