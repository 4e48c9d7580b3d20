#!/usr/bin/env python3
"""run against a float64 forward pass (tests/forward_f64.py) of the weights that an independent
reader (tests/decode_layouts.py, from docs/FORMAT.md) decodes from each file: every layout and
dtype run reads, logit by logit at every position of a text, within a tolerance derived from run's
arithmetic (tests/error_model.py: float32 rounding, q8_0's int16 and q4_0's int8 inputs, bf16's
rounded weights), not set around a past measurement; and the texts and statistics run prints
(the LayerNorm story, --compare's first difference and norm-site statistics, a hand-built file
with every optional tensor) against the same forward pass. Run from the repository root with
/usr/bin/python3 (make test does); the program under test is $NORMLLAMA_RUN (default ./run).
Prints one line per test and "N passed, M failed"."""
import functools
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import export  # noqa: E402
import error_model  # noqa: E402  (tests/, the script's directory)
import forward_f64  # noqa: E402
from decode_layouts import read_model  # noqa: E402
from harness import Skip, collector, run_tests  # noqa: E402

RUN = os.environ.get("NORMLLAMA_RUN", "./run")
PT, LEGACY = "models/stories260K.pt", "models/stories260K.bin"
V1, V2 = "models/stories260K_ak42_v1.bin", "models/stories260K_ak42_v2_q8.bin"
TOK_BIN = "models/tok512.bin"
SP = spm.SentencePieceProcessor(model_file="models/tok512.model")
TMP = tempfile.mkdtemp(prefix="normllama-f64-")
K = 16  # draws of the error model per estimate of sigma (error_model.py)


def text_of(tokens):
    """The longest start of data/stories.txt, cut before a space, of at most `tokens` tokens."""
    text = open("data/stories.txt").read()
    end = len(text)
    while len(SP.encode(text[:end])) > tokens:
        end = text.rfind(" ", 0, end)
    return text[:end]


TEXT = text_of(255)  # with BOS, 256 positions: half of stories260K's kv cache
IDS = [1] + SP.encode(TEXT)

TESTS = []
test = collector(TESTS)


def tmp(name):
    return os.path.join(TMP, name)


