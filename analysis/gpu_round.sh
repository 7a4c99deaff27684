#!/usr/bin/env bash
# One prepared run on the GPU machine (../shared/gpu/README.md), as named steps:
#   source .gpu/setup.sh && bash analysis/gpu_round.sh STEP...
# Steps (each under its own time limit, so one slow step cannot eat the others' time):
#   devices     polyfuse devices (is the GPU registered and usable?)
#   products    the product kernels of every form against cuBLAS (the gpu form's tile sweep)
#   split       the split-K form of FFN2 (128x3072x768, the product the gpu form splits) and
#               of the K=768 Gemm transB=1 (not split) at S = 1, 2, 4, 8, every tile, vs cuBLAS
#   layer       one BERT-base layer: polyfuse fused/unfused against torch eager/CUDA graphs
#   bert12      BERT-base 12 layers and a 1024^3 GEMM against torch (analysis/gpu.py)
#   roofline    polyfuse roofline on the GPU (issue 24 item 1)
#   accuracy    the performance model's error on the GPU (analysis/model_accuracy.py --quick)
#   fuzz        the differential fuzzer on the GPU, FUZZ_JOBS jobs for FUZZ_MINUTES minutes
# Everything goes to $OUT/run.log (default out/gpu/), tables to $OUT/*.csv; at most 8 files.
# Rehearse on a CPU device first: PYOPENCL_CTX=0:0 OUT=/tmp/gpu bash analysis/gpu_round.sh ...
set -u
out=${OUT:-out/gpu}
mkdir -p "$out"
log=$out/run.log
py=${PYTHON:-python3}
LAYER_ARGS=${LAYER_ARGS:-}

step() {
  local name=$1 limit=$2
  shift 2
  echo "=== $name ($(date +%T), limit ${limit}s): $*" | tee -a "$log"
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  echo "=== $name: rc $? ($(date +%T))" | tee -a "$log"
}

for s in "$@"; do
  case $s in
    devices) step devices 120 "$py" -m polyfuse devices ;;
    products)
      step products 240 "$py" analysis/product_kernels.py --device "${PRODUCT_DEVICE:-gpu}" \
        --form gpu --sweep --rounds 7 --csv "$out/products_gpu.csv"
      step products-blocked 120 "$py" analysis/product_kernels.py \
        --device "${PRODUCT_DEVICE:-gpu}" --form blocked --rounds 5 --csv "$out/products_blocked.csv"
      ;;
    split) step split 240 "$py" analysis/product_kernels.py --device "${PRODUCT_DEVICE:-gpu}" \
      --form gpu --sweep --split 1 2 4 8 --rounds "${SPLIT_ROUNDS:-7}" \
      --only ffn2 "Gemm transB" --csv "$out/products_split.csv" ;;
    layer) step layer 300 "$py" analysis/gpu.py --layers 1 --no-tests --repeat 30 --out "$out" \
      --forms ${LAYER_FORMS:-gpu blocked} $LAYER_ARGS ;;
    bert12) step bert12 420 "$py" analysis/gpu.py --no-tests --repeat 20 --out "$out" ;;
    roofline) step roofline 180 "$py" -m polyfuse roofline --quick --out "$out/roofline" --json ;;
    accuracy) step accuracy 240 "$py" analysis/model_accuracy.py --quick --out "$out" ;;
    fuzz)
      step fuzz $(( ${FUZZ_MINUTES:-3} * 60 + 120 )) "$py" -m polyfuse.oracle.fuzz \
        --minutes "${FUZZ_MINUTES:-3}" --jobs "${FUZZ_JOBS:-12}" --seed "${FUZZ_SEED:-12121}" \
        --out "$out/fuzz" ;;
    *) echo "unknown step $s" | tee -a "$log" ;;
  esac
done
tail -c 9000 "$log"
