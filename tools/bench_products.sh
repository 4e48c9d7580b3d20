#!/usr/bin/env bash
# Issue 29's goal 2 (make bench's products block; alone: tools/bench_products.sh [SHAPE...],
# default 15M 110M 1.1B, after `make build/gemm build/flops`): prefill's products alone
# (tools/gemm.c) in GFLOP/s and as a share of the multiply-add peak of the instruction they use
# (tools/flops.c: fp32 FMA for f32, f16 and bf16; int16 pairs for q8_0; bytes for q4_0), by CPU
# time (the machine may be shared), fastest of 3; OpenBLAS's sgemm on the same f32 products is the
# ceiling row, when libopenblas.so.0 is installed. The peak is measured just before and just after
# each gemm run and the higher taken: it moves with the clock (fp32 on one thread read 207.1 at
# the start of one make bench and 238.5 idle an hour later; 175.8 to 239.4 within ten minutes
# another day), so that a peak measured minutes away would have been another machine's. Last, each
# kernel's widest tile alone with its panels and inputs in L1 (tools/tile.c), the same way: the
# most its instructions give here, beside which the products' share is read; and OpenBLAS's sgemm
# on a 3072 x 3072 x 3072 product (build/gemm square), what a tuned GEMM reaches of the peak here
# on a large square product.
#   BENCH_GEMM_BATCH=N  positions a batch (default 128)
set -euo pipefail
cd "$(dirname "$0")/.."
shapes=("$@")
((${#shapes[@]})) || shapes=(15M 110M 1.1B)
dtypes=(f32 f16 bf16 q8_0 q4_0)
for tool in build/gemm build/flops build/tile; do
    [[ -x $tool ]] || {
        echo "bench_products.sh: $tool is missing: make build/gemm build/flops build/tile" >&2
        exit 1
    }
done
gemm_batch=${BENCH_GEMM_BATCH:-128}
declare -A peak_kind=([f32]=f32 [f16]=f32 [bf16]=f32 [q8_0]=i16 [q4_0]=i8)
# f16's and bf16's prefill runs the f32 tile over its panels widened once a batch
tile_dtypes=(f32 q8_0 q4_0)
echo "prefill products (issue 29, goal 2): build/gemm, one forward pass's matmul calls over a" \
    "batch of $gemm_batch positions (BENCH_GEMM_BATCH), random weights, GFLOP/s by CPU time" \
    "(fastest of 3), and % of the peak of the kernels' multiply-add (f32/f16/bf16: fp32 FMA;" \
    "q8_0: int16 pairs; q4_0: bytes; G operations/s, the higher of build/flops just before and" \
    "just after the row's gemm run); last, shape L1: each kernel's widest tile alone, its panels" \
    "and inputs in L1 (build/tile, 256 columns), the most its instructions give here; and" \
    "OpenBLAS's sgemm on a 3072^3 product, what a tuned GEMM reaches here"
printf '%-6s %-16s %7s %9s %9s %10s\n' shape dtype threads GFLOP/s peak "% of peak"
blas_rows=0
peak_now() { OMP_NUM_THREADS=$2 build/flops 3 "$1" 2>/dev/null; } # kind threads
blas_rate() { sed -n 's/.*OpenBLAS sgemm \([0-9.]*\) GFLOP.*/\1/p' <<<"$line"; }
gemm_row() { # shape label threads GFLOP/s peak
    awk -v s="$1" -v d="$2" -v t="$3" -v g="$4" -v p="$5" \
        'BEGIN { printf "%-6s %-16s %7d %9.1f %9.1f %9.0f%%\n", s, d, t, g, p, 100 * g / p }'
}
# line=the output of a tool run on `threads` threads, peak=the higher of the peak of `kind` just
# before it and just after it; returns the tool's status
measure() { # kind threads command...
    local kind=$1 threads=$2 before after status=0
    shift 2
    before=$(peak_now "$kind" "$threads")
    line=$(OMP_WAIT_POLICY=passive OMP_NUM_THREADS=$threads "$@") || status=$?
    after=$(peak_now "$kind" "$threads")
    peak=$(printf '%s\n%s\n' "$before" "$after" | sort -g | tail -1)
    [[ $peak =~ ^[0-9.]+$ ]] || {
        echo "bench_products.sh: build/flops printed no peak for $kind" >&2
        exit 1
    }
    return $status
}
for shape in "${shapes[@]}"; do
    for threads in 1 2; do
        for dtype in "${dtypes[@]}"; do
            measure "${peak_kind[$dtype]}" "$threads" build/gemm "$shape" "$dtype" "$gemm_batch" 3
            gemm_row "$shape" "$dtype" "$threads" \
                "$(sed -n 's/.*matmul \([0-9.]*\) GFLOP.*/\1/p' <<<"$line")" "$peak"
            blas=$(blas_rate)
            [[ -z $blas ]] && continue
            gemm_row "$shape" "OpenBLAS sgemm" "$threads" "$blas" "$peak"
            blas_rows=$((blas_rows + 1))
        done
    done
done
for threads in 1 2; do
    for dtype in "${tile_dtypes[@]}"; do
        measure "${peak_kind[$dtype]}" "$threads" build/tile "$dtype" 256 3
        gemm_row L1 "$dtype tile" "$threads" \
            "$(sed -n 's/.*: \([0-9.]*\) GFLOP.*/\1/p' <<<"$line")" "$peak"
    done
done
if ((blas_rows > 0)); then
    for threads in 1 2; do # a failed square run costs its row, not make bench's later blocks
        measure f32 "$threads" build/gemm square 3072 3 || continue
        gemm_row square "OpenBLAS 3072^3" "$threads" "$(blas_rate)" "$peak"
    done
else
    echo "OpenBLAS sgemm: skipped, libopenblas.so.0 is not installed (Debian's libopenblas0-pthread)"
fi
