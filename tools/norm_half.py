#!/usr/bin/env python3
"""The norms in 16-bit arithmetic (issue 28, item 4; docs/NORMS.md's "16-bit arithmetic"): RMSNorm
and LayerNorm computed in IEEE half (numpy's float16) or bfloat16, on the norm inputs of a real
model scaled by 1 to 1000, against float64; then the whole model with its norms so computed,
perplexity against float32.

Three ways to compute a norm from 16-bit inputs (FMT: fp16 or bf16):
    all16   inputs, squares, sums, mean, 1/sqrt and output in FMT (a kernel with no wider type);
            the sums pairwise (a tree, as a GPU's reductions run), each addition rounded to FMT
    pow16   squares (RMSNorm) or centered values and their squares (LayerNorm) stored in FMT, sums
            in float32 (PyTorch eager on half tensors: x.pow(2).mean(), the published nn.RMSNorm
            overflow in pow)
    sum32   FMT inputs, every product and sum in float32, the output rounded to FMT
numpy computes a float16 operation in float32 and rounds once; float32's 24 bits are at least
2 * 11 + 2, so the rounding is IEEE half's own (double rounding innocuous for + - * / sqrt);
bfloat16 (8 bits) is float32 rounded to nearest even on its top 16 bits, the same argument.

The norm inputs are captured by forward pre-hooks on nllm_model's norm modules over the first
chunk of TEXT; run computes the same model to within 2e-6 (tests/test_train.py). The error of a
row is max_i |out_i - ref_i| / max_i |ref_i|, ref the float64 norm of the float32 input (so the
16-bit storage of the input counts: about u = 2^-11 = 4.9e-4 for fp16, 2^-8 = 3.9e-3 for bf16); a
row is lost at an error above LOST_UNITS units u of its format (fp16 9.8e-3, bf16 7.8e-2) or
when not finite. An overflowed sum of squares gives inf, 1 / sqrt(inf) = 0, and a row of zeros:
lost (error 1), yet finite.

usage: /usr/bin/python3 tools/norm_half.py [--checkpoint models/stories260K.pt]
           [--tokenizer models/tok512.model] [--text data/stories.txt] [--json OUT]
           [--train-steps N [--train-out DIR]]

With --train-steps, train.py's twin recipe trains each norm N steps with its norms computed in
float32 and in bfloat16 (bf16_norm: PyTorch eager on bf16 tensors, forward and backward), the rest
of the model in float32: what this CPU allows of 16-bit training. (bf16 autocast would leave the
norms in float32: the residual stream stays float32 and norms are not on its lower-precision
list.)
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

LOST_UNITS = 20
UNIT = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
FP16_MAX = 65504.0
EPS = 1e-5
FORMATS = ("fp16", "bf16")
MODES = ("all16", "pow16", "sum32")
NORMS = ("rmsnorm", "layernorm")


def to_fmt(a, fmt):
    """a rounded to FMT, held as float32 (bf16) or float16 (fp16)."""
    if fmt == "fp16":
        return np.asarray(a, dtype=np.float32).astype(np.float16)
    bits = np.asarray(a, dtype=np.float32).view(np.uint32)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)  # to nearest, ties to even
    return np.where(finite, rounded & 0xFFFF0000, bits).astype(np.uint32).view(np.float32)


def tree_sum(a, fmt):
    """The sum over the last axis, pairwise, each addition rounded to FMT (zeros pad to 2^k)."""
    n = a.shape[-1]
    width = 1 << max(0, (n - 1).bit_length())
    a = np.concatenate([a, np.zeros(a.shape[:-1] + (width - n,), a.dtype)], -1)
    while a.shape[-1] > 1:
        half = a.shape[-1] // 2
        a = to_fmt(a[..., :half].astype(np.float32) + a[..., half:], fmt)
    return a[..., 0]


def sum32(a):
    """The sum over the last axis in float32 (numpy's pairwise summation)."""
    return np.sum(np.asarray(a, dtype=np.float32), -1, dtype=np.float32)


def norm16(x, weight, norm, fmt, mode, eps=EPS):
    """norm (rmsnorm, layernorm without bias) of the rows of x (float32) in FMT arithmetic of
    MODE (module docstring); float32 array of the FMT output."""
    def r(a):
        return to_fmt(a, fmt)

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        x16, w16, d = r(x), r(weight), x.shape[-1]
        if mode == "sum32":
            x32 = x16.astype(np.float32)
            if norm == "layernorm":
                x32 = x32 - sum32(x32)[..., None] / np.float32(d)
            ms = sum32(x32 * x32) / np.float32(d)
            inv = np.float32(1) / np.sqrt(ms + np.float32(eps))
            return r(w16.astype(np.float32) * (x32 * inv[..., None])).astype(np.float32)
        if mode == "all16":
            mean = lambda a: r(tree_sum(a, fmt) / np.float32(d))  # noqa: E731
        else:  # PyTorch's mean of a half tensor: a float32 sum, the mean rounded to half
            mean = lambda a: r(sum32(a) / np.float32(d))  # noqa: E731
        v = x16
        if norm == "layernorm":
            v = r(v.astype(np.float32) - mean(v)[..., None])
        ms = mean(r(v.astype(np.float32) * v))
        inv = r(np.float32(1) / r(np.sqrt(r(ms.astype(np.float32) + np.float32(eps)))))
        out = r(w16.astype(np.float32) * r(v.astype(np.float32) * inv[..., None]))
        return out.astype(np.float32)


def norm64(x, weight, norm, eps=EPS):
    """The float64 reference of norm16."""
    x = np.asarray(x, dtype=np.float64)
    if norm == "layernorm":
        x = x - x.mean(-1, keepdims=True)
    return weight * x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)


