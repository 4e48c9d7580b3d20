"""An independent reader of every model file layout run reads, written from docs/FORMAT.md alone
(not from load.c, format.c, export.py or any other reader in the repository), so that the tests
can compare run's logits with a float64 forward pass of the values a file holds: normllama's NLLM
in each dtype (f32, bf16, f16, q8_0, q4_0), llama2.c's legacy layout (shared or separate
classifier), and llama2.c's version 1 (float32) and version 2 (int8, groups that may straddle
rows). read_model(path) returns (header, tensors, offsets): the header in forward_f64's terms;
the tensors decoded to float64 under FORMAT.md's names, each matrix stacked (n_layers, rows,
cols); and the file offset where each tensor starts (a quantized matrix's scales under
NAME.scales; a version 2 matrix's first piece; a normllama file's tokenizer section under vocab),
for tests that alter a file.
"""
import struct

import numpy as np

NLLM_MAGIC = 0x4D4C4C4E
AK42_MAGIC = 0x616B3432
MATRICES = ("token_embedding", "wq", "wk", "wv", "wo", "w1", "w2", "w3", "wcls")
SIZES = ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len")


def shape(h, name):
    """FORMAT.md's shape of a tensor, for the sizes of header h."""
    dim, hidden, layers, vocab = h["dim"], h["hidden_dim"], h["n_layers"], h["vocab_size"]
    kv_dim = h["n_kv_heads"] * dim // h["n_heads"]
    if name.endswith(("_log_eps", "_alpha")):  # one per norm site
        return (1,) if name.startswith("final_") else (layers,)
    return {"token_embedding": (vocab, dim), "wcls": (vocab, dim), "final_norm": (dim,),
            "final_norm_bias": (dim,), "wq": (layers, dim, dim), "wk": (layers, kv_dim, dim),
            "wv": (layers, kv_dim, dim), "wo": (layers, dim, dim), "w1": (layers, hidden, dim),
            "w2": (layers, dim, hidden), "w3": (layers, hidden, dim)}.get(name, (layers, dim))


class Cursor:
    """Reads little-endian arrays from bytes in order, each start rounded up to `align`, and
    records where each named one starts."""

    def __init__(self, data, offset, align=1):
        self.data, self.off, self.align, self.offsets = data, offset, align, {}

    def take(self, dtype, count, name=None):
        self.off = -(-self.off // self.align) * self.align
        if name:
            self.offsets.setdefault(name, self.off)
        a = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.off)
        self.off += a.nbytes
        return a

    def floats(self, h, name):
        """A float32 tensor, as float64 of its shape."""
        n = int(np.prod(shape(h, name)))
        return self.take("<f4", n, name).astype(np.float64).reshape(shape(h, name))

    def end(self, path):
        assert self.off == len(self.data), f"{path}: {len(self.data)} bytes, layout ends at {self.off}"


def half_to_float(bits):
    """IEEE 754 binary16 bits to float64, by the definition: sign, 5 exponent bits of bias 15, 10
    mantissa bits; exponent 0 is subnormal (mantissa * 2^-24), 31 infinity or NaN."""
    bits = bits.astype(np.int64)
    sign = np.where(bits >> 15, -1.0, 1.0)
    exp, mant = (bits >> 10) & 31, (bits & 1023).astype(np.float64)
    value = np.where(exp == 0, mant * 2.0 ** -24, (1 + mant / 1024) * 2.0 ** (exp - 15))
    value = np.where(exp == 31, np.where(mant == 0, np.inf, np.nan), value)
    return sign * value


