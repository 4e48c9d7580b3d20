"""llama.cpp as the Python tests' oracle (make llama-oracle installs it from npm): where its pieces
are, a Skip naming the one that is absent, its gguf-py (a llama GGUF's hyperparameters as its
GGUFWriter writes them), and run's and llama.cpp's logits of the same ids, for
tests/test_gguf_writer.py and tests/test_llama3.py."""
import os
import subprocess
import sys

import numpy as np

from harness import Skip

RUN = os.environ.get("NORMLLAMA_RUN", "./run")
LLAMA_LOGITS = "build/llama_logits"
GGUF_PY = "build/llama.cpp/gguf-py"


def need(path, what):
    if not os.path.exists(path):
        raise Skip(f"{path} is not there: {what} (make llama-oracle; needs npm)")


def gguf_py():
    """llama.cpp's gguf-py package, from make llama-oracle's source."""
    need(GGUF_PY, "llama.cpp's gguf-py")
    if GGUF_PY not in sys.path:
        sys.path.insert(0, GGUF_PY)
    import gguf
    return gguf


def checked(*args):
    """The stdout of a program that must succeed (its stderr in the failure)."""
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.returncode == 0, f"{args[0]}: {p.stderr}"
    return p.stdout


def run_logits(model, ids, text, out, extra=()):
    """run's logits of every position of text (whose ids are ids), teacher-forced (-n: the text's
    own length), through the file out."""
    checked(RUN, model, *extra, "-t", "0", "-n", str(len(ids)), "--logits", out, text)
    return np.fromfile(out, np.float32).reshape(len(ids), -1)


def llama_logits(model, ids, out):
    """llama.cpp's logits of ids (tests/llama_logits.c: F32 kv cache), through the file out."""
    need(LLAMA_LOGITS, "llama.cpp")
    checked(LLAMA_LOGITS, model, "--logits", out, *map(str, ids))
    return np.fromfile(out, np.float32).reshape(len(ids), -1)


def llama_writer(gguf, path, c):
    """gguf-py's GGUFWriter of a llama GGUF at path with the hyperparameter keys
    convert_hf_to_gguf.py writes for the model c (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
    seq_len, norm_eps, rope_theta); the caller adds the vocabulary and tensors and writes it."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(c.seq_len)
    w.add_embedding_length(c.dim)
    w.add_block_count(c.n_layers)
    w.add_feed_forward_length(c.hidden_dim)
    w.add_head_count(c.n_heads)
    w.add_head_count_kv(c.n_kv_heads)
    w.add_layer_norm_rms_eps(c.norm_eps)
    w.add_rope_freq_base(c.rope_theta)
    w.add_rope_dimension_count(c.dim // c.n_heads)
    return w


def write_tensors(w, tensors):
    """Adds tensors ({GGUF name: array}, as float32) to the writer w and writes the file."""
    for name, t in tensors.items():
        w.add_tensor(name, np.asarray(t, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
