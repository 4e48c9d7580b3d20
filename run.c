/* run: generate text from a LLaMA-style checkpoint.
 *
 *   ./run MODEL [PROMPT] [options]
 *
 * Loads the model and its tokenizer, feeds the prompt, then samples one token at a time and
 * streams the text to stdout; a summary goes to stderr (--logits also writes every position's
 * logits to a file, --profile adds the time per operation class). See usage() for the options.
 * The other modes: -m chat (a conversation in the Llama 2 chat template, user turns read from
 * stdin), --tokenize TEXT and --tokenize-file FILE run the tokenizer alone, and two measure the
 * norms: --ppl FILE (perplexity of a text) and --compare (the same prompt under two norms: texts,
 * next-token distributions, norm inputs, speed).
 *
 * The sections below, in order: the sampler, the command line, set-up, --tokenize, generation,
 * chat, --ppl, --compare, main.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chat.h"
#include "eval.h"
#include "generate.h"
#include "io.h"
#include "model.h"
#include "norm.h"
#include "sampler.h"
#include "tokenizer.h"

#define NORMLLAMA_VERSION "0.1"

/* ----------------------------------------------------------------------------
 * Command line */

typedef struct {
    const char *model_path;
    const char *tokenizer_path; /* NULL: look beside the model */
    const char *prompt;         /* NULL: no prompt, generation starts from BOS */
    const char *prompt_file;    /* -f FILE, or "-" (-f - or -i -): the prompt is read from it */
    int chat;                   /* -m chat: a conversation with the Llama 2 chat template */
    const char *system_prompt;  /* -y: chat's system prompt; NULL: asked for on a terminal */
    int ignore_eos;             /* --ignore-eos: only BOS ends a text, as in llama2.c */
    float temperature;
    float topp;
    unsigned long long seed;   /* 0: from the clock */
    int steps;                 /* positions to run, prompt included, as llama2.c counts them */
    int steps_given;           /* -n was given: clamping it to seq_len is worth a notice */
    int threads;               /* 0: OpenMP's default */
    NormFn norm;               /* NULL: the norm the model was trained with */
    const char *logits_path;   /* NULL: do not write logits */
    const char *tokenize_text; /* --tokenize: print the ids of this text instead of generating */
    const char *tokenize_file; /* --tokenize-file: count the tokens of this file, time it */
    int json;                  /* --json: --tokenize or --compare print JSON */
    int profile;               /* --profile: time per operation class */
    const char *ppl_path;      /* --ppl FILE: perplexity mode */
    int compare;               /* --compare[=A,B]: compare mode */
    NormFn compare_with[2];
    int serial_prompt; /* --prefill=serial: the prompt one position at a time, not in batches */
    int batch;         /* --batch: positions per prefill batch; 0: the model's default */
    /* the first of -t, -p, -s and -n given, and whether --prefill was: options that --ppl and
     * --tokenize (which sample nothing) or --compare (whose passes are serial) would ignore */
    const char *sampling_flag;
    int prefill_given;
} Options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: run MODEL [PROMPT] [options]\n"
            "  MODEL             checkpoint: normllama's format (export.py writes it) or\n"
            "                    llama2.c's legacy, version 1 or version 2 (int8) layout\n"
            "                    (e.g. models/stories260K.bin)\n"
            "  PROMPT            text to continue; may also be given with -i\n"
            "options:\n"
            "  -i TEXT           the prompt; -i - reads it from stdin\n"
            "  -f FILE           the prompt from FILE (- : stdin), one final newline\n"
            "                    dropped as llama.cpp's -f does; for prompts too long for\n"
            "                    one argument\n"
            "  -m MODE           generate: continue the prompt (default); chat: a\n"
            "                    conversation in the Llama 2 chat template, user turns\n"
            "                    read from stdin line by line (see below)\n"
            "  -y TEXT           with -m chat: the system prompt (default: asked for when\n"
            "                    stdin is a terminal, none otherwise)\n"
            "  -z FILE           tokenizer file (default: tok<vocab_size>.bin beside the\n"
            "                    model, else tokenizer.bin beside it)\n"
            "  -t FLOAT          temperature, >= 0; 0 is greedy (default 1.0)\n"
            "  -p FLOAT          top-p (nucleus) mass in [0, 1]; 0 or 1 disables it\n"
            "                    (default 0.9)\n"
            "  -s INT            random seed, >= 0; 0 takes one from the clock (default 0)\n"
            "  -n INT            positions to run, prompt tokens included, as in llama2.c;\n"
            "                    clamped to the model's seq_len (default 256; with -m chat\n"
            "                    seq_len, for all turns together)\n"
            "  --ignore-eos      generation ends only at BOS, as in llama2.c; by default\n"
            "                    EOS (id 2) ends it too, as in llama.cpp\n"
            "  --norm=NAME       every norm in the model, one of\n"
            "                    %s\n"
            "                    (default: the norm the model was trained with; rmsnorm\n"
            "                    for llama2.c files)\n"
            "  --logits FILE     write the logits of every position run (prompt positions\n"
            "                    teacher-forced) to FILE: vocab_size float32 (native byte\n"
            "                    order) per position, position after position; an\n"
            "                    error removes the file\n"
            "  --threads=N       OpenMP threads, 1..1024 (default: all cores)\n"
            "  --prefill=MODE    batch: the prompt goes through the model in batches of\n"
            "                    positions (default); serial: one position at a time\n"
            "  -b, --batch=N     positions per prefill batch, 1..seq_len (default: 64 to\n"
            "                    256 by the model's size); the batch's activations grow\n"
            "                    with N; not with --prefill=serial, --ppl, --compare or\n"
            "                    --tokenize\n"
            "  --tokenize TEXT   print the ids of TEXT (BOS first), one per line with its\n"
            "                    piece\n"
            "  --tokenize-file FILE\n"
            "                    print the number of tokens of FILE and the encoding speed\n"
            "  --profile         after generating, print the time per operation class\n"
            "modes:\n"
            "  --ppl FILE        mean negative log-likelihood and perplexity of the text in\n"
            "                    FILE (no PROMPT; chunks of seq_len tokens, each from BOS)\n"
            "  --compare[=A,B]   run PROMPT under norms A and B (default rmsnorm,layernorm):\n"
            "                    both continuations, per-position KL(A || B) teacher-forced\n"
            "                    on A's, statistics of every norm site's input, speed\n"
            "  --json            with --tokenize: print {\"ids\": [...], \"pieces\": [...]};\n"
            "                    with --compare: the same numbers as JSON on stdout\n"
            "  -h, --help        this text\n"
            "  --version         print the version\n"
            "chat: \"User: \" and \"Assistant: \" mark the turns on stdout (a turn read from\n"
            "a pipe or file is echoed after its marker); a reply ends at EOS (or BOS), and\n"
            "the kv cache keeps the whole conversation. The chat ends with status 0 at\n"
            "the end of stdin or when the context (-n, seq_len) is full, saying which.\n"
            "The summary line on stderr gives the seed used; -s with it repeats a text.\n"
            "examples:\n"
            "  run models/stories260K.bin \"Once upon a time\"\n"
            "  run models/stories260K.bin -t 0 -n 64 -f prompt.txt\n"
            "  run models/stories260K.bin -s 42 --norm=layernorm \"Lily saw a cat\"\n"
            "  run models/stories260K.bin -m chat -y \"You tell stories.\"\n"
            "  run models/stories260K.bin --ppl data/stories.txt\n",
            norm_names());
}

