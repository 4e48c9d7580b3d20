/* Byte-level BPE (bpe.c) on vocabularies built here as GGUF files: a small valid one whose ids are
 * derived by hand from its merges, then hostile ones, each refused with its one-line message
 * (merges naming tokens that do not exist, duplicate tokens, a token of invalid UTF-8, a 1 GiB
 * token, an empty vocabulary, an unknown regex name, ...), and run's --tokenize on them. The
 * parity with real vocabularies and independent tokenizers is tests/bpe_parity.py's. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe.h"
#include "helpers.h"

/* ----------------------------------------------------------------------------
 * A GGUF vocabulary, built byte by byte (ggml's docs/gguf.md; gguf.h's summary) */

/* A little-endian integer of `bytes` bytes (the machine's order: run reads little-endian files
 * only), a string (uint64 length, bytes), a key and its value type, an array's head. */
static void put_uint(FILE *f, uint64_t v, size_t bytes) {
    cr_assert_eq(fwrite(&v, bytes, 1, f), 1);
}

static void put_str(FILE *f, const char *s) {
    put_uint(f, strlen(s), 8);
    cr_assert_eq(fwrite(s, 1, strlen(s), f), strlen(s));
}

static void put_key(FILE *f, const char *key, uint32_t type) {
    put_str(f, key);
    put_uint(f, type, 4);
}

static void put_array_head(FILE *f, const char *key, uint32_t elem_type, uint64_t n) {
    put_key(f, key, GGUF_ARRAY);
    put_uint(f, elem_type, 4);
    put_uint(f, n, 8);
}

/* The header of a GGUF of n_kvs key/values and no tensor. */
static void put_header(FILE *f, uint64_t n_kvs) {
    cr_assert_eq(fwrite("GGUF", 4, 1, f), 1);
    put_uint(f, 3, 4);
    put_uint(f, 0, 8);
    put_uint(f, n_kvs, 8);
}

/* A vocabulary: the 256 one-byte tokens (ids 0..255, in GPT-2's byte alphabet) unless no_bytes,
 * then `extra` tokens of the given types, the merges, and the keys. */
typedef struct {
    const char *model, *pre;
    const char *extra[8];
    int32_t extra_type[8]; /* 0: normal */
    int n_extra;
    const char *merges[8];
    int n_merges;
    int no_bytes;
    int bos_id; /* -1: no key */
    int add_bos;
    int no_add_bos_key; /* 1: no tokenizer.ggml.add_bos_token (add_bos unused) */
} Spec;

