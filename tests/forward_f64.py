"""A forward pass of normllama's decoder in float64 numpy, written from the model's definition
(Llama: pre-norm RMSNorm or LayerNorm, rotary attention over pairs (2i, 2i+1) of each head with
grouped kv heads, SwiGLU feed-forward), for tests that compare run's logits with an exact
evaluation of the weights a file holds. The tensors are those nllm_format.read_model
returns (already decoded from the file's dtype); every operation is done in float64, so what it
computes differs from the exact value by far less than run's float32 rounding does.
"""
import numpy as np


def norm(x, weight, bias, eps, layernorm):
    """RMSNorm x / sqrt(mean(x^2) + eps) * weight, or LayerNorm (x - mean) / sqrt(var + eps) *
    weight + bias."""
    if layernorm:
        x = x - x.mean()
        return x / np.sqrt((x * x).mean() + eps) * weight + (0 if bias is None else bias)
    return x / np.sqrt((x * x).mean() + eps) * weight


def bias(f, name, layer=None):
    """A norm's bias (beta), or None when the file has none."""
    if name not in f:
        return None
    return f[name] if layer is None else f[name][layer]


def rope(v, pos, head_size, theta):
    """Rotates each pair (2i, 2i+1) of each head of v by pos * theta^(-2i / head_size)."""
    v = v.reshape(-1, head_size // 2, 2)
    freq = theta ** (-np.arange(0, head_size, 2) / head_size)
    c, s = np.cos(pos * freq), np.sin(pos * freq)
    out = np.empty_like(v)
    out[..., 0] = v[..., 0] * c - v[..., 1] * s
    out[..., 1] = v[..., 0] * s + v[..., 1] * c
    return out.reshape(-1)


def logits(header, t, tokens):
    """The logits (len(tokens), vocab_size) of feeding tokens at positions 0, 1, ..."""
    f = {k: np.asarray(v, np.float64) for k, v in t.items()}
    dim, heads, kv_heads = header["dim"], header["n_heads"], header["n_kv_heads"]
    head_size, eps, theta = dim // heads, float(np.float32(header["norm_eps"])), header["rope_theta"]
    layernorm = header["norm"] == 1
    wcls = f["wcls"] if "wcls" in f else f["token_embedding"]
    keys = [[] for _ in range(header["n_layers"])]
    values = [[] for _ in range(header["n_layers"])]
    out = []
    for pos, token in enumerate(tokens):
        x = f["token_embedding"][token].copy()
        for layer in range(header["n_layers"]):
            h = norm(x, f["attn_norm"][layer], bias(f, "attn_norm_bias", layer), eps, layernorm)
            q = rope(f["wq"][layer] @ h, pos, head_size, theta).reshape(heads, head_size)
            keys[layer].append(rope(f["wk"][layer] @ h, pos, head_size, theta)
                               .reshape(kv_heads, head_size))
            values[layer].append((f["wv"][layer] @ h).reshape(kv_heads, head_size))
            k, v = np.array(keys[layer]), np.array(values[layer])  # (pos + 1, kv_heads, head_size)
            att = np.empty((heads, head_size))
            for head in range(heads):
                kv = head // (heads // kv_heads)
                scores = k[:, kv] @ q[head] / np.sqrt(head_size)
                w = np.exp(scores - scores.max())
                att[head] = (w / w.sum()) @ v[:, kv]
            x = x + f["wo"][layer] @ att.reshape(-1)
            h = norm(x, f["ffn_norm"][layer], bias(f, "ffn_norm_bias", layer), eps, layernorm)
            gate = f["w1"][layer] @ h
            x = x + f["w2"][layer] @ (gate / (1 + np.exp(-gate)) * (f["w3"][layer] @ h))
        out.append(wcls @ norm(x, f["final_norm"], bias(f, "final_norm_bias"), eps, layernorm))
    return np.array(out)
