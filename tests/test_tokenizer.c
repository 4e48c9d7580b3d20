/* Tests of tokenizer.c. Run from the repo root: needs models/tok512.bin, models/tokenizer.bin
 * and tests/fixtures/tokenizer_ids_{tok512,llama2}.txt (SentencePiece's ids, made by
 * tests/make_tokenizer_fixtures.py). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#endif
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "tokenizer.h"
#include "vocab.h"

#define TOK512_PATH  "models/tok512.bin"
#define LLAMA2_PATH  "models/tokenizer.bin"
#define MAX_CASES    128
#define MAX_CASE_IDS 1024

/* ----------------------------------------------------------------------------
 * Helpers */

static void load_or_fail(Tokenizer *t, const char *path) {
    char err[512] = "";
    int rc = tokenizer_load(t, path, err, sizeof err);
    cr_assert_eq(rc, 0, "tokenizer_load(%s) failed: %s (run `make models` first?)", path, err);
}

typedef struct {
    char *text;
    int ids[MAX_CASE_IDS];
    int n_ids;
    int line;
} Case;

static int hex_digit(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Reads a fixture file (format in tests/make_tokenizer_fixtures.py) into cases; returns how many.
 */
static int read_cases(const char *path, Case *cases, int max_cases) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open fixture %s", path);
    static char line[1 << 16];
    int n = 0, line_no = 0;
    while (fgets(line, sizeof line, f)) {
        line_no++;
        if (line[0] == '#' || line[0] == '\n') continue;
        cr_assert_lt(n, max_cases, "%s: too many cases", path);
        Case *c = &cases[n++];
        c->line = line_no;
        char *tab = strchr(line, '\t');
        cr_assert_not_null(tab, "%s:%d: no tab", path, line_no);
        *tab = '\0';
        size_t hex_len = strcmp(line, "-") == 0 ? 0 : strlen(line);
        cr_assert_eq(hex_len % 2, 0, "%s:%d: odd hex length", path, line_no);
        c->text = malloc(hex_len / 2 + 1);
        for (size_t i = 0; i < hex_len / 2; i++) {
            int hi = hex_digit(line[2 * i]), lo = hex_digit(line[2 * i + 1]);
            cr_assert(hi >= 0 && lo >= 0, "%s:%d: bad hex", path, line_no);
            c->text[i] = (char)(hi * 16 + lo);
        }
        c->text[hex_len / 2] = '\0';
        c->n_ids = 0;
        char *p = tab + 1, *end;
        for (;;) {
            long v = strtol(p, &end, 10);
            if (end == p) break;
            cr_assert_lt(c->n_ids, MAX_CASE_IDS, "%s:%d: too many ids", path, line_no);
            c->ids[c->n_ids++] = (int)v;
            p = end;
        }
    }
    fclose(f);
    return n;
}

static void free_cases(Case *cases, int n) {
    for (int i = 0; i < n; i++) free(cases[i].text);
}

/* Encodes into a buffer of exactly the documented size, so ASan catches an overflow: 3 ids per
 * byte in general, 1 per byte for valid UTF-8. */
static int *encode_exact(const Tokenizer *t, const char *text, int bos, int eos, int *n) {
    size_t len = strlen(text);
    int valid = tokenizer_utf8_invalid_at(text) < 0;
    int *tokens = malloc(((valid ? len : 3 * len) + 3) * sizeof(int));
    cr_assert_not_null(tokens);
    *n = tokenizer_encode(t, text, bos, eos, tokens);
    return tokens;
}

static void format_ids(char *out, size_t outlen, const int *ids, int n) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && used + 16 < outlen; i++)
        used += (size_t)snprintf(out + used, outlen - used, "%s%d", i ? " " : "", ids[i]);
}

