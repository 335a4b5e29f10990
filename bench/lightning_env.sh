#!/usr/bin/env bash
# Build the side environment for the Lightning integration (smx_debug.integrations.lightning; lightning is never a
# project dependency) under bench/.venv-lightning: torch's CPU wheel (pinned: plain `torch` is a multi-GB CUDA
# build), lightning, then this working tree's wheel (bench/side_env_wheel.sh: rebuilt only after a source change).
# tests/functional/integrations/ run scripts there.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=bench/side_env.sh
source "$here/side_env.sh"
reqs=("torch==2.13.0" "lightning>=2.2")
side_env lightning "${reqs[@]}"  # env_dir: bench/.venv-lightning, a link into the cache
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -f "$env_dir/.ready-framework" ]; then
  "$python" -m venv --clear "$(readlink -f "$env_dir")"  # built where it lives (the cache)
  "$env_dir/bin/python" -m pip install -q --disable-pip-version-check "${reqs[@]}"
  "$env_dir/bin/python" -c "import lightning; from lightning.pytorch.callbacks import Callback"
  touch "$env_dir/.ready-framework"
fi
# shellcheck source=bench/side_env_wheel.sh
source "$here/side_env_wheel.sh"
install_tree_wheel "$env_dir" "torch==2.13.0"
