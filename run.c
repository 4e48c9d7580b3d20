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
 * This file holds the command line (the options, their checks), the set-up (threads, the model's
 * header, the tokenizer, the prompt, all checked before the weights load) and main, which runs
 * one mode. It leaves each mode to its own file: generation to generate.c, -m chat to chat.c,
 * --ppl and --compare to compare.c, --tokenize to tokenize.c; the sampler to sampler.c, and the
 * error exit, stdout's checks, escaping and text reading to io.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chat.h"
#include "compare.h"
#include "generate.h"
#include "io.h"
#include "load.h"
#include "model.h"
#include "norm.h"
#include "reference.h"
#include "sampler.h"
#include "state.h"
#include "threads.h"
#include "tokenize.h"
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
    int threads;               /* 0: OMP_NUM_THREADS, else the free cores (threads.c) */
    NormFn norm;               /* NULL: the norm the model was trained with */
    const char *logits_path;   /* NULL: do not write logits */
    const char *tokenize_text; /* --tokenize: print the ids of this text instead of generating */
    const char *tokenize_file; /* --tokenize-file: count the tokens of this file, time it */
    int json;                  /* --json: --tokenize or --compare print JSON */
    int profile;               /* --profile: time per operation class */
    int reference;             /* --reference: the plain forward pass, reference.c */
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
            "  --threads=N       OpenMP threads, 1..1024 (default: OMP_NUM_THREADS, or\n"
            "                    the cores not kept busy by other processes at start)\n"
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
            "  --reference       run the plain forward pass (reference.c) instead of the\n"
            "                    fast one: slow, the oracle the fast one is tested against\n"
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

/* Parses the options whose value is kept as given (a text or a path) and the switches (no value)
 * at argv[*i] (flag: its name) into o, moving *i past a separate value; returns 0 if flag is none
 * of them. A switch is its name alone: "--json=1" is none of them. */
static int parse_plain_option(Options *o, const char *flag, int argc, char **argv, int *i) {
    const struct {
        const char *name;
        const char **text; /* an option with a value, or */
        int *on;           /* a switch */
    } table[] = {
        {"-y", &o->system_prompt, NULL},         {"-z", &o->tokenizer_path, NULL},
        {"--logits", &o->logits_path, NULL},     {"--ppl", &o->ppl_path, NULL},
        {"--tokenize", &o->tokenize_text, NULL}, {"--tokenize-file", &o->tokenize_file, NULL},
        {"--ignore-eos", NULL, &o->ignore_eos},  {"--profile", NULL, &o->profile},
        {"--reference", NULL, &o->reference},    {"--json", NULL, &o->json},
    };
    for (size_t k = 0; k < sizeof(table) / sizeof(table[0]); k++) {
        if (table[k].text && strcmp(flag, table[k].name) == 0) {
            *table[k].text = option_value(argc, argv, i, flag);
            return 1;
        }
        if (table[k].on && strcmp(argv[*i], table[k].name) == 0) {
            *table[k].on = 1;
            return 1;
        }
    }
    return 0;
}

/* Parses -t, -p, -s or -n (flag, its name) at argv[*i] into o, moving *i past a separate value;
 * returns 0 if flag is none of them. Dies on a bad value. */
static int parse_sampling_option(Options *o, const char *flag, int argc, char **argv, int *i) {
    if (strcmp(flag, "-t") == 0) {
        o->temperature = parse_float(flag, option_value(argc, argv, i, flag));
        if (!o->sampling_flag) o->sampling_flag = "-t";
        if (o->temperature < 0.0f) die("-t (temperature) must be >= 0, got %g", o->temperature);
    } else if (strcmp(flag, "-p") == 0) {
        const char *value = option_value(argc, argv, i, flag);
        o->topp = parse_float(flag, value);
        if (!o->sampling_flag) o->sampling_flag = "-p";
        /* the text as given: %g rounds 1.0000001, just past 1, to "1" */
        if (o->topp < 0.0f || o->topp > 1.0f) die("-p (top-p) must be in [0, 1], got %s", value);
    } else if (strcmp(flag, "-s") == 0) {
        long long seed = parse_int(flag, option_value(argc, argv, i, flag));
        if (seed < 0) die("-s (seed) must be >= 0, got %lld", seed);
        o->seed = (unsigned long long)seed;
        if (!o->sampling_flag) o->sampling_flag = "-s";
    } else if (strcmp(flag, "-n") == 0) {
        long long steps = parse_int(flag, option_value(argc, argv, i, flag));
        if (steps <= 0 || steps > INT_MAX)
            die("-n (steps) must be in 1..%d, got %lld", INT_MAX, steps);
        o->steps = (int)steps;
        if (!o->sampling_flag) o->sampling_flag = "-n";
    } else {
        return 0;
    }
    return 1;
}

