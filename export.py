#!/usr/bin/env python3
"""Export checkpoints to normllama's model file (docs/FORMAT.md) or to GGUF, llama.cpp's, and
SentencePiece models to the tokenizer file run reads.

Inputs (the kind is told from the path):
  llama2.c checkpoint   a .pt file written by llama2.c's train.py: "model_args" and a "model"
                        state dict (keys with or without the "_orig_mod." prefix of torch.compile)
  Hugging Face Llama    a directory with config.json (architecture LlamaForCausalLM) and its
                        weights as model.safetensors, a sharded model.safetensors.index.json,
                        pytorch_model.bin or a sharded pytorch_model.bin.index.json; f32, f16 and
                        bf16 tensors; tied or separate classifier; rms_norm_eps and rope_theta;
                        Llama 3.x's rope_scaling (rope_type llama3) and tokenizer.json, which
                        only GGUF carries (rope_freqs.weight, tokenizer.ggml.*)
  Meta Llama            a directory with params.json and consolidated.*.pth (one or more shards)
  SentencePiece model   a .model file: written as the llama2.c tokenizer layout (same as tok512.bin)
  --random SHAPE        no input: a random-weight model of a benchmark shape (15M, 110M, 1.1B)

Weight matrices are written as --dtype: f32, bf16 or f16 (the last two rounding each weight to the
nearest), q8_0 (int8 with one f32 scale per --group-size values of a row) or q4_0 (4-bit codes
with one f32 scale per 32 values of a row); norm weights and biases are always f32.

The file carries the model's vocabulary, so that run needs no -z: the SentencePiece model given
with --tokenizer, or found beside the input (tokenizer.model in a Hugging Face or Meta directory,
or in a Meta directory's parent; tok<vocab_size>.model, then tokenizer.model, beside a .pt; for
--random, the Llama 2 vocabulary in models/tokenizer.model); a Hugging Face directory's
tokenizer.json when it has no tokenizer.model (byte-level BPE, GGUF only).

An --out ending in .gguf writes GGUF (nllm_gguf.py), which llama.cpp runs: an RMSNorm model as
the llama architecture, a LayerNorm one as stablelm; q8_0 and q4_0 in ggml's blocks of 32 with
fp16 scales (a matrix whose rows are not whole blocks is written f16). docs/MODELS.md says more.

Run with Debian's Python (/usr/bin/python3, see `make deps-train`): numpy, torch, sentencepiece
and tqdm. Errors print one line "export.py: error: ..." and exit 1.
"""
import argparse
import importlib.util
import os
import signal
import sys
from collections.abc import Mapping

# Started as ./export.py, the python3 first on PATH runs it, which may lack Debian's packages:
# one line naming the interpreter to use, not an ImportError's traceback (here or mid-export)
for _module in ("numpy", "torch", "sentencepiece", "tqdm"):
    if importlib.util.find_spec(_module) is None:
        sys.exit(f"export.py: error: {sys.executable} cannot import {_module}: run export.py with "
                 f"/usr/bin/python3, Debian's Python, with python3-{_module} installed (make "
                 "deps-train)")

# The file itself is nllm_format's, the readers of checkpoints nllm_checkpoint's: this script holds
# what each kind of checkpoint names and holds (the loaders), the tokenizer's export and the
# command line.
import numpy as np  # noqa: E402 (after the check above)
from nllm_checkpoint import (TensorSource, field, read_json,  # noqa: E402
                             require_regular_file, torch_load)
import nllm_gguf  # noqa: E402
from nllm_format import (DTYPES, MATRICES, MAX_SIZE, NORM_CODES, Config,  # noqa: E402
                         ExportError, Output, chat_template_beside, check_vocab,
                         sentencepiece_vocab, shown, tensor_order, tokenizer_bytes, write_model)

HERE = os.path.dirname(os.path.abspath(__file__))

# Random-weight models for benchmarks (--random): (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
# vocab_size, seq_len)
SHAPES = {
    "15M": (288, 768, 6, 6, 6, 32000, 256),  # stories15M
    "110M": (768, 2048, 12, 12, 12, 32000, 1024),  # stories110M
    "1.1B": (2048, 5632, 22, 32, 4, 32000, 2048),  # TinyLlama-1.1B
}


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
    # the norms' biases and per-site scalars, in checkpoints of train.py's models (nllm_model.py)
    "attn_norm_bias": "layers.{}.attention_norm.bias", "ffn_norm_bias": "layers.{}.ffn_norm.bias",
    "final_norm_bias": "norm.bias",
    "attn_norm_log_eps": "layers.{}.attention_norm.log_eps",
    "ffn_norm_log_eps": "layers.{}.ffn_norm.log_eps", "final_norm_log_eps": "norm.log_eps",
    "attn_norm_alpha": "layers.{}.attention_norm.alpha",
    "ffn_norm_alpha": "layers.{}.ffn_norm.alpha", "final_norm_alpha": "norm.alpha",
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
    scaling = field(where, cfg, "rope_scaling", dict, {})
    c.rope_freqs = nllm_gguf.llama3_rope_freqs(scaling, c.dim // c.n_heads,
                                               cfg.get("rope_theta", 10000.0), where) \
        if scaling else None

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
    """llama2.c's tokenizer layout (nllm_format.tokenizer_bytes)."""
    require_regular_file(path)
    vocab = sentencepiece_vocab(path)
    with Output(out) as f:
        f.write(tokenizer_bytes(vocab))


