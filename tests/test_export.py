#!/usr/bin/env python3
"""export.py end to end: real checkpoints against llama2.c's files and outputs, small Hugging Face
checkpoints built here against a PyTorch reference forward pass in the HF convention, and bad
input. Run from the repository root with /usr/bin/python3 (make test does); the program under
test is $NORMLLAMA_RUN (default ./run). Prints one line per test and "N passed, M failed"."""
import fcntl
import json
import os
import pickle
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time

import numpy as np
import sentencepiece as spm
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nllm_format  # noqa: E402
import nllm_model  # noqa: E402
from nllm_format import MATRICES, read_model as read_nllm  # noqa: E402
from nllm_model import rope_interleaved, rope_rotate_half  # noqa: E402
import decode_layouts  # noqa: E402  (tests/, the script's directory)
import error_model  # noqa: E402
import forward_f64  # noqa: E402
from harness import Skip, collector, run_tests  # noqa: E402  (tests/ too)

RUN = os.environ.get("NORMLLAMA_RUN", "./run")
PT = "models/stories260K.pt"
LEGACY = "models/stories260K.bin"
TOK_BIN = "models/tok512.bin"
TOK_MODEL = "models/tok512.model"
SP = spm.SentencePieceProcessor(model_file=TOK_MODEL)
TMP = tempfile.mkdtemp(prefix="normllama-export-")
# the vocabulary export.py finds beside the checkpoints built here (tok<vocab_size>.model beside a
# .pt; tokenizer.model in a directory's parent), as beside stories260K.pt in models/
for _name in ("tok512.model", "tokenizer.model"):
    shutil.copy(TOK_MODEL, os.path.join(TMP, _name))

TESTS = []
test = collector(TESTS)


def tmp(name):
    return os.path.join(TMP, name)