static void check_fixture_ids(const char *model, const char *fixture) {
    Tokenizer t;
    load_or_fail(&t, model);
    static Case cases[MAX_CASES];
    int n_cases = read_cases(fixture, cases, MAX_CASES);
    cr_assert_geq(n_cases, 30, "%s: only %d cases", fixture, n_cases);
    for (int i = 0; i < n_cases; i++) {
        int n;
        int *got = encode_exact(&t, cases[i].text, 1, 0, &n);
        cr_expect_leq(n, (int)strlen(cases[i].text) + 3);
        int same = n == cases[i].n_ids && memcmp(got, cases[i].ids, (size_t)n * sizeof(int)) == 0;
        if (!same) {
            static char want_s[8192], got_s[8192];
            format_ids(want_s, sizeof want_s, cases[i].ids, cases[i].n_ids);
            format_ids(got_s, sizeof got_s, got, n);
            cr_expect(same, "%s:%d (%s): SentencePiece gives [%s], we give [%s]", fixture,
                      cases[i].line, model, want_s, got_s);
        }
        free(got);
    }
    free_cases(cases, n_cases);
    tokenizer_free(&t);
}

/* decode over the ids after BOS, concatenated, must give the text back (squeezed as the
 * normalizer does when the vocabulary removes extra whitespace, as SentencePiece's decode). */
static void check_round_trip(const char *model, const char *fixture) {
    Tokenizer t;
    load_or_fail(&t, model);
    static Case cases[MAX_CASES];
    int n_cases = read_cases(fixture, cases, MAX_CASES);
    for (int i = 0; i < n_cases; i++) {
        const char *text = cases[i].text;
        int n;
        int *ids = encode_exact(&t, text, 1, 0, &n);
        char *back = malloc(strlen(text) * 2 + 64), *want = malloc(strlen(text) + 1);
        back[0] = '\0';
        for (int k = 1; k < n; k++) strcat(back, tokenizer_decode(&t, ids[k - 1], ids[k]));
        if (t.remove_extra_whitespaces)
            squeeze_spaces(want, text);
        else
            strcpy(want, text);
        cr_expect_str_eq(back, want, "%s:%d (%s): round trip differs", fixture, cases[i].line,
                         model);
        free(want);
        free(back);
        free(ids);
    }
    free_cases(cases, n_cases);
    tokenizer_free(&t);
}

/* A temp dir for written tokenizer files; removed by the OS's tmp cleaning if a test dies. */
static char tmp_dir[64];

static void make_tmp_dir(void) {
    strcpy(tmp_dir, "/tmp/test_tokenizer.XXXXXX");
    cr_assert_not_null(mkdtemp(tmp_dir));
}

/* Little-endian writer for synthetic tokenizer files (the test hosts are little-endian x86/ARM;
 * build the bytes explicitly anyway). */
typedef struct {
    unsigned char data[1 << 15];
    size_t size;
} Buf;

static void put_i32(Buf *b, int v) {
    unsigned u = (unsigned)v;
    for (int i = 0; i < 4; i++) b->data[b->size++] = (unsigned char)(u >> (8 * i));
}

static void put_f32(Buf *b, float f) {
    unsigned u;
    memcpy(&u, &f, sizeof u);
    put_i32(b, (int)u);
}

static void put_piece(Buf *b, float score, const char *piece) {
    put_f32(b, score);
    put_i32(b, (int)strlen(piece));
    memcpy(b->data + b->size, piece, strlen(piece));
    b->size += strlen(piece);
}

/* Expects tokenizer_load of `data` to fail with a message naming the file and containing `what`.
 */
static void expect_load_error(const char *name, const void *data, size_t size, const char *what) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    cr_assert_eq(write_file(path, data, size), 0, "cannot write %s", path);
    Tokenizer t;
    memset(&t, 0x5A, sizeof t); /* garbage in: load must not depend on it */
    char err[256] = "";
    cr_expect_eq(tokenizer_load(&t, path, err, sizeof err), -1, "%s: load should fail", name);
    cr_expect_not_null(strstr(err, path), "%s: message does not name the file: %s", name, err);
    cr_expect_not_null(strstr(err, what), "%s: message lacks \"%s\": %s", name, what, err);
    cr_expect_null(strchr(err, '\n'), "%s: message is not one line", name);
    cr_expect_null(t.pieces, "%s: t not left empty", name);
    cr_expect_eq(t.vocab_size, 0);
    tokenizer_free(&t); /* safe on the emptied tokenizer */
    unlink(path);
}

