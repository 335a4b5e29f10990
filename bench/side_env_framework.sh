#!/usr/bin/env bash
# Sourced by the framework side-environment scripts (bench/transformers_env.sh, bench/lightning_env.sh): build
# bench/.venv-NAME once (the requirements, then CHECK, python code importing what the integration uses), then
# install this working tree's wheel (bench/side_env_wheel.sh: rebuilt only after a source change) with torch pinned.
# torch is pinned to its CPU wheel (plain `torch` is a multi-GB CUDA build): pass "$torch_cpu" as a requirement.
# Usage: framework_side_env NAME CHECK REQUIREMENT...
torch_cpu="torch==2.13.0"
framework_side_env() {
  local name="$1" check="$2"; shift 2
  local here; here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  # shellcheck source=bench/side_env.sh
  source "$here/side_env.sh"
  # shellcheck source=bench/side_env_wheel.sh
  source "$here/side_env_wheel.sh"
  side_env "$name" "$@"  # env_dir: bench/.venv-NAME, a link into the cache
  local python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
  if [ ! -f "$env_dir/.ready-framework" ]; then
    "$python" -m venv --clear "$(readlink -f "$env_dir")"  # built where it lives (the cache)
    "$env_dir/bin/python" -m pip install -q --disable-pip-version-check "$@"
    "$env_dir/bin/python" -c "$check"
    touch "$env_dir/.ready-framework"
  fi
  install_tree_wheel "$env_dir" "$torch_cpu"
}
