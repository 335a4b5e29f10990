#!/usr/bin/env bash
# Build the side environment for the Hugging Face integration (smx_debug.integrations.transformers; transformers is
# never a project dependency) under bench/.venv-transformers: torch's CPU wheel (pinned: plain `torch` is a
# multi-GB CUDA build), transformers with accelerate (its Trainer needs it), then this working tree's wheel
# (bench/side_env_wheel.sh: rebuilt only after a source change). tests/functional/integrations/ run scripts there.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=bench/side_env.sh
source "$here/side_env.sh"
reqs=("torch==2.13.0" "transformers>=4.46" accelerate)
side_env transformers "${reqs[@]}"  # env_dir: bench/.venv-transformers, a link into the cache
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -f "$env_dir/.ready-framework" ]; then
  "$python" -m venv --clear "$(readlink -f "$env_dir")"  # built where it lives (the cache)
  "$env_dir/bin/python" -m pip install -q --disable-pip-version-check "${reqs[@]}"
  "$env_dir/bin/python" -c "import transformers, accelerate; from transformers import Trainer, TrainerCallback"
  touch "$env_dir/.ready-framework"
fi
# shellcheck source=bench/side_env_wheel.sh
source "$here/side_env_wheel.sh"
install_tree_wheel "$env_dir" "torch==2.13.0"
