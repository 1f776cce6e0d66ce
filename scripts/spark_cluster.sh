#!/usr/bin/env bash
# Start or stop a standalone Spark master + N workers on loopback, using the launcher scripts that ship
# inside the pyspark wheel (SPARK_HOME = the pyspark package folder). Used by the cluster tests and
# bench/spark_cluster.py.
#
#   scripts/spark_cluster.sh start   # prints the master URL (spark://127.0.0.1:$FM_SPARK_MASTER_PORT)
#   scripts/spark_cluster.sh stop
#
# Settings (env): FM_SPARK_PYTHON (default: $VENV/bin/python, VENV defaulting to the repo's .venv, else python3),
# FM_SPARK_MASTER_PORT (7177), FM_SPARK_MASTER_UI_PORT (8180), FM_SPARK_WORKERS (1),
# FM_SPARK_WORKER_UI_PORT (8181; worker i gets 8181+i-1; 0: each a free port), FM_SPARK_WORKER_CORES (1) and
# FM_SPARK_WORKER_MEMORY (1g) per worker, FM_SPARK_STATE (/tmp/fm-spark-cluster-$PORT).
# `stop` stops every worker this state folder's pid files name, then the master.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${FM_SPARK_PYTHON:-}"
if [[ -z "$PY" ]]; then
  VENV_DIR="${VENV:-.venv}"; [[ "$VENV_DIR" = /* ]] || VENV_DIR="$REPO/$VENV_DIR"
  if [[ -x "$VENV_DIR/bin/python" ]]; then PY="$VENV_DIR/bin/python"; else PY="$(command -v python3)"; fi
fi
PORT="${FM_SPARK_MASTER_PORT:-7177}"
MASTER_UI="${FM_SPARK_MASTER_UI_PORT:-8180}"
WORKER_UI="${FM_SPARK_WORKER_UI_PORT:-8181}"
WORKERS="${FM_SPARK_WORKERS:-1}"
STATE="${FM_SPARK_STATE:-/tmp/fm-spark-cluster-$PORT}"
MASTER_URL="spark://127.0.0.1:$PORT"

export SPARK_HOME="$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
if [[ -z "${JAVA_HOME:-}" ]]; then
  JAVA_BIN="$(command -v java || true)"
  [[ -n "$JAVA_BIN" ]] || { echo "java not found: install a JDK 17 (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
  export JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$JAVA_BIN")")")"
fi
export SPARK_LOCAL_IP=127.0.0.1 SPARK_MASTER_HOST=127.0.0.1
export SPARK_LOG_DIR="$STATE/logs" SPARK_PID_DIR="$STATE/pids" SPARK_WORKER_DIR="$STATE/work"
export SPARK_IDENT_STRING="fm-$PORT"
export PYSPARK_PYTHON="$PY"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
DAEMON="$SPARK_HOME/sbin/spark-daemon.sh"
chmod +x "$SPARK_HOME"/sbin/*.sh "$SPARK_HOME"/bin/* 2>/dev/null || true

wait_for_workers() {
  for _ in $(seq 1 120); do
    if "$PY" - "$MASTER_UI" "$WORKERS" <<'PYEOF' 2>/dev/null; then return 0; fi
import json, sys, urllib.request
state = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/json/", timeout=2))
sys.exit(0 if state.get("aliveworkers", 0) >= int(sys.argv[2]) else 1)
PYEOF
    sleep 1
  done
  echo "$WORKERS worker(s) did not register with $MASTER_URL; logs in $SPARK_LOG_DIR" >&2
  return 1
}

case "${1:-}" in
  start)
    mkdir -p "$SPARK_LOG_DIR" "$SPARK_PID_DIR" "$SPARK_WORKER_DIR"
    "$DAEMON" start org.apache.spark.deploy.master.Master 1 \
      --host 127.0.0.1 --port "$PORT" --webui-port "$MASTER_UI" >/dev/null
    for i in $(seq 1 "$WORKERS"); do
      ui=0; [[ "$WORKER_UI" = 0 ]] || ui=$((WORKER_UI + i - 1))
      mkdir -p "$SPARK_WORKER_DIR/$i"
      "$DAEMON" start org.apache.spark.deploy.worker.Worker "$i" \
        --host 127.0.0.1 --webui-port "$ui" \
        --cores "${FM_SPARK_WORKER_CORES:-1}" --memory "${FM_SPARK_WORKER_MEMORY:-1g}" \
        --work-dir "$SPARK_WORKER_DIR/$i" "$MASTER_URL" >/dev/null
    done
    wait_for_workers
    echo "$MASTER_URL"
    ;;
  stop)
    for pidfile in "$SPARK_PID_DIR"/spark-"$SPARK_IDENT_STRING"-org.apache.spark.deploy.worker.Worker-*.pid; do
      [[ -e "$pidfile" ]] || continue
      i="${pidfile##*-}"; i="${i%.pid}"
      "$DAEMON" stop org.apache.spark.deploy.worker.Worker "$i" >/dev/null || true
    done
    "$DAEMON" stop org.apache.spark.deploy.master.Master 1 >/dev/null || true
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
