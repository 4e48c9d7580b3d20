#!/usr/bin/env bash
# same_outputs: a fixed set of run's commands (every mode, every dtype's export, the bad inputs)
# whose stdout, stderr, exit status and written files are recorded once, so that a refactoring
# can show that it changed no output byte. Figures that vary run to run (tokens/s, times, the
# thread count, the clock's seed) are masked; everything else is compared byte for byte.
#   tools/same_outputs.sh DIR [RUN]   writes DIR/NN.out for each command (RUN: default ./run)
#   diff -r OLD_DIR NEW_DIR           says what changed
# Needs models/stories260K.bin, tok512.bin, tokenizer.bin and stories260K.pt (make test fetches
# them) and, for the exports, /usr/bin/python3 with torch.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: tools/same_outputs.sh DIR [RUN]}
run=$(realpath "${2:-./run}")
python=${PYTHON:-/usr/bin/python3}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
m=models/stories260K.bin
n=0

mask() { # the figures that differ between two runs of the same build, and the scratch paths
    sed -E -e "s|$work|WORK|g" -e "s|$run|RUN|g" \
        -e 's/[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)? (tokens\/s|ms|s\b|us|%)/N \3/g' \
        -e 's/threads [0-9]+/threads N/g' -e 's/(seed|-s) [0-9]{10,}/\1 N/g' \
        -e 's/(clock cost,?) [0-9]+ ns/\1 N ns/' -e '/%|op_seconds|lap_cost/s/[0-9]+\.[0-9]+(e[-+]?[0-9]+)?/N/g' -e '/%/s/ +/ /g' \
        -e 's/"(tokens_per_s[a-z_]*|ms|seconds|threads|norm_share|median|min|max|b_faster_rounds)": [0-9.e+-]+/"\1": N/g' \
        -e '/round by round/s/[0-9]+\.[0-9]+/N/g' -e 's/B faster in [0-9]+/B faster in N/'
}
one() { # one command, its outputs and exit status into the next numbered file
    n=$((n + 1))
    local f
    f=$(printf '%s/%02d.out' "$out" "$n")
    {
        { printf '$' && printf ' %q' "$@" && printf '\n'; } | mask
        "$@" 2>"$work/err" >"$work/out" </dev/null
        echo "exit $?"
        echo "--- stdout"
        mask <"$work/out"
        echo "--- stderr"
        mask <"$work/err"
    } >"$f"
}

# every mode on stories260K
one "$run" $m -t 0 "Once upon a time"
one "$run" $m -t 1.0 -p 0.9 -s 133742 "Once upon a time"
one "$run" $m -t 0.7 -p 0 -s 42 -n 100 "Lily"
one "$run" $m -t 0 --norm=layernorm "Once upon a time"
one "$run" $m -t 0 --norm=rmsnorm_eps_outside -n 64 "Once upon a time"
one "$run" $m -t 0 --ignore-eos -n 80 "The cat"
one "$run" $m -t 0 --reference -n 40 "Once upon a time"
one "$run" $m -t 0 --prefill=serial -n 40 "Once upon a time"
one "$run" $m -t 0 -b 7 -n 40 "Once upon a time"
one "$run" $m -t 0 --threads=2 -n 60 "Once upon a time"
one "$run" $m -t 0 --compare -s 5 "Once upon a time"
one "$run" $m -t 0 --compare=rmsnorm,rmsnorm_eps_outside -s 5 -n 40 "Once"
one "$run" $m -t 0 --compare --json -s 5 -n 30 "Once upon a time"
one "$run" $m --ppl data/stories.txt
one "$run" $m --ppl data/stories.txt --norm=layernorm
one "$run" $m --tokenize "Hello world, it's  a test é 😀"
one "$run" $m --tokenize "Hello world" --json
one "$run" $m -z models/tokenizer.bin --tokenize "Hello world"
one "$run" $m -t 0 --profile -n 40 "Once upon a time"
printf 'Tell me a story about a cat.\nWhat happened next?\n' >"$work/chat.txt"
one sh -c "'$run' $m -m chat -t 0 -y 'You tell stories.' < '$work/chat.txt'"
printf 'Once upon a time\n' >"$work/prompt.txt"
one "$run" $m -t 0 -n 40 -f "$work/prompt.txt"
one "$run" $m -t 0 -n 20 --logits "$work/l.f32" "Once upon a time"
n=$((n + 1)) && sha256sum <"$work/l.f32" >"$(printf '%s/%02d.out' "$out" "$n")"
one "$run" --help
one "$run" --version

# bad input: each a one-line error and its status
one "$run"
one "$run" models/missing.bin "x"
one "$run" $m --bogus
one "$run" $m -t -1 "x"
one "$run" $m -p 2 "x"
one "$run" $m -n abc "x"
one "$run" $m --norm=groupnorm "x"
one "$run" $m --threads=0 "x"
one "$run" $m -b 7 --prefill=serial "x"
one "$run" $m --reference --profile "x"
one "$run" $m -s 7 ""
one "$run" $m "$(printf 'bad \377 utf8')"
one "$run" $m -z models/stories260K.bin "x"
one "$run" models/tok512.bin "x"
one "$run" $m -m banter "x"
one "$run" $m --ppl /nonexistent
: >"$work/empty.bin"
one "$run" "$work/empty.bin" "x"
head -c 100 $m >"$work/short.bin"
one "$run" "$work/short.bin" "x"
head -c 200000 $m >"$work/truncated.bin"
one "$run" "$work/truncated.bin" "x"

# every dtype export.py writes, run greedy, and its logits
if "$python" -c 'import torch' 2>/dev/null; then
    for dtype in f32 bf16 f16 q8_0 q4_0; do
        one "$python" export.py models/stories260K.pt --dtype "$dtype" --out "$work/s-$dtype.nllm"
        one "$run" "$work/s-$dtype.nllm" -z models/tok512.bin -t 0 -n 60 "Once upon a time"
        one "$run" "$work/s-$dtype.nllm" -z models/tok512.bin -t 0 -n 30 --logits "$work/l.f32" "Once"
        n=$((n + 1)) && sha256sum <"$work/l.f32" >"$(printf '%s/%02d.out' "$out" "$n")"
        n=$((n + 1)) && sha256sum <"$work/s-$dtype.nllm" >"$(printf '%s/%02d.out' "$out" "$n")"
    done
else
    echo "same_outputs: $python has no torch: the export commands are not recorded" >&2
fi
echo "same_outputs: $n outputs in $out"