def run(*args):
    p = subprocess.run([RUN, *args], capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout, p.stderr


def run_logits(model, text=TEXT, extra=()):
    """run's logits (positions, 512) for BOS + text, every position teacher-forced."""
    prompt, out = tmp("prompt.txt"), tmp("logits.f32")
    open(prompt, "w").write(text)
    n = str(1 + len(SP.encode(text)))
    code, _, err = run(model, "-z", TOK_BIN, "-t", "0", "-n", n, "--logits", out, "-f", prompt,
                       *extra)
    assert code == 0, err
    return np.fromfile(out, np.float32).reshape(-1, 512).astype(np.float64)


@functools.lru_cache(maxsize=None)
def stories(dtype, group_size=32):
    """stories260K.pt exported by export.py in dtype."""
    path = tmp(f"stories260K-{dtype}-{group_size}.nllm")
    assert export.main([PT, "--out", path, "--dtype", dtype, "--quiet"] +
                       (["--group-size", str(group_size)] if dtype == "q8_0" else [])) == 0
    return path


def require(path):
    """The llama2.c version 1 and 2 files come from the mirror only (models/manifest.tsv)."""
    if not os.path.exists(path):
        raise Skip(f"{path} is not there (mirror only: no public address)")


# ----------------------------------------------------------------------------
# The error model's sigma for each kind of arithmetic, over IDS


def v2_inputs(name, cols):
    """FORMAT.md: a version 2 matrix whose cols is a multiple of group_size (64 in stories260K's
    file) runs as q8_0, any other (w2, 172 columns) as float32."""
    return "int16" if cols % 64 == 0 else None


@functools.lru_cache(maxsize=None)
def rounding_sigma():
    """Each logit's standard deviation (positions, vocab) of float32's rounding errors over IDS,
    drawn on the f32 weights: those of bf16, f16 and quantized weights differ from them by 2^-8
    of themselves at most, and their rounding errors as little."""
    h, t, _ = read_model(stories("f32"))
    return error_model.sigma(error_model.draws(h, t, IDS, K))


@functools.lru_cache(maxsize=None)
def sigma(path, inputs=None):
    """Each logit's standard deviation of run's error on the file at path over IDS: float32's
    rounding, and the errors of the quantized inputs drawn on the file's own weights,
    independent (their variances add)."""
    if inputs is None:
        return rounding_sigma()
    h, t, _ = read_model(path)
    quantized = error_model.sigma(error_model.draws(h, t, IDS, K, rounding=False, inputs=inputs))
    return np.sqrt(rounding_sigma() ** 2 + quantized ** 2)


def compare(label, path, sig, order=None):
    """run's logits on the file at path against the float64 forward pass of what it holds, each
    within the derived bound (sig[:, order] for a classifier in another row order)."""
    h, t, _ = read_model(path)
    want = forward_f64.logits(h, t, IDS)
    got = run_logits(path)
    assert got.shape == want.shape == (len(IDS), 512), (label, got.shape, want.shape)
    error_model.check(label, got, want, sig if order is None else sig[:, order], K)


# ----------------------------------------------------------------------------
# Every layout and dtype


@test
def version_1_file_and_f32_export_decode_to_the_legacy_tensors():
    """The reader against llama2.c's own files of one checkpoint: the version 1 file holds the
    legacy file's float32 tensors exactly, and so does export.py's f32 file of stories260K.pt."""
    require(V1)
    _, legacy, _ = read_model(LEGACY)
    for path in (V1, stories("f32")):
        _, t, _ = read_model(path)
        assert set(t) == set(legacy), path
        for name in legacy:
            assert np.array_equal(t[name], legacy[name]), (path, name)


@test
def version_2_file_decodes_to_the_legacy_weights_within_half_a_step():
    """llama2.c's int8 export of the same checkpoint: each weight within half a step of the
    legacy file's, the step being the scale of its group of 64 consecutive values of the
    flattened tensor (groups that straddle w2's rows of 172; the embedding one tensor, the others
    one per layer), the largest |value| of each group 127 steps; the norms exact."""
    require(V2)
    _, legacy, _ = read_model(LEGACY)
    h, v2, _ = read_model(V2)
    assert h["group_size"] == 64 and set(v2) == set(legacy)
    for name in legacy:
        if name.endswith("_norm"):
            assert np.array_equal(v2[name], legacy[name]), name
            continue
        pieces = 1 if legacy[name].ndim == 2 else len(legacy[name])
        exact = legacy[name].reshape(pieces, -1, 64)
        step = np.abs(exact).max(axis=2, keepdims=True) / 127
        got = v2[name].reshape(exact.shape)
        assert np.all(np.abs(got - exact) <= step * 0.5000001), name
        assert np.allclose(np.abs(got).max(axis=2, keepdims=True), 127 * step, rtol=1e-6), name


def with_classifier(path, out, header, classifier):
    """A copy of the llama2.c file at path with a separate classifier appended at its end (the
    classifier's bytes) and its header changed (offset -> bytes)."""
    data = bytearray(open(path, "rb").read())
    for offset, value in header.items():
        data[offset:offset + len(value)] = value
    open(out, "wb").write(bytes(data) + classifier)
    return out


REVERSED = np.arange(511, -1, -1)  # the separate classifiers' order of the embedding's rows


def reversed_classifier(path):
    """The float32 bytes of the embedding of the file at path, its rows in reverse order: a
    separate classifier whose logits are the shared one's reversed, so that a reader that took
    the embedding, or a classifier from elsewhere in the file, fails."""
    return read_model(path)[1]["token_embedding"][REVERSED].astype("<f4").tobytes()


@test
def llama2c_legacy_logits_match_float64_with_shared_and_separate_classifier():
    """stories260K.bin, and a copy with vocab_size negated and a separate classifier at the end."""
    separate = with_classifier(LEGACY, tmp("legacy-separate.bin"), {20: struct.pack("<i", -512)},
                               reversed_classifier(LEGACY))
    assert read_model(separate)[0]["shared"] == 0
    compare("legacy", LEGACY, sigma(stories("f32")))
    compare("legacy, separate", separate, sigma(stories("f32")), REVERSED)


@test
def llama2c_version_1_logits_match_float64_with_shared_and_separate_classifier():
    """llama2.c's version 1 file, and a copy with the shared byte 0 and a separate classifier at
    the end."""
    require(V1)
    separate = with_classifier(V1, tmp("v1-separate.bin"), {36: b"\0"}, reversed_classifier(V1))
    assert read_model(separate)[0]["shared"] == 0
    compare("version 1", V1, sigma(stories("f32")))
    compare("version 1, separate", separate, sigma(stories("f32")), REVERSED)


@test
def nllm_f32_bf16_and_f16_logits_match_float64():
    """Float32 arithmetic on each file's weights: the error is float32's rounding alone."""
    sig = sigma(stories("f32"))
    for dtype in ("f32", "bf16", "f16"):
        compare(dtype, stories(dtype), sig)


@test
def nllm_q8_0_logits_match_float64_with_int16_inputs():
    """Groups of 32 and of 64 (w2's rows of 172: groups of 32 x 5 + 12, 64 x 2 + 44)."""
    for group_size in (32, 64):
        path = stories("q8_0", group_size)
        compare(f"q8_0/{group_size}", path, sigma(path, error_model.int16_inputs))


@test
def nllm_q4_0_logits_match_float64_with_int8_inputs():
    path = stories("q4_0")
    compare("q4_0", path, sigma(path, error_model.int8_inputs))


@test
def llama2c_version_2_logits_match_float64_with_shared_and_separate_classifier():
    """llama2.c's int8 file: groups of 64 straddle w2's rows (run dequantizes w2 to float32 and
    runs the others as q8_0), with its shared classifier and in a copy with the shared byte 0 and
    a separate one at the end: the embedding's piece (its int8 rows, then their scales: one group
    of 64 a row) with the rows in reverse order."""
    require(V2)
    sig = sigma(V2, v2_inputs)
    h, _, offsets = read_model(V2)
    data = open(V2, "rb").read()
    start = offsets["token_embedding"]
    values = np.frombuffer(data, "i1", 512 * 64, start).reshape(512, 64)
    scales = np.frombuffer(data, "<f4", 512, start + 512 * 64)
    piece = values[REVERSED].tobytes() + scales[REVERSED].tobytes()
    separate = with_classifier(V2, tmp("v2-separate.bin"), {36: b"\0"}, piece)
    assert read_model(separate)[0]["shared"] == 0
    compare("version 2", V2, sig)
    compare("version 2, separate", separate, sig, REVERSED)


@test
def a_wrong_scale_on_w2s_short_last_group_fails_the_comparison():
    """The comparison's power where a loader is likeliest to slip: q4_0 (the loosest tolerance),
    w2's rows of 172 = 5 x 32 + 12, the short last group given the fifth group's scale, as a
    loader that took the wrong group would. run on such a file, against the float64 forward pass
    of the right weights, must be far outside the bound."""
    path = stories("q4_0")
    h, t, offsets = read_model(path)
    data = bytearray(open(path, "rb").read())
    start = offsets["w2.scales"]
    scales = np.frombuffer(data, "<f4", 5 * 64 * 6, start).reshape(-1, 6).copy()
    scales[:, 5] = scales[:, 4]
    data[start:start + scales.nbytes] = scales.tobytes()
    wrong = tmp("q4_0-wrong-w2-scale.nllm")
    open(wrong, "wb").write(data)
    want = forward_f64.logits(h, t, IDS)
    ratio = np.abs(run_logits(wrong) - want) / sigma(path, error_model.int8_inputs)
    limit = error_model.bound(K, ratio.size)
    print(f"  q4_0 with w2's last group on the wrong scale: largest error {ratio.max():.0f} "
          f"sigma, {(ratio > limit).mean():.0%} of the logits past the bound {limit:.2f}")
    assert ratio.max() > 3 * limit, ratio.max()


# ----------------------------------------------------------------------------
# bf16's rounding, on accuracy


@test
def bf16_export_rounds_each_weight_to_nearest_within_the_derived_error():
    """export.py's bf16 file against the float64 forward pass of the f32 checkpoint: the error is
    the weights' rounding to bf16 (and float32's arithmetic). Rounding to nearest moves each
    weight uniformly within half a bf16 ulp; the forward pass with the weights so moved at
    random, K times, gives each logit's sigma and the mean |error| the model predicts, whose
    spread over the draws bounds run's (one more draw: Student's t with K - 1 degrees of
    freedom, one-sided 1e-3), float32's rounding adding at most its own sigma. Measured: mean
    |error| 0.0162 against the bound 0.0170 (the model's mean 0.0155); truncation, export.py's
    rounding before, 0.0239, which fails it (its weights all move toward zero)."""
    h, t, _ = read_model(stories("f32"))
    exact = forward_f64.logits(h, t, IDS)
    rng = np.random.default_rng(1)
    d = np.array([forward_f64.logits(h, error_model.bf16_weights(t, rng), IDS) - exact
                  for _ in range(K)])
    sig = np.sqrt(error_model.sigma(d) ** 2 + rounding_sigma() ** 2)
    got = run_logits(stories("bf16"))
    means = np.abs(d).mean(axis=(1, 2))
    spread = error_model.bound(K - 1, 1, 2e-3) * means.std(ddof=1) * np.sqrt(1 + 1 / K)
    mean_bound = means.mean() + spread + rounding_sigma().mean()
    mean = np.abs(got - exact).mean()
    print(f"  bf16: mean |logit - float64 of f32| {mean:.4f} (model {means.mean():.4f}) against "
          f"the derived bound {mean_bound:.4f}")
    assert mean <= mean_bound, (mean, mean_bound)
    error_model.check("bf16 against f32", got, exact, sig, K)


# ----------------------------------------------------------------------------
# Texts and statistics run prints


def greedy(norm, steps, prompt="Once upon a time"):
    """run's greedy continuation of prompt on stories260K.bin under norm (`steps` positions, as
    -n), checked to be the float64 forward pass's own: at every generated position, the float64
    logits' argmax (given the tokens before) is run's token. Returns (run's stdout, the tokens
    from BOS on, n_prompt)."""
    out = tmp("greedy.f32")
    code, text, err = run(LEGACY, "-z", TOK_BIN, "-t", "0", "-n", str(steps), f"--norm={norm}",
                          "--threads=1", "--logits", out, prompt)
    assert code == 0, err
    logits = np.fromfile(out, np.float32).reshape(-1, 512)
    tokens = [1] + SP.encode(prompt)
    n_prompt = len(tokens)
    tokens += [int(logits[p].argmax()) for p in range(n_prompt - 1, len(logits))]
    h, t, _ = read_model(LEGACY)
    want = forward_f64.logits(dict(h, norm=int(norm == "layernorm")), t, tokens[:-1])
    top2 = np.sort(want[n_prompt - 1:], axis=1)[:, -2:]
    for p in range(n_prompt - 1, len(tokens) - 1):
        assert want[p].argmax() == tokens[p + 1], (norm, p, want[p].argmax(), tokens[p + 1])
    print(f"  {norm}: {len(tokens) - n_prompt} generated tokens, each the float64 forward's "
          f"argmax, by {(top2[:, 1] - top2[:, 0]).min():.4f} at the least")
    return text, tokens, n_prompt


@test
def layernorm_story_is_the_float64_forward_passes_greedy_text():
    """run --norm=layernorm's greedy story (tests/test_run.c's layernorm_changes_the_text): the
    float64 forward's greedy tokens under LayerNorm (no biases: a llama2.c file), as text."""
    text, tokens, _ = greedy("layernorm", 256)
    assert text == SP.decode(tokens[1:]) + "\n", text
    assert text != open("tests/fixtures/stories260K_greedy_once_upon_a_time.txt").read()


def piece(token):
    return SP.id_to_piece(token).replace("\u2581", " ")


@test
def compare_first_difference_is_where_the_float64_greedy_texts_part():
    """run --compare's "first difference" line (tests/test_run.c's compare_shows_both_greedy_texts)
    from the float64 forward's greedy texts under RMSNorm and LayerNorm: the first position where
    their tokens differ, and each one's piece."""
    _, a, n_prompt = greedy("rmsnorm", 100)
    _, b, _ = greedy("layernorm", 100)
    split = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    want = (f"first difference at position {split} (continuation token {split - n_prompt + 1}): "
            f"A '{piece(a[split])}', B '{piece(b[split])}'")
    code, out, err = run(LEGACY, "-t", "0", "-n", "100", "--threads=1", "--compare",
                         "Once upon a time")
    assert code == 0, err
    assert want in out.splitlines(), (want, out)
    print(f"  {want}")


@test
def compare_norm_site_statistics_match_float64():
    """run --compare --json's statistics of every norm call site's input (the average over the
    teacher-forced positions of A's text of mean(x), sqrt(mean(x^2)) and their ratio, under each
    norm; tests/test_eval.c checks the first site only) against the float64 forward pass's norm
    inputs along the same tokens: within the derived bound of float32's rounding (K draws of
    the error model) plus half a unit in the sixth digit that run prints."""
    code, out, err = run(LEGACY, "-z", TOK_BIN, "-t", "0", "-n", "24", "--threads=1",
                         "--compare", "--json", "Once upon a time")
    assert code == 0, err
    report = json.loads(out)
    tokens = [1] + SP.encode(report["texts"][0])
    assert len(tokens) == len(report["positions"]), (len(tokens), len(report["positions"]))
    h, t, _ = read_model(LEGACY)

    def statistics(norm, a=forward_f64.EXACT):
        sites = []
        forward_f64.logits(dict(h, norm=norm), t, tokens, a, sites)
        x = np.array(sites)  # (sites, positions, dim)
        mean, rms = x.mean(axis=2), np.sqrt((x * x).mean(axis=2))
        return np.stack([mean, rms, np.abs(mean) / rms]).mean(axis=2)  # (3, sites)

    rng = np.random.default_rng(2)
    worst = 0
    for key, norm in (("a", 0), ("b", 1)):
        exact = statistics(norm)
        sig = error_model.sigma([statistics(norm, error_model.Draw(rng)) - exact
                                 for _ in range(K)])
        got = np.array([[site[key][f] for site in report["sites"]]
                        for f in ("mean", "rms", "mean_over_rms")])
        printed = 0.5 * 10.0 ** (np.floor(np.log10(np.abs(got))) - 5)
        limit = error_model.bound(K, got.size * 2)
        excess = np.maximum(np.abs(got - exact) - printed, 0)  # the first site's sigma is 0
        worst = max(worst, (excess / np.where(sig > 0, sig, 1)).max())
        assert np.all(excess <= limit * sig), (key, limit, got, exact, sig)
    print(f"  {len(report['sites'])} sites x 3 statistics x 2 norms: largest error beyond the "
          f"printing's {worst:.2f} sigma against the derived bound {limit:.2f}")


def small_model(norm, bias):
    """tests/test_format.c's small_model: dim 12, hidden_dim 20, 2 layers, 2 heads of 6, 1 kv
    head, vocab 512, seq_len 32, a separate classifier, trained `norm` with biases if `bias`;
    every tensor 64-aligned, value i of a tensor of n values 0.05 * ((7 i + n) % 13) - 0.3 in
    float32."""
    header = struct.pack("<II7iff6I", 0x4D4C4C4E, 1, 12, 20, 2, 2, 1, 512, 32, 10000.0, 1e-5,
                         norm, bias, 0, 0, 64, 0)
    data = bytearray(header + bytes(256 - len(header)))
    sizes = [512 * 12, 2 * 12] + [2 * 12] * bias + [2 * 144, 2 * 72, 2 * 72, 2 * 144, 2 * 12] + \
        [2 * 12] * bias + [2 * 240] * 3 + [12] + [12] * bias + [512 * 12]
    for n in sizes:
        data += bytes(-len(data) % 64)
        k = ((np.arange(n) * 7 + n) % 13).astype(np.float32)
        data += (np.float32(0.05) * k - np.float32(0.3)).astype("<f4").tobytes()
    return bytes(data)


@test
def hand_built_file_with_every_optional_tensor_matches_float64():
    """tests/test_format.c's hand-built files (small_model_loads_and_runs and
    layernorm_trained_model_defaults_to_layernorm check that they run): the float32 one with a
    separate classifier; the one trained with LayerNorm and norm biases, under its default norm
    (LayerNorm with the biases) and under --norm=rmsnorm (without them); every position of a
    31-token text, within the derived bound."""
    text = text_of(31)
    ids = [1] + SP.encode(text)
    for norm, bias, flag in ((0, 0, ()), (1, 1, ()), (1, 1, ("--norm=rmsnorm",))):
        path = tmp(f"small-{norm}-{bias}.nllm")
        open(path, "wb").write(small_model(norm, bias))
        h, t, _ = read_model(path)
        assert h["shared"] == 0 and h["norm_bias"] == bias and "wcls" in t
        if flag:  # rmsnorm ignores the biases
            h = dict(h, norm=0)
            t = {k: v for k, v in t.items() if not k.endswith("_bias")}
        want = forward_f64.logits(h, t, ids)
        sig = error_model.sigma(error_model.draws(h, t, ids, K))
        got = run_logits(path, text, extra=flag)
        ratio = np.abs(got - want) / sig
        limit = error_model.bound(K, ratio.size)
        print(f"  norm {norm}, bias {bias} {' '.join(flag)}: max |logit - float64| "
              f"{np.abs(got - want).max():.1e} (logits up to {np.abs(want).max():.1f}); "
              f"largest error {ratio.max():.2f} sigma against the derived bound {limit:.2f}")
        assert ratio.max() <= limit, (norm, bias, flag, ratio.max(), limit)


if __name__ == "__main__":
    sys.exit(run_tests(TESTS, TMP))
