"""GGUF writer: a llama-architecture model file that llama.cpp runs, written from the format's
specification (ggml's docs/gguf.md, version 3; the layout summary opens ggml/include/gguf.h in
llama.cpp's source), not from gguf-py.

The file, every number little-endian:
  "GGUF", uint32 version 3, uint64 tensor count, uint64 key/value count
  key/values: string key, uint32 value type, value (an array: uint32 element type, uint64 count,
      the elements); a string is uint64 length + UTF-8 bytes, no NUL
  tensor infos: string name, uint32 n_dims, uint64 dims (ne[0], the fastest-moving, first),
      uint32 ggml type, uint64 offset into the data section (a multiple of the alignment)
  zero padding to the alignment (general.alignment, written here as 32, GGUF's default), then
      the data section: each tensor's bytes, zero-padded to the alignment

A PyTorch matrix (rows, cols) is a GGUF tensor of dims [cols, rows] with the same bytes.

The llama architecture (llama.cpp's src/models/llama.cpp): RMSNorm, RoPE of LLAMA_ROPE_TYPE_NORM,
which rotates the pairs (2i, 2i + 1) of each head as llama2.c and Meta's checkpoints do, so wq
and wk are written as they are (llama.cpp's convert_hf_to_gguf.py permutes Hugging Face's
rotate-half rows back into this order; our models never hold that order); SwiGLU feed-forward;
grouped kv heads; an output matrix, or none for a classifier tied to the embedding.

Use (nllm_format's Config carries the fields):
    write_llama(f, c, tensors, sentencepiece_vocab("tok512.model"), dtype="f16")
where tensors maps GGUF names (llama_tensor_shapes(c) lists them, gguf_name maps ours) to arrays
of the PyTorch shape; anything np.asarray takes and with a .shape works, read one at a time as
it is written. The 16-bit conversions are nllm_format's (those of our own files), so that a GGUF
and an NLLM file of one dtype hold the same weights. Problems raise nllm_format's ExportError
with a one-line message.
"""
import json
import struct

import numpy as np

from nllm_format import ExportError, f32_to_bf16, f32_to_f16

MAGIC = b"GGUF"
VERSION = 3
ALIGNMENT = 32
MAX_NAME = 63  # ggml's GGML_MAX_NAME is 64 bytes with the NUL

# gguf_type: the value types of key/values
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, \
    FLOAT64 = range(13)
SCALAR_FORMATS = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
                  FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}

# The tensor types written here: ggml_type id (ggml.h), llama.cpp's general.file_type
# (llama_ftype) of a file whose matrices are all of that type, bytes a value, and the conversion
# of a float32 array (and its name, for a message) to the values stored
TENSOR_TYPES = {
    "f32": (0, 0, 4, lambda a, where: a),
    "f16": (1, 1, 2, f32_to_f16),
    "bf16": (30, 32, 2, lambda a, where: f32_to_bf16(a)),
}

# SentencePiece token types (llama_token_type)
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = \
    range(1, 7)

# our tensor names (export.py's tensor_order) -> llama.cpp's
LLAMA_NAMES = {
    "token_embedding": "token_embd.weight", "attn_norm": "blk.{}.attn_norm.weight",
    "wq": "blk.{}.attn_q.weight", "wk": "blk.{}.attn_k.weight", "wv": "blk.{}.attn_v.weight",
    "wo": "blk.{}.attn_output.weight", "ffn_norm": "blk.{}.ffn_norm.weight",
    "w1": "blk.{}.ffn_gate.weight", "w2": "blk.{}.ffn_down.weight", "w3": "blk.{}.ffn_up.weight",
    "final_norm": "output_norm.weight", "wcls": "output.weight",
}


def gguf_name(name, layer=None):
    """llama.cpp's name of our tensor `name` (of `layer` for the per-layer ones)."""
    return LLAMA_NAMES[name].format(layer)


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
    return int(np.prod(shape)) * TENSOR_TYPES[dtype][2]


def tensor_data(array, shape, dtype, where):
    """The bytes of one tensor of the PyTorch shape as dtype (a key of TENSOR_TYPES)."""
    a = np.ascontiguousarray(array, dtype="<f4")
    if a.shape != tuple(shape):
        raise ExportError(f"{where} has shape {a.shape}, expected {tuple(shape)}")
    if not np.isfinite(a).all():
        raise ExportError(f"{where} has a NaN or infinite value")
    return TENSOR_TYPES[dtype][3](a, where).tobytes()


def write_gguf(f, metadata, tensors):
    """Writes a GGUF file to the binary file object f. metadata: (key, value type, value) in file
    order; tensors: (name, PyTorch shape, dtype, array-like) in file order, each array read when
    its data is written."""
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
        data = tensor_data(array, shape, dtype, name)
        f.write(data + bytes(align(len(data))))


# ----------------------------------------------------------------------------
# The llama architecture


class Vocab:
    """A SentencePiece vocabulary as GGUF's tokenizer.ggml.* keys hold it."""

    def __init__(self, tokens, scores, token_types, bos_id, eos_id, unk_id,
                 add_space_prefix=True, remove_extra_whitespaces=True):
        self.tokens, self.scores, self.token_types = tokens, scores, token_types
        self.bos_id, self.eos_id, self.unk_id = bos_id, eos_id, unk_id
        self.add_space_prefix = add_space_prefix
        self.remove_extra_whitespaces = remove_extra_whitespaces


