/* File formats: llama2.c's version 1 and 2 files of stories260K against the legacy file's
 * outputs, and normllama files (docs/FORMAT.md) built here by hand, whole and corrupted. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "load.h"

#define LEGACY    "models/stories260K.bin"
#define V1        "models/stories260K_ak42_v1.bin"
#define V2        "models/stories260K_ak42_v2_q8.bin"
#define TOKENIZER "models/tok512.bin"
#define VOCAB     512

/* ----------------------------------------------------------------------------
 * llama2.c version 1 and 2 */

/* The version 1 and 2 files have no public address (models/manifest.tsv): without the mirror
 * models/fetch.sh cannot have them, says so, and the checks that read them are skipped by name. */
static void require_mirror_file(const char *path) {
    if (access(path, R_OK) == 0) return;
    /* a skip's message is shown only under --verbose; the warning is shown in every run */
    cr_log_warn("skipped %s::%s: %s is not there (mirror only: no public address, and the mirror "
                "lacks it)",
                criterion_current_test->category, criterion_current_test->name, path);
    cr_skip_test("%s is not there", path);
}

Test(llama2c_versions, v1_greedy_and_seeded_match_llama2c) {
    require_mirror_file(V1);
    const char *fixtures[2] = {"tests/fixtures/stories260K_greedy_once_upon_a_time.txt",
                               "tests/fixtures/stories260K_t1.0_p0.9_s133742.txt"};
    const char *const args[2][12] = {
        {V1, "-z", TOKENIZER, "-t", "0", "-n", "256", "-i", "Once upon a time", NULL},
        {V1, "-z", TOKENIZER, "-t", "1.0", "-p", "0.9", "-s", "133742", "-n", "256", NULL},
    };
    for (int i = 0; i < 2; i++) {
        char *expected = read_file(fixtures[i], NULL);
        cr_assert_not_null(expected);
        RunResult r = run_program(args[i]);
        cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
        cr_assert_str_eq(r.out, expected);
        result_free(&r);
        free(expected);
    }
}

/* A fresh temporary file's name in path[64]: unique, since other checkouts may run these tests
 * on the same machine at the same time. */
