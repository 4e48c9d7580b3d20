"""Readers of the checkpoints export.py and train.py take in (docs/MODELS.md): safetensors files,
read by their spec with numpy, and torch pickles, read through an unpickler that builds tensors and
plain containers only (a hostile file runs no code); TensorSource, a checkpoint's tensors by name
over one or more such files; the JSON of configs and index files. Every problem is an ExportError
of one line that names the file.
"""
import json
import math
import os
import pickle
import struct
import types

import numpy as np

from nllm_format import ExportError, bf16_to_f32

SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}


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