static float parse_float(const char *flag, const char *s) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end != '\0' || v != v) die("%s needs a number, got '%s'", flag, s);
    if (errno == ERANGE || isinf(v)) die("%s is out of range, got '%s'", flag, s);
    return v;
}

static long long parse_int(const char *flag, const char *s) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0') die("%s needs an integer, got '%s'", flag, s);
    if (errno == ERANGE) die("%s is out of range, got '%s'", flag, s);
    return v;
}

/* The value of an option given as "-x VALUE", "--name=VALUE" or "--name VALUE". */
static const char *option_value(int argc, char **argv, int *i, const char *flag) {
    const char *eq = strchr(argv[*i], '=');
    if (eq) return eq + 1;
    if (*i + 1 >= argc) die("%s needs a value", flag);
    return argv[++*i];
}

/* "A,B" (NULL: the default pair) into two different known norms. */
static void parse_compare_norms(const char *spec, NormFn out[2]) {
    out[0] = rmsnorm;
    out[1] = layernorm;
    if (!spec) return;
    const char *comma = strchr(spec, ',');
    if (!comma || strchr(comma + 1, ','))
        die("--compare needs two norms as A,B, got '%s' (norms: %s)", spec, norm_names());
    char names[2][64];
    snprintf(names[0], sizeof(names[0]), "%.*s", (int)(comma - spec), spec);
    snprintf(names[1], sizeof(names[1]), "%s", comma + 1);
    for (int k = 0; k < 2; k++) {
        out[k] = norm_by_name(names[k]);
        if (!out[k]) die("unknown norm '%s' in --compare (expected %s)", names[k], norm_names());
    }
    if (out[0] == out[1]) die("--compare needs two different norms, got '%s' twice", names[0]);
}

/* 1 if s names two norms as A,B: what a separate argument after --compare would mean, as
 * --compare's own value is optional and must follow an '=' */
static int is_norm_pair(const char *s) {
    const char *comma = strchr(s, ',');
    if (!comma) return 0;
    char first[64];
    snprintf(first, sizeof(first), "%.*s", (int)(comma - s), s);
    return norm_by_name(first) && norm_by_name(comma + 1);
}

/* Sets the prompt from -i, -f or the PROMPT argument: "-" as -i's value or as PROMPT, and -f's
 * file, are read later (read_prompt). */
static void set_prompt(Options *o, const char *flag, const char *value) {
    if (o->prompt || o->prompt_file) die("the prompt is given twice");
    if (strcmp(flag, "-f") == 0 || strcmp(value, "-") == 0)
        o->prompt_file = value;
    else
        o->prompt = value;
}

/* Dies on the options -m chat, -y and --ignore-eos conflict with: chat is a mode of its own that
 * reads its turns from stdin and feeds them one position at a time, and its replies end at EOS;
 * --ppl and --tokenize sample nothing to end. */
static void check_chat_options(const Options *o, int tokenize) {
    if (o->system_prompt && !o->chat) die("-y (the system prompt) goes with -m chat");
    if (o->ignore_eos && (o->chat || o->ppl_path || tokenize))
        die("--ignore-eos goes with generation and --compare, not with -m chat (a reply ends at "
            "EOS), --ppl or --tokenize");
    if (!o->chat) return;
    if (o->compare || o->ppl_path || tokenize)
        die("-m chat is a mode of its own, not one to combine with --compare, --ppl or "
            "--tokenize");
    if (o->prompt_file && strcmp(o->prompt_file, "-") == 0)
        die("-m chat reads its turns from stdin; give the first one with -i TEXT or -f FILE");
    const char *flag = o->logits_path     ? "--logits"
                       : o->batch         ? "--batch"
                       : o->prefill_given ? "--prefill"
                       : o->profile       ? "--profile"
                                          : NULL;
    if (flag) die("%s goes with -m generate, not with -m chat", flag);
}