static void temp_path(char *path) {
    snprintf(path, 64, "/tmp/normllama-logits-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
}

/* Runs a greedy story of 256 positions, writing the logits to a temporary file; returns them. */
static float *greedy_logits(const char *model, int *rows) {
    char path[64];
    temp_path(path);
    RunResult r = run_program((const char *[]){model, "-z", TOKENIZER, "-t", "0", "-n", "256",
                                               "--logits", path, "Once upon a time", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    result_free(&r);
    size_t size;
    float *logits = (float *)read_file(path, &size);
    unlink(path);
    cr_assert_not_null(logits);
    cr_assert_eq(size % (VOCAB * sizeof(float)), 0);
    *rows = (int)(size / (VOCAB * sizeof(float)));
    return logits;
}

/* ----------------------------------------------------------------------------
 * normllama files built here */

/* Header field offsets from docs/FORMAT.md. */
enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 4,
    OFF_DIM = 8,
    OFF_HIDDEN = 12,
    OFF_LAYERS = 16,
    OFF_HEADS = 20,
    OFF_KV_HEADS = 24,
    OFF_VOCAB = 28,
    OFF_SEQ_LEN = 32,
    OFF_ROPE_THETA = 36,
    OFF_NORM_EPS = 40,
    OFF_NORM = 44,
    OFF_NORM_BIAS = 48,
    OFF_SHARED = 52,
    OFF_DTYPE = 56,
    OFF_ALIGN = 60,
    OFF_GROUP_SIZE = 64,
};

/* A small model: dim 12 (so the (n_layers, dim) norms, 96 bytes, need padding to 64),
 * hidden_dim 20, 2 layers, 2 heads of 6, 1 kv head, vocab 512, seq_len 32, with norm biases and
 * a separate classifier: every optional tensor present. Weights are small deterministic values. */
typedef struct {
    char *data;
    size_t size;
} Blob;

static void put_u32(char *p, uint32_t v) {
    memcpy(p, &v, 4);
}

static void put_f32(char *p, float v) {
    memcpy(p, &v, 4);
}

static void append_tensor(Blob *b, size_t numel) {
    size_t start = (b->size + 63) / 64 * 64;
    b->data = realloc(b->data, start + numel * 4);
    memset(b->data + b->size, 0, start - b->size);
    for (size_t i = 0; i < numel; i++)
        put_f32(b->data + start + i * 4, 0.05f * (float)((i * 7 + numel) % 13) - 0.3f);
    b->size = start + numel * 4;
}

/* Trained-norm codes (docs/FORMAT.md) whose files hold a learned scalar per norm site */
enum { NORM_CODE_LEARNED_EPS = 3, NORM_CODE_DYT = 5 };

/* A normllama file of a small model (dim 12, 2 layers) trained with norm `norm` (its code), with
 * norm biases if `bias`: every tensor docs/FORMAT.md lists for that header, in its order. */
static Blob small_model(uint32_t norm, uint32_t bias) {
    const int dim = 12, hidden = 20, layers = 2, kv_dim = 6, vocab = VOCAB;
    Blob b = {calloc(256, 1), 256};
    put_u32(b.data + OFF_MAGIC, 0x4d4c4c4e);
    put_u32(b.data + OFF_VERSION, 1);
    const int32_t sizes[7] = {dim, hidden, layers, 2, 1, vocab, 32};
    memcpy(b.data + OFF_DIM, sizes, sizeof(sizes));
    put_f32(b.data + OFF_ROPE_THETA, 10000.0f);
    put_f32(b.data + OFF_NORM_EPS, 1e-5f);
    put_u32(b.data + OFF_NORM, norm);
    put_u32(b.data + OFF_NORM_BIAS, bias);
    put_u32(b.data + OFF_SHARED, 0);
    put_u32(b.data + OFF_DTYPE, 0);
    put_u32(b.data + OFF_ALIGN, 64);
    append_tensor(&b, vocab * dim);            /* token_embedding */
    append_tensor(&b, layers * dim);           /* attn_norm */
    if (bias) append_tensor(&b, layers * dim); /* attn_norm_bias */
    int scalars = norm == NORM_CODE_LEARNED_EPS || norm == NORM_CODE_DYT;
    if (scalars) append_tensor(&b, layers);    /* attn_norm_log_eps or _alpha */
    append_tensor(&b, layers * dim * dim);     /* wq */
    append_tensor(&b, layers * kv_dim * dim);  /* wk */
    append_tensor(&b, layers * kv_dim * dim);  /* wv */
    append_tensor(&b, layers * dim * dim);     /* wo */
    append_tensor(&b, layers * dim);           /* ffn_norm */
    if (bias) append_tensor(&b, layers * dim); /* ffn_norm_bias */
    if (scalars) append_tensor(&b, layers);    /* ffn_norm_log_eps or _alpha */
    append_tensor(&b, layers * hidden * dim);  /* w1 */
    append_tensor(&b, layers * dim * hidden);  /* w2 */
    append_tensor(&b, layers * hidden * dim);  /* w3 */
    append_tensor(&b, dim);                    /* final_norm */
    if (bias) append_tensor(&b, dim);          /* final_norm_bias */
    if (scalars) append_tensor(&b, 1);         /* final_norm_log_eps or _alpha */
    append_tensor(&b, vocab * dim);            /* wcls */
    return b;
}

static char path_buf[64];
static const char *write_blob(const Blob *b, size_t size) {
    snprintf(path_buf, sizeof(path_buf), "/tmp/normllama-format-XXXXXX");
    int fd = mkstemp(path_buf);
    cr_assert_geq(fd, 0);
    close(fd);
    char *data = calloc(size > b->size ? size : b->size, 1);
    memcpy(data, b->data, b->size);
    cr_assert_eq(write_file(path_buf, data, size), 0);
    free(data);
    return path_buf;
}

static RunResult run_small(const char *path, const char *norm_flag) {
    return run_program(
        (const char *[]){path, "-z", TOKENIZER, "-t", "0", "-n", "8", "Hi", norm_flag, NULL});
}

Test(normllama, small_model_loads_and_runs) {
    Blob b = small_model(0, 0);
    cr_assert_eq(b.size % 64, 0);
    RunResult r = run_small(write_blob(&b, b.size), NULL);
    unlink(path_buf);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.err, "norm rmsnorm"), "%s", r.err);
    result_free(&r);
    free(b.data);
}