def row_errors(out, ref):
    """Each row's max |out - ref| / max |ref|; inf for a row with an inf or NaN."""
    err = np.abs(out.astype(np.float64) - ref).max(-1) / np.abs(ref).max(-1)
    return np.where(np.isfinite(out).all(-1), err, np.inf)


def overflow_scale_rmsnorm_all16(rms, d):
    """The scale past which an fp16 sum of squares of a row of this RMS overflows:
    d (s rms)^2 > 65504 (ignoring the rounding of the squares and of the sum)."""
    return math.sqrt(FP16_MAX / d) / rms


# ----------------------------------------------------------------------------
# The model: its norm inputs, and its perplexity with 16-bit norms


def load_model(path):
    """nllm_model.Transformer (float32) holding a llama2.c checkpoint (model_args and model)."""
    import torch

    import nllm_model
    from nllm_format import Config

    ck = torch.load(path, map_location="cpu")
    args = ck["model_args"]
    sd = {k.replace("_orig_mod.", ""): v for k, v in ck["model"].items()}
    hidden = sd["layers.0.feed_forward.w1.weight"].shape[0]
    c = Config(args["dim"], hidden, args["n_layers"], args["n_heads"], args["n_kv_heads"],
               args["vocab_size"], args["max_seq_len"], shared_classifier="output.weight" not in sd)
    model = nllm_model.Transformer(c)
    model.load_state_dict(sd, strict=False)  # the rope/mask buffers are not persistent
    return model.eval()


class Norm16(object):
    """Replaces each norm module's computation by norm16 (or the float64 reference when fmt is
    None) on its input times scale; RMSNorm's and LayerNorm's outputs do not depend on the scale
    but for eps, so that scale sweeps the magnitudes without changing the model."""

    def __init__(self, model):
        self.model = model

    def set(self, norm, fmt, mode, scale):
        import torch

        for m in self.model.norms():
            w = m.weight.detach().numpy()

            def forward(x, w=w):
                xs = x.detach().numpy().astype(np.float32) * np.float32(scale)
                out = norm64(xs, w, norm) if fmt is None else norm16(xs, w, norm, fmt, mode)
                return torch.from_numpy(np.asarray(out, dtype=np.float32))
            m.forward = forward


def chunks(ids, seq_len):
    """run --ppl's chunks: seq_len text tokens each, fed from BOS (1), each predicted once."""
    parts = [ids[s:s + seq_len] for s in range(0, len(ids), seq_len)]
    return [([1] + t[:-1], t) for t in parts]


def perplexity(model, parts):
    import torch
    import torch.nn.functional as F

    nll, n = 0.0, 0
    with torch.no_grad():
        for inputs, targets in parts:
            logits = model(torch.tensor([inputs]))[0].double()
            nll += F.cross_entropy(logits, torch.tensor(targets), reduction="sum").item()
            n += len(targets)
    return math.exp(nll / n) if math.isfinite(nll) else float("nan")