def nllm_matrix(cur, h, name):
    """One matrix of a normllama file in the header's dtype, as float64 of its shape."""
    dims = shape(h, name)
    n, cols = int(np.prod(dims)), dims[-1]
    dtype, group = h["dtype"], h["group_size"]
    if dtype == 0:
        return cur.floats(h, name)
    if dtype == 1:  # the upper 16 bits of a float32
        bits = cur.take("<u2", n, name).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64).reshape(dims)
    if dtype == 3:
        return half_to_float(cur.take("<u2", n, name)).reshape(dims)
    rows = n // cols
    if dtype == 2:  # int8 (rows, cols), then scales (rows, ceil(cols / group))
        values = cur.take("i1", n, name).reshape(rows, cols).astype(np.float64)
    else:  # q4_0: value j of a row in byte j / 2, the low nibble for even j; code - 8 steps
        assert dtype == 4 and group == 32 and cols % 2 == 0, (dtype, group, cols)
        packed = cur.take("u1", n // 2, name).reshape(rows, cols // 2)
        codes = np.empty((rows, cols), np.int64)
        codes[:, 0::2], codes[:, 1::2] = packed & 15, packed >> 4
        values = (codes - 8).astype(np.float64)
    scales = cur.take("<f4", rows * -(-cols // group), name + ".scales").reshape(rows, -1)
    group_of_column = np.arange(cols) // group  # groups run along a row, the last one shorter
    return (values * scales.astype(np.float64)[:, group_of_column]).reshape(dims)


def read_nllm(data, path):
    magic, version, *sizes = struct.unpack_from("<II7i", data, 0)
    assert (magic, version) == (NLLM_MAGIC, 1), (path, magic, version)
    theta, eps = struct.unpack_from("<ff", data, 36)
    norm, bias, shared, dtype, align, group = struct.unpack_from("<6I", data, 44)
    assert dtype in (0, 1, 2, 3, 4) and align & (align - 1) == 0, (dtype, align)
    assert group == {2: group, 4: 32}.get(dtype, 0) and (dtype != 2 or group in (32, 64)), group
    h = dict(zip(SIZES, sizes), rope_theta=theta, norm_eps=eps, norm=norm, norm_bias=bias,
             shared=shared, dtype=dtype, group_size=group)
    # each norm's weight, its bias when the flag says so, its per-site scalar for codes 3 and 5
    scalar = {3: "log_eps", 5: "alpha"}.get(norm)
    norms = [[site, *([f"{site}_bias"] if bias else []), *([f"{site}_{scalar}"] if scalar else [])]
             for site in ("attn_norm", "ffn_norm", "final_norm")]
    order = ["token_embedding", *norms[0], "wq", "wk", "wv", "wo", *norms[1], "w1", "w2", "w3",
             *norms[2], *([] if shared else ["wcls"])]
    cur = Cursor(data, 256, align)
    t = {name: nllm_matrix(cur, h, name) if name in MATRICES else cur.floats(h, name)
         for name in order}
    vocab_bytes, vocab_flags = struct.unpack_from("<2I", data, 68)
    assert vocab_flags in (0, 1) and (vocab_bytes or not vocab_flags), (vocab_bytes, vocab_flags)
    if vocab_bytes:  # the tokenizer section: llama2.c's tokenizer layout, aligned
        cur.take("u1", vocab_bytes, "vocab")
    h["vocab_bytes"] = vocab_bytes
    cur.end(path)
    return h, t, cur.offsets


def llama2c_header(sizes, shared):
    """llama2.c's files: eps 1e-5, theta 10000, rmsnorm, no biases."""
    return dict(zip(SIZES, sizes), rope_theta=10000.0, norm_eps=1e-5, norm=0, norm_bias=0,
                shared=int(shared), dtype=0, group_size=0)


def read_legacy(data, path):
    sizes = list(struct.unpack_from("<7i", data, 0))
    shared = sizes[5] > 0  # a negative vocab_size: the classifier is stored at the end
    sizes[5] = abs(sizes[5])
    h = llama2c_header(sizes, shared)
    cur = Cursor(data, 28)
    t = {name: cur.floats(h, name) for name in ["token_embedding", "attn_norm", "wq", "wk", "wv",
                                                 "wo", "ffn_norm", "w1", "w2", "w3", "final_norm"]}
    cur.take("<f4", h["seq_len"] * h["dim"] // h["n_heads"])  # two RoPE tables, unused
    if not shared:
        t["wcls"] = cur.floats(h, "wcls")
    cur.end(path)
    return h, t, cur.offsets


def read_ak42(data, path):
    _, version, *sizes = struct.unpack_from("<Ii7i", data, 0)
    (shared,) = struct.unpack_from("<B", data, 36)
    h = llama2c_header(sizes, shared)
    cur = Cursor(data, 256)
    t = {name: cur.floats(h, name) for name in ["attn_norm", "ffn_norm", "final_norm"]}
    names = ["token_embedding", "wq", "wk", "wv", "wo", "w1", "w2", "w3"] + \
        ([] if shared else ["wcls"])
    assert version in (1, 2), (path, version)
    if version == 2:
        (h["group_size"],) = struct.unpack_from("<i", data, 37)
    for name in names:
        if version == 1:
            t[name] = cur.floats(h, name)
            continue
        # each layer's tensor (the embedding and wcls whole) flattened: int8 values, then one
        # scale per group_size consecutive values, the groups running on across rows
        dims, group = shape(h, name), h["group_size"]
        pieces = dims[0] if len(dims) == 3 else 1
        n = int(np.prod(dims)) // pieces
        assert n % group == 0, (name, n, group)
        layers = []
        for _ in range(pieces):
            values = cur.take("i1", n, name).astype(np.float64)
            scales = cur.take("<f4", n // group).astype(np.float64)
            layers.append(values * np.repeat(scales, group))
        t[name] = np.concatenate(layers).reshape(dims)
    cur.end(path)
    return h, t, cur.offsets


def read_model(path):
    """(header, tensors, offsets) of any layout run reads, told apart by the first 4 bytes."""
    data = open(path, "rb").read()
    (magic,) = struct.unpack_from("<I", data, 0)
    reader = {NLLM_MAGIC: read_nllm, AK42_MAGIC: read_ak42}.get(magic, read_legacy)
    return reader(data, path)
