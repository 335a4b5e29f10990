#!/usr/bin/env bash
# Build the separate benchmark environment for smdebug (never a project dependency) under bench/.venv-smdebug.
# smdebug 1.0.34 needs numpy<2.3 and protobuf 3.20.x, and imports requests, pandas and psutil without
# declaring them; boto3 is for its S3 reader; scipy is for the 2020 LoadBalancing rule run by bench/parity.py;
# torch (the CPU wheel the project pins) is for smdebug's own PyTorch hook, compared with ours (tests, hook_bench).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=bench/side_env.sh
source "$here/side_env.sh"
reqs=("smdebug==1.0.34" "numpy==2.2.*" "protobuf==3.20.3" requests pandas psutil boto3 "scipy==1.15.*" "torch==2.13.0")
side_env smdebug "${reqs[@]}"  # env_dir: bench/.venv-smdebug, a link into the cache
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ -f "$env_dir/.ready-v3" ]; then exit 0; fi
"$python" -m venv --clear "$(readlink -f "$env_dir")"  # built where it lives (the cache)
"$env_dir/bin/python" -m pip install -q --disable-pip-version-check "${reqs[@]}"
"$env_dir/bin/python" -c "from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame"
touch "$env_dir/.ready-v3"
