/* llama.cpp as an oracle: loads a GGUF with the prebuilt libllama of npm's node-llama-cpp (make
 * llama-oracle builds this against it) and prints what llama.cpp computes, for the tests to
 * compare with run.
 *
 *   llama_logits MODEL.gguf --logits OUT ID...   evaluates the ids (positions 0, 1, ...; the
 *       caller gives BOS) in one batch and writes every position's logits to OUT: vocab_size
 *       float32 (native byte order) a position, position after position, as run's --logits
 *   llama_logits MODEL.gguf --tokenize TEXT      prints the ids of TEXT one a line, as llama.cpp's
 *       tokenizer gives them (BOS first when the vocabulary adds it)
 *   llama_logits MODEL.gguf --tokenize-corpus CORPUS [special]   the ids of each line of CORPUS
 *       (the hex of a string's bytes, "-" for the empty one) on one line, space separated, BOS
 *       first when the vocabulary adds it; control tokens' text parsed as them with "special"
 *       (llama_tokenize's parse_special). The tokenizing modes load the vocabulary alone
 *       (vocab_only), so a vocabulary-only GGUF will do.
 *   llama_logits MODEL.gguf --quantize OUT.gguf TYPE   writes MODEL as llama.cpp's quantizer
 *       does (llama-quantize): TYPE one of F16, BF16, Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K
 *   llama_logits --dequantize TYPE IN OUT   decodes IN, whole blocks of ggml type id TYPE, to
 *       float32 in OUT with ggml's own to_float (ggml_get_type_traits; F32 has none)
 *
 * The kv cache is F32 (llama.cpp's default F16 cache moves the logits by ~2e-2) and flash
 * attention off, so that llama.cpp computes in f32 throughout as run does. llama.cpp's own log
 * is dropped but for errors. Errors: one line on stderr, exit 1.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("llama_logits: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* llama.cpp's messages, but for errors, would bury the tests' output. */
static void log_errors_only(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static struct llama_model *load_model(const char *path, int vocab_only) {
    /* the CPU back ends (haswell, zen4, ...) are libraries of their own, chosen at run time */
    ggml_backend_load_all_from_path(LLAMA_LIBDIR);
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.vocab_only = vocab_only;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) die("llama.cpp cannot load %s", path);
    return model;
}

/* A context for one batch of n positions, all of whose logits are kept, computing in f32, on one
 * thread: llama.cpp's default of 4 spin-waits on a 2-core machine (stories260K: 9 s against
 * 0.06 s; the same logits). */
static struct llama_context *new_context(struct llama_model *model, int n) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = (uint32_t)n;
    cp.n_seq_max = 1;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    cp.n_threads = cp.n_threads_batch = 1;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) die("llama.cpp cannot make a context of %d positions", n);
    return ctx;
}

static int parse_id(const char *s, int vocab_size) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v >= vocab_size)
        die("id '%s' is not an integer in 0..%d", s, vocab_size - 1);
    return (int)v;
}

static void write_logits(struct llama_model *model, const char *out, char **ids, int n) {
    int vocab_size = llama_vocab_n_tokens(llama_model_get_vocab(model));
    if (n < 1) die("--logits needs at least one id");
    struct llama_context *ctx = new_context(model, n);
    struct llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        batch.token[i] = parse_id(ids[i], vocab_size);
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    int rc = llama_decode(ctx, batch);
    if (rc != 0) die("llama_decode returned %d", rc);
    FILE *f = fopen(out, "wb");
    if (!f) die("cannot open %s: %s", out, strerror(errno));
    for (int i = 0; i < n; i++) {
        const float *logits = llama_get_logits_ith(ctx, i);
        if (!logits) die("llama.cpp kept no logits for position %d", i);
        if (fwrite(logits, sizeof(float), (size_t)vocab_size, f) != (size_t)vocab_size)
            die("cannot write %s: %s", out, strerror(errno));
    }
    if (fclose(f) != 0) die("cannot write %s: %s", out, strerror(errno));
    llama_batch_free(batch);
    llama_free(ctx);
}

static void print_ids(struct llama_model *model, const char *text) {
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int len = (int)strlen(text);
    int cap = len + 2; /* at most one id a byte, BOS and EOS */
    llama_token *ids = malloc((size_t)cap * sizeof *ids);
    int n = llama_tokenize(vocab, text, len, ids, cap, true, false);
    if (n < 0) die("llama_tokenize needs %d ids", -n);
    for (int i = 0; i < n; i++) printf("%d\n", ids[i]);
    free(ids);
}