/* The header (max_token_length 8), the 3 specials and the 256 byte pieces (ids 3..258) that
 * every hand-made vocabulary here starts with. */
static void put_specials_and_bytes(Buf *b) {
    put_i32(b, 8);
    put_piece(b, 0, "<unk>");
    put_piece(b, 0, "\n<s>\n");
    put_piece(b, 0, "\n</s>\n");
    for (int i = 0; i < 256; i++) {
        char piece[8];
        snprintf(piece, sizeof piece, "<0x%02X>", i);
        put_piece(b, 0, piece);
    }
}

/* A small vocabulary: the 3 specials, the 256 byte pieces (ids 3..258), then
 *   259 " "  260 "a"  261 "b"  262 "ab" (-1)  263 " a" (-2)  264 "ba" (-1)  265 "\xF0\x9F" (-1)
 *   266 " b" (-5)
 * "\xF0\x9F" is the first half of an emoji's bytes: byte fallback must not merge into it. */
static void write_small_vocab(const char *path) {
    static Buf b;
    b.size = 0;
    put_specials_and_bytes(&b);
    put_piece(&b, -100, " ");
    put_piece(&b, -100, "a");
    put_piece(&b, -100, "b");
    put_piece(&b, -1, "ab");
    put_piece(&b, -2, " a");
    put_piece(&b, -1, "ba");
    put_piece(&b, -1, "\xF0\x9F");
    put_piece(&b, -5, " b");
    cr_assert_eq(write_file(path, b.data, b.size), 0, "cannot write %s", path);
}

static void load_small_vocab(Tokenizer *t) {
    make_tmp_dir();
    char path[128];
    snprintf(path, sizeof path, "%s/small.bin", tmp_dir);
    write_small_vocab(path);
    load_or_fail(t, path);
    unlink(path);
    rmdir(tmp_dir);
}

static void expect_ids(const Tokenizer *t, const char *text, int bos, int eos, const int *want,
                       int n_want) {
    int n;
    int *got = encode_exact(t, text, bos, eos, &n);
    char want_s[512], got_s[512];
    format_ids(want_s, sizeof want_s, want, n_want);
    format_ids(got_s, sizeof got_s, got, n);
    cr_expect(n == n_want && (n == 0 || memcmp(got, want, (size_t)n * sizeof(int)) == 0),
              "encode(\"%s\"): want [%s], got [%s]", text, want_s, got_s);
    free(got);
}

/* ----------------------------------------------------------------------------
 * Loading real files */

Test(tokenizer_load, tok512) {
    Tokenizer t;
    load_or_fail(&t, TOK512_PATH);
    cr_expect_eq(t.vocab_size, 512);
    cr_expect_eq(t.max_token_length, 7);
    for (int b = 0; b < 256; b++) cr_expect_eq(t.byte_tokens[b], 3 + b, "byte %d", b);
    cr_expect_str_eq(tokenizer_piece(&t, 259), " t"); /* stored with a plain space, not U+2581 */
    cr_expect_float_eq(t.vocab_scores[260], -1.0f, 1e-6);
    cr_expect_eq(t.remove_extra_whitespaces, 1); /* tok512.model's normalizer setting */
    tokenizer_free(&t);
    tokenizer_free(&t); /* twice is safe */
}

