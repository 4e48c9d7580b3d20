#!/usr/bin/env python3
"""Seeds for `make fuzz`'s GGUF target (tests/fuzz_gguf.c): real llama GGUF files from our writer
(nllm_gguf.py), small enough to mutate quickly (about 3 KB): a model of dim 8, one layer, two
heads sharing one kv head, a separate output matrix and an 8-piece vocabulary of every token
type, written with each matrix type the writer has (f32, f16, bf16); and the f32 one with a
key/value of every value type, alone and as an array (negative integers, a float64), so that
each is there to mutate from the start.

usage: tests/gguf_seed.py DIR   (writes DIR/tiny_f32.gguf, DIR/tiny_f16.gguf, ...)
Needs numpy only (Debian's /usr/bin/python3).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nllm_gguf as g  # noqa: E402
from nllm_format import Config  # noqa: E402


def main(out_dir):
    c = Config(dim=8, hidden_dim=16, n_layers=1, n_heads=2, n_kv_heads=1, vocab_size=8, seq_len=16)
    vocab = g.Vocab(["<unk>", "<s>", "</s>", "<0x0A>", "\u2581a", "\u2581the", "b", "<unused>"],
                    [0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -1e4],
                    [g.TOKEN_UNKNOWN, g.TOKEN_CONTROL, g.TOKEN_CONTROL, g.TOKEN_BYTE,
                     g.TOKEN_NORMAL, g.TOKEN_NORMAL, g.TOKEN_USER_DEFINED, g.TOKEN_UNUSED],
                    bos_id=1, eos_id=2, unk_id=0)
    rng = np.random.default_rng(0)
    tensors = {name: rng.standard_normal(shape).astype(np.float32)
               for name, shape in g.tensor_shapes(c).items()}
    os.makedirs(out_dir, exist_ok=True)
    for dtype in g.TENSOR_TYPES:
        with open(os.path.join(out_dir, f"tiny_{dtype}.gguf"), "wb") as f:
            g.write_model(f, c, tensors, vocab, dtype, name="tiny")
    values = {g.UINT8: 200, g.INT8: -100, g.UINT16: 60000, g.INT16: -30000, g.UINT32: 7,
              g.INT32: -7, g.FLOAT32: 0.5, g.BOOL: True, g.STRING: "seven", g.UINT64: 2**40,
              g.INT64: -2**40, g.FLOAT64: 1e-300}
    every_type = [(f"test.{t}", t, v) for t, v in values.items()]
    every_type += [(f"test.array_{t}", g.ARRAY, (t, [v, v])) for t, v in values.items()]
    listed = [(n, s, "f32", tensors[n]) for n, s in g.tensor_shapes(c).items()]
    with open(os.path.join(out_dir, "tiny_every_value_type.gguf"), "wb") as f:
        g.write_gguf(f, g.metadata(c, vocab, "f32", "tiny") + every_type, listed)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-2])
    main(sys.argv[1])