def sentencepiece_vocab(path):
    """The vocabulary of a SentencePiece .model file. Its normalizer's two settings are read off
    its behaviour (the protobuf module is not a dependency): a dummy prefix makes "x"'s first
    piece start with U+2581, and removing extra whitespace turns "a  b" back into "a b"."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=path)
    n = sp.vocab_size()

    def token_type(i):
        for test, kind in ((sp.is_unknown, TOKEN_UNKNOWN), (sp.is_control, TOKEN_CONTROL),
                           (sp.is_unused, TOKEN_UNUSED), (sp.is_byte, TOKEN_BYTE)):
            if test(i):
                return kind
        return TOKEN_NORMAL

    return Vocab([sp.id_to_piece(i) for i in range(n)], [sp.get_score(i) for i in range(n)],
                 [token_type(i) for i in range(n)], sp.bos_id(), sp.eos_id(), sp.unk_id(),
                 add_space_prefix=sp.encode("x", out_type=str)[0].startswith("\u2581"),
                 remove_extra_whitespaces=sp.decode(sp.encode("a  b")) == "a b")


def llama_tensor_shapes(c):
    """{GGUF name: PyTorch shape} of the model c describes, in the order written (llama.cpp's
    converters' order: the embedding, the layers, the final norm and classifier)."""
    kv_dim = c.n_kv_heads * (c.dim // c.n_heads)
    shapes = {gguf_name("token_embedding"): (c.vocab_size, c.dim)}
    for layer in range(c.n_layers):
        for name, shape in (("attn_norm", (c.dim,)), ("wq", (c.dim, c.dim)),
                            ("wk", (kv_dim, c.dim)), ("wv", (kv_dim, c.dim)),
                            ("wo", (c.dim, c.dim)), ("ffn_norm", (c.dim,)),
                            ("w1", (c.hidden_dim, c.dim)), ("w2", (c.dim, c.hidden_dim)),
                            ("w3", (c.hidden_dim, c.dim))):
            shapes[gguf_name(name, layer)] = shape
    shapes[gguf_name("final_norm")] = (c.dim,)
    if not c.shared_classifier:
        shapes[gguf_name("wcls")] = (c.vocab_size, c.dim)
    return shapes


def llama_metadata(c, vocab, dtype, name):
    """The key/values llama.cpp's llama architecture reads (src/models/llama.cpp and
    llama-model.cpp's hparams), the tokenizer's and the general ones."""
    head_size = c.dim // c.n_heads
    n = len(vocab.tokens)
    return [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, name),
        ("general.file_type", UINT32, TENSOR_TYPES[dtype][1]),
        ("general.alignment", UINT32, ALIGNMENT),
        ("llama.context_length", UINT32, c.seq_len),
        ("llama.embedding_length", UINT32, c.dim),
        ("llama.block_count", UINT32, c.n_layers),
        ("llama.feed_forward_length", UINT32, c.hidden_dim),
        ("llama.attention.head_count", UINT32, c.n_heads),
        ("llama.attention.head_count_kv", UINT32, c.n_kv_heads),
        ("llama.attention.layer_norm_rms_epsilon", FLOAT32, c.norm_eps),
        ("llama.rope.freq_base", FLOAT32, c.rope_theta),
        ("llama.rope.dimension_count", UINT32, head_size),
        ("llama.vocab_size", UINT32, n),
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
    ]


def write_llama(f, c, tensors, vocab, dtype="f32", name="normllama"):
    """Writes the model c describes (nllm_format's Config: dim, hidden_dim, n_layers, n_heads,
    n_kv_heads, vocab_size, seq_len, rope_theta, norm_eps, norm, shared_classifier) as a llama
    GGUF to the binary file object f: matrices as dtype ("f32", "f16" or "bf16"), norm weights
    as f32.
    tensors: {GGUF name: array-like of the PyTorch shape}, exactly llama_tensor_shapes(c)'s."""
    if c.norm != "rmsnorm" or c.norm_bias:
        raise ExportError(f"the llama architecture is RMSNorm's without biases, not {c.norm}'s"
                          + (" with biases" if c.norm_bias else ""))
    if dtype not in TENSOR_TYPES:
        raise ExportError(f"dtype {dtype} is not one of {', '.join(TENSOR_TYPES)}")
    if len(vocab.tokens) != c.vocab_size:
        raise ExportError(f"the vocabulary has {len(vocab.tokens)} pieces, the model vocab_size "
                          f"{c.vocab_size}")
    shapes = llama_tensor_shapes(c)
    missing, extra = sorted(shapes.keys() - tensors.keys()), sorted(tensors.keys() - shapes.keys())
    if missing:
        raise ExportError(f"tensor {missing[0]} is missing")
    if extra:
        raise ExportError(f"tensor {extra[0]} is not part of the model its config describes")
    listed = [(n, s, dtype if len(s) == 2 else "f32", tensors[n]) for n, s in shapes.items()]
    write_gguf(f, llama_metadata(c, vocab, dtype, name), listed)


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
    meta = [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, name),
        ("general.alignment", UINT32, ALIGNMENT),
        ("llama.vocab_size", UINT32, len(vocab.tokens)),
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