Test(tokenizer_load, llama2) {
    Tokenizer t;
    load_or_fail(&t, LLAMA2_PATH);
    cr_expect_eq(t.vocab_size, 32000);
    cr_expect_eq(t.max_token_length, 27);
    for (int b = 0; b < 256; b++) cr_expect_eq(t.byte_tokens[b], 3 + b, "byte %d", b);
    cr_expect_str_eq(tokenizer_piece(&t, 15043), " Hello");
    cr_expect_str_eq(tokenizer_piece(&t, 1), "\n<s>\n");
    cr_expect_str_eq(tokenizer_piece(&t, 3 + 0x41), "<0x41>");
    cr_expect_str_eq(tokenizer_piece(&t, 31999), "\xE7\xBB\x99"); /* the last piece */
    cr_expect_str_eq(tokenizer_piece(&t, 32000), "");
    cr_expect_str_eq(tokenizer_piece(&t, -1), "");
    cr_expect_eq(t.remove_extra_whitespaces, 0); /* tokenizer.model's normalizer setting */
    tokenizer_free(&t);
}

/* ----------------------------------------------------------------------------
 * Loading bad files */

Test(tokenizer_load_errors, missing_file) {
    Tokenizer t;
    char err[256] = "";
    cr_expect_eq(tokenizer_load(&t, "/nonexistent/dir/tok.bin", err, sizeof err), -1);
    cr_expect_not_null(strstr(err, "/nonexistent/dir/tok.bin"), "%s", err);
    cr_expect_not_null(strstr(err, "cannot open"), "%s", err);
}

Test(tokenizer_load_errors, directory) {
    make_tmp_dir();
    Tokenizer t;
    char err[256] = "";
    cr_expect_eq(tokenizer_load(&t, tmp_dir, err, sizeof err), -1);
    cr_expect_not_null(strstr(err, tmp_dir), "%s", err);
    rmdir(tmp_dir);
}

Test(tokenizer_load_errors, endless_device, .timeout = 30) {
    Tokenizer t;
    char err[256] = "";
    cr_expect_eq(tokenizer_load(&t, "/dev/zero", err, sizeof err), -1);
    cr_expect_not_null(strstr(err, "/dev/zero: tokenizer file is larger than 64 MiB"), "%s", err);
}

Test(tokenizer_load_errors, corrupt_files) {
    make_tmp_dir();
    static Buf b;

    expect_load_error("empty.bin", "", 0, "empty");
    expect_load_error("short_header.bin", "\x07\x00", 2, "truncated header");

    b.size = 0;
    put_i32(&b, 0);
    put_piece(&b, 0, "a");
    expect_load_error("zero_max_len.bin", b.data, b.size, "max_token_length");

    b.size = 0;
    put_i32(&b, 7);
    expect_load_error("header_only.bin", b.data, b.size, "no pieces");

    b.size = 0;
    put_i32(&b, 7);
    put_piece(&b, 0, "<unk>");
    put_f32(&b, -1.0f); /* score, then 1 byte of the length */
    b.data[b.size++] = 3;
    expect_load_error("truncated_entry.bin", b.data, b.size, "truncated entry 1");

    b.size = 0;
    put_i32(&b, 7);
    put_piece(&b, 0, "<unk>");
    put_f32(&b, 0);
    put_i32(&b, -5);
    put_i32(&b, 0);
    expect_load_error("negative_len.bin", b.data, b.size, "negative piece length -5");

    b.size = 0;
    put_i32(&b, 7);
    put_piece(&b, 0, "<unk>");
    put_f32(&b, 0);
    put_i32(&b, 6); /* allowed length, but only 3 bytes follow */
    memcpy(b.data + b.size, "abc", 3);
    b.size += 3;
    expect_load_error("past_eof.bin", b.data, b.size, "past the end");

    b.size = 0;
    put_i32(&b, 7);
    put_f32(&b, 0);
    put_i32(&b, 1 << 30); /* absurd length */
    expect_load_error("huge_len.bin", b.data, b.size, "exceeds max_token_length");

    b.size = 0;
    put_i32(&b, -7);
    put_piece(&b, 0, "a");
    expect_load_error("negative_max_len.bin", b.data, b.size, "bad max_token_length -7");

    b.size = 0;
    put_i32(&b, 1 << 30);
    put_piece(&b, 0, "a");
    expect_load_error("huge_max_len.bin", b.data, b.size, "bad max_token_length 1073741824");

    b.size = 0;
    put_i32(&b, 3);
    put_piece(&b, 0, "ab");
    put_piece(&b, 0, "abcd"); /* longer than the header's max_token_length */
    expect_load_error("long_piece.bin", b.data, b.size,
                      "piece length 4 in entry 1 exceeds max_token_length 3");

    b.size = 0;
    put_i32(&b, 7);
    put_piece(&b, 0, "<unk>");
    put_piece(&b, 0, "a\nb");
    put_piece(&b, 0, "c");
    put_piece(&b, 0, "a\nb");
    expect_load_error("duplicate.bin", b.data, b.size,
                      "duplicate piece \"a\\x0Ab\" at ids 1 and 3");

    b.size = 0;
    put_i32(&b, 7);
    put_piece(&b, 0, "<unk>");
    put_f32(&b, 0);
    put_i32(&b, 3);
    memcpy(b.data + b.size, "a\0b", 3);
    b.size += 3;
    expect_load_error("nul_piece.bin", b.data, b.size, "piece in entry 1 contains a NUL byte");

    b.size = 0;
    put_i32(&b, 7);
    put_piece(&b, 0, "a");
    put_piece(&b, NAN, "b"); /* no order among merges: encode's result would be arbitrary */
    expect_load_error("nan_score.bin", b.data, b.size, "score of entry 1 is NaN");

    /* A real file cut in the middle of a piece, and in the middle of an entry header. */
    FILE *f = fopen(TOK512_PATH, "rb");
    cr_assert_not_null(f, "missing %s", TOK512_PATH);
    static unsigned char real[1 << 14];
    size_t n = fread(real, 1, sizeof real, f);
    fclose(f);
    cr_assert_gt(n, 4000);
    /* entry 0 is "<unk>": 4 + 8 + 5 bytes; cut 2 bytes into its text */
    expect_load_error("cut_piece.bin", real, 4 + 8 + 2, "past the end");
    expect_load_error("cut_entry.bin", real, 4 + 8 + 5 + 6, "truncated entry 1");

    rmdir(tmp_dir);
}

