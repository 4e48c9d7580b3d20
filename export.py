#!/usr/bin/env python3
"""Export checkpoints to normllama's model file (docs/FORMAT.md) and SentencePiece models to the
tokenizer file run reads.

Inputs (the kind is told from the path):
  llama2.c checkpoint   a .pt file written by llama2.c's train.py: "model_args" and a "model"
                        state dict (keys with or without the "_orig_mod." prefix of torch.compile)
  Hugging Face Llama    a directory with config.json (architecture LlamaForCausalLM) and its
                        weights as model.safetensors, a sharded model.safetensors.index.json,
                        pytorch_model.bin or a sharded pytorch_model.bin.index.json; f32, f16 and
                        bf16 tensors; tied or separate classifier; rms_norm_eps and rope_theta
  Meta Llama            a directory with params.json and consolidated.*.pth (one or more shards)
  SentencePiece model   a .model file: written as the llama2.c tokenizer layout (same as tok512.bin)
  --random SHAPE        no input: a random-weight model of a benchmark shape (15M, 110M, 1.1B)

Weight matrices are written as --dtype: f32, bf16 (upper 16 bits), f16 (IEEE half, rounded to
nearest), q8_0 (int8 with one f32 scale per --group-size values of a row) or q4_0 (4-bit codes
with one f32 scale per 32 values of a row); norm weights and biases are always f32.

Run with Debian's Python (/usr/bin/python3, see `make deps-train`): numpy, torch, sentencepiece
and tqdm. Errors print one line "export.py: error: ..." and exit 1.
"""
import argparse
import importlib.util
import json
import math
import numbers
import os
import pickle
import signal
import struct
import sys
import tempfile
import types

# Started as ./export.py, the python3 first on PATH runs it, which may lack Debian's packages:
# one line naming the interpreter to use, not an ImportError's traceback (here or mid-export)
for _module in ("numpy", "torch", "sentencepiece", "tqdm"):
    if importlib.util.find_spec(_module) is None:
        sys.exit(f"export.py: error: {sys.executable} cannot import {_module}: run export.py with "
                 f"/usr/bin/python3, Debian's Python, with python3-{_module} installed (make "
                 "export-deps)")

import numpy as np  # noqa: E402 (after the check above)

MAGIC = 0x4D4C4C4E  # "NLLM" on disk
VERSION = 1
HEADER_BYTES = 256
ALIGN = 64
DTYPE_CODES = {"f32": 0, "bf16": 1, "q8_0": 2, "f16": 3, "q4_0": 4}
GROUP_SIZES = (32, 64)  # of q8_0
Q4_GROUP = 32  # q4_0's values per scale
MATRICES = {"token_embedding", "wq", "wk", "wv", "wo", "w1", "w2", "w3", "wcls"}  # norms stay f32

# Random-weight models for benchmarks (--random): (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
# vocab_size, seq_len)
SHAPES = {
    "15M": (288, 768, 6, 6, 6, 32000, 256),  # stories15M
    "110M": (768, 2048, 12, 12, 12, 32000, 1024),  # stories110M
    "1.1B": (2048, 5632, 22, 32, 4, 32000, 2048),  # TinyLlama-1.1B
}
NORM_CODES = {"rmsnorm": 0, "layernorm": 1}
MAX_SIZE = 1 << 20  # run's bound on every size field of the header (format.c, check_config)


class ExportError(Exception):
    """A problem with the input, reported as one line without a traceback."""


def one_line(text):
    """text as run prints a name in its errors: a newline as \\n, other control characters (below
    0x20, and DEL) as \\xNN, and a byte of a file name that was not UTF-8 (which Python holds as
    a surrogate, U+DC80..U+DCFF) as \\xNN too, so that a name with a newline or a terminal's
    escape codes keeps the error one line of plain text."""
    def shown_char(ch):
        code = ord(ch)
        if ch == "\n":
            return "\\n"
        if code < 0x20 or code == 0x7F:
            return f"\\x{code:02X}"
        if 0xDC80 <= code <= 0xDCFF:
            return f"\\x{code - 0xDC00:02X}"
        return ch
    return "".join(shown_char(ch) for ch in text)


def print_error(message):
    print(f"export.py: error: {one_line(message)}", file=sys.stderr)


