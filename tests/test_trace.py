#!/usr/bin/env python3
"""run --trace against hooks in the PyTorch model: stories260K.bin read here (llama2.c's legacy
layout) into nllm_model's Transformer in float64, forward hooks on the embedding, each norm (input
and output), wq, wk, wv, the attention block, w1 and each block, and every number `run --trace POS
--json` prints recomputed from what the hooks saw: means and RMS, the attention weights (softmax of
the hooked q and k after RoPE, scaled by 1 / sqrt(head_size)), the gate's share of positive units
and the logits' top 5. Run from the repository root with /usr/bin/python3 (make test does); the
program under test is $NORMLLAMA_RUN (default ./run). Prints one line per test and the counts.

Tolerances, measured (run's plain pass computes in float32, the hooks in float64; positions 0 and
7): the largest relative difference of a mean or RMS over the steps is 1.13e-5 (bound 1e-4), of an
attention weight 2.0e-6 absolute (bound 1e-5), of a logit 3.3e-6 (bound 1e-4); the gate's share is a count of
positive values, equal unless one sits within float32 rounding of 0 (none does at these positions:
the smallest |gate| is checked to be above 1e-4)."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nllm_model  # noqa: E402
from harness import collector, run_tests  # noqa: E402

RUN = os.environ.get("NORMLLAMA_RUN", "./run")
MODEL = "models/stories260K.bin"
PROMPT = "Once upon a time, Lily saw a big dog."
TESTS = []
test = collector(TESTS)


def read_legacy(path):
    """llama2.c's legacy layout: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
    vocab_size, negative when the classifier is not shared, seq_len), then the float32 tensors in
    its order. Returns (our tensor names -> arrays, per-layer ones stacked, the config dict)."""
    data = open(path, "rb").read()
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = np.frombuffer(data, np.int32, 7)
    shared, vocab = vocab > 0, abs(vocab)
    head_size, kv_dim = dim // heads, kv_heads * dim // heads
    values = np.frombuffer(data, np.float32, offset=28)
    w, off = {}, 0
    shapes = [("token_embedding", (vocab, dim)), ("attn_norm", (layers, dim)),
              ("wq", (layers, dim, dim)), ("wk", (layers, kv_dim, dim)),
              ("wv", (layers, kv_dim, dim)), ("wo", (layers, dim, dim)),
              ("ffn_norm", (layers, dim)), ("w1", (layers, hidden, dim)),
              ("w2", (layers, dim, hidden)), ("w3", (layers, hidden, dim)),
              ("final_norm", (dim,)), ("freq_cis", (seq_len, head_size))]
    if not shared:
        shapes.append(("wcls", (vocab, dim)))
    for name, shape in shapes:
        n = int(np.prod(shape))
        w[name] = values[off:off + n].reshape(shape).astype(np.float64)
        off += n
    del w["freq_cis"]
    c = {"dim": int(dim), "n_heads": int(heads), "n_kv_heads": int(kv_heads),
         "n_layers": int(layers), "norm_eps": 1e-5, "rope_theta": 10000.0, "seq_len": int(seq_len)}
    return w, c


def hooked(model, tokens):
    """Runs tokens through model with forward hooks; returns (what they saw by name, logits)."""
    seen = {}

    def keep(name, inputs=False):
        def hook(module, args, out):
            seen[name] = (args[0] if inputs else out)[0].detach()
            if inputs:
                seen[name + " out"] = out[0].detach()
        return hook

    model.tok_embeddings.register_forward_hook(keep("embedding"))
    for l, layer in enumerate(model.layers):
        layer.attention_norm.register_forward_hook(keep(f"{l} attention norm", inputs=True))
        layer.ffn_norm.register_forward_hook(keep(f"{l} ffn norm", inputs=True))
        for name in ("wq", "wk", "wv"):
            getattr(layer.attention, name).register_forward_hook(keep(f"{l} {name}"))
        layer.attention.register_forward_hook(keep(f"{l} attention out"))
        layer.feed_forward.w1.register_forward_hook(keep(f"{l} gate"))
        layer.register_forward_hook(keep(f"{l} block"))
    model.norm.register_forward_hook(keep("final norm", inputs=True))
    with torch.no_grad():
        logits = model(torch.tensor([tokens]))[0]
    return seen, logits


def stats(x):
    return float(x.mean()), float(x.pow(2).mean().sqrt())


def expected_steps(seen, logits, model, pos):
    """The trace's steps at pos as the hooks give them, in run's order."""
    c = model.config
    hd = c.head_size
    steps = [{"step": "embedding", "mean": stats(seen["embedding"][pos])[0],
              "rms": stats(seen["embedding"][pos])[1]}]
    angles = model.angles[:pos + 1]
    for l in range(c.n_layers):
        x_in = seen[f"{l} attention norm"][pos]
        steps.append({"step": "attention norm", "layer": l, "input_mean": stats(x_in)[0],
                      "input_rms": stats(x_in)[1],
                      "output_rms": stats(seen[f"{l} attention norm out"][pos])[1]})
        for name in "qkv":
            steps.append({"step": name, "layer": l, "rms": stats(seen[f"{l} w{name}"][pos])[1]})
        q = nllm_model.rope_interleaved(seen[f"{l} wq"][:pos + 1].view(pos + 1, c.n_heads, hd),
                                        angles)[pos]
        k = nllm_model.rope_interleaved(seen[f"{l} wk"][:pos + 1].view(pos + 1, c.n_kv_heads, hd),
                                        angles)
        group = c.n_heads // c.n_kv_heads
        weights = [torch.softmax(k[:, h // group] @ q[h] / hd ** 0.5, 0) for h in range(c.n_heads)]
        steps.append({"step": "attention", "layer": l, "weights": weights})
        after_attention = x_in + seen[f"{l} attention out"][pos]
        steps.append({"step": "residual after attention", "layer": l,
                      "mean": stats(after_attention)[0], "rms": stats(after_attention)[1]})
        f_in = seen[f"{l} ffn norm"][pos]
        steps.append({"step": "ffn norm", "layer": l, "input_mean": stats(f_in)[0],
                      "input_rms": stats(f_in)[1],
                      "output_rms": stats(seen[f"{l} ffn norm out"][pos])[1]})
        gate = seen[f"{l} gate"][pos]
        assert float(gate.abs().min()) > 1e-4, "a gate value within rounding of 0"
        steps.append({"step": "ffn gate", "layer": l,
                      "active_share": float((gate > 0).double().mean())})
        block = seen[f"{l} block"][pos]
        steps.append({"step": "residual after ffn", "layer": l, "mean": stats(block)[0],
                      "rms": stats(block)[1]})
    f = seen["final norm"][pos]
    steps.append({"step": "final norm", "input_mean": stats(f)[0], "input_rms": stats(f)[1],
                  "output_rms": stats(seen["final norm out"][pos])[1]})
    steps.append({"step": "logits", "logits": logits[pos]})
    return steps


def close(a, b, rel, what):
    assert abs(a - b) <= rel * max(abs(b), 1e-3), f"{what}: run {a} against PyTorch {b}"


def check_trace(pos):
    tokens = json.loads(subprocess.run([RUN, MODEL, "--tokenize", PROMPT, "--json"],
                                       capture_output=True, text=True, check=True).stdout)["ids"]
    w, c = read_legacy(MODEL)
    model = nllm_model.from_tensors(w, c)
    seen, logits = hooked(model, tokens)
    done = subprocess.run([RUN, MODEL, "--trace", str(pos), "--json", "-i", PROMPT],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout)
    assert trace["token"] == tokens[pos]
    want = expected_steps(seen, logits, model, pos)
    got = trace["steps"]
    assert [s["step"] for s in got] == [s["step"] for s in want], [s["step"] for s in got]
    worst = {"stat": 0.0, "weight": 0.0, "logit": 0.0}
    for g, e in zip(got, want):
        what = f"{g['step']} (layer {g['layer']})"
        if e["step"] == "attention":
            for h, head in enumerate(g["heads"]):
                diff = np.abs(np.array(head["weights"]) - e["weights"][h].numpy()).max()
                worst["weight"] = max(worst["weight"], diff)
                assert diff < 1e-5, f"{what} head {h}: {diff}"
                top = sorted(range(pos + 1), key=lambda t: -float(e["weights"][h][t]))[:3]
                assert [t["pos"] for t in head["top"]] == top, f"{what} head {h} top positions"
        elif e["step"] == "logits":
            ref = e["logits"].numpy()
            top5 = list(np.argsort(-ref)[:5])
            assert [t["id"] for t in g["top"]] == top5, f"top 5 {g['top']} against {top5}"
            for t in g["top"]:
                diff = abs(t["logit"] - ref[t["id"]]) / max(abs(ref[t["id"]]), 1.0)
                worst["logit"] = max(worst["logit"], diff)
                assert diff < 1e-4, f"logit {t['id']}: {t['logit']} against {ref[t['id']]}"
        else:
            for key, value in e.items():
                if key in ("step", "layer"):
                    continue
                if key == "active_share":  # a count over hidden_dim, printed to 6 digits
                    assert abs(g[key] - value) < 1e-5, f"{what} {key}: {g[key]} against {value}"
                    continue
                if abs(value) > 1e-3:
                    worst["stat"] = max(worst["stat"], abs(g[key] - value) / abs(value))
                close(g[key], value, 1e-4, f"{what} {key}")
    print(f"  position {pos}: largest relative difference of a statistic {worst['stat']:.2e}, "
          f"of an attention weight {worst['weight']:.2e} (absolute), of a logit "
          f"{worst['logit']:.2e}")


@test
def trace_of_the_first_and_a_later_position_matches_pytorch_hooks():
    check_trace(0)
    check_trace(7)


@test
def trace_refuses_a_position_past_the_prompt_and_options_it_does_not_use():
    done = subprocess.run([RUN, MODEL, "--trace", "5", "Once upon a time"],
                          capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout == "", done
    assert done.stderr == ("run: --trace 5: the prompt has 5 tokens, positions 0..4 (BOS is "
                           "position 0)\n"), done.stderr
    done = subprocess.run([RUN, MODEL, "--trace", "1", "-t", "0", "Once"], capture_output=True,
                          text=True)
    assert done.stderr == "run: -t does not go with --trace, which traces a position of the "\
        "prompt\n", done.stderr


@test
def plot_trace_draws_the_trace_and_refuses_other_json():
    """tools/plot_trace.py writes a PNG from run --trace --json, exits 0 on --help, and gives one
    line for JSON that is not a trace (--tokenize's)."""
    trace = subprocess.run([RUN, MODEL, "--trace", "3", "--json", PROMPT], capture_output=True,
                           text=True, check=True).stdout
    png = os.path.join(tempfile.mkdtemp(prefix="normllama-trace-"), "trace.png")
    tool = [sys.executable, "tools/plot_trace.py"]
    p = subprocess.run(tool + ["-", png], input=trace, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    p = subprocess.run(tool + ["--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--trace 7 --json" in p.stdout, p
    tokens = subprocess.run([RUN, MODEL, "--tokenize", "x", "--json"], capture_output=True,
                            text=True, check=True).stdout
    p = subprocess.run(tool + ["-", png], input=tokens, capture_output=True, text=True)
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert "not the JSON of run --trace --json" in p.stderr, p.stderr


if __name__ == "__main__":
    sys.exit(run_tests(TESTS, tempfile.mkdtemp(prefix="normllama-trace-")))