/* ----------------------------------------------------------------------------
 * Encoding against SentencePiece */

Test(tokenizer_encode, sentencepiece_ids_tok512) {
    check_fixture_ids(TOK512_PATH, "tests/fixtures/tokenizer_ids_tok512.txt");
}

Test(tokenizer_encode, sentencepiece_ids_llama2) {
    check_fixture_ids(LLAMA2_PATH, "tests/fixtures/tokenizer_ids_llama2.txt");
}

Test(tokenizer_decode, round_trip_tok512) {
    check_round_trip(TOK512_PATH, "tests/fixtures/tokenizer_ids_tok512.txt");
}

Test(tokenizer_decode, round_trip_llama2) {
    check_round_trip(LLAMA2_PATH, "tests/fixtures/tokenizer_ids_llama2.txt");
}

/* ----------------------------------------------------------------------------
 * Hand-derived cases */

/* U+1F600 is F0 9F 98 80; tok512 has no emoji, so after the dummy-prefix piece " " come the four
 * byte pieces, id 3 + byte. BOS and EOS fill the whole strlen + 3 buffer. */
Test(tokenizer_encode, emoji_byte_fallback_tok512) {
    Tokenizer t;
    load_or_fail(&t, TOK512_PATH);
    int space = -1;
    for (int i = 0; i < t.vocab_size; i++)
        if (strcmp(tokenizer_piece(&t, i), " ") == 0) space = i;
    cr_assert_geq(space, 0);
    int want[] = {1, space, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80, 2};
    expect_ids(&t, "\xF0\x9F\x98\x80", 1, 1, want, 7);
    cr_expect_str_eq(tokenizer_decode(&t, 1, space), "");
    cr_expect_str_eq(tokenizer_decode(&t, space, 3 + 0xF0), "\xF0");
    tokenizer_free(&t);
}

