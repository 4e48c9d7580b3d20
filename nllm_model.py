"""The one PyTorch definition of the model `run` computes: train.py trains it, tests/test_export.py
and tests/test_train.py compare run's logits with it, tools/twins.py measures it.

Pre-norm LLaMA decoder (llama2.c's model.py, Meta's Llama): for each layer
    x = x + wo attention(rope(wq n(x)), rope(wk n(x)), wv n(x))
    x = x + w2 (silu(w1 n(x)) * w3 n(x))
then logits = wcls n(x), with wcls the token embedding when the classifier is shared (tied).
RoPE rotates pairs (2i, 2i+1) of each head by pos * theta^(-2i / head_size) (llama2.c, Meta;
`rope_rotate_half` is the Hugging Face pairing, kept for export.py's tests). n_kv_heads keys and
values serve n_heads / n_kv_heads query heads each (grouped-query attention). The norms are written
from their equations with eps inside the root, each as run's norm of the same name (norm.h):
    rmsnorm   (Zhang & Sennrich 2019, eq. 4):  weight * x / sqrt(mean(x^2) + eps)
    layernorm (Ba, Kiros & Hinton 2016, eq. 4): weight * (x - mean) / sqrt(var + eps) + bias,
              var the biased variance (PyTorch's F.layer_norm)
and their siblings (docs/NORMS.md):
    rmsnorm_bias:        rmsnorm + bias
    rmsnorm_learned_eps: weight * x / sqrt(mean(x^2) + exp(log_eps)), log_eps learned per site
    prmsnorm  (Zhang & Sennrich 2019, pRMSNorm): rmsnorm with the mean over the first
              k = ceil(dim / 16) values (p = 6.25%)
    dyt       (Zhu et al. 2025): weight * tanh(alpha x) + bias, alpha learned per site
    identity: x, no norm at all.
Tensor names are docs/FORMAT.md's (token_embedding, attn_norm, attn_norm_bias, wq, ...); the
shape, norm, eps and RoPE base are a file's header, nllm_format.Config.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from nllm_format import Config
# query positions per block of attention (Attention.attend_block); measured on one core, batch
# 32 x 256 positions, head_size 8, forward and backward: 755 ms in one block, 320 ms in blocks
# of 64, 230 ms in blocks of 32
ATTENTION_BLOCK = 32


class RMSNorm(nn.Module):
    """weight * x / sqrt(mean(x^2) + eps) over the last dimension."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class LayerNorm(nn.Module):
    """weight * (x - mean) / sqrt(var + eps) + bias over the last dimension; var biased."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        centered = x - x.mean(-1, keepdim=True)
        var = centered.pow(2).mean(-1, keepdim=True)
        return self.weight * (centered * torch.rsqrt(var + self.eps)) + self.bias


class RMSNormBias(RMSNorm):
    """RMSNorm plus a learned bias: weight * x / sqrt(mean(x^2) + eps) + bias."""

    def __init__(self, dim, eps):
        super().__init__(dim, eps)
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return super().forward(x) + self.bias


class RMSNormLearnedEps(nn.Module):
    """weight * x / sqrt(mean(x^2) + exp(log_eps)): eps learned at each norm site, positive
    whatever log_eps becomes; log_eps starts at log(eps). (exp rather than softplus: the two agree
    for eps far below 1, and a step of Adam then moves eps by a factor, the scale eps lives on.)"""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.log_eps = nn.Parameter(torch.full((1,), math.log(eps)))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.log_eps.exp()))


class PRMSNorm(RMSNorm):
    """Partial RMSNorm: weight * x / sqrt(mean(x[:k]^2) + eps), the RMS estimated from the first
    k = ceil(dim p) values, p = 6.25% = 1/16 (run's prmsnorm_count)."""

    def __init__(self, dim, eps):
        super().__init__(dim, eps)
        self.k = -(-dim // 16)

    def forward(self, x):
        ms = x[..., :self.k].pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(ms + self.eps))


# DyT's initial alpha by norm site: the DyT paper's values for its narrowest LLaMA (7B, width
# 4096); wider models want smaller ones, and none narrower is published (docs/NORMS.md)
DYT_ALPHA0 = {"attention": 0.8, "ffn": 0.2, "final": 0.2}


class DyT(nn.Module):
    """Dynamic Tanh: weight * tanh(alpha x) + bias, alpha one learned scalar; no statistics."""

    def __init__(self, dim, alpha0):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.alpha = nn.Parameter(torch.full((1,), alpha0))

    def forward(self, x):
        return self.weight * torch.tanh(self.alpha * x) + self.bias


class Identity(nn.Module):
    """No norm at all: x. Its weight (ones, never learned nor read) is there for the file, whose
    layout has every norm's weight."""

    def __init__(self, dim, eps):
        super().__init__()
        self.register_buffer("weight", torch.ones(dim))

    def forward(self, x):
        return x


NORM_MODULES = {"rmsnorm": RMSNorm, "layernorm": LayerNorm, "rmsnorm_bias": RMSNormBias,
                "rmsnorm_learned_eps": RMSNormLearnedEps, "prmsnorm": PRMSNorm,
                "identity": Identity}


def make_norm(c, site):
    """The norm c.norm at a site: "attention", "ffn" or "final"."""
    if c.norm == "dyt":
        return DyT(c.dim, DYT_ALPHA0[site])
    return NORM_MODULES[c.norm](c.dim, c.norm_eps)


def rope_angles(c, n_positions, dtype=torch.float32):
    """(n_positions, head_size / 2): angle pos * theta^(-2i / head_size) of pair i; computed in
    float64 and rounded once, so that float32 and float64 models rotate alike."""
    hd = c.head_size
    inv_freq = 1.0 / c.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    return (torch.arange(n_positions, dtype=torch.float64)[:, None] * inv_freq).to(dtype)


def rope_interleaved(x, angles):
    """x (..., T, heads, head_size): pairs (2i, 2i+1) rotated by angles[t, i] (llama2.c, Meta)."""
    cos, sin = torch.cos(angles)[:, None, :], torch.sin(angles)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2)