static Options parse_args(int argc, char **argv) {
    Options o = {.temperature = 1.0f, .topp = 0.9f};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            finish_stdout();
            exit(0);
        }
        if (strcmp(a, "--version") == 0) {
            printf("normllama %s\n", NORMLLAMA_VERSION);
            finish_stdout();
            exit(0);
        }
        if (a[0] != '-' || a[1] == '\0') {
            if (!o.model_path)
                o.model_path = a;
            else if (!o.prompt && !o.prompt_file)
                set_prompt(&o, "PROMPT", a);
            else
                die("unexpected argument '%s' (the prompt is given already; quote one with spaces)",
                    a);
            continue;
        }
        size_t name_len = strcspn(a, "=");
        char flag[32];
        snprintf(flag, sizeof(flag), "%.*s", (int)name_len, a);
        if (strcmp(flag, "-i") == 0 || strcmp(flag, "-f") == 0) {
            set_prompt(&o, flag, option_value(argc, argv, &i, flag));
        } else if (strcmp(flag, "-m") == 0) {
            const char *mode = option_value(argc, argv, &i, flag);
            if (strcmp(mode, "generate") != 0 && strcmp(mode, "chat") != 0)
                die("unknown -m '%s' (expected generate or chat)", mode);
            o.chat = strcmp(mode, "chat") == 0;
        } else if (strcmp(flag, "-y") == 0) {
            o.system_prompt = option_value(argc, argv, &i, flag);
        } else if (strcmp(a, "--ignore-eos") == 0) {
            o.ignore_eos = 1;
        } else if (strcmp(flag, "-z") == 0) {
            o.tokenizer_path = option_value(argc, argv, &i, flag);
        } else if (strcmp(flag, "-t") == 0) {
            o.temperature = parse_float(flag, option_value(argc, argv, &i, flag));
            if (!o.sampling_flag) o.sampling_flag = "-t";
            if (o.temperature < 0.0f) die("-t (temperature) must be >= 0, got %g", o.temperature);
        } else if (strcmp(flag, "-p") == 0) {
            const char *value = option_value(argc, argv, &i, flag);
            o.topp = parse_float(flag, value);
            if (!o.sampling_flag) o.sampling_flag = "-p";
            /* the text as given: %g rounds 1.0000001, just past 1, to "1" */
            if (o.topp < 0.0f || o.topp > 1.0f) die("-p (top-p) must be in [0, 1], got %s", value);
        } else if (strcmp(flag, "-s") == 0) {
            long long seed = parse_int(flag, option_value(argc, argv, &i, flag));
            if (seed < 0) die("-s (seed) must be >= 0, got %lld", seed);
            o.seed = (unsigned long long)seed;
            if (!o.sampling_flag) o.sampling_flag = "-s";
        } else if (strcmp(flag, "-n") == 0) {
            long long steps = parse_int(flag, option_value(argc, argv, &i, flag));
            if (steps <= 0 || steps > INT_MAX)
                die("-n (steps) must be in 1..%d, got %lld", INT_MAX, steps);
            o.steps = (int)steps;
            o.steps_given = 1;
            if (!o.sampling_flag) o.sampling_flag = "-n";
        } else if (strcmp(flag, "--norm") == 0) {
            const char *name = option_value(argc, argv, &i, flag);
            o.norm = norm_by_name(name);
            if (!o.norm) die("unknown --norm '%s' (expected %s)", name, norm_names());
        } else if (strcmp(flag, "--logits") == 0) {
            o.logits_path = option_value(argc, argv, &i, flag);
        } else if (strcmp(a, "--profile") == 0) {
            o.profile = 1;
        } else if (strcmp(flag, "--ppl") == 0) {
            o.ppl_path = option_value(argc, argv, &i, flag);
        } else if (strcmp(flag, "--compare") == 0) {
            o.compare = 1;
            if (a[name_len] != '=' && i + 1 < argc && is_norm_pair(argv[i + 1]))
                die("--compare takes its norms as --compare=%s, with '='", argv[i + 1]);
            parse_compare_norms(a[name_len] == '=' ? a + name_len + 1 : NULL, o.compare_with);
        } else if (strcmp(flag, "--prefill") == 0) {
            const char *mode = option_value(argc, argv, &i, flag);
            if (strcmp(mode, "batch") != 0 && strcmp(mode, "serial") != 0)
                die("unknown --prefill '%s' (expected batch or serial)", mode);
            o.serial_prompt = strcmp(mode, "serial") == 0;
            o.prefill_given = 1;
        } else if (strcmp(flag, "-b") == 0 || strcmp(flag, "--batch") == 0) {
            long long batch = parse_int(flag, option_value(argc, argv, &i, flag));
            /* the upper bound, the model's seq_len, is checked once it is loaded */
            if (batch < 1 || batch > INT_MAX) die("--batch must be in 1..seq_len, got %lld", batch);
            o.batch = (int)batch;
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
    int tokenize = o.tokenize_text || o.tokenize_file;
    int generating = !o.compare && !o.ppl_path && !tokenize;
    int has_prompt = o.prompt || o.prompt_file;
    if (o.tokenize_text && o.tokenize_file) die("give --tokenize or --tokenize-file, not both");
    if (tokenize && has_prompt) die("--tokenize and --tokenize-file take no prompt");
    if (o.json && !o.tokenize_text && !o.compare) die("--json goes with --tokenize or --compare");
    if (!o.model_path) die("no model given (usage: run MODEL [PROMPT] [options]; see run --help)");
    if (o.compare + !!o.ppl_path + tokenize > 1)
        die("--compare, --ppl and --tokenize are separate modes; give one");
    if (tokenize && o.profile) die("--profile times forward passes, which --tokenize runs none of");
    if (o.compare && o.norm)
        die("--compare runs its own two norms; name them with --compare=A,B instead of --norm");
    if (o.compare && o.profile) die("--compare times both norms itself; drop --profile");
    if (o.ppl_path && has_prompt) die("--ppl reads its text from FILE; drop the prompt");
    if (o.logits_path && !generating)
        die("--logits goes with generation, not with --compare, --ppl or --tokenize");
    if (o.batch && o.serial_prompt)
        die("--batch sets the size of --prefill=batch's batches; it conflicts with "
            "--prefill=serial");
    if (o.batch && !generating)
        die("--batch goes with generation's prefill, not with --compare, --ppl or --tokenize");
    if (o.prefill_given && (o.compare || o.ppl_path || tokenize))
        die("--prefill goes with generation, not with --compare, --ppl or --tokenize, which run "
            "one position at a time or none");
    if (o.sampling_flag && (o.ppl_path || tokenize))
        die("%s goes with generation and --compare, not with --ppl or --tokenize, which sample "
            "nothing",
            o.sampling_flag);
    if (o.norm && tokenize) die("--norm changes the forward pass, which --tokenize runs none of");
    check_chat_options(&o, tokenize);
    return o;
}

/* ----------------------------------------------------------------------------
 * Set-up: the thread count, then the input files found and checked before the weights load */

/* Dies when OMP_NUM_THREADS asks for more threads than --threads allows: libgomp starts them all
 * (100000 overflowed its stack in the first parallel region). Its first level is the one read;
 * a value libgomp cannot parse (0, "abc") it reports itself and replaces with the default. */
