#!/usr/bin/python3
"""Encoding speed of tokenizer.c against SentencePiece's Python binding, in the same run.

    /usr/bin/python3 tools/bench_tokenizer.py [TOKENIZER_BIN TOKENIZER_MODEL]

Run from the repo root by `make bench-tokenizer` (defaults: models/tokenizer.bin and
models/tokenizer.model, Llama 2's 32000-token vocabulary). The text is English: the licence texts
in /usr/share/common-licenses (Debian's base-files), repeated and cut to 10 KB, 100 KB, 1 MB and
10 MB. Both sides encode the same bytes (BOS included in our count); the ids must agree. Each
time is the median of several encodes (ours, SentencePiece's), in CPU time of the encoding thread,
since the machine is shared; MB/s counts 10^6 bytes of input per second.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

import sentencepiece

SIZES = [  # bytes, label, encodes by tokenizer.c, encodes by SentencePiece
    (10 * 1000, "10 KB", 101, 21), (100 * 1000, "100 KB", 21, 7), (1000 * 1000, "1 MB", 11, 3),
    (10 * 1000 * 1000, "10 MB", 5, 1)]
LICENCES = "/usr/share/common-licenses"


def english_text():
    seen, parts = set(), []
    for name in sorted(os.listdir(LICENCES)):
        path = os.path.realpath(os.path.join(LICENCES, name))
        if path not in seen and os.path.isfile(path):
            seen.add(path)
            parts.append(open(path, encoding="utf-8", errors="replace").read())
    return "\n".join(parts)


def cut(text, size):
    """text repeated and cut to size bytes, at a character boundary (it is ASCII here anyway)."""
    data = (text * (size // len(text) + 1)).encode("utf-8")[:size]
    return data.decode("utf-8", errors="ignore")


def main():
    bin_path = sys.argv[1] if len(sys.argv) > 1 else "models/tokenizer.bin"
    model_path = sys.argv[2] if len(sys.argv) > 2 else "models/tokenizer.model"
    sp = sentencepiece.SentencePieceProcessor(model_file=model_path)
    base = english_text()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size, label, repeats, sp_repeats in SIZES:
            text = cut(base, size)
            path = os.path.join(tmp, "text.txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            out = subprocess.run(["build/bench_tokenizer", bin_path, path, str(repeats)],
                                 capture_output=True, text=True, check=True).stdout.split()
            ours_ids, ours_s = int(out[0]), float(out[1])
            times = []
            for _ in range(sp_repeats):
                start = time.thread_time()
                ids = sp.encode(text)
                times.append(time.thread_time() - start)
            sp_s = statistics.median(times)
            if ours_ids != len(ids) + 1:
                print("ids differ at %s: ours %d, SentencePiece %d + BOS"
                      % (label, ours_ids, len(ids)))
                return 1
            n_bytes = len(text.encode("utf-8"))
            rows.append((label, len(ids) + 1, repeats, sp_repeats, n_bytes / ours_s / 1e6,
                         n_bytes / sp_s / 1e6))
            print("%s done" % label, file=sys.stderr)
    print("| text | tokens | tokenizer.c MB/s (median of) | SentencePiece Python MB/s (median of) "
          "| ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, tokens, repeats, sp_repeats, ours, theirs in rows:
        print("| %s | %d | %.1f (%d) | %.2f (%d) | %.1fx |"
              % (label, tokens, ours, repeats, theirs, sp_repeats, ours / theirs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