def rope_rotate_half(x, angles):
    """Hugging Face's pairing: i with i + head_size/2 (x * cos + rotate_half(x) * sin)."""
    emb = torch.cat([angles, angles], -1)
    cos, sin = torch.cos(emb)[:, None, :], torch.sin(emb)[:, None, :]
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_size = c.n_heads, c.n_kv_heads, c.head_size
        self.wq = nn.Linear(c.dim, c.dim, bias=False)
        self.wk = nn.Linear(c.dim, c.kv_dim, bias=False)
        self.wv = nn.Linear(c.dim, c.kv_dim, bias=False)
        self.wo = nn.Linear(c.dim, c.dim, bias=False)

    def forward(self, x, angles, mask, rope):
        B, T, _ = x.shape
        KV, G, hd = self.n_kv_heads, self.n_heads // self.n_kv_heads, self.head_size
        # the scale goes on q, (B, T, H, hd), rather than on the (B, H, T, T) scores
        q = rope(self.wq(x).view(B, T, KV * G, hd), angles) * (1.0 / math.sqrt(hd))
        k = rope(self.wk(x).view(B, T, KV, hd), angles)
        v = self.wv(x).view(B, T, KV, hd)
        # grouped heads without copying k and v: the G query heads of a kv head are G * t rows
        # of one matrix product, (B, KV, G * t, hd) @ (B, KV, hd, keys)
        q = q.view(B, T, KV, G, hd).permute(0, 2, 3, 1, 4)  # (B, KV, G, T, hd)
        k, v = k.transpose(1, 2), v.transpose(1, 2)  # (B, KV, T, hd)
        outs = [self.attend_block(q[:, :, :, t0:t0 + ATTENTION_BLOCK], k, v, mask, t0)
                for t0 in range(0, T, ATTENTION_BLOCK)]
        out = torch.cat(outs, 3).permute(0, 3, 1, 2, 4).reshape(B, T, -1)
        return self.wo(out)

    @staticmethod
    def attend_block(q, k, v, mask, t0):
        """Causal attention of the queries at positions t0.. t0 + t - 1, q (B, KV, G, t, hd)
        (scaled), over the keys and values up to the block's last position: the key blocks past
        it, which the mask would zero, are never computed (a third of the scores for 256
        positions in blocks of 32)."""
        B, KV, G, t, hd = q.shape
        end = t0 + t
        scores = torch.matmul(q.reshape(B, KV, G * t, hd), k[:, :, :end].transpose(-2, -1))
        scores = scores.view(B, KV, G, t, end) + mask[t0:end, :end]
        att = torch.softmax(scores, dim=-1).view(B, KV, G * t, end)
        return torch.matmul(att, v[:, :, :end]).view(B, KV, G, t, hd)


class FeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.w1 = nn.Linear(c.dim, c.hidden_dim, bias=False)
        self.w2 = nn.Linear(c.hidden_dim, c.dim, bias=False)
        self.w3 = nn.Linear(c.dim, c.hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention_norm = make_norm(c, "attention")
        self.attention = Attention(c)
        self.ffn_norm = make_norm(c, "ffn")
        self.feed_forward = FeedForward(c)

    def forward(self, x, angles, mask, rope):
        x = x + self.attention(self.attention_norm(x), angles, mask, rope)
        return x + self.feed_forward(self.ffn_norm(x))


class Transformer(nn.Module):
    """tokens (B, T) int64 -> logits (B, T, vocab_size); with targets, also the mean
    cross-entropy over every position (targets -1 are ignored). c: its nllm_format.Config (the
    norms that learn a bias have one whatever c.norm_bias says, zero until trained)."""

    def __init__(self, c):
        super().__init__()
        self.config = c
        self.tok_embeddings = nn.Embedding(c.vocab_size, c.dim)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.norm = make_norm(c, "final")
        self.output = None if c.shared_classifier else nn.Linear(c.dim, c.vocab_size, bias=False)
        self.rope = rope_interleaved
        self.register_buffer("angles", rope_angles(c, c.seq_len), persistent=False)
        mask = torch.triu(torch.full((c.seq_len, c.seq_len), float("-inf")), 1)
        self.register_buffer("mask", mask, persistent=False)

    def norms(self):
        """Every norm module, in the order the forward pass calls them."""
        for layer in self.layers:
            yield layer.attention_norm
            yield layer.ffn_norm
        yield self.norm

    def forward(self, tokens, targets=None):
        T = tokens.shape[1]
        if T > self.config.seq_len:
            raise ValueError(f"{T} positions, more than seq_len {self.config.seq_len}")
        x = self.tok_embeddings(tokens)
        angles, mask = self.angles[:T].to(x.dtype), self.mask[:T, :T].to(x.dtype)
        for layer in self.layers:
            x = layer(x, angles, mask, self.rope)
        x = self.norm(x)
        wcls = self.tok_embeddings.weight if self.output is None else self.output.weight
        logits = F.linear(x, wcls)
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1),
                                       ignore_index=-1)


# ----------------------------------------------------------------------------
# Our tensor names (docs/FORMAT.md) <-> the module's parameters

PER_LAYER = {"attn_norm": "attention_norm.weight", "attn_norm_bias": "attention_norm.bias",
             "attn_norm_log_eps": "attention_norm.log_eps",
             "attn_norm_alpha": "attention_norm.alpha",
             "wq": "attention.wq.weight", "wk": "attention.wk.weight",
             "wv": "attention.wv.weight", "wo": "attention.wo.weight",
             "ffn_norm": "ffn_norm.weight", "ffn_norm_bias": "ffn_norm.bias",
             "ffn_norm_log_eps": "ffn_norm.log_eps", "ffn_norm_alpha": "ffn_norm.alpha",
             "w1": "feed_forward.w1.weight", "w2": "feed_forward.w2.weight",
             "w3": "feed_forward.w3.weight"}
GLOBAL = {"token_embedding": "tok_embeddings.weight", "final_norm": "norm.weight",
          "final_norm_bias": "norm.bias", "final_norm_log_eps": "norm.log_eps",
          "final_norm_alpha": "norm.alpha", "wcls": "output.weight"}


def parameter_name(name, layer):
    """The state-dict key of our tensor `name` (of `layer` for the per-layer ones)."""
    return GLOBAL[name] if layer is None else f"layers.{layer}.{PER_LAYER[name]}"


def is_norm_parameter(key):
    """Whether a state-dict key is a norm's weight, bias or scalar (what twins do not share)."""
    return key.startswith("norm.") or ".attention_norm." in key or ".ffn_norm." in key


def from_tensors(w, c, dtype=torch.float64):
    """A Transformer holding w: our tensor names to arrays, the per-layer ones as lists (or stacked
    arrays) over layers; c: a dict of dim, n_heads, n_kv_heads, n_layers, norm_eps, rope_theta and
    optionally norm (default rmsnorm). Other shapes are read off w; a missing norm bias is zero."""
    import numpy as np

    emb = np.asarray(w["token_embedding"])
    w1 = np.asarray(w["w1"][0])
    config = Config(c["dim"], w1.shape[0], c["n_layers"], c["n_heads"], c["n_kv_heads"],
                    emb.shape[0], c.get("seq_len", 1024), rope_theta=c["rope_theta"],
                    norm_eps=c["norm_eps"], norm=c.get("norm", "rmsnorm"),
                    shared_classifier="wcls" not in w)
    model = Transformer(config).to(dtype)
    state = model.state_dict()
    for key in state:
        for name, suffix in PER_LAYER.items():
            if key.startswith("layers.") and key.endswith("." + suffix):
                layer = int(key.split(".")[1])
                value = w[name][layer] if name in w else None
                break
        else:
            name = next(n for n, k in GLOBAL.items() if k == key)
            value = w.get(name)
        if value is None and key.endswith(".bias"):
            continue  # zeros from the constructor
        state[key] = torch.tensor(np.asarray(value), dtype=dtype)
    model.load_state_dict(state)
    return model


def reference_logits(w, c, tokens, rope=rope_interleaved, norm="rmsnorm"):
    """float64 logits (len(tokens), vocab_size) as numpy of the model in w (from_tensors) over one
    sequence of token ids; rope picks the pairing convention of w's q and k rows."""
    model = from_tensors(w, dict(c, norm=norm, seq_len=max(len(tokens), 1)))
    model.rope = rope
    with torch.no_grad():
        return model(torch.tensor([list(tokens)]))[0].numpy()
