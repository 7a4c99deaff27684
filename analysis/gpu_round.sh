#!/usr/bin/env bash
# One prepared run on the GPU machine (../shared/gpu/README.md), as named steps:
#   source .gpu/setup.sh && bash analysis/gpu_round.sh STEP...
# Steps (each under its own time limit, so one slow step cannot eat the others' time):
#   devices     polyfuse devices (is the GPU registered and usable?)
#   products    the gpu form's product kernels, every register tile, against cuBLAS
#   products-blocked   the blocked (CPU) form's products against cuBLAS
#   split       the split-K form of FFN2 (128x3072x768, the product the gpu form splits) and
#               of the K=768 Gemm transB=1 (not split) at S = 1, 2, 4, 8, every tile, vs cuBLAS
#   layer       one BERT-base layer: polyfuse fused/unfused against torch eager/CUDA graphs
#   bert12      BERT-base 12 layers and a 1024^3 GEMM against torch (analysis/gpu.py), in
#               the BERT_FORMS forms (default gpu), with each fused session's kernel table
#   roofline    polyfuse roofline on the GPU (issue 24 item 1)
#   accuracy    the performance model's error on the GPU (analysis/model_accuracy.py --quick)
#   fuzz        the differential fuzzer on the GPU, FUZZ_JOBS jobs for FUZZ_MINUTES minutes
#   coarsening  analysis/coarsening.py at GPU sizes: each example grown until its original's
#               slowest kernel runs COARSEN_TARGET_US us (default 100), the run bounded to
#               COARSEN_BUDGET s (default 150) of a COARSEN_LIMIT s step (200), with
#               COARSEN_REPEAT/COARSEN_ROUNDS (6/3) timed runs, COARSEN_EXAMPLES (all);
#               writes $OUT/coarsening/coarsening.{md,json}
# Everything goes to $OUT/run.log (default out/gpu/); the tables, plots and JSON the steps write
# are packed into $OUT/results.tgz at the end (the device tool brings back at most 8 files).
# BUDGET=S caps the whole run (see step); rehearse on a CPU device first: PYOPENCL_CTX=0:0 OUT=/tmp/gpu bash analysis/gpu_round.sh ...
set -u
out=${OUT:-out/gpu}
mkdir -p "$out"
log=$out/run.log
py=${PYTHON:-python3}
LAYER_ARGS=${LAYER_ARGS:-}
PRODUCT_ARGS=${PRODUCT_ARGS:-}

# BUDGET=S: the steps share S seconds; each is cut to what is left, and skipped under 20 s
budget=${BUDGET:-0}
began=$(date +%s)

step() {
  local name=$1 limit=$2
  shift 2
  if [ "$budget" -gt 0 ]; then
    local left=$(( began + budget - $(date +%s) ))
    if [ "$left" -lt 20 ]; then
      echo "=== $name: skipped (${left}s of BUDGET left)" | tee -a "$log"
      return
    fi
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  echo "=== $name ($(date +%T), limit ${limit}s): $*" | tee -a "$log"
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  echo "=== $name: rc $? ($(date +%T))" | tee -a "$log"
}

for s in "$@"; do
  case $s in
    devices) step devices 120 "$py" -m polyfuse devices ;;
    products) step products 300 "$py" analysis/product_kernels.py --device "${PRODUCT_DEVICE:-gpu}" \
        --form gpu --sweep --rounds 7 --csv "$out/products_gpu.csv" $PRODUCT_ARGS ;;
    products-blocked) step products-blocked 120 "$py" analysis/product_kernels.py \
        --device "${PRODUCT_DEVICE:-gpu}" --form blocked --rounds 5 --csv "$out/products_blocked.csv" ;;
    split) step split 240 "$py" analysis/product_kernels.py --device "${PRODUCT_DEVICE:-gpu}" \
      --form gpu --sweep --split 1 2 4 8 --rounds "${SPLIT_ROUNDS:-7}" \
      --only ffn2 "Gemm transB" --csv "$out/products_split.csv" ;;
    layer) step layer 300 "$py" analysis/gpu.py --layers 1 --no-tests --repeat 30 --out "$out" \
      --forms ${LAYER_FORMS:-gpu blocked} $LAYER_ARGS ;;
    bert12) step bert12 300 "$py" analysis/gpu.py --no-tests --repeat 20 --out "$out" \
      --forms ${BERT_FORMS:-gpu} --kernels ;;
    roofline) step roofline 180 "$py" -m polyfuse roofline --quick --out "$out/roofline" --json ;;
    devices-json) step devices-json 60 "$py" -m polyfuse devices --json ;;
    accuracy) step accuracy 200 "$py" analysis/model_accuracy.py --quick --out "$out/accuracy" ;;
    coarsening) step coarsening "${COARSEN_LIMIT:-200}" "$py" analysis/coarsening.py \
      --size-target-us "${COARSEN_TARGET_US:-100}" --budget-s "${COARSEN_BUDGET:-150}" \
      --repeat "${COARSEN_REPEAT:-6}" --rounds "${COARSEN_ROUNDS:-3}" --out "$out/coarsening" \
      ${COARSEN_EXAMPLES:+--examples $COARSEN_EXAMPLES} ;;
    fuzz)
      step fuzz $(( ${FUZZ_MINUTES:-3} * 60 + 120 )) "$py" -m polyfuse.oracle.fuzz \
        --minutes "${FUZZ_MINUTES:-3}" --jobs "${FUZZ_JOBS:-12}" --seed "${FUZZ_SEED:-12121}" \
        --out "$out/fuzz" ;;
    *) echo "unknown step $s" | tee -a "$log" ;;
  esac
done
(cd "$out" && find . -type f ! -name run.log ! -name results.tgz | tar czf results.tgz -T - \
  && find . -mindepth 1 ! -name run.log ! -name results.tgz -delete)
tail -c 9000 "$log"
