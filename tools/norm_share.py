#!/usr/bin/env python3
"""The norms' share of the time, as a curve of the shape (issue 28, item 5; docs/NORMS.md's "15%
as a curve"): of a training step of nllm_model's LLaMA-shaped model (PyTorch eager, one thread,
random weights) at widths 64 to 2048 and 256 or 1024 positions, and of run's inference
(`run --profile`) on export.py's random 15M, 110M and 1.1B shapes.

Training: n_layers 2, batch 1, vocab 512 (the study's tokenizer), head_size 64 (n_heads =
n_kv_heads = dim / 64, at least 1), hidden_dim by LLaMA's rule; a step is forward, backward and
AdamW's update, as train.py's; the norms are timed by train.py's NormTimer (hooks on the norm
modules, the study's method, on the process's CPU time), each shape's share that of the median
of STEPS timed steps after WARMUP. Three
norms: nllm_model's eager RMSNorm and LayerNorm, and LayerNorm as PyTorch's fused F.layer_norm
(one kernel each way; PyTorch 1.13 has no fused RMSNorm).

Inference: `run MODEL -n N -t 0 --threads=1 --profile`, the share the "norms" line's of the wall
clock, for each norm of --norms.

usage: /usr/bin/python3 tools/norm_share.py [--widths 64,128,...] [--seq-lens 256,1024]
           [--steps 3] [--train-json EARLIER] [--models build/norm_share/15M.nllm ...]
           [--json OUT]
(tools/plot_norm_share.py draws the JSON.)
"""
import argparse
import json
import os

# one thread for every library, before torch loads them (the shares are of one core's work)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import re
import subprocess
import sys
import time

# the repository's root, for nllm_model, nllm_format and train
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WIDTHS = (64, 128, 256, 512, 1024, 2048)
SEQ_LENS = (256, 1024)
NORMS = ("rmsnorm", "layernorm", "layernorm_fused")
# the process's CPU time: one thread computes (torch.set_num_threads(1); autograd runs CPU work on
# the calling thread), and the time other jobs take the core from it is not counted
CLOCK = time.process_time


def llama_hidden_dim(dim, multiple_of=32):
    """LLaMA's SwiGLU width: 2/3 of 4 dim, rounded up to a multiple of multiple_of (Meta's
    model.py: 4096 with multiple_of 256 gives 11008)."""
    hidden = int(2 * 4 * dim / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def profile_share(text):
    """(norms' ms, wall clock ms, share) from run --profile's table."""
    norms = re.search(r"^\s*norms\s+([0-9.]+)\s", text, re.M)
    wall = re.search(r"^\s*wall clock\s+([0-9.]+)\s", text, re.M)
    if not norms or not wall:
        raise ValueError("no norms or wall clock line in run --profile's output")
    n, w = float(norms.group(1)), float(wall.group(1))
    return n, w, n / w


def fused_layernorm(module):
    """module (nllm_model.LayerNorm) computed by F.layer_norm, one fused kernel each way."""
    import torch.nn.functional as F

    module.forward = lambda x: F.layer_norm(x, x.shape[-1:], module.weight, module.bias,
                                            module.eps)
    return module


def train_share(dim, seq_len, norm, warmup, timed, n_layers=2):
    """(norms' seconds, step seconds) of the step of median time among `timed` training steps
    after `warmup` (the machine is shared: a step another job slowed is not the median)."""
    import torch

    import nllm_model
    import train as train_py
    from nllm_format import Config

    torch.manual_seed(0)
    heads = max(1, dim // 64)
    c = Config(dim, llama_hidden_dim(dim), n_layers, heads, heads, 512, seq_len,
               norm="layernorm" if norm == "layernorm_fused" else norm, shared_classifier=True)
    model = nllm_model.Transformer(c)
    if norm == "layernorm_fused":
        for m in model.norms():
            fused_layernorm(m)
    timer = train_py.NormTimer(model, CLOCK)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 512, (1, seq_len + 1))
    steps = []
    for step in range(warmup + timed):
        timer.seconds, timer.on = 0.0, step >= warmup
        t0 = CLOCK()
        _, loss = model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= warmup:
            steps.append((timer.seconds, CLOCK() - t0))
    return median_step(steps)


def median_step(steps):
    """The (norm seconds, step seconds) pair of the step of median step seconds (the lower of
    the two middle ones for an even count)."""
    ordered = sorted(steps, key=lambda s: s[1])
    return ordered[(len(ordered) - 1) // 2]


def inference_share(run, model, norm, n):
    p = subprocess.run([run, model, "-n", str(n), "-t", "0", "--threads=1", "--profile",
                        f"--norm={norm}", "Once upon a time"], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"{run} {model}: {p.stderr.strip()}")
    return profile_share(p.stdout + p.stderr)


def ints(text):
    return [int(v) for v in text.split(",") if v]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--widths", type=ints, default=list(WIDTHS))
    p.add_argument("--seq-lens", type=ints, default=list(SEQ_LENS))
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=3, help="timed steps per shape")
    p.add_argument("--models", nargs="*", default=[], help="model files for run --profile")
    p.add_argument("--train-json", help="the training rows of an earlier --json, not measured")
    p.add_argument("--tokens", type=int, default=64, help="positions of each run --profile")
    p.add_argument("--run", default="./run")
    p.add_argument("--json")
    a = p.parse_args()
    import torch

    torch.set_num_threads(1)
    result = {"train": [], "inference": []}
    if a.train_json:
        with open(a.train_json) as f:
            result["train"] = json.load(f)["train"]
        a.seq_lens = []
    print("| dim | hidden_dim | positions | " + " | ".join(f"{n} share" for n in NORMS)
          + " | step s (rmsnorm) |")
    print("|---|---|---|" + "---|" * (len(NORMS) + 1))
    for seq_len in a.seq_lens:
        for dim in a.widths:
            cells, first = [], None
            for norm in NORMS:
                norm_s, step_s = train_share(dim, seq_len, norm, a.warmup, a.steps)
                result["train"].append({"dim": dim, "seq_len": seq_len, "norm": norm,
                                        "norm_s": norm_s, "step_s": step_s,
                                        "share": norm_s / step_s})
                cells.append(f"{100 * norm_s / step_s:.1f}%")
                first = first or step_s
            print(f"| {dim} | {llama_hidden_dim(dim)} | {seq_len} | {' | '.join(cells)} |"
                  f" {first:.3f} |", flush=True)
    models = a.models
    if models:
        print("\n| model | dim | norm | norms ms | wall clock ms | share |")
        print("|---|---|---|---|---|---|")
    for model in models:
        info = subprocess.run([a.run, model, "--info"], capture_output=True, text=True).stdout
        dim = int(re.search(r"\bdim\D*(\d+)", info).group(1)) if "dim" in info else 0
        for norm in ("rmsnorm", "layernorm"):
            n, w, share = inference_share(a.run, model, norm, a.tokens)
            result["inference"].append({"model": model, "dim": dim, "norm": norm, "norms_ms": n,
                                        "wall_ms": w, "share": share})
            print(f"| {os.path.basename(model)} | {dim} | {norm} | {n:.3f} | {w:.1f} |"
                  f" {100 * share:.2f}% |", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
