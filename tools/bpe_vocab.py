#!/usr/bin/python3
"""Converts a Hugging Face byte-level BPE tokenizer into a vocabulary-only GGUF that run reads
(`./run VOCAB.gguf --tokenize TEXT`) and llama.cpp loads.

    /usr/bin/python3 tools/bpe_vocab.py tokenizer.json [tokenizer_config.json] OUT.gguf
    /usr/bin/python3 tools/bpe_vocab.py --gpt2 encoder.json vocab.bpe OUT.gguf
    options: --pre NAME   tokenizer.ggml.pre (llama-bpe, gpt-2, qwen2, smollm) instead of the
                          one recognized from the pre_tokenizer

The second form reads GPT-2's original files (encoder.json and vocab.bpe). The keys are
nllm_gguf.bpe_metadata's. Errors: one line on stderr, exit 1.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import nllm_gguf  # noqa: E402
from nllm_format import ExportError  # noqa: E402


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ExportError(f"{path}: {e}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--gpt2", action="store_true", help="read encoder.json and vocab.bpe")
    ap.add_argument("--pre", help="tokenizer.ggml.pre")
    args = ap.parse_args(argv)
    if not 2 <= len(args.files) <= 3 or (args.gpt2 and len(args.files) != 3):
        ap.error("give tokenizer.json [tokenizer_config.json] OUT.gguf, or --gpt2 encoder.json "
                 "vocab.bpe OUT.gguf")
    *inputs, out = args.files
    try:
        if args.gpt2:
            with open(inputs[1], encoding="utf-8") as f:
                tokenizer = nllm_gguf.gpt2_tokenizer_json(read_json(inputs[0]), f.read())
            config = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
        else:
            tokenizer = read_json(inputs[0])
            config = read_json(inputs[1]) if len(inputs) == 2 else None
        vocab = nllm_gguf.bpe_vocab(tokenizer, config, args.pre)
        with open(out, "wb") as f:
            nllm_gguf.write_bpe_vocab(f, vocab, os.path.basename(out))
    except (ExportError, OSError) as e:
        print(f"bpe_vocab: error: {e}", file=sys.stderr)
        return 1
    print(f"{out}: {len(vocab.tokens)} tokens, {len(vocab.merges)} merges, pre {vocab.pre}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
