# bench_common.sh: what bench.sh and bench_ab.sh share, sourced by both: the prefill prompt, the
# median of numbers one a line (blank lines ignored), and a rate read off run's summary line.

# The prefill prompt: 256 tokens with BOS in the Llama 2 vocabulary (counted by run --tokenize);
# -n equal to its length runs the prompt and generates one token, so the prompt rate run prints
# is the prefill rate.
prompt=$(for ((i = 0; i < 23; i++)); do printf 'Once upon a time, there was a little dog. '; done)
prompt+="The end"

median() { awk NF | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# rate generation|prompt: the tokens/s of that phase in the summary line on stdin
rate() { sed -n "s/.* $1 \([0-9.]*\) tokens\/s.*/\1/p"; }