/* GPT-2's bytes_to_unicode, written out from its definition: the byte's code point in UTF-8. */
static void alphabet_char(int byte, char out[3]) {
    int printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
    int code = byte, shifted = 0;
    if (!printable) {
        for (int b = 0; b < byte; b++)
            shifted += !((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE);
        code = 256 + shifted;
    }
    if (code < 0x80) {
        out[0] = (char)code, out[1] = '\0';
    } else {
        out[0] = (char)(0xC0 | code >> 6), out[1] = (char)(0x80 | (code & 0x3F)), out[2] = '\0';
    }
}

/* The spec's GGUF in memory (*size bytes; the caller frees). */
static char *build(const Spec *s, size_t *size) {
    char *data;
    FILE *f = open_memstream(&data, size);
    cr_assert_not_null(f);
    int n_tokens = (s->no_bytes ? 0 : 256) + s->n_extra;
    put_header(f, 7 - s->no_add_bos_key + (s->bos_id >= 0));
    put_key(f, "tokenizer.ggml.model", GGUF_STRING);
    put_str(f, s->model ? s->model : "gpt2");
    put_key(f, "tokenizer.ggml.pre", GGUF_STRING);
    put_str(f, s->pre ? s->pre : "gpt-2");
    put_array_head(f, "tokenizer.ggml.tokens", GGUF_STRING, (uint64_t)n_tokens);
    for (int i = 0; i < 256 && !s->no_bytes; i++) {
        char c[3];
        alphabet_char(i, c);
        put_str(f, c);
    }
    for (int i = 0; i < s->n_extra; i++) put_str(f, s->extra[i]);
    put_array_head(f, "tokenizer.ggml.token_type", GGUF_INT32, (uint64_t)n_tokens);
    for (int i = 0; i < n_tokens; i++) {
        int extra = i - (s->no_bytes ? 0 : 256);
        put_uint(f, extra >= 0 && s->extra_type[extra] ? (uint32_t)s->extra_type[extra] : 1, 4);
    }
    put_array_head(f, "tokenizer.ggml.merges", GGUF_STRING, (uint64_t)s->n_merges);
    for (int i = 0; i < s->n_merges; i++) put_str(f, s->merges[i]);
    put_key(f, "tokenizer.ggml.eos_token_id", GGUF_UINT32);
    put_uint(f, 0, 4);
    if (!s->no_add_bos_key) {
        put_key(f, "tokenizer.ggml.add_bos_token", GGUF_BOOL);
        put_uint(f, (uint64_t)s->add_bos, 1);
    }
    if (s->bos_id >= 0) {
        put_key(f, "tokenizer.ggml.bos_token_id", GGUF_UINT32);
        put_uint(f, (uint64_t)s->bos_id, 4);
    }
    cr_assert_eq(fclose(f), 0);
    return data;
}

/* Loads the spec's vocabulary from a buffer of exactly its size (so that `make sanitize` sees a
 * read past it). Returns bpe_load_gguf's result (or gguf_parse's -1), err filled. */
static int load(const Spec *s, Bpe *bpe, char *err, size_t errlen) {
    size_t size;
    char *data = build(s, &size), *exact = malloc(size);
    memcpy(exact, data, size);
    Gguf g;
    int rc = gguf_parse(&g, (const uint8_t *)exact, size, err, errlen);
    if (rc == 0) {
        rc = bpe_load_gguf(bpe, &g, err, errlen);
        gguf_free(&g);
    }
    free(exact);
    free(data);
    return rc;
}

static void expect_refused(const Spec *s, const char *needle) {
    Bpe bpe;
    char err[512] = "";
    int rc = load(s, &bpe, err, sizeof err);
    cr_assert_eq(rc, -1, "loaded (%d), expected an error with \"%s\"", rc, needle);
    cr_assert(err[0] && !strchr(err, '\n'), "not one line: \"%s\"", err);
    cr_assert(strstr(err, needle), "error \"%s\" lacks \"%s\"", err, needle);
}

/* The valid vocabulary: merges "a b" -> "ab" (id 256), "Ġ ab" -> " ab" (257), "ab c" -> "abc"
 * (258), then "b c" -> "bc" (259, rank 3: after "ab c"), an added user-defined token "<u>" (260)
 * and a control token "<|c|>" (261, BOS). */
static const Spec valid = {
    .extra = {"ab",
              "\xC4\xA0"
              "ab",
              "abc", "bc", "<u>", "<|c|>"},
    .extra_type = {0, 0, 0, 0, BPE_TOKEN_USER_DEFINED, BPE_TOKEN_CONTROL},
    .n_extra = 6,
    .merges = {"a b", "\xC4\xA0 ab", "ab c", "b c"},
    .n_merges = 4,
    .bos_id = 261,
    .add_bos = 1,
};

static long encode(const Bpe *b, const char *text, int flags, int *ids) {
    return bpe_encode(b, text, strlen(text), flags, ids);
}

/* ----------------------------------------------------------------------------
 * The valid vocabulary: ids derived from the merges by hand */

Test(bpe, merges_apply_by_rank_and_added_tokens_as_asked) {
    Bpe b;
    char err[512];
    cr_assert_eq(load(&valid, &b, err, sizeof err), 0, "%s", err);
    int ids[64];
    /* "abc": pairs ab (rank 0) and bc (3): ab first, then ab+c (2) */
    cr_assert_eq(encode(&b, "abc", 0, ids), 1);
    cr_assert_eq(ids[0], 258);
    /* " abc" is one word (GPT-2's ' ?\p{L}+'): Ġ a b c -> Ġ ab c -> (Ġab rank 1 before abc rank 2)
     * " ab" c: 257, 'c' */
    cr_assert_eq(encode(&b, " abc", 0, ids), 2);
    cr_assert(ids[0] == 257 && ids[1] == 'c', "%d %d", ids[0], ids[1]);
    /* "bca": bc (rank 3) only */
    cr_assert_eq(encode(&b, "bca", 0, ids), 2);
    cr_assert(ids[0] == 259 && ids[1] == 'a');
    /* the user-defined token always; the control one only when asked; BOS when asked */
    cr_assert_eq(encode(&b, "<u><|c|>", BPE_ADD_BOS, ids), 1 + 1 + 5);
    cr_assert(ids[0] == 261 && ids[1] == 260 && ids[2] == '<' && ids[3] == '|');
    cr_assert_eq(encode(&b, "<u><|c|>", BPE_PARSE_SPECIAL, ids), 2);
    cr_assert(ids[0] == 260 && ids[1] == 261);
    cr_assert_eq(encode(&b, "", BPE_ADD_BOS, ids), 1);
    cr_assert_eq(encode(&b, "", 0, ids), 0);
    bpe_free(&b);
}

Test(bpe, add_bos_by_default_as_llama_cpp_for_the_family) {
    /* without tokenizer.ggml.add_bos_token, llama.cpp adds BOS for llama-bpe (Llama 3 GGUFs of
     * older converters) and not for the other families (llama-vocab.cpp) */
    const char *pres[4] = {"llama-bpe", "gpt-2", "qwen2", "smollm"};
    for (int i = 0; i < 4; i++) {
        Spec s = valid;
        s.pre = pres[i];
        s.no_add_bos_key = 1;
        Bpe b;
        char err[512];
        cr_assert_eq(load(&s, &b, err, sizeof err), 0, "%s", err);
        int ids[8];
        cr_assert_eq(encode(&b, "", BPE_ADD_BOS, ids), i == 0, "%s", pres[i]);
        bpe_free(&b);
    }
}

Test(bpe, invalid_utf8_is_kept_byte_for_byte) {
    Bpe b;
    char err[512];
    cr_assert_eq(load(&valid, &b, err, sizeof err), 0, "%s", err);
    const char text[] = "ab\xC3\x28\xFF"
                        "abc\xE6\x97";
    int ids[64];
    long n = encode(&b, text, 0, ids);
    int want[] = {256, 0xC3, '(', 0xFF, 258, 0xE6, 0x97};
    cr_assert_eq(n, 7);
    cr_assert_arr_eq(ids, want, sizeof want);
    bpe_free(&b);
}

Test(bpe, streaming_decode_holds_a_split_character) {
    Bpe b;
    char err[512];
    cr_assert_eq(load(&valid, &b, err, sizeof err), 0, "%s", err);
    /* "日" is E6 97 A5: three one-byte tokens; then 'a', then a lone E6 flushed at the end */
    int ids[] = {0xE6, 0x97, 0xA5, 'a', 0xE6};
    size_t want[] = {0, 0, 3, 1, 0};
    char out[64], all[64];
    size_t total = 0;
    BpeStream s = {0};
    for (int i = 0; i < 5; i++) {
        size_t n = bpe_decode_stream(&b, &s, ids[i], out);
        cr_assert_eq(n, want[i], "token %d released %zu bytes", i, n);
        memcpy(all + total, out, n);
        total += n;
    }
    total += bpe_stream_flush(&s, all + total);
    cr_assert_eq(total, 5);
    cr_assert(memcmp(all,
                     "\xE6\x97\xA5"
                     "a\xE6",
                     5) == 0);
    /* a byte that cannot continue the held start lets it out at once */
    int bad[] = {0xE6, 'a'};
    cr_assert_eq(bpe_decode_stream(&b, &s, bad[0], out), 0);
    cr_assert_eq(bpe_decode_stream(&b, &s, bad[1], out), 2);
    bpe_free(&b);
}

/* ----------------------------------------------------------------------------
 * Hostile vocabularies */

Test(bpe_hostile, merges_naming_tokens_that_do_not_exist) {
    Spec s = valid;
    s.merges[1] = "ab zz";
    expect_refused(&s, "merge 1 \"ab zz\" names a token the vocabulary lacks (right)");
    s = valid;
    s.merges[3] = "c a"; /* both exist, "ca" does not */
    expect_refused(&s, "merge 3 \"c a\" names a token the vocabulary lacks (the two joined)");
    s = valid;
    s.merges[0] = "ab";
    expect_refused(&s, "merge 0 \"ab\" is not two tokens and a space");
    s = valid;
    s.merges[3] = "a b";
    expect_refused(&s, "merges 0 and 3 are both \"a b\"");
}

Test(bpe_hostile, duplicate_tokens) {
    Spec s = valid;
    s.extra[3] = "ab";
    expect_refused(&s, "tokens 256 and 259 are both \"ab\"");
}

Test(bpe_hostile, tokens_of_invalid_utf8_or_outside_the_alphabet) {
    Spec s = valid;
    s.extra[3] = "b\xC3(";
    expect_refused(&s, "token 259 \"b\\xC3(\" is not valid UTF-8");
    s = valid;
    s.extra[3] = "\xE6\x97\xA5"; /* 日 is text, not the byte alphabet */
    expect_refused(&s, "normal token 259 \"\\xE6\\x97\\xA5\" has a character outside GPT-2's");
    s = valid;
    s.extra[3] = "";
    expect_refused(&s, "token 259 is empty");
}

Test(bpe_hostile, empty_vocabulary_and_missing_bytes) {
    Spec s = {.no_bytes = 1, .bos_id = -1};
    expect_refused(&s, "tokenizer.ggml.tokens is empty");
    s = valid;
    s.no_bytes = 1;
    s.n_merges = 0;
    expect_refused(&s, "no normal token is the byte 0x00");
}

Test(bpe_hostile, unknown_regex_name_and_model) {
    Spec s = valid;
    s.pre = "llama3-but-not\n";
    expect_refused(&s,
                   "tokenizer.ggml.pre \"llama3-but-not\\x0A\" is not a pre-tokenizer run knows "
                   "(llama-bpe, gpt-2, qwen2, smollm)");
    s = valid;
    s.model = "llama";
    Bpe b;
    char err[512];
    cr_assert_eq(load(&s, &b, err, sizeof err), 1, "another tokenizer is not an error of ours");
    cr_assert(strstr(err, "tokenizer.ggml.model is \"llama\", not gpt2"), "%s", err);
}

Test(bpe_hostile, types_and_ids) {
    Spec s = valid;
    s.extra_type[2] = 9;
    expect_refused(&s, "token 258 has type 9, not one of llama.cpp's 1..6");
    s = valid;
    s.bos_id = 262;
    expect_refused(&s, "tokenizer.ggml.bos_token_id is 262, past the 262 tokens");
}

/* A GGUF file whose one token is 1 GiB of zero bytes: a sparse file (no disk, no memory: the
 * parser and the loader read the length, never the bytes). */
Test(bpe_hostile, a_token_of_one_gib) {
    make_scratch();
    const char *path = scratch_path("huge.gguf");
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    put_header(f, 3);
    put_key(f, "tokenizer.ggml.model", GGUF_STRING);
    put_str(f, "gpt2");
    put_key(f, "tokenizer.ggml.pre", GGUF_STRING);
    put_str(f, "gpt-2");
    put_array_head(f, "tokenizer.ggml.tokens", GGUF_STRING, 1);
    put_uint(f, (uint64_t)1 << 30, 8);
    cr_assert_eq(fflush(f), 0);
    cr_assert_eq(ftruncate(fileno(f), ftell(f) + ((off_t)1 << 30)), 0);
    cr_assert_eq(fclose(f), 0);
    Bpe bpe;
    char err[512];
    cr_assert_eq(bpe_load_file(&bpe, path, err, sizeof err), -1);
    cr_assert(strstr(err, "token 0 is 1073741824 bytes long, more than 65536") &&
                  !strchr(err, '\n'),
              "%s", err);
    /* run says it in one line too */
    const char *args[] = {path, "--tokenize", "hi", NULL};
    expect_error(args, "token 0 is 1073741824 bytes long");
    unlink(path);
}

/* run --tokenize on a GGUF vocabulary: ids and pieces, and a hostile one's one-line error. */
Test(bpe_run, tokenize_a_gguf_vocabulary) {
    make_scratch();
    const char *path = scratch_path("vocab.gguf");
    size_t size;
    char *data = build(&valid, &size);
    cr_assert_eq(write_file(path, data, size), 0);
    free(data);
    const char *args[] = {path, "--tokenize", "abc <u>", "--json", NULL};
    RunResult r = run_program(args);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert_str_eq(r.out,
                     "{\"ids\": [261, 258, 32, 260], \"pieces\": [\"<|c|>\", \"abc\", \" \", "
                     "\"<u>\"]}\n");
    result_free(&r);
    Spec s = valid;
    s.merges[1] = "ab zz";
    data = build(&s, &size);
    cr_assert_eq(write_file(path, data, size), 0);
    free(data);
    const char *bad[] = {path, "--tokenize", "abc", NULL};
    expect_error(bad, "vocab.gguf: merge 1 \"ab zz\" names a token the vocabulary lacks");
}
