"""GGUF writer: a model file that llama.cpp runs, written from the format's specification
(ggml's docs/gguf.md, version 3; the layout summary opens ggml/include/gguf.h in llama.cpp's
source), not from gguf-py.

The file, every number little-endian:
  "GGUF", uint32 version 3, uint64 tensor count, uint64 key/value count
  key/values: string key, uint32 value type, value (an array: uint32 element type, uint64 count,
      the elements); a string is uint64 length + UTF-8 bytes, no NUL
  tensor infos: string name, uint32 n_dims, uint64 dims (ne[0], the fastest-moving, first),
      uint32 ggml type, uint64 offset into the data section (a multiple of the alignment)
  zero padding to the alignment (general.alignment, written here as 32, GGUF's default), then
      the data section: each tensor's bytes, zero-padded to the alignment

A PyTorch matrix (rows, cols) is a GGUF tensor of dims [cols, rows] with the same bytes.

Two architectures, one for each norm of the twins (ARCHITECTURES):
  llama (llama.cpp's src/models/llama.cpp): RMSNorm, RoPE of LLAMA_ROPE_TYPE_NORM, which rotates
      the pairs (2i, 2i + 1) of each head as llama2.c and Meta's checkpoints do, so wq and wk are
      written as they are (llama.cpp's convert_hf_to_gguf.py permutes Hugging Face's rotate-half
      rows back into this order; our models never hold that order); SwiGLU feed-forward; grouped
      kv heads; an output matrix, or none for a classifier tied to the embedding.
  stablelm (src/models/stablelm.cpp, StableLM 2's graph): the same with LayerNorm (weight and
      bias, pre-norm) and RoPE of LLAMA_ROPE_TYPE_NEOX, which rotates the pairs (i, i +
      head_size / 2): each head's rows of wq and wk are permuted into that order (rotate_half),
      so that the function is ours; rope.dimension_count the whole head; an output matrix always
      (the embedding's copy when ours is tied); biases of zero for a LayerNorm without them.
  normllama.norm records the norm (norm.c's name), which run reads back as the trained norm.

Matrices are f32, f16, bf16, or q8_0 and q4_0 in ggml's blocks (quantized as ggml's reference
quantizers do, fp16 scales; a matrix whose rows are not whole blocks of 32 is written f16, as
llama.cpp's quantizer falls back); norms f32.

Use (nllm_format's Config carries the fields):
    write_model(f, c, tensors, sentencepiece_vocab("tok512.model"), dtype="q8_0")
where tensors maps GGUF names (tensor_shapes(c) lists them, gguf_name maps ours) to arrays of
the PyTorch shape, in our row order; anything np.asarray takes and with a .shape works, read one
at a time as it is written. The 16-bit conversions are nllm_format's (those of our own files), so
that a GGUF and an NLLM file of one dtype hold the same weights. Problems raise nllm_format's
ExportError with a one-line message.
"""
import json
import math
import struct
from typing import NamedTuple

import numpy as np

from nllm_format import (TOKEN_BYTE, TOKEN_CONTROL, TOKEN_NORMAL,  # noqa: F401 (re-exported)
                         TOKEN_UNKNOWN, TOKEN_UNUSED, TOKEN_USER_DEFINED, ExportError, Vocab,
                         check_vocab, f32_to_bf16, f32_to_f16, sentencepiece_vocab)

MAGIC = b"GGUF"
VERSION = 3
ALIGNMENT = 32
MAX_NAME = 63  # ggml's GGML_MAX_NAME is 64 bytes with the NUL

# gguf_type: the value types of key/values
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, \
    FLOAT64 = range(13)
SCALAR_FORMATS = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
                  FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}


def round_away(v):
    """C's roundf (halves away from zero) of a float32 array, exactly: the fraction v - trunc(v)
    is exact, where adding 0.5 first can round (0.49999997 + 0.5 is 1.0 in float32)."""
    whole = np.trunc(v)
    return whole + np.sign(v) * (np.abs(v - whole) >= 0.5)