Test(tokenizer_encode, bos_eos_and_empty) {
    Tokenizer t;
    load_or_fail(&t, TOK512_PATH);
    int bos_only[] = {1};
    expect_ids(&t, "", 1, 0, bos_only, 1);
    int both[] = {1, 2};
    expect_ids(&t, "", 1, 1, both, 2);
    int none[1] = {0};
    expect_ids(&t, "", 0, 0, none, 0);
    /* without BOS the ids are the same minus the leading 1 */
    int n1, n2;
    int *with = encode_exact(&t, "Once upon a time", 1, 1, &n1);
    int *without = encode_exact(&t, "Once upon a time", 0, 0, &n2);
    cr_expect_eq(n1, n2 + 2);
    cr_expect_eq(with[n1 - 1], 2);
    cr_expect_arr_eq(with + 1, without, (size_t)n2 * sizeof(int));
    free(with);
    free(without);
    tokenizer_free(&t);
}

/* In the small vocabulary, " aba" starts as " " a b a with candidate pairs " a" (-2), "ab" (-1),
 * "ba" (-1): the tie goes to the leftmost, "ab", leaving " " ab a (no " ab", "aba" pieces). */
Test(tokenizer_encode, leftmost_wins_ties) {
    Tokenizer t;
    load_small_vocab(&t);
    cr_assert_eq(t.vocab_size, 267);
    int want[] = {1, 259, 262, 260};
    expect_ids(&t, "aba", 1, 0, want, 4);
    /* " bb": " b" (-5) is the only pair */
    int want2[] = {266, 261};
    expect_ids(&t, "bb", 0, 0, want2, 2);
    tokenizer_free(&t);
}

/* With remove_extra_whitespaces (the small vocabulary has no "  " piece, so it is on),
 * "  a  b " becomes " a b": pairs " a" (-2) and " b" (-5). Turned off, it becomes "   a  b "
 * (dummy prefix included): " " " " " a" " " " b" " ". Only spaces count: a tab is kept. */
Test(tokenizer_encode, extra_whitespace) {
    Tokenizer t;
    load_small_vocab(&t);
    cr_assert_eq(t.remove_extra_whitespaces, 1);
    int squeezed[] = {263, 266};
    expect_ids(&t, "  a  b ", 0, 0, squeezed, 2);
    int blank[] = {1};
    expect_ids(&t, "   ", 1, 0, blank, 1);
    int tab[] = {259, 3 + '\t', 266};
    expect_ids(&t, "\t b", 0, 0, tab, 3);
    t.remove_extra_whitespaces = 0;
    int kept[] = {259, 259, 263, 259, 266, 259};
    expect_ids(&t, "  a  b ", 0, 0, kept, 6);
    int spaces[] = {1, 259, 259, 259, 259};
    expect_ids(&t, "   ", 1, 0, spaces, 5);
    tokenizer_free(&t);
}

/* The emoji's bytes F0 9F concatenate to the piece "\xF0\x9F", but byte-fallback bytes never
 * merge. Each byte that does not start well-formed UTF-8 (a stray continuation byte, a cut-short
 * sequence, each byte of an overlong form) becomes U+FFFD, EF BF BD, which the small vocabulary
 * lacks: three byte pieces, 3 ids for 1 byte of text. */
Test(tokenizer_encode, invalid_utf8_becomes_replacement_character) {
    Tokenizer t;
    load_small_vocab(&t);
    int want[] = {259, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80};
    expect_ids(&t, "\xF0\x9F\x98\x80", 0, 0, want, 5);
    int want_invalid[] = {263, 3 + 0xEF, 3 + 0xBF, 3 + 0xBD, 261, 3 + 0xEF, 3 + 0xBF, 3 + 0xBD};
    expect_ids(&t,
               "a\x80"
               "b\xC3",
               0, 0, want_invalid, 8);
    int want_overlong[] = {1, 259, 3 + 0xEF, 3 + 0xBF, 3 + 0xBD, 3 + 0xEF, 3 + 0xBF, 3 + 0xBD, 2};
    expect_ids(&t, "\xC0\xAF", 1, 1, want_overlong, 9); /* fills all 3 * 2 + 3 */
    tokenizer_free(&t);
}

