# The closing lines of tools/bench_gguf.sh's table, issue 29's goals 1 and 4, from its rows (shape,
# type, threads, then for decode, prefill and depth "| run llama ratio", then "| MB/tok bw run%
# llama%"; "-" for a test not run): every cell where run's rate is below llama.cpp's, from the
# rates and not the ratio as printed (0.996 prints 1.00), and every run decode below 95% of the
# bandwidth.
function cell(what) { return sprintf("%s %s %s-thread %s; ", $1, $2, $3, what) }
{ for (k = 0; k < 3; k++) {
      ours = $(5 + 4 * k); theirs = $(6 + 4 * k)
      if (ours == "-") continue
      cells++
      test = k == 0 ? "decode " : (k == 1 ? "prefill " : "depth ")
      if (ours + 0 < theirs + 0) {
          behind++; list = list cell(test sprintf("%.3f", ours / theirs)) } }
  if ($19 != "-") { decodes++; if ($19 + 0 < 95) { low++; lows = lows cell($19) } } }
END {
    sub(/; $/, "", list); sub(/; $/, "", lows)
    printf "cells behind: %d of %d%s\n", behind, cells, behind ? " (" list ")" : ""
    printf "run decode below 95%% of the bandwidth: %d of %d%s\n", low, decodes,
        low ? " (" lows ")" : "" }
