/* --tokenize TEXT and --tokenize-file FILE: the tokenizer alone, without the weights. The first
 * prints the ids of TEXT, BOS first, one per line with its piece as llama.cpp's tokenize tool
 * does (or, with --json, {"ids": [...], "pieces": [...]}); the second the number of tokens of
 * FILE and the encoding speed.
 *
 * It leaves the encoding to tokenizer.h and the checks of the command line to run.c.
 */
#ifndef TOKENIZE_H
#define TOKENIZE_H

#include "vocab.h"

/* Encodes `text` (--tokenize; path NULL) or the file at `path` (--tokenize-file, read_text's
 * checks) with v, BOS first (a BPE vocabulary's if it adds one; control tokens' text is plain
 * text), and prints to stdout: with path, "PATH: N tokens (BOS included) from B bytes in S s,
 * R MB/s"; else the ids, one per line as "%6d -> 'PIECE'" with control bytes escaped (io.h's
 * write_escaped), or with json set one JSON object. Text that is not valid UTF-8 is refused
 * (dies), as a prompt is, rather than encoded with U+FFFD for its bad bytes as tokenizer_encode
 * (and SentencePiece) would. */
void run_tokenize(const Vocab *v, const char *text, const char *path, int json);

/* run_tokenize with the byte-level BPE vocabulary of the GGUF file at model_path (no weights
 * are read), and 0; 1 without printing anything when the file is not a GGUF of a gpt2 tokenizer
 * (vocab_load_gguf). Dies with its one-line error when the vocabulary does not load. */
int run_tokenize_gguf(const char *model_path, const char *text, const char *path, int json);

#endif