/* Control and byte pieces are not in the piece index: the text "<s>" is not BOS (checked against
 * SentencePiece in the fixtures), and "<0x41>" text stays text. */
Test(tokenizer_encode, control_text_is_text) {
    Tokenizer t;
    load_or_fail(&t, LLAMA2_PATH);
    int n;
    int *ids = encode_exact(&t, "<s></s><unk><0x41>", 0, 0, &n);
    for (int i = 0; i < n; i++) {
        cr_expect_gt(ids[i], 2, "id %d is a control piece", ids[i]);
        cr_expect(ids[i] > 258, "id %d is a byte piece", ids[i]);
    }
    free(ids);
    tokenizer_free(&t);
}

/* A long text (400 KB) encodes and decodes back to itself. Its speed is measured by benchmarks,
 * not asserted here. */
Test(tokenizer_encode, long_text) {
    Tokenizer t;
    load_or_fail(&t, LLAMA2_PATH);
    const char *unit = "Once upon a time, there was a little girl named Lily. Привет! 日本語 ";
    size_t reps = 5000, unit_len = strlen(unit);
    char *text = malloc(unit_len * reps + 1);
    for (size_t i = 0; i < reps; i++) memcpy(text + i * unit_len, unit, unit_len);
    text[unit_len * reps] = '\0';
    int n;
    int *ids = encode_exact(&t, text, 1, 0, &n);
    cr_expect_lt(n, (int)(unit_len * reps / 2));
    char *back = malloc(unit_len * reps + 1), *p = back;
    for (int k = 1; k < n; k++) {
        const char *piece = tokenizer_decode(&t, ids[k - 1], ids[k]);
        size_t len = strlen(piece);
        cr_assert_leq((size_t)(p - back) + len, unit_len * reps);
        memcpy(p, piece, len);
        p += len;
    }
    *p = '\0';
    cr_expect(strcmp(back, text) == 0, "round trip of the long text differs");
    free(back);
    free(ids);
    free(text);
    tokenizer_free(&t);
}

/* ----------------------------------------------------------------------------
 * Decoding and printing */

Test(tokenizer_decode, pieces) {
    Tokenizer t;
    load_or_fail(&t, LLAMA2_PATH);
    cr_expect_str_eq(tokenizer_decode(&t, 1, 15043), "Hello");   /* " Hello" after BOS */
    cr_expect_str_eq(tokenizer_decode(&t, 13, 15043), " Hello"); /* elsewhere keeps the space */
    cr_expect_str_eq(tokenizer_decode(&t, 15043, 3 + 0x0A), "\n");
    cr_expect_str_eq(tokenizer_decode(&t, 15043, 3 + 0x41), "A");
    cr_expect_str_eq(tokenizer_decode(&t, 15043, 3), ""); /* <0x00> */
    cr_expect_str_eq(tokenizer_decode(&t, 1, 32000), "");
    cr_expect_str_eq(tokenizer_decode(&t, 1, -1), "");
    tokenizer_free(&t);
}

Test(tokenizer_print, skips_control_bytes, .init = cr_redirect_stdout) {
    tokenizer_print_piece("Hello");
    tokenizer_print_piece("\x01"); /* skipped */
    tokenizer_print_piece("\n");
    tokenizer_print_piece("\x7f"); /* skipped */
    tokenizer_print_piece("\xE6\x97\xA5");
    tokenizer_print_piece("");
    tokenizer_print_piece(" !");
    fflush(stdout);
    cr_assert_stdout_eq_str("Hello\n\xE6\x97\xA5 !");
}

/* A vocabulary with a piece that holds a non-space followed by a space, "a b": encode cannot then
 * cut the text before its spaces. Pieces after the bytes: 259 " ", 260 "a", 261 "b", 262 "a " (-1),
 * 263 " a" (-2), 264 "a b" (-3). " a b": "a " merges first (-1 beats -2), then "a " + "b". */