def capture(model, tokens):
    """Every norm input (rows of dim floats) of one forward pass over tokens, sites in order."""
    import torch

    rows = []
    hooks = [m.register_forward_pre_hook(lambda m, i: rows.append(i[0][0].detach().numpy()))
             for m in model.norms()]
    with torch.no_grad():
        model(torch.tensor([tokens]))
    for h in hooks:
        h.remove()
    return np.concatenate(rows).astype(np.float32)


# ----------------------------------------------------------------------------
# Training with the norms in bfloat16 (PyTorch 1.13 on the CPU has no float16 rsqrt)


def bf16_norm(module, norm):
    """module (nllm_model's RMSNorm or LayerNorm) computed on bfloat16 tensors, forward and
    backward: PyTorch eager on bf16 (squares and centered values in bf16, means accumulated in
    float32 and rounded to bf16), the output widened to float32 for the float32 model."""
    import torch

    def forward(x):
        v = x.to(torch.bfloat16)
        if norm == "layernorm":
            v = v - v.mean(-1, keepdim=True)
        out = module.weight.to(torch.bfloat16) * (v * torch.rsqrt((v * v).mean(-1, keepdim=True)
                                                                  + module.eps))
        if norm == "layernorm":
            out = out + module.bias.to(torch.bfloat16)
        return out.float()
    module.forward = forward


def train16(norm, fmt, steps, log):
    """train.py's twin recipe (seed 1, 8 windows of 256, lr 5e-3 after 100 steps of warmup,
    validation on 64 windows every 100 steps), the norms in fmt (float32 or bf16); the
    validation losses [(step, loss)] from its log."""
    import train as train_py

    a = train_py.parse_args(["--norm", norm, "--seed", "1", "--steps", str(steps),
                             "--batch-size", "8", "--seq-len", "256", "--lr", "0.005",
                             "--warmup", "100", "--eval-every", "100", "--eval-windows", "64",
                             "--threads", "1", "--log", log, "--quiet"])
    run = train_py.Run(a, 0, 1)
    if fmt == "bf16":
        for m in run.model.norms():
            bf16_norm(m, norm)
    run.run()
    records = [json.loads(line) for line in open(log)]
    evals = [(r["step"], r["val_loss"]) for r in records if r["kind"] == "eval"]
    last = [r["loss"] for r in records if r["kind"] == "train"][-10:]
    return evals, sum(last) / len(last)


