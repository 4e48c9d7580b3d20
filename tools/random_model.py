#!/usr/bin/env python3
"""Write a random-weight model of a named shape in llama2.c's legacy layout, for benchmarks.

    /usr/bin/python3 tools/random_model.py SHAPE OUT

SHAPE is one of the names in SHAPES. Weights are uniform in [-a, a] with a = 1 / sqrt(fan_in), norm
weights are 1, and the classifier is shared with the token embedding, so the file has exactly the
bytes that decode must stream per token. The text such a model writes is noise: only its speed
means anything.
"""
import argparse
import struct
import sys

import numpy as np

# name: (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len)
SHAPES = {
    "15M": (288, 768, 6, 6, 6, 32000, 256),  # stories15M
    "110M": (768, 2048, 12, 12, 12, 32000, 1024),  # stories110M
    "1.1B": (2048, 5632, 22, 32, 4, 32000, 2048),  # TinyLlama-1.1B
}


def write_uniform(f, rng, rows, cols, fan_in):
    """Writes a (rows, cols) float32 matrix in chunks, so 1.1B needs little memory."""
    bound = 1.0 / np.sqrt(fan_in)
    chunk = max(1, (1 << 24) // cols)
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        (rng.random((n, cols), dtype=np.float32) * (2 * bound) - bound).tofile(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = SHAPES[args.shape]
    head_size = dim // heads
    kv_dim = kv_heads * head_size
    rng = np.random.default_rng(args.seed)
    with open(args.out, "wb") as f:
        f.write(struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab, seq_len))
        write_uniform(f, rng, vocab, dim, dim)  # token_embedding
        np.ones(layers * dim, np.float32).tofile(f)  # attn_norm
        write_uniform(f, rng, layers * dim, dim, dim)  # wq
        write_uniform(f, rng, layers * kv_dim, dim, dim)  # wk
        write_uniform(f, rng, layers * kv_dim, dim, dim)  # wv
        write_uniform(f, rng, layers * dim, dim, dim)  # wo
        np.ones(layers * dim, np.float32).tofile(f)  # ffn_norm
        write_uniform(f, rng, layers * hidden, dim, dim)  # w1
        write_uniform(f, rng, layers * dim, hidden, hidden)  # w2
        write_uniform(f, rng, layers * hidden, dim, dim)  # w3
        np.ones(dim, np.float32).tofile(f)  # final_norm
        np.zeros(seq_len * head_size, np.float32).tofile(f)  # legacy RoPE tables, unused
    return 0


if __name__ == "__main__":
    sys.exit(main())