def run(*args, program=None):
    # errors="replace": random models' text can hold byte pieces that are not UTF-8 on their own
    p = subprocess.run([program or RUN, *args], capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout, p.stderr


def export_cli(*args):
    p = subprocess.run([sys.executable, "export.py", *args, "--quiet"] if args[0] != "--help"
                       else [sys.executable, "export.py", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def run_logits(model, text, steps=None, extra=(), program=None):
    """run's logits for BOS + text, teacher-forced: (positions, vocab_size)."""
    ids = [1] + SP.encode(text)
    out = tmp("logits.f32")
    code, _, err = run(model, "-z", TOK_BIN, "-t", "0", "-n", str(steps or len(ids)), "--logits",
                       out, *extra, text, program=program)
    assert code == 0, err
    return ids, np.fromfile(out, dtype=np.float32).reshape(-1, 512), err


# ----------------------------------------------------------------------------
# Readers of the files: ours (nllm_format's), llama2.c's layouts written from docs/FORMAT.md


def read_legacy(path):
    data = open(path, "rb").read()
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack_from("<7i", data, 0)
    kv_dim = kv_heads * dim // heads
    shapes = [("token_embedding", (abs(vocab), dim)), ("attn_norm", (layers, dim)),
              ("wq", (layers, dim, dim)), ("wk", (layers, kv_dim, dim)),
              ("wv", (layers, kv_dim, dim)), ("wo", (layers, dim, dim)),
              ("ffn_norm", (layers, dim)), ("w1", (layers, hidden, dim)),
              ("w2", (layers, dim, hidden)), ("w3", (layers, hidden, dim)),
              ("final_norm", (dim,)), ("rope", (2, seq_len, dim // heads // 2))]
    off, t = 28, {}
    for name, shape in shapes:
        n = int(np.prod(shape))
        t[name] = np.frombuffer(data, dtype="<f4", count=n, offset=off).reshape(shape)
        off += 4 * n
    assert off == len(data) and vocab > 0
    del t["rope"]
    return t


def read_tokenizer(path):
    data = open(path, "rb").read()
    (max_len,) = struct.unpack_from("<i", data, 0)
    off, pieces = 4, []
    while off < len(data):
        score, n = struct.unpack_from("<fi", data, off)
        pieces.append((data[off + 8:off + 8 + n], score))
        off += 8 + n
    return max_len, pieces


# ----------------------------------------------------------------------------
# Reference forward pass (float64): nllm_model, the project's one PyTorch model, in either RoPE
# convention


def forward(w, c, tokens, rope, norm="rmsnorm"):
    """LLaMA decoder over tokens; w holds per-layer lists under our tensor names."""
    return nllm_model.reference_logits(w, c, tokens, rope, norm)


# ----------------------------------------------------------------------------
# llama2.c checkpoint and tokenizer


def stories_nllm(dtype="f32", group_size=32):
    path = tmp(f"stories260K-{dtype}-{group_size}.nllm")
    if not os.path.exists(path):
        sizes = ["--group-size", str(group_size)] if dtype == "q8_0" else []
        code, _, err = export_cli(PT, "--out", path, "--dtype", dtype, *sizes)
        assert code == 0, err
    return path


@test
def pt_export_tensors_identical_to_legacy_bin():
    header, ours = read_nllm(stories_nllm())
    legacy = read_legacy(LEGACY)
    assert header["shared"] == 1 and header["norm"] == 0 and header["norm_bias"] == 0
    assert (header["dim"], header["n_kv_heads"], header["seq_len"]) == (64, 4, 512)
    assert np.float32(header["norm_eps"]) == np.float32(1e-5) and header["rope_theta"] == 10000
    assert header["align"] == 64
    assert set(ours) == set(legacy), (set(ours), set(legacy))
    for name in legacy:
        assert np.array_equal(ours[name], legacy[name]), name


@test
def pt_export_greedy_and_seeded_texts_match_llama2c():
    model = stories_nllm()
    for fixture, args in [("stories260K_greedy_once_upon_a_time.txt",
                           ["-t", "0", "-n", "256", "-i", "Once upon a time"]),
                          ("stories260K_t1.0_p0.9_s133742.txt",
                           ["-t", "1.0", "-p", "0.9", "-s", "133742", "-n", "256"])]:
        code, out, err = run(model, "-z", TOK_BIN, *args)
        assert code == 0, err
        assert out == open("tests/fixtures/" + fixture).read(), out


@test
def pt_export_without_orig_mod_prefix_is_identical():
    ckpt = torch.load(PT, map_location="cpu")
    ckpt["model"] = {k.replace("_orig_mod.", ""): v for k, v in ckpt["model"].items()}
    torch.save(ckpt, tmp("plain.pt"))
    code, _, err = export_cli(tmp("plain.pt"), "--out", tmp("plain.nllm"))
    assert code == 0, err
    assert open(tmp("plain.nllm"), "rb").read() == open(stories_nllm(), "rb").read()


@test
def meta_consolidated_two_shards_export_equals_pt_export():
    state = {k.replace("_orig_mod.", ""): v for k, v in
             torch.load(PT, map_location="cpu")["model"].items()}
    along_1 = ("tok_embeddings.weight", "attention.wo.weight", "feed_forward.w2.weight")
    shards = [{}, {}]
    for k, v in state.items():
        if v.ndim == 1:
            parts = [v, v]
        else:
            parts = torch.chunk(v, 2, dim=1 if k.endswith(along_1) else 0)
        for s, p in zip(shards, parts):
            s[k] = p.clone()
    os.makedirs(tmp("meta"), exist_ok=True)
    for i, s in enumerate(shards):
        torch.save(s, tmp(f"meta/consolidated.0{i}.pth"))
    json.dump({"dim": 64, "n_layers": 5, "n_heads": 8, "n_kv_heads": 4, "vocab_size": -1,
               "multiple_of": 4, "norm_eps": 1e-5}, open(tmp("meta/params.json"), "w"))
    code, _, err = export_cli(tmp("meta"), "--out", tmp("meta.nllm"), "--seq-len", "512")
    assert code == 0, err
    # stories260K.pt stores output.weight (tied): the shards do too, so both files equal
    assert open(tmp("meta.nllm"), "rb").read() == open(stories_nllm(), "rb").read()
    code, _, err = export_cli(tmp("meta"), "--out", tmp("meta.gguf"), "--seq-len", "512")
    assert code == 0, err  # and as GGUF: the same model
    assert np.array_equal(run_logits(tmp("meta.gguf"), "Once upon a time")[1],
                          run_logits(stories_nllm(), "Once upon a time")[1])


@test
def tokenizer_export_equals_tok512_bin():
    code, _, err = export_cli(TOK_MODEL, "--out", tmp("tok.bin"))
    assert code == 0, err
    max_a, ours = read_tokenizer(tmp("tok.bin"))
    max_b, theirs = read_tokenizer(TOK_BIN)
    assert max_a == max_b and len(ours) == len(theirs) == 512
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, (i, a, b)


@test
def reference_forward_matches_run_logits_on_64_positions_of_the_greedy_story():
    ids, logits, _ = run_logits(LEGACY, "Once upon a time", steps=64)
    assert logits.shape == (64, 512)
    tokens = ids + [int(logits[p].argmax()) for p in range(len(ids) - 1, 63)]
    legacy = read_legacy(LEGACY)
    w = {k: (list(v) if v.ndim == 3 or k in ("attn_norm", "ffn_norm") else v)
         for k, v in legacy.items()}
    c = dict(dim=64, n_heads=8, n_kv_heads=4, n_layers=5, norm_eps=1e-5, rope_theta=10000.0)
    ref = forward(w, c, tokens[:64], rope_interleaved)
    err = np.abs(ref - logits).max()
    print(f"  stories260K: max |logit - reference| over 64 positions = {err:.2e}")
    assert err < 1e-4, err


# ----------------------------------------------------------------------------
# bf16 and q8_0 weights


def bf16_matrix_ok(ours, w):
    """bf16: each float32 weight rounded to the nearest bfloat16, ties to even (as PyTorch's
    conversion rounds)."""
    return np.array_equal(ours, torch.from_numpy(w.copy()).to(torch.bfloat16).float().numpy())


def f16_matrix_ok(ours, w):
    """f16: each weight rounded to the nearest half, so within half a step of the halves' grid
    there (2^-24 among the subnormals), and on it."""
    w = w.astype(np.float64)
    step = np.maximum(2.0 ** (np.floor(np.log2(np.maximum(np.abs(w), 2.0 ** -14))) - 10),
                      2.0 ** -24)
    return np.all(np.abs(ours - w) <= step / 2) and np.all(np.float16(ours) == ours)


@test
def half_exports_hold_each_f32_matrix_weight_in_16_bits():
    """bf16 (dtype 1) and f16 (dtype 3) files: the matrices' weights as above, every other tensor
    (the norms) the float32 values themselves, about half the f32 file's size."""
    legacy = read_legacy(LEGACY)
    for dtype, code, matrix_ok in (("bf16", 1, bf16_matrix_ok), ("f16", 3, f16_matrix_ok)):
        header, ours = read_nllm(stories_nllm(dtype))
        assert header["dtype"] == code and header["group_size"] == 0, dtype
        assert os.path.getsize(stories_nllm(dtype)) < 0.51 * os.path.getsize(stories_nllm()), dtype
        for name in legacy:
            if name in MATRICES:
                assert matrix_ok(ours[name], legacy[name]), (dtype, name)
            else:
                assert np.array_equal(ours[name], legacy[name]), (dtype, name)


@test
def f16_logits_match_a_float64_forward_of_the_same_halves():
    """run on the f16 file against forward_f64 (numpy float64) over the weights it holds, decode
    and batched prefill: the gap is run's float32 rounding alone."""
    header, t = read_nllm(stories_nllm("f16"))
    ids = [1] + SP.encode(PROMPT)
    want = forward_f64.logits(header, t, ids)
    for extra in ((), ("--prefill=serial",)):
        _, got, _ = run_logits(stories_nllm("f16"), PROMPT, extra=extra)
        err = np.abs(got - want).max()
        print(f"  f16 {extra or 'batched'}: max |logit - float64 forward| = {err:.1e} over "
              f"{len(ids)} positions (logits up to {np.abs(want).max():.1f})")
        assert err < 1e-4, err
    # the float64 forward is no copy of run: the f32 file's weights give other logits
    assert np.abs(forward_f64.logits(*read_nllm(stories_nllm()), ids) - want).max() > 1e-3


@test
def export_refuses_weights_beyond_f16s_range():
    out = tmp("never.nllm")
    wq = torch.load(PT, map_location="cpu")["model"]["_orig_mod.layers.1.attention.wq.weight"]
    wq = wq.clone()
    wq[0, 0] = 65520.0  # halfway past 65504: it would round to infinity
    path = pt_checkpoint("big", tensors={"layers.1.attention.wq.weight": wq})
    expect_export_error([path, "--out", out, "--dtype", "f16"],
                        "wq of layer 1 has a value of magnitude 65520, beyond f16's largest 65504")
    assert_nothing_written(out)
    wq[0, 0] = 65519.0  # rounds to 65504
    path = pt_checkpoint("big-ok", tensors={"layers.1.attention.wq.weight": wq})
    code, _, err = export_cli(path, "--out", out, "--dtype", "f16")
    assert code == 0, err
    assert read_nllm(out)[1]["wq"][1, 0, 0] == 65504.0
    os.remove(out)


@test
def export_refuses_weights_beyond_bf16s_range():
    """bf16's largest is bits 0x7F7F (3.3895e38); an f32 at or past 0x7F7F8000, halfway to the next
    step, rounds (ties to even) to 0x7F80, infinity; the f32 just below it rounds to the largest."""
    out = tmp("never.nllm")
    wq = torch.load(PT, map_location="cpu")["model"]["_orig_mod.layers.1.attention.wq.weight"]
    wq = wq.clone()
    halfway, below = torch.tensor([0x7F7F8000, 0x7F7F7FFF], dtype=torch.int32).view(torch.float32)
    wq[0, 0] = halfway
    path = pt_checkpoint("big-bf16", tensors={"layers.1.attention.wq.weight": wq})
    expect_export_error([path, "--out", out, "--dtype", "bf16"],
                        "wq of layer 1 has a value of magnitude 3.39618e+38, beyond bf16's largest "
                        "3.38953e+38")
    assert_nothing_written(out)
    wq[0, 0] = below
    path = pt_checkpoint("big-bf16-ok", tensors={"layers.1.attention.wq.weight": wq})
    code, _, err = export_cli(path, "--out", out, "--dtype", "bf16")
    assert code == 0, err
    assert read_nllm(out)[1]["wq"][1, 0, 0] == nllm_format.BF16_MAX
    os.remove(out)


@test
def q8_0_export_groups_each_row_with_a_short_tail_group():
    legacy = read_legacy(LEGACY)
    for group_size in (32, 64):
        raw = {}
        header, ours = read_nllm(stories_nllm("q8_0", group_size), raw)
        assert header["dtype"] == 2 and header["group_size"] == group_size
        # w2's rows are hidden_dim = 172 long: 5 groups of 32 and one of 12, or 2 of 64 and 44
        q, scales = raw["w2"]
        assert q.shape == (5 * 64, 172) and scales.shape == (5 * 64, -(-172 // group_size))
        for name in legacy:
            if name not in MATRICES:
                assert np.array_equal(ours[name], legacy[name]), name
                continue
            w = legacy[name].reshape(-1, legacy[name].shape[-1])
            q, scales = raw[name]
            cols = w.shape[1]
            step = np.repeat(scales, group_size, axis=1)[:, :cols]
            # the largest |w| of each group maps to +-127, every value to within half a step
            assert np.abs(q).max() == 127, name
            assert np.all(np.abs(w - q * step) <= step * 0.5000001 + 1e-12), name
            for g in range(scales.shape[1]):
                part = np.abs(w[:, g * group_size:(g + 1) * group_size]).max(axis=1)
                assert np.allclose(scales[:, g], part / 127, rtol=1e-6), (name, g)


def greedy_agreement(dtype):
    """Greedy predictions (positions from the last prompt token on) that dtype's file shares with
    f32 before the first difference, and the largest logit difference at the first generated position and over all
    positions up to that difference."""
    ids, ref, _ = run_logits(stories_nllm(), "Once upon a time", steps=256)
    _, got, _ = run_logits(stories_nllm(dtype), "Once upon a time", steps=256)
    first = len(ids) - 1
    n = min(len(ref), len(got))
    differ = [p for p in range(first, n) if ref[p].argmax() != got[p].argmax()]
    end = differ[0] if differ else n
    return end - first, np.abs(ref[first] - got[first]).max(), np.abs(ref[:end] - got[:end]).max()


@test
def f16_greedy_story_is_the_f32_story_for_all_256_positions():
    agree, err_first, err_all = greedy_agreement("f16")
    print(f"  f16: {agree} greedy tokens agree with f32; max |logit error| "
          f"{err_first:.4f} at the first, {err_all:.4f} over all 256 positions")
    assert agree == 256 - 4, agree
    assert 1e-4 < err_all < 0.03, err_all  # f16 keeps 11 bits: 8x closer than bf16


@test
def q4_0_export_codes_each_group_of_32_around_its_largest_value():
    legacy = read_legacy(LEGACY)
    raw = {}
    header, ours = read_nllm(stories_nllm("q4_0"), raw)
    assert header["dtype"] == 4 and header["group_size"] == 32
    # 0.5 bytes a weight and 4 a scale per 32: under a sixth of f32's file
    assert os.path.getsize(stories_nllm("q4_0")) < 0.17 * os.path.getsize(stories_nllm())
    # w2's rows are hidden_dim = 172 long: 5 groups of 32 and one of 12
    assert raw["w2"][0].shape == (5 * 64, 172) and raw["w2"][1].shape == (5 * 64, 6)
    for name in legacy:
        if name not in MATRICES:
            assert np.array_equal(ours[name], legacy[name]), name
            continue
        w = legacy[name].reshape(-1, legacy[name].shape[-1]).astype(np.float64)
        q, scales = raw[name]
        step = np.abs(np.repeat(scales, 32, axis=1)[:, :w.shape[1]]).astype(np.float64)
        got = ours[name].reshape(w.shape)
        # the largest |w| of each group is code 0 (value -8 steps) exactly; every value within half
        # a step, but for those past +7.5 steps on the side opposite it, clipped at +7 (one step)
        for g in range(scales.shape[1]):
            part = w[:, g * 32:(g + 1) * 32]
            at = np.abs(part).argmax(axis=1)
            assert np.all(q[np.arange(len(at)), g * 32 + at] == 0), (name, g)
            assert np.allclose(-8 * scales[:, g], part[np.arange(len(at)), at], rtol=1e-6)
        clipped = (q == 15) & (np.abs(w) > 7.5 * step)
        assert np.all(np.abs(got - w)[~clipped] <= step[~clipped] * 0.5000001 + 1e-12), name
        assert np.all(np.abs(got - w)[clipped] <= step[clipped] * 1.0000001), name


@test
def q4_0_quality_against_f32_bf16_and_q8_0():
    """The cost of 4 bits on stories260K (printed for docs/MODELS.md): greedy tokens agreeing
    with f32's story, the logit error, and the perplexity of data/stories.txt beside f32, bf16,
    f16 and q8_0's, those three within 0.5% of f32's (measured: 0.05% at most). q4_0's logits
    are held by tests/test_f64.py's derived bound, not by a band around these figures."""
    ppl = {}
    for dtype in ("f32", "bf16", "f16", "q8_0", "q4_0"):
        code, out, err = run(stories_nllm(dtype), "-z", TOK_BIN, "--ppl", "data/stories.txt")
        assert code == 0, err
        ppl[dtype] = float(out.split("perplexity ")[1].split()[0])
    agree, err_first, err_all = greedy_agreement("q4_0")
    print(f"  q4_0: {agree} greedy tokens agree with f32; max |logit error| {err_first:.3f} at "
          f"the first, {err_all:.3f} over those positions; perplexity of data/stories.txt "
          + ", ".join(f"{d} {p:.4f}" for d, p in ppl.items()))
    for dtype in ("bf16", "f16", "q8_0"):
        assert abs(ppl[dtype] / ppl["f32"] - 1) < 0.005, ppl


@test
def batched_prefill_gives_the_serial_logits_bit_for_bit_in_every_dtype_and_batch():
    """Prompts of 297 to 304 tokens (296 to 303 prefilled positions) in batches of the default
    (64 here), 1, 7, 100, 128 and 256 positions: whole batches of 7 = 6 + 1, 100 = 16 * 6 + 4,
    128 = 21 * 6 + 2 and 256 = 42 * 6 + 4 inputs (AVX2's f32 and bf16 tiles of 6; AVX-512's are
    8, q8_0's 4), and last batches of 40 to 47 positions (64, 128, 256), 96 to 100 and 1 to 3
    (100), 1 to 7 (7), which leave every remainder (1 to 7) to the tiles of 4, 2 and 1 inputs."""
    text = " ".join(["Once upon a time, there was a little girl named Lily."] * 21)
    prompts = {}  # the first prefix of text with each number of tokens, BOS included
    for end in range(len(text)):
        prompts.setdefault(1 + len(SP.encode(text[:end])), text[:end])
    batches = [("--prefill=batch",), ("--batch=1",), ("--batch=7",), ("-b", "100"),
               ("--batch=128",), ("--batch=256",)]
    for dtype, group_size in [("f32", 32), ("bf16", 32), ("f16", 32), ("q8_0", 32), ("q8_0", 64),
                              ("q4_0", 32)]:
        model = stories_nllm(dtype, group_size)
        for n in range(297, 305):
            ids, serial, _ = run_logits(model, prompts[n], extra=("--prefill=serial",))
            assert len(ids) == n and serial.shape[0] == n, (n, len(ids), serial.shape)
            for batch in batches:
                _, batched, _ = run_logits(model, prompts[n], extra=batch)
                assert batched.tobytes() == serial.tobytes(), (dtype, group_size, n, batch)


@test
def nan_weight_stops_the_run_in_every_dtype():
    """A NaN in final_norm's weight: every dtype stops with the one-line non-finite error, in
    generation and in --ppl (q8_0 quantizes its inputs to int16, which must not turn the NaN into
    a number)."""
    for dtype in ("f32", "bf16", "f16", "q8_0", "q4_0"):
        source = stories_nllm(dtype)
        data = bytearray(open(source, "rb").read())
        at = bytes(data).find(read_nllm(source)[1]["final_norm"].tobytes())
        assert at > 256, dtype
        data[at:at + 4] = struct.pack("<f", float("nan"))
        path = tmp(f"nan-final-norm-{dtype}.nllm")
        open(path, "wb").write(data)
        code, _, err = run(path, "-z", "models/tok512.bin", "-n", "8", "Once upon a time")
        assert code == 1 and err.count("\n") == 1 and "non-finite logit" in err, (dtype, err)
        code, out, err = run(path, "-z", "models/tok512.bin", "--ppl", "data/stories.txt")
        assert code == 1 and out == "" and err.count("\n") == 1, (dtype, out, err)
        assert "non-finite log-likelihood of data/stories.txt" in err, (dtype, err)


@test
def random_model_of_each_dtype_matches_float64():
    """The 15M shape, the only model here whose matrices exceed load.c's 1 MiB packing chunk: in
    each dtype, run's logits at 9 teacher-forced positions against the float64 forward pass of
    the weights tests/decode_layouts.py reads from the file, within tests/error_model.py's
    derived bound (as tests/test_f64.py does for stories260K)."""
    llama = spm.SentencePieceProcessor(model_file="models/tokenizer.model")
    ids = [1] + llama.encode("Once upon a time, there was a dog")
    sizes, rounding, k = {}, None, 16
    for dtype in ("f32", "bf16", "f16", "q8_0", "q4_0"):
        out = tmp(f"random-15M-{dtype}.nllm")
        code, _, err = export_cli("--random", "15M", "--dtype", dtype, "--out", out)
        assert code == 0, err
        header, t, _ = decode_layouts.read_model(out)
        assert (header["dim"], header["n_layers"], header["vocab_size"]) == (288, 6, 32000)
        assert header["shared"] == 1 and np.all(t["attn_norm"] == 1)
        # f16 rounds to nearest: up to half a step (2^-11 relative) past the bound
        assert 0.05 < np.abs(t["wq"]).max() <= 1 / np.sqrt(288) * (1 + 2.0 ** -11)
        sizes[dtype] = os.path.getsize(out) - header["vocab_bytes"]  # the weights
        code, _, err = run(out, "-z", "models/tokenizer.bin", "-t", "0", "-n", str(len(ids)),
                           "--logits", tmp("random.f32"), "Once upon a time, there was a dog")
        assert code == 0, err
        got = np.fromfile(tmp("random.f32"), np.float32).reshape(len(ids), 32000)
        if rounding is None:  # float32's rounding errors, drawn on the f32 weights
            rounding = error_model.sigma(error_model.draws(header, t, ids, k))
        inputs = error_model.quantized_inputs(header["dtype"])
        quantized = 0 if inputs is error_model.float32_inputs else error_model.sigma(
            error_model.draws(header, t, ids, k, rounding=False, inputs=inputs))
        error_model.check(f"15M {dtype}", got, forward_f64.logits(header, t, ids),
                          np.sqrt(rounding ** 2 + quantized ** 2), k)
        os.remove(out)
    assert sizes["bf16"] == sizes["f16"] and 6.3 < sizes["f32"] / sizes["q4_0"] < 6.5
    assert 1.9 < sizes["f32"] / sizes["bf16"] < 2.01 and 3.4 < sizes["f32"] / sizes["q8_0"] < 3.6


@test
def compare_table_pads_pieces_by_characters():
    """--compare's table lines up its columns by characters, not bytes: 'afé' (4 bytes) gets the
    padding of a 3-letter piece. The Llama 2 vocabulary (a random 15M model) has such pieces."""
    out = tmp("random-15M-compare.nllm")
    code, _, err = export_cli("--random", "15M", "--dtype", "q8_0", "--out", out)
    assert code == 0, err
    code, text, err = run(out, "-z", "models/tokenizer.bin", "--compare", "-n", "4", "-t", "0",
                          "café")
    assert code == 0, err
    table = text.split("max|dlogit|\n")[1].split("summary:")[0].splitlines()
    assert table[2].startswith("    2  'afé' "), table
    assert len({len(row) for row in table}) == 1, table
    os.remove(out)


# ----------------------------------------------------------------------------
# Hugging Face checkpoints built here


HF_BASE = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
               vocab_size=512, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000.0,
               hidden_act="silu", architectures=["LlamaForCausalLM"], model_type="llama")


def hf_weights(cfg, seed):
    """Random HF-named float32 tensors: embedding ~ N(0, 1), matrices ~ N(0, 1/fan_in) so that
    attention scores vary and RoPE matters, norm weights near 1."""
    g = torch.Generator().manual_seed(seed)
    dim, hidden, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv_dim = cfg["num_key_value_heads"] * dim // cfg["num_attention_heads"]
    mat = lambda d, n: torch.randn(d, n, generator=g) / n ** 0.5  # noqa: E731
    vec = lambda: 1 + 0.1 * torch.randn(dim, generator=g)  # noqa: E731
    w = {"model.embed_tokens.weight": torch.randn(V, dim, generator=g), "model.norm.weight": vec()}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w.update({p + "input_layernorm.weight": vec(), p + "post_attention_layernorm.weight": vec(),
                  p + "self_attn.q_proj.weight": mat(dim, dim),
                  p + "self_attn.k_proj.weight": mat(kv_dim, dim),
                  p + "self_attn.v_proj.weight": mat(kv_dim, dim),
                  p + "self_attn.o_proj.weight": mat(dim, dim),
                  p + "mlp.gate_proj.weight": mat(hidden, dim),
                  p + "mlp.up_proj.weight": mat(hidden, dim),
                  p + "mlp.down_proj.weight": mat(dim, hidden)})
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = mat(V, dim)
    return w


def write_safetensors(path, tensors, dtype):
    """Per the safetensors spec: u64 header length, JSON header, raw little-endian data."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        if dtype == "BF16":
            raw = t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
        else:
            raw = t.numpy().astype("<f4" if dtype == "F32" else "<f2").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def stored(t, dtype):
    """What the checkpoint holds after rounding to its dtype, as float32."""
    return {"BF16": t.to(torch.bfloat16), "F16": t.to(torch.float16)}.get(dtype, t).float()


def hf_checkpoint(name, storage, dtype="F32", seed=0, **overrides):
    """Writes a HF directory; returns (path, config, float32 weights as stored)."""
    cfg = dict(HF_BASE, **overrides)
    path = tmp("hf-" + name)
    os.makedirs(path, exist_ok=True)
    w = hf_weights(cfg, seed)
    json.dump(cfg, open(os.path.join(path, "config.json"), "w"))
    if storage == "safetensors":
        write_safetensors(os.path.join(path, "model.safetensors"), w, dtype)
    elif storage == "sharded":
        names = sorted(w)
        shards = {"model-00001-of-00002.safetensors": names[::2],
                  "model-00002-of-00002.safetensors": names[1::2]}
        for fname, keys in shards.items():
            write_safetensors(os.path.join(path, fname), {k: w[k] for k in keys}, dtype)
        json.dump({"metadata": {}, "weight_map": {k: f for f, ks in shards.items() for k in ks}},
                  open(os.path.join(path, "model.safetensors.index.json"), "w"))
    else:
        torch.save({k: stored(v, dtype) for k, v in w.items()},
                   os.path.join(path, "pytorch_model.bin"))
    return path, cfg, {k: stored(v, dtype).numpy() for k, v in w.items()}


def hf_as_ours(w, cfg):
    """HF tensor names to ours, keeping the HF q/k row order (the reference rotates halves)."""
    L = cfg["num_hidden_layers"]
    per = lambda key: [w[f"model.layers.{l}.{key}.weight"] for l in range(L)]  # noqa: E731
    ours = {"token_embedding": w["model.embed_tokens.weight"], "final_norm": w["model.norm.weight"],
            "attn_norm": per("input_layernorm"), "ffn_norm": per("post_attention_layernorm"),
            "wq": per("self_attn.q_proj"), "wk": per("self_attn.k_proj"),
            "wv": per("self_attn.v_proj"), "wo": per("self_attn.o_proj"),
            "w1": per("mlp.gate_proj"), "w2": per("mlp.down_proj"), "w3": per("mlp.up_proj")}
    if "lm_head.weight" in w:
        ours["wcls"] = w["lm_head.weight"]
    c = dict(dim=cfg["hidden_size"], n_heads=cfg["num_attention_heads"],
             n_kv_heads=cfg["num_key_value_heads"], n_layers=L, norm_eps=cfg["rms_norm_eps"],
             rope_theta=cfg["rope_theta"])
    return ours, c


PROMPT = "Once upon a time, there was a big dog named Max. He liked to run in the park."


def check_hf(name, storage, dtype, **overrides):
    path, cfg, w = hf_checkpoint(name, storage, dtype, seed=len(name), **overrides)
    out = tmp(name + ".nllm")
    code, _, err = export_cli(path, "--out", out)
    assert code == 0, err
    header, _ = read_nllm(out)
    assert header["shared"] == int(cfg["tie_word_embeddings"])
    assert header["rope_theta"] == 1000.0 and np.float32(header["norm_eps"]) == np.float32(1e-6)
    assert header["n_kv_heads"] == cfg["num_key_value_heads"]
    ids, logits, _ = run_logits(out, PROMPT)
    assert logits.shape == (len(ids), 512)
    ours, c = hf_as_ours(w, cfg)
    ref = forward(ours, c, ids, rope_rotate_half)
    err = np.abs(ref - logits).max()
    print(f"  {name}: {len(ids)} positions, max |logit - HF reference| = {err:.2e}")
    assert err < 1e-4, err
    # the same checkpoint as GGUF (export.py --out X.gguf): run's logits on it are the same
    code, _, err = export_cli(path, "--out", tmp(name + ".gguf"))
    assert code == 0, err
    assert np.array_equal(run_logits(tmp(name + ".gguf"), PROMPT)[1], logits), name
    return path, ours, c, ids, logits


@test
def hf_gqa_separate_classifier_safetensors_f32():
    check_hf("gqa-separate-f32", "safetensors", "F32", num_key_value_heads=2,
             tie_word_embeddings=False)


@test
def hf_tied_classifier_safetensors_bf16():
    check_hf("tied-bf16", "safetensors", "BF16", num_key_value_heads=2, tie_word_embeddings=True)


@test
def hf_sharded_safetensors_f16_one_kv_head():
    check_hf("sharded-f16", "sharded", "F16", num_key_value_heads=1, tie_word_embeddings=False)


@test
def hf_pytorch_model_bin():
    check_hf("pytorch-bin", "bin", "F32", num_key_value_heads=4, tie_word_embeddings=False)


@test
def hf_reference_tells_the_rope_conventions_apart():
    """The comparison above can fail: the same weights with the other RoPE pairing, or exported
    without undoing the permutation, give logits far from the reference."""
    _, ours, c, ids, logits = check_hf("discriminate", "safetensors", "F32",
                                       num_key_value_heads=2, tie_word_embeddings=False)
    wrong = forward(ours, c, ids, rope_interleaved)
    assert np.abs(wrong - logits).max() > 1e-2


# ----------------------------------------------------------------------------
# llama2.c version 2 (int8) files written here from our q8_0 files


def q8_0_as_llama2c_v2(src, out):
    """Rewrites our q8_0 file `src` as llama2.c's version 2 (llama2.c export.py's version2_export,
    read by its runq.c) with the same int8 values and scales: a 256-byte header (magic, version
    2, the 7 sizes, uint8 shared_classifier, int32 group_size at 37), the f32 norms (attn, ffn,
    final), then each matrix per layer (the embedding and wcls whole) as its int8 values followed
    by its f32 scales, one per group_size values of the flattened piece. Those are q8_0's row
    groups only when every row holds whole groups, which it asserts."""
    raw = {}
    h, t = read_nllm(src, raw)
    gs, layers = h["group_size"], h["n_layers"]
    assert h["dtype"] == 2 and h["norm"] == 0 and not h["norm_bias"]  # all version 2 can say
    assert h["rope_theta"] == 10000 and np.float32(h["norm_eps"]) == np.float32(1e-5)
    sizes = [h[k] for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
                            "vocab_size", "seq_len")]
    header = struct.pack("<Ii7iBi", 0x616B3432, 2, *sizes, h["shared"], gs)
    blobs = [header + bytes(256 - len(header))]
    blobs += [t[name].astype("<f4").tobytes() for name in ("attn_norm", "ffn_norm", "final_norm")]
    names = ["token_embedding", "wq", "wk", "wv", "wo", "w1", "w2", "w3"]
    for name in names + ([] if h["shared"] else ["wcls"]):
        q, scales = raw[name]  # (stacked rows, cols) and (stacked rows, cols / gs)
        assert q.shape[1] % gs == 0, (name, q.shape, gs)
        pieces = 1 if name in ("token_embedding", "wcls") else layers
        for q_piece, s_piece in zip(np.split(q, pieces), np.split(scales, pieces)):
            blobs += [q_piece.tobytes(), s_piece.astype("<f4").tobytes()]
    open(out, "wb").write(b"".join(blobs))


@test
def llama2c_v2_with_whole_groups_per_row_runs_as_q8_0_bit_for_bit():
    """Every matrix's rows hold whole groups (dim 64, hidden_dim 128; groups of 32 and 64; tied
    and separate classifier; GQA): run loads the version 2 file's int8 values and scales as q8_0
    and multiplies them with the q8_0 kernels, so its logits equal the q8_0 file's bit for bit
    over a prompt (prefill) and generated positions (decode). (Dequantized to f32, as run did
    before, they differed by 2e-3.)"""
    for gs, tied in ((32, True), (64, False)):
        name = f"v2-{gs}-{'tied' if tied else 'separate'}"
        path, _, _ = hf_checkpoint(name, "safetensors", seed=gs, hidden_size=64,
                                   intermediate_size=128, num_key_value_heads=2,
                                   tie_word_embeddings=tied, rms_norm_eps=1e-5, rope_theta=10000.0)
        q8 = tmp(name + ".nllm")
        code, _, err = export_cli(path, "--out", q8, "--dtype", "q8_0", "--group-size", str(gs))
        assert code == 0, err
        v2 = tmp(name + ".bin")
        q8_0_as_llama2c_v2(q8, v2)
        ids, want, _ = run_logits(q8, PROMPT, steps=48)
        _, got, _ = run_logits(v2, PROMPT, steps=48)
        assert want.shape == (48, 512) and len(ids) < 48, (want.shape, len(ids))
        diff = np.abs(got - want).max()
        assert got.tobytes() == want.tobytes(), (name, diff)


@test
def layernorm_trained_model_uses_biases_by_default():
    """A file written by nllm_format.write_model with trained norm layernorm and biases: run's default
    norm matches a LayerNorm reference; --norm=rmsnorm drops the biases with a notice."""
    g = torch.Generator().manual_seed(7)
    dim, hidden, L, V, H, KV = 32, 48, 2, 512, 4, 2
    kv_dim = KV * dim // H
    r = lambda *s: (torch.randn(*s, generator=g) / (s[-1] ** 0.5 if len(s) > 1 else 10)).numpy()  # noqa: E731
    w = {"token_embedding": torch.randn(V, dim, generator=g).numpy(), "wcls": r(V, dim),
         "attn_norm": [1 + r(dim) for _ in range(L)], "attn_norm_bias": [r(dim) for _ in range(L)],
         "ffn_norm": [1 + r(dim) for _ in range(L)], "ffn_norm_bias": [r(dim) for _ in range(L)],
         "wq": [r(dim, dim) for _ in range(L)], "wk": [r(kv_dim, dim) for _ in range(L)],
         "wv": [r(kv_dim, dim) for _ in range(L)], "wo": [r(dim, dim) for _ in range(L)],
         "w1": [r(hidden, dim) for _ in range(L)], "w2": [r(dim, hidden) for _ in range(L)],
         "w3": [r(hidden, dim) for _ in range(L)], "final_norm": 1 + r(dim),
         "final_norm_bias": r(dim)}
    cfg = nllm_format.Config(dim, hidden, L, H, KV, V, 64, rope_theta=10000.0, norm_eps=1e-5,
                             norm="layernorm", norm_bias=True, shared_classifier=False)
    path = tmp("layernorm.nllm")
    nllm_format.write_model(path, cfg, lambda n, l: w[n] if l is None else w[n][l], progress=False)
    c = dict(dim=dim, n_heads=H, n_kv_heads=KV, n_layers=L, norm_eps=1e-5, rope_theta=10000.0)
    ids, logits, err = run_logits(path, PROMPT)
    assert "norm layernorm" in err and "ignores" not in err, err
    ref = forward(w, c, ids, rope_interleaved, "layernorm")
    e = np.abs(ref - logits).max()
    print(f"  layernorm model: max |logit - reference| = {e:.2e}")
    assert e < 1e-4, e
    _, rms_logits, err = run_logits(path, PROMPT, extra=["--norm=rmsnorm"])
    assert "run: the model was trained with layernorm; rmsnorm ignores its norm biases" in err
    no_bias = {k: v for k, v in w.items() if not k.endswith("_bias")}
    ref = forward(no_bias, c, ids, rope_interleaved, "rmsnorm")
    assert np.abs(ref - rms_logits).max() < 1e-4
    _, _, err = run_logits(path, PROMPT, extra=["--norm=rmsnorm_eps_outside"])
    assert "layernorm; rmsnorm_eps_outside ignores its norm biases" in err, err


# ----------------------------------------------------------------------------
# Bad input: exit 1, one line "export.py: error: ...", no traceback


def expect_export_error(args, needle):
    code, out, err = export_cli(*args)
    assert code == 1, (code, err)
    assert err.count("\n") == 1 and err.startswith("export.py: error: "), err
    assert needle in err, (needle, err)
    assert "Traceback" not in err


@test
def export_errors():
    path, cfg, _ = hf_checkpoint("errors", "safetensors", "F32", num_key_value_heads=2,
                                 tie_word_embeddings=False)
    out = tmp("never.nllm")
    cfg_path = os.path.join(path, "config.json")
    json.dump(dict(cfg, architectures=["GPT2LMHeadModel"], model_type="gpt2"), open(cfg_path, "w"))
    expect_export_error([path, "--out", out], "unsupported architecture GPT2LMHeadModel")
    json.dump(dict(cfg, intermediate_size=40), open(cfg_path, "w"))
    expect_export_error([path, "--out", out], "w1 of layer 0 has shape (48, 32), expected (40, 32)")
    json.dump({k: v for k, v in cfg.items() if k != "hidden_size"}, open(cfg_path, "w"))
    expect_export_error([path, "--out", out], "missing field 'hidden_size' in its config")
    open(cfg_path, "w").write("{not json")
    expect_export_error([path, "--out", out], "config.json: not valid JSON")
    json.dump(cfg, open(cfg_path, "w"))
    w = hf_weights(cfg, 0)
    del w["model.layers.1.mlp.up_proj.weight"]
    write_safetensors(os.path.join(path, "model.safetensors"), w, "F32")
    expect_export_error([path, "--out", out], "missing tensor 'model.layers.1.mlp.up_proj.weight'")
    os.remove(os.path.join(path, "model.safetensors"))
    expect_export_error([path, "--out", out], "no model.safetensors")
    expect_export_error([tmp("no-such.pt"), "--out", out], "no such file or directory")
    expect_export_error([TOK_BIN, "--out", out], "cannot load with torch")
    open(tmp("bad.model"), "wb").write(b"not a model")
    expect_export_error([tmp("bad.model"), "--out", out], "not a SentencePiece model")
    # SentencePiece loads a model whose first U+2581 lost its last byte, then cannot decode it
    data = open(TOK_MODEL, "rb").read()
    at = data.find("\u2581".encode()) + 2
    open(tmp("bad.model"), "wb").write(data[:at] + b"\xc2" + data[at + 1:])
    expect_export_error([tmp("bad.model"), "--out", out],
                        "not a SentencePiece model ('utf-8' codec can't decode")
    expect_export_error([PT, "--out", out, "--dtype", "q8_0", "--group-size", "48"],
                        "--group-size must be 32 or 64, got 48")
    expect_export_error(["--out", out], "give either an input or --random SHAPE")
    expect_export_error([PT, "--random", "15M", "--out", out], "give either an input or --random")
    # an option that would change nothing is refused, not ignored
    expect_export_error([PT, "--out", out, "--group-size", "64"],
                        "--group-size goes with --dtype q8_0")
    expect_export_error([PT, "--out", out, "--dtype", "bf16", "--group-size", "32"],
                        "--group-size goes with --dtype q8_0")
    expect_export_error([PT, "--out", out, "--seed", "3"], "--seed goes with --random")
    for option in (["--dtype", "q8_0"], ["--seq-len", "64"]):
        expect_export_error([TOK_MODEL, "--out", out, *option],
                            f"{option[0]} goes with a model export, not with a tokenizer "
                            f"({TOK_MODEL})")
    assert_nothing_written(out)


@test
def export_refuses_fifos_and_devices_as_inputs():
    """A FIFO would block the read for a writer that never comes: each input file, on its own or
    in a checkpoint directory, is refused unless it is a regular file. The timeout turns a hang
    into a failure."""
    out = tmp("never.nllm")
    fifo = tmp("input.fifo")
    os.mkfifo(fifo)

    def refused(args, needle):
        p = subprocess.run([sys.executable, "export.py", *args, "--out", out, "--quiet"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 1 and p.stderr.count("\n") == 1, (args, p.stderr)
        assert p.stderr.startswith("export.py: error: ") and needle in p.stderr, (args, p.stderr)

    refused([fifo], f"{fifo}: not a regular file")
    refused(["/dev/zero"], "/dev/zero: not a regular file")
    path, _, _ = hf_checkpoint("fifo", "safetensors", "F32", num_key_value_heads=2,
                             tie_word_embeddings=False)
    for name in ("model.safetensors", "config.json"):
        os.rename(os.path.join(path, name), os.path.join(path, name + ".kept"))
        os.mkfifo(os.path.join(path, name))
        refused([path], f"{os.path.join(path, name)}: not a regular file")
        os.remove(os.path.join(path, name))
        os.rename(os.path.join(path, name + ".kept"), os.path.join(path, name))
    os.makedirs(tmp("meta-fifo"), exist_ok=True)
    json.dump({"dim": 64, "n_layers": 5, "n_heads": 8}, open(tmp("meta-fifo/params.json"), "w"))
    os.mkfifo(tmp("meta-fifo/consolidated.00.pth"))
    refused([tmp("meta-fifo")], "consolidated.00.pth: not a regular file")
    assert_nothing_written(out)


def pt_checkpoint(name, model_args=None, tensors=None):
    """stories260K.pt with its model_args replaced and the given state-dict values (names without
    the _orig_mod. prefix) put in; returns its path."""
    ckpt = torch.load(PT, map_location="cpu")
    ckpt["model"] = {**{k.replace("_orig_mod.", ""): v for k, v in ckpt["model"].items()},
                     **(tensors or {})}
    if model_args is not None:
        ckpt["model_args"] = model_args
    path = tmp(name + ".pt")
    torch.save(ckpt, path)
    return path


@test
def export_refuses_configs_run_refuses():
    """Every limit of run's header check (format.c, check_config) is an export error, as are
    fields of the wrong type and config files that are not JSON objects."""
    args = torch.load(PT, map_location="cpu")["model_args"]
    out = tmp("never.nllm")
    for field, value, needle in [("n_layers", 0, "n_layers is 0, outside 1..1048576"),
                                 ("n_heads", 0, "n_heads is 0, outside 1..1048576"),
                                 ("max_seq_len", 0, "seq_len is 0, outside 1..1048576"),
                                 ("max_seq_len", None, "seq_len is None, not an integer"),
                                 ("dim", "abc", "dim is 'abc', not an integer"),
                                 # too long for Python to print: its size is named instead
                                 ("dim", 10**5000, "dim is a 16610-bit integer, outside"),
                                 ("vocab_size", 2, "vocab_size 2 is too small"),
                                 ("n_heads", 3, "dim 64 is not a multiple of n_heads 3"),
                                 ("n_kv_heads", 3, "n_heads 8 is not a multiple of n_kv_heads 3"),
                                 ("n_heads", 64, "head_size 1 (dim / n_heads) is odd"),
                                 ("norm_eps", 0.0, "norm_eps is 0.0, outside (0, 1)"),
                                 ("norm_eps", float("nan"), "norm_eps is nan, outside (0, 1)")]:
        path = pt_checkpoint("bad-args", dict(args, **{field: value}))
        expect_export_error([path, "--out", out], needle)
    expect_export_error([pt_checkpoint("args-list", [1, 2]), "--out", out],
                        "model_args is a list, not a dict")
    path, cfg, _ = hf_checkpoint("bad-config", "safetensors", "F32", num_key_value_heads=2,
                                 tie_word_embeddings=False)
    cfg_path = os.path.join(path, "config.json")
    # config.json's messages name its keys, not the header's fields
    for overrides, needle in [({"num_attention_heads": 0},
                               "num_attention_heads is 0, outside 1..1048576"),
                              ({"hidden_size": "8"}, "hidden_size is '8', not an integer"),
                              ({"num_key_value_heads": 3}, "num_attention_heads 4 is not a "
                               "multiple of num_key_value_heads 3"),
                              ({"num_attention_heads": 32}, "head_size 1 (hidden_size / "
                               "num_attention_heads) is odd"),
                              ({"max_position_embeddings": 0},
                               "max_position_embeddings is 0, outside 1..1048576"),
                              ({"rms_norm_eps": 0}, "rms_norm_eps is 0, outside (0, 1)"),
                              # a float32 of 1e12 (run's bound), though below it as a double
                              ({"rope_theta": 999999999999.0},
                               "rope_theta is 999999999999.0, outside (1, 1e+12)"),
                              ({"architectures": "LlamaForCausalLM"},
                               "architectures is 'LlamaForCausalLM', not a list"),
                              ({"tie_word_embeddings": "false"},
                               "tie_word_embeddings is 'false', not true or false")]:
        json.dump(dict(cfg, **overrides), open(cfg_path, "w"))
        expect_export_error([path, "--out", out], needle)
    for text, needle in [("[1, 2]", "config.json: not a JSON object"),
                         ("[" * 100000, "config.json: not valid JSON (maximum recursion depth")]:
        open(cfg_path, "w").write(text)
        expect_export_error([path, "--out", out], needle)
    os.makedirs(tmp("meta-list"), exist_ok=True)
    json.dump([], open(tmp("meta-list/params.json"), "w"))
    expect_export_error([tmp("meta-list"), "--out", out], "params.json: not a JSON object")
    assert_nothing_written(out)


@test
def export_refuses_bad_tensors():
    """NaN or infinite weights in every dtype (no numpy warnings: one stderr line), values that
    are not real dense float tensors, and tensors of shapes the loaders cannot take."""
    out = tmp("never.nllm")
    wq = torch.load(PT, map_location="cpu")["model"]["_orig_mod.layers.2.attention.wq.weight"]
    wq = wq.clone()
    wq[3, 4] = float("nan")
    path = pt_checkpoint("nan", tensors={"layers.2.attention.wq.weight": wq})
    for dtype in ("f32", "bf16", "q8_0"):
        expect_export_error([path, "--out", out, "--dtype", dtype],
                            "wq of layer 2 has a NaN or infinite value")
    norm = torch.ones(64)
    norm[5] = float("-inf")
    expect_export_error([pt_checkpoint("inf", tensors={"norm.weight": norm}), "--out", out],
                        "final_norm has a NaN or infinite value")
    expect_export_error([pt_checkpoint("str", tensors={"norm.weight": "x"}), "--out", out],
                        "norm.weight is a str, not a tensor")
    for tensors, needle in [
            ({"norm.weight": torch.ones(64) * 1j},
             "tensor norm.weight has dtype torch.complex64, not real floating point"),
            ({"norm.weight": torch.ones(64).to_sparse()},
             "tensor norm.weight has layout torch.sparse_coo, not dense"),
            ({"norm.weight": torch.empty(64, device="meta")},
             "tensor norm.weight is on the meta device: it holds no values"),
            # the key that is not a string is passed over, not a traceback
            ({5: torch.ones(1), "layers.0.feed_forward.w1.weight": torch.ones(())},
             "tensor layers.0.feed_forward.w1.weight has shape (), not a matrix's")]:
        expect_export_error([pt_checkpoint("odd", tensors=tensors), "--out", out], needle)
    # q_proj's rows are permuted back per head: first its shape is checked
    path, cfg, _ = hf_checkpoint("bad-q", "safetensors", "F32", num_key_value_heads=2,
                                 tie_word_embeddings=False)
    for shape in ((30, 32), (2, 16, 32)):
        w = dict(hf_weights(cfg, 0),
                 **{"model.layers.0.self_attn.q_proj.weight": torch.ones(shape)})
        write_safetensors(os.path.join(path, "model.safetensors"), w, "F32")
        expect_export_error([path, "--out", out], f"wq of layer 0 has shape {shape}, expected "
                            "(32, 32)")
    assert_nothing_written(out)


@test
def export_refuses_malformed_safetensors():
    """Each problem of a safetensors header has its own line: the header checked against the
    spec before any tensor is read, a tensor's bytes against its shape when it is read."""
    path, _, _ = hf_checkpoint("bad-safetensors", "safetensors", "F32", num_key_value_heads=2,
                               tie_word_embeddings=False)
    out = tmp("never.nllm")
    name = "model.embed_tokens.weight"
    entry = {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 32]}
    for header, needle in [
            (b"{", "safetensors header: not valid JSON"),
            (b"[" * 100000, "safetensors header: not valid JSON (maximum recursion depth"),
            ([1, 2], "safetensors header: not a JSON object"),
            ({name: 5}, f"tensor {name}'s entry is 5, not a JSON object"),
            ({name: [1]}, f"tensor {name}'s entry is [1], not a JSON object"),
            *[({name: {k: v for k, v in entry.items() if k != key}}, f"tensor {name} has no {key}")
              for key in entry],
            ({name: dict(entry, dtype=["F32"])}, f"tensor {name} has dtype ['F32'], not a string"),
            ({name: dict(entry, dtype="I64")}, f"tensor {name} has unsupported dtype I64"),
            ({name: dict(entry, shape=[-512, 32])},
             f"tensor {name} has shape [-512, 32], not sizes >= 0"),
            ({name: dict(entry, shape="2x4")}, f"tensor {name} has shape '2x4', not sizes >= 0"),
            ({name: dict(entry, shape=[True])}, f"tensor {name} has shape [True], not sizes >= 0"),
            *[({name: dict(entry, data_offsets=offsets)},
               f"tensor {name} has data_offsets {offsets!r}, not [begin, end] with 0 <= begin <= "
               "end <= 64 (the size of the data)")
              for offsets in ([0], [0, 32, 64], [-4, 28], [32, 0], [0, 68], ["0", 32], [0, 1.5])],
            ({name: dict(entry, data_offsets=[0, 28])}, f"tensor {name} has data_offsets "
             "[0, 28], 28 bytes; its shape [2, 4] of F32 needs 32"),
            # no bytes at the data's end: read without a map (np.memmap refuses one)
            ({name: dict(entry, shape=[0, 4], data_offsets=[64, 64])},
             "token_embedding has shape (0, 4), expected (512, 32)")]:
        h = header if isinstance(header, bytes) else json.dumps(header).encode()
        h += b" " * (-(8 + len(h) + 64) % 4096)  # the file ends on a page: see the last case
        open(os.path.join(path, "model.safetensors"), "wb").write(
            struct.pack("<Q", len(h)) + h + bytes(64))
        expect_export_error([path, "--out", out], needle)
    assert_nothing_written(out)


@test
def export_refuses_bad_shards():
    """Sharded checkpoints: index files that are not JSON, or whose weight_map is missing, not an
    object, or names a file that is not there; a tensor in two shards; Meta shards that do not
    split a tensor evenly."""
    path, cfg, _ = hf_checkpoint("bad-index", "sharded", "F32", num_key_value_heads=2,
                                 tie_word_embeddings=False)
    index = os.path.join(path, "model.safetensors.index.json")
    good = json.load(open(index))
    out = tmp("never.nllm")
    norm = "model.norm.weight"
    for text, needle in [
            ("{not json", "model.safetensors.index.json: not valid JSON"),
            ("[]", "model.safetensors.index.json: not a JSON object"),
            ("{}", "model.safetensors.index.json: no weight_map"),
            ('{"weight_map": [1]}', "weight_map is [1], not an object"),
            *[(json.dumps({"weight_map": dict(good["weight_map"], **{norm: file})}),
               f"weight_map puts {norm} in {file!r}, not a file in {path}")
              for file in (5, None, "model-00003-of-00002.safetensors", ".")]]:
        open(index, "w").write(text)
        expect_export_error([path, "--out", out], needle)
    json.dump(good, open(index, "w"))
    shards = sorted(set(good["weight_map"].values()))
    w = hf_weights(cfg, 0)
    second = [k for k, f in good["weight_map"].items() if f == shards[1]]
    write_safetensors(os.path.join(path, shards[1]), {k: w[k] for k in second + [norm]}, "F32")
    expect_export_error([path, "--out", out], f"tensor {norm} is in both {path}/{shards[0]} and "
                        f"{path}/{shards[1]}")
    meta = tmp("meta-uneven")
    os.makedirs(meta, exist_ok=True)
    json.dump({"dim": 32, "n_layers": 1, "n_heads": 4},
              open(os.path.join(meta, "params.json"), "w"))
    for i, cols in enumerate((16, 12)):
        torch.save({"tok_embeddings.weight": torch.ones(512, cols)},
                   os.path.join(meta, f"consolidated.0{i}.pth"))
    expect_export_error([meta, "--out", out], "tensor tok_embeddings.weight has shapes (512, 16), "
                        "(512, 12) in consolidated.00.pth, consolidated.01.pth")
    assert_nothing_written(out)


@test
def export_option_errors():
    """Usage errors are one line and exit 1 like the others; --out's problems name --out."""
    out = tmp("never.nllm")
    # refused as the option: in Config the message would name the checkpoint's field
    for seq_len in ("0", "-5", "2000000", "99999999999"):
        expect_export_error([PT, "--out", out, "--seq-len", seq_len],
                            f"--seq-len must be in 1..1048576, got {seq_len}")
    expect_export_error(["--random", "15M", "--seed", "-1", "--out", out],
                        "--seed must be 0 or more, got -1")
    expect_export_error([PT, "--out", out, "--dtype", "f8"],
                        "argument --dtype: invalid choice: 'f8'")
    expect_export_error([PT, "--out", out, "--bogus"], "unrecognized arguments: --bogus")
    expect_export_error([PT], "the following arguments are required: --out")
    for source in (PT, TOK_MODEL):
        missing = tmp("no-such-dir/x.out")
        expect_export_error([source, "--out", missing],
                            f"cannot write {missing}: No such file or directory")
    # the finished model is renamed onto --out, which would replace a directory or device node
    directory = tmp("out-dir")
    os.makedirs(directory, exist_ok=True)
    for source in (PT, TOK_MODEL):
        expect_export_error([source, "--out", directory],
                            f"--out {directory} is not a regular file")
        if os.path.exists("/dev/full"):
            expect_export_error([source, "--out", "/dev/full"],
                                "--out /dev/full is not a regular file")
        expect_export_error([source, "--out", directory + "/new/"],
                            f"--out '{directory}/new/' names a directory, not a file")
    assert os.path.isdir(directory) and not os.path.exists(directory + "/new")
    # a file size limit (or a full disk) while writing names --out, not the input, and leaves no
    # file at --out, also for a tokenizer

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (100000, 100000))
    for source in (PT, "models/tokenizer.model"):  # the Llama 2 vocabulary: 434 KB written
        p = subprocess.run([sys.executable, "export.py", source, "--out", out, "--quiet"],
                           preexec_fn=limit_file_size, capture_output=True, text=True)
        assert (p.returncode, p.stderr) == (1, f"export.py: error: cannot write {out}: File too "
                                               "large\n"), p.stderr
        assert_nothing_written(out)
    # SentencePiece would abort the process on a directory
    model_dir = tmp("dir.model")
    os.makedirs(model_dir, exist_ok=True)
    expect_export_error([model_dir, "--out", out], f"{model_dir}: not a regular file")
    assert_nothing_written(out)


def assert_nothing_written(out):
    """No file at out, and no temporary file of export.py's left beside it."""
    assert not os.path.exists(out)
    directory = os.path.dirname(os.path.realpath(out))
    assert not [f for f in os.listdir(directory) if f.startswith(".export-")], directory


@test
def export_writes_through_a_symlinked_out():
    """--out a symlink: the model goes to the file it names, and the link stays a link."""
    target, link = tmp("link-target.nllm"), tmp("link.nllm")
    for path in (target, link):
        if os.path.lexists(path):
            os.remove(path)
    os.symlink(target, link)
    code, _, err = export_cli(PT, "--out", link, "--quiet")
    assert code == 0, err
    assert os.path.islink(link) and os.path.isfile(target)
    assert read_nllm(target)[0]["dim"] == 64
    os.remove(link)
    os.remove(target)


@test
def export_never_writes_over_its_input_or_through_other_files():
    """--out that is the input (or a link to it) is refused; a file or link already named like a
    temporary file is never written through; a symlink loop is refused; a name of 250 characters
    works; an existing --out keeps its permissions; a SIGTERM leaves no temporary file."""
    d = tmp("out-cases")
    os.makedirs(d, exist_ok=True)
    pt, model = os.path.join(d, "in.pt"), os.path.join(d, "in.model")
    shutil.copy(PT, pt)
    shutil.copy(TOK_MODEL, model)
    shutil.copy(TOK_MODEL, os.path.join(d, "tok512.model"))  # in.pt's vocabulary
    alias = os.path.join(d, "alias.nllm")
    if not os.path.lexists(alias):
        os.symlink(pt, alias)
    for source, out in ((pt, pt), (model, model), (pt, alias)):
        expect_export_error([source, "--out", out], f"--out {out} is the input {source}")
    assert open(pt, "rb").read() == open(PT, "rb").read()
    assert open(model, "rb").read() == open(TOK_MODEL, "rb").read()
    precious, out = os.path.join(d, "precious.txt"), os.path.join(d, "a.nllm")
    open(precious, "w").write("precious")
    for name in (out + ".tmp", os.path.join(d, ".export-x.tmp")):
        if not os.path.lexists(name):
            os.symlink(precious, name)
    code, _, err = export_cli(pt, "--out", out)
    assert code == 0, err
    assert open(precious).read() == "precious" and not os.path.islink(out)
    assert read_nllm(out)[0]["dim"] == 64
    for name in (out + ".tmp", os.path.join(d, ".export-x.tmp")):
        os.remove(name)
    loop = os.path.join(d, "loop1")
    if not os.path.lexists(loop):
        os.symlink(os.path.join(d, "loop2"), loop)
        os.symlink(loop, os.path.join(d, "loop2"))
    expect_export_error([pt, "--out", loop], f"--out {loop}: too many levels of symbolic links")
    long_name = os.path.join(d, "x" * 246 + ".bin")
    code, _, err = export_cli(model, "--out", long_name)
    assert code == 0 and os.path.getsize(long_name) == os.path.getsize(TOK_BIN), err
    os.chmod(out, 0o600)
    code, _, err = export_cli(pt, "--out", out)
    assert code == 0 and os.stat(out).st_mode & 0o777 == 0o600, err
    # SIGTERM while writing (the 1.1B shape takes seconds), once the temporary file is there
    big = os.path.join(d, "big.nllm")
    p = subprocess.Popen([sys.executable, "export.py", "--random", "1.1B", "--out", big, "--quiet"],
                         stderr=subprocess.PIPE)
    for _ in range(600):
        if [f for f in os.listdir(d) if f.startswith(".export-") and f.endswith(".tmp")]:
            break
        time.sleep(0.05)
    p.terminate()
    assert p.wait() == 128 + signal.SIGTERM
    assert_nothing_written(big)
    shutil.rmtree(d)


@test
def random_model_records_seq_len():
    out = tmp("random-15M-seq-len.nllm")
    code, _, err = export_cli("--random", "15M", "--dtype", "q8_0", "--seq-len", "64", "--out", out)
    assert code == 0, err
    assert read_nllm(out)[0]["seq_len"] == 64
    os.remove(out)


@test
def header_alone_serves_tokenizer_checks():
    """run reads the model's header, not its weights, for --tokenize and to check the tokenizer,
    the prompt's length and a --logits file: under an address-space limit that the load of a
    model with a 262144-position kv cache (335 MB) cannot fit, each of them works or gives its
    own error, and only the full run is refused for memory."""
    out = tmp("long-context.nllm")
    code, _, err = export_cli(PT, "--out", out, "--seq-len", "262144")
    assert code == 0, err
    limit = 160 << 20

    def limited(*args):
        p = subprocess.run([RUN, *args], capture_output=True, text=True,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
        if "AddressSanitizer" in p.stderr:
            raise Skip("AddressSanitizer reserves more address space than the limit")
        return p.returncode, p.stdout, p.stderr
    text = "Once upon a time"
    code, stdout, err = limited(out, "-z", TOK_BIN, "--tokenize", text)
    assert code == 0, err
    assert [int(line.split()[0]) for line in stdout.splitlines()] == [1] + SP.encode(text), stdout
    code, _, err = limited(out, "-z", "models/tokenizer.bin", text)
    assert (code, err) == (1, f"run: -z models/tokenizer.bin has 32000 pieces but {out} carries "
                              "a vocabulary of 512 (leave out -z to use it)\n"), err
    n = 1 + len(SP.encode(text))
    code, _, err = limited(out, "-z", TOK_BIN, "-n", "2", text)
    assert (code, err) == (1, f"run: the prompt is {n} tokens, more than -n 2 (which counts the "
                              "prompt tokens)\n"), err
    code, _, err = limited(out, "-z", TOK_BIN, "--logits", out, text)
    assert (code, err) == (1, f"run: --logits file {out} is the model file; writing it would "
                              "destroy it\n"), err
    code, _, err = limited(out, "-z", TOK_BIN, text)
    assert code == 1 and "out of memory for the run state and kv cache" in err, err
    os.remove(out)


@test
def logits_past_a_file_size_limit_is_an_error():
    """A --logits file that outgrows RLIMIT_FSIZE: one error line naming it and exit 1, rather
    than death by SIGXFSZ (subprocess gives the child SIGXFSZ's default action, as a shell does)."""
    out = tmp("limited.f32")
    p = subprocess.run([RUN, LEGACY, "-n", "20", "-s", "1", "--logits", out, "Hi"],
                       capture_output=True, text=True,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192)))
    assert (p.returncode, p.stderr) == (1, f"run: cannot write --logits file {out}: File too "
                                           "large\n"), (p.returncode, p.stderr)
    assert not os.path.exists(out), "the partial --logits file is removed"


@test
def model_replaced_after_its_header_is_refused():
    """run checks the tokenizer and the prompt against the model's header, then loads the weights:
    a model file replaced in between (here by one with another seq_len, while run waits on a
    tokenizer FIFO, which it opens only after reading the header) is refused rather than run past
    the checks."""
    model, other, fifo = tmp("swapped.nllm"), tmp("swapped-other.nllm"), tmp("tok.fifo")
    for path, seq_len in ((model, "512"), (other, "64")):
        code, _, err = export_cli(PT, "--out", path, "--seq-len", seq_len)
        assert code == 0, err
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # a writer from the start: run's reads wait for the data
    p = subprocess.Popen([RUN, model, "-z", fifo, "-n", "16", "Once"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while not any(os.path.realpath(f"/proc/{p.pid}/fd/{fd}") == fifo
                  for fd in os.listdir(f"/proc/{p.pid}/fd")):
        assert time.time() < deadline and p.poll() is None, "run did not open the tokenizer"
        time.sleep(0.01)
    os.replace(other, model)
    with open(TOK_BIN, "rb") as f:
        os.write(writer, f.read())
    os.close(writer)
    out, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (1, f"run: {model}: the file changed while it was read\n"), err
    assert out == ""
    os.remove(model)
    os.remove(fifo)


@test
def model_truncated_while_run_generates_is_harmless():
    """Once loaded, the weights are run's own (the norms copied like the matrices, the file
    unmapped): truncating the model file mid-run changes nothing, where a read of the truncated
    map would die of SIGBUS. The truncation comes while run waits to write its --logits into a
    full FIFO, after the first positions and before the rest."""
    model, fifo, expected = tmp("truncated.bin"), tmp("logits.fifo"), tmp("expected.f32")
    shutil.copy(LEGACY, model)
    args = ["-z", TOK_BIN, "-t", "0", "-n", "200", "Once"]
    code, text, err = run(model, *args, "--logits", expected)
    assert code == 0, err
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so that run's open does not wait
    p = subprocess.Popen([RUN, model, *args, "--logits", fifo], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    capacity, deadline = fcntl.fcntl(reader, fcntl.F_GETPIPE_SZ), time.time() + 30
    while struct.unpack("i", fcntl.ioctl(reader, termios.FIONREAD, b"\0" * 4))[0] < capacity:
        assert time.time() < deadline and p.poll() is None, "run did not fill the FIFO"
        time.sleep(0.01)
    os.truncate(model, 0)
    os.set_blocking(reader, True)
    logits = b"".join(iter(lambda: os.read(reader, 1 << 16), b""))
    os.close(reader)
    out, err = p.communicate(timeout=60)
    assert (p.returncode, err.decode().count("\n")) == (0, 1), (p.returncode, err)
    assert out.decode() == text
    with open(expected, "rb") as f:
        assert logits == f.read()
    for path in (model, fifo, expected):
        os.remove(path)


@test
def export_refuses_tensors_its_config_leaves_unused():
    """model_args naming fewer layers than the state dict holds, or a tensor no model reads: an
    error naming the first tensor left over, not a model silently missing it. A Hugging Face
    rotary_emb.inv_freq, recomputed from rope_theta, is no such tensor."""
    args = torch.load(PT, map_location="cpu")["model_args"]
    out = tmp("never.nllm")
    expect_export_error([pt_checkpoint("fewer-layers", dict(args, n_layers=4)), "--out", out],
                        "tensor 'layers.4.attention.wq.weight' is not part of the model its config "
                        "describes (n_layers 4)")
    expect_export_error([pt_checkpoint("extra", tensors={"layers.0.attention.bias": torch.ones(64)}),
                         "--out", out], "tensor 'layers.0.attention.bias' is not part of the model")
    path, cfg, _ = hf_checkpoint("extra-hf", "safetensors", "F32", num_key_value_heads=2,
                                 tie_word_embeddings=False)
    w = hf_weights(cfg, 0)
    inv_freq = {"model.layers.0.self_attn.rotary_emb.inv_freq": torch.ones(4)}
    write_safetensors(os.path.join(path, "model.safetensors"), dict(w, **inv_freq), "F32")
    assert export_cli(path, "--out", tmp("inv-freq.nllm"))[0] == 0
    extra_layer = {"model.layers.2.mlp.up_proj.weight": w["model.layers.1.mlp.up_proj.weight"]}
    write_safetensors(os.path.join(path, "model.safetensors"), dict(w, **extra_layer), "F32")
    expect_export_error([path, "--out", out], "tensor 'model.layers.2.mlp.up_proj.weight' is not "
                        f"part of the model its config describes (n_layers {cfg['num_hidden_layers']})")
    assert_nothing_written(out)


@test
def export_errors_escape_names():
    """A name with a newline or a terminal's escape code, from the command line or from the input,
    is printed as run prints names (\\n, \\xNN): the error stays one line of plain text."""
    out = tmp("never.nllm")
    for args, needle in [
            ([tmp("a\x1b[31m\nb.pt")], "a\\x1B[31m\\nb.pt: no such file or directory"),
            ([tmp("caf\udcff.pt")], "caf\\xFF.pt: no such file or directory"),
            ([PT, "--bogus\x1b[31m"], "unrecognized arguments: --bogus\\x1B[31m")]:
        expect_export_error([*args, "--out", out], needle)
    path, cfg, _ = hf_checkpoint("escape", "safetensors", "F32", num_key_value_heads=2,
                                 tie_word_embeddings=False)
    json.dump(dict(cfg, architectures=["\x1b[31mEvil\nModel"], model_type="evil"),
              open(os.path.join(path, "config.json"), "w"))
    expect_export_error([path, "--out", out], "unsupported architecture \\x1B[31mEvil\\nModel")
    assert_nothing_written(out)


def expect_tool_error(argv, needle, stdin=None, env=None):
    """A Python tool's bad input: exit 1, one line on stderr holding needle, no traceback."""
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env)
    assert p.returncode == 1 and p.stderr.count("\n") == 1, (argv, p.returncode, p.stderr)
    assert needle in p.stderr and "Traceback" not in p.stderr, (argv, needle, p.stderr)


@test
def plot_compare_errors_are_one_line_and_dash_reads_stdin():
    """tools/plot_compare.py on a missing file, on text, on JSON that is not --compare's (that of
    --tokenize --json, a --compare JSON lacking a field), on a chart it cannot write; "-" reads
    the JSON from stdin."""
    tool = [sys.executable, "tools/plot_compare.py"]
    code, compare, err = run(LEGACY, "-t", "0", "-n", "12", "--compare", "--json", "Once")
    assert code == 0, err
    _, tokens, _ = run(LEGACY, "--tokenize", "Once", "--json")
    broken = json.loads(compare)
    del broken["positions"][3]["kl"]
    png = tmp("compare.png")
    expect_tool_error(tool + [tmp("none.json"), png], f"{tmp('none.json')}: No such file")
    expect_tool_error(tool + [TOK_BIN, png], f"{TOK_BIN}: not JSON")
    expect_tool_error(tool + ["-", png], "stdin: not the JSON of run --compare --json: the JSON "
                      "has no \"model\"", stdin=tokens)
    expect_tool_error(tool + ["-", png], "stdin: not the JSON of run --compare --json: "
                      "the JSON.positions[3] has no \"kl\"", stdin=json.dumps(broken))
    expect_tool_error(tool + ["-", tmp("no-such-dir/c.png")], "cannot write", stdin=compare)
    p = subprocess.run(tool + ["-", png], input=compare, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


@test
def plot_compare_draws_tiny_kl_where_it_is_and_names_the_norms_compared():
    """The chart of --compare=rmsnorm,rmsnorm_eps_outside (KL about 1e-9, the mean below 1e-8):
    the log axis reaches the smallest positive KL, the mean line sits at the mean and its legend
    gives it in 3 digits, a KL of 0 is drawn on the axis's floor and counted, the middle title
    names the two norms and not LayerNorm, and the norms' share of time is written on the chart,
    each speed with its range over the rounds and B's over A's in the title."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("plot_compare", "tools/plot_compare.py")
    plot_compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot_compare)
    plt = plot_compare.plt
    code, out, err = run(LEGACY, "-t", "0", "-n", "30", "--compare=rmsnorm,rmsnorm_eps_outside",
                         "--json", "Once")
    assert code == 0, err
    d = json.loads(out)
    d["positions"][5]["kl"] = 0.0  # as two equal distributions give
    kls = [p["kl"] for p in d["positions"] if p["kl"] > 0]
    mean = d["summary"]["mean_kl"]
    assert max(kls) < 1e-7 and mean < 1e-8, (max(kls), mean)
    plot_compare.plot(d, tmp("tiny.png"))
    ax_kl, ax_site, ax_time = plt.gcf().axes[:3]
    low, high = ax_kl.get_ylim()
    assert low <= min(kls) and high >= max(kls), (low, high, min(kls))
    lines = {line.get_label(): line for line in ax_kl.get_lines()}
    label = f"mean {mean:.3g} nats"
    assert label in lines and lines[label].get_ydata()[0] == mean, list(lines)
    assert "KL = 0 (1 positions)" in [c.get_label() for c in ax_kl.collections], "zero not shown"
    title = ax_site.get_title()
    assert "rmsnorm and under rmsnorm_eps_outside" in title and "LayerNorm" not in title, title
    shares = [t.get_text() for t in ax_time.texts if t.get_text().startswith("norms ")]
    assert len(shares) == 2, [t.get_text() for t in ax_time.texts]
    # the texts do not part (first_difference -1), and each speed comes with its rounds' range
    title = ax_kl.get_title()
    assert d["first_difference"] == -1 and "texts are the same" in title, title
    ticks = [t.get_text() for t in ax_time.get_yticklabels()]
    for run_, tick in zip(d["speed"], ticks):
        want = f"({run_['tokens_per_s_min']:.0f} to {run_['tokens_per_s_max']:.0f})"
        assert want in tick, (want, tick)
    ratio = d["speed_ratio_b_over_a"]
    assert (f"B faster in {ratio['b_faster_rounds']} of {d['rounds']} rounds"
            in ax_time.get_title()), ax_time.get_title()
    plt.close("all")


@test
def plot_compare_help_exits_0():
    p = subprocess.run([sys.executable, "tools/plot_compare.py", "--help"], capture_output=True,
                       text=True)
    assert (p.returncode, p.stderr) == (0, ""), (p.returncode, p.stderr)
    assert "--compare --json" in p.stdout and "plot_compare.py - compare.png" in p.stdout, p.stdout


@test
def python_tools_under_another_python3_name_usr_bin_python3():
    """./export.py and ./tools/plot_compare.py started with another python3 first on PATH (here
    a venv without Debian's packages): one line naming /usr/bin/python3, not a traceback."""
    venv = tmp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    env = dict(os.environ, PATH=os.path.join(venv, "bin") + os.pathsep + os.environ["PATH"])
    for argv, module in [(["./export.py", "--help"], "numpy"),
                         (["./tools/plot_compare.py", "a.json", "a.png"], "matplotlib")]:
        expect_tool_error(argv, f"{venv}/bin/python3 cannot import {module}: run", env=env)
        expect_tool_error(argv, "with /usr/bin/python3", env=env)


class RunsCommand:
    """Pickles as a call of os.system(command): what a hostile checkpoint holds."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


@test
def hostile_checkpoint_runs_no_code():
    """A .pt whose pickle calls os.system, as torch.save writes it (zip and legacy formats), as a
    bare pickle, and as a Hugging Face pytorch_model.bin: refused in one line, nothing run."""
    marker = tmp("hostile-ran")
    out = tmp("never.nllm")
    ckpt = {"model_args": RunsCommand(f"touch {marker}"), "model": {}}
    paths = [tmp("hostile.pt"), tmp("hostile-legacy.pt"), tmp("hostile-bare.pt")]
    torch.save(ckpt, paths[0])
    torch.save(ckpt, paths[1], _use_new_zipfile_serialization=False)
    with open(paths[2], "wb") as f:
        pickle.dump(ckpt, f)
    path, _, _ = hf_checkpoint("hostile-hf", "bin", "F32", num_key_value_heads=4,
                               tie_word_embeddings=False)
    torch.save({"model.norm.weight": RunsCommand(f"touch {marker}")},
               os.path.join(path, "pytorch_model.bin"))
    for p, name in [*((p, p) for p in paths), (path, os.path.join(path, "pytorch_model.bin"))]:
        expect_export_error([p, "--out", out], f"{name}: refused: its pickle names posix.system")
        assert not os.path.exists(marker), p
    assert_nothing_written(out)


@test
def checkpoint_of_plain_containers_loads():
    """What a training script saves beside the state dict (ints, floats, strings, booleans, None,
    nested dicts, lists and tuples, a 0-d tensor) loads through the restricted unpickler: the
    export equals stories260K.pt's."""
    ckpt = torch.load(PT, map_location="cpu")
    ckpt["extra"] = {"norm": "layernorm", "lr": 1e-3, "betas": (0.9, 0.95), "flags": [True, None],
                     "losses": [torch.tensor(1.5)], "step": 10**30}
    path = tmp("plain.pt")
    torch.save(ckpt, path)
    assert export_cli(path, "--out", tmp("plain.nllm"))[0] == 0
    assert export_cli(PT, "--out", tmp("pt.nllm"))[0] == 0
    assert open(tmp("plain.nllm"), "rb").read() == open(tmp("pt.nllm"), "rb").read()


@test
def export_help_documents_inputs_and_options():
    code, out, _ = export_cli("--help")
    assert code == 0
    for word in ["--out", "--dtype", "--seq-len", "--quiet", "llama2.c", "Hugging Face",
                 "model.safetensors.index.json", "pytorch_model.bin", "consolidated", "params.json",
                 "SentencePiece", "bf16", "q8_0", "--group-size", "--random", "110M"]:
        assert word in out, word


DTYPES_PROGRAM = os.environ.get("NORMLLAMA_DTYPES", "build/dtypes")


@test
def python_dtype_table_is_the_c_table():
    """nllm_format.DTYPES, which export.py writes and the tests read by, against run's own table
    as $NORMLLAMA_DTYPES (build/dtypes) prints it, one JSON object a line: the same names, header
    codes and group sizes, no row more or less on either side."""
    if not os.path.exists(DTYPES_PROGRAM):
        raise Skip(f"{DTYPES_PROGRAM} is not there: no C dtype table to compare with")
    p = subprocess.run([DTYPES_PROGRAM], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    theirs = {(d["name"], d["code"], tuple(d["group_sizes"]))
              for d in map(json.loads, filter(str.strip, p.stdout.splitlines()))}
    ours = {(d.name, d.code, d.group_sizes) for d in nllm_format.DTYPES.values()}
    assert ours == theirs, f"only in Python: {sorted(ours - theirs)}, only in C: " \
        f"{sorted(theirs - ours)}"


if __name__ == "__main__":
    sys.exit(run_tests(TESTS, TMP))
