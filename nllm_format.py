"""normllama's model file (docs/FORMAT.md) in Python: the one description of it that export.py,
train.py, the tools and the tests write and read it by. The header (Config, header_bytes), the
tensors in file order (tensor_order), the weight dtypes (DTYPES: each one's header code, group
sizes and conversions to and from float32, checked against run's C table by tests/test_export.py),
the vocabulary a file carries (Vocab, read from a SentencePiece model by sentencepiece_vocab, and
its tokenizer section, tokenizer_bytes), the writer (write_model) and the reader (read_model), and
Output, the file an export is written through. Needs numpy (and tqdm for write_model's progress
bar; sentencepiece to read a vocabulary).
"""
import json
import numbers
import os
import struct
import tempfile
from typing import Callable, NamedTuple

import numpy as np

MAGIC = 0x4D4C4C4E  # "NLLM" on disk
VERSION = 1
HEADER_BYTES = 256
ALIGN = 64  # of every tensor, as export.py and train.py write it (the header allows 4..4096)
# the trained norm's header code, by run's name of the norm (norm.c, format.c)
NORM_CODES = {"rmsnorm": 0, "layernorm": 1, "rmsnorm_bias": 2, "rmsnorm_learned_eps": 3,
              "prmsnorm": 4, "dyt": 5, "identity": 6}
NORMS = tuple(NORM_CODES)  # in the order of their codes
TWINS = ("rmsnorm", "layernorm")  # the twin study's pair; the others are its siblings
BIASED = ("layernorm", "rmsnorm_bias", "dyt")  # the norms that learn a bias (beta)
# the norms that learn one scalar per norm site, and its name: the file's tensors
# attn_norm_<it>, ffn_norm_<it>, final_norm_<it> (docs/FORMAT.md), the module's parameter
SITE_SCALARS = {"rmsnorm_learned_eps": "log_eps", "dyt": "alpha"}
MATRICES = {"token_embedding", "wq", "wk", "wv", "wo", "w1", "w2", "w3", "wcls"}  # norms stay f32
MAX_SIZE = 1 << 20  # run's bound on every size field of the header (format.c, check_config)

# The header's fields in file order and their struct layout; zeros fill it to HEADER_BYTES. norm
# and dtype are their codes (NORM_CODES, DTYPES), norm_bias and shared (the shared classifier) 0
# or 1, align the alignment of every tensor, vocab_bytes the size of the tokenizer section that
# ends the file (0: none) and vocab_flags its normalizer's options (VOCAB_REMOVE_EXTRA_WHITESPACES).
HEADER = struct.Struct("<II7iffIIIIIIII")
SIZE_FIELDS = ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len")
HEADER_FIELDS = ("magic", "version", *SIZE_FIELDS, "rope_theta", "norm_eps", "norm", "norm_bias",
                 "shared", "dtype", "align", "group_size", "vocab_bytes", "vocab_flags")
VOCAB_REMOVE_EXTRA_WHITESPACES = 1


class ExportError(Exception):
    """A problem with what an export reads or writes (a header run would refuse, a tensor of the
    wrong shape, a file that cannot be written, a checkpoint that cannot be read), reported as one
    line without a traceback."""


# ----------------------------------------------------------------------------
# The header


def shown(value):
    """value for a message. Python refuses to print an integer of more than 4300 digits; one past
    64 bits is no size of any header field, so its length is named instead."""
    if isinstance(value, numbers.Integral) and int(value).bit_length() > 64:
        return f"a {int(value).bit_length()}-bit integer"
    return repr(value)


def size_field(name, value):
    """A size of the header as run accepts it: an integer in 1..MAX_SIZE."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ExportError(f"{name} is {shown(value)}, not an integer")
    if not 1 <= value <= MAX_SIZE:
        raise ExportError(f"{name} is {shown(value)}, outside 1..{MAX_SIZE}")
    return int(value)


def float_field(name, value, low, high):
    """A float32 of the header, strictly between low and high as run requires (NaN fails)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ExportError(f"{name} is {shown(value)}, not a number")
    # run compares the stored float32: rounding can put a value just inside a bound onto it
    if not (low < value < high and np.float32(low) < np.float32(value) < np.float32(high)):
        raise ExportError(f"{name} is {shown(value)}, outside ({low:g}, {high:g})")
    return float(np.float32(value))