def blocks_of(a):
    """(rows, cols) float32 as (rows, cols / 32, 32) blocks of ggml's 32-value types."""
    rows, cols = a.shape
    return a.reshape(rows, cols // 32, 32)


def ggml_q8_0(a, where):
    """ggml's Q8_0 blocks (quantize_row_q8_0_ref): d = max |x| / 127, q = roundf(x * (1 / d)),
    in float32, d stored as the nearest half: 2 + 32 bytes a block."""
    x = blocks_of(a)
    d = np.abs(x).max(axis=2) / np.float32(127)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    q = round_away(x * inv[..., None]).astype(np.int8)
    return np.concatenate([d.astype("<f2")[..., None].view(np.uint8), q.view(np.uint8)], axis=2)


def ggml_q4_0(a, where):
    """ggml's Q4_0 blocks (quantize_row_q4_0_ref): m the value of largest magnitude (the first),
    d = m / -8, codes min(15, trunc(x * (1 / d) + 8.5)), d stored as the nearest half; byte j of
    the 16 holds value j in its low nibble and value j + 16 in its high one: 2 + 16 bytes."""
    x = blocks_of(a)
    m = np.take_along_axis(x, np.abs(x).argmax(axis=2)[..., None], axis=2)[..., 0]
    d = m / np.float32(-8)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    codes = np.minimum(15, np.trunc(x * inv[..., None] + np.float32(8.5))).astype(np.uint8)
    qs = codes[..., :16] | codes[..., 16:] << 4
    return np.concatenate([d.astype("<f2")[..., None].view(np.uint8), qs], axis=2)


# The tensor types written here: ggml_type id (ggml.h), llama.cpp's general.file_type
# (llama_ftype) of a file whose matrices are that type, values and bytes a block, and the
# conversion of a float32 (rows, cols) array (and its name, for a message) to the bytes stored
TENSOR_TYPES = {
    "f32": (0, 0, 1, 4, lambda a, where: a),
    "f16": (1, 1, 1, 2, f32_to_f16),
    "bf16": (30, 32, 1, 2, f32_to_bf16),
    "q8_0": (8, 7, 32, 34, ggml_q8_0),
    "q4_0": (2, 2, 32, 18, ggml_q4_0),
}

# our tensor names (nllm_format's tensor_order) -> llama.cpp's
GGUF_NAMES = {
    "token_embedding": "token_embd.weight", "attn_norm": "blk.{}.attn_norm.weight",
    "attn_norm_bias": "blk.{}.attn_norm.bias",
    "wq": "blk.{}.attn_q.weight", "wk": "blk.{}.attn_k.weight", "wv": "blk.{}.attn_v.weight",
    "wo": "blk.{}.attn_output.weight", "ffn_norm": "blk.{}.ffn_norm.weight",
    "ffn_norm_bias": "blk.{}.ffn_norm.bias",
    "w1": "blk.{}.ffn_gate.weight", "w2": "blk.{}.ffn_down.weight", "w3": "blk.{}.ffn_up.weight",
    "final_norm": "output_norm.weight", "final_norm_bias": "output_norm.bias",
    "wcls": "output.weight",
}


class Architecture(NamedTuple):
    name: str  # general.architecture
    eps_key: str  # the norms' eps, after "<name>."
    bias: bool  # its norms have a bias (beta), which llama.cpp requires
    rotate_half: bool  # RoPE pairs (i, i + head_size / 2): wq's and wk's rows permuted
    output: bool  # output.weight required (no tied classifier)


# the architecture of each norm run computes that llama.cpp has a graph for
ARCHITECTURES = {
    "rmsnorm": Architecture("llama", "attention.layer_norm_rms_epsilon", False, False, False),
    "layernorm": Architecture("stablelm", "attention.layer_norm_epsilon", True, True, True),
}


def architecture(c):
    """The architecture of the model c describes, or ExportError."""
    if c.norm not in ARCHITECTURES or (c.norm_bias and not ARCHITECTURES[c.norm].bias):
        raise ExportError(f"no llama.cpp architecture computes {c.norm}"
                          + (" with biases" if c.norm_bias else "") + "; GGUF takes rmsnorm "
                          "(llama) and layernorm (stablelm)")
    return ARCHITECTURES[c.norm]


def gguf_name(name, layer=None):
    """llama.cpp's name of our tensor `name` (of `layer` for the per-layer ones)."""
    return GGUF_NAMES[name].format(layer)


# ----------------------------------------------------------------------------
# Values and tensor infos


def string_bytes(text):
    raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return struct.pack("<Q", len(raw)) + raw


def value_bytes(vtype, value, where):
    """One value of type vtype; an ARRAY's value is (element type, sequence)."""
    if vtype == STRING:
        return string_bytes(value)
    if vtype == ARRAY:
        etype, items = value
        head = struct.pack("<IQ", etype, len(items))
        if etype in (STRING, ARRAY):
            return head + b"".join(value_bytes(etype, v, where) for v in items)
        fmt = SCALAR_FORMATS[etype]
        if np.dtype(fmt).kind in "iu" and len(items):  # numpy would wrap an integer around
            info, low, high = np.iinfo(fmt), min(items), max(items)
            if low < info.min or high > info.max:
                raise ExportError(f"{where}: {low if low < info.min else high} does not fit "
                                  f"{np.dtype(fmt).name}")
        return head + np.asarray(items, dtype=fmt).tobytes()  # a 32000-piece vocabulary at once
    try:
        return struct.pack(SCALAR_FORMATS[vtype], value)
    except (struct.error, KeyError) as e:
        raise ExportError(f"{where}: {value!r} is not a value of type {vtype} ({e})")


def kv_bytes(key, vtype, value):
    if vtype == ARRAY and value[0] == ARRAY:
        raise ExportError(f"{key}: arrays of arrays are not written here")
    return string_bytes(key) + struct.pack("<I", vtype) + value_bytes(vtype, value, key)


def align(n, alignment=ALIGNMENT):
    return -n % alignment


def tensor_info_bytes(name, shape, ggml_type, offset):
    dims = tuple(reversed(shape))  # ne[0] is the last (fastest-moving) PyTorch axis
    return (string_bytes(name) + struct.pack("<I", len(dims)) +
            struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", ggml_type, offset))


def tensor_bytes(shape, dtype):
    _, _, values, nbytes, _ = TENSOR_TYPES[dtype]
    return int(np.prod(shape)) // values * nbytes


def tensor_data(array, shape, dtype, where):
    """The bytes of one tensor of the PyTorch shape as dtype (a key of TENSOR_TYPES)."""
    a = np.ascontiguousarray(array, dtype="<f4")
    if a.shape != tuple(shape):
        raise ExportError(f"{where} has shape {a.shape}, expected {tuple(shape)}")
    if not np.isfinite(a).all():
        raise ExportError(f"{where} has a NaN or infinite value")
    return np.asarray(TENSOR_TYPES[dtype][4](a, where)).tobytes()


def write_gguf(f, metadata, tensors):
    """Writes a GGUF file to the binary file object f. metadata: (key, value type, value) in file
    order; tensors: (name, PyTorch shape, dtype, array-like or a function returning one) in file
    order, each array read (or made) when its data is written."""
    keys = [k for k, _, _ in metadata]
    names = [t[0] for t in tensors]
    for kind, seen in (("key", keys), ("tensor", names)):
        if len(set(seen)) != len(seen):
            raise ExportError(f"duplicate {kind} {next(n for n in seen if seen.count(n) > 1)}")
    for name in names:
        if len(name.encode("utf-8")) > MAX_NAME:
            raise ExportError(f"tensor name {name} is longer than {MAX_NAME} bytes")
    head = [MAGIC + struct.pack("<IQQ", VERSION, len(tensors), len(metadata))]
    head += [kv_bytes(key, vtype, value) for key, vtype, value in metadata]
    offset = 0
    for name, shape, dtype, _ in tensors:
        head.append(tensor_info_bytes(name, shape, TENSOR_TYPES[dtype][0], offset))
        offset += tensor_bytes(shape, dtype) + align(tensor_bytes(shape, dtype))
    head = b"".join(head)
    f.write(head + bytes(align(len(head))))
    for name, shape, dtype, array in tensors:
        data = tensor_data(array() if callable(array) else array, shape, dtype, name)
        f.write(data + bytes(align(len(data))))


# ----------------------------------------------------------------------------
# The model


def tensor_shapes(c):
    """{GGUF name: PyTorch shape} of the model c describes as its architecture holds it, in the
    order written (llama.cpp's converters' order: the embedding, the layers, the final norm and
    classifier)."""
    arch = architecture(c)
    kv_dim = c.n_kv_heads * (c.dim // c.n_heads)
    norms = ("norm", "norm_bias") if arch.bias else ("norm",)
    shapes = {gguf_name("token_embedding"): (c.vocab_size, c.dim)}
    for layer in range(c.n_layers):
        for name, shape in ([("attn_" + n, (c.dim,)) for n in norms] +
                            [("wq", (c.dim, c.dim)), ("wk", (kv_dim, c.dim)),
                             ("wv", (kv_dim, c.dim)), ("wo", (c.dim, c.dim))] +
                            [("ffn_" + n, (c.dim,)) for n in norms] +
                            [("w1", (c.hidden_dim, c.dim)), ("w2", (c.dim, c.hidden_dim)),
                             ("w3", (c.hidden_dim, c.dim))]):
            shapes[gguf_name(name, layer)] = shape
    for n in norms:
        shapes[gguf_name("final_" + n)] = (c.dim,)
    if arch.output or not c.shared_classifier:
        shapes[gguf_name("wcls")] = (c.vocab_size, c.dim)
    return shapes


def metadata(c, vocab, dtype, name):
    """The key/values llama.cpp's graph of the architecture reads (src/models/ and
    llama-model.cpp's hparams), the tokenizer's, the general ones and normllama.norm."""
    arch = architecture(c)
    a = arch.name
    head_size = c.dim // c.n_heads
    return [
        ("general.architecture", STRING, a),
        ("general.name", STRING, name),
        ("general.file_type", UINT32, TENSOR_TYPES[dtype][1]),
        ("general.alignment", UINT32, ALIGNMENT),
        (f"{a}.context_length", UINT32, c.seq_len),
        (f"{a}.embedding_length", UINT32, c.dim),
        (f"{a}.block_count", UINT32, c.n_layers),
        (f"{a}.feed_forward_length", UINT32, c.hidden_dim),
        (f"{a}.attention.head_count", UINT32, c.n_heads),
        (f"{a}.attention.head_count_kv", UINT32, c.n_kv_heads),
        (f"{a}.{arch.eps_key}", FLOAT32, c.norm_eps),
        (f"{a}.rope.freq_base", FLOAT32, c.rope_theta),
        (f"{a}.rope.dimension_count", UINT32, head_size),
        (f"{a}.vocab_size", UINT32, len(vocab.tokens)),
        ("normllama.norm", STRING, c.norm),
    ] + (bpe_keys(vocab) if isinstance(vocab, BpeVocab) else sentencepiece_keys(vocab))


def sentencepiece_keys(vocab):
    """tokenizer.ggml.* of a SentencePiece vocabulary (nllm_format.sentencepiece_vocab's)."""
    return [
        ("tokenizer.ggml.model", STRING, "llama"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, vocab.tokens)),
        ("tokenizer.ggml.scores", ARRAY, (FLOAT32, vocab.scores)),
        ("tokenizer.ggml.token_type", ARRAY, (INT32, vocab.token_types)),
        ("tokenizer.ggml.bos_token_id", UINT32, vocab.bos_id),
        ("tokenizer.ggml.eos_token_id", UINT32, vocab.eos_id),
        ("tokenizer.ggml.unknown_token_id", UINT32, vocab.unk_id),
        ("tokenizer.ggml.add_bos_token", BOOL, True),
        ("tokenizer.ggml.add_eos_token", BOOL, False),
        ("tokenizer.ggml.add_space_prefix", BOOL, vocab.add_space_prefix),
        ("tokenizer.ggml.remove_extra_whitespaces", BOOL, vocab.remove_extra_whitespaces),
    ] + ([("tokenizer.chat_template", STRING, vocab.chat_template)] if vocab.chat_template else [])


def rotate_half(w, n_heads):
    """w's rows (n_heads heads of head_size) with each head's in rotate-half order: row 2i of a
    head to row i, row 2i + 1 to row head_size / 2 + i (as Hugging Face's checkpoints hold them)."""
    rows, cols = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def write_model(f, c, tensors, vocab, dtype="f32", name="normllama"):
    """Writes the model c describes (nllm_format's Config: dim, hidden_dim, n_layers, n_heads,
    n_kv_heads, vocab_size, seq_len, rope_theta, norm_eps, norm, norm_bias, shared_classifier) as a
    GGUF of its architecture to the binary file object f: matrices as dtype (TENSOR_TYPES; q8_0
    and q4_0 fall back to f16 for rows that are not whole blocks of 32), norms as f32.
    tensors: {GGUF name: array-like of the PyTorch shape} of our model: tensor_shapes(c)'s but
    output.weight when tied and the norms' biases when it has none, which are made here."""
    arch = architecture(c)
    if dtype not in TENSOR_TYPES:
        raise ExportError(f"dtype {dtype} is not one of {', '.join(TENSOR_TYPES)}")
    if isinstance(vocab, BpeVocab):
        if len(vocab.tokens) != c.vocab_size:
            raise ExportError(f"the vocabulary has {len(vocab.tokens)} tokens but the model's "
                              f"vocab_size is {c.vocab_size}")
    else:
        check_vocab(vocab, c, "the vocabulary")
    shapes = tensor_shapes(c)
    made = {}  # what the architecture holds that our model does not
    if arch.output and c.shared_classifier:
        made[gguf_name("wcls")] = gguf_name("token_embedding")
    if arch.bias and not c.norm_bias:
        made.update({n: None for n in shapes if n.endswith(".bias")})
    wanted = shapes.keys() - made.keys()
    missing, extra = sorted(wanted - tensors.keys()), sorted(tensors.keys() - wanted)
    if missing:
        raise ExportError(f"tensor {missing[0]} is missing")
    if extra:
        raise ExportError(f"tensor {extra[0]} is not part of the model its config describes")

    def array(n):
        if n in made:
            return tensors[made[n]] if made[n] else np.zeros(shapes[n], np.float32)
        t = tensors[n]
        if arch.rotate_half and n.endswith(("attn_q.weight", "attn_k.weight")):
            t = rotate_half(np.asarray(t, np.float32),
                            c.n_heads if n.endswith("attn_q.weight") else c.n_kv_heads)
        return t

    def stored(shape):
        blocks = TENSOR_TYPES[dtype][2]
        return "f32" if len(shape) == 1 else dtype if shape[1] % blocks == 0 else "f16"

    listed = [(n, s, stored(s), lambda n=n: array(n)) for n, s in shapes.items()]
    rope_freqs = getattr(c, "rope_freqs", None)
    if rope_freqs is not None:  # Llama 3's RoPE scaling, as convert_hf_to_gguf.py writes it
        listed.append(("rope_freqs.weight", (len(rope_freqs),), "f32", rope_freqs))
    write_gguf(f, metadata(c, vocab, dtype, name), listed)


def llama3_rope_freqs(scaling, head_size, theta, where):
    """rope_freqs.weight of a config.json's rope_scaling of type llama3 (Llama 3.1, 3.2, 3.3): the
    divisor of each pair's frequency theta^(-2i / head_size), as convert_hf_to_gguf.py's
    LlamaModel writes it and llama.cpp divides by it (transformers' _compute_llama3_parameters
    as divisors): 1 for wavelengths under original_max_position_embeddings / high_freq_factor,
    factor over original / low_freq_factor, between them 1 / ((1 - s) / factor + s) with s =
    (original / wavelength - low) / (high - low). Other types are refused."""
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind != "llama3":
        raise ExportError(f"{where}: unsupported rope_scaling {scaling} (only rope_type llama3)")
    values = {}
    for key in ("factor", "low_freq_factor", "high_freq_factor",
                "original_max_position_embeddings"):
        v = scaling.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            raise ExportError(f"{where}: rope_scaling's {key} is {v!r}, not a positive number")
        values[key] = float(v)
    factor, low, high = values["factor"], values["low_freq_factor"], values["high_freq_factor"]
    original = values["original_max_position_embeddings"]
    if not low < high:
        raise ExportError(f"{where}: rope_scaling's low_freq_factor {low} is not below its "
                          f"high_freq_factor {high}")
    out = []
    for i in range(0, head_size, 2):
        wavelength = 2 * math.pi * theta ** (i / head_size)
        if wavelength < original / high:
            out.append(1.0)
        elif wavelength > original / low:
            out.append(factor)
        else:
            s = (original / wavelength - low) / (high - low)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, np.float32)

# ----------------------------------------------------------------------------
# Byte-level BPE vocabularies (GPT-2, Llama 3, Qwen, SmolLM): a Hugging Face tokenizer.json into
# a vocabulary-only GGUF, the tokenizer.ggml.* keys llama.cpp's convert_hf_to_gguf.py writes
# (bpe.h reads them), as llama.cpp ships vocabularies (its models/ggml-vocab-*.gguf)

# The pre-tokenizers run knows (bpe_pretok.h), by their tokenizer.json pre_tokenizer: GGUF's
# tokenizer.ggml.pre name -> (type, Split regex or None, individual digits first)
_LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
BPE_PRE_TOKENIZERS = {
    "llama-bpe": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": _LLAMA3_REGEX}, "behavior": "Isolated",
         "invert": False},
        {"type": "ByteLevel", "use_regex": False}]},
    "qwen2": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": _LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "use_regex": False}]},
    "gpt-2": {"type": "ByteLevel", "use_regex": True},
    "smollm": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, {"type": "ByteLevel", "use_regex": True}]},
}