# ----------------------------------------------------------------------------
# Our file: config, tensor order, writer


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
    """The header fields of docs/FORMAT.md, refused here when run's loader would refuse them
    (format.c, check_config), so that no file run cannot load is written. keys: the input's own
    name of each field it names otherwise (HF_KEYS), so that a message names what it holds."""

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
        if (self.dim // self.n_heads) % 2:
            raise ExportError(f"head_size {self.dim // self.n_heads} ({name('dim')} / "
                              f"{name('n_heads')}) is odd; RoPE rotates pairs")


def tensor_order(c):
    """(name, per_layer, shape of one layer or of the whole tensor), in file order."""
    kv_dim = c.n_kv_heads * (c.dim // c.n_heads)
    order = [("token_embedding", False, (c.vocab_size, c.dim)),
             ("attn_norm", True, (c.dim,))]
    if c.norm_bias:
        order.append(("attn_norm_bias", True, (c.dim,)))
    order += [("wq", True, (c.dim, c.dim)), ("wk", True, (kv_dim, c.dim)),
              ("wv", True, (kv_dim, c.dim)), ("wo", True, (c.dim, c.dim)),
              ("ffn_norm", True, (c.dim,))]
    if c.norm_bias:
        order.append(("ffn_norm_bias", True, (c.dim,)))
    order += [("w1", True, (c.hidden_dim, c.dim)), ("w2", True, (c.dim, c.hidden_dim)),
              ("w3", True, (c.hidden_dim, c.dim)), ("final_norm", False, (c.dim,))]
    if c.norm_bias:
        order.append(("final_norm_bias", False, (c.dim,)))
    if not c.shared_classifier:
        order.append(("wcls", False, (c.vocab_size, c.dim)))
    return order


def header_bytes(c, dtype="f32", group_size=0):
    h = struct.pack("<II7iffIIIIII", MAGIC, VERSION, c.dim, c.hidden_dim, c.n_layers, c.n_heads,
                    c.n_kv_heads, c.vocab_size, c.seq_len, c.rope_theta, c.norm_eps,
                    NORM_CODES[c.norm], int(c.norm_bias), int(c.shared_classifier),
                    DTYPE_CODES[dtype], ALIGN,
                    group_size if dtype == "q8_0" else Q4_GROUP if dtype == "q4_0" else 0)
    return h + bytes(HEADER_BYTES - len(h))


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


def refuse_input_as_output(inp, out):
    """--out must not be the input, nor a file of an input directory: the export reads the input
    while it writes, and the rename would replace it."""
    target = os.path.realpath(out)
    source = os.path.realpath(inp)
    if not (os.path.exists(target) and os.path.exists(source)):
        return
    if os.path.samefile(source, target) or (os.path.isdir(source) and
                                            os.path.dirname(target) == source):
        raise ExportError(f"--out {out} is the input {inp} or one of its files")


def f32_to_bf16(a):
    """The upper 16 bits of each f32 (truncation toward zero), as uint16. Measured on
    stories260K: truncation keeps the greedy story of all 256 positions; round-to-nearest-even,
    with a smaller mean logit error (0.016 against 0.022), happened to lose it after 181 generated
    tokens. Either is a bf16 file: run reads the bits, not how they were chosen."""
    return (np.ascontiguousarray(a, dtype="<f4").view(np.uint32) >> 16).astype("<u2")


F16_MAX = 65504.0  # the largest finite IEEE half


def f32_to_f16(a, where):
    """Each f32 rounded to the nearest IEEE half (ties to even), as uint16 bits. A value that would
    round to infinity (|w| >= 65520) is refused: run would stop on the non-finite logit."""
    a = np.ascontiguousarray(a, dtype="<f4")
    big = float(np.abs(a).max(initial=0.0))
    if big >= F16_MAX + 16:  # halfway to the next power of two's step rounds up to infinity
        raise ExportError(f"{where} has a value of magnitude {big:g}, beyond f16's largest "
                          f"{F16_MAX:g}")
    return a.astype("<f2").view("<u2")


def quantize_q8_0(a, group_size):
    """(rows, cols) f32 -> int8 values (rows, cols) and f32 scales (rows, ceil(cols / group_size)):
    each group of group_size values along a row (the last one shorter when cols is not a
    multiple) gets scale = max |w| / 127 and values round(w / scale), so w ~ value * scale."""
    rows, cols = a.shape
    n_groups = -(-cols // group_size)
    padded = np.zeros((rows, n_groups * group_size), np.float32)
    padded[:, :cols] = a
    groups = padded.reshape(rows, n_groups, group_size)
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
    n_groups = -(-cols // Q4_GROUP)
    padded = np.zeros((rows, n_groups * Q4_GROUP), np.float32)
    padded[:, :cols] = a
    groups = padded.reshape(rows, n_groups, Q4_GROUP)
    at = np.abs(groups).argmax(axis=2)[:, :, None]
    scales = (np.take_along_axis(groups, at, axis=2) / -8.0).astype(np.float32)
    safe = np.where(scales != 0, scales, 1.0)
    codes = np.clip(np.rint(groups / safe) + 8, 0, 15).astype(np.uint8).reshape(rows, -1)[:, :cols]
    return codes[:, 0::2] | codes[:, 1::2] << 4, scales[:, :, 0].astype("<f4")


def write_model(path, c, get, dtype="f32", group_size=32, progress=True):
    """Writes our file. get(name, layer) returns one tensor as an array of the shape in
    tensor_order (layer is None for the tensors that are not per layer). Matrices are written as
    `dtype` (q8_0: every layer's values, then every layer's scales); norms as f32."""
    from tqdm import tqdm

    if dtype == "q4_0" and c.hidden_dim % 2 != 0:  # run refuses it too
        raise ExportError(f"hidden_dim {c.hidden_dim} is odd; q4_0 packs two codes a byte along "
                          "w2's rows")
    order = tensor_order(c)
    total = sum(c.n_layers if per_layer else 1 for _, per_layer, _ in order)
    with Output(path) as f, tqdm(total=total, desc="export", unit="tensor",
                                 disable=None if progress else True) as bar:
        f.write(header_bytes(c, dtype, group_size))
        for name, per_layer, shape in order:
            f.write(bytes(-f.tell() % ALIGN))
            as_type = dtype if name in MATRICES else "f32"
            scales = []
            for layer in range(c.n_layers) if per_layer else [None]:
                t = np.asarray(get(name, layer))
                where = name if layer is None else f"{name} of layer {layer}"
                if tuple(t.shape) != shape:
                    raise ExportError(f"{where} has shape {tuple(t.shape)}, expected {shape}")
                # run stops on the first non-finite logit; q8_0 could not scale the group
                if not np.isfinite(t).all():
                    raise ExportError(f"{where} has a NaN or infinite value")
                if as_type == "bf16":
                    f.write(f32_to_bf16(t).tobytes())
                elif as_type == "f16":
                    f.write(f32_to_f16(t, where).tobytes())
                elif as_type == "q8_0":
                    q, s = quantize_q8_0(np.asarray(t, np.float32), group_size)
                    f.write(q.tobytes())
                    scales.append(s)
                elif as_type == "q4_0":
                    q, s = quantize_q4_0(np.asarray(t, np.float32))
                    f.write(q.tobytes())
                    scales.append(s)
                else:
                    f.write(np.ascontiguousarray(t, dtype="<f4").tobytes())
                bar.update(1)
            if scales:
                f.write(bytes(-f.tell() % ALIGN))
                for s in scales:
                    f.write(s.tobytes())


# ----------------------------------------------------------------------------
# Reading tensors: safetensors (by its spec, with numpy) and torch pickles

SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}


def bf16_to_f32(u16):
    """bf16 is the high half of an f32: shift the 16 bits into the high half."""
    return (u16.astype(np.uint32) << 16).view(np.float32)


def sizes(value, n=None):
    """Whether value is a JSON list of integers >= 0 (n of them if given); true is not one."""
    return isinstance(value, list) and (n is None or len(value) == n) and \
        all(type(v) is int and v >= 0 for v in value)


class SafetensorsFile:
    """8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape,
    data_offsets: [begin, end]}} (offsets relative to the data after the header), raw data."""

    def __init__(self, path):
        self.path = path
        require_regular_file(path)
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise ExportError(f"{path}: shorter than the 8-byte safetensors header length")
            (n,) = struct.unpack("<Q", raw)
            if n > size - 8:
                raise ExportError(f"{path}: header length {n} runs past the end of the file")
            self.header = parse_json(f"{path}: safetensors header", f.read(n))
        self.header.pop("__metadata__", None)
        self.data_start = 8 + n
        for name, info in self.header.items():
            self.check_entry(name, info, size - self.data_start)

    def check_entry(self, name, info, data_size):
        """Every entry is checked before any tensor is read: get trusts the types and ranges."""
        where = f"{self.path}: tensor {name}"
        if not isinstance(info, dict):
            raise ExportError(f"{where}'s entry is {info!r}, not a JSON object")
        for key in ("dtype", "shape", "data_offsets"):
            if key not in info:
                raise ExportError(f"{where} has no {key}")
        if not isinstance(info["dtype"], str):
            raise ExportError(f"{where} has dtype {info['dtype']!r}, not a string")
        if not sizes(info["shape"]):
            raise ExportError(f"{where} has shape {info['shape']!r}, not sizes >= 0")
        offsets = info["data_offsets"]
        if not sizes(offsets, 2) or not offsets[0] <= offsets[1] <= data_size:
            raise ExportError(f"{where} has data_offsets {offsets!r}, not [begin, end] with "
                              f"0 <= begin <= end <= {data_size} (the size of the data)")

    def keys(self):
        return self.header.keys()

    def get(self, name):
        info = self.header[name]
        dtype = SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ExportError(f"{self.path}: tensor {name} has unsupported dtype {info['dtype']}")
        shape, (begin, end) = info["shape"], info["data_offsets"]
        count = math.prod(shape)
        if end - begin != count * np.dtype(dtype).itemsize:
            raise ExportError(f"{self.path}: tensor {name} has data_offsets [{begin}, {end}], "
                              f"{end - begin} bytes; its shape {shape} of {info['dtype']} needs "
                              f"{count * np.dtype(dtype).itemsize}")
        if count == 0:  # np.memmap refuses an empty map, and one at the file's end
            return np.zeros(shape, np.float32)
        a = np.memmap(self.path, dtype=dtype, mode="r", offset=self.data_start + begin,
                      shape=(count,))
        with np.errstate(over="ignore"):  # F64 beyond float32 becomes inf, refused by write_model
            a = bf16_to_f32(a) if info["dtype"] == "BF16" else a.astype(np.float32)
        return a.reshape(shape)


def parse_json(where, text):
    """A JSON object (every config, index and safetensors header is one), from str or bytes."""
    try:
        data = json.loads(text)
    # RecursionError: nesting deeper than Python's stack, e.g. 100000 "["
    except (ValueError, RecursionError) as e:
        raise ExportError(f"{where}: not valid JSON ({e})")
    if not isinstance(data, dict):
        raise ExportError(f"{where}: not a JSON object")
    return data


def require_regular_file(path):
    """Reading a FIFO would wait for a writer forever, and a device may never end: every input
    file must be a regular file (or a link to one)."""
    if not os.path.isfile(path):
        raise ExportError(f"{path}: not a regular file")


def read_json(path):
    require_regular_file(path)
    with open(path, "rb") as f:
        return parse_json(path, f.read())


JSON_KINDS = {dict: "an object", list: "a list", bool: "true or false"}


def field(where, data, key, kind, default=None):
    """data[key] if it is a `kind` (JSON_KINDS); when absent or null, `default`, and without
    one an error."""
    value = data.get(key)
    if value is None and default is None:
        raise ExportError(f"{where}: no {key}")
    if value is None:
        return default
    if not isinstance(value, kind):
        raise ExportError(f"{where}: {key} is {value!r}, not {JSON_KINDS[kind]}")
    return value


class RefusedGlobal(pickle.UnpicklingError):
    """A pickle naming a global outside TENSOR_GLOBALS: the message names it."""


# What a pickled state dict needs beyond plain containers (dict, list, tuple, str, numbers, which
# pickle builds without naming a global): the globals torch's weights_only unpickler admits, its
# tensor rebuilds, OrderedDict, torch.Size, layouts and dtypes (so that a sparse or complex tensor
# reaches to_numpy's message). Storage classes torch's readers resolve themselves (for a name
# holding "Storage") before asking find_class. torch 1.13's weights_only=True refuses
# stories260K.pt (its unpickler lacks BINFLOAT, the opcode of a float such as norm_eps).
TENSOR_GLOBALS = [("collections", "OrderedDict"), ("torch", "Size"), ("torch", "Tensor"),
                  ("torch.nn.parameter", "Parameter"), ("torch.serialization", "_get_layout")] + \
    [("torch._utils", f"_rebuild_{kind}") for kind in
     ("tensor", "tensor_v2", "parameter", "sparse_tensor", "sparse_csr_tensor",
      "meta_tensor_no_storage")] + \
    [("torch", dtype) for dtype in ("float16", "bfloat16", "float32", "float64", "complex32",
                                    "complex64", "complex128", "int8", "int16", "int32", "int64",
                                    "uint8", "bool")]


class TensorUnpickler(pickle.Unpickler):
    """An unpickler that builds only TENSOR_GLOBALS: a pickle naming any other global (os.system,
    builtins.eval, a class whose constructor runs code) is refused before anything of it runs."""

    def find_class(self, module, name):
        if (module, name) in TENSOR_GLOBALS:
            return super().find_class(module, name)
        raise RefusedGlobal(f"{module}.{name}")


def tensor_pickle_module():
    """A pickle_module for torch's readers: TensorUnpickler, and a load that uses it (the legacy
    format's header is read with load)."""
    module = types.ModuleType("tensor_pickle")
    module.Unpickler = TensorUnpickler
    module.load = lambda f, **kwargs: TensorUnpickler(f, **kwargs).load()
    return module


def torch_read(path):
    """What torch.load reads from path (zip or legacy format) onto the CPU, through TensorUnpickler.
    torch.load's own two readers, called with the pickle module: Debian's torch 1.13.0a0
    torch.load replaces any pickle_module with pickle unless weights_only is set, which refuses
    stories260K.pt (see TENSOR_GLOBALS). A TorchScript archive, which torch.load would hand to
    torch.jit.load, is no checkpoint."""
    from torch import serialization

    module = tensor_pickle_module()
    with open(path, "rb") as f:
        if not serialization._is_zipfile(f):
            return serialization._legacy_load(f, "cpu", module, encoding="utf-8")
        with serialization._open_zipfile_reader(f) as archive:
            if serialization._is_torchscript_zip(archive):
                raise ExportError(f"{path}: a TorchScript archive, not a checkpoint of tensors")
            return serialization._load(archive, "cpu", module, encoding="utf-8")


def torch_load(path):
    require_regular_file(path)
    try:
        return torch_read(path)
    except ExportError:
        raise
    except RefusedGlobal as e:
        raise ExportError(f"{path}: refused: its pickle names {e}, which no checkpoint of tensors "
                          "needs (loading it could run code); nothing of it was run")
    except Exception as e:  # torch raises many types for a bad file
        raise ExportError(f"{path}: cannot load with torch ({type(e).__name__}: {e})")


def to_numpy(t, where, name):
    import torch

    if not isinstance(t, torch.Tensor):
        raise ExportError(f"{where}: {name} is a {type(t).__name__}, not a tensor")
    # to(float32) would drop a complex tensor's imaginary part with only a warning
    if not t.is_floating_point():
        raise ExportError(f"{where}: tensor {name} has dtype {t.dtype}, not real floating point")
    if t.layout != torch.strided:  # numpy() takes dense tensors only
        raise ExportError(f"{where}: tensor {name} has layout {t.layout}, not dense")
    if t.is_meta:  # a shape without data
        raise ExportError(f"{where}: tensor {name} is on the meta device: it holds no values")
    return t.detach().to(torch.float32).numpy()


class TensorSource:
    """name -> f32 numpy array over one or more files, loaded as needed."""

    def __init__(self, where, files, state=None):
        """files: safetensors or torch files; state: an already loaded torch checkpoint."""
        self.where = where
        self.files = {}  # tensor name -> (path, reader) of its file
        for path in files:
            if path.endswith(".safetensors"):
                reader = SafetensorsFile(path)
                names = reader.keys()
            else:
                state = state if state is not None else torch_load(path)
                if not isinstance(state, dict):
                    raise ExportError(f"{path}: not a state dict (a {type(state).__name__})")
                if "model" in state and isinstance(state["model"], dict):
                    state = state["model"]
                # a key that is not a string names no tensor we read: kept as it is
                state = {k[len("_orig_mod."):]
                         if isinstance(k, str) and k.startswith("_orig_mod.") else k: v
                         for k, v in state.items()}
                reader = state
                names = state.keys()
            for name in names:
                if name in self.files:  # the same tensor in two shards: which one is meant?
                    raise ExportError(f"{where}: tensor {name} is in both {self.files[name][0]} "
                                      f"and {path}")
                self.files[name] = (path, reader)

    def has(self, name):
        return name in self.files

    def names(self):
        return list(self.files)

    def get(self, name):
        if name not in self.files:
            raise ExportError(f"missing tensor '{name}' in {self.where}")
        _, reader = self.files[name]
        if isinstance(reader, SafetensorsFile):
            return reader.get(name)
        return to_numpy(reader[name], self.where, name)


# ----------------------------------------------------------------------------
# Inputs

# llama2.c and Meta name their tensors alike
META_NAMES = {
    "token_embedding": "tok_embeddings.weight", "attn_norm": "layers.{}.attention_norm.weight",
    "wq": "layers.{}.attention.wq.weight", "wk": "layers.{}.attention.wk.weight",
    "wv": "layers.{}.attention.wv.weight", "wo": "layers.{}.attention.wo.weight",
    "ffn_norm": "layers.{}.ffn_norm.weight", "w1": "layers.{}.feed_forward.w1.weight",
    "w2": "layers.{}.feed_forward.w2.weight", "w3": "layers.{}.feed_forward.w3.weight",
    "final_norm": "norm.weight", "wcls": "output.weight",
    # LayerNorm's biases, in checkpoints of train.py's LayerNorm models
    "attn_norm_bias": "layers.{}.attention_norm.bias", "ffn_norm_bias": "layers.{}.ffn_norm.bias",
    "final_norm_bias": "norm.bias",
}

HF_NAMES = {
    "token_embedding": "model.embed_tokens.weight",
    "attn_norm": "model.layers.{}.input_layernorm.weight",
    "wq": "model.layers.{}.self_attn.q_proj.weight", "wk": "model.layers.{}.self_attn.k_proj.weight",
    "wv": "model.layers.{}.self_attn.v_proj.weight", "wo": "model.layers.{}.self_attn.o_proj.weight",
    "ffn_norm": "model.layers.{}.post_attention_layernorm.weight",
    "w1": "model.layers.{}.mlp.gate_proj.weight", "w2": "model.layers.{}.mlp.down_proj.weight",
    "w3": "model.layers.{}.mlp.up_proj.weight", "final_norm": "model.norm.weight",
    "wcls": "lm_head.weight",
}

# config.json's keys of the header fields it names otherwise, for Config's messages
HF_KEYS = {"dim": "hidden_size", "hidden_dim": "intermediate_size", "n_layers": "num_hidden_layers",
           "n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads",
           "seq_len": "max_position_embeddings", "norm_eps": "rms_norm_eps"}


def getter(source, names, fix=None):
    def get(name, layer):
        t = source.get(names[name].format(layer))
        return fix(name, t) if fix else t
    return get


def refuse_unused(source, c, names, ignored=()):
    """Every tensor of the checkpoint (source.names(), less those ending in one of the `ignored`
    suffixes: tables recomputed from the config) must be one the model its config describes reads: a tensor left over, such as a layer past n_layers,
    means that the config and the weights disagree. (Shapes write_model checks.)"""
    used = {names["wcls"]} if c.shared_classifier else set()  # compared with the embedding
    for name, per_layer, _ in tensor_order(c):
        used.update(names[name].format(layer)
                    for layer in (range(c.n_layers) if per_layer else [None]))
    for name in source.names():
        if name not in used and not (isinstance(name, str) and name.endswith(ignored)):
            raise ExportError(f"{source.where}: tensor {shown(name)} is not part of the model its "
                              f"config describes (n_layers {c.n_layers}): the two disagree")


def rows_of(source, name):
    """The rows of a matrix: hidden_dim and vocab_size where the config does not give them."""
    shape = source.get(name).shape
    if len(shape) != 2:
        raise ExportError(f"{source.where}: tensor {name} has shape {shape}, not a matrix's")
    return shape[0]


def classifier_shared(source, names):
    """llama2.c ties the classifier to the embedding and still stores both; Meta may omit it."""
    if not source.has(names["wcls"]):
        return True
    return np.array_equal(source.get(names["token_embedding"]), source.get(names["wcls"]))


def load_llama2c(path, seq_len):
    ckpt = torch_load(path)
    if not isinstance(ckpt, dict) or "model_args" not in ckpt or "model" not in ckpt:
        raise ExportError(f"{path}: not a llama2.c checkpoint (needs 'model_args' and 'model')")
    args = ckpt["model_args"]
    if not isinstance(args, dict):
        raise ExportError(f"{path}: model_args is a {type(args).__name__}, not a dict")
    source = TensorSource(path, [path], ckpt)
    hidden_dim = rows_of(source, META_NAMES["w1"].format(0))
    # train.py records the norm it trained with (llama2.c's checkpoints are RMSNorm's)
    norm = args.get("norm", "rmsnorm")
    if norm not in NORM_CODES:
        raise ExportError(f"{path}: model_args norm is {shown(norm)}, not one of "
                          f"{', '.join(NORM_CODES)}")
    c = Config(args["dim"], hidden_dim, args["n_layers"], args["n_heads"],
               args.get("n_kv_heads") or args["n_heads"], args["vocab_size"],
               seq_len or args["max_seq_len"], norm_eps=args.get("norm_eps", 1e-5),
               norm=norm, norm_bias=source.has(META_NAMES["final_norm_bias"]),
               shared_classifier=classifier_shared(source, META_NAMES),
               keys={"seq_len": "max_seq_len"})
    refuse_unused(source, c, META_NAMES)
    return c, getter(source, META_NAMES)


def load_meta(path, seq_len):
    params = read_json(os.path.join(path, "params.json"))
    if params.get("use_scaled_rope"):
        raise ExportError(f"{path}: unsupported use_scaled_rope (Llama 3.1 RoPE scaling)")
    shards = sorted(p for p in os.listdir(path) if p.startswith("consolidated.") and p.endswith(".pth"))
    if not shards:
        raise ExportError(f"{path}: has params.json but no consolidated.*.pth")
    states = [TensorSource(os.path.join(path, s), [os.path.join(path, s)]) for s in shards]
    # model-parallel shards split these along dim 1, every other matrix along dim 0; norms repeat
    along_1 = ("tok_embeddings.weight", "attention.wo.weight", "feed_forward.w2.weight")

    class Merged:
        where = path

        def has(self, name):
            return states[0].has(name)

        def names(self):  # every shard holds a part of every tensor
            return states[0].names()

        def get(self, name):
            parts = [s.get(name) for s in states]
            # model parallelism splits evenly: other shapes would not concatenate, or wrongly
            if any(p.shape != parts[0].shape for p in parts):
                shapes = ", ".join(str(p.shape) for p in parts)
                raise ExportError(f"{path}: tensor {name} has shapes {shapes} in "
                                  f"{', '.join(shards)}")
            if len(parts) == 1 or parts[0].ndim < 2:
                return parts[0]
            return np.concatenate(parts, axis=1 if name.endswith(along_1) else 0)

    source = Merged()
    vocab_size = rows_of(source, META_NAMES["token_embedding"])
    hidden_dim = rows_of(source, META_NAMES["w1"].format(0))
    c = Config(params["dim"], hidden_dim, params["n_layers"], params["n_heads"],
               params.get("n_kv_heads") or params["n_heads"], vocab_size, seq_len or 2048,
               rope_theta=params.get("rope_theta", 10000.0), norm_eps=params.get("norm_eps", 1e-5),
               shared_classifier=classifier_shared(source, META_NAMES))
    refuse_unused(source, c, META_NAMES, ignored=("rope.freqs",))  # Meta's RoPE table
    return c, getter(source, META_NAMES)


def hf_weight_files(path):
    for index in (os.path.join(path, "model.safetensors.index.json"),
                  os.path.join(path, "pytorch_model.bin.index.json")):
        if os.path.exists(index):
            weight_map = field(index, read_json(index), "weight_map", dict)
            for name, file in weight_map.items():
                if not isinstance(file, str) or not os.path.isfile(os.path.join(path, file)):
                    raise ExportError(f"{index}: weight_map puts {name} in {file!r}, not a file "
                                      f"in {path}")
            return [os.path.join(path, file) for file in sorted(set(weight_map.values()))]
    for single in ("model.safetensors", "pytorch_model.bin"):
        if os.path.exists(os.path.join(path, single)):
            return [os.path.join(path, single)]
    raise ExportError(f"{path}: no model.safetensors, model.safetensors.index.json or "
                      "pytorch_model.bin beside config.json")


def unpermute(w, n_heads):
    """Undoes the Hugging Face q/k row permutation: HF rotates dimension i of a head with
    i + head_size/2 (rotate-half), Meta and run with i's pair partner 2i+1; HF's conversion moved
    row 2i to i and row 2i+1 to i + head_size/2 within each head."""
    rows, cols = w.shape
    return w.reshape(n_heads, 2, rows // n_heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def load_hf(path, seq_len):
    where = os.path.join(path, "config.json")
    cfg = read_json(where)
    arch = (field(where, cfg, "architectures", list, []) or [cfg.get("model_type", "?")])[0]
    if arch != "LlamaForCausalLM" and cfg.get("model_type") != "llama":
        raise ExportError(f"{path}: unsupported architecture {arch} (only LlamaForCausalLM)")
    if cfg.get("hidden_act", "silu") != "silu":
        raise ExportError(f"{path}: unsupported hidden_act {cfg['hidden_act']} (only silu)")
    if cfg.get("rope_scaling"):
        raise ExportError(f"{path}: unsupported rope_scaling {cfg['rope_scaling']}")
    if any(field(where, cfg, key, bool, False) for key in ("attention_bias", "mlp_bias")):
        raise ExportError(f"{path}: unsupported attention_bias/mlp_bias")
    n_heads = cfg["num_attention_heads"]
    source = TensorSource(path, hf_weight_files(path))
    shared = field(where, cfg, "tie_word_embeddings", bool, False) or \
        not source.has(HF_NAMES["wcls"])
    c = Config(cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], n_heads,
               cfg.get("num_key_value_heads") or n_heads, cfg["vocab_size"],
               seq_len or cfg.get("max_position_embeddings", 2048),
               rope_theta=cfg.get("rope_theta", 10000.0), norm_eps=cfg.get("rms_norm_eps", 1e-6),
               shared_classifier=shared, keys=HF_KEYS)
    if cfg.get("head_dim") not in (None, c.dim // c.n_heads):
        raise ExportError(f"{path}: unsupported head_dim {cfg['head_dim']} != hidden_size / heads")

    refuse_unused(source, c, HF_NAMES, ignored=("rotary_emb.inv_freq",))  # older HF's RoPE table
    shapes = {name: shape for name, _, shape in tensor_order(c)}

    def fix(name, t):
        # a tensor of another shape is left for write_model to refuse by name
        if name in ("wq", "wk") and t.shape == shapes[name]:
            return unpermute(t, c.n_heads if name == "wq" else c.n_kv_heads)
        return t

    return c, getter(source, HF_NAMES, fix)


def load_random(shape, seed, seq_len):
    """A random-weight model of a named shape (SHAPES), for benchmarks: matrices uniform in
    [-a, a] with a = 1 / sqrt(fan_in), norm weights 1, classifier shared with the embedding (so the
    file holds exactly the matrices decode streams per token). Its text is noise."""
    dim, hidden, layers, heads, kv_heads, vocab, default_seq_len = SHAPES[shape]
    c = Config(dim, hidden, layers, heads, kv_heads, vocab, seq_len or default_seq_len,
               shared_classifier=True)
    shapes = {name: shape for name, _, shape in tensor_order(c)}
    rng = np.random.default_rng(seed)

    def get(name, layer):
        shape = shapes[name]
        if name not in MATRICES:
            return np.ones(shape, np.float32)
        bound = np.float32(1.0 / np.sqrt(shape[1]))
        return rng.random(shape, dtype=np.float32) * (2 * bound) - bound

    return c, get


def export_tokenizer(path, out):
    """llama2.c's tokenizer layout: int32 max_token_length, then per piece float32 score, int32
    length, bytes; U+2581 becomes a space, BOS/EOS are written as "\\n<s>\\n" and "\\n</s>\\n" as
    llama2.c's tokenizer.py does."""
    import sentencepiece as spm

    # SentencePiece aborts the process (a C++ exception) on a directory
    require_regular_file(path)
    try:
        sp = spm.SentencePieceProcessor(model_file=path)
        # a corrupt model can load and hold a piece that is not UTF-8, which id_to_piece refuses
        texts = [sp.id_to_piece(i) for i in range(sp.vocab_size())]
    except Exception as e:
        raise ExportError(f"{path}: not a SentencePiece model ({e})")
    pieces, scores = [], []
    for i, t in enumerate(texts):
        if i == sp.bos_id():
            t = "\n<s>\n"
        elif i == sp.eos_id():
            t = "\n</s>\n"
        pieces.append(t.replace("\u2581", " ").encode("utf-8"))
        scores.append(sp.get_score(i))
    with Output(out) as f:
        f.write(struct.pack("<i", max(len(p) for p in pieces)))
        for p, s in zip(pieces, scores):
            f.write(struct.pack("<fi", s, len(p)) + p)


def load(path, seq_len):
    """(Config, get) for a checkpoint path of any supported kind."""
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, "config.json")):
            return load_hf(path, seq_len)
        if os.path.exists(os.path.join(path, "params.json")):
            return load_meta(path, seq_len)
        raise ExportError(f"{path}: directory without config.json (Hugging Face) or params.json (Meta)")
    if not os.path.exists(path):
        raise ExportError(f"{path}: no such file or directory")
    return load_llama2c(path, seq_len)


class ArgumentParser(argparse.ArgumentParser):
    """Usage errors as every other error: one line and exit 1 (argparse prints its usage block
    and exits 2)."""

    def error(self, message):
        print_error(message)
        self.exit(1)


def refuse_options_that_do_not_apply(a):
    """An option that would change nothing is an error, rather than silently ignored."""
    if a.group_size is not None and a.dtype != "q8_0":
        raise ExportError("--group-size goes with --dtype q8_0")
    if a.seed is not None and a.random is None:
        raise ExportError("--seed goes with --random")
    if a.input is not None and a.input.endswith(".model"):
        given = [f for f, v in (("--dtype", a.dtype), ("--group-size", a.group_size),
                                ("--seq-len", a.seq_len)) if v is not None]
        if given:
            raise ExportError(f"{given[0]} goes with a model export, not with a tokenizer "
                              f"({a.input})")


def main(argv=None):
    p = ArgumentParser(
        prog="export.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n", 2)[2] + "\nexamples:\n"
        "  export.py ../shared/models/stories260K.pt --out models/stories260K.nllm\n"
        "  export.py path/to/TinyLlama-1.1B --out tinyllama.nllm\n"
        "  export.py ../shared/models/tok512.model --out models/tok512.bin\n"
        "  export.py --random 110M --dtype q8_0 --out build/bench/110M-q8_0.nllm\n")
    p.add_argument("input", nargs="?",
                   help="checkpoint file or directory, or a SentencePiece .model")
    p.add_argument("--out", required=True, help="file to write")
    # the defaults are applied below, so that an option given where it does not apply is refused
    p.add_argument("--dtype", choices=sorted(DTYPE_CODES),
                   help="weight matrices as f32 (default), bf16, f16, q8_0 or q4_0")
    p.add_argument("--group-size", type=int,
                   help="q8_0 values per scale along a row: 32 (default) or 64")
    p.add_argument("--random", choices=sorted(SHAPES), metavar="SHAPE",
                   help="write a random-weight model of SHAPE (%(choices)s) instead of an input")
    p.add_argument("--seed", type=int, help="seed of --random (default 0)")
    p.add_argument("--seq-len", type=int,
                   help="kv cache length to record, 1..%d (default: the checkpoint's max_seq_len "
                   "/ max_position_embeddings; 2048 for Meta checkpoints, which do not store it; "
                   "the shape's for --random)" % MAX_SIZE)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    # a SIGTERM (kill, timeout) unwinds like an error, so that no temporary file is left
    signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))
    try:
        # here rather than in Config, whose message would name the checkpoint's field
        if a.seq_len is not None and not 1 <= a.seq_len <= MAX_SIZE:
            raise ExportError(f"--seq-len must be in 1..{MAX_SIZE}, got {a.seq_len}")
        if a.seed is not None and a.seed < 0:  # numpy's generators take no negative seed
            raise ExportError(f"--seed must be 0 or more, got {a.seed}")
        if a.group_size is not None and a.group_size not in GROUP_SIZES:
            raise ExportError(f"--group-size must be 32 or 64, got {a.group_size}")
        if (a.input is None) == (a.random is None):
            raise ExportError("give either an input or --random SHAPE")
        refuse_options_that_do_not_apply(a)
        a.dtype, a.seed = a.dtype or "f32", a.seed or 0
        a.group_size = a.group_size or 32
        if a.input is not None:
            refuse_input_as_output(a.input, a.out)
        if a.random:
            c, get = load_random(a.random, a.seed, a.seq_len)
            write_model(a.out, c, get, a.dtype, a.group_size, progress=not a.quiet)
        elif a.input.endswith(".model"):
            export_tokenizer(a.input, a.out)
        else:
            c, get = load(a.input, a.seq_len)
            write_model(a.out, c, get, a.dtype, a.group_size, progress=not a.quiet)
    except ExportError as e:
        print_error(str(e))
        return 1
    except KeyError as e:
        print_error(f"{a.input}: missing field {e} in its config")
        return 1
    except OSError as e:
        print_error(f"{a.input}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
