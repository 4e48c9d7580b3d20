/* run: generate text from a LLaMA-style checkpoint.
 *
 *   ./run MODEL [PROMPT] [options]
 *
 * Loads the model and its tokenizer, feeds the prompt, then samples one token at a time and
 * streams the text to stdout; a summary goes to stderr. See usage() for the options.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model.h"
#include "norm.h"
#include "tokenizer.h"

/* ----------------------------------------------------------------------------
 * Sampler: greedy, temperature, top-p. Same random generator and procedures as llama2.c's
 * run.c, so that equal seeds draw equal tokens. */

typedef struct {
    float prob;
    int index;
} ProbIndex;

typedef struct {
    int vocab_size;
    float temperature; /* 0: greedy */
    float topp;        /* nucleus mass; <= 0 or >= 1 samples from the whole distribution */
    unsigned long long rng_state; /* xorshift64* state, never 0 */
    ProbIndex *candidates;        /* (vocab_size) scratch for top-p */
} Sampler;

/* xorshift64* (Vigna 2016), upper 32 bits. */
static unsigned int random_u32(unsigned long long *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (unsigned int)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

/* Uniform in [0, 1) from the top 24 bits, the float mantissa's width. */
static float random_f32(unsigned long long *state) {
    return (random_u32(state) >> 8) / 16777216.0f;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > max) max = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

/* Inverse-CDF draw from probs (n) with coin in [0, 1). */
static int sample_full(const float *probs, int n, float coin) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
        cdf += probs[i];
        if (coin < cdf) return i;
    }
    return n - 1; /* rounding left the cdf just under 1 */
}

static int by_prob_desc(const void *a, const void *b) {
    float pa = ((const ProbIndex *)a)->prob, pb = ((const ProbIndex *)b)->prob;
    return (pa < pb) - (pa > pb);
}

/* Nucleus sampling (Holtzman et al. 2020): draw from the smallest set of most likely tokens
 * whose mass exceeds topp. Tokens below (1 - topp) / (n - 1) cannot be in that set, so they are
 * dropped before sorting, as llama2.c does. */
static int sample_topp(const float *probs, int n, float topp, ProbIndex *candidates, float coin) {
    float cutoff = (1.0f - topp) / (n - 1);
    int n_cand = 0;
    for (int i = 0; i < n; i++) {
        if (probs[i] >= cutoff) {
            candidates[n_cand].index = i;
            candidates[n_cand].prob = probs[i];
            n_cand++;
        }
    }
    qsort(candidates, n_cand, sizeof(ProbIndex), by_prob_desc);
    float mass = 0.0f;
    int last = n_cand - 1;
    for (int i = 0; i < n_cand; i++) {
        mass += candidates[i].prob;
        if (mass > topp) {
            last = i;
            break;
        }
    }
    float r = coin * mass;
    float cdf = 0.0f;
    for (int i = 0; i <= last; i++) {
        cdf += candidates[i].prob;
        if (r < cdf) return candidates[i].index;
    }
    return candidates[last].index;
}

/* Picks the next token from logits (vocab_size), which it overwrites with probabilities. */
static int sample(Sampler *s, float *logits) {
    if (s->temperature == 0.0f) return argmax(logits, s->vocab_size);
    for (int i = 0; i < s->vocab_size; i++) logits[i] /= s->temperature;
    softmax(logits, s->vocab_size);
    float coin = random_f32(&s->rng_state);
    if (s->topp <= 0.0f || s->topp >= 1.0f) return sample_full(logits, s->vocab_size, coin);
    return sample_topp(logits, s->vocab_size, s->topp, s->candidates, coin);
}

/* ----------------------------------------------------------------------------
 * Command line */

