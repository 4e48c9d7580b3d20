#!/usr/bin/env bash
# The same GGUF files in llama.cpp and in run (make bench's last block; alone:
# tools/bench_gguf.sh [SHAPE...], default 15M 110M 1.1B), issue 29's goals 1 and 4 in one table:
# each type's decode, 256-token prefill and decode at a depth of 1000 positions, on 1 and 2
# threads, the two engines taking turns within every repeat, run's rate over llama.cpp's; and each
# decode's weight GB/s as a share of the read bandwidth measured beside it (tools/bandwidth.c).
# The files are random-weight models of the shape written by export.py (f32, f16, bf16, q8_0,
# q4_0; seq_len 2048 at every shape, so that the depth test fits) and llama.cpp's quantizer's
# Q4_K_M of the f32 one; a file the disk cannot hold (estimated from the shape's parameters) is
# skipped with a line saying so.
# llama.cpp is its own llama-bench, built for this CPU from the source `make llama-oracle`
# unpacks (cmake -DGGML_NATIVE=ON without AMX, the llama-bench target alone; kept in
# build/llama-native: about 15 minutes on an idle 2-core machine, 41 at a load of 4 to 10), or
# the one LLAMA_BENCH names. Its figures are llama-bench's own (-r 1 -o csv, its default F16 kv
# cache): -p 256 (prefill), -n 128 (decode from an empty context), -p 0 -n 128 -d 1000 (decode
# after 1000 positions, which llama-bench fills untimed). run's are its summary line's: decode
# generating 128 tokens after "Once upon a time", prefill of bench_common.sh's 256-token prompt,
# and at depth the generation rate of 128 tokens after a 1000-token prompt (-n 1128, the prompt's
# prefill not counted).
#   GGUF_REPEATS=N   repeats (default 3; medians are printed)
#   GGUF_THREADS=1   the thread counts (default 1 2)
#   GGUF_TYPES=q4_0  the types (default f32 f16 bf16 q8_0 q4_0 Q4_K_M)
#   GGUF_TESTS=decode  the tests (default decode prefill depth)
#   LLAMA_BENCH=PATH a llama-bench to use instead of building one (e.g. one built on this
#                    machine before)
set -euo pipefail
given=${LLAMA_BENCH:+$(realpath -m -- "$LLAMA_BENCH")} # before the cd, as given from where it ran
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
dir=build/bench
mkdir -p "$dir"
repeats=${GGUF_REPEATS:-3}
read -ra thread_counts <<<"${GGUF_THREADS:-1 2}"
read -ra types <<<"${GGUF_TYPES:-f32 f16 bf16 q8_0 q4_0 Q4_K_M}"
read -ra tests <<<"${GGUF_TESTS:-decode prefill depth}"
known_shapes=(15M 110M 1.1B) # export.py's SHAPES
shapes=("$@")
((${#shapes[@]})) || shapes=("${known_shapes[@]}")
n_gen=128 seq_len=2048
source tools/bench_common.sh # story, prompt, median, rate
long_prompt=$(story 90 "The dog was very happy. The end.") # 1000 tokens with BOS

# Bytes 256 weights of each type take (ggml's blocks: q8_0 34 bytes for 32 weights, q4_0 18; for
# Q4_K_M, a mix of Q4_K's 144 bytes for 256 and Q6_K's 210, Q6_K's), for the disk check
declare -A bytes_per_256=([f32]=1024 [f16]=512 [bf16]=512 [q8_0]=272 [q4_0]=144 [Q4_K_M]=210)
for type in "${types[@]}"; do
    [[ -n ${bytes_per_256[$type]:-} ]] ||
        { echo "bench_gguf: GGUF_TYPES: no type $type (f32 f16 bf16 q8_0 q4_0 Q4_K_M)" >&2
          exit 1; }
done
((${#types[@]})) || { echo "bench_gguf: GGUF_TYPES names no type" >&2; exit 1; }
declare -A asked=()
for test in "${tests[@]}"; do
    [[ $test == decode || $test == prefill || $test == depth ]] ||
        { echo "bench_gguf: GGUF_TESTS: no test $test (decode prefill depth)" >&2; exit 1; }
    asked[$test]=1
done
((${#tests[@]})) || { echo "bench_gguf: GGUF_TESTS names no test" >&2; exit 1; }
for shape in "${shapes[@]}"; do
    [[ " ${known_shapes[*]} " == *" $shape "* ]] ||
        { echo "bench_gguf: no shape $shape (${known_shapes[*]})" >&2; exit 1; }
done
[[ $repeats =~ ^[1-9][0-9]*$ ]] ||
    { echo "bench_gguf: GGUF_REPEATS=$repeats is not a positive whole number" >&2; exit 1; }
for threads in "${thread_counts[@]}"; do
    [[ $threads =~ ^[1-9][0-9]*$ ]] ||
        { echo "bench_gguf: GGUF_THREADS: $threads is not a positive whole number" >&2; exit 1; }
done
((${#thread_counts[@]})) || { echo "bench_gguf: GGUF_THREADS names no thread count" >&2; exit 1; }
[[ -z $given || (-f $given && -x $given) ]] ||
    { echo "bench_gguf: LLAMA_BENCH=$LLAMA_BENCH is not an executable file" >&2; exit 1; }

[[ -x ./run ]] || { echo "bench_gguf: ./run is missing (make run builds it)" >&2; exit 1; }
# the quantizer (build/llama_logits), llama.cpp's source, and the bandwidth
make --no-print-directory llama-oracle build/bandwidth >/dev/null
models/fetch.sh tokenizer.model >/dev/null
llama_src=build/llama.cpp
if [[ -n $given ]]; then
    llama_bench=$given
    llama_what="$llama_bench (LLAMA_BENCH)"
else
    llama_build=build/llama-native
    llama_bench=$llama_build/bin/llama-bench
    if [[ ! -f $llama_src/CMakeLists.txt ]]; then
        echo "skipped the GGUF block: llama.cpp's source is not there (make llama-oracle needs npm)"
        exit 0
    fi
    # Configured every time, so that a build made with other flags is brought up to date (ninja
    # does nothing when it is). AMX is left out: -march=native turns on ggml's AMX kernels where
    # the CPU has AMX-INT8 (Sapphire Rapids), and on this VM ggml_backend_amx_mul_mat segfaults on
    # every quantized file's first batch (llama.cpp issue 20824, closed without a fix).
    [[ -x $llama_bench ]] || echo "building llama-bench for this CPU into $llama_build (once)" >&2
    no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    # its messages only when it fails: llama.cpp's CMakeLists prints "CMAKE_BUILD_TYPE=Release" on
    # stderr, a stray line in make bench's tables
    configured=$(cmake -S "$llama_src" -B "$llama_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=ON -DCMAKE_C_FLAGS="$no_amx" -DCMAKE_CXX_FLAGS="$no_amx" \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_SUBPROCESS=OFF 2>&1) || { echo "$configured" >&2; exit 1; }
    cmake --build "$llama_build" --target llama-bench -j "$(nproc)" >/dev/null
    llama_what="llama-bench built natively from $(git -C "$llama_src" log -1 --format='%h of %cs')"
fi

# The number of weights of a shape (export.py's, its tensors in nllm_format's order)
params_of() {
    "$PYTHON" -c 'import math, sys, export, nllm_format as f
c, _ = export.load_random(sys.argv[1], 0, None)
print(sum(math.prod(s) * (c.n_layers if per else 1) for _, per, s in f.tensor_order(c)))' "$1"
}

# Whether a shape's file of a type fits on the disk, 1 GiB left over; if not, a line saying so
fits() {
    local need free
    need=$(($(params_of "$1") * bytes_per_256[$2] / 256))
    free=$(df -B1 --output=avail "$dir" | tail -1)
    ((need + (1 << 30) < free)) && return 0
    echo "skipped $1 $2: its file needs about $((need >> 20)) MiB, the disk has $((free >> 20))" \
        "MiB free (1 GiB kept)"
    return 1
}

# A shape's file of a type in $dir, written when missing or when it holds fewer than seq_len
# positions (an older block's): export.py's (its vocabulary Llama 2's, models/tokenizer.model),
# or the quantizer's (build/llama_logits) of the f32 file for Q4_K_M. Fails, with a line saying
# why, when the disk or the quantizer is missing; a writer's error stops the block.
gguf_file() {
    local shape=$1 type=$2 out=$dir/$1-$2.gguf held
    if [[ -f $out ]]; then
        held=$(./run "$out" --info 2>/dev/null | sed -n 's/^ *seq_len *//p')
        ((${held:-0} >= seq_len)) && return 0
        rm -f "$out"
    fi
    fits "$shape" "$type" || return 1
    if [[ $type == Q4_K_M ]]; then
        [[ -x build/llama_logits ]] ||
            { echo "skipped $shape Q4_K_M: no quantizer (make llama-oracle needs npm)"; return 1; }
        gguf_file "$shape" f32 ||
            { echo "skipped $shape Q4_K_M: it is quantized from the f32 file"; return 1; }
        build/llama_logits "$dir/$shape-f32.gguf" --quantize "$out" Q4_K_M >/dev/null || exit 1
    else
        "$PYTHON" export.py --random "$shape" --dtype "$type" --seq-len "$seq_len" --out "$out" \
            --quiet || exit 1
    fi
}

# The median of the numbers in $1 (separated by spaces), or nothing.
m() { tr ' ' '\n' <<<"${1:-}" | median; }

# llama-bench's tests on file $1 with $2 threads and the options that follow: a line
# "prefill|decode|depth tokens/s bytes" each (bytes: the file's tensors, llama's model_size); its
# failure (a crash prints nothing on stdout) stops the block with a line naming the file
llama_tests() {
    local model=$1 threads=$2 csv
    shift 2
    csv=$("$llama_bench" -m "$model" -t "$threads" -r 1 -o csv "$@" 2>/dev/null) ||
        { echo "bench_gguf: llama-bench failed on $model (exit $?)" >&2; return 1; }
    awk -F, <<<"$csv" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        { gsub(/"/, "") }
        { kind = $col["n_prompt"] > 0 ? "prefill" : $col["n_depth"] > 0 ? "depth" : "decode"
          print kind, $col["avg_ts"], $col["model_size"] }'
}

# run's summary line on file $1 with $2 threads and the options that follow (the prompt last)
run_line() {
    local model=$1 threads=$2
    shift 2
    ./run "$model" --threads="$threads" "$@" 2>&1 >/dev/null | tail -1
}

# One row of the table from the medians ("" for a test not run: "-"): shape type threads, run's
# and llama.cpp's decode, prefill and depth decode, the file's tensors' bytes, the bandwidth
row() {
    awk -v s="$1" -v t="$2" -v n="$3" -v od="$4" -v td="$5" -v op="$6" -v tp="$7" -v oz="$8" \
        -v tz="$9" -v bytes="${10}" -v bw="${11}" 'function cell(o, l) {
            if (o == "" || l == "") return sprintf(" %9s %9s %6s |", "-", "-", "-")
            return sprintf(" %9.1f %9.1f %6.2f |", o, l, o / l) }
        function share(r) { return r == "" ? "-" : sprintf("%.0f%%", 100 * r * bytes / 1e9 / bw) }
        BEGIN {
            printf "%-5s %-7s %7d |%s%s%s %8.1f %7.1f %7s %7s\n", s, t, n, cell(od, td),
                cell(op, tp), cell(oz, tz), bytes / 1e6, bw, share(od), share(td) }'
}

# Every file first, so that what is skipped is said before the table
declare -A have=()
for shape in "${shapes[@]}"; do
    for type in "${types[@]}"; do
        if gguf_file "$shape" "$type"; then have[$shape]+="$type "; fi
    done
done
first=$(for shape in "${shapes[@]}"; do for type in ${have[$shape]:-}; do
    echo "$dir/$shape-$type.gguf"; done; done | head -1)
[[ -n $first ]] || { echo "skipped the GGUF block: no file could be written"; exit 0; }
n_prompt=$(./run "$first" --tokenize "$prompt" | wc -l)     # 256
depth=$(./run "$first" --tokenize "$long_prompt" | wc -l)   # 1000
version=$("$llama_bench" -m "$first" -p 0 -n 1 -r 1 --no-warmup -o csv 2>/dev/null |
    awk -F, 'NR == 2 { gsub(/"/, ""); print $1 " (build " $2 ")" }') ||
    { echo "bench_gguf: $llama_bench failed on $first" >&2; exit 1; }

echo "llama.cpp: $llama_what, its build_commit $version, against run" \
    "$(git log -1 --format=%h), the same GGUF files; the median of $repeats repeat(s), the" \
    "engines taking turns on each file; tokens/s; ratio: run / llama.cpp"
echo "decode: $n_gen tokens from an empty context; prefill: a $n_prompt-token prompt; depth:" \
    "$n_gen tokens decoded after $depth positions; MB/tok: the file's tensors (llama-bench's" \
    "model_size), read once a token; bw: the read bandwidth (tools/bandwidth.c) measured between" \
    "the repeats (median); run% and llama%: each decode's MB/tok x tokens/s as a share of it" \
    "(a run that converts Q4_K_M at load, to q8_0 before its K-quant kernels, reads more)"
printf '%-5s %-7s %7s | %9s %9s %6s | %9s %9s %6s | %9s %9s %6s | %8s %7s %7s %7s\n' shape type \
    threads "run dec" "llama dec" ratio "run pre" "llama pre" ratio "run d$depth" \
    "llama d$depth" ratio MB/tok "bw GB/s" run% llama%
rows=()
for shape in "${shapes[@]}"; do
    read -ra here <<<"${have[$shape]:-}"
    ((${#here[@]})) || continue
    for threads in "${thread_counts[@]}"; do
        declare -A got=() bytes=()
        block_bw=()
        for ((r = 0; r < repeats; r++)); do
            block_bw+=("$(OMP_NUM_THREADS=$threads build/bandwidth 1024 1 2>/dev/null)")
            for type in "${here[@]}"; do
                model=$dir/$shape-$type.gguf
                options=()
                [[ -n ${asked[prefill]:-} ]] && options+=(-p 256) || options+=(-p 0)
                [[ -n ${asked[decode]:-} ]] && options+=(-n "$n_gen") || options+=(-n 0)
                results=""
                if [[ -n ${asked[prefill]:-}${asked[decode]:-} ]]; then
                    results=$(llama_tests "$model" "$threads" "${options[@]}")
                fi
                if [[ -n ${asked[depth]:-} ]]; then
                    results+=$'\n'$(llama_tests "$model" "$threads" -p 0 -n "$n_gen" -d "$depth")
                fi
                while read -r kind rate size; do
                    [[ -n $kind ]] || continue
                    got[$type llama $kind]+="$rate " bytes[$type]=$size
                done <<<"$results"
                # random weights' text must not stop at EOS
                if [[ -n ${asked[decode]:-} ]]; then
                    line=$(run_line "$model" "$threads" -t 0 -n $((5 + n_gen)) --ignore-eos \
                        "Once upon a time") # 5 prompt tokens
                    got[$type run decode]+="$(rate generation <<<"$line") "
                fi
                if [[ -n ${asked[prefill]:-} ]]; then
                    line=$(run_line "$model" "$threads" -n "$n_prompt" "$prompt")
                    got[$type run prefill]+="$(rate prompt <<<"$line") "
                fi
                if [[ -n ${asked[depth]:-} ]]; then
                    line=$(run_line "$model" "$threads" -t 0 -n $((depth + n_gen)) --ignore-eos \
                        "$long_prompt")
                    got[$type run depth]+="$(rate generation <<<"$line") "
                fi
            done
        done
        bw=$(printf '%s\n' "${block_bw[@]}" | median)
        for type in "${here[@]}"; do
            medians=()
            for kind in decode prefill depth; do
                for engine in run llama; do medians+=("$(m "${got[$type $engine $kind]:-}")"); done
            done
            rows+=("$(row "$shape" "$type" "$threads" "${medians[@]}" "${bytes[$type]}" "$bw")")
            echo "${rows[-1]}"
        done
        unset got bytes
    done
done

# The goals' summary (tools/gguf_summary.awk): the cells behind, the decodes below 95%
printf '%s\n' "${rows[@]}" | awk -f tools/gguf_summary.awk