def _parts(pre):
    """The pre-tokenizers of a pre_tokenizer, a Sequence's in order."""
    if not pre:
        return []
    return pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]


def bpe_pre_name(tokenizer):
    """GGUF's tokenizer.ggml.pre of a tokenizer.json (dict): the family whose pre-tokenizers have
    the same settings, in order (those BPE_PRE_TOKENIZERS lists; others, such as ByteLevel's
    add_prefix_space, do not change the words); else ExportError showing what it has."""
    parts = _parts(tokenizer.get("pre_tokenizer"))
    for name, pre in BPE_PRE_TOKENIZERS.items():
        known = _parts(pre)
        if len(parts) == len(known) and all(all(p.get(k) == v for k, v in q.items())
                                            for p, q in zip(parts, known)):
            return name
    shown = json.dumps(tokenizer.get("pre_tokenizer"), ensure_ascii=False)
    raise ExportError(f"unknown pre-tokenizer {shown[:200]} (run knows "
                      f"{', '.join(BPE_PRE_TOKENIZERS)})")


class BpeVocab:
    """A byte-level BPE vocabulary as GGUF's tokenizer.ggml.* keys hold it."""

    def __init__(self, tokens, token_types, merges, pre, bos_id=None, eos_id=None, eot_id=None,
                 add_bos=False):
        self.tokens, self.token_types, self.merges, self.pre = tokens, token_types, merges, pre
        self.bos_id, self.eos_id, self.eot_id, self.add_bos = bos_id, eos_id, eot_id, add_bos