class Config:
    """The model a file holds: the header fields of docs/FORMAT.md but the file's own (magic,
    version, dtype, alignment, group_size), refused here when run's loader would refuse them
    (format.c, check_config), so that no file run cannot load is written; rope_theta and norm_eps
    as their float32. nllm_model.Transformer takes its shape from it. keys: the input's own name of
    each field it names otherwise (export.py's HF_KEYS), so that a message names what it holds."""

    def __init__(self, dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len,
                 rope_theta=10000.0, norm_eps=1e-5, norm="rmsnorm", norm_bias=False,
                 shared_classifier=False, keys=None):
        def name(field):
            return (keys or {}).get(field, field)

        self.dim = size_field(name("dim"), dim)
        self.hidden_dim = size_field(name("hidden_dim"), hidden_dim)
        self.n_layers = size_field(name("n_layers"), n_layers)
        self.n_heads = size_field(name("n_heads"), n_heads)
        self.n_kv_heads = size_field(name("n_kv_heads"), n_kv_heads)
        self.vocab_size = size_field(name("vocab_size"), vocab_size)
        self.seq_len = size_field(name("seq_len"), seq_len)
        self.rope_theta = float_field(name("rope_theta"), rope_theta, 1, 1e12)
        self.norm_eps = float_field(name("norm_eps"), norm_eps, 0, 1)
        if norm not in NORM_CODES:
            raise ExportError(f"{name('norm')} is {shown(norm)}, not one of {', '.join(NORMS)}")
        self.norm, self.norm_bias = norm, bool(norm_bias)
        self.shared_classifier = bool(shared_classifier)
        if self.vocab_size < 3:
            raise ExportError(f"{name('vocab_size')} {self.vocab_size} is too small: ids 0, 1, 2 "
                              "are <unk>, <s>, </s>")
        if self.dim % self.n_heads:
            raise ExportError(f"{name('dim')} {self.dim} is not a multiple of {name('n_heads')} "
                              f"{self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ExportError(f"{name('n_heads')} {self.n_heads} is not a multiple of "
                              f"{name('n_kv_heads')} {self.n_kv_heads}")
        if self.head_size % 2:
            raise ExportError(f"head_size {self.head_size} ({name('dim')} / "
                              f"{name('n_heads')}) is odd; RoPE rotates pairs")

    @property
    def head_size(self):
        return self.dim // self.n_heads

    @property
    def kv_dim(self):
        return self.n_kv_heads * self.head_size


def norm_tensors(c, site):
    """The tensors of one kind of norm site ("attn_norm", "ffn_norm" or "final_norm") in file
    order: its weight, its bias when the file has biases, its learned scalar (SITE_SCALARS, shape
    (1,) a site) when the trained norm learns one."""
    per_layer = site != "final_norm"
    tensors = [(site, per_layer, (c.dim,))]
    if c.norm_bias:
        tensors.append((f"{site}_bias", per_layer, (c.dim,)))
    if c.norm in SITE_SCALARS:
        tensors.append((f"{site}_{SITE_SCALARS[c.norm]}", per_layer, (1,)))
    return tensors


def tensor_order(c):
    """(name, per_layer, shape of one layer or of the whole tensor), in file order."""
    order = [("token_embedding", False, (c.vocab_size, c.dim)), *norm_tensors(c, "attn_norm")]
    order += [("wq", True, (c.dim, c.dim)), ("wk", True, (c.kv_dim, c.dim)),
              ("wv", True, (c.kv_dim, c.dim)), ("wo", True, (c.dim, c.dim)),
              *norm_tensors(c, "ffn_norm")]
    order += [("w1", True, (c.hidden_dim, c.dim)), ("w2", True, (c.dim, c.hidden_dim)),
              ("w3", True, (c.hidden_dim, c.dim)), *norm_tensors(c, "final_norm")]
    if not c.shared_classifier:
        order.append(("wcls", False, (c.vocab_size, c.dim)))
    return order