typedef struct {
    const char *model_path;
    const char *tokenizer_path; /* NULL: look beside the model */
    const char *prompt;         /* NULL: no prompt, generation starts from BOS */
    float temperature;
    float topp;
    unsigned long long seed; /* 0: from the clock */
    int steps;               /* positions to run, prompt included, as llama2.c counts them */
    int threads;             /* 0: OpenMP's default */
    NormFn norm;               /* NULL: the norm the model was trained with */
    const char *logits_path;   /* NULL: do not write logits */
    const char *tokenize_text; /* --tokenize: print the ids of this text instead of generating */
    const char *tokenize_file; /* --tokenize-file: count the tokens of this file, time it */
    int json;                  /* --json: --tokenize prints a JSON object */
} Options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: run MODEL [PROMPT] [options]\n"
            "  MODEL             checkpoint: normllama's format (export.py writes it) or\n"
            "                    llama2.c's legacy, version 1 or version 2 (int8) layout\n"
            "                    (e.g. models/stories260K.bin)\n"
            "  PROMPT            text to continue; may also be given with -i\n"
            "options:\n"
            "  -i TEXT           the prompt\n"
            "  -z FILE           tokenizer file (default: tok<vocab_size>.bin beside the model,\n"
            "                    else tokenizer.bin beside it)\n"
            "  -t FLOAT          temperature, >= 0; 0 is greedy (default 1.0)\n"
            "  -p FLOAT          top-p (nucleus) mass in [0, 1]; 0 or 1 disables it (default 0.9)\n"
            "  -s INT            random seed, >= 0; 0 takes one from the clock (default 0)\n"
            "  -n INT            positions to run, prompt tokens included, as in llama2.c;\n"
            "                    clamped to the model's seq_len (default 256)\n"
            "  --norm=NAME       every norm in the model: %s (default: the norm the\n"
            "                    model was trained with; rmsnorm for llama2.c files)\n"
            "  --logits FILE     write the logits of every position run (prompt positions\n"
            "                    teacher-forced) to FILE: vocab_size float32 (native byte\n"
            "                    order) per position, position after position\n"
            "  --threads=N       OpenMP threads, >= 1 (default: all cores)\n"
            "  --tokenize TEXT   print the ids of TEXT (BOS first), one per line with its piece\n"
            "  --json            with --tokenize: print {\"ids\": [...], \"pieces\": [...]}\n"
            "  --tokenize-file FILE  print the number of tokens of FILE and the encoding speed\n"
            "  -h, --help        this text\n",
            norm_names());
}

/* Prints "run: <message>" on one line to stderr and exits 1. */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("run: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static float parse_float(const char *flag, const char *s) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end != '\0' || errno != 0 || v != v)
        die("%s needs a number, got '%s'", flag, s);
    return v;
}

static long long parse_int(const char *flag, const char *s) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0) die("%s needs an integer, got '%s'", flag, s);
    return v;
}

/* The value of an option given as "-x VALUE", "--name=VALUE" or "--name VALUE". */
static const char *option_value(int argc, char **argv, int *i, const char *flag) {
    const char *eq = strchr(argv[*i], '=');
    if (argv[*i][1] == '-' && eq) return eq + 1;
    if (*i + 1 >= argc) die("%s needs a value", flag);
    return argv[++*i];
}