Test(normllama, layernorm_trained_model_defaults_to_layernorm) {
    Blob b = small_model(1, 1);
    const char *path = write_blob(&b, b.size);
    RunResult r = run_small(path, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.err, "norm layernorm"), "%s", r.err);
    cr_assert_eq(count_lines(r.err), 1, "no notice: %s", r.err);
    result_free(&r);
    r = run_small(path, "--norm=rmsnorm");
    unlink(path);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.err, "run: the model was trained with layernorm; rmsnorm ignores its norm "
                            "biases\n"),
              "%s", r.err);
    cr_assert(strstr(r.err, "norm rmsnorm"), "%s", r.err);
    cr_assert_eq(count_lines(r.err), 2, "one notice line and the summary: %s", r.err);
    result_free(&r);
    free(b.data);
}

Test(normllama, sibling_models_run_their_own_norm_with_their_parameters) {
    /* codes 2..6 with biases as train.py writes them (rmsnorm_bias and dyt learn one) */
    const char *names[] = {"rmsnorm_bias", "rmsnorm_learned_eps", "prmsnorm", "dyt", "identity"};
    const uint32_t biased[] = {1, 0, 0, 1, 0};
    for (uint32_t k = 0; k < 5; k++) {
        Blob b = small_model(2 + k, biased[k]);
        const char *path = write_blob(&b, b.size);
        RunResult r = run_small(path, NULL);
        char expected[64];
        snprintf(expected, sizeof(expected), "norm %s,", names[k]);
        cr_assert_eq(r.exit_code, 0, "%s: %s", names[k], r.err);
        cr_assert(strstr(r.err, expected) && count_lines(r.err) == 1, "%s: %s", names[k], r.err);
        result_free(&r);
        /* each site gets its own scalar, in model_forward's order (attention 0, ffn 0,
         * attention 1, ffn 1, final) from the file's attention (layer 0, 1), ffn (0, 1) and
         * final tensors, append_tensor's values -0.2, 0.15; -0.2, 0.15; -0.25 */
        Model m;
        char err[256];
        cr_assert_eq(model_load(&m, path, err, sizeof(err)), 0, "%s", err);
        unlink(path);
        const float expected_scalars[5] = {-0.2f, -0.2f, 0.15f, 0.15f, -0.25f};
        for (int site = 0; site < 5; site++) {
            NormCall n = model_norm_site(&m, site);
            int learned = 2 + k == NORM_CODE_LEARNED_EPS || 2 + k == NORM_CODE_DYT;
            cr_assert_float_eq(n.eps, learned ? expected_scalars[site] : 1e-5f, 1e-7, "%s %d",
                               names[k], site);
            cr_assert_eq(n.bias != NULL, biased[k] == 1);
        }
        model_free(&m);
        free(b.data);
    }
}

