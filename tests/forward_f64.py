"""A forward pass of normllama's decoder in float64 numpy, written from the model's definition
(Llama: pre-norm RMSNorm or LayerNorm, rotary attention over pairs (2i, 2i+1) of each head with
grouped kv heads, SwiGLU feed-forward), for tests that compare run's logits with an exact
evaluation of the weights a file holds. The tensors are a reader's (tests/decode_layouts.py's,
written from docs/FORMAT.md alone, or nllm_format.read_model's), already decoded from the file's
dtype; every operation is done in float64, so what it computes differs from the exact value by far
less than run's float32 rounding does. All positions go through at once (causal attention): the
256 positions of stories260K that tests/test_f64.py feeds take a twentieth of a second.

Every operation goes through an Arithmetic: EXACT computes it, and a test can pass one that adds
to each result the error run's float32 arithmetic makes there (tests/error_model.py's Draw).
"""
import numpy as np


class Arithmetic:
    """Exact float64 arithmetic, in the three kinds of operation the forward pass is made of."""

    def product(self, name, w, x):
        """x W^T for the rows of x: a product with a weight matrix (name as "w2"; w: (rows,
        cols); x: (positions, cols))."""
        return x @ w.T

    def dot(self, a, b):
        """a @ b for attention's scores and weighted values: sums along a's last axis."""
        return a @ b

    def round(self, v, ops=1):
        """The result v of an elementwise computation of `ops` operations."""
        return v


EXACT = Arithmetic()


def norm(a, x, weight, bias, eps, layernorm):
    """RMSNorm x / sqrt(mean(x^2) + eps) * weight, or LayerNorm (x - mean) / sqrt(var + eps) *
    weight + bias, over the last axis of x; a: the Arithmetic."""
    n = x.shape[-1]
    if layernorm:
        x = a.round(x - a.round(a.dot(x, np.ones(n))[..., None] / n))
    inv = a.round(1 / np.sqrt(a.round(a.dot(x * x, np.ones(n))[..., None] / n + eps, 2)), 2)
    return a.round(x * inv * weight + (0 if bias is None else bias), 3)


def bias(f, name, layer=None):
    """A norm's bias (beta), or None when the file has none."""
    if name not in f:
        return None
    return f[name] if layer is None else f[name][layer]


def rotation(a, pos, head_size, theta):
    """RoPE's cosines and sines, each (positions, 1, head_size / 2): pair i of each head at
    position p turns by p * theta^(-2i / head_size). Computed once for q and k of every layer, as
    the same computation gives the same value each time."""
    inv_freq = a.round(theta ** (-np.arange(0, head_size, 2) / head_size), 2)
    angle = a.round(np.asarray(pos, np.float64)[:, None, None] * inv_freq)
    return a.round(np.cos(angle)), a.round(np.sin(angle))


def rope(a, v, cos, sin):
    """Rotates each pair (2i, 2i+1) of each head of each row of v (positions, n) by the angles
    whose cosines and sines rotation gives."""
    v = v.reshape(cos.shape[0], -1, cos.shape[2], 2)
    out = np.empty_like(v)
    out[..., 0] = a.round(v[..., 0] * cos - v[..., 1] * sin, 3)
    out[..., 1] = a.round(v[..., 0] * sin + v[..., 1] * cos, 3)
    return out.reshape(cos.shape[0], -1)


def logits(header, t, tokens, a=EXACT, sites=None):
    """The logits (len(tokens), vocab_size) of feeding tokens at positions 0, 1, ..., computed
    with the Arithmetic a. sites: a list that, when given, receives the input of every norm call
    in model order (layer 0 attention, layer 0 FFN, ..., final), each (positions, dim)."""
    f = {k: np.asarray(v, np.float64) for k, v in t.items()}
    dim, heads, kv_heads = header["dim"], header["n_heads"], header["n_kv_heads"]
    head_size, eps, theta = dim // heads, float(np.float32(header["norm_eps"])), header["rope_theta"]
    if header["norm"] not in (0, 1):
        raise ValueError(f"forward_f64 computes rmsnorm and layernorm, not norm code "
                         f"{header['norm']}")
    layernorm = header["norm"] == 1
    wcls = f["wcls"] if "wcls" in f else f["token_embedding"]
    n = len(tokens)
    cos, sin = rotation(a, np.arange(n), head_size, theta)
    future = np.triu(np.ones((n, n), bool), 1)

    def normed(x, name, layer=None):
        if sites is not None:
            sites.append(x)
        weight = f[name] if layer is None else f[name][layer]
        return norm(a, x, weight, bias(f, name + "_bias", layer), eps, layernorm)

    x = f["token_embedding"][np.asarray(tokens)]
    for layer in range(header["n_layers"]):
        h = normed(x, "attn_norm", layer)
        q = rope(a, a.product("wq", f["wq"][layer], h), cos, sin)
        k = rope(a, a.product("wk", f["wk"][layer], h), cos, sin)
        v = a.product("wv", f["wv"][layer], h)
        att = np.empty((n, dim))
        for head in range(heads):
            kv = head // (heads // kv_heads)
            cols = slice(head * head_size, (head + 1) * head_size)
            kv_cols = slice(kv * head_size, (kv + 1) * head_size)
            scores = a.round(a.dot(q[:, cols], k[:, kv_cols].T) / np.sqrt(head_size))
            scores[future] = -np.inf
            w = a.round(np.exp(scores - scores.max(axis=1, keepdims=True)), 3)
            w = a.round(w / a.dot(w, np.ones(n))[:, None])
            att[:, cols] = a.dot(w, v[:, kv_cols])
        x = a.round(x + a.product("wo", f["wo"][layer], att))
        h = normed(x, "ffn_norm", layer)
        gate, up = a.product("w1", f["w1"][layer], h), a.product("w3", f["w3"][layer], h)
        x = a.round(x + a.product("w2", f["w2"][layer], a.round(gate / (1 + np.exp(-gate)) * up, 6)))
    return a.product("wcls", wcls, normed(x, "final_norm"))