def header_bytes(c, dtype="f32", group_size=None, vocab=None):
    """The 256-byte header of c's file with matrices of dtype and, for a dtype with scales, its
    group_size (None: the dtype's default, the first of DTYPES's), and vocab's tokenizer section
    (a Vocab, or None for a file without one)."""
    d = DTYPES[dtype]
    fields = dict(magic=MAGIC, version=VERSION, dim=c.dim, hidden_dim=c.hidden_dim,
                  n_layers=c.n_layers, n_heads=c.n_heads, n_kv_heads=c.n_kv_heads,
                  vocab_size=c.vocab_size, seq_len=c.seq_len, rope_theta=c.rope_theta,
                  norm_eps=c.norm_eps, norm=NORM_CODES[c.norm], norm_bias=int(c.norm_bias),
                  shared=int(c.shared_classifier), dtype=d.code, align=ALIGN,
                  group_size=d.header_group_size(group_size),
                  vocab_bytes=len(tokenizer_bytes(vocab)) if vocab else 0,
                  vocab_flags=vocab.flags() if vocab else 0)
    h = HEADER.pack(*(fields[name] for name in HEADER_FIELDS))
    return h + bytes(HEADER_BYTES - len(h))


# ----------------------------------------------------------------------------
# The weight dtypes: float32 to what the file stores, and back


F16_MAX = 65504.0  # the largest finite IEEE half
# the largest finite bf16 (bits 0x7F7F), and the f32 halfway to the next step, which ties to
# even (0x7F80: infinity)
BF16_MAX = float(np.array([0x7F7F0000], np.uint32).view(np.float32)[0])
BF16_ROUNDS_TO_INF = float(np.array([0x7F7F8000], np.uint32).view(np.float32)[0])


def f32_to_bf16(a, where):
    """Each f32 rounded to the nearest bf16 (ties to even), as uint16: the upper 16 bits after
    adding half the lower half's range (less one when the upper half is even). Chosen on
    accuracy: against the f32 file's logits over all 1741 positions of data/stories.txt on
    stories260K, mean |error| 0.0161 and max 0.165, where truncation (the upper 16 bits alone,
    each weight moved toward zero by 0.5 bf16 ulp on average) gave 0.0251 and 0.257;
    tests/test_f64.py bounds the error by what rounding to nearest makes. A value that would
    round to infinity (|w| >= BF16_ROUNDS_TO_INF) is refused, as f32_to_f16 does."""
    a = np.ascontiguousarray(a, dtype="<f4")
    big = float(np.abs(a).max(initial=0.0))
    if big >= BF16_ROUNDS_TO_INF:
        raise ExportError(f"{where} has a value of magnitude {big:g}, beyond bf16's largest "
                          f"{BF16_MAX:g}")
    bits = a.view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def bf16_to_f32(u16):
    """bf16 is the high half of an f32: shift the 16 bits into the high half."""
    return (u16.astype(np.uint32) << 16).view(np.float32)


Q4_GROUP = 32  # q4_0's values per scale


def f32_to_f16(a, where):
    """Each f32 rounded to the nearest IEEE half (ties to even), as uint16 bits. A value that would
    round to infinity (|w| >= 65520) is refused: run would stop on the non-finite logit."""
    a = np.ascontiguousarray(a, dtype="<f4")
    big = float(np.abs(a).max(initial=0.0))
    if big >= F16_MAX + 16:  # halfway to the next power of two's step rounds up to infinity
        raise ExportError(f"{where} has a value of magnitude {big:g}, beyond f16's largest "
                          f"{F16_MAX:g}")
    return a.astype("<f2").view("<u2")