Test(normllama, a_norm_needs_the_parameters_it_reads) {
    /* DyT's alphas ignored with a notice under another norm; refused where the file has none */
    Blob b = small_model(NORM_CODE_DYT, 1);
    const char *path = write_blob(&b, b.size);
    RunResult r = run_small(path, "--norm=rmsnorm");
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert(strstr(r.err, "run: the model was trained with dyt; rmsnorm ignores its norm biases "
                            "and each norm site's alpha\n"),
              "%s", r.err);
    result_free(&r);
    r = run_small(path, "--norm=rmsnorm_learned_eps");
    unlink(path);
    cr_assert_eq(r.exit_code, 1, "%s", r.err);
    cr_assert(strstr(r.err, "norm rmsnorm_learned_eps needs each norm site's learned log eps, "
                            "which a model trained with dyt does not have") &&
                  count_lines(r.err) == 1,
              "%s", r.err);
    result_free(&r);
    free(b.data);
    b = small_model(0, 0);
    path = write_blob(&b, b.size);
    const char *flags[] = {"--norm=dyt", "--compare=rmsnorm,dyt"};
    for (int k = 0; k < 2; k++) {
        r = run_small(path, flags[k]);
        cr_assert_eq(r.exit_code, 1, "%s: %s", flags[k], r.err);
        cr_assert(strstr(r.err, "norm dyt needs each norm site's alpha, which a model trained "
                                "with rmsnorm does not have") &&
                      count_lines(r.err) == 1 && r.out[0] == '\0',
                  "%s: %s", flags[k], r.err);
        result_free(&r);
    }
    unlink(path);
    free(b.data);
}

/* Exit 1, one line on stderr containing `needle`, nothing on stdout. */
static void expect_load_error(const Blob *b, size_t size, const char *needle) {
    const char *path = write_blob(b, size);
    RunResult r = run_small(path, NULL);
    unlink(path);
    cr_assert_eq(r.exit_code, 1, "exit code %d for '%s', stderr: %s", r.exit_code, needle, r.err);
    cr_assert_eq(count_lines(r.err), 1, "one line expected: %s", r.err);
    cr_assert(strstr(r.err, needle), "'%s' not in: %s", needle, r.err);
    cr_assert_str_eq(r.out, "");
    result_free(&r);
}

