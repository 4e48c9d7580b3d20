#!/usr/bin/env bash
# make bench: decode speed of ./run on random-weight models of real shapes (export.py --random),
# each weight dtype, against the machine's measured read bandwidth (tools/bandwidth.c; the
# multiply-add peaks of the kernels' products, tools/flops.c, bound prefill), and prefill of a
# 256-token prompt, batched and (but for 1.1B) one position at a time. Prints one table (medians of
# the repeats), then prefill's products alone against the peaks measured beside each
# (tools/bench_products.sh; OpenBLAS's sgemm the ceiling row, each kernel's tile alone in L1,
# tools/tile.c, the ceiling of its instructions, and OpenBLAS on a square product, what a tuned GEMM
# reaches here), then tools/bench_gguf.sh's: run
# against llama.cpp on the same GGUF files (which builds llama.cpp's llama-bench once from make
# llama-oracle's source, or uses LLAMA_BENCH's; skipped without npm).
#   BENCH_QUICK=1   15M and 110M only, fewer repeats and tokens (about 5 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
dir=build/bench
mkdir -p "$dir"

dtypes=(f32 f16 bf16 q8_0 q4_0)
quick=${BENCH_QUICK:-0}
if [[ $quick == 1 ]]; then
    shapes=(15M 110M) repeats=3 prefill_repeats=1
    declare -A steps=([15M]=128 [110M]=32)
else
    shapes=(15M 110M 1.1B) repeats=5 prefill_repeats=3
    declare -A steps=([15M]=256 [110M]=64 [1.1B]=16)
fi

for shape in "${shapes[@]}"; do
    for dtype in "${dtypes[@]}"; do
        model=$dir/$shape-$dtype.nllm
        [[ -f $model ]] || "$PYTHON" export.py --random "$shape" --dtype "$dtype" --out "$model" \
            --quiet
    done
done

source tools/bench_common.sh # prompt, median, rate
n_prompt=$(./run "$dir/15M-f32.nllm" -z models/tokenizer.bin --tokenize "$prompt" | wc -l)

declare -A bandwidth flops
for threads in 1 2; do
    bandwidth[$threads]=$(OMP_NUM_THREADS=$threads build/bandwidth 2048 "$repeats" 2>/dev/null)
    for kind in f32 i16 i8; do
        flops[$kind$threads]=$(OMP_NUM_THREADS=$threads build/flops 3 $kind 2>/dev/null)
    done
done

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; read bandwidth" \
    "${bandwidth[1]} GB/s (1 thread), ${bandwidth[2]} GB/s (2 threads); multiply-add peaks" \
    "(G operations/s, 1 thread / 2 threads): fp32 FMA ${flops[f321]} / ${flops[f322]}," \
    "int16 pairs (q8_0's) ${flops[i161]} / ${flops[i162]}, bytes (q4_0's) ${flops[i81]} / ${flops[i82]}"
echo "decode: tokens/s generating (after the first token); prefill: tokens/s of a $n_prompt-token" \
    "prompt, in batches and one position at a time (15M and 110M; with BENCH_QUICK=1 on 2 threads" \
    "only); the dtypes take turns in" \
    "every repeat, so that a slow moment of the shared machine hits them alike"
echo "bw: the read bandwidth measured between the decode runs of each block (median), which the" \
    "GB/s the weights were read at is compared with"
echo "limit: the memory bound of the project's speed issue (18): the weights file plus the kv cache" \
    "of the positions the decode run uses plus 10 MiB"
printf '%-6s %-5s %-10s %7s %9s %7s %7s %8s %9s %9s %12s %11s %7s\n' shape dtype norm threads \
    tokens/s GB/s "bw" "% of bw" "peak MiB" "limit MiB" "prefill t/s" "serial t/s" "ratio"


# Bytes of the kv cache of $2 positions of model $1: 2 (keys, values) x n_layers x positions x
# kv_dim floats, from the header's dim, n_layers, n_heads and n_kv_heads (int32s at byte 8 of a
# normllama file).
kv_cache_bytes() {
    od -An -t d4 -w28 -j 8 -N 28 "$1" | awk -v n="$2" '{print 2 * $3 * n * $5 * ($1 / $4) * 4}'
}

# One decode run: "tokens/s peak_kib"
decode() {
    local line
    line=$( { /usr/bin/time -f 'peak_kib %M' "$@" -t 0 >/dev/null; } 2>&1)
    echo "$(rate generation <<<"$line") $(sed -n 's/^peak_kib //p' <<<"$line")"
}