def train_table(steps, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    print(f"\nTrained {steps} steps, norms in float32 or bfloat16 (train.py's recipe, seed 1):")
    print("| norm | norms in | validation loss at step 0 / 100 / ... | training loss, last 10 "
          "steps | s |\n|---|---|---|---|---|")
    result = {}
    for norm in NORMS:
        for fmt in ("float32", "bf16"):
            t0 = time.time()
            evals, last = train16(norm, fmt, steps, os.path.join(out_dir, f"{norm}-{fmt}.jsonl"))
            result[f"{norm}/{fmt}"] = {"evals": evals, "train_last10": last,
                                       "seconds": time.time() - t0}
            print(f"| {norm} | {fmt} | {' / '.join(f'{v:.3f}' for _, v in evals)} | {last:.3f} |"
                  f" {time.time() - t0:.0f} |", flush=True)
    return result


# ----------------------------------------------------------------------------
# The sweep


def sweep(x, weights, scales):
    """{(norm, fmt, mode): [(scale, max row error, share of rows not finite, share lost)]}."""
    out = {}
    for norm in NORMS:
        for fmt in FORMATS:
            for mode in MODES:
                rows = []
                for s in scales:
                    xs = x * np.float32(s)
                    got = norm16(xs, weights, norm, fmt, mode)
                    err = row_errors(got, norm64(xs, weights, norm))
                    rows.append((float(s), float(err.max()), float(np.mean(~np.isfinite(err))),
                                 float(np.mean(err > LOST_UNITS * UNIT[fmt]))))
                out[(norm, fmt, mode)] = rows
    return out


def first_scale(rows, index):
    """The first scale whose column index is positive (None: none in the sweep)."""
    return next((r[0] for r in rows if r[index] > 0), None)


def show(v):
    return "none to 1000" if v is None else f"{v:.3g}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default="models/stories260K.pt")
    p.add_argument("--tokenizer", default="models/tok512.model")
    p.add_argument("--text", default="data/stories.txt")
    p.add_argument("--json", help="write every number here")
    p.add_argument("--train-steps", type=int, default=0,
                   help="then train each norm this many steps with its norms in float32 and in "
                   "bf16 (needs data/cache/tinystories_*.txt)")
    p.add_argument("--train-out", default="build/norm_half", help="the trainings' logs")
    a = p.parse_args()
    import sentencepiece as spm
    import torch

    torch.set_num_threads(1)
    t0 = time.time()
    model = load_model(a.checkpoint)
    ids = spm.SentencePieceProcessor(model_file=a.tokenizer).encode(open(a.text).read())
    parts = chunks(ids, model.config.seq_len)
    x = capture(model, parts[0][0])
    d = x.shape[-1]
    rms = np.sqrt((x.astype(np.float64) ** 2).mean(-1))
    mean = x.astype(np.float64).mean(-1)
    shifted = x + rms[:, None].astype(np.float32)  # a mean as large as the spread
    ones = np.ones(d)
    scales = np.geomspace(1, 1000, 61)
    result = {"rows": int(x.shape[0]), "dim": d, "rms_max": float(rms.max()),
              "rms_median": float(np.median(rms)),
              "mean_over_rms": float(np.mean(np.abs(mean) / rms)),
              "predicted_overflow_scale": overflow_scale_rmsnorm_all16(float(rms.max()), d)}
    print(f"{x.shape[0]} norm inputs of dim {d} ({a.checkpoint}, {len(parts[0][0])} positions,"
          f" every site): RMS median {np.median(rms):.3f}, max {rms.max():.3f}; |mean|/RMS"
          f" {result['mean_over_rms']:.3f}; fp16 sum of squares predicted to overflow from scale"
          f" sqrt(65504/{d})/{rms.max():.3f} = {result['predicted_overflow_scale']:.3g}")
    print(f"\n| inputs | norm | format | mode | error at 1 | 10 | 100 | 1000 | first scale with"
          f" an output inf/NaN | first scale with a row lost (> {LOST_UNITS} u) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    result["sweeps"] = {}
    for label, rows_in in (("real", x), ("real + RMS (mean = spread)", shifted)):
        res = sweep(rows_in, ones, scales)
        for (norm, fmt, mode), rows in res.items():
            at = {round(r[0]): r[1] for r in rows}
            cells = " | ".join("inf" if not math.isfinite(at[s]) else f"{at[s]:.1e}"
                               for s in (1, 10, 100, 1000))
            print(f"| {label} | {norm} | {fmt} | {mode} | {cells} | {show(first_scale(rows, 2))}"
                  f" | {show(first_scale(rows, 3))} |")
            result["sweeps"][f"{label}/{norm}/{fmt}/{mode}"] = rows

    print("\nWhole model, norms computed as said on their inputs times a scale, perplexity of"
          f" {a.text} ({len(ids)} tokens, chunks of {model.config.seq_len}):")
    swap = Norm16(model)
    model_scales = (1, 10, 30, 100, 1000)
    print("| norm | format | mode | " + " | ".join(f"scale {s}" for s in model_scales) + " |")
    print("|---|---|---|" + "---|" * len(model_scales))
    result["model"] = {}
    for norm in NORMS:
        swap.set(norm, None, None, 1)
        base = perplexity(model, parts)
        print(f"| {norm} | float64 | | {base:.4f} (any scale) |" + " |" * (len(model_scales) - 1))
        result["model"][f"{norm}/float64"] = base
        for fmt in FORMATS:
            for mode in MODES:
                ppls = []
                for s in model_scales:
                    swap.set(norm, fmt, mode, s)
                    ppls.append(perplexity(model, parts))
                result["model"][f"{norm}/{fmt}/{mode}"] = list(zip(model_scales, ppls))
                print(f"| {norm} | {fmt} | {mode} | " + " | ".join(f"{v:.4f}" for v in ppls) + " |")
    if a.train_steps:
        result["train"] = train_table(a.train_steps, a.train_out)
    print(f"\n{time.time() - t0:.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