def _token_content(value):
    """A tokenizer_config.json token: a string, or an AddedToken dict with its content."""
    return value.get("content") if isinstance(value, dict) else value


# end-of-turn tokens, as llama.cpp looks for them (llama-vocab.cpp's special_eot_id)
EOT_TOKENS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")


def looks_special(text):
    """convert_hf_to_gguf.py's does_token_look_special: an added token named as control tokens
    are (<|...|>, or its full-width ｜ form) is written as one even when tokenizer.json does not
    call it special (Qwen's <|fim_prefix|>), so that llama.cpp never takes it from plain text."""
    return ((text.startswith("<|") and text.endswith("|>")) or
            (text.startswith("<\uff5c") and text.endswith("\uff5c>")))


def bpe_vocab(tokenizer, config=None, pre=None):
    """The BpeVocab of a tokenizer.json (dict) with its tokenizer_config.json (dict or None), as
    convert_hf_to_gguf.py makes it: every id up to the largest (a hole an unused "[PAD<id>]"),
    model.vocab's tokens normal, added tokens control when special or looks_special, else
    user-defined (their own text, not byte-level), merges as "LEFT RIGHT". pre:
    tokenizer.ggml.pre, or None to recognize it from the pre_tokenizer."""
    model = tokenizer.get("model", {})
    if model.get("type") != "BPE":
        raise ExportError(f"the tokenizer model is {model.get('type')}, not BPE")
    if (tokenizer.get("normalizer") or {}).get("type") not in (None, "NFC"):
        raise ExportError(f"normalizer {tokenizer['normalizer'].get('type')} is not supported")
    config = config or {}
    pre = pre or bpe_pre_name(tokenizer)
    added = tokenizer.get("added_tokens", [])
    ids = list(model["vocab"].values()) + [a["id"] for a in added]
    n = max(ids) + 1
    tokens, types = [f"[PAD{i}]" for i in range(n)], [TOKEN_UNUSED] * n
    for text, i in model["vocab"].items():
        tokens[i], types[i] = text, TOKEN_NORMAL
    for a in added:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = TOKEN_CONTROL if a.get("special") or looks_special(a["content"]) \
            else TOKEN_USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    index = {t: i for i, t in enumerate(tokens) if types[i] != TOKEN_UNUSED}

    def special_id(key):
        content = _token_content(config.get(key))
        return index.get(content) if content else None

    eot = next((index[t] for t in EOT_TOKENS if t in index and types[index[t]] == TOKEN_CONTROL),
               None)
    add_bos = config.get("add_bos_token", pre == "llama-bpe")  # llama.cpp's default for llama-bpe
    return BpeVocab(tokens, types, merges, pre, special_id("bos_token"), special_id("eos_token"),
                    eot, bool(add_bos))


