#!/usr/bin/env bash
# Sourced by the side-environment scripts (bench/side_env_framework.sh, bench/sdk_v3_env.sh): install the wheel of
# this working tree, with its core dependencies, into a side environment, as a user would get it. The wheel is built
# from a copy of the sources (no egg-info or build/ in the working tree) and rebuilt only when src/, pyproject.toml
# or the files the wheel ships changed (a stamp in the environment), so afterwards a run costs a few seconds.
# Usage: install_tree_wheel ENV_DIR [PIP REQUIREMENT...]   (the requirements pin what the wheel may not move)
install_tree_wheel() {
  local env_dir="$1"; shift
  local root; root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  local pip=("$env_dir/bin/python" -m pip install -q --disable-pip-version-check)
  local stamp
  stamp="$(cd "$root" && _tree_wheel_sources | tr '\n' '\0' | xargs -0 sha256sum | sha256sum | cut -c1-64)"
  if [ -f "$env_dir/.ready-wheel" ] && [ "$(cat "$env_dir/.ready-wheel")" = "$stamp" ]; then return 0; fi
  local work; work="$(mktemp -d)"
  (cd "$root" && _tree_wheel_sources | tar -cf - -T -) | tar -xf - -C "$work"
  if [ -x "$root/.venv/bin/python" ]; then  # setuptools and wheel are there: no download
    "$root/.venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation \
      "$work" -w "$work/dist"
  else
    "$env_dir/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps "$work" -w "$work/dist"
  fi
  local wheel; wheel="$(ls "$work"/dist/smx_debug-*.whl)"
  "${pip[@]}" "$wheel" "$@"  # the core dependencies; the pins given fail the install rather than move
  "${pip[@]}" --no-deps --force-reinstall "$wheel"  # the same version number: replace the installed copy
  rm -rf "$work"
  echo "$stamp" > "$env_dir/.ready-wheel"
}

_tree_wheel_sources() {
  find src -type f ! -name '*.pyc' ! -path '*.egg-info/*' ! -path '*/__pycache__/*'
  echo pyproject.toml; echo README.md; echo LICENSE; echo NOTICE
}
