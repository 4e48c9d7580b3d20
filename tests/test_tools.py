#!/usr/bin/env python3
"""The Python side's paths that test_export.py and test_train.py leave: tools/twins.py end to end on
a few steps (the table it writes holds the numbers of the runs it made, each read again here from
its source; a second run trains only the seeds the first did not; siblings at another shape go to
their own section; the bad settings it refuses before any training, each in one line), its paired
differences' 95% intervals (Student's t quantiles against the t density integrated, intervals on
hand-derived numbers), the tokenizer's remove_extra_whitespaces inference on SentencePiece
vocabularies trained here and the option carried in a model file, train.py's token ids past uint16,
the 16-bit norms and norm-share tools (tools/norm_half.py, tools/norm_share.py) on hand-derived
values, and the learning-rate sweep (tools/twins_lr.py) on two learning rates of a few steps and the
settings it refuses, the siblings' side-by-side training speed (tools/train_speed.py) on two
norms of a few steps, bench_gguf.sh's refused settings, configure failure and summary lines, and
the C benchmark tools' integer arguments (tools/bench_args.h: a bad one refused in one line, built
here by make). Run from the repository root with /usr/bin/python3 (make test does); the program
under test is $NORMLLAMA_RUN (default ./run), the tokenizer helper $TOKENIZE_CORPUS (default
build/tokenize_corpus). Prints one line per test and "N passed, M failed, K skipped"."""
import ctypes
import json
import math
import os
import re
import resource
import statistics
import subprocess
import sys

import numpy as np
import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nllm_format  # noqa: E402
import nllm_gguf  # noqa: E402
import train as train_py  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
import norm_half  # noqa: E402  (tools/)
import norm_share  # noqa: E402  (tools/)
import twins  # noqa: E402  (tools/)
from harness import Skip, collector, run_tests, scratch  # noqa: E402  (tests/)

RUN = os.environ.get("NORMLLAMA_RUN", "./run")
TOKENIZE_CORPUS = os.environ.get("TOKENIZE_CORPUS", "build/tokenize_corpus")
VALID = "data/cache/tinystories_valid.txt"
END = "\n<|endoftext|>\n"
TMP, tmp = scratch("normllama-tools-")
TESTS = []
test = collector(TESTS)


def stories():
    if not os.path.exists(VALID):
        raise Skip(f"{VALID} not fetched (no public address; set DATA_MIRROR)")
    return open(VALID, encoding="utf-8").read().split(END)[:-1]


# ----------------------------------------------------------------------------
# tools/twins.py