def gpt2_tokenizer_json(encoder, merges_text):
    """GPT-2's tokenizer.json (dict) from its encoder.json (dict) and vocab.bpe (text), as Hugging
    Face's gpt2 repository has it: <|endoftext|> its one added token, special."""
    merges = [line for line in merges_text.split("\n")[1:] if line]  # after "#version: 0.2"
    end = "<|endoftext|>"
    return {"added_tokens": [{"id": encoder[end], "content": end, "single_word": False,
                              "lstrip": False, "rstrip": False, "normalized": True,
                              "special": True}],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                              "use_regex": True},
            "post_processor": {"type": "ByteLevel", "add_prefix_space": False,
                               "trim_offsets": False, "use_regex": True},
            "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": "", "end_of_word_suffix": "",
                      "fuse_unk": False, "byte_fallback": False, "vocab": encoder,
                      "merges": merges}}


def bpe_metadata(vocab, name):
    """The key/values of a vocabulary-only GGUF: general.*, and tokenizer.ggml.* as bpe.h lists
    them. llama.cpp loads it with vocab_only (general.architecture llama)."""
    return [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, name),
        ("general.alignment", UINT32, ALIGNMENT),
        ("llama.vocab_size", UINT32, len(vocab.tokens)),
    ] + bpe_keys(vocab)


def bpe_keys(vocab):
    """tokenizer.ggml.* of a BpeVocab, as bpe.h lists them."""
    meta = [
        ("tokenizer.ggml.model", STRING, "gpt2"),
        ("tokenizer.ggml.pre", STRING, vocab.pre),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, vocab.tokens)),
        ("tokenizer.ggml.token_type", ARRAY, (INT32, vocab.token_types)),
        ("tokenizer.ggml.merges", ARRAY, (STRING, vocab.merges)),
    ]
    for key, value in (("bos", vocab.bos_id), ("eos", vocab.eos_id), ("eot", vocab.eot_id)):
        if value is not None:
            meta.append((f"tokenizer.ggml.{key}_token_id", UINT32, value))
    meta.append(("tokenizer.ggml.add_bos_token", BOOL, vocab.add_bos))
    meta.append(("tokenizer.ggml.add_eos_token", BOOL, False))
    return meta


def write_bpe_vocab(f, vocab, name="vocab"):
    """Writes the BpeVocab as a vocabulary-only GGUF (no tensors) to the binary file object f."""
    write_gguf(f, bpe_metadata(vocab, name), [])