/* The small model with one 4-byte header field replaced. */
static void expect_field_error(int offset, uint32_t value, const char *needle) {
    Blob b = small_model(1, 1);
    put_u32(b.data + offset, value);
    expect_load_error(&b, b.size, needle);
    free(b.data);
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

Test(normllama_bad_input, header_fields_out_of_range) {
    expect_field_error(OFF_DIM, 0, "dim is 0, outside 1..1048576");
    expect_field_error(OFF_HIDDEN, (uint32_t)-5, "hidden_dim is -5");
    expect_field_error(OFF_LAYERS, 2000000, "n_layers is 2000000");
    expect_field_error(OFF_HEADS, 0, "n_heads is 0");
    expect_field_error(OFF_HEADS, 5, "dim 12 is not a multiple of n_heads 5");
    expect_field_error(OFF_HEADS, 4, "head_size 3 (dim / n_heads) is odd");
    expect_field_error(OFF_KV_HEADS, 0, "n_kv_heads is 0");
    expect_field_error(OFF_KV_HEADS, 3, "n_heads 2 is not a multiple of n_kv_heads 3");
    expect_field_error(OFF_VOCAB, 0, "vocab_size is 0");
    expect_field_error(OFF_SEQ_LEN, (uint32_t)-1, "seq_len is -1");
    expect_field_error(OFF_ROPE_THETA, f32_bits(0.0f), "rope_theta is 0, outside (1, 1e12)");
    expect_field_error(OFF_ROPE_THETA, f32_bits(NAN), "rope_theta is nan");
    expect_field_error(OFF_NORM_EPS, f32_bits(0.0f), "norm_eps is 0, outside (0, 1)");
    expect_field_error(OFF_NORM_EPS, f32_bits(-1e-5f), "norm_eps is -1e-05");
    expect_field_error(OFF_NORM, 7,
                       "unknown trained norm code 7 (0 rmsnorm, 1 layernorm, 2 rmsnorm_bias, "
                       "3 rmsnorm_learned_eps, 4 prmsnorm, 5 dyt, 6 identity)");
    /* a code whose norm learns a scalar per site implies their tensors: this file has none */
    expect_field_error(OFF_NORM, NORM_CODE_DYT, "normllama v1 f32 header (dim 12");
    expect_field_error(OFF_NORM_BIAS, 2, "norm_bias flag is 2, not 0 or 1");
    expect_field_error(OFF_SHARED, 7, "shared_classifier flag is 7, not 0 or 1");
    expect_field_error(OFF_ALIGN, 48, "alignment is 48, not a power of two in 4..4096");
    expect_field_error(OFF_ALIGN, 8192, "alignment is 8192");
    expect_field_error(OFF_ALIGN, 2, "alignment is 2");
    expect_field_error(100, 1, "reserved header byte 100 is not zero");
}

Test(normllama_bad_input, magic_version_and_dtype) {
    expect_field_error(OFF_MAGIC, 0x4d4c4c4f, "unknown magic 0x4d4c4c4f");
    expect_field_error(OFF_VERSION, 2, "unknown normllama version 2 (this run reads version 1)");
    expect_field_error(OFF_VERSION, 0, "unknown normllama version 0");
    expect_field_error(OFF_DTYPE, 9,
                       "unknown weight dtype 9 (0 f32, 1 bf16, 2 q8_0, 3 f16, 4 q4_0)");
    expect_field_error(OFF_DTYPE, 2, "q8_0 group_size is 0, not 32 or 64");
    expect_field_error(OFF_GROUP_SIZE, 32, "group_size is 32 but f32 weights have no groups");
    /* the layout follows the dtype: an f32 file read as bf16, f16 or q8_0 has the wrong size */
    expect_field_error(OFF_DTYPE, 1, "normllama v1 bf16 header (dim 12");
    expect_field_error(OFF_DTYPE, 3, "normllama v1 f16 header (dim 12");
    expect_field_error(OFF_DTYPE, 5, "unknown weight dtype 5");
    expect_field_error(OFF_DTYPE, 4, "q4_0 group_size is 0, not 32");
    /* dtype and group_size set together in an f32 file; the last pair is a valid q4_0 header */
    const struct {
        uint32_t dtype, group_size;
        const char *message;
    } pairs[] = {{2, 48, "q8_0 group_size is 48, not 32 or 64"},
                 {2, 64, "normllama v1 q8_0 header (dim 12"},
                 {1, 64, "group_size is 64 but bf16 weights have no groups"},
                 {3, 64, "group_size is 64 but f16 weights have no groups"},
                 {4, 64, "q4_0 group_size is 64, not 32"},
                 {4, 32, "normllama v1 q4_0 header (dim 12"}};
    Blob b = small_model(1, 1);
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        put_u32(b.data + OFF_DTYPE, pairs[i].dtype);
        put_u32(b.data + OFF_GROUP_SIZE, pairs[i].group_size);
        expect_load_error(&b, b.size, pairs[i].message);
    }
    put_u32(b.data + OFF_HIDDEN, 21);
    expect_load_error(&b, b.size, "hidden_dim 21 is odd; q4_0 packs two codes a byte");
    free(b.data);
}

