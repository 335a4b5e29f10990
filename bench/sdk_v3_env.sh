#!/usr/bin/env bash
# Build the side environment for the SageMaker Python SDK v3 (never a project dependency; v2, which the project's
# own venv has, cannot share a virtualenv with it) under bench/.venv-sdkv3: the current sagemaker 3.x from PyPI,
# then the wheel of this working tree with its core dependencies, sagemaker pinned to the version just installed
# so that the wheel cannot downgrade it (pip fails instead: that is the "installs beside v3" check).
# The first build takes 4-12 minutes (4 min 19 s on a quiet 2-core machine, 11 min 52 s on a loaded one) and 1.1 GB
# (sagemaker 3 pulls mlflow); afterwards the script only rebuilds and reinstalls the wheel when the sources changed
# (about 9 s; 0.05 s when they did not), so the tests always run the working tree's code as a user would get it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
# shellcheck source=bench/side_env.sh
source "$here/side_env.sh"
reqs=("sagemaker>=3,<4")
side_env sdkv3 "${reqs[@]}"  # env_dir: bench/.venv-sdkv3, a link into the cache
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
pip=("$env_dir/bin/python" -m pip install -q --disable-pip-version-check)

if [ ! -f "$env_dir/.ready-sdk" ]; then
  "$python" -m venv --clear "$(readlink -f "$env_dir")"  # built where it lives (the cache)
  "${pip[@]}" "${reqs[@]}"
  "$env_dir/bin/python" -c "import sagemaker.train, sagemaker.core.resources, sagemaker.core.shapes"
  touch "$env_dir/.ready-sdk"
fi

sdk="$("$env_dir/bin/python" -c "from importlib.metadata import version; print(version('sagemaker'))")"
# shellcheck source=bench/side_env_wheel.sh
source "$here/side_env_wheel.sh"
install_tree_wheel "$env_dir" "sagemaker==$sdk"  # the core dependencies beside v3; fails rather than downgrade it
