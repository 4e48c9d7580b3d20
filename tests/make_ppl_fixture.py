"""Reference perplexities for tests/test_eval.c: stories260K.pt run by an independent PyTorch
forward pass (written from the Llama architecture, not from model.c), text tokenized by
SentencePiece with tok512.model, chunked as `run --ppl` documents it (chunks of seq_len text
tokens, each fed from BOS, every text token predicted once).

    /usr/bin/python3 tests/make_ppl_fixture.py models/stories260K.pt models/tok512.model \
        data/stories.txt > tests/fixtures/ppl_stories_stories260K.txt

Writes one line per norm: name, predicted tokens, mean NLL in nats.
"""
import math
import sys

import sentencepiece as spm
import torch
import torch.nn.functional as F


def norm(x, w, kind, eps=1e-5):
    if kind == "rmsnorm":
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
    return F.layer_norm(x, (x.shape[-1],), w, None, eps)


def rope(x, theta=10000.0):
    """Rotates interleaved pairs (x[..., 2i], x[..., 2i+1]) by pos * theta^(-2i / head_size).
    x: (seq, heads, head_size)."""
    seq, _, hs = x.shape
    freqs = theta ** (-torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    angles = torch.arange(seq, dtype=torch.float64)[:, None] * freqs[None, :]
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
    x0, x1 = x[..., 0::2].double(), x[..., 1::2].double()
    out = torch.empty_like(x, dtype=torch.float64)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


def forward(sd, args, tokens, kind):
    """Logits (seq, vocab) in float64 for a whole chunk, causal attention."""
    p = "_orig_mod."
    g = lambda name: sd[p + name].double()
    dim, n_heads, n_kv = args["dim"], args["n_heads"], args["n_kv_heads"]
    hs = dim // n_heads
    x = g("tok_embeddings.weight")[tokens]
    seq = len(tokens)
    mask = torch.full((seq, seq), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(args["n_layers"]):
        h = norm(x, g(f"layers.{l}.attention_norm.weight"), kind)
        q = rope((h @ g(f"layers.{l}.attention.wq.weight").T).view(seq, n_heads, hs))
        k = rope((h @ g(f"layers.{l}.attention.wk.weight").T).view(seq, n_kv, hs))
        v = (h @ g(f"layers.{l}.attention.wv.weight").T).view(seq, n_kv, hs)
        k = k.repeat_interleave(n_heads // n_kv, dim=1)
        v = v.repeat_interleave(n_heads // n_kv, dim=1)
        att = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hs) + mask
        out = torch.einsum("hqk,khd->qhd", att.softmax(-1), v).reshape(seq, dim)
        x = x + out @ g(f"layers.{l}.attention.wo.weight").T
        h = norm(x, g(f"layers.{l}.ffn_norm.weight"), kind)
        gate = h @ g(f"layers.{l}.feed_forward.w1.weight").T
        up = h @ g(f"layers.{l}.feed_forward.w3.weight").T
        x = x + (F.silu(gate) * up) @ g(f"layers.{l}.feed_forward.w2.weight").T
    x = norm(x, g("norm.weight"), kind)
    return x @ g("output.weight").T


def main():
    ckpt, sp_model, text_path = sys.argv[1:4]
    ck = torch.load(ckpt, map_location="cpu")
    sd, args = ck["model"], ck["model_args"]
    sp = spm.SentencePieceProcessor(model_file=sp_model)
    with open(text_path, encoding="utf-8") as f:
        text = sp.encode(f.read())
    seq_len = args["max_seq_len"]
    for kind in ("rmsnorm", "layernorm"):
        nll = 0.0
        with torch.no_grad():
            for start in range(0, len(text), seq_len):
                targets = text[start:start + seq_len]
                inputs = [1] + targets[:-1]
                logp = forward(sd, args, torch.tensor(inputs), kind).log_softmax(-1)
                nll -= logp[torch.arange(len(targets)), torch.tensor(targets)].sum().item()
        print(kind, len(text), f"{nll / len(text):.6f}")


if __name__ == "__main__":
    main()