for shape in "${shapes[@]}"; do
    for norm in rmsnorm layernorm; do
        for threads in 1 2; do
            declare -A rates=() peak=() prefill=() serial=()
            block_bw=()
            for ((r = 0; r < repeats; r++)); do
                block_bw+=("$(OMP_NUM_THREADS=$threads build/bandwidth 1024 1 2>/dev/null)")
                for dtype in "${dtypes[@]}"; do
                    read -r rate kib < <(decode ./run "$dir/$shape-$dtype.nllm" -z models/tokenizer.bin \
                        --norm="$norm" --threads="$threads" -n "${steps[$shape]}")
                    rates[$dtype]+="$rate "
                    ((kib > ${peak[$dtype]:-0})) && peak[$dtype]=$kib
                done
            done
            for ((r = 0; r < prefill_repeats; r++)); do
                for dtype in "${dtypes[@]}"; do
                    run=(./run "$dir/$shape-$dtype.nllm" -z models/tokenizer.bin --norm="$norm"
                        --threads="$threads" -n "$n_prompt")
                    prefill[$dtype]+="$("${run[@]}" "$prompt" 2>&1 >/dev/null | rate prompt) "
                    # one position at a time takes minutes at 1.1B; the quick run times it on 2
                    # threads only
                    [[ $shape == 1.1B || ($quick == 1 && $threads == 1) ]] && continue
                    serial[$dtype]+="$("${run[@]}" --prefill=serial "$prompt" 2>&1 >/dev/null |
                        rate prompt) "
                done
            done
            bw=$(printf '%s\n' "${block_bw[@]}" | median)
            for dtype in "${dtypes[@]}"; do
                bytes=$(stat -L -c %s "$dir/$shape-$dtype.nllm") # all weights are read once per token
                kv=$(kv_cache_bytes "$dir/$shape-$dtype.nllm" "${steps[$shape]}")
                rate=$(tr ' ' '\n' <<<"${rates[$dtype]}" | grep . | median)
                prefill_rate=$(tr ' ' '\n' <<<"${prefill[$dtype]}" | grep . | median)
                serial_rate=$(tr ' ' '\n' <<<"${serial[$dtype]:-0}" | grep . | median)
                awk -v s="$shape" -v d="$dtype" -v n="$norm" -v t="$threads" -v r="$rate" \
                    -v b="$bytes" -v bw="$bw" -v p="${peak[$dtype]}" -v pf="$prefill_rate" \
                    -v sr="$serial_rate" -v kv="$kv" 'BEGIN {
                    gbs = r * b / 1e9
                    limit = (b + kv) / 1048576 + 10
                    printf "%-6s %-5s %-10s %7d %9.1f %7.1f %7.1f %7.0f%% %9.1f %9.1f %12.1f", s, d,
                        n, t, r, gbs, bw, 100 * gbs / bw, p / 1024, limit, pf
                    if (sr > 0) printf " %11.1f %6.1fx\n", sr, pf / sr
                    else printf " %11s %7s\n", "-", "-" }'
            done
            unset rates peak prefill serial
        done
    done
done

# Goal 2 of issue 29: prefill's products alone against the peaks (tools/bench_products.sh, alone
# too).
echo
tools/bench_products.sh "${shapes[@]}"

# A busy machine: 110M f32 decode with the default thread count (threads.c), with 1 and with 2
# threads, the modes taking turns, on an idle machine and with one core kept busy by a spinning
# process this script starts (bounded by timeout) and stops.
busy_block() { # $1: idle or busy
    local spinner=
    if [[ $1 == busy ]]; then
        timeout 600 bash -c 'while :; do :; done' &
        spinner=$!
        # also when a run fails and set -e ends the script; the pid goes in now, since the local
        # is gone by the time the script exits (set -u had failed make bench at its end)
        trap "kill $spinner 2>/dev/null || true" EXIT
        sleep 0.5
    fi
    declare -A r=() used=()
    for ((i = 0; i < repeats; i++)); do
        for mode in default 1 2; do
            if [[ $mode == default ]]; then flag=(); else flag=(--threads="$mode"); fi
            line=$(env -u OMP_NUM_THREADS ./run "$dir/110M-f32.nllm" -z models/tokenizer.bin -t 0 -n "${steps[110M]}" \
                "${flag[@]}" 2>&1 >/dev/null | tail -1)
            r[$mode]+="$(rate generation <<<"$line") "
            used[$mode]=$(sed -n 's/.*, threads \([0-9]*\),.*/\1/p' <<<"$line")
        done
    done
    if [[ -n $spinner ]]; then
        kill "$spinner" && wait "$spinner" 2>/dev/null || true
        trap - EXIT
    fi
    for mode in default 1 2; do
        label="--threads=$mode" && [[ $mode == default ]] && label="default: ${used[$mode]} threads"
        printf '%-6s %-8s %-20s %9.1f\n' 110M "$1" "$label" \
            "$(tr ' ' '\n' <<<"${r[$mode]}" | grep . | median)"
    done
}
echo
echo "busy machine: 110M f32 decode tokens/s (median of $repeats) with the default thread count," \
    "--threads=1 and --threads=2, idle and with one core kept busy by a spinning process"
printf '%-6s %-8s %-20s %9s\n' shape machine threads tokens/s
busy_block idle
busy_block busy

# The same GGUF files in llama.cpp and run (docs/BENCH.md): tools/bench_gguf.sh, alone too.
echo
tools/bench_gguf.sh "${shapes[@]}"