Test(tokenizer_encode, merges_across_a_space_when_a_piece_does) {
    make_tmp_dir();
    static Buf b;
    b.size = 0;
    put_specials_and_bytes(&b);
    put_piece(&b, -100, " ");
    put_piece(&b, -100, "a");
    put_piece(&b, -100, "b");
    put_piece(&b, -1, "a ");
    put_piece(&b, -2, " a");
    put_piece(&b, -3, "a b");
    char path[128];
    snprintf(path, sizeof path, "%s/across.bin", tmp_dir);
    cr_assert_eq(write_file(path, b.data, b.size), 0, "cannot write %s", path);
    Tokenizer t;
    load_or_fail(&t, path);
    unlink(path);
    rmdir(tmp_dir);
    int want[] = {259, 264};
    expect_ids(&t, "a b", 0, 0, want, 2);
    int want2[] = {259, 264, 259, 264}; /* " a b a b": twice the same, cut nowhere */
    expect_ids(&t, "a b a b", 0, 0, want2, 4);
    tokenizer_free(&t);
}

/* SentencePiece takes a literal U+2581 (E2 96 81) as a space, after squeezing spaces: with
 * remove_extra_whitespaces a trailing one goes like a trailing space, a leading one stays (the
 * small vocabulary: 259 " ", 263 " a" (-2), 266 " b" (-5)). */
Test(tokenizer_encode, lower_one_eighth_block_is_a_space) {
    Tokenizer t;
    load_small_vocab(&t);
    int trailing[] = {263};
    expect_ids(&t, "a\xE2\x96\x81", 0, 0, trailing, 1);
    int leading[] = {259, 263};
    expect_ids(&t,
               "\xE2\x96\x81"
               "a",
               0, 0, leading, 2);
    int inside[] = {263, 259, 266}; /* "a" U+2581 " b": not squeezed into one space */
    expect_ids(&t, "a\xE2\x96\x81 b", 0, 0, inside, 3);
    int only[] = {1};
    expect_ids(&t, "\xE2\x96\x81", 1, 0, only, 1);
    tokenizer_free(&t);
}

/* vocab_encode's VOCAB_PARSE_SPECIAL on SentencePiece (a chat turn's text): "<s>" and "</s>" are
 * BOS and EOS, and the text between them is encoded as texts of their own (each with its
 * dummy-prefix space, as llama.cpp's parse_special gives a Llama 2 chat turn); plain text never
 * holds them. */
Test(vocab_encode, sentencepiece_special_texts) {
    Tokenizer t;
    char err[256];
    cr_assert_eq(tokenizer_load(&t, TOK512_PATH, err, sizeof(err)), 0, "%s", err);
    Vocab v = vocab_sentencepiece(&t);
    int ids[64], first[32], second[32];
    long n = vocab_encode(&v, "<s>[INST] Hi [/INST] Yes </s>x", VOCAB_PARSE_SPECIAL, ids);
    int n1 = tokenizer_encode(&t, "[INST] Hi [/INST] Yes ", 0, 0, first);
    int n2 = tokenizer_encode(&t, "x", 0, 0, second);
    cr_assert_eq(n, 1 + n1 + 1 + n2);
    cr_expect_eq(ids[0], TOKEN_BOS);
    cr_expect_eq(memcmp(ids + 1, first, n1 * sizeof(int)), 0);
    cr_expect_eq(ids[1 + n1], TOKEN_EOS);
    cr_expect_eq(memcmp(ids + 2 + n1, second, n2 * sizeof(int)), 0);
    n = vocab_encode(&v, "</s>", VOCAB_ADD_BOS | VOCAB_PARSE_SPECIAL, ids);
    cr_expect(n == 2 && ids[0] == TOKEN_BOS && ids[1] == TOKEN_EOS);
    n = vocab_encode(&v, "</s>", 0, ids); /* as plain text, pieces of "</s>" */
    cr_expect(n > 1 && ids[0] != TOKEN_EOS);
    vocab_free(&v);
}