def bpe_vocab(path, c):
    """The byte-level BPE vocabulary of a tokenizer.json (with tokenizer_config.json beside it,
    when there is one), checked against the model c."""
    require_regular_file(path)
    beside = os.path.join(os.path.dirname(path), "tokenizer_config.json")
    vocab = nllm_gguf.bpe_vocab(read_json(path),
                                read_json(beside) if os.path.isfile(beside) else None)
    if len(vocab.tokens) != c.vocab_size:
        raise ExportError(f"{path} has {len(vocab.tokens)} tokens but the model's vocab_size is "
                          f"{c.vocab_size}")
    return vocab


def find_vocab(a, c):
    """The vocabulary the exported file carries: --tokenizer's SentencePiece model or
    tokenizer.json, else the first found of the places the module's docstring lists, checked
    against the model c."""
    if a.tokenizer and a.tokenizer.endswith(".json"):
        return bpe_vocab(a.tokenizer, c)
    if not a.tokenizer and a.input and os.path.isdir(a.input) and \
            not os.path.isfile(os.path.join(a.input, "tokenizer.model")) and \
            os.path.isfile(os.path.join(a.input, "tokenizer.json")):
        return bpe_vocab(os.path.join(a.input, "tokenizer.json"), c)
    if a.tokenizer:
        tried = [a.tokenizer]
    elif a.random:
        tried = [os.path.join(HERE, "models", "tokenizer.model")]
    elif os.path.isdir(a.input):
        tried = [os.path.join(a.input, "tokenizer.model"),
                 os.path.join(os.path.dirname(os.path.abspath(a.input)), "tokenizer.model")]
    else:
        beside = os.path.dirname(a.input)
        tried = [os.path.join(beside, f"tok{c.vocab_size}.model"),
                 os.path.join(beside, "tokenizer.model")]
    for path in tried:
        if a.tokenizer or os.path.isfile(path):
            require_regular_file(path)
            vocab = sentencepiece_vocab(path)
            check_vocab(vocab, c, path)
            vocab.chat_template = chat_template_beside(path)
            return vocab
    raise ExportError(f"no vocabulary for the model: tried {', '.join(tried)} (give its "
                      "SentencePiece model with --tokenizer; the file carries it so that run needs "
                      "no -z)")


class GgufTensors(Mapping):
    """The model's tensors by their GGUF names, each read from get when the writer asks."""

    def __init__(self, c, get):
        self.get = get
        self.names = {nllm_gguf.gguf_name(name, layer): (name, layer)
                      for name, per_layer, _ in tensor_order(c)
                      for layer in (range(c.n_layers) if per_layer else [None])}

    def __getitem__(self, key):
        return self.get(*self.names[key])

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.names)


def write(a, c, get):
    """The model file --out names: GGUF for a .gguf name, else ours; carrying the vocabulary."""
    vocab = find_vocab(a, c)
    gguf_only = ("a llama3 rope_scaling" if getattr(c, "rope_freqs", None) is not None else
                 "a byte-level BPE vocabulary" if isinstance(vocab, nllm_gguf.BpeVocab) else None)
    if gguf_only and not a.out.endswith(".gguf"):
        raise ExportError(f"{a.input} has {gguf_only}, which only GGUF carries (rope_freqs.weight, "
                          "tokenizer.ggml.*): give --out X.gguf")
    if not a.out.endswith(".gguf"):
        write_model(a.out, c, get, a.dtype, a.group_size, progress=not a.quiet, vocab=vocab)
        return
    if a.group_size not in (None, 32):
        raise ExportError(f"--group-size {a.group_size} goes with a normllama file: GGUF's q8_0 "
                          "blocks are 32 values")
    name = os.path.basename(os.path.normpath(a.input)) if a.input else f"random {a.random}"
    nllm_gguf.architecture(c)  # before GgufTensors, which has GGUF names for llama.cpp's alone
    with Output(a.out) as f:
        nllm_gguf.write_model(f, c, GgufTensors(c, get), vocab, a.dtype, name)


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
                                ("--seq-len", a.seq_len), ("--tokenizer", a.tokenizer))
                 if v is not None]
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
        "  export.py ../shared/models/stories260K.pt --dtype q8_0 --out stories260K.gguf\n"
        "  export.py --random 110M --dtype q8_0 --out build/bench/110M-q8_0.nllm\n")
    p.add_argument("input", nargs="?",
                   help="checkpoint file or directory, or a SentencePiece .model")
    p.add_argument("--out", required=True, help="file to write")
    # the defaults are applied below, so that an option given where it does not apply is refused
    p.add_argument("--dtype", choices=sorted(DTYPES),
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
    p.add_argument("--tokenizer", metavar="MODEL",
                   help="the SentencePiece model whose vocabulary the file carries (default: "
                   "found beside the input)")
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
        group_sizes = DTYPES["q8_0"].group_sizes
        if a.group_size is not None and a.group_size not in group_sizes:
            raise ExportError(f"--group-size must be {' or '.join(map(str, group_sizes))}, got "
                              f"{a.group_size}")
        if (a.input is None) == (a.random is None):
            raise ExportError("give either an input or --random SHAPE")
        refuse_options_that_do_not_apply(a)
        a.dtype, a.seed = a.dtype or "f32", a.seed or 0
        if a.input is not None:
            refuse_input_as_output(a.input, a.out)
        if a.random:
            write(a, *load_random(a.random, a.seed, a.seq_len))
        elif a.input.endswith(".model"):
            export_tokenizer(a.input, a.out)
        else:
            write(a, *load(a.input, a.seq_len))
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
