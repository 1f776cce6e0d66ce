#!/usr/bin/env bash
# Creates the project's virtual environment from the lock: torch's CPU build, then requirements/lock.txt
# (exact versions of the pipeline + test environment), then the project itself (editable, no dependency
# resolution), then `pip check`. Installs Java for Spark and Debian's Chromium for the UI tests when missing.
# Safe to re-run: a venv already built from the same lock is only re-checked.
#
# Settings (env): VENV (default .venv), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
LOCK=requirements/lock.txt

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip --quiet)

# A lock that no longer matches pyproject.toml would install something nobody resolved: refuse early.
recorded=$(sed -n 's/^# pyproject-dependencies-sha256: //p' "$LOCK")
if [ "$recorded" != "$("$VENV/bin/python" scripts/lock_fingerprint.py)" ]; then
  echo "setup: pyproject.toml's dependencies changed since $LOCK was made; run \`make lock\` and commit the lock" >&2
  exit 1
fi

stamp="$VENV/.fm-lock-sha256"
lock_sha=$(sha256sum "$LOCK" scripts/constraints.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$lock_sha" ]; then
  "${pip[@]}" install --upgrade pip
  # The CPU build of torch first and on its own, so nothing later pulls the multi-GB CUDA build.
  "${pip[@]}" install -r scripts/constraints.txt
  # Exactly the locked set; the project itself without dependency resolution (its ranges were resolved into
  # the lock by `make lock`).
  "${pip[@]}" install -r "$LOCK" -c scripts/constraints.txt
  "${pip[@]}" install --no-deps --no-build-isolation -e .
  echo "$lock_sha" > "$stamp"
fi
# Every installed distribution's requirements are met (the check that would have caught dagster 1.13.28
# next to dagster-k8s 0.11.14).
"$VENV/bin/python" -m pip check

if ! command -v java >/dev/null 2>&1; then
  echo "setup: Java not found; installing openjdk-17-jre-headless for Spark" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi
# The UI tests drive Debian's Chromium through Playwright (never Playwright's own browser downloads).
if [ ! -x /usr/bin/chromium ]; then
  echo "setup: chromium not found; installing Debian's chromium for the UI tests" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq chromium >/dev/null
fi
java -version 2>&1 | head -1 >&2
"$VENV/bin/python" -c "import dagster, pyspark, fm_assets, fm_loader; print('setup ok: dagster', dagster.__version__, '| pyspark', pyspark.__version__)" >&2
