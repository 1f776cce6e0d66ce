#!/usr/bin/env bash
# `make lock`: resolves the application environment (pipeline + test extras) into requirements/lock.txt,
# keeping every pin the current lock has unless pyproject.toml's ranges exclude it (a new dependency moves
# nothing else). `make lock-upgrade` (UPGRADE=1) re-resolves everything to the newest allowed versions.
# The lock is what scripts/setup.sh, CI and the Docker image install; pyproject.toml keeps the ranges.
# After it: review `git diff requirements/lock.txt`, run `make test` (or push and let CI run), commit both files.
#
# Settings (env): UV (default: the uv of .venv, installed there on first use at the version the lock pins),
# UPGRADE (1: ignore the current pins).
set -euo pipefail
cd "$(dirname "$0")/.."
LOCK=requirements/lock.txt

if [ -z "${UV:-}" ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  if [ ! -x .venv/bin/uv ]; then
    pinned=$(grep -E '^uv==' "$LOCK" 2>/dev/null || echo uv)
    .venv/bin/python -m pip install --quiet "$pinned"
  fi
  UV=.venv/bin/uv
fi

# torch is installed first and on its own (the CPU build, scripts/constraints.txt), so it is left out of the
# lock; its own requirements are resolved against the CPU build's metadata, which has no CUDA packages.
torch_pin=$(grep -E '^torch==' scripts/constraints.txt)
torch_source=(--find-links /opt/wheels)
[ -d /opt/wheels ] || torch_source=(--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "${torch_pin}+cpu" > "$tmp/torch-cpu.txt"
# uv prefers the versions already in its output file: start from the current lock unless upgrading
upgrade=()
if [ "${UPGRADE:-0}" = 1 ]; then upgrade=(--upgrade); elif [ -f "$LOCK" ]; then cp "$LOCK" "$tmp/lock.txt"; fi

"$UV" pip compile pyproject.toml --extra pipeline --extra test \
  --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
  "${torch_source[@]}" --constraint "$tmp/torch-cpu.txt" --no-emit-package torch \
  "${upgrade[@]}" --no-header --quiet -o "$tmp/lock.txt"

# The header records what the lock was resolved from; tests/deploy/test_lock.py fails when pyproject.toml's
# dependency lists change without a new lock.
{
  echo "# The application environment (pipeline + test extras), exact versions, resolved by \`make lock\`."
  echo "# Python 3.11 on x86_64 Linux; torch (CPU build) is installed before this file, see scripts/setup.sh."
  echo "# pyproject-dependencies-sha256: $(python3 scripts/lock_fingerprint.py)"
  cat "$tmp/lock.txt"
} > "$LOCK"
echo "lock: wrote $LOCK ($(grep -cE '^[A-Za-z0-9_.-]+==' "$LOCK") packages)" >&2