Test(normllama_bad_input, sizes_against_the_file) {
    Blob b = small_model(1, 1);
    char implies[160];
    snprintf(implies, sizeof(implies),
             "normllama v1 f32 header (dim 12, hidden_dim 20, n_layers 2, "
             "vocab_size 512, seq_len 32) implies %zu",
             b.size);
    expect_load_error(&b, b.size - 1, implies);
    expect_load_error(&b, b.size - 4096, implies);
    expect_load_error(&b, b.size + 64, implies);
    expect_load_error(&b, 300, implies);
    expect_load_error(&b, 100, "shorter than its 256-byte header");
    expect_load_error(&b, 3, "shorter than its 4-byte magic");
    /* consistent header, other sizes: the layout, not the file, is wrong */
    put_u32(b.data + OFF_LAYERS, 3);
    expect_load_error(&b, b.size, "n_layers 3");
    put_u32(b.data + OFF_LAYERS, 2);
    put_u32(b.data + OFF_SHARED, 1); /* drops wcls: the file is then too long */
    expect_load_error(&b, b.size, "implies");
    free(b.data);
}

Test(llama2c_versions, corrupt_headers) {
    require_mirror_file(V2);
    size_t n;
    char *v2 = read_file(V2, &n);
    cr_assert_not_null(v2);
    Blob b = {v2, n};
    put_u32(b.data + OFF_VERSION, 3);
    expect_load_error(&b, n, "unknown llama2.c version 3 (this run reads versions 1 and 2)");
    put_u32(b.data + OFF_VERSION, 2);
    b.data[36] = 2;
    expect_load_error(&b, n, "shared_classifier flag is 2");
    b.data[36] = 1;
    put_u32(b.data + 37, 0); /* group_size, unaligned at 37 */
    expect_load_error(&b, n, "group_size is 0");
    put_u32(b.data + 37, 48);
    expect_load_error(&b, n,
                      "token_embedding has 32768 values, not a multiple of "
                      "group_size 48");
    put_u32(b.data + 37, 64);
    expect_load_error(&b, n - 1, "llama2.c version 2 (int8) header");
    expect_load_error(&b, 200, "shorter than its 256-byte header");
    free(v2);
}

/* ----------------------------------------------------------------------------
 * --logits, the interface tests/test_f64.py and tests/test_export.py read logits through (the
 * version 2 file's logits are checked there, against a float64 forward pass of its int8 values) */

