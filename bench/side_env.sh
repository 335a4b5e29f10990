#!/usr/bin/env bash
# Sourced by the side-environment scripts (bench/*_env.sh): where a side environment lives.
# A side environment takes minutes to build (torch, sagemaker 3, transformers) and depends only on the requirements
# it is built from, so it is built once per set of requirements (and Python) in the user's cache,
# ${SMX_DEBUG_CACHE:-~/.cache/smx-debug}/side-envs/<name>-<hash>, and bench/.venv-<name> is a link to it: a fresh
# clone, or CI on a machine that already built it, reuses it; other requirements build another one. Builds of one
# environment are serialised with flock (two checkouts building at once would share one folder).
# Usage: side_env NAME REQUIREMENT...   (sets env_dir to bench/.venv-NAME; the lock is held until the script exits)
side_env() {
  local name="$1"; shift
  local here; here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  local python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
  local key; key="$(printf '%s\n' "$("$python" -VV)" "$@" | sha256sum | cut -c1-16)"
  local root="${SMX_DEBUG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/smx-debug}/side-envs"
  local cached="$root/$name-$key"
  mkdir -p "$root"
  exec 9>"$cached.lock"
  flock 9
  env_dir="$here/.venv-$name"
  if [ -d "$env_dir" ] && [ ! -L "$env_dir" ]; then return 0; fi  # a folder built here before: keep using it
  mkdir -p "$cached"
  ln -sfn "$cached" "$env_dir"
}