static int hex_value(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void print_corpus_ids(struct llama_model *model, const char *path, int special) {
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    for (ssize_t len; (len = getline(&line, &cap, f)) > 0;) {
        if (line[len - 1] == '\n') len--;
        if (len == 1 && line[0] == '-') len = 0;
        if (len % 2) die("%s: a line is not hex", path);
        for (ssize_t i = 0; i < len / 2; i++) {
            int hi = hex_value(line[2 * i]), lo = hex_value(line[2 * i + 1]);
            if (hi < 0 || lo < 0) die("%s: a line is not hex", path);
            line[i] = (char)(hi * 16 + lo);
        }
        int n_max = (int)len / 2 + 2; /* at most one id a byte, BOS and EOS */
        llama_token *ids = malloc((size_t)n_max * sizeof *ids);
        int n = llama_tokenize(vocab, line, (int)len / 2, ids, n_max, true, special);
        if (n < 0) die("llama_tokenize needs %d ids", -n);
        for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
        free(ids);
    }
    free(line);
    fclose(f);
}

/* llama_model_quantize's file types (llama.h's llama_ftype), by llama-quantize's names. */
static const struct {
    const char *name;
    enum llama_ftype ftype;
} ftypes[] = {
    {"F16", LLAMA_FTYPE_MOSTLY_F16},       {"BF16", LLAMA_FTYPE_MOSTLY_BF16},
    {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},     {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},
    {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M},
    {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},
};

static void quantize(const char *in, const char *out, const char *type) {
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    size_t i = 0, n = sizeof ftypes / sizeof ftypes[0];
    while (i < n && strcmp(ftypes[i].name, type) != 0) i++;
    if (i == n) die("unknown type %s (F16, BF16, Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K)", type);
    qp.ftype = ftypes[i].ftype;
    qp.nthread = 1;
    if (llama_model_quantize(in, out, &qp) != 0) die("llama.cpp cannot quantize %s", in);
}

/* The blocks of type `type` in file `in` decoded by ggml into `out`. */
static void dequantize(const char *type_id, const char *in, const char *out) {
    int type = parse_id(type_id, GGML_TYPE_COUNT);
    const struct ggml_type_traits *traits = ggml_get_type_traits((enum ggml_type)type);
    if (!traits->to_float || traits->blck_size == 0) die("ggml cannot decode type %d", type);
    FILE *f = fopen(in, "rb");
    if (!f) die("cannot open %s: %s", in, strerror(errno));
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    rewind(f);
    if (bytes <= 0 || bytes % (long)traits->type_size != 0)
        die("%s is not whole blocks of %s", in, traits->type_name);
    char *blocks = malloc((size_t)bytes);
    if (!blocks || fread(blocks, 1, (size_t)bytes, f) != (size_t)bytes) die("cannot read %s", in);
    fclose(f);
    int64_t n = bytes / (long)traits->type_size * traits->blck_size;
    float *values = malloc((size_t)n * sizeof(float));
    if (!values) die("out of memory");
    traits->to_float(blocks, values, n);
    f = fopen(out, "wb");
    if (!f || fwrite(values, sizeof(float), (size_t)n, f) != (size_t)n || fclose(f) != 0)
        die("cannot write %s", out);
    free(blocks);
    free(values);
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--dequantize") == 0) {
        dequantize(argv[2], argv[3], argv[4]);
        return 0;
    }
    const char *mode = argc >= 3 ? argv[2] : "";
    int is_logits = strcmp(mode, "--logits") == 0, is_quantize = strcmp(mode, "--quantize") == 0;
    int is_corpus = strcmp(mode, "--tokenize-corpus") == 0;
    int special = is_corpus && argc == 5 && strcmp(argv[4], "special") == 0;
    if (!((is_logits && argc >= 4) || (strcmp(mode, "--tokenize") == 0 && argc == 4) ||
          (is_quantize && argc == 5) || (is_corpus && (argc == 4 || special))))
        die("usage: llama_logits MODEL.gguf --logits OUT ID... | --tokenize TEXT | "
            "--tokenize-corpus CORPUS [special] | --quantize OUT.gguf TYPE; "
            "llama_logits --dequantize TYPE IN OUT");
    llama_log_set(log_errors_only, NULL);
    llama_backend_init();
    if (is_quantize) {
        quantize(argv[1], argv[3], argv[4]);
    } else {
        struct llama_model *model = load_model(argv[1], !is_logits);
        if (is_logits)
            write_logits(model, argv[3], argv + 4, argc - 4);
        else if (is_corpus)
            print_corpus_ids(model, argv[3], special);
        else
            print_ids(model, argv[3]);
        llama_model_free(model);
    }
    llama_backend_free();
    return 0;
}