Test(logits_option, rows_per_position_and_bad_path) {
    RunResult r = run_program((const char *[]){"--help", NULL});
    cr_assert(strstr(r.out, "--logits FILE"), "%s", r.out);
    result_free(&r);
    int rows;
    float *logits = greedy_logits(LEGACY, &rows);
    cr_assert_eq(rows, 256, "one row per position run");
    free(logits);
    r = run_program((const char *[]){LEGACY, "--logits", "/nonexistent-dir/x.f32", "Hi", NULL});
    cr_assert_eq(r.exit_code, 1);
    cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
    cr_assert(strstr(r.err, "run: cannot open --logits file /nonexistent-dir/x.f32"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    result_free(&r);
}

/* A --logits file that cannot take the writes (/dev/full): a write that fails mid-run (the
 * stream's buffer fills within the second position) and one only the final flush finds (one
 * position, inside the buffer) both end the run with one line naming the file. */
Test(logits_option, write_errors_name_the_file) {
    if (access("/dev/full", W_OK) != 0) cr_skip_test("no writable /dev/full on this machine");
    const char *steps[] = {"64", "1"};
    for (int i = 0; i < 2; i++) {
        RunResult r =
            run_program((const char *[]){LEGACY, "--logits", "/dev/full", "-n", steps[i], NULL});
        cr_assert_eq(r.exit_code, 1, "-n %s: %s", steps[i], r.err);
        cr_assert_eq(count_lines(r.err), 1, "-n %s: %s", steps[i], r.err);
        cr_assert(
            strstr(r.err, "run: cannot write --logits file /dev/full: No space left on device"),
            "-n %s: %s", steps[i], r.err);
        result_free(&r);
    }
}

/* --logits naming the model (which stays mapped) or the tokenizer: refused before anything is
 * written, both files left whole. */
Test(logits_option, refuses_the_model_and_tokenizer_files) {
    size_t model_size, tokenizer_size;
    char *model = read_file(LEGACY, &model_size),
         *tokenizer = read_file(TOKENIZER, &tokenizer_size);
    cr_assert(model && tokenizer);
    char model_copy[64], tokenizer_copy[64];
    temp_path(model_copy);
    temp_path(tokenizer_copy);
    cr_assert_eq(write_file(model_copy, model, model_size), 0);
    cr_assert_eq(write_file(tokenizer_copy, tokenizer, tokenizer_size), 0);
    const char *cases[2][2] = {{model_copy, "model file"}, {tokenizer_copy, "tokenizer file"}};
    for (int i = 0; i < 2; i++) {
        RunResult r = run_program((const char *[]){model_copy, "-z", tokenizer_copy, "--logits",
                                                   cases[i][0], "-n", "8", "Hi", NULL});
        char expected[128];
        snprintf(expected, sizeof(expected), "run: --logits file %s is the %s;", cases[i][0],
                 cases[i][1]);
        cr_assert_eq(r.exit_code, 1, "%s", r.err);
        cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
        cr_assert(strstr(r.err, expected), "%s", r.err);
        result_free(&r);
    }
    size_t size;
    char *after = read_file(model_copy, &size);
    cr_assert(size == model_size && memcmp(after, model, size) == 0, "the model file changed");
    free(after);
    after = read_file(tokenizer_copy, &size);
    cr_assert(size == tokenizer_size && memcmp(after, tokenizer, size) == 0,
              "the tokenizer file changed");
    free(after);
    free(model);
    free(tokenizer);
    unlink(model_copy);
    unlink(tokenizer_copy);
}

/* ----------------------------------------------------------------------------
 * Batched prefill: the prompt as batches of 64 positions gives the logits of one position at a
 * time, bit for bit (same kernels in the same order), across batch boundaries. */

Test(prefill, batch_logits_equal_serial_logits_over_three_batches) {
    /* 145 tokens in tok512 with BOS: prefill batches of 64, 64 and 16 positions, then generation */
    const char *prompt =
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
        "park with her friends. One day, she saw a big red ball under a tree. She ran to get it, "
        "but a dog took it first. Lily was sad and cried. Her mom said, \"Do not cry, we can share "
        "with the dog.\" So Lily and the dog played with the ball all day. They were happy and "
        "became best friends. Then they";
    char paths[2][64];
    temp_path(paths[0]);
    temp_path(paths[1]);
    const char *modes[2] = {"--prefill=batch", "--prefill=serial"};
    char *out[2], *logits[2];
    size_t size[2];
    for (int i = 0; i < 2; i++) {
        RunResult r = run_program((const char *[]){LEGACY, "-z", TOKENIZER, "-t", "0", "-n", "200",
                                                   "--logits", paths[i], modes[i], prompt, NULL});
        cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
        cr_assert(strstr(r.err, "prompt tokens 145,"), "%s", r.err);
        out[i] = strdup(r.out);
        result_free(&r);
        logits[i] = read_file(paths[i], &size[i]);
        unlink(paths[i]);
        cr_assert_not_null(logits[i]);
    }
    cr_assert_geq(size[0], (size_t)145 * VOCAB * sizeof(float), "a row per prompt position");
    cr_assert_eq(size[0], size[1]);
    cr_assert(memcmp(logits[0], logits[1], size[0]) == 0, "batched prefill changed the logits");
    cr_assert_str_eq(out[0], out[1]);
    for (int i = 0; i < 2; i++) {
        free(out[i]);
        free(logits[i]);
    }
}

Test(prefill, unknown_mode_is_one_error_line) {
    RunResult r = run_program((const char *[]){LEGACY, "--prefill=fast", "Hi", NULL});
    cr_assert_eq(r.exit_code, 1);
    cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
    cr_assert(strstr(r.err, "run: unknown --prefill 'fast' (expected batch or serial)"), "%s",
              r.err);
    cr_assert_str_eq(r.out, "");
    result_free(&r);
}