def run_out(*args):
    p = subprocess.run([RUN, *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def cells(section, quantity):
    """The RMSNorm and LayerNorm cells of the table row that starts with quantity."""
    for line in section.splitlines():
        if line.startswith(f"| {quantity}"):
            return [c.strip() for c in line.split("|")[2:4]]
    raise AssertionError(f"no row {quantity!r}")


@test
def twins_writes_a_table_read_from_the_runs_it_made():
    """twins.py on 3 steps (its table's numbers mean nothing here; where they come from is the
    test): the section between the markers of a docs file is replaced and the rest kept, the
    picture written beside it; the final validation loss is each twin's last eval record; run
    --ppl of each twin and of stories260K on the same text, and run --compare of the twin, give
    the perplexity, swap KL and top-1 cells and the greedy texts when run here again; each twin's
    GGUF gives its own file's logits bit for bit, under its own norm by default."""
    tiny_texts()
    docs = tmp("NORMS.md")
    open(docs, "w").write("# before\n\n<!-- twins:begin -->\nold\n<!-- twins:end -->\n\nafter\n")
    out = tmp("twins")
    p = subprocess.run([sys.executable, "tools/twins.py", "--seeds", "1", "--steps", "3",
                        "--eval-every", "3", "--ppl-stories", "8", "--profile-repeats", "1",
                        "--out", out, "--train", tmp("train.txt"), "--valid", tmp("valid.txt"),
                        "--docs", docs], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = open(docs).read()
    assert doc.startswith("# before\n\n<!-- twins:begin -->\nMade by") and "old" not in doc
    assert doc.endswith("<!-- twins:end -->\n\nafter\n") and os.path.exists(tmp("twins_loss.png"))
    # the command that made it: not make twins, which trains 2400 steps on data/cache's texts
    assert f"\n    {sys.executable} tools/twins.py --seeds 1 --steps 3 --batch-size 8 --lr 0.005 " \
        f"--warmup 100 --eval-every 3 --ppl-stories 8 --profile-repeats 1 --train " \
        f"{tmp('train.txt')} --valid {tmp('valid.txt')}\n" in doc, doc[:700]
    for norm in ("rmsnorm", "layernorm"):  # the twins for llama.cpp, read back under their norm
        logits = []
        for ext in ("nllm", "gguf"):
            logits.append(tmp(f"{norm}-{ext}.f32"))
            p = subprocess.run([RUN, os.path.join(out, "seed1", f"{norm}.{ext}"), "-t", "0", "-n",
                                "40", "--logits", logits[-1], "Once upon"],
                               capture_output=True, text=True, errors="replace")
            assert p.returncode == 0 and f"norm {norm}" in p.stderr, p.stderr
        assert open(logits[0], "rb").read() == open(logits[1], "rb").read(), norm
    section = doc[doc.index("<!-- twins:begin -->"):]
    text = os.path.join(out, "valid_ppl.txt")
    assert open(text).read().count("\n") >= 8
    stories_model = os.path.join(out, "stories260K_256.nllm")
    for norm, column in (("rmsnorm", 0), ("layernorm", 1)):
        model = os.path.join(out, "seed1", f"{norm}.nllm")
        log = [json.loads(line) for line in open(os.path.join(out, "seed1", f"{norm}.jsonl"))]
        last = [r["val_loss"] for r in log if r["kind"] == "eval"][-1]
        assert cells(section, "final validation loss")[column] == f"{last:.3f}", norm
        ppl = re.search(r"mean NLL ([\d.]+) nats/token, perplexity ([\d.]+)",
                        run_out(model, "-z", "models/tok512.bin", "--ppl", text))
        assert cells(section, "run --ppl, own norm: mean NLL")[column] == \
            f"{float(ppl.group(1)):.3f}", norm
        assert cells(section, "run --ppl, own norm: perplexity")[column] == \
            f"{float(ppl.group(2)):.2f}", norm
        other = "layernorm" if norm == "rmsnorm" else "rmsnorm"
        c = json.loads(run_out(model, "-z", "models/tok512.bin", "-t", "0", "-n", "256",
                               f"--compare={norm},{other}", "--json", "Once upon a time"))
        assert cells(section, "swap: mean KL")[column] == f"{c['summary']['mean_kl']:.4f}"
        assert cells(section, "swap: top-1 agreement")[column] == \
            f"{c['summary']['top1_agreement']:.3f}"
        greedy = run_out(model, "-z", "models/tok512.bin", "-t", "0", "-n", "256",
                         "Once upon a time")
        assert greedy.rstrip("\n") == c["texts"][0]
        assert f"- {norm} twin, seed 1, greedy from \"Once upon a time\": " \
               f"{json.dumps(c['texts'][0][:600])}" in section, norm
    # stories260K, no twin, has its line below the table: "mean NLL a, perplexity b under
    # RMSNorm; c, d under LayerNorm"
    stories_line = [line for line in section.splitlines() if line.startswith("stories260K (")]
    assert len(stories_line) == 1, section
    for norm in ("rmsnorm", "layernorm"):
        ppl = re.search(r"mean NLL ([\d.]+) nats/token, perplexity ([\d.]+)",
                        run_out(stories_model, "-z", "models/tok512.bin", f"--norm={norm}",
                                "--ppl", text))
        nll, perplexity = f"{float(ppl.group(1)):.3f}", f"{float(ppl.group(2)):.2f}"
        want = f"mean NLL {nll}, perplexity {perplexity} under RMSNorm" if norm == "rmsnorm" \
            else f"; {nll}, {perplexity} under LayerNorm"
        assert want in stories_line[0], (norm, want, stories_line[0])


def tiny_texts():
    """A training text of 150 stories and a validation text of 40, in the scratch directory."""
    s = stories()
    open(tmp("train.txt"), "w").write(END.join(s[300:450]) + END)
    open(tmp("valid.txt"), "w").write(END.join(s[:40]) + END)
    return ["--train", tmp("train.txt"), "--valid", tmp("valid.txt")]


def twins_run(*args):
    p = subprocess.run([sys.executable, "tools/twins.py", "--eval-every", "3", "--ppl-stories",
                        "8", "--profile-repeats", "1", *tiny_texts(), *args],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


@test
def twins_second_run_trains_only_the_new_seed():
    """After twins_writes_a_table_read_from_the_runs_it_made's one seed, --seeds 2 into the same
    --out trains seed 2 alone (seed 1's checkpoint untouched), and the paired differences of its
    table are those of the two logs' final validation losses, by hand: with d the LayerNorm -
    RMSNorm differences, mean(d) +- t(0.975, 1 df) |d1 - d2| / 2 (sd / sqrt(2) = |d1 - d2| / 2)."""
    out = tmp("twins")
    if not os.path.exists(os.path.join(out, "seed1", "rmsnorm.pt")):
        raise Skip("twins_writes_a_table_read_from_the_runs_it_made did not train seed 1")
    before = os.stat(os.path.join(out, "seed1", "rmsnorm.pt")).st_mtime_ns
    docs = tmp("NORMS2.md")
    open(docs, "w").write("<!-- twins:begin -->\n<!-- twins:end -->\n")
    stdout = twins_run("--seeds", "2", "--steps", "3", "--out", out, "--docs", docs)
    assert "twins: 2 of 4 models already trained" in stdout, stdout[:2000]
    assert "seed 1, rmsnorm: " not in stdout and "seed 2, rmsnorm: " in stdout
    assert os.stat(os.path.join(out, "seed1", "rmsnorm.pt")).st_mtime_ns == before
    last = {}
    for seed in (1, 2):
        for norm in ("rmsnorm", "layernorm"):
            log = [json.loads(line) for line in open(os.path.join(out, f"seed{seed}",
                                                                  f"{norm}.jsonl"))]
            last[seed, norm] = [r["val_loss"] for r in log if r["kind"] == "eval"][-1]
    d = [last[s, "layernorm"] - last[s, "rmsnorm"] for s in (1, 2)]
    mean, half = (d[0] + d[1]) / 2, 12.7062 * abs(d[0] - d[1]) / 2
    row = [line for line in open(docs).read().splitlines()
           if line.startswith("| final validation loss, nats/token |")]
    assert row == [f"| final validation loss, nats/token | {mean:+.3f} [{mean - half:+.3f}, "
                   f"{mean + half:+.3f}] |"], (row, d)
    paired = json.load(open(os.path.join(out, "results.json")))["paired"]["layernorm"]
    assert abs(paired["val_loss"]["high"] - (mean + half)) < 1e-12, paired["val_loss"]
    # --no-train measures what is there, and refuses a seed that is not
    p = subprocess.run([sys.executable, "tools/twins.py", "--seeds", "3", "--steps", "3",
                        "--eval-every", "3", "--ppl-stories", "8", "--no-train", "--no-docs",
                        "--out", out, *tiny_texts()],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "lacks seed 3 rmsnorm, seed 3 layernorm" in p.stderr, p.stderr
    # a model trained with other settings is not silently taken, nor trained over
    p = subprocess.run([sys.executable, "tools/twins.py", "--seeds", "1", "--steps", "3",
                        "--eval-every", "3", "--ppl-stories", "8", "--lr", "0.01", "--no-docs",
                        "--out", out, *tiny_texts()],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "--lr 0.005 (this run: 0.01)" in p.stderr, p.stderr


@test
def siblings_at_another_shape_write_their_own_section():
    """--norms rmsnorm dyt at dim 32, 2 layers: the models have that shape, the siblings section
    is written and the twins section kept, no stories260K line (another shape), and dyt's swap
    cell is run --ppl of the dyt model with rmsnorm swapped in."""
    out, docs = tmp("siblings"), tmp("NORMS3.md")
    open(docs, "w").write("<!-- twins:begin -->\nkept\n<!-- twins:end -->\n"
                          "<!-- siblings:begin -->\nold\n<!-- siblings:end -->\n")
    twins_run("--norms", "rmsnorm", "dyt", "--steps", "2", "--dim", "32", "--hidden-dim", "64",
              "--n-layers", "2", "--n-heads", "4", "--n-kv-heads", "2", "--out", out,
              "--docs", docs)
    doc = open(docs).read()
    assert doc.startswith("<!-- twins:begin -->\nkept\n<!-- twins:end -->\n<!-- siblings:begin "
                          "-->\nMade by") and "old" not in doc and "stories260K (" not in doc
    assert os.path.exists(tmp("siblings_loss.png"))
    log = [json.loads(line) for line in open(os.path.join(out, "seed1", "dyt.jsonl"))]
    assert (log[0]["dim"], log[0]["n_layers"], log[0]["n_kv_heads"]) == (32, 2, 2)
    ppl = re.search(r"perplexity ([\d.]+)", run_out(os.path.join(out, "seed1", "dyt.nllm"),
                                                    "-z", "models/tok512.bin", "--norm=rmsnorm",
                                                    "--ppl", os.path.join(out, "valid_ppl.txt")))
    assert cells(doc, "run --ppl under rmsnorm swapped in")[1] == f"{float(ppl.group(1)):.2f}"
    assert cells(doc, "run --ppl under rmsnorm swapped in")[0] == "–"


@test
def twins_refuses_bad_settings_in_one_line():
    """What would stop the study after hours of training, or never stop it, is refused before any:
    each case one line naming the option, exit 1, nothing trained (a shape option of 0 had passed
    as the default, --eval-every 0 and a --valid of too few stories ended in a traceback after the
    training, a --docs without its end marker after the measuring)."""
    texts, out = tiny_texts(), tmp("twins_refused")
    open(tmp("a_file"), "w").close()
    open(tmp("HALF.md"), "w").write("<!-- twins:begin -->\nno end\n")
    cases = [(["--dim", "0"], "twins.py: error: --dim must be at least 1, got 0"),
             (["--eval-every", "0"], "twins.py: error: --eval-every must be at least 1, got 0"),
             (["--lr", "nan"], "twins.py: error: --lr must be a positive number, got nan"),
             (["--seeds", "x"], "twins.py: error: argument --seeds: invalid int value: 'x'"),
             (["--ppl-stories", "40"], f"twins: --valid {tmp('valid.txt')} holds 40 stories: "
              "--ppl-stories 40 and the --profile prompt's story after them need 41"),
             (["--valid", tmp("none.txt")], f"twins: --valid {tmp('none.txt')}: no such file"),
             (["--out", tmp("a_file")], f"twins: --out {tmp('a_file')} is a file, not a directory"),
             (["--docs", tmp("HALF.md"), "--no-docs"], None),
             (["--docs", tmp("HALF.md")], f"twins: --docs {tmp('HALF.md')} has <!-- twins:begin "
              "--> but no <!-- twins:end --> after it")]
    for args, message in cases:
        p = subprocess.run([sys.executable, "tools/twins.py", "--steps", "2", "--ppl-stories",
                            "2", "--out", out, "--no-train", *texts, *args],
                           capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 1 and len(lines) == 1, (args, p.returncode, p.stderr[-1500:])
        if message is None:  # --no-docs: the broken docs file is not read; --out has no models
            assert lines[0].startswith(f"twins: --no-train, but {out} lacks seed 1"), lines
        else:
            assert lines[0].startswith(message), (args, lines)


@test
def twins_reads_run_output_that_is_not_utf8():
    """run prints each generated token's bytes as they are, and a model 2 steps into training
    greedily generates lone byte tokens (an identity sibling at dim 16 did: 0xc4 then no
    continuation byte), whose text twins.sh had stopped on with a UnicodeDecodeError; it reads
    such a byte as U+FFFD."""
    out, err = twins.sh(["/bin/sh", "-c", r"printf 'a\304(b'; printf '\377' >&2"])
    assert (out, err) == ("a\ufffd(b", "\ufffd"), (out, err)


def t_density(x, df):
    return math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - (df + 1) / 2 *
                    math.log1p(x * x / df)) / math.sqrt(df * math.pi)


def t_mass(t, df, n=4000):
    """P(0 < T < t) for Student's t with df degrees of freedom, by Simpson's rule on n intervals
    (error of order t^5 / n^4 times the density's fourth derivative: below 1e-9 here)."""
    h = t / n
    inner = sum((4 if i % 2 else 2) * t_density(i * h, df) for i in range(1, n))
    return h / 3 * (t_density(0, df) + inner + t_density(t, df))


@test
def t_quantiles_are_the_t_distributions():
    """t975(df) leaves 2.5% above it: the t density integrated from 0 to it is 0.475, within what
    rounding to 4 decimals moves (5e-5 times the density there) for the table (df 1..30), within
    2e-6 for the expansion beyond (df 31, 40, 60, 120, 1000; scipy's t.ppf measured it 1.7e-6
    low at 31, 6e-7 at 40); and the closed forms, df 1:
    tan(0.475 pi) = 12.7062, df 2: 0.95 sqrt(2 / (4 0.975 0.025)) = 4.3027."""
    for df in range(1, 31):
        t = twins.t975(df)
        assert abs(t_mass(t, df) - 0.475) <= 5e-5 * t_density(t, df) + 1e-9, (df, t)
    for df in (31, 40, 60, 120, 1000):
        t = twins.t975(df)
        assert abs(t_mass(t, df) - 0.475) <= 2e-6 * t_density(t, df) + 1e-9, (df, t)
    assert f"{math.tan(0.475 * math.pi):.4f}" == f"{twins.t975(1):.4f}" == "12.7062"
    assert f"{0.95 * math.sqrt(2 / (4 * 0.975 * 0.025)):.4f}" == f"{twins.t975(2):.4f}" == "4.3027"


@test
def paired_intervals_on_hand_derived_numbers():
    """Differences 0.5, 0, 1.0 (other - base): mean 0.5, sd 0.5, 95% half-width 4.3027 x
    0.5 / sqrt(3) = 1.242083; 0.1 and 0.3: mean 0.2, sd 0.1 sqrt(2), half-width 12.7062 x 0.1 =
    1.27062; one pair: no interval; and the words each interval reads as."""
    m, low, high = twins.paired([1.0, 2.0, 3.5], [1.5, 2.0, 4.5])
    assert abs(m - 0.5) < 1e-12 and abs(low + 0.742083) < 1e-6 and abs(high - 1.742083) < 1e-6
    m, low, high = twins.paired([1.0, 1.0], [1.1, 1.3])
    assert abs(m - 0.2) < 1e-12 and abs(low + 1.07062) < 1e-6 and abs(high - 1.47062) < 1e-6
    assert twins.paired([2.0], [2.5]) == (0.5, None, None)
    assert twins.verdict("loss", "nats/token", (0.5, -0.742083, 1.742083), 3) == \
        "loss: no difference larger than 1.742 nats/token at 95% (mean +0.500)"
    assert twins.verdict("loss", "nats", (-0.2, -0.3, -0.1), 2) == \
        "loss: lower by 0.10 to 0.30 nats at 95% (mean -0.20)"
    assert twins.verdict("ppl", "", (0.2, 0.1, 0.3), 2) == \
        "ppl: higher by 0.10 to 0.30 at 95% (mean +0.20)"
    assert twins.verdict("ppl", "", (0.2, None, None), 2) == "ppl +0.20 (one seed: no interval)"


# ----------------------------------------------------------------------------
# remove_extra_whitespaces


def trained_vocabulary(name, text, remove_extra_whitespaces):
    """A 400-piece BPE SentencePiece model trained here on text (llama2.c's tokenizer options:
    byte fallback, digits split, no normalization rule), exported by export.py; returns
    (processor, .bin path)."""
    open(tmp(name + ".txt"), "w").write(text)
    spm.SentencePieceTrainer.train(
        input=tmp(name + ".txt"), model_prefix=tmp(name), vocab_size=400, model_type="bpe",
        character_coverage=1.0, byte_fallback=True, split_digits=True,
        allow_whitespace_only_pieces=True, normalization_rule_name="identity",
        remove_extra_whitespaces=remove_extra_whitespaces, max_sentence_length=1 << 20,
        minloglevel=2)
    p = subprocess.run([sys.executable, "export.py", tmp(name + ".model"), "--out",
                        tmp(name + ".bin"), "--quiet"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return spm.SentencePieceProcessor(model_file=tmp(name + ".model")), tmp(name + ".bin")


def our_ids(bin_path, strings):
    """tokenizer.c's ids (BOS first) for each string, by build/tokenize_corpus."""
    corpus = tmp("corpus.txt")
    open(corpus, "w").write("".join((s.encode().hex() or "-") + "\n" for s in strings))
    p = subprocess.run([TOKENIZE_CORPUS, bin_path, corpus], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return [[int(i) for i in line.split("\t")[0].split()] for line in p.stdout.splitlines()]


SPACED = ["a  b   c", "  leading and trailing  ", "x\n\n    y", "one \t two", " ", "   ",
          "Once upon a time,  there was a dog.", "\u2581 two  spaces"]


@test
def whitespace_inference_on_vocabularies_trained_here():
    """tokenizer_load infers remove_extra_whitespaces from whether a piece holds two spaces (the
    .bin does not store it). Two vocabularies besides tok512 and Llama 2's: one trained with the
    option on (spaces squeezed, so no such piece), one with it off on text indented by runs of
    spaces (it learns the pieces "  " and "    "). Each encodes strings with runs of spaces to
    SentencePiece's ids. (A vocabulary trained with the option off whose text had too few runs to
    learn such a piece is inferred as squeezing: docs/TOKENIZER.md, the case the file cannot
    tell.)"""
    text = END.join(stories()[:400])
    indented = text + "".join(f"\n    if x:\n        y = {i}\n" for i in range(300))
    for name, corpus, squeezes in (("squeezed", text.replace(". ", ".  "), True),
                                   ("kept", indented, False)):
        sp, bin_path = trained_vocabulary(name, corpus, squeezes)
        pieces = [sp.id_to_piece(i) for i in range(sp.vocab_size())]
        assert any("\u2581\u2581" in p for p in pieces) != squeezes, name
        ours = our_ids(bin_path, SPACED)
        for s, got in zip(SPACED, ours):
            assert got == [1] + sp.encode(s), (name, s, got, [1] + sp.encode(s))
        # the two vocabularies disagree on runs of spaces, so the inference decided something
        assert (sp.encode("a  b") == sp.encode("a b")) == squeezes, name


@test
def remove_extra_whitespaces_travels_in_the_model_file():
    """The case the inference gets wrong: a vocabulary trained with remove_extra_whitespaces off on
    text with no runs of spaces learns no piece "  ", so its .bin is taken for one that squeezes
    runs, and encodes "a  b" as "a b". A model file that carries the vocabulary (our own file and
    our GGUF, export.py reading the option from the model's NormalizerSpec) records the option,
    and run --tokenize then gives SentencePiece's ids for strings with runs of spaces."""
    sp, bin_path = trained_vocabulary("few-runs", END.join(stories()[:400]), False)
    assert not any("\u2581\u2581" in sp.id_to_piece(i) for i in range(sp.vocab_size()))
    assert sp.encode("a  b") != sp.encode("a b")  # SentencePiece keeps the run
    assert our_ids(bin_path, ["a  b"])[0] == [1] + sp.encode("a b")  # the .bin's wrong guess
    vocab = nllm_format.sentencepiece_vocab(tmp("few-runs.model"))
    assert not vocab.remove_extra_whitespaces
    c = nllm_format.Config(8, 16, 1, 2, 1, sp.vocab_size(), 16)
    shapes = {name: shape for name, _, shape in nllm_format.tensor_order(c)}
    zeros = {name: np.zeros(shape, np.float32) for name, shape in shapes.items()}
    nllm_format.write_model(tmp("few-runs.nllm"), c, lambda name, layer: zeros[name],
                            progress=False, vocab=vocab)
    with open(tmp("few-runs.gguf"), "wb") as f:
        nllm_gguf.write_model(f, c, {nllm_gguf.gguf_name(name, 0): zeros[name] for name in shapes},
                              vocab)
    for model in ("few-runs.nllm", "few-runs.gguf"):
        for s in SPACED:
            got = json.loads(run_out(tmp(model), "--tokenize", s, "--json"))["ids"]
            assert got == [1] + sp.encode(s), (model, s, got)


# ----------------------------------------------------------------------------
# train.py's token ids


class WideVocabulary:
    """A tokenizer of Llama 3's size (128,256 ids): each character of a story is one id past
    65,535 (BOS 128000), as train.py's load_tokens calls a SentencePiece processor."""

    def vocab_size(self):
        return 128256

    def bos_id(self):
        return 128000

    def encode(self, texts):
        return [[65536 + (ord(ch) % 62000) for ch in t] for t in texts]


@test
def token_ids_past_uint16_are_stored_whole():
    """A vocabulary past 65,536 ids: load_tokens keeps each id (uint32), where uint16 wrapped 70000
    to 4464 with no error; tok512's ids stay uint16 (half the cache)."""
    path = tmp("wide.txt")
    open(path, "w").write("Once upon a time." + END + "The end." + END)
    saved = train_py.CACHE_DIR
    train_py.CACHE_DIR = tmp("cache")
    try:
        wide = WideVocabulary()
        want = [i for s in wide.encode(["Once upon a time.", "The end."]) for i in [128000] + s]
        for attempt in ("tokenized", "cached"):
            ids = train_py.load_tokens(path, wide, "wide")
            assert ids.dtype == np.uint32 and ids.tolist() == want, attempt
        small = train_py.load_tokens(path, spm.SentencePieceProcessor(
            model_file="models/tok512.model"), "tok512")
        assert small.dtype == np.uint16 and small[0] == 1 and small.max() < 512
    finally:
        train_py.CACHE_DIR = saved


# ----------------------------------------------------------------------------
# tools/norm_half.py and tools/norm_share.py


def half_rmsnorm(row, mode="all16", norm="rmsnorm", fmt="fp16"):
    x = np.array([row], dtype=np.float32)
    return norm_half.norm16(x, np.ones(x.shape[-1]), norm, fmt, mode)[0]


@test
def half_sum_of_squares_overflows_where_derived():
    """A constant row c of dim 64: its fp16 sum of squares 64 c^2 passes 65504 (to inf from
    65520) past c = sqrt(65504 / 64) = 31.99. c = 31.9 is 31.90625 in fp16, its square 1018 and
    every pairwise sum (2036, 4072, ... 65152) exact: each output 1 within fp16's rounding. c = 32:
    1024 * 64 = 65536, inf, 1 / sqrt(inf) = 0: a row of zeros, finite. With float32 sums and fp16
    squares (PyTorch eager) 32 is fine, and the squares themselves overflow at |x| = 256 (255.875
    squared is 65472, finite; 256 squared 65536)."""
    assert np.allclose(half_rmsnorm([31.9] * 64), 1, atol=2 ** -10)
    assert np.all(half_rmsnorm([32.0] * 64) == 0)
    assert np.allclose(half_rmsnorm([32.0] * 64, "pow16"), 1, atol=2 ** -10)
    assert np.allclose(half_rmsnorm([255.875] * 64, "pow16"), 1, atol=2 ** -10)
    assert np.all(half_rmsnorm([256.0] * 64, "pow16") == 0)
    assert np.allclose(half_rmsnorm([256.0] * 64, "sum32"), 1, atol=2 ** -10)
    assert abs(norm_half.overflow_scale_rmsnorm_all16(1.0, 64) - 31.99) < 0.01


@test
def half_layernorm_subtracts_the_mean_that_rmsnorm_squares():
    """Rows m +- 1 of dim 64 (exact in fp16 for m up to 1024): LayerNorm's fp16 sum of x is 64 m,
    every pairwise sum exact, finite at m = 1023 (65472) and inf at 1024 (65536), whose mean then
    gives NaN; its output +-1/sqrt(1 + 1e-5) while finite. RMSNorm squares the mean: (1023 +- 1)^2
    passes 65504 element by element, a row of zeros, where LayerNorm gave the answer."""
    signs = np.array([1.0, -1.0] * 32)
    out = half_rmsnorm(1023 + signs, norm="layernorm")
    assert np.allclose(out, signs, atol=2 ** -10), out[:4]
    assert np.all(np.isnan(half_rmsnorm(1024 + signs, norm="layernorm")))
    assert np.all(half_rmsnorm(1023 + signs) == 0)


@test
def half_and_bfloat16_round_as_ieee():
    """bf16 keeps 7 fraction bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 and goes to the even
    1; 1 + 3 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6 and goes to 1 + 2^-6; infinity stays.
    The fp16 tree sum of [2048, 1, 1, 1] is (2048 + 1) + (1 + 1) = 2048 + 2 = 2050 (2049 ties to
    the even 2048: fp16's spacing at 2048 is 2), where the exact sum is 2051."""
    got = norm_half.to_fmt([1 + 2 ** -8, 1 + 3 * 2 ** -8, np.inf], "bf16")
    assert got.tolist() == [1.0, 1 + 2 ** -6, np.inf], got
    assert float(norm_half.tree_sum(np.array([2048, 1, 1, 1], np.float16), "fp16")) == 2050


@test
def half_norms_model_in_float64_is_the_reference_perplexity():
    """norm_half's model (stories260K.pt in nllm_model, float32) with every norm computed by its
    float64 reference, over data/stories.txt in run --ppl's chunks: the mean NLL of
    tests/fixtures/ppl_stories_stories260K.txt (an independent float64 forward pass), within
    1e-4 nats (measured 3.6e-7 and 1.8e-7, within the fixture's six decimals)."""
    import math

    if not os.path.exists("models/stories260K.pt"):
        raise Skip("models/stories260K.pt not fetched (make test fetches it)")
    model = norm_half.load_model("models/stories260K.pt")
    sp = spm.SentencePieceProcessor(model_file="models/tok512.model")
    parts = norm_half.chunks(sp.encode(open("data/stories.txt").read()), model.config.seq_len)
    want = {line.split()[0]: float(line.split()[2])
            for line in open("tests/fixtures/ppl_stories_stories260K.txt")}
    swap = norm_half.Norm16(model)
    for norm in ("rmsnorm", "layernorm"):
        swap.set(norm, None, None, 1)
        got = math.log(norm_half.perplexity(model, parts))
        assert abs(got - want[norm]) < 1e-4, (norm, got, want[norm])


@test
def norm_share_reads_profiles_and_shapes():
    """LLaMA's hidden_dim rule: 11008 at dim 4096 with multiple_of 256 (Llama 2 7B's w1 rows),
    768 at dim 288 (stories15M); the share of run --profile's table (NORMS.md's stories260K
    profile: norms 0.109 ms of 25.829); the median step of three (norm s, step s) pairs."""
    assert norm_share.llama_hidden_dim(4096, 256) == 11008
    assert norm_share.llama_hidden_dim(288) == 768
    table = ("  norms                   0.109    0.4%      2782\n"
             "  attention              18.305   70.9%      1265\n"
             "  wall clock             25.829  100.0%\n")
    n, w, share = norm_share.profile_share(table)
    assert (n, w) == (0.109, 25.829) and abs(share - 0.109 / 25.829) < 1e-12
    assert norm_share.median_step([(1, 5.0), (2, 3.0), (3, 4.0)]) == (3, 4.0)


@test
def norm_share_fused_layernorm_is_the_eager_one():
    """The fused LayerNorm the curve times (F.layer_norm) computes nllm_model's eager LayerNorm:
    within 1e-5 on a random (3, 64) input with a trained-looking weight and bias (float32; the two
    sum in different orders); and one timed step gives a share strictly between 0 and 1."""
    import torch

    import nllm_model

    torch.manual_seed(0)
    eager = nllm_model.LayerNorm(64, 1e-5)
    with torch.no_grad():
        eager.weight.uniform_(0.5, 1.5)
        eager.bias.uniform_(-0.1, 0.1)
    fused = nllm_model.LayerNorm(64, 1e-5)
    fused.load_state_dict(eager.state_dict())
    norm_share.fused_layernorm(fused)
    x = torch.randn(3, 64) * 3 + 1
    assert torch.allclose(eager(x), fused(x), atol=1e-5, rtol=0)
    norm_s, step_s = norm_share.train_share(64, 32, "layernorm_fused", 0, 1, n_layers=1)
    assert 0 < norm_s < step_s


# ----------------------------------------------------------------------------
# tools/twins_lr.py


@test
def twins_lr_tables_the_runs_it_made():
    """twins_lr.py on 8 steps at lr 1e-3 and 1e6, one seed: lr 1e6 turns the loss nan within the
    warmup and its cells say "diverged at" the step of its log's diverged record, the step of its
    last training record; lr 1e-3's validation cell is its log's last eval, its class "learns" or
    "unigram" as that loss stands to the unigram level computed here from the text (token counts
    + 1 over the training text, BOS first, on the first 64 windows of 256 of the valid text); the
    section between the markers is replaced, the rest kept, the picture written; run again, it
    trains nothing and writes the same table."""
    s = stories()
    train, valid = tmp("lr-train.txt"), tmp("lr-valid.txt")
    open(train, "w").write(END.join(s[300:450]) + END)
    open(valid, "w").write(END.join(s[:200]) + END)
    docs, out = tmp("LR.md"), tmp("twins_lr")
    open(docs, "w").write("# before\n\n<!-- twins-lr:begin -->\nold\n<!-- twins-lr:end -->\n\n"
                          "after\n")
    cmd = [sys.executable, "tools/twins_lr.py", "--lrs", "1e-3", "1e6", "--seeds", "1", "--steps",
           "8", "--warmup", "4", "--eval-every", "4", "--out", out, "--train", train, "--valid",
           valid, "--docs", docs]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0 and "4 of 4 runs to train" in p.stdout, p.stderr[-2000:]
    doc = open(docs).read()
    assert doc.startswith("# before\n\n<!-- twins-lr:begin -->\nMade by") and "old" not in doc
    assert doc.endswith("<!-- twins-lr:end -->\n\nafter\n") and os.path.exists(tmp("twins_lr.png"))
    # not make twins-lr's sweep (its 6 rates, 2 seeds, 200 steps): the command itself
    assert f"\n    {sys.executable} tools/twins_lr.py --lrs 0.001 1e+06 --seeds 1 --steps 8 " \
        f"--batch-size 8 --warmup 4 --eval-every 4 --jobs 2 --margin 0.1 --train {train} " \
        f"--valid {valid}\n" in doc, doc[:600]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in doc.splitlines() if line.startswith(("| 0.001 ", "| 1e+06 "))}
    sp = spm.SentencePieceProcessor(model_file="models/tok512.model")
    ids = [[sp.bos_id()] + x for x in sp.encode(s[300:450])]
    counts = np.bincount([t for x in ids for t in x], minlength=512) + 1.0
    targets = [t for x in sp.encode(s[:200]) for t in [sp.bos_id()] + x][1:64 * 256 + 1]
    unigram = -np.mean(np.log(counts[targets] / counts.sum()))
    for column, norm in enumerate(("rmsnorm", "layernorm")):
        def log(lr):
            path = os.path.join(out, f"lr{lr}", "seed1", f"{norm}.jsonl")
            return [json.loads(line) for line in open(path)]
        fine, nan = log("0.001"), log("1e+06")
        val = [r["val_loss"] for r in fine if r["kind"] == "eval"]
        assert len(val) == 3 and rows["0.001"][3 * column] == f"{val[-1]:.3f}", (norm, rows)
        want = "learns" if val[-1] < unigram - 0.1 else "unigram"  # 8 steps at 1e-3: 6.24 down
        assert rows["0.001"][3 * column + 2] == want, (norm, unigram, val, rows)
        stop = nan[-1]
        assert stop["kind"] == "diverged" and stop["step"] <= 4 and np.isnan(stop["loss"]), stop
        assert stop["step"] == [r for r in nan if r["kind"] == "train"][-1]["step"]
        train = [r["loss"] for r in nan if r["kind"] == "train"]
        peak = np.nan if np.isnan(train).any() else max(train)
        want = f"diverged at {stop['step']} (peak {peak:.3g})"
        assert rows["1e+06"][3 * column + 2] == want, (norm, rows, train)
        assert rows["1e+06"][3 * column] == "–", rows
    # the summary line from the same cells: 8 steps at 1e-3 stay at the unigram level here, so
    # that it says "no lr at which every seed learns" (a learning cell would name lr 0.001)
    said = []
    for column, name in enumerate(("RMSNorm", "LayerNorm")):
        learns = rows["0.001"][3 * column + 2] == "learns"
        said.append(f"{name}: " + ("every seed learns up to lr 0.001" if learns else
                                   "no lr at which every seed learns") +
                    ", a seed diverges from lr 1e+06" + ("; best lr 0.001" if learns else ""))
    assert f"\n{'; '.join(said)}\n" in p.stdout, p.stdout[-1500:]
    print(f"  unigram level {unigram:.3f}; lr 1e-3: {rows['0.001']}; lr 1e6: {rows['1e+06']}")
    again = subprocess.run(cmd, capture_output=True, text=True)
    assert again.returncode == 0 and "0 of 4 runs to train" in again.stdout, again.stderr
    assert open(docs).read().split("\n", 4)[4] == doc.split("\n", 4)[4]  # after "Made by"
    # a results.json cut short (a run stopped while writing it, as it could be before it was
    # written whole or not at all) had stopped every later run with a traceback: a note, and the
    # table
    results = os.path.join(out, "results.json")
    cut = open(results).read()[:200]
    open(results, "w").write(cut)
    p = subprocess.run(cmd + ["--no-train"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == f"twins_lr: {results} is not a results file: the " \
        "earlier runs' times are not carried over\n", p.stderr[-1500:]
    assert json.load(open(results))["results"] and not os.path.exists(results + ".tmp")


@test
def twins_lr_refuses_bad_settings_in_one_line():
    """Each refused before any training, one line naming the option, exit 1: --no-train over an
    --out without a complete run (it had tabled nothing, exit 0, and written "every seed learns
    up to lr 0" into the docs), --out a file, a --margin that no loss is below, a --docs section
    without its end marker (it had been found after the sweep), two rates that share a name (they
    had trained into one directory, two at a time)."""
    texts, empty = tiny_texts(), tmp("twins_lr_empty")
    open(tmp("a_file"), "w").close()
    open(tmp("HALF_LR.md"), "w").write("<!-- twins-lr:begin -->\nno end\n")
    cases = [(["--out", empty, "--no-train", "--no-docs"],
              f"twins_lr: --no-train, but {empty} holds no complete run of these settings"),
             (["--out", tmp("a_file"), "--no-docs"],
              f"twins_lr.py: error: --out {tmp('a_file')} is a file, not a directory"),
             (["--out", empty, "--margin", "nan", "--no-docs"],
              "twins_lr.py: error: --margin must be 0 or more nats, got nan"),
             (["--out", empty, "--docs", tmp("HALF_LR.md")], f"twins_lr.py: error: --docs "
              f"{tmp('HALF_LR.md')} has <!-- twins-lr:begin --> but no <!-- twins-lr:end -->"),
             (["--out", empty, "--lrs", "0.1", "0.1000001", "--no-docs"], "twins_lr.py: error: "
              "--lrs 0.1 and 0.1000001 are both 0.1 to 6 digits (their runs' directory and row)")]
    for args, message in cases:
        p = subprocess.run([sys.executable, "tools/twins_lr.py", "--lrs", "1e-3", "--seeds", "1",
                            "--steps", "2", "--warmup", "1", *texts, *args],
                           capture_output=True, text=True, timeout=120)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 1 and len(lines) == 1, (args, p.returncode, p.stderr[-1500:])
        assert lines[0].startswith(message), (args, lines)


# tools/bench_gguf.sh
@test
def train_speed_tables_the_runs_it_made():
    """train_speed.py, 2 rounds of 7 steps of identity beside rmsnorm on the tiny texts: a run's
    speed is its steps' tokens over their seconds from step 6 on (each step's seconds 2048 tokens
    over its logged tokens/s), the identity cell the median over rounds, the ratio rmsnorm's over
    identity's in the same round; the docs' section between its markers replaced, the rest kept;
    bad --steps, --rounds, --norms and --out refused in one line."""
    docs, out = tmp("SPEED.md"), tmp("speed")
    open(docs, "w").write("before\n<!-- siblings-speed:begin -->\nold\n<!-- siblings-speed:end -->"
                          "\nafter\n")
    p = subprocess.run([sys.executable, "tools/train_speed.py", "--norms", "rmsnorm", "identity",
                        "--steps", "7", "--rounds", "2", "--out", out, "--docs", docs,
                        *tiny_texts()], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    speed = {}
    for r in (1, 2):
        for norm in ("rmsnorm", "identity"):
            logged = [json.loads(x) for x in open(f"{out}/round{r}/{norm}-identity.jsonl")]
            steps = [x["tokens_per_s"] for x in logged if x["kind"] == "train" and x["step"] > 5]
            assert len(steps) == 2, logged
            speed[r, norm] = 2 * 2048 / sum(2048 / x for x in steps)
    ratios = [speed[r, "rmsnorm"] / speed[r, "identity"] for r in (1, 2)]
    mine = [speed[r, "identity"] for r in (1, 2)]
    row = next(x for x in p.stdout.splitlines() if x.startswith("| identity |"))
    want = (f"| identity | {statistics.median(mine):.0f} ({min(mine):.0f}-{max(mine):.0f}) | "
            f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |")
    assert row == want, (row, want)
    doc = open(docs).read()
    assert doc.startswith("before\n<!-- siblings-speed:begin -->\nMade by") and row in doc, doc
    assert doc.endswith("<!-- siblings-speed:end -->\nafter\n") and "old" not in doc, doc
    for bad, word in ((["--steps", "5"], "--steps"), (["--rounds", "0"], "--rounds"),
                      (["--norms", "rmsnorm", "rmsnorm"], "--norms"), (["--out", docs], "--out"),
                      (["--norms", "rmsnorm", "nonorm"], "--norms")):
        p = subprocess.run([sys.executable, "tools/train_speed.py", *bad, "--no-docs"],
                           capture_output=True, text=True)
        assert p.returncode != 0 and p.stderr.count("\n") == 1 and word in p.stderr, (bad, p.stderr)


@test
def bench_gguf_refuses_bad_settings_in_one_line():
    """make bench's same-file block checks its variables before it builds or writes anything: each
    bad value stops it with one line naming the variable, exit 1 (GGUF_REPEATS=0 once started
    a 15-40 minute llama.cpp build, and so did GGUF_TYPES or GGUF_TESTS of spaces alone and a
    shape export.py does not know)."""
    cases = [("LLAMA_BENCH", "/nonexistent", "LLAMA_BENCH=/nonexistent is not an executable file"),
             ("GGUF_TYPES", "q9_9", "GGUF_TYPES: no type q9_9"),
             ("GGUF_TESTS", "bogus", "GGUF_TESTS: no test bogus"),
             ("GGUF_REPEATS", "0", "GGUF_REPEATS=0 is not a positive whole number"),
             ("GGUF_THREADS", "1 two", "GGUF_THREADS: two is not a positive whole number"),
             ("GGUF_THREADS", " ", "GGUF_THREADS names no thread count"),
             ("GGUF_TYPES", " ", "GGUF_TYPES names no type"),
             ("GGUF_TESTS", "  ", "GGUF_TESTS names no test"),
             ("SHAPE", "7B", "no shape 7B (15M 110M 1.1B)")]
    for name, value, message in cases:
        shape = value if name == "SHAPE" else "15M"
        p = subprocess.run(["tools/bench_gguf.sh", "15M", shape], capture_output=True, text=True,
                           env={**os.environ, name: value}, timeout=60)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 1 and len(lines) == 1, (name, value, p.returncode, p.stderr)
        assert lines[0].startswith(f"bench_gguf: {message}"), (name, value, lines)


@test
def bench_products_stops_in_one_line_without_its_tools():
    """make bench's products block (tools/bench_products.sh) in a tree without build/gemm stops
    with one line naming it, exit 1, before any row; with a build/flops that prints no number, one
    line saying so, where a row against an empty peak would have printed inf%."""
    root = tmp("products")
    os.makedirs(f"{root}/tools", exist_ok=True)
    with open("tools/bench_products.sh") as f, open(f"{root}/tools/bench_products.sh", "w") as g:
        g.write(f.read())
    os.chmod(f"{root}/tools/bench_products.sh", 0o755)
    messages = ["bench_products.sh: build/gemm is missing: make build/gemm build/flops "
                "build/tile",
                "bench_products.sh: build/flops printed no peak for f32"]
    for message in messages:
        p = subprocess.run([f"{root}/tools/bench_products.sh", "15M"], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 1 and p.stderr.splitlines() == [message], (p.returncode, p.stderr)
        assert "15M " not in p.stdout, p.stdout
        os.makedirs(f"{root}/build", exist_ok=True)  # then tools that run and print nothing
        for tool in ("gemm", "flops", "tile"):
            with open(f"{root}/build/{tool}", "w") as f:
                f.write("#!/bin/sh\n")
            os.chmod(f"{root}/build/{tool}", 0o755)


@test
def bench_gguf_says_why_llama_cpp_would_not_configure():
    """Building llama-bench, bench_gguf.sh keeps cmake's configure output to itself (llama.cpp's
    CMakeLists prints a stray line on stderr) unless configuring fails: then that output is
    printed and it stops, exit 1, before any table. A cmake that fails with a message of its own,
    first on PATH, stands in for a broken configure."""
    if not os.path.isfile("build/llama.cpp/CMakeLists.txt"):
        raise Skip("llama.cpp's source is not unpacked (make llama-oracle)")
    fake = tmp("fake-cmake")
    os.makedirs(fake, exist_ok=True)
    with open(f"{fake}/cmake", "w") as f:
        f.write("#!/bin/sh\necho 'CMake Error: stand-in failure' >&2\nexit 1\n")
    os.chmod(f"{fake}/cmake", 0o755)
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_BENCH"}
    env["PATH"] = f"{fake}:{env['PATH']}"
    p = subprocess.run(["tools/bench_gguf.sh", "15M"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 1, (p.returncode, p.stdout[-1000:], p.stderr[-1000:])
    assert "CMake Error: stand-in failure" in p.stderr.splitlines(), p.stderr
    assert "shape type" not in p.stdout, p.stdout


@test
def gguf_summary_counts_cells_behind_from_the_rates():
    """The same-file block's closing lines (tools/gguf_summary.awk) from hand-made rows: a prefill
    at 3101.7 against 3112.7 tokens/s is behind (0.996, which the table prints as 1.00, and which
    the summary had counted ahead), a tie is not, a test not run ("-") is no cell, and a decode at
    94% of the bandwidth is below 95% where 95% is not."""
    rows = ("15M   f16           1 |     296.0     142.9   2.07 |    3101.7    3112.7   1.00 |"
            "     143.8      51.0   2.82 |     30.4     8.8     95%     49%\n"
            "15M   q4_0          2 |     100.0     100.0   1.00 |         -         -      - |"
            "         -         -      - |      8.6    17.8     94%     54%\n")
    p = subprocess.run(["awk", "-f", "tools/gguf_summary.awk"], input=rows, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ("cells behind: 1 of 4 (15M f16 1-thread prefill 0.996)\n"
                        "run decode below 95% of the bandwidth: 1 of 2 (15M q4_0 2-thread 94%)\n"
                        ), p.stdout


# ----------------------------------------------------------------------------
# the benchmark tools' integer arguments (tools/bench_args.h)

BENCH_TOOLS = ["bandwidth", "flops", "gemm", "tile", "stream", "attend", "bench_norm",
               "bench_tokenizer"]


@test
def bench_tools_refuse_bad_integers_in_one_line():
    """Each benchmark tool reads its integer arguments whole and in the range it states: trailing
    text (atoi had read gemm's batch "1x" as 1 and run a batch of 1), no digits ("abc", read as
    0), a space before the digits, 0 where the least is 1, one past the largest, a number past a
    long: each stopped with one line on stderr that names the argument and its range, exit 1.
    The cheapest valid run of each still prints its line (one thread, one repeat, tiny sizes)."""
    p = subprocess.run(["make", "--no-print-directory", *(f"build/{t}" for t in BENCH_TOOLS)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-1500:]
    huge = "99999999999999999999"
    cases = [(["bandwidth", "1x"], 'MiB: "1x" is not an integer from 1 to 1048576'),
             (["bandwidth", "1", "101"], 'repeats: "101" is not an integer from 1 to 100'),
             (["flops", "abc"], 'repeats: "abc" is not an integer from 1 to 100'),
             (["flops", "0", "f32"], 'repeats: "0" is not an integer from 1 to 100'),
             (["gemm", "15M", "f32", "1x"], 'batch: "1x" is not an integer from 1 to 1024'),
             (["gemm", "15M", "f32", "1025"], 'batch: "1025" is not an integer from 1 to 1024'),
             (["gemm", "15M", "f32", "1", huge], f'repeats: "{huge}" is not an integer from 1 to '
              '1000'),
             (["gemm", "square", "63"], 'n: "63" is not an integer from 64 to 8192'),
             (["tile", "q6_k"], 'usage: tile f32|q8_0|q4_0 [columns] [repeats]'),
             (["tile", "f32", "48"], 'columns: "48" is not a multiple of 32'),
             (["tile", "q4_0", "2080"], 'columns: "2080" is not an integer from 32 to 2048'),
             (["stream", "7", "1"], 'dtype: "7" is not an integer from 0 to 6'),
             (["stream", "5", "1", "32", "288", "1"], 'cols: "288" is not a multiple of 256'),
             (["stream", "0", "1", "32", "32", "1x"], 'layers: "1x" is not an integer from 1 to '
              '1000'),
             (["stream", "0", "1", " 32", "32", "1"], 'rows: " 32" is not an integer from 1 to '
              '32768'),
             (["stream", "0", "1", "32", "48", "1"], 'cols: "48" is not a multiple of 32'),
             (["attend", "12", "64", "-1"], 'pos: "-1" is not an integer from 0 to 16383'),
             (["attend", "128", "65", "1"], 'n_heads * head_size = 8320 is past 8192'),
             (["attend", "12", "64"], 'usage: attend n_heads head_size pos'),
             (["attend", "0", "64", "1"], 'n_heads: "0" is not an integer from 1 to 256'),
             (["bench_norm", "0"], 'REPEATS: "0" is not an integer from 1 to 1000'),
             (["bench_tokenizer", "none.bin", "none.txt", "2.5"], 'REPEATS: "2.5" is not an '
              'integer from 1 to 1000')]
    one_thread = {**os.environ, "OMP_NUM_THREADS": "1"}
    for args, message in cases:
        p = subprocess.run([f"build/{args[0]}", *args[1:]], capture_output=True, text=True,
                           env=one_thread, timeout=60)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 1 and len(lines) == 1, (args, p.returncode, p.stderr[-1500:])
        assert lines[0] == f"{args[0]}: {message}", (args, lines)
    number = r"[0-9]+(\.[0-9]+)?"
    runs = [(["bandwidth", "2", "1"], f"{number}\n"),  # 2 MiB: aligned_alloc takes whole pages
            (["flops", "1", "f32"], f"{number}\n"),
            (["gemm", "15M", "f32", "1", "1"], f"15M f32 batch 1 threads 1: matmul {number} "
             f"GFLOP/s(, OpenBLAS sgemm {number} GFLOP/s \\(core [^)]+\\))?\n"),
            # each tile's outputs matmul's, or it stops (tools/tile.c)
            *((["tile", d, "64", "1"], f"tile {d} columns 64 threads 1: {number} GFLOP/s\n")
              for d in ("f32", "q8_0", "q4_0")),
            (["stream", "0", "1", "32", "32", "1"], f"dtype 0, 1 threads, \\(32, 32\\) x 1 "
             f"layers: {number} G multiply-adds/s, {number} GB/s\n"),
            (["stream", "6", "1", "8", "256", "1"], f"dtype 6, 1 threads, \\(8, 256\\) x 1 "
             f"layers: {number} G multiply-adds/s, {number} GB/s\n"),
            (["attend", "2", "8", "3"], f"attend: 2 heads of 8, position 3: {number} us a "
             "call\n"),
            (["bench_norm", "1"], f"threads\t1\nnorms(\t\\w+)+\n([0-9]+\t[0-9]+(\t{number})+\n)+")]
    for args, output in runs:
        p = subprocess.run([f"build/{args[0]}", *args[1:]], capture_output=True, text=True,
                           env=one_thread, timeout=60)
        assert p.returncode == 0 and re.fullmatch(output, p.stdout), (args, p.stdout, p.stderr)
    # OpenBLAS's square product where the library loads, else one line saying it is not installed
    try:
        ctypes.CDLL("libopenblas.so.0")
        blas = True
    except OSError:
        blas = False
    no_blas = "gemm: square needs OpenBLAS (libopenblas.so.0, libopenblas0-pthread)\n"
    p = subprocess.run(["build/gemm", "square", "64", "1"], capture_output=True, text=True,
                       env=one_thread, timeout=60)
    if blas:
        assert p.returncode == 0 and re.fullmatch(
            f"square 64 threads 1: OpenBLAS sgemm {number} GFLOP/s \\(core [^)]+\\)\n",
            p.stdout), (p.returncode, p.stdout, p.stderr)
    else:
        assert p.returncode == 1 and p.stderr == no_blas, (p.returncode, p.stderr)
    # products past the memory there is (1.1B's f32 weights, 4.4 GB, under a 400 MiB address
    # space): one line, not a crash
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (400 << 20, 400 << 20))
    p = subprocess.run(["build/gemm", "1.1B", "f32", "1", "1"], capture_output=True, text=True,
                       env=one_thread, timeout=60, preexec_fn=limit)
    assert p.returncode == 1 and p.stderr == "gemm: out of memory\n", (p.returncode, p.stderr)
    # and a square product past it (three 8192^2 matrices of floats, 768 MiB)
    p = subprocess.run(["build/gemm", "square", "8192", "1"], capture_output=True, text=True,
                       env=one_thread, timeout=60, preexec_fn=limit)
    assert p.returncode == 1 and p.stderr == ("gemm: out of memory\n" if blas else no_blas), \
        (p.returncode, p.stderr)
    # a valid count passes on to the work: here the missing tokenizer's own error
    p = subprocess.run(["build/bench_tokenizer", tmp("none.bin"), tmp("none.txt"), "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and tmp("none.bin") in p.stderr and "REPEATS" not in p.stderr, \
        p.stderr


if __name__ == "__main__":
    sys.exit(run_tests(TESTS, TMP))