/* Parses the option at argv[*i] (it starts with '-') into o, moving *i past a separate value.
 * Dies on an unknown option or a bad value; the checks of options against each other come after
 * all are read (check_options). */
static void parse_option(Options *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    size_t name_len = strcspn(a, "=");
    char flag[32];
    snprintf(flag, sizeof(flag), "%.*s", (int)name_len, a);
    if (parse_plain_option(o, flag, argc, argv, i) || parse_sampling_option(o, flag, argc, argv, i))
        return;
    if (strcmp(flag, "-i") == 0 || strcmp(flag, "-f") == 0) {
        set_prompt(o, flag, option_value(argc, argv, i, flag));
    } else if (strcmp(flag, "-m") == 0) {
        const char *mode = option_value(argc, argv, i, flag);
        if (strcmp(mode, "generate") != 0 && strcmp(mode, "chat") != 0)
            die("unknown -m '%s' (expected generate or chat)", mode);
        o->chat = strcmp(mode, "chat") == 0;
    } else if (strcmp(flag, "--norm") == 0) {
        const char *name = option_value(argc, argv, i, flag);
        o->norm = norm_by_name(name);
        if (!o->norm) die("unknown --norm '%s' (expected %s)", name, norm_names());
    } else if (strcmp(flag, "--compare") == 0) {
        o->compare = 1;
        if (a[name_len] != '=' && *i + 1 < argc && is_norm_pair(argv[*i + 1]))
            die("--compare takes its norms as --compare=%s, with '='", argv[*i + 1]);
        parse_compare_norms(a[name_len] == '=' ? a + name_len + 1 : NULL, o->compare_with);
    } else if (strcmp(flag, "--prefill") == 0) {
        const char *mode = option_value(argc, argv, i, flag);
        if (strcmp(mode, "batch") != 0 && strcmp(mode, "serial") != 0)
            die("unknown --prefill '%s' (expected batch or serial)", mode);
        o->serial_prompt = strcmp(mode, "serial") == 0;
        o->prefill_given = 1;
    } else if (strcmp(flag, "-b") == 0 || strcmp(flag, "--batch") == 0) {
        long long batch = parse_int(flag, option_value(argc, argv, i, flag));
        /* the upper bound, the model's seq_len, is checked once it is loaded */
        if (batch < 1 || batch > INT_MAX) die("--batch must be in 1..seq_len, got %lld", batch);
        o->batch = (int)batch;
    } else if (strcmp(flag, "--threads") == 0) {
        long long threads = parse_int(flag, option_value(argc, argv, i, flag));
        if (threads < 1 || threads > 1024) die("--threads must be in 1..1024, got %lld", threads);
        o->threads = (int)threads;
    } else {
        die("unknown option '%s' (see run --help)", a);
    }
}