static Options parse_args(int argc, char **argv) {
    Options o = {.temperature = 1.0f, .topp = 0.9f, .steps = 256};
    int n_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (a[0] != '-' || a[1] == '\0') {
            if (n_positional == 0)
                o.model_path = a;
            else if (n_positional == 1)
                o.prompt = a;
            else
                die("unexpected argument '%s' (quote a prompt with spaces)", a);
            n_positional++;
            continue;
        }
        size_t name_len = strcspn(a, "=");
        char flag[32];
        snprintf(flag, sizeof(flag), "%.*s", (int)name_len, a);
        if (strcmp(flag, "-i") == 0) {
            if (o.prompt) die("the prompt is given twice");
            o.prompt = option_value(argc, argv, &i, flag);
            n_positional = n_positional > 1 ? n_positional : 2;
        } else if (strcmp(flag, "-z") == 0) {
            o.tokenizer_path = option_value(argc, argv, &i, flag);
        } else if (strcmp(flag, "-t") == 0) {
            o.temperature = parse_float(flag, option_value(argc, argv, &i, flag));
            if (o.temperature < 0.0f) die("-t (temperature) must be >= 0, got %g", o.temperature);
        } else if (strcmp(flag, "-p") == 0) {
            o.topp = parse_float(flag, option_value(argc, argv, &i, flag));
            if (o.topp < 0.0f || o.topp > 1.0f) die("-p (top-p) must be in [0, 1], got %g", o.topp);
        } else if (strcmp(flag, "-s") == 0) {
            long long seed = parse_int(flag, option_value(argc, argv, &i, flag));
            if (seed < 0) die("-s (seed) must be >= 0, got %lld", seed);
            o.seed = (unsigned long long)seed;
        } else if (strcmp(flag, "-n") == 0) {
            long long steps = parse_int(flag, option_value(argc, argv, &i, flag));
            if (steps <= 0 || steps > INT_MAX)
                die("-n (steps) must be a positive integer, got %lld", steps);
            o.steps = (int)steps;
        } else if (strcmp(flag, "--norm") == 0) {
            const char *name = option_value(argc, argv, &i, flag);
            o.norm = norm_by_name(name);
            if (!o.norm) die("unknown --norm '%s' (expected %s)", name, norm_names());
        } else if (strcmp(flag, "--logits") == 0) {
            o.logits_path = option_value(argc, argv, &i, flag);
        } else if (strcmp(flag, "--threads") == 0) {
            long long threads = parse_int(flag, option_value(argc, argv, &i, flag));
            if (threads < 1 || threads > 1024)
                die("--threads must be in 1..1024, got %lld", threads);
            o.threads = (int)threads;
        } else if (strcmp(flag, "--tokenize") == 0) {
            o.tokenize_text = option_value(argc, argv, &i, flag);
        } else if (strcmp(flag, "--tokenize-file") == 0) {
            o.tokenize_file = option_value(argc, argv, &i, flag);
        } else if (strcmp(a, "--json") == 0) {
            o.json = 1;
        } else {
            die("unknown option '%s' (see run --help)", a);
        }
    }
    if (o.tokenize_text && o.tokenize_file) die("give --tokenize or --tokenize-file, not both");
    if ((o.tokenize_text || o.tokenize_file) && o.prompt)
        die("--tokenize and --tokenize-file take no prompt");
    if (o.json && !o.tokenize_text) die("--json goes with --tokenize");
    if (!o.model_path) {
        usage(stderr);
        die("no model given");
    }
    return o;
}

/* ----------------------------------------------------------------------------
 * Set-up and generation */