def groups_of(a, group_size):
    """(rows, cols) -> (rows, ceil(cols / group_size), group_size) float32, the last group of each
    row padded with zeros when cols is not a multiple."""
    rows, cols = a.shape
    n_groups = -(-cols // group_size)
    padded = np.zeros((rows, n_groups * group_size), np.float32)
    padded[:, :cols] = a
    return padded.reshape(rows, n_groups, group_size)


def per_value(scales, group_size, cols):
    """(rows, groups) scales -> (rows, cols), each value's scale."""
    return np.repeat(scales, group_size, axis=1)[:, :cols]


def quantize_q8_0(a, group_size):
    """(rows, cols) f32 -> int8 values (rows, cols) and f32 scales (rows, ceil(cols / group_size)):
    each group of group_size values along a row (the last one shorter when cols is not a
    multiple) gets scale = max |w| / 127 and values round(w / scale), so w ~ value * scale."""
    rows, cols = a.shape
    groups = groups_of(a, group_size)
    scales = np.abs(groups).max(axis=2) / 127.0
    safe = np.where(scales > 0, scales, 1.0)[:, :, None]
    q = np.clip(np.rint(groups / safe), -127, 127).astype(np.int8)
    return q.reshape(rows, -1)[:, :cols], scales.astype("<f4")


def quantize_q4_0(a):
    """(rows, cols) f32, cols even -> codes (rows, cols / 2) uint8, two a byte (value j in byte
    j / 2, even j in the low nibble), and f32 scales (rows, ceil(cols / 32)): as llama.cpp's q4_0,
    each group of 32 values along a row (the last one shorter) takes the value m of largest
    magnitude, scale = m / -8 and codes round(w / scale) + 8 clipped to 0..15, so that m is code 0
    exactly and w ~ (code - 8) * scale; the 16 codes' range -8..7 is used whole, the side opposite
    m's sign (up to +8 steps) clipped at 7."""
    rows, cols = a.shape
    groups = groups_of(a, Q4_GROUP)
    at = np.abs(groups).argmax(axis=2)[:, :, None]
    scales = (np.take_along_axis(groups, at, axis=2) / -8.0).astype(np.float32)
    safe = np.where(scales != 0, scales, 1.0)
    codes = np.clip(np.rint(groups / safe) + 8, 0, 15).astype(np.uint8).reshape(rows, -1)[:, :cols]
    return codes[:, 0::2] | codes[:, 1::2] << 4, scales[:, :, 0].astype("<f4")


def unpack_q4_0(packed, cols):
    """q4_0's bytes (rows, cols / 2) -> codes 0..15 (rows, cols)."""
    return np.stack([packed & 15, packed >> 4], axis=2).reshape(-1, cols)


class Dtype(NamedTuple):
    """One weight dtype of the file (docs/FORMAT.md), a row of DTYPES."""
    name: str
    code: int  # the header's weight dtype
    group_sizes: tuple  # values per scale along a row the header may record; () for no scales
    bits: int  # of one stored value
    # (rows, cols) array, group_size, the tensor's name for a message -> (the values to store,
    # float32 scales (rows, groups) or None)
    encode: Callable
    # the stored bytes (uint8, rows x cols x bits / 8), cols -> the stored values (rows, cols)
    values: Callable
    # stored values, scales or None, group_size -> float32 (rows, cols)
    decode: Callable

    def header_group_size(self, chosen=None):
        """The header's group_size: chosen (None: the first) of the dtype's, 0 without scales."""
        if not self.group_sizes:
            return 0
        size = self.group_sizes[0] if chosen is None else chosen
        if size not in self.group_sizes:
            raise ValueError(f"{self.name} takes group sizes {self.group_sizes}, not {size}")
        return size


def stored_as(kind):
    """Dtype.values of a dtype that stores each value as one numpy `kind`."""
    return lambda b, cols: b.view(kind).reshape(-1, cols)


def scaled(values, scales, group_size):
    """Dtype.decode of q8_0: value * its group's scale."""
    return values.astype(np.float32) * per_value(scales, group_size, values.shape[1])


DTYPES = {d.name: d for d in (
    Dtype("f32", 0, (), 32, encode=lambda a, gs, where: (np.ascontiguousarray(a, "<f4"), None),
          values=stored_as("<f4"), decode=lambda v, s, gs: v),
    Dtype("bf16", 1, (), 16, encode=lambda a, gs, where: (f32_to_bf16(a, where), None),
          values=stored_as("<u2"), decode=lambda v, s, gs: bf16_to_f32(v)),
    Dtype("q8_0", 2, (32, 64), 8,
          encode=lambda a, gs, where: quantize_q8_0(np.asarray(a, np.float32), gs),
          values=stored_as("i1"), decode=scaled),
    Dtype("f16", 3, (), 16, encode=lambda a, gs, where: (f32_to_f16(a, where), None),
          values=stored_as("<f2"), decode=lambda v, s, gs: v.astype(np.float32)),
    Dtype("q4_0", 4, (Q4_GROUP,), 4,
          encode=lambda a, gs, where: quantize_q4_0(np.asarray(a, np.float32)),
          values=lambda b, cols: unpack_q4_0(b.reshape(-1, cols // 2), cols),
          decode=lambda v, s, gs: scaled(v.astype(np.int8) - 8, s, gs)),  # codes 0..15: -8..7
)}
DTYPE_OF_CODE = {d.code: d for d in DTYPES.values()}


# ----------------------------------------------------------------------------
# The vocabulary a file carries


# SentencePiece's token types (its sentencepiece_model.proto, llama.cpp's llama_token_type)
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = \
    range(1, 7)


class Vocab:
    """A SentencePiece vocabulary: pieces as SentencePiece writes them (U+2581 for a space),
    scores, token types (TOKEN_*), the special ids, and the normalizer's two options that the
    encoder needs (its NormalizerSpec's add_dummy_prefix and remove_extra_whitespaces); and the
    model's chat template (a Jinja string) when its tokenizer_config.json names one, which a GGUF
    carries as tokenizer.chat_template (our own format has no place for it)."""

    def __init__(self, tokens, scores, token_types, bos_id, eos_id, unk_id,
                 add_space_prefix=True, remove_extra_whitespaces=True):
        self.tokens, self.scores, self.token_types = tokens, scores, token_types
        self.bos_id, self.eos_id, self.unk_id = bos_id, eos_id, unk_id
        self.add_space_prefix = add_space_prefix
        self.remove_extra_whitespaces = remove_extra_whitespaces
        self.chat_template = None

    def flags(self):
        """The header's vocab_flags."""
        return VOCAB_REMOVE_EXTRA_WHITESPACES if self.remove_extra_whitespaces else 0


def proto_fields(data, where):
    """The top-level fields of a protobuf message (the wire format: a varint key, field << 3 |
    wire type, then the value): (field, value) pairs, varints as ints, length-delimited values as
    bytes, fixed-width ones as bytes; the protobuf module is not a dependency."""
    def varint(i):
        value = shift = 0
        while True:
            if i >= len(data) or shift > 63:
                raise ExportError(f"{where}: not a SentencePiece model (a truncated protobuf)")
            value |= (data[i] & 0x7F) << shift
            shift += 7
            i += 1
            if data[i - 1] < 0x80:
                return value, i
    i = 0
    while i < len(data):
        key, i = varint(i)
        wire = key & 7
        if wire == 0:
            value, i = varint(i)
        elif wire in (1, 2, 5):
            n, i = (8, i) if wire == 1 else (4, i) if wire == 5 else varint(i)
            value, i = data[i:i + n], i + n
        else:
            raise ExportError(f"{where}: not a SentencePiece model (protobuf wire type {wire})")
        yield key >> 3, value


def normalizer_options(proto, where):
    """(add_dummy_prefix, remove_extra_whitespaces) of a serialized ModelProto: fields 3 and 4 of
    its NormalizerSpec (field 3), each true when not written (the proto's defaults)."""
    options = {3: True, 4: True}
    for field, value in proto_fields(proto, where):
        if field == 3 and isinstance(value, bytes):
            for option, flag in proto_fields(value, where):
                if option in options:
                    options[option] = bool(flag)
    return options[3], options[4]


def sentencepiece_vocab(path):
    """The vocabulary of a SentencePiece .model file, its normalizer's options from its
    NormalizerSpec. ExportError when it is not one."""
    import sentencepiece as spm

    if not os.path.isfile(path):  # SentencePiece aborts the process (a C++ exception) on a directory
        raise ExportError(f"{path}: not a regular file")
    try:
        sp = spm.SentencePieceProcessor(model_file=path)
        n = sp.vocab_size()
        # a corrupt model can load and hold a piece that is not UTF-8, which id_to_piece refuses
        tokens = [sp.id_to_piece(i) for i in range(n)]
    except Exception as e:
        raise ExportError(f"{path}: not a SentencePiece model ({e})")

    def token_type(i):
        for test, kind in ((sp.is_unknown, TOKEN_UNKNOWN), (sp.is_control, TOKEN_CONTROL),
                           (sp.is_unused, TOKEN_UNUSED), (sp.is_byte, TOKEN_BYTE)):
            if test(i):
                return kind
        return TOKEN_NORMAL

    add_prefix, remove_spaces = normalizer_options(sp.serialized_model_proto(), path)
    return Vocab(tokens, [sp.get_score(i) for i in range(n)], [token_type(i) for i in range(n)],
                 sp.bos_id(), sp.eos_id(), sp.unk_id(), add_space_prefix=add_prefix,
                 remove_extra_whitespaces=remove_spaces)


def chat_template_beside(model_path):
    """The chat template of the tokenizer_config.json beside a SentencePiece model (a Hugging Face
    directory's), or None: its chat_template, a string or a list of named ones (the one named
    "default"). ExportError when the file is not JSON or the template not a string."""
    path = os.path.join(os.path.dirname(model_path), "tokenizer_config.json")
    if not os.path.isfile(path):
        return None
    try:
        config = json.load(open(path, encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ExportError(f"{path}: not valid JSON ({e})")
    template = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(template, list):
        template = next((t.get("template") for t in template
                         if isinstance(t, dict) and t.get("name") == "default"), None)
    if template is not None and (not isinstance(template, str) or "\0" in template):
        raise ExportError(f"{path}: chat_template is not a string without NUL characters")
    return template


def tokenizer_bytes(vocab):
    """The vocabulary in llama2.c's tokenizer layout (docs/FORMAT.md, run's tokenizer.h): int32
    max_token_length, then per piece float32 score, int32 length, bytes; U+2581 becomes a space,
    BOS and EOS are written "\n<s>\n" and "\n</s>\n" as llama2.c's tokenizer.py does. What
    export.py writes for a .model, and a normllama file's tokenizer section."""
    pieces = []
    for i, t in enumerate(vocab.tokens):
        t = "\n<s>\n" if i == vocab.bos_id else "\n</s>\n" if i == vocab.eos_id else t
        pieces.append(t.replace("\u2581", " ").encode("utf-8"))
    return struct.pack("<i", max(len(p) for p in pieces)) + b"".join(
        struct.pack("<fi", s, len(p)) + p for p, s in zip(pieces, vocab.scores))


def check_vocab(vocab, c, where):
    """Refuses a vocabulary run's tokenizer cannot take for the model c: another size, other
    special ids than <unk> 0, <s> 1, </s> 2, no dummy prefix (run's encoder always adds it)."""
    if len(vocab.tokens) != c.vocab_size:
        raise ExportError(f"{where} has {len(vocab.tokens)} pieces but the model's vocab_size is "
                          f"{c.vocab_size}")
    if (vocab.unk_id, vocab.bos_id, vocab.eos_id) != (0, 1, 2):
        raise ExportError(f"{where}: <unk>, <s>, </s> are ids {vocab.unk_id}, {vocab.bos_id}, "
                          f"{vocab.eos_id}; run's tokenizer takes 0, 1, 2")
    if not vocab.add_space_prefix:
        raise ExportError(f"{where}: its normalizer adds no dummy prefix, which run's encoder "
                          "always adds")


# ----------------------------------------------------------------------------
# Writing and reading


class Output:
    """The file --out `path` is written through: into a new temporary file beside it (a unique
    name, created exclusively: no other file or link is written through, and two exports never
    share one), renamed onto path when complete, so that no half-written file is ever at path (nor
    the old one truncated), and removed after an error. A symlink is followed (the rename would
    replace the link); a directory, a device or a symlink loop is refused (the rename would replace
    a device node with a regular file). An existing file keeps its permissions. Errors opening,
    writing (a full disk, a file size limit) and closing name path, not the input."""

    def __init__(self, path):
        self.path = path
        if path == "" or path.endswith(os.sep):
            raise ExportError(f"--out '{path}' names a directory, not a file")
        self.target = os.path.realpath(path)
        if os.path.islink(self.target):  # realpath stops inside a loop
            raise ExportError(f"--out {path}: too many levels of symbolic links")
        if os.path.exists(self.target) and not os.path.isfile(self.target):
            raise ExportError(f"--out {path} is not a regular file")
        self.tmp = self.file = None

    def attempt(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except OSError as e:
            raise ExportError(f"cannot write {self.path}: {e.strerror}")

    def write(self, data):
        self.attempt(self.file.write, data)

    def tell(self):
        return self.file.tell()

    def __enter__(self):
        if os.path.exists(self.target):
            mode = os.stat(self.target).st_mode & 0o7777
        else:  # what open() would give a new file
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        fd, self.tmp = self.attempt(tempfile.mkstemp, dir=os.path.dirname(self.target),
                                    prefix=".export-", suffix=".tmp")
        self.file = os.fdopen(fd, "wb")
        self.attempt(os.chmod, self.tmp, mode)
        return self

    def __exit__(self, error, *_):
        try:
            self.attempt(self.file.close)  # flushes: a full disk can show here
            if error is None:
                self.attempt(os.replace, self.tmp, self.target)
        finally:
            if os.path.exists(self.tmp):
                os.remove(self.tmp)


def write_model(path, c, get, dtype="f32", group_size=None, progress=True, vocab=None):
    """Writes our file. get(name, layer) returns one tensor as an array of the shape in
    tensor_order (layer is None for the tensors that are not per layer). Matrices are written as
    `dtype` (q8_0 and q4_0: every layer's values, then every layer's scales, groups of group_size,
    None for the dtype's default); norms as f32. vocab (a Vocab, check_vocab'd): the tokenizer
    section after the tensors, so that run needs no -z; None writes none."""
    from tqdm import tqdm

    if vocab is not None:
        check_vocab(vocab, c, "the vocabulary")
    group_size = DTYPES[dtype].header_group_size(group_size)
    if dtype == "q4_0" and c.hidden_dim % 2 != 0:  # run refuses it too
        raise ExportError(f"hidden_dim {c.hidden_dim} is odd; q4_0 packs two codes a byte along "
                          "w2's rows")
    order = tensor_order(c)
    total = sum(c.n_layers if per_layer else 1 for _, per_layer, _ in order)
    with Output(path) as f, tqdm(total=total, desc="export", unit="tensor",
                                 disable=None if progress else True) as bar:
        f.write(header_bytes(c, dtype, group_size, vocab))
        for name, per_layer, shape in order:
            f.write(bytes(-f.tell() % ALIGN))
            d = DTYPES[dtype if name in MATRICES else "f32"]
            scales = []
            for layer in range(c.n_layers) if per_layer else [None]:
                t = np.asarray(get(name, layer))
                where = name if layer is None else f"{name} of layer {layer}"
                if tuple(t.shape) != shape:
                    raise ExportError(f"{where} has shape {tuple(t.shape)}, expected {shape}")
                # run stops on the first non-finite logit; q8_0 could not scale the group
                if not np.isfinite(t).all():
                    raise ExportError(f"{where} has a NaN or infinite value")
                values, s = d.encode(t, group_size, where)
                f.write(values.tobytes())
                if s is not None:
                    scales.append(s)
                bar.update(1)
            if scales:
                f.write(bytes(-f.tell() % ALIGN))
                for s in scales:
                    f.write(s.tobytes())
        if vocab is not None:
            f.write(bytes(-f.tell() % ALIGN))
            f.write(tokenizer_bytes(vocab))


def read_model(path, raw=None):
    """(header, tensors) of our file at path: header the dict of its HEADER_FIELDS as stored (and
    "vocab", the tokenizer section's bytes, b"" when none),
    tensors float32 arrays by name (tensor_order's names and shapes, the per-layer ones stacked
    (n_layers, ...)), the matrices decoded from the file's dtype. With raw={} it also gets each
    q8_0 or q4_0 matrix's (int8 values or codes 0..15, scales), (stacked rows, cols) and
    (stacked rows, groups), by name. A file that is not one, or whose size the layout does not
    explain, is an ExportError."""
    data = open(path, "rb").read()
    if len(data) < HEADER_BYTES:
        raise ExportError(f"{path}: {len(data)} bytes, shorter than the header")
    header = dict(zip(HEADER_FIELDS, HEADER.unpack_from(data)))
    if (header["magic"], header["version"]) != (MAGIC, VERSION):
        raise ExportError(f"{path}: not a normllama version {VERSION} file")
    d, group_size = DTYPE_OF_CODE.get(header["dtype"]), header["group_size"]
    if d is None or group_size not in (d.group_sizes or (0,)):
        raise ExportError(f"{path}: dtype {header['dtype']} with group_size {group_size} is none "
                          "of DTYPES")
    if header["norm"] >= len(NORMS):
        raise ExportError(f"{path}: norm {header['norm']} is none of NORM_CODES")
    off, align, tensors = HEADER_BYTES, header["align"], {}
    if not 4 <= align <= 4096 or align & (align - 1):
        raise ExportError(f"{path}: alignment {align} is not a power of two in 4..4096")
    c = Config(*(header[k] for k in SIZE_FIELDS), rope_theta=header["rope_theta"],
               norm_eps=header["norm_eps"], norm=NORMS[header["norm"]],
               norm_bias=header["norm_bias"], shared_classifier=header["shared"])

    def take(n_bytes):
        nonlocal off
        off = -(-off // align) * align
        if off + n_bytes > len(data):
            raise ExportError(f"{path}: {len(data)} bytes, its layout runs past the end")
        b = np.frombuffer(data, np.uint8, n_bytes, off)
        off += n_bytes
        return b

    for name, per_layer, shape in tensor_order(c):
        full = (c.n_layers, *shape) if per_layer else shape
        cols = full[-1]
        rows = int(np.prod(full)) // cols
        kind = d if name in MATRICES else DTYPES["f32"]
        values = kind.values(take(rows * cols * kind.bits // 8), cols)
        scales = None
        if kind.group_sizes:
            groups = -(-cols // group_size)
            scales = take(4 * rows * groups).view("<f4").reshape(rows, groups)
            if raw is not None:
                raw[name] = (values, scales)
        tensors[name] = kind.decode(values, scales, group_size).reshape(full)
    header["vocab"] = take(header["vocab_bytes"]).tobytes() if header["vocab_bytes"] else b""
    if off != len(data):
        raise ExportError(f"{path}: {len(data)} bytes, its layout ends at {off}")
    return header, tensors