static void require_env_threads(void) {
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && omp_get_max_threads() > 1024)
        die("OMP_NUM_THREADS=%s is more than 1024 threads (give --threads=N, 1..1024)", env);
}

/* Dies with err, the loader's message about `path` given as the model (as_model 1) or as the
 * tokenizer (0); but when the file is a regular file that loads as the other kind, says that
 * instead: the two were given the wrong way round. */
static void die_loading(const char *path, int as_model, const char *err) {
    struct stat st;
    char other_err[1024];
    Tokenizer t;
    Config c;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        if (as_model && tokenizer_load(&t, path, other_err, sizeof(other_err)) == 0)
            die("%s looks like a tokenizer file, not a model (the model comes first; give the "
                "tokenizer with -z)",
                path);
        if (!as_model && model_read_config(&c, path, other_err, sizeof(other_err)) == 0)
            die("%s looks like a model file, not a tokenizer (-z takes a tokenizer file such as "
                "tok512.bin)",
                path);
    }
    die("%s", err);
}

/* Finds the tokenizer beside the model: tok<vocab_size>.bin, then tokenizer.bin. */
static void find_tokenizer(const char *model_path, int vocab_size, char *out, size_t outlen) {
    const char *slash = strrchr(model_path, '/');
    int dir_len = slash ? (int)(slash - model_path + 1) : 0;
    if (dir_len > 1000) die("the model's folder name is too long to look beside it; use -z");
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

/* The prompt the options give (the caller frees): -i's or PROMPT's text; the file of -f, or
 * stdin for "-", with one final newline dropped, as llama.cpp's -f does (a file's last line ends
 * in one); "" when there is none. Dies as read_text does. */
static char *read_prompt(const Options *o) {
    char *text = !o->prompt_file                    ? strdup(o->prompt ? o->prompt : "")
                 : strcmp(o->prompt_file, "-") == 0 ? read_stdin_text()
                                                    : read_text(o->prompt_file);
    if (!text) die("out of memory for the prompt");
    size_t len = strlen(text);
    if (o->prompt_file && len > 0 && text[len - 1] == '\n') text[len - 1] = '\0';
    return text;
}

/* Dies when the --logits file `logits_path` is the file at `path` (same device and inode), the
 * model or the tokenizer: opening it for writing would empty a file run reads (the model stays
 * mapped, and reading a truncated map faults). */
static void refuse_logits_over(const char *logits_path, const char *path, const char *what) {
    struct stat a, b;
    if (stat(logits_path, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        die("--logits file %s is the %s; writing it would destroy it", logits_path, what);
}

/* The prompt's ids, BOS first (*n_prompt of them; the caller frees). Dies on a prompt longer
 * than the model's seq_len or than -n (steps). */
static int *encode_prompt(const Tokenizer *t, const char *prompt, const Config *c, int steps,
                          int *n_prompt) {
    int *ids = malloc((strlen(prompt) + 3) * sizeof(int));
    if (!ids) die("out of memory for the prompt");
    int n = tokenizer_encode(t, prompt, 1, 0, ids);
    if (n > c->seq_len)
        die("the prompt is %d tokens, longer than the model's seq_len %d", n, c->seq_len);
    if (n > steps)
        die("the prompt is %d tokens, more than -n %d (which counts the prompt tokens)", n, steps);
    *n_prompt = n;
    return ids;
}

/* Dies unless the tokenizer (read from path) has the model's vocab_size pieces. */
static void require_vocab(const Tokenizer *t, const char *path, const Config *c) {
    if (t->vocab_size != c->vocab_size)
        die("%s has %d pieces but the model's vocab_size is %d", path, t->vocab_size,
            c->vocab_size);
}

/* ----------------------------------------------------------------------------
 * --tokenize and --tokenize-file */

/* One id per line with its piece, as llama.cpp's tokenize tool prints them; control bytes in a
 * piece are escaped so that each id keeps to one line. */
static void print_ids(const Tokenizer *t, const int *ids, int n) {
    for (int i = 0; i < n; i++) {
        printf("%6d -> '", ids[i]);
        write_escaped(stdout, shown_piece(t, ids[i]), 0);
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

/* --tokenize TEXT prints the ids of TEXT; --tokenize-file FILE the token count and speed. Text
 * that is not valid UTF-8 is refused, as a prompt is, rather than encoded with U+FFFD for its
 * bad bytes as tokenizer_encode (and SentencePiece) would. */
static void tokenize_command(const Tokenizer *t, const Options *o) {
    char *text = o->tokenize_file ? read_text(o->tokenize_file) : NULL;
    const char *input = text ? text : o->tokenize_text;
    require_utf8("--tokenize text", input, text);
    size_t size = strlen(input);
    int *ids = malloc((size + 3) * sizeof *ids); /* well-formed UTF-8: one id per byte at most */
    if (!ids) die("out of memory for %zu bytes of text", size);
    double start = now_seconds();
    int n = tokenizer_encode(t, input, 1, 0, ids);
    double seconds = now_seconds() - start;
    if (o->tokenize_file) {
        write_escaped(stdout, o->tokenize_file, 0);
        printf(": %d token%s (BOS included) from %zu byte%s in %.3f s, %.1f MB/s\n", n, plural(n),
               size, plural((long)size), seconds, seconds > 0 ? size / seconds / 1e6 : 0.0);
    } else if (o->json)
        print_ids_json(t, ids, n);
    else
        print_ids(t, ids, n);
    free(ids);
    free(text);
}

/* ----------------------------------------------------------------------------
 * --ppl: perplexity of a text */

/* The ids of the --ppl file's text, BOS first (*n_tokens of them, at least 2; the caller frees).
 * Dies on a file that cannot be read or scored. */
static int *encode_ppl_text(const Tokenizer *t, const char *path, int *n_tokens) {
    char *text = read_text(path);
    int *tokens = malloc((strlen(text) + 3) * sizeof(int));
    if (!tokens) die("out of memory for the text's tokens");
    int n = tokenizer_encode(t, text, 1, 0, tokens);
    free(text);
    if (n < 2) die("%s: the text is shorter than 2 tokens (BOS and one to predict)", path);
    *n_tokens = n;
    return tokens;
}

/* Scores the text's tokens (BOS first) under m and prints one line on stdout: tokens, chunks,
 * mean NLL and perplexity; the speed (and with --profile the time per operation class) goes to
 * stderr. */
static void run_perplexity(Model *m, const int *tokens, int n_tokens, const Options *o) {
    Profile profile = {0};
    m->profile = o->profile ? &profile : NULL;
    int n_predicted, n_chunks;
    double start = now_seconds();
    double nll = text_nll(m, tokens, n_tokens, &n_predicted, &n_chunks);
    double elapsed = now_seconds() - start;
    double mean = nll / n_predicted;
    if (!isfinite(mean)) /* a NaN or infinite logit, as generation refuses them */
        die("the model computed a non-finite log-likelihood of %s (corrupt weights?)", o->ppl_path);
    write_escaped(stdout, o->ppl_path, 0);
    printf(": %d token%s predicted in %d chunk%s of up to %d, norm %s: mean NLL %.4f nats/token, "
           "perplexity %.4f\n",
           n_predicted, plural(n_predicted), n_chunks, plural(n_chunks), m->config.seq_len,
           norm_name(m->norm), mean, exp(mean));
    finish_stdout(); /* before the speed line, so that an error is the only line */
    fprintf(stderr, "scored %d token%s, %.1f tokens/s\n", n_predicted, plural(n_predicted),
            elapsed > 0 ? n_predicted / elapsed : 0.0);
    if (o->profile) print_profile(stderr, &profile, elapsed);
    m->profile = NULL; /* profile ends with this function */
}

/* ----------------------------------------------------------------------------
 * --compare: one prompt under two norms */

/* Writes a printed piece for the table, escaped by write_escaped. Returns the characters
 * written, which the table pads to. */
static int write_piece(FILE *f, const char *piece) {
    return tokenizer_piece_printed(piece) ? write_escaped(f, piece, 1) : 0;
}

static void write_text(FILE *f, const Tokenizer *t, const int *tokens, int n) {
    for (int i = 1; i < n; i++) write_piece(f, tokenizer_decode(t, tokens[i - 1], tokens[i]));
}

/* The text generation printed for tokens[0..n), one string (malloc'd), so that a character
 * spread over byte tokens is whole when the string is checked for UTF-8. */
static char *printed_text(const Tokenizer *t, const int *tokens, int n) {
    size_t len = 0;
    for (int i = 1; i < n; i++) {
        const char *piece = tokenizer_decode(t, tokens[i - 1], tokens[i]);
        if (tokenizer_piece_printed(piece)) len += strlen(piece);
    }
    char *text = malloc(len + 1), *end = text;
    if (!text) die("out of memory for the --compare text");
    for (int i = 1; i < n; i++) {
        const char *piece = tokenizer_decode(t, tokens[i - 1], tokens[i]);
        if (tokenizer_piece_printed(piece)) end = stpcpy(end, piece);
    }
    *end = '\0';
    return text;
}

/* Timed rounds per norm, of generation and of teacher-forced passes; medians over them resist the
 * shared machine's hiccups. */
enum { TIMING_PASSES = 5 };

/* What one norm did in --compare. */
typedef struct {
    NormFn norm;
    int *tokens; /* generated: prompt and continuation */
    int n_tokens;
    double tokens_per_s;           /* generation, forward passes (prompt included) per second */
    SiteStats *sites;              /* (n_sites) inputs of each norm call site, teacher-forced */
    Profile passes[TIMING_PASSES]; /* teacher-forced, one profile per pass */
} NormRun;

/* Feeds tokens[0..n) from position 0; logits (n, vocab_size) receives each position's logits
 * when not NULL. */
static void teacher_force(Model *m, const int *tokens, int n, float *logits) {
    int vocab_size = m->config.vocab_size;
    for (int pos = 0; pos < n; pos++) {
        const float *l = model_forward(m, tokens[pos], pos);
        if (logits) memcpy(logits + (size_t)pos * vocab_size, l, vocab_size * sizeof(float));
    }
}

/* The name of norm call site `site`, numbered in model_forward's order (see norm_observe_start):
 * "layer L attention", "layer L ffn", ..., "final". */
static void site_name(char *out, size_t len, int site, int n_layers) {
    if (site == 2 * n_layers)
        snprintf(out, len, "final");
    else
        snprintf(out, len, "layer %d %s", site / 2, site % 2 ? "ffn" : "attention");
}

/* Median over the timing passes of one class's seconds, the clock's cost per lap taken out. */
static double op_seconds(const NormRun *r, OpClass op, double lap_cost) {
    double t[TIMING_PASSES];
    for (int i = 0; i < TIMING_PASSES; i++) t[i] = profile_op_seconds(&r->passes[i], op, lap_cost);
    return median(t, TIMING_PASSES);
}

/* The norms' share of the forward time (sum of the classes' medians). */
static double norm_share(const NormRun *r, double lap_cost) {
    double total = 0.0;
    for (int op = 0; op < OP_SAMPLING; op++) total += op_seconds(r, op, lap_cost);
    return total > 0.0 ? op_seconds(r, OP_NORM, lap_cost) / total : 0.0;
}

/* What --compare measured: norm A's and norm B's runs, and A's text teacher-forced under both. */
typedef struct {
    NormRun runs[2];
    unsigned long long seed; /* the sampler's at the start of each generation */
    int n_prompt;
    int first_difference; /* the first position where the two texts differ */
    int same;             /* 1 if the two texts are the same, tokens and length */
    int n;                /* positions teacher-forced along A's text, runs[0].tokens */
    LogitsDiff *diffs;    /* (n) B's next-token distribution against A's, per position */
    int n_layers;         /* the model's, for the names of the sites */
    int n_sites;          /* norm call sites, 2 * n_layers + 1 (see norm_observe_start) */
    double lap_cost;      /* the clock's own cost per profile lap, seconds */
} Comparison;

/* Generates from the prompt under each norm, into r->tokens and r->tokens_per_s. The norms take
 * turns, TIMING_PASSES rounds, so that neither gets the cold caches; each round makes the same
 * texts, as both norms draw the same random numbers (the sampler restarts from `seed`). */
static void generate_under_both(Model *m, Sampler *sampler, const GenerateRequest *request,
                                unsigned long long seed, NormRun runs[2]) {
    double speed[2][TIMING_PASSES];
    for (int i = 0; i < TIMING_PASSES; i++) {
        for (int k = 0; k < 2; k++) {
            NormRun *r = &runs[k];
            m->norm = r->norm;
            sampler->rng_state = seed;
            double start = now_seconds();
            GenerateResult result = {.tokens = r->tokens};
            generate(m, sampler, request, &result);
            double elapsed = now_seconds() - start;
            r->n_tokens = result.n_tokens;
            speed[k][i] = elapsed > 0 ? result.n_forward / elapsed : 0.0;
        }
    }
    for (int k = 0; k < 2; k++) runs[k].tokens_per_s = median(speed[k], TIMING_PASSES);
}

/* Teacher-forces tokens[0..n) under A's norm, then B's, comparing B's logits with A's position by
 * position into diffs (n); the norm call sites are observed in both passes, into each run's
 * sites. */
static void teacher_force_both(Model *m, const int *tokens, int n, NormRun runs[2], int n_sites,
                               LogitsDiff *diffs) {
    int vocab_size = m->config.vocab_size;
    float *logits_a = malloc((size_t)n * vocab_size * sizeof(float));
    if (!logits_a) die("out of memory for --compare");
    norm_observe_start(m, runs[0].norm, runs[0].sites, n_sites);
    teacher_force(m, tokens, n, logits_a);
    norm_observe_stop(m);
    norm_observe_start(m, runs[1].norm, runs[1].sites, n_sites);
    for (int pos = 0; pos < n; pos++)
        diffs[pos] = logits_diff(logits_a + (size_t)pos * vocab_size,
                                 model_forward(m, tokens[pos], pos), vocab_size);
    norm_observe_stop(m);
    free(logits_a);
}

/* Runs the prompt under the two norms of o->compare_with into cmp: both texts and their speed,
 * A's text teacher-forced under both (next-token distributions, norm inputs), and
 * TIMING_PASSES profiled teacher-forced passes per norm, without the observer. */
static void compare_norms(Comparison *cmp, Model *m, const Tokenizer *t, Sampler *sampler,
                          const int *prompt, int n_prompt, const Options *o) {
    const Config *c = &m->config;
    memset(cmp, 0, sizeof(*cmp));
    cmp->seed = sampler->rng_state;
    cmp->n_prompt = n_prompt;
    cmp->n_layers = c->n_layers;
    cmp->n_sites = 2 * c->n_layers + 1;
    for (int k = 0; k < 2; k++) {
        NormRun *r = &cmp->runs[k];
        r->norm = o->compare_with[k];
        r->tokens = malloc((o->steps + 1) * sizeof(int));
        r->sites = calloc(cmp->n_sites, sizeof(SiteStats));
        if (!r->tokens || !r->sites) die("out of memory for --compare");
    }
    NormRun *a = &cmp->runs[0], *b = &cmp->runs[1];
    GenerateRequest request = {.prompt = prompt, .n_prompt = n_prompt, .steps = o->steps, .t = t};
    generate_under_both(m, sampler, &request, cmp->seed, cmp->runs);
    int split = 0;
    while (split < a->n_tokens && split < b->n_tokens && a->tokens[split] == b->tokens[split])
        split++;
    cmp->first_difference = split;
    cmp->same = split == a->n_tokens && split == b->n_tokens;

    /* A's text holds up to steps + 1 tokens, the last never fed; the kv cache holds seq_len */
    cmp->n = a->n_tokens < c->seq_len ? a->n_tokens : c->seq_len;
    cmp->diffs = malloc(cmp->n * sizeof(LogitsDiff));
    if (!cmp->diffs) die("out of memory for --compare");
    teacher_force_both(m, a->tokens, cmp->n, cmp->runs, cmp->n_sites, cmp->diffs);

    /* the timing passes, without the observer's cost */
    for (int k = 0; k < 2; k++) {
        m->norm = cmp->runs[k].norm;
        for (int i = 0; i < TIMING_PASSES; i++) {
            m->profile = &cmp->runs[k].passes[i];
            teacher_force(m, a->tokens, cmp->n, NULL);
        }
        m->profile = NULL;
    }
    cmp->lap_cost = profile_lap_cost();
}

static void free_comparison(Comparison *cmp) {
    for (int k = 0; k < 2; k++) {
        free(cmp->runs[k].tokens);
        free(cmp->runs[k].sites);
    }
    free(cmp->diffs);
}

/* Sums and maxima of the per-position differences, for the summary line. */
typedef struct {
    double kl_sum, kl_max, diff_sum, diff_max; /* diff: max_abs_diff, the largest |dlogit| */
    int agree;                                 /* positions where the top-1 tokens agree */
    int kl_max_pos;
} DiffSummary;

static DiffSummary summarize_diffs(const LogitsDiff *diffs, int n) {
    DiffSummary s = {0};
    for (int pos = 0; pos < n; pos++) {
        s.kl_sum += diffs[pos].kl;
        if (diffs[pos].kl > s.kl_max) s.kl_max = diffs[pos].kl, s.kl_max_pos = pos;
        s.diff_sum += diffs[pos].max_abs_diff;
        if (diffs[pos].max_abs_diff > s.diff_max) s.diff_max = diffs[pos].max_abs_diff;
        s.agree += diffs[pos].top1_agree;
    }
    return s;
}

/* The comparison as one JSON object on stdout, with the same numbers as the text form. */
static void print_comparison_json(const Comparison *cmp, const Tokenizer *t, const Options *o) {
    const NormRun *runs = cmp->runs;
    const int *seq = runs[0].tokens;
    int n = cmp->n;
    DiffSummary s = summarize_diffs(cmp->diffs, n);
    printf("{\n  \"model\": ");
    print_json_string(o->model_path);
    printf(",\n  \"norms\": [\"%s\", \"%s\"],\n", norm_name(runs[0].norm), norm_name(runs[1].norm));
    printf("  \"temperature\": %g, \"topp\": %g, \"seed\": %llu, \"steps\": %d,\n", o->temperature,
           o->topp, cmp->seed, o->steps);
    printf("  \"n_prompt\": %d,\n  \"texts\": [", cmp->n_prompt);
    for (int k = 0; k < 2; k++) {
        char *text = printed_text(t, runs[k].tokens, runs[k].n_tokens);
        printf("%s", k ? ", " : "");
        print_json_string(text);
        free(text);
    }
    printf("],\n  \"first_difference\": %d,\n", cmp->same ? -1 : cmp->first_difference);
    printf("  \"positions\": [\n");
    for (int pos = 0; pos < n; pos++)
        printf("    {\"pos\": %d, \"token\": %d, \"kl\": %.6g, \"top1_agree\": %s, "
               "\"max_abs_dlogit\": %.6g}%s\n",
               pos, seq[pos], cmp->diffs[pos].kl, cmp->diffs[pos].top1_agree ? "true" : "false",
               cmp->diffs[pos].max_abs_diff, pos + 1 < n ? "," : "");
    printf("  ],\n  \"summary\": {\"positions\": %d, \"mean_kl\": %.6g, \"max_kl\": %.6g, "
           "\"max_kl_pos\": %d, \"top1_agreement\": %.6g, \"mean_max_abs_dlogit\": %.6g, "
           "\"max_abs_dlogit\": %.6g},\n",
           n, s.kl_sum / n, s.kl_max, s.kl_max_pos, (double)s.agree / n, s.diff_sum / n,
           s.diff_max);
    printf("  \"sites\": [\n");
    for (int site = 0; site < cmp->n_sites; site++) {
        char name[32];
        site_name(name, sizeof(name), site, cmp->n_layers);
        printf("    {\"site\": \"%s\"", name);
        for (int k = 0; k < 2; k++) {
            const SiteStats *st = &runs[k].sites[site];
            printf(", \"%s\": {\"mean\": %.6g, \"rms\": %.6g, \"mean_over_rms\": %.6g}",
                   k ? "b" : "a", st->mean / st->count, st->rms / st->count,
                   st->mean_over_rms / st->count);
        }
        printf("}%s\n", site + 1 < cmp->n_sites ? "," : "");
    }
    printf("  ],\n  \"speed\": [\n");
    for (int k = 0; k < 2; k++) {
        printf("    {\"norm\": \"%s\", \"tokens_per_s\": %.6g, \"norm_share\": %.6g, "
               "\"op_seconds\": {",
               norm_name(runs[k].norm), runs[k].tokens_per_s, norm_share(&runs[k], cmp->lap_cost));
        for (int op = 0; op < OP_SAMPLING; op++)
            printf("%s\"%s\": %.6g", op ? ", " : "", op_name(op),
                   op_seconds(&runs[k], op, cmp->lap_cost));
        printf("}}%s\n", k ? "" : ",");
    }
    printf("  ],\n  \"lap_cost_s\": %.6g\n}\n", cmp->lap_cost);
}

/* The comparison as tables on stdout: both texts and where they part, the next-token
 * distributions position by position, the norm inputs per call site, and the speed. */
static void print_comparison_text(const Comparison *cmp, const Tokenizer *t, const Options *o) {
    const NormRun *runs = cmp->runs;
    const int *seq = runs[0].tokens;
    int n = cmp->n, split = cmp->first_difference;
    DiffSummary s = summarize_diffs(cmp->diffs, n);
    printf("compare %s (A) and %s (B): -t %g -p %g -s %llu -n %d\n\n", norm_name(runs[0].norm),
           norm_name(runs[1].norm), o->temperature, o->topp, cmp->seed, o->steps);
    for (int k = 0; k < 2; k++) {
        printf("%c %-10s ", "AB"[k], norm_name(runs[k].norm));
        write_text(stdout, t, runs[k].tokens, runs[k].n_tokens);
        printf("\n");
    }
    if (cmp->same) {
        printf("\nthe two texts are the same (%d token%s)\n", n, plural(n));
    } else {
        printf("\nfirst difference at position %d (continuation token %d): A '", split,
               split - cmp->n_prompt + 1);
        if (split < runs[0].n_tokens)
            write_piece(stdout, tokenizer_decode(t, seq[split - 1], seq[split]));
        printf("', B '");
        if (split < runs[1].n_tokens)
            write_piece(stdout, tokenizer_decode(t, seq[split - 1], runs[1].tokens[split]));
        printf("'%s\n", split < runs[0].n_tokens && split < runs[1].n_tokens ? "" : " (end)");
    }

    printf("\nteacher-forced along A's text (%d position%s): next-token distributions\n", n,
           plural(n));
    printf("%5s  %-14s %12s %5s %12s\n", "pos", "input token", "KL(A||B)", "top1", "max|dlogit|");
    for (int pos = 0; pos < n; pos++) {
        printf("%5d  '", pos);
        int width = write_piece(stdout, shown_piece(t, seq[pos]));
        printf("'%*s %12.4g %5s %12.4g\n", width < 12 ? 12 - width : 0, "", cmp->diffs[pos].kl,
               cmp->diffs[pos].top1_agree ? "yes" : "no", cmp->diffs[pos].max_abs_diff);
    }
    printf("summary: mean KL %.4g nats, max KL %.4g at position %d, top-1 agreement %d/%d "
           "(%.1f%%), max|dlogit| mean %.4g max %.4g\n",
           s.kl_sum / n, s.kl_max, s.kl_max_pos, s.agree, n, 100.0 * s.agree / n, s.diff_sum / n,
           s.diff_max);

    printf("\nnorm inputs per call site (averages over the %d position%s of each vector's "
           "statistic)\n",
           n, plural(n));
    printf("%-18s %10s %10s %12s %14s\n", "site", "mean", "RMS", "|mean|/RMS", "|mean|/RMS (B)");
    for (int site = 0; site < cmp->n_sites; site++) {
        char name[32];
        site_name(name, sizeof(name), site, cmp->n_layers);
        const SiteStats *a = &runs[0].sites[site], *b = &runs[1].sites[site];
        printf("%-18s %10.4f %10.4f %12.4f %14.4f\n", name, a->mean / a->count, a->rms / a->count,
               a->mean_over_rms / a->count, b->mean_over_rms / b->count);
    }

    printf("\nspeed, medians of %d runs (tokens/s: generation; norm share: teacher-forced, "
           "clock cost %.0f ns per lap taken out)\n",
           TIMING_PASSES, cmp->lap_cost * 1e9);
    printf("%-22s %12s %12s\n", "norm", "tokens/s", "norm share");
    for (int k = 0; k < 2; k++)
        printf("%-22s %12.1f %11.2f%%\n", norm_name(runs[k].norm), runs[k].tokens_per_s,
               100.0 * norm_share(&runs[k], cmp->lap_cost));
}

/* --compare: measures, then prints as text or, with --json, as JSON. */
static void run_compare(Model *m, const Tokenizer *t, Sampler *sampler, const int *prompt,
                        int n_prompt, const Options *o) {
    Comparison cmp;
    compare_norms(&cmp, m, t, sampler, prompt, n_prompt, o);
    if (o->json)
        print_comparison_json(&cmp, t, o);
    else
        print_comparison_text(&cmp, t, o);
    free_comparison(&cmp);
}

/* ----------------------------------------------------------------------------
 * main: every check, then one mode */

int main(int argc, char **argv) {
    /* a closed stdout would let the first file opened take its descriptor, and the text go there */
    if (fcntl(STDOUT_FILENO, F_GETFD) == -1) die("cannot write to stdout: %s", strerror(errno));
    signal(SIGPIPE, SIG_IGN); /* a closed pipe shows as EPIPE (see stdout_reader_gone) */
    Options o = parse_args(argc, argv);
    if (o.threads > 0)
        omp_set_num_threads(o.threads);
    else
        require_env_threads();
    signal(SIGXFSZ, SIG_IGN); /* past a file size limit, writes fail (EFBIG) with an error line */
    char *prompt = read_prompt(&o);
    require_utf8("the prompt", prompt, prompt);

    /* the header first: --tokenize and the checks of the tokenizer, the prompt and the --ppl text
     * need no weights, whose load takes seconds for a large model */
    char err[1024];
    Config header;
    if (model_read_config(&header, o.model_path, err, sizeof(err)) != 0)
        die_loading(o.model_path, 1, err);
    if (!o.steps) o.steps = o.chat ? header.seq_len : 256; /* no -n: 256, a chat the context */
    char found[1024];
    const char *tokenizer_path = o.tokenizer_path;
    if (!tokenizer_path) {
        find_tokenizer(o.model_path, header.vocab_size, found, sizeof(found));
        tokenizer_path = found;
    }
    Tokenizer tokenizer;
    if (tokenizer_load(&tokenizer, tokenizer_path, err, sizeof(err)) != 0)
        die_loading(tokenizer_path, 0, err);
    require_vocab(&tokenizer, tokenizer_path, &header);
    if (o.tokenize_text || o.tokenize_file) {
        tokenize_command(&tokenizer, &o);
        tokenizer_free(&tokenizer);
        free(prompt);
        finish_stdout();
        return 0;
    }
    int n_prompt = 0, n_text = 0;
    /* a chat's first turn is checked against the context as it is fed */
    int *prompt_tokens = o.ppl_path || o.chat
                             ? NULL
                             : encode_prompt(&tokenizer, prompt, &header, o.steps, &n_prompt);
    int *text_tokens = o.ppl_path ? encode_ppl_text(&tokenizer, o.ppl_path, &n_text) : NULL;
    if (o.logits_path) {
        refuse_logits_over(o.logits_path, o.model_path, "model file");
        refuse_logits_over(o.logits_path, tokenizer_path, "tokenizer file");
    }

    Model model;
    if (model_load(&model, o.model_path, err, sizeof(err)) != 0) die("%s", err);
    const Config *c = &model.config;
    if (c->vocab_size != header.vocab_size || c->seq_len != header.seq_len) /* the checks above */
        die("%s: the file changed while it was read", o.model_path);
    if (o.norm) model.norm = o.norm;
    if (o.batch && model_set_batch(&model, o.batch, err, sizeof(err)) != 0) die("--batch: %s", err);
    LogitsOut logits_out = {NULL, o.logits_path};
    if (o.logits_path && !(logits_out.file = fopen(o.logits_path, "wb")))
        die("cannot open --logits file %s: %s", o.logits_path, strerror(errno));
    if (o.logits_path) remove_on_error(o.logits_path, logits_out.file);

    /* notices after every check, so that an error is the only line */
    if (c->norm_bias && model.norm != layernorm) /* the RMSNorms have no shift */
        fprintf(stderr, "run: the model was trained with %s; %s ignores its norm biases\n",
                norm_name(c->trained_norm), norm_name(model.norm));
    if (o.ppl_path) {
        run_perplexity(&model, text_tokens, n_text, &o);
        free(text_tokens);
        free(prompt);
        tokenizer_free(&tokenizer);
        model_free(&model);
        return 0;
    }
    if (o.steps > c->seq_len) {
        if (o.steps_given)
            fprintf(stderr, "run: -n %d is more than seq_len %d; running %d position%s\n", o.steps,
                    c->seq_len, c->seq_len, plural(c->seq_len));
        o.steps = c->seq_len;
    }

    Sampler sampler = {
        .vocab_size = c->vocab_size,
        .temperature = o.temperature,
        .topp = o.topp,
        .rng_state = o.seed ? o.seed : clock_seed(),
        .candidates = malloc(c->vocab_size * sizeof(ProbIndex)),
        .stop_at_eos = !o.ignore_eos,
    };
    sampler.seed = sampler.rng_state;
    if (!sampler.candidates) die("out of memory for the sampler");

    if (o.compare)
        run_compare(&model, &tokenizer, &sampler, prompt_tokens, n_prompt, &o);
    else if (o.chat) {
        ChatRequest request = {
            .system_prompt = o.system_prompt, .first_turn = prompt, .steps = o.steps};
        run_chat(&model, &tokenizer, &sampler, &request);
    } else {
        GenerateRequest request = {.prompt = prompt_tokens,
                                   .n_prompt = n_prompt,
                                   .steps = o.steps,
                                   .batch_prompt = !o.serial_prompt,
                                   .t = &tokenizer,
                                   .print = 1,
                                   .logits_out = o.logits_path ? &logits_out : NULL};
        run_generation(&model, &sampler, &request, o.profile);
    }

    free(sampler.candidates);
    free(prompt_tokens);
    free(prompt);
    tokenizer_free(&tokenizer);
    model_free(&model);
    finish_stdout();
    return 0;
}