/* Finds the tokenizer beside the model: tok<vocab_size>.bin, then tokenizer.bin. */
static void find_tokenizer(const char *model_path, int vocab_size, char *out, size_t outlen) {
    const char *slash = strrchr(model_path, '/');
    int dir_len = slash ? (int)(slash - model_path + 1) : 0;
    char tried[2][1024];
    snprintf(tried[0], sizeof(tried[0]), "%.*stok%d.bin", dir_len, model_path, vocab_size);
    snprintf(tried[1], sizeof(tried[1]), "%.*stokenizer.bin", dir_len, model_path);
    for (int i = 0; i < 2; i++) {
        if (access(tried[i], R_OK) == 0) {
            snprintf(out, outlen, "%s", tried[i]);
            return;
        }
    }
    die("no tokenizer found for vocab_size %d: tried %s and %s (give one with -z)", vocab_size,
        tried[0], tried[1]);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ----------------------------------------------------------------------------
 * --tokenize and --tokenize-file */

/* How a piece is shown: control pieces by their SentencePiece names (the .bin stores BOS and EOS
 * as "\n<s>\n" and "\n</s>\n"), others as stored, spaces plain. */
static const char *shown_piece(const Tokenizer *t, int id) {
    static const char *control[] = {"<unk>", "<s>", "</s>"};
    return id <= TOKEN_EOS ? control[id] : t->vocab[id];
}

/* Writes s as a JSON string: quotes, backslashes and control bytes escaped, bytes that are not
 * well-formed UTF-8 (possible only in a hand-made vocabulary) as U+FFFD. */
static void print_json_string(const char *s) {
    putchar('"');
    while (*s) {
        long bad = tokenizer_utf8_invalid_at(s);
        const char *end = bad < 0 ? s + strlen(s) : s + bad;
        for (; s < end; s++) {
            unsigned char c = (unsigned char)*s;
            if (c == '"' || c == '\\')
                printf("\\%c", c);
            else if (c < 0x20)
                printf("\\u%04x", c);
            else
                putchar(c);
        }
        if (bad >= 0) {
            printf("\\ufffd");
            s++;
        }
    }
    putchar('"');
}

/* One id per line with its piece, as llama.cpp's tokenize tool prints them; control bytes in a
 * piece are escaped so that each id keeps to one line. */
static void print_ids(const Tokenizer *t, const int *ids, int n) {
    for (int i = 0; i < n; i++) {
        printf("%6d -> '", ids[i]);
        for (const unsigned char *p = (const unsigned char *)shown_piece(t, ids[i]); *p; p++) {
            if (*p == '\n')
                fputs("\\n", stdout);
            else if (*p < 0x20 || *p == 0x7F)
                printf("\\x%02X", *p);
            else
                putchar(*p);
        }
        printf("'\n");
    }
}

static void print_ids_json(const Tokenizer *t, const int *ids, int n) {
    printf("{\"ids\": [");
    for (int i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
    printf("], \"pieces\": [");
    for (int i = 0; i < n; i++) {
        if (i) printf(", ");
        print_json_string(shown_piece(t, ids[i]));
    }
    printf("]}\n");
}

/* The whole file as a NUL-terminated string; dies on a file that cannot be read, is empty, or
 * holds a NUL byte. */
static char *read_text_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) die("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *text = NULL;
    for (;;) {
        char *bigger = realloc(text, cap + 1);
        if (!bigger) {
            free(text);
            die("%s: out of memory reading it", path);
        }
        text = bigger;
        n += fread(text + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
    }
    int read_errno = ferror(f) ? errno : 0;
    fclose(f);
    text[n] = '\0';
    size_t text_len = strlen(text);
    if (read_errno || n == 0 || text_len != n) {
        free(text); /* before exiting, so that the leak checker of `make sanitize` stays quiet */
        if (read_errno) die("%s: cannot read: %s", path, strerror(read_errno));
        if (n == 0) die("%s: empty file, nothing to tokenize", path);
        die("%s: NUL byte at offset %zu; not a text file", path, text_len);
    }
    return text;
}

/* --tokenize TEXT prints the ids of TEXT; --tokenize-file FILE the token count and speed. Text
 * that is not valid UTF-8 is refused, as a prompt is, rather than encoded with U+FFFD for its
 * bad bytes as tokenizer_encode (and SentencePiece) would. */
static void tokenize_command(const Tokenizer *t, const Options *o) {
    char *text = o->tokenize_file ? read_text_file(o->tokenize_file) : NULL;
    const char *input = text ? text : o->tokenize_text;
    long bad = tokenizer_utf8_invalid_at(input);
    if (bad >= 0) {
        unsigned char byte = (unsigned char)input[bad];
        free(text);
        die("%s: not valid UTF-8 (byte 0x%02X at offset %ld)",
            o->tokenize_file ? o->tokenize_file : "--tokenize text", byte, bad);
    }
    size_t size = strlen(input);
    int *ids = malloc((size + 3) * sizeof *ids); /* well-formed UTF-8: one id per byte at most */
    if (!ids) die("out of memory for %zu bytes of text", size);
    double start = now_seconds();
    int n = tokenizer_encode(t, input, 1, 0, ids);
    double seconds = now_seconds() - start;
    if (o->tokenize_file)
        printf("%s: %d tokens (BOS included) from %zu bytes in %.3f s, %.1f MB/s\n",
               o->tokenize_file, n, size, seconds, seconds > 0 ? size / seconds / 1e6 : 0.0);
    else if (o->json)
        print_ids_json(t, ids, n);
    else
        print_ids(t, ids, n);
    free(ids);
    free(text);
}

int main(int argc, char **argv) {
    Options o = parse_args(argc, argv);
    if (o.threads > 0) omp_set_num_threads(o.threads);
    const char *prompt = o.prompt ? o.prompt : "";
    if (tokenizer_utf8_invalid_at(prompt) >= 0) die("the prompt is not valid UTF-8");

    char err[1024];
    Model model;
    if (model_load(&model, o.model_path, err, sizeof(err)) != 0) die("%s", err);
    const Config *c = &model.config;
    if (o.norm) model.norm = o.norm;
    if (c->norm_bias && model.norm == rmsnorm)
        fprintf(stderr, "run: the model was trained with %s; rmsnorm ignores its norm biases\n",
                norm_name(c->trained_norm));

    char tokenizer_path[1024];
    if (o.tokenizer_path)
        snprintf(tokenizer_path, sizeof(tokenizer_path), "%s", o.tokenizer_path);
    else
        find_tokenizer(o.model_path, c->vocab_size, tokenizer_path, sizeof(tokenizer_path));
    Tokenizer tokenizer;
    if (tokenizer_load(&tokenizer, tokenizer_path, err, sizeof(err)) != 0) die("%s", err);
    if (tokenizer.vocab_size != c->vocab_size)
        die("%s has %d pieces but the model's vocab_size is %d", tokenizer_path,
            tokenizer.vocab_size, c->vocab_size);
    if (o.tokenize_text || o.tokenize_file) {
        tokenize_command(&tokenizer, &o);
        tokenizer_free(&tokenizer);
        model_free(&model);
        return 0;
    }

    if (o.steps > c->seq_len) {
        fprintf(stderr, "run: -n %d is more than seq_len %d; running %d positions\n", o.steps,
                c->seq_len, c->seq_len);
        o.steps = c->seq_len;
    }
    int *prompt_tokens = malloc((strlen(prompt) + 3) * sizeof(int));
    if (!prompt_tokens) die("out of memory for the prompt");
    int n_prompt = tokenizer_encode(&tokenizer, prompt, 1, 0, prompt_tokens);
    if (n_prompt > c->seq_len)
        die("the prompt is %d tokens, longer than the model's seq_len %d", n_prompt, c->seq_len);
    if (n_prompt > o.steps)
        die("the prompt is %d tokens, more than -n %d (which counts the prompt tokens)", n_prompt,
            o.steps);

    Sampler sampler = {
        .vocab_size = c->vocab_size,
        .temperature = o.temperature,
        .topp = o.topp,
        .rng_state = o.seed ? o.seed : (unsigned long long)time(NULL),
        .candidates = malloc(c->vocab_size * sizeof(ProbIndex)),
    };
    if (!sampler.candidates) die("out of memory for the sampler");
    FILE *logits_file = NULL;
    if (o.logits_path && !(logits_file = fopen(o.logits_path, "wb")))
        die("cannot open --logits file %s: %s", o.logits_path, strerror(errno));

    /* Position pos feeds `token` and predicts the token at pos + 1: forced from the prompt while
     * there is one, sampled after. BOS (id 1) ends the text, as in llama2.c. */
    double start = now_seconds();
    int token = prompt_tokens[0];
    int pos = 0;
    while (pos < o.steps) {
        float *logits = model_forward(&model, token, pos);
        if (logits_file &&
            fwrite(logits, sizeof(float), c->vocab_size, logits_file) != (size_t)c->vocab_size)
            die("cannot write --logits file %s: %s", o.logits_path, strerror(errno));
        int next = pos + 1 < n_prompt ? prompt_tokens[pos + 1] : sample(&sampler, logits);
        pos++;
        if (next == TOKEN_BOS) break;
        tokenizer_print_piece(tokenizer_decode(&tokenizer, token, next));
        fflush(stdout);
        token = next;
    }
    printf("\n");
    if (logits_file && fclose(logits_file) != 0)
        die("cannot write --logits file %s: %s", o.logits_path, strerror(errno));
    double elapsed = now_seconds() - start;
    int generated = pos - n_prompt;
    fprintf(stderr, "prompt tokens %d, generated tokens %d, %.1f tokens/s, norm %s\n", n_prompt,
            generated > 0 ? generated : 0, elapsed > 0 ? pos / elapsed : 0.0,
            norm_name(model.norm));

    free(sampler.candidates);
    free(prompt_tokens);
    tokenizer_free(&tokenizer);
    model_free(&model);
    return 0;
}
