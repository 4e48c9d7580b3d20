#!/usr/bin/env bash
# bench_ab: two builds of run taking turns on make bench's random-weight models, for a
# before/after table (docs/BENCH.md): decode tokens/s (-t 0 -n 64, -n 40 at 1.1B) and
# the prefill tokens/s of bench.sh's 256-token prompt (not at 1.1B), on 1 and 2 threads, medians of
# ROUNDS (3) alternating rounds.
#   tools/bench_ab.sh OLD_RUN NEW_RUN DTYPE...    e.g. /tmp/old/run ./run f32 bf16 q8_0
#   AB_SHAPES="15M 110M" picks the shapes (default 110M 1.1B; prefill at every shape but 1.1B),
#   AB_THREADS=1 the thread counts (default 1 2).
# The models are bench.sh's (build/bench/SHAPE-DTYPE.nllm; 1.1B rows for q8_0 and q4_0 only), in a
# format both builds read: write them with the older tree's export.py when the format has grown.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 3 ]] || { echo "bench_ab: usage: bench_ab.sh OLD_RUN NEW_RUN DTYPE..." >&2; exit 1; }
old=$1 new=$2
shift 2
rounds=${ROUNDS:-3}
read -ra shapes <<<"${AB_SHAPES:-110M 1.1B}"
read -ra thread_counts <<<"${AB_THREADS:-1 2}"
source tools/bench_common.sh # prompt, median, rate
one() { # binary model threads steps [prompt]: the summary line
    "$1" "$2" -z models/tokenizer.bin -t 0 -n "$4" --threads="$3" "${5:-Once}" 2>&1 >/dev/null | tail -1
}
declare -A got=()
for ((k = 0; k < rounds; k++)); do
    for threads in "${thread_counts[@]}"; do
        for dtype in "$@"; do
            for shape in "${shapes[@]}"; do
                model=build/bench/$shape-$dtype.nllm
                [[ $shape == 1.1B && $dtype != q8_0 && $dtype != q4_0 ]] && continue
                [[ -f $model ]] || { echo "bench_ab: $model: missing (make bench writes it)" >&2; exit 1; }
                for side in old new; do
                    bin=$old && [[ $side == new ]] && bin=$new
                    key="$shape $dtype $threads $side"
                    if [[ $shape != 1.1B ]]; then
                        got[$key dec]+="$(one "$bin" "$model" "$threads" 64 | rate generation) "
                        got[$key pre]+="$(one "$bin" "$model" "$threads" 256 "$prompt" | rate prompt) "
                    else
                        got[$key dec]+="$(one "$bin" "$model" "$threads" 40 | rate generation) "
                    fi
                done
            done
        done
    done
done
echo "| shape | dtype | threads | decode before | decode after | ratio | prefill before | prefill after | ratio |"
echo "|---|---|---|---|---|---|---|---|---|"
for shape in "${shapes[@]}"; do
    for threads in "${thread_counts[@]}"; do
        for dtype in "$@"; do
            key="$shape $dtype $threads"
            [[ -n ${got[$key old dec]:-} ]] || continue
            od=$(tr ' ' '\n' <<<"${got[$key old dec]}" | median)
            nd=$(tr ' ' '\n' <<<"${got[$key new dec]}" | median)
            op=$(tr ' ' '\n' <<<"${got[$key old pre]:-}" | median)
            np=$(tr ' ' '\n' <<<"${got[$key new pre]:-}" | median)
            awk -v s="$shape" -v d="$dtype" -v t="$threads" -v od="$od" -v nd="$nd" -v op="$op" \
                -v np="$np" 'BEGIN {
                printf "| %s | %s | %s | %.1f | %.1f | %.2f |", s, d, t, od, nd, nd / od
                if (op > 0) printf " %.0f | %.0f | %.2f |\n", op, np, np / op
                else print " - | - | - |" }'
        done
    done
done
