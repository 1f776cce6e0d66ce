#!/usr/bin/env bash
# Creates .venv with the project (pipeline extra) and its test tools; installs Java for Spark when it is missing.
# Safe to re-run: every step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
# The CPU build of torch first, so nothing later pulls the multi-GB CUDA build.
python -c "import torch" 2>/dev/null || python -m pip install --quiet "torch==2.13.0"
# The pipeline and the test tools; the base install alone (no extras) is just the trainer-side fm_loader.
python -m pip install --quiet -c scripts/constraints.txt -e ".[pipeline,test]"

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
java -version 2>&1 | head -1
python -c "import dagster, pyspark, fm_assets, fm_loader; print('setup ok: dagster', dagster.__version__, '| pyspark', pyspark.__version__)"