/* Dies on options that do not go together, or on a mode without what it needs. */
static void check_options(const Options *o) {
    int tokenize = o->tokenize_text || o->tokenize_file;
    int generating = !o->compare && !o->ppl_path && !tokenize;
    int has_prompt = o->prompt || o->prompt_file;
    if (o->tokenize_text && o->tokenize_file) die("give --tokenize or --tokenize-file, not both");
    if (tokenize && has_prompt) die("--tokenize and --tokenize-file take no prompt");
    if (o->json && !o->tokenize_text && !o->compare)
        die("--json goes with --tokenize or --compare");
    if (!o->model_path) die("no model given (usage: run MODEL [PROMPT] [options]; see run --help)");
    if (o->compare + !!o->ppl_path + tokenize > 1)
        die("--compare, --ppl and --tokenize are separate modes; give one");
    if (tokenize && o->profile)
        die("--profile times forward passes, which --tokenize runs none of");
    if (o->compare && o->norm)
        die("--compare runs its own two norms; name them with --compare=A,B instead of --norm");
    if (o->compare && o->profile) die("--compare times both norms itself; drop --profile");
    if (o->reference && (o->profile || o->batch || tokenize))
        die("--reference runs the plain pass one position at a time, untimed: not with --profile, "
            "--batch or --tokenize");
    if (o->ppl_path && has_prompt) die("--ppl reads its text from FILE; drop the prompt");
    if (o->logits_path && !generating)
        die("--logits goes with generation, not with --compare, --ppl or --tokenize");
    if (o->batch && o->serial_prompt)
        die("--batch sets the size of --prefill=batch's batches; it conflicts with "
            "--prefill=serial");
    if (o->batch && !generating)
        die("--batch goes with generation's prefill, not with --compare, --ppl or --tokenize");
    if (o->prefill_given && (o->compare || o->ppl_path || tokenize))
        die("--prefill goes with generation, not with --compare, --ppl or --tokenize, which run "
            "one position at a time or none");
    if (o->sampling_flag && (o->ppl_path || tokenize))
        die("%s goes with generation and --compare, not with --ppl or --tokenize, which sample "
            "nothing",
            o->sampling_flag);
    if (o->norm && tokenize) die("--norm changes the forward pass, which --tokenize runs none of");
    check_chat_options(o, tokenize);
}

/* The options of argv, read in order: --help and --version print and exit where they stand, an
 * argument without a leading '-' is MODEL and then PROMPT; then the checks across options. */
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
        if (a[0] == '-' && a[1] != '\0')
            parse_option(&o, argc, argv, &i);
        else if (!o.model_path)
            o.model_path = a;
        else if (!o.prompt && !o.prompt_file)
            set_prompt(&o, "PROMPT", a);
        else
            die("unexpected argument '%s' (the prompt is given already; quote one with spaces)", a);
    }
    check_options(&o);
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

/* Whether OMP_NUM_THREADS starts with a thread count libgomp takes, a positive integer. Empty, 0
 * or not a number, libgomp warns and would run on every core: run's own default applies then. */
static int env_threads_given(void) {
    const char *env = getenv("OMP_NUM_THREADS");
    if (!env) return 0;
    char *end;
    long n = strtol(env, &end, 10);
    return end != env && n > 0;
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
 * main: every check, then one mode */

int main(int argc, char **argv) {
    /* a closed stdout would let the first file opened take its descriptor, and the text go there */
    if (fcntl(STDOUT_FILENO, F_GETFD) == -1) die("cannot write to stdout: %s", strerror(errno));
    signal(SIGPIPE, SIG_IGN); /* a closed pipe shows as EPIPE (see stdout_reader_gone) */
    Options o = parse_args(argc, argv);
    if (o.threads > 0)
        omp_set_num_threads(o.threads);
    else if (env_threads_given())
        require_env_threads();
    else /* before the first parallel region: this is still the process's one thread */
        omp_set_num_threads(threads_default(omp_get_num_procs(), threads_busy_elsewhere()));
    signal(SIGXFSZ, SIG_IGN); /* past a file size limit, writes fail (EFBIG) with an error line */
    char *prompt = read_prompt(&o);
    require_utf8("the prompt", prompt, prompt);

    /* the header first: --tokenize and the checks of the tokenizer, the prompt and the --ppl text
     * need no weights, whose load takes seconds for a large model */
    char err[1024];
    Config header;
    if (model_read_config(&header, o.model_path, err, sizeof(err)) != 0)
        die_loading(o.model_path, 1, err);
    int steps_given = o.steps != 0; /* -n given: clamping it to seq_len is worth a notice */
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
        run_tokenize(&tokenizer, o.tokenize_text, o.tokenize_file, o.json);
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
    if (o.reference) model.forward = reference_forward;
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
        run_perplexity(&model, text_tokens, n_text, o.ppl_path, o.profile);
        free(text_tokens);
        free(prompt);
        tokenizer_free(&tokenizer);
        model_free(&model);
        return 0;
    }
    if (o.steps > c->seq_len) {
        if (steps_given)
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

    if (o.compare) {
        CompareRequest request = {.prompt = prompt_tokens,
                                  .n_prompt = n_prompt,
                                  .steps = o.steps,
                                  .norms = {o.compare_with[0], o.compare_with[1]},
                                  .json = o.json,
                                  .model_path = o.model_path};
        run_compare(&model, &tokenizer, &sampler, &request);
    } else if (o.chat) {
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
