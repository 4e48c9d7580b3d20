# bench_common.sh: what bench.sh, bench_ab.sh and bench_gguf.sh share, sourced by them: the prefill
# prompt (and the story it is made of), the median of numbers one a line (blank lines ignored),
# and a rate read off run's summary line.
# shellcheck shell=bash disable=SC2034 # (prompt is used by the scripts that source this one)

# A prompt of $1 times the same sentence (11 tokens in the Llama 2 vocabulary), then the text $2.
story() {
    for ((i = 0; i < $1; i++)); do printf 'Once upon a time, there was a little dog. '; done
    printf '%s' "$2"
}

# The prefill prompt: 256 tokens with BOS in the Llama 2 vocabulary (counted by run --tokenize);
# -n equal to its length runs the prompt and generates one token, so the prompt rate run prints
# is the prefill rate.
prompt=$(story 23 "The end")

median() { awk NF | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# rate generation|prompt: the tokens/s of that phase in the summary line on stdin
rate() { sed -n "s/.* $1 \([0-9.]*\) tokens\/s.*/\1/p"; }
