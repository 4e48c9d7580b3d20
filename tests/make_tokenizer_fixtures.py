#!/usr/bin/python3
"""Writes the tokenizer test fixtures: SentencePiece's ids for a fixed list of strings.

    /usr/bin/python3 tests/make_tokenizer_fixtures.py [TOK512_MODEL [LLAMA2_MODEL]]

Run from the repo root, by hand, when the string list changes; the output is committed.
Model paths default to ../shared/models/tok512.model and ../shared/models/tokenizer.model.
Needs the sentencepiece module (Debian's python3-sentencepiece, hence /usr/bin/python3).

Output: tests/fixtures/tokenizer_ids_tok512.txt and tests/fixtures/tokenizer_ids_llama2.txt.
Format, one case per line (lines starting with '#' are comments; each case is preceded by a
comment with the string's Python repr, for humans):
    HEX<TAB>IDS
HEX is the string's UTF-8 bytes in lower-case hex ("-" for the empty string), IDS the ids
separated by single spaces, BOS (1) first, as sp.encode(s) with BOS prepended.
"""
import os
import sys

import sentencepiece

STRINGS = [
    "Hello world",
    "Once upon a time, there was a little girl named Lily.",
    "The quick brown fox jumps over the lazy dog.",
    " leading space",
    "trailing space ",
    "multiple   spaces   between    words",
    "   ",
    "    indented code",
    "line one\nline two\n",
    "\n\nstarts with newlines",
    "a\r\nb",
    "tab\tseparated\tvalues\t",
    "digits 0123456789 and 3.14159, 1,000,000",
    "Punctuation! Does it work? (a), [b], {c}; \"quoted\" 'single' - dash... ok",
    "!!!???...",
    "UPPER CASE AND lower case and MiXeD",
    "café naïve résumé façade",
    "Ünïcödé ÀÉÎÕÜ ß ø å",
    "e\u0301 (decomposed e acute)",
    "Привет, мир! Как дела?",
    "Ελληνικά κείμενα",
    "日本語のテキスト",
    "中文分词测试",
    "한국어 텍스트",
    "العربية",
    "€100 £50 ¥1000",
    "∑∫√∞ ≤ ≥",
    "emoji 😀 and 🎉🎉",
    "😀",
    "<s>",
    "a <s> b </s> c <unk>",
    "<0x41>",
    "x",
    "ß",
    "",
    "int main(void) {\n    return 0;\n}\n",
    "def f(x):\n\treturn x ** 2  # square",
    "https://example.com/path?q=1&r=2",
    "aaaaaaaaaaaaaaaaaaaaaaaa",
    "\u00a0non-breaking space",
    "bell\x07 and escape\x1b",
    "Lily and Tom were playing in the park. They saw a big dog. \"Look!\" said Lily. "
    "The dog wagged its tail and ran to them. They were happy.",
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    shared = os.path.join(here, "..", "..", "shared", "models")
    models = [
        ("tok512", sys.argv[1] if len(sys.argv) > 1 else os.path.join(shared, "tok512.model")),
        ("llama2", sys.argv[2] if len(sys.argv) > 2 else os.path.join(shared, "tokenizer.model")),
    ]
    for name, model in models:
        sp = sentencepiece.SentencePieceProcessor(model_file=model)
        out = os.path.join(here, "fixtures", "tokenizer_ids_%s.txt" % name)
        with open(out, "w", encoding="utf-8") as f:
            f.write("# SentencePiece ids (BOS first) from %s, by tests/make_tokenizer_fixtures.py\n"
                    % os.path.basename(model))
            f.write("# format: UTF-8 hex of the string ('-' if empty) TAB ids\n")
            for s in STRINGS:
                ids = [1] + sp.encode(s)
                f.write("# %s\n" % ascii(s))
                f.write("%s\t%s\n" % (s.encode("utf-8").hex() or "-", " ".join(map(str, ids))))
        print("wrote %s (%d strings)" % (out, len(STRINGS)))


if __name__ == "__main__":
    main()
