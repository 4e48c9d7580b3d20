/* options: run's command line as one table (see options.h). The table, options[], comes first:
 * one row an option, in --help's order. Then what reads a row: the kinds of values and their
 * parsers, --help's text, the parser of argv, and the checks across options, which each row
 * states as refusals ("not in these modes", "not with that option", each with its message).
 */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "compare.h"
#include "io.h"
#include "options.h"

#define NORMLLAMA_VERSION "0.1"

/* The modes an option can be refused in (plain generation is none of them). */
enum {
    CHAT = 1 << 0, /* -m chat */
    COMPARE = 1 << 1,
    PPL = 1 << 2,
    TOKENIZE = 1 << 3,
    TOKENIZE_FILE = 1 << 4,
    TOKENIZE_ANY = TOKENIZE | TOKENIZE_FILE,
    INFO = 1 << 5,  /* refused with every option but those whose rows' goes_with has INFO */
    TRACE = 1 << 6, /* likewise */
    NOT_GENERATION = COMPARE | PPL | TOKENIZE_ANY, /* -m chat generates */
};

/* The order of the checks across options: when a command line breaks several, the first is its
 * error. (The order of the checks this table replaced, kept so that every error stayed.) */
typedef enum {
    RULE_ONE_TOKENIZE,
    RULE_TOKENIZE_PROMPT,
    RULE_JSON,
    RULE_MODEL,
    RULE_ONE_MODE,
    RULE_PROFILE_TOKENIZE,
    RULE_NORM_COMPARE,
    RULE_PROFILE_COMPARE,
    RULE_REFERENCE,
    RULE_PPL_PROMPT,
    RULE_LOGITS,
    RULE_BATCH_SERIAL,
    RULE_BATCH,
    RULE_PREFILL,
    RULE_SAMPLING,
    RULE_NORM_TOKENIZE,
    RULE_SYSTEM_PROMPT,
    RULE_CHAT_TEMPLATE,
    RULE_IGNORE_EOS,
    RULE_CHAT_MODES,
    RULE_CHAT_STDIN,
    RULE_CHAT_LOGITS,
    RULE_CHAT_BATCH,
    RULE_CHAT_PREFILL,
    RULE_CHAT_PROFILE,
    RULE_N_PREDICT_STEPS,
    RULE_CHAT_N_PREDICT,
    RULE_CTX_TOKENIZE,
    RULE_REPEAT,
    RULE_SUMMARY,
    N_RULES
} Rule;

/* When a given option breaks a rule. */
typedef enum {
    IN_MODES,            /* it is given in one of the refusal's modes */
    NEEDS_MODE,          /* it is given in none of them: what it modifies is missing */
    NEEDS_MODE_OR_OTHER, /* it is given in none of them and without the option `other` */
    WITH,                /* it is given with the option `other` */
    MISSING,             /* it is not given */
} When;

typedef struct {
    Rule rule;
    When when;
    unsigned modes;      /* IN_MODES, NEEDS_MODE */
    int other;           /* WITH: an OptionId */
    const char *value;   /* only when the option's last value is this; NULL: any value */
    const char *message; /* die's; "%s" is the option's last name */
} Refusal;

/* The rows of options[], in --help's order. */
typedef enum {
    OPT_MODEL,
    OPT_PROMPT,
    OPT_TEXT,
    OPT_FILE,
    OPT_MODE,
    OPT_SYSTEM_PROMPT,
    OPT_CHAT_TEMPLATE,
    OPT_TOKENIZER,
    OPT_TEMPERATURE,
    OPT_TOPP,
    OPT_TOP_K,
    OPT_MIN_P,
    OPT_REPEAT_PENALTY,
    OPT_REPEAT_LAST_N,
    OPT_SEED,
    OPT_STEPS,
    OPT_N_PREDICT,
    OPT_CTX_SIZE,
    OPT_IGNORE_EOS,
    OPT_NORM,
    OPT_LOGITS,
    OPT_THREADS,
    OPT_PREFILL,
    OPT_BATCH,
    OPT_TOKENIZE,
    OPT_TOKENIZE_FILE,
    OPT_PROFILE,
    OPT_REFERENCE,
    OPT_PPL,
    OPT_COMPARE,
    OPT_INFO,
    OPT_TRACE,
    OPT_REPEAT,
    OPT_SUMMARY,
    OPT_JSON,
    OPT_HELP,
    OPT_VERSION,
    N_OPTIONS
} OptionId;

/* How an option's value is read (kinds[] below gives each its parser). */
typedef enum {
    ARG_SWITCH,    /* no value: sets an int to 1 */
    ARG_TEXT,      /* a text or a path, kept as given */
    ARG_FLOAT,     /* a float in a range */
    ARG_INT,       /* an int in a range */
    ARG_LONG,      /* a long long in a range */
    ARG_CHOICE,    /* one of two words: an int, the index of the word */
    ARG_NORM,      /* a norm's name (norm.h) */
    ARG_NORM_PAIR, /* --compare's optional A,B */
    ARG_PROMPT,    /* the prompt's text, or "-" for stdin */
    ARG_PROMPT_FILE,
    ARG_HELP,
    ARG_VERSION,
    /* a chat template's name (chat_template.h) */
    ARG_CHAT_TEMPLATE,
} Kind;

/* A number's range and its error, "<label> must be <text>, got <value>". The bounds are compared
 * in double: each is exact in one (an int, or LLONG_MAX for none), and so are the ints below
 * 2^53 that could fall on either side of one. */
typedef struct {
    double min, max;
    const char *label;
    const char *text; /* NULL: "in min..max" */
    int as_typed;     /* the value in the error as typed ("1.0000001"), not as read ("1") */
} Range;

#define MAX_NAMES    4
#define MAX_REFUSALS 3

typedef struct {
    /* MODEL and PROMPT, names without a '-', are the plain arguments; the last name is the one
     * errors give (an alias from llama.cpp comes before it); --help lists the short names first */
    const char *names[MAX_NAMES];
    Kind kind;
    const char *value;   /* the value as --help spells it after the names, separator included */
    size_t field;        /* offsetof(Options, the field it sets) */
    const char *heading; /* the line --help prints above the row */
    const char *help;    /* --help's lines, '\n' between them: printf formats of the norms' list */
    Range range;         /* ARG_FLOAT, ARG_INT, ARG_LONG */
    const char *choices[2];   /* ARG_CHOICE */
    const char *not_a_number; /* ARG_FLOAT: said after "needs a number" (what was meant) */
    unsigned goes_with;       /* INFO, TRACE: the modes of their own it goes with */
    Refusal refusals[MAX_REFUSALS];
} Option;

static const char ONE_MODE[] = "--compare, --ppl and --tokenize are separate modes; give one";
static const char NOT_CHAT[] = "%s goes with -m generate, not with -m chat";
static const char REFERENCE_ALONE[] = "--reference runs the plain pass one position at a time, "
                                      "untimed: not with --profile, --batch or --tokenize";

/* the refusal of -t, -p, -s and -n, the sampler's options */
#define SAMPLER_ONLY                                                                               \
    {                                                                                              \
        RULE_SAMPLING, IN_MODES, PPL | TOKENIZE_ANY,                                               \
            .message =                                                                             \
                "%s goes with generation and --compare, not with --ppl or --tokenize, which "      \
                "sample nothing"                                                                   \
    }

#define FIELD(name) offsetof(Options, name)

static const Option options[N_OPTIONS] = {
    [OPT_MODEL] = {.names = {"MODEL"},
                   .goes_with = INFO | TRACE,
                   .kind = ARG_TEXT,
                   .field = FIELD(model_path),
                   .help = "checkpoint: normllama's format (export.py writes it) or\n"
                           "llama2.c's legacy, version 1 or version 2 (int8) layout\n"
                           "(e.g. models/stories260K.bin)",
                   .refusals = {{RULE_MODEL, MISSING,
                                 .message = "no model given (usage: run MODEL [PROMPT] [options]; "
                                            "see run --help)"}}},
    [OPT_PROMPT] = {.names = {"PROMPT"},
                    .goes_with = TRACE,
                    .kind = ARG_PROMPT,
                    .help = "text to continue; may also be given with -i",
                    .refusals = {{RULE_TOKENIZE_PROMPT, IN_MODES, TOKENIZE_ANY,
                                  .message = "--tokenize and --tokenize-file take no prompt"},
                                 {RULE_PPL_PROMPT, IN_MODES, PPL,
                                  .message = "--ppl reads its text from FILE; drop the prompt"},
                                 {RULE_CHAT_STDIN, IN_MODES, CHAT, .value = "-",
                                  .message = "-m chat reads its turns from stdin; give the first "
                                             "one with -i TEXT or -f FILE"}}},
    [OPT_TEXT] = {.names = {"--prompt", "-i"},
                  .goes_with = TRACE,
                  .kind = ARG_PROMPT,
                  .value = " TEXT",
                  .heading = "options:",
                  .help = "the prompt; -i - reads it from stdin"},
    [OPT_FILE] = {.names = {"--file", "-f"},
                  .goes_with = TRACE,
                  .kind = ARG_PROMPT_FILE,
                  .value = " FILE",
                  .help = "the prompt from FILE (- : stdin), one final newline\n"
                          "dropped as llama.cpp's -f does; for prompts too long for\n"
                          "one argument"},
    [OPT_MODE] = {.names = {"-m"},
                  .kind = ARG_CHOICE,
                  .value = " MODE",
                  .field = FIELD(chat),
                  .help = "generate: continue the prompt (default); chat: a\n"
                          "conversation in the model's chat template, user turns\n"
                          "read from stdin line by line (see below)",
                  .choices = {"generate", "chat"},
                  .refusals = {{RULE_CHAT_MODES, IN_MODES, NOT_GENERATION, .value = "chat",
                                .message = "-m chat is a mode of its own, not one to combine with "
                                           "--compare, --ppl or --tokenize"}}},
    [OPT_SYSTEM_PROMPT] = {.names = {"--system-prompt", "-y"},
                           .kind = ARG_TEXT,
                           .value = " TEXT",
                           .field = FIELD(system_prompt),
                           .help = "with -m chat: the system prompt (default: asked for when\n"
                                   "stdin is a terminal, none otherwise)",
                           .refusals = {{RULE_SYSTEM_PROMPT, NEEDS_MODE, CHAT,
                                         .message = "-y (the system prompt) goes with -m chat"}}},
    [OPT_CHAT_TEMPLATE] = {.names = {"--chat-template"},
                           .kind = ARG_CHAT_TEMPLATE,
                           .value = " NAME",
                           .field = FIELD(chat_template),
                           .help = "with -m chat: the chat template, llama2, llama3,\n"
                                   "chatml or zephyr (default: the one the model names,\n"
                                   "else llama2)",
                           .refusals = {{RULE_CHAT_TEMPLATE, NEEDS_MODE, CHAT,
                                         .message = "--chat-template goes with -m chat"}}},
    [OPT_TOKENIZER] = {.names = {"-z"},
                       .goes_with = INFO | TRACE,
                       .kind = ARG_TEXT,
                       .value = " FILE",
                       .field = FIELD(tokenizer_path),
                       .help = "tokenizer file (default: tok<vocab_size>.bin beside the\n"
                               "model, else tokenizer.bin beside it)"},
    [OPT_TEMPERATURE] = {.names = {"--temp", "--temperature", "-t"},
                         .kind = ARG_FLOAT,
                         .value = " FLOAT",
                         .field = FIELD(temperature),
                         .help = "temperature, >= 0; 0 is greedy (default 1.0)",
                         .range = {0, HUGE_VAL, "-t (temperature)", ">= 0"},
                         .refusals = {SAMPLER_ONLY}},
    /* the value as typed: %g rounds 1.0000001, just past 1, to "1" */
    [OPT_TOPP] = {.names = {"--top-p", "-p"},
                  .kind = ARG_FLOAT,
                  .value = " FLOAT",
                  .field = FIELD(topp),
                  .help = "top-p (nucleus) mass in [0, 1]; 0 or 1 disables it\n"
                          "(default 0.9)",
                  .range = {0, 1, "-p (top-p)", "in [0, 1]", .as_typed = 1},
                  .not_a_number = "-p is top-p here, as in llama2.c; the prompt is --prompt "
                                  "TEXT (-i), -f FILE or the argument after MODEL",
                  .refusals = {SAMPLER_ONLY}},
    [OPT_TOP_K] = {.names = {"--top-k"},
                   .kind = ARG_INT,
                   .value = " INT",
                   .field = FIELD(top_k),
                   .help = "keep the INT most likely tokens; 0 disables it (default 0)",
                   .range = {0, INT_MAX, "--top-k", ">= 0"},
                   .refusals = {SAMPLER_ONLY}},
    [OPT_MIN_P] = {.names = {"--min-p"},
                   .kind = ARG_FLOAT,
                   .value = " FLOAT",
                   .field = FIELD(min_p),
                   .help = "keep the tokens at least FLOAT times as likely as the\n"
                           "most likely one, in [0, 1]; 0 disables it (default 0)",
                   .range = {0, 1, "--min-p", "in [0, 1]", .as_typed = 1},
                   .refusals = {SAMPLER_ONLY}},
    [OPT_REPEAT_PENALTY] = {.names = {"--repeat-penalty"},
                            .kind = ARG_FLOAT,
                            .value = " FLOAT",
                            .field = FIELD(repeat_penalty),
                            .help = "divide the logits (> 0) of the tokens of the window by\n"
                                    "FLOAT, multiply those < 0 (CTRL's penalty), > 0; 1\n"
                                    "disables it (default 1)",
                            .range = {FLT_MIN, HUGE_VAL, "--repeat-penalty", "> 0"},
                            .refusals = {SAMPLER_ONLY}},
    [OPT_REPEAT_LAST_N] = {.names = {"--repeat-last-n"},
                           .kind = ARG_INT,
                           .value = " INT",
                           .field = FIELD(repeat_last_n),
                           .help = "the penalty's window: the last INT tokens of the context,\n"
                                   "prompt included; -1 the whole context (default 64)",
                           .range = {-1, INT_MAX, "--repeat-last-n", ">= -1"},
                           .refusals = {SAMPLER_ONLY}},
    [OPT_SEED] = {.names = {"--seed", "-s"},
                  .kind = ARG_LONG,
                  .value = " INT",
                  .field = FIELD(seed),
                  .help = "random seed, >= 0; 0 takes one from the clock (default 0)",
                  .range = {0, LLONG_MAX, "-s (seed)", ">= 0"},
                  .refusals = {SAMPLER_ONLY}},
    [OPT_STEPS] = {.names = {"-n"},
                   .kind = ARG_INT,
                   .value = " INT",
                   .field = FIELD(steps),
                   .help = "positions to run, prompt tokens included, as in llama2.c;\n"
                           "clamped to the model's seq_len (default 256; with -m chat\n"
                           "seq_len, for all turns together)",
                   .range = {1, INT_MAX, "-n (steps)"},
                   .refusals = {SAMPLER_ONLY}},
    [OPT_N_PREDICT] = {.names = {"--predict", "--n-predict"},
                       .kind = ARG_INT,
                       .value = " INT",
                       .field = FIELD(n_predict),
                       .help = "tokens to generate after the prompt, as llama.cpp's -n;\n"
                               "-1 until the context is full",
                       .range = {-1, INT_MAX, "--n-predict", ">= -1"},
                       .refusals = {SAMPLER_ONLY,
                                    {RULE_N_PREDICT_STEPS, WITH, .other = OPT_STEPS,
                                     .message = "give -n (positions, the prompt's included) or "
                                                "%s (generated tokens), not both"},
                                    {RULE_CHAT_N_PREDICT, IN_MODES, CHAT, .message = NOT_CHAT}}},
    [OPT_CTX_SIZE] = {.names = {"-c", "--ctx-size"},
                      .goes_with = INFO | TRACE,
                      .kind = ARG_INT,
                      .value = " INT",
                      .field = FIELD(ctx_size),
                      .help = "positions the kv cache holds, at most the model's seq_len\n"
                              "(0, the default: seq_len); --ppl's chunks are as long",
                      .range = {0, INT_MAX, "--ctx-size", ">= 0"},
                      .refusals = {{RULE_CTX_TOKENIZE, IN_MODES, TOKENIZE_ANY,
                                    .message = "%s sizes the kv cache, which --tokenize uses "
                                               "none of"}}},
    [OPT_IGNORE_EOS] = {.names = {"--ignore-eos"},
                        .kind = ARG_SWITCH,
                        .field = FIELD(ignore_eos),
                        .help = "generation ends only at BOS, as in llama2.c; by default\n"
                                "EOS (id 2) ends it too, as in llama.cpp",
                        .refusals = {{RULE_IGNORE_EOS, IN_MODES, CHAT | PPL | TOKENIZE_ANY,
                                      .message = "--ignore-eos goes with generation and --compare, "
                                                 "not with -m chat (a reply ends at EOS), --ppl or "
                                                 "--tokenize"}}},
    [OPT_NORM] = {.names = {"--norm"},
                  .goes_with = TRACE,
                  .kind = ARG_NORM,
                  .value = "=NAME",
                  .field = FIELD(norm),
                  .help = "every norm in the model, one of\n"
                          "%s\n"
                          "(default: the norm the model was trained with; rmsnorm\n"
                          "for llama2.c files)",
                  .refusals = {{RULE_NORM_COMPARE, IN_MODES, COMPARE,
                                .message = "--compare runs its own two norms; name them with "
                                           "--compare=A,B instead of --norm"},
                               {RULE_NORM_TOKENIZE, IN_MODES, TOKENIZE_ANY,
                                .message = "--norm changes the forward pass, which --tokenize runs "
                                           "none of"}}},
    [OPT_LOGITS] = {.names = {"--logits"},
                    .kind = ARG_TEXT,
                    .value = " FILE",
                    .field = FIELD(logits_path),
                    .help = "write the logits of every position run (prompt positions\n"
                            "teacher-forced) to FILE: vocab_size float32 (native byte\n"
                            "order) per position, position after position; an\n"
                            "error removes the file",
                    .refusals = {{RULE_LOGITS, IN_MODES, NOT_GENERATION,
                                  .message = "--logits goes with generation, not with --compare, "
                                             "--ppl or --tokenize"},
                                 {RULE_CHAT_LOGITS, IN_MODES, CHAT, .message = NOT_CHAT}}},
    [OPT_THREADS] = {.names = {"--threads"},
                     .goes_with = INFO | TRACE,
                     .kind = ARG_INT,
                     .value = "=N",
                     .field = FIELD(threads),
                     .help = "OpenMP threads, 1..1024 (default: OMP_NUM_THREADS, or\n"
                             "the cores not kept busy by other processes at start)",
                     .range = {1, 1024, "--threads"}},
    [OPT_PREFILL] = {.names = {"--prefill"},
                     .kind = ARG_CHOICE,
                     .value = "=MODE",
                     .field = FIELD(serial_prompt),
                     .help = "batch: the prompt goes through the model in batches of\n"
                             "positions (default); serial: one position at a time",
                     .choices = {"batch", "serial"},
                     .refusals = {{RULE_BATCH_SERIAL, WITH, .other = OPT_BATCH, .value = "serial",
                                   .message = "--batch sets the size of --prefill=batch's "
                                              "batches; it conflicts with --prefill=serial"},
                                  {RULE_PREFILL, IN_MODES, NOT_GENERATION,
                                   .message = "--prefill goes with generation, not with "
                                              "--compare, --ppl or --tokenize, which run one "
                                              "position at a time or none"},
                                  {RULE_CHAT_PREFILL, IN_MODES, CHAT, .message = NOT_CHAT}}},
    /* the upper bound, the model's seq_len, is checked once it is loaded */
    [OPT_BATCH] = {.names = {"-b", "--batch-size", "--batch"},
                   .kind = ARG_INT,
                   .value = "=N",
                   .field = FIELD(batch),
                   .help = "positions per prefill batch, 1..seq_len (default: 64 to\n"
                           "256 by the model's size); the batch's activations grow\n"
                           "with N; not with --prefill=serial, --ppl, --compare or\n"
                           "--tokenize",
                   .range = {1, INT_MAX, "--batch", "in 1..seq_len"},
                   .refusals = {{RULE_BATCH, IN_MODES, NOT_GENERATION,
                                 .message = "--batch goes with generation's prefill, not with "
                                            "--compare, --ppl or --tokenize"},
                                {RULE_CHAT_BATCH, IN_MODES, CHAT, .message = NOT_CHAT}}},
    [OPT_TOKENIZE] = {.names = {"--tokenize"},
                      .kind = ARG_TEXT,
                      .value = " TEXT",
                      .field = FIELD(tokenize_text),
                      .help = "print the ids of TEXT (BOS first), one per line with its\n"
                              "piece",
                      .refusals = {{RULE_ONE_TOKENIZE, IN_MODES, TOKENIZE_FILE,
                                    .message = "give --tokenize or --tokenize-file, not both"},
                                   {RULE_ONE_MODE, IN_MODES, COMPARE | PPL, .message = ONE_MODE}}},
    [OPT_TOKENIZE_FILE] = {.names = {"--tokenize-file"},
                           .kind = ARG_TEXT,
                           .value = " FILE",
                           .field = FIELD(tokenize_file),
                           .help = "print the number of tokens of FILE and the encoding speed",
                           .refusals = {{RULE_ONE_MODE, IN_MODES, COMPARE | PPL,
                                         .message = ONE_MODE}}},
    [OPT_PROFILE] = {.names = {"--profile"},
                     .kind = ARG_SWITCH,
                     .field = FIELD(profile),
                     .help = "after generating, print the time per operation class",
                     .refusals = {{RULE_PROFILE_TOKENIZE, IN_MODES, TOKENIZE_ANY,
                                   .message = "--profile times forward passes, which --tokenize "
                                              "runs none of"},
                                  {RULE_PROFILE_COMPARE, IN_MODES, COMPARE,
                                   .message = "--compare times both norms itself; drop --profile"},
                                  {RULE_CHAT_PROFILE, IN_MODES, CHAT, .message = NOT_CHAT}}},
    [OPT_REFERENCE] =
        {.names = {"--reference"},
         .kind = ARG_SWITCH,
         .field = FIELD(reference),
         .help = "run the plain forward pass (reference.c) instead of the\n"
                 "fast one: slow, the oracle the fast one is tested against",
         .refusals = {{RULE_REFERENCE, IN_MODES, TOKENIZE_ANY, .message = REFERENCE_ALONE},
                      {RULE_REFERENCE, WITH, .other = OPT_PROFILE, .message = REFERENCE_ALONE},
                      {RULE_REFERENCE, WITH, .other = OPT_BATCH, .message = REFERENCE_ALONE}}},
    [OPT_PPL] = {.names = {"--ppl"},
                 .kind = ARG_TEXT,
                 .value = " FILE",
                 .field = FIELD(ppl_path),
                 .heading = "modes:",
                 .help = "mean negative log-likelihood and perplexity of the text in\n"
                         "FILE (no PROMPT; chunks of seq_len tokens, each from BOS),\n"
                         "the standard error over the chunks and a 95%% interval",
                 .refusals = {{RULE_ONE_MODE, IN_MODES, COMPARE | TOKENIZE_ANY,
                               .message = ONE_MODE}}},
    [OPT_COMPARE] = {.names = {"--compare"},
                     .kind = ARG_NORM_PAIR,
                     .value = "[=A,B]",
                     .field = FIELD(compare_with),
                     .help = "run PROMPT under norms A and B (default rmsnorm,layernorm):\n"
                             "both continuations, per-position KL(A || B) teacher-forced\n"
                             "on A's, statistics of every norm site's input, speed",
                     .refusals = {{RULE_ONE_MODE, IN_MODES, PPL | TOKENIZE_ANY,
                                   .message = ONE_MODE}}},
    [OPT_INFO] = {.names = {"--info"},
                  .kind = ARG_SWITCH,
                  .field = FIELD(info),
                  .help = "what the model file holds (format, shape, dtypes, norm,\n"
                          "RoPE, vocabulary, seq_len) and the memory the weights and\n"
                          "the kv cache take; with -z, -c, --json and --threads alone",
                  .goes_with = INFO},
    [OPT_TRACE] = {.names = {"--trace"},
                   .kind = ARG_INT,
                   .value = " POS",
                   .field = FIELD(trace_pos),
                   .help = "the prompt's token at position POS through the forward pass\n"
                           "(the plain one), step by step with shapes and numbers; with\n"
                           "-z, -c, --norm, --json and --threads alone",
                   .range = {0, INT_MAX, "--trace", ">= 0"},
                   .goes_with = TRACE},
    [OPT_REPEAT] = {.names = {"--repeat"},
                    .kind = ARG_INT,
                    .value = " N",
                    .field = FIELD(repeat),
                    .help = "with --compare: timed rounds per norm (default 5); with\n"
                            "--profile: runs of the generation (default 1); the speed\n"
                            "as medians and ranges over them, 1..100",
                    .range = {1, MAX_ROUNDS, "--repeat"},
                    .refusals = {{RULE_REPEAT, NEEDS_MODE_OR_OTHER, COMPARE, .other = OPT_PROFILE,
                                  .message = "--repeat goes with --compare or --profile"}}},
    [OPT_SUMMARY] = {.names = {"--summary"},
                     .kind = ARG_SWITCH,
                     .field = FIELD(summary_only),
                     .help = "with --compare: where the texts part, the KL summary and the\n"
                             "speed, without the texts and the tables by position and site",
                     .refusals = {{RULE_SUMMARY, NEEDS_MODE, COMPARE,
                                   .message = "--summary goes with --compare"},
                                  {RULE_SUMMARY, WITH, .other = OPT_JSON,
                                   .message = "--summary shortens --compare's text; --json has "
                                              "every number"}}},
    [OPT_JSON] = {.names = {"--json"},
                  .kind = ARG_SWITCH,
                  .field = FIELD(json),
                  .help = "with --tokenize: print {\"ids\": [...], \"pieces\": [...]};\n"
                          "with --compare, --ppl, --info or --trace: the same as JSON",
                  .refusals = {{RULE_JSON, NEEDS_MODE, TOKENIZE | COMPARE | PPL | INFO | TRACE,
                                .message = "--json goes with --tokenize, --compare, --ppl, --info "
                                           "or --trace"}},
                  .goes_with = INFO | TRACE},
    [OPT_HELP] = {.names = {"-h", "--help"}, .kind = ARG_HELP, .help = "this text"},
    [OPT_VERSION] = {.names = {"--version"}, .kind = ARG_VERSION, .help = "print the version"},
};

/* ----------------------------------------------------------------------------
 * The kinds of values and their parsers */

/* What the parse has read so far. */
typedef struct {
    Options o;
    int given[N_OPTIONS];
    const char *values[N_OPTIONS]; /* each option's last value */
    int order[N_OPTIONS];          /* the options given, in the order of their first use */
    int n_given;
} Parse;

/* An option as it stands in argv. */
typedef struct {
    const char *flag;  /* the name typed */
    const char *value; /* NULL: none */
    const char *next;  /* the argument after it (NULL: none), for --compare's hint */
} Given;

static void *field_of(Parse *p, const Option *opt) {
    return (char *)&p->o + opt->field;
}

static void set_switch(Parse *p, const Option *opt, const Given *g) {
    (void)g;
    *(int *)field_of(p, opt) = 1;
}

static void set_text(Parse *p, const Option *opt, const Given *g) {
    *(const char **)field_of(p, opt) = g->value;
}

/* Dies unless v (shown as `shown` in the error) is in opt's range. */
static void check_range(const Option *opt, double v, const char *shown) {
    const Range *r = &opt->range;
    if (v >= r->min && v <= r->max) return;
    char text[64];
    snprintf(text, sizeof(text), "in %.0f..%.0f", r->min, r->max);
    die("%s must be %s, got %s", r->label, r->text ? r->text : text, shown);
}

static float parse_float(const Option *opt, const char *flag, const char *s) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end != '\0' || v != v) {
        if (opt->not_a_number) die("%s needs a number, got '%s' (%s)", flag, s, opt->not_a_number);
        die("%s needs a number, got '%s'", flag, s);
    }
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

static void set_float(Parse *p, const Option *opt, const Given *g) {
    float v = parse_float(opt, g->flag, g->value);
    char shown[32];
    snprintf(shown, sizeof(shown), "%g", v);
    check_range(opt, v, opt->range.as_typed ? g->value : shown);
    *(float *)field_of(p, opt) = v;
}

/* An integer of g in opt's range. */
static long long ranged_int(const Option *opt, const Given *g) {
    long long v = parse_int(g->flag, g->value);
    char shown[32];
    snprintf(shown, sizeof(shown), "%lld", v);
    check_range(opt, (double)v, shown);
    return v;
}

static void set_int(Parse *p, const Option *opt, const Given *g) {
    *(int *)field_of(p, opt) = (int)ranged_int(opt, g);
}

static void set_long(Parse *p, const Option *opt, const Given *g) {
    *(long long *)field_of(p, opt) = ranged_int(opt, g);
}

static void set_choice(Parse *p, const Option *opt, const Given *g) {
    for (int k = 0; k < 2; k++) {
        if (strcmp(g->value, opt->choices[k]) == 0) {
            *(int *)field_of(p, opt) = k;
            return;
        }
    }
    die("unknown %s '%s' (expected %s or %s)", g->flag, g->value, opt->choices[0], opt->choices[1]);
}

static void set_chat_template(Parse *p, const Option *opt, const Given *g) {
    int t = chat_template_from_name(g->value);
    if (t < 0) die("unknown %s '%s' (expected %s)", g->flag, g->value, chat_template_names());
    *(int *)field_of(p, opt) = t;
}

static void set_norm(Parse *p, const Option *opt, const Given *g) {
    NormFn norm = norm_by_name(g->value);
    if (!norm) die("unknown %s '%s' (expected %s)", g->flag, g->value, norm_names());
    *(NormFn *)field_of(p, opt) = norm;
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

/* --compare[=A,B]: two different known norms (none given: rmsnorm and layernorm). */
static void set_norm_pair(Parse *p, const Option *opt, const Given *g) {
    NormFn *out = field_of(p, opt);
    const char *spec = g->value;
    p->o.compare = 1;
    if (!spec && g->next && is_norm_pair(g->next))
        die("--compare takes its norms as --compare=%s, with '='", g->next);
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

/* Records option id as given, its value the last. */
static void mark_given(Parse *p, int id, const char *value) {
    if (!p->given[id]) p->order[p->n_given++] = id;
    p->given[id] = 1;
    p->values[id] = value;
}

/* The prompt from -i, -f or PROMPT: "-" as -i's value or as PROMPT, and -f's file, are read
 * later (run.c's read_prompt). Each counts as PROMPT for the checks. */
static void set_prompt(Parse *p, const Option *opt, const Given *g) {
    if (p->given[OPT_PROMPT]) die("the prompt is given twice");
    if (opt->kind == ARG_PROMPT_FILE || strcmp(g->value, "-") == 0)
        p->o.prompt_file = g->value;
    else
        p->o.prompt = g->value;
    mark_given(p, OPT_PROMPT, g->value);
}

static void usage(FILE *f);

static void print_help(Parse *p, const Option *opt, const Given *g) {
    (void)p, (void)opt, (void)g;
    usage(stdout);
    finish_stdout();
    exit(0);
}

static void print_version(Parse *p, const Option *opt, const Given *g) {
    (void)p, (void)opt, (void)g;
    printf("normllama %s\n", NORMLLAMA_VERSION);
    finish_stdout();
    exit(0);
}

typedef enum {
    NO_VALUE,    /* a switch: "--json=1" is an unknown option */
    VALUE,       /* "-x VALUE", "--name=VALUE" or "--name VALUE" */
    EQUALS_ONLY, /* optional, and only as "--name=VALUE" */
} Arity;

static const struct {
    Arity arity;
    void (*set)(Parse *p, const Option *opt, const Given *g); /* dies on a bad value */
} kinds[] = {
    [ARG_SWITCH] = {NO_VALUE, set_switch},
    [ARG_TEXT] = {VALUE, set_text},
    [ARG_FLOAT] = {VALUE, set_float},
    [ARG_INT] = {VALUE, set_int},
    [ARG_LONG] = {VALUE, set_long},
    [ARG_CHOICE] = {VALUE, set_choice},
    [ARG_NORM] = {VALUE, set_norm},
    [ARG_NORM_PAIR] = {EQUALS_ONLY, set_norm_pair},
    [ARG_PROMPT] = {VALUE, set_prompt},
    [ARG_PROMPT_FILE] = {VALUE, set_prompt},
    [ARG_HELP] = {NO_VALUE, print_help},
    [ARG_VERSION] = {NO_VALUE, print_version},
    [ARG_CHAT_TEMPLATE] = {VALUE, set_chat_template},
};

/* ----------------------------------------------------------------------------
 * --help */

#define HELP_COLUMN 20 /* where the help lines start */

/* One row: its names and value in the left column, its help lines from HELP_COLUMN. */
static void usage_row(FILE *f, const Option *opt) {
    if (opt->heading) fprintf(f, "%s\n", opt->heading);
    int col = fprintf(f, "  "), shown = 0;
    for (int is_long = 0; is_long < 2; is_long++) /* "-t, --temp": the short names first */
        for (int k = 0; k < MAX_NAMES && opt->names[k]; k++)
            if ((opt->names[k][0] == '-' && opt->names[k][1] == '-') == is_long)
                col += fprintf(f, "%s%s", shown++ ? ", " : "", opt->names[k]);
    if (opt->value) col += fprintf(f, "%s", opt->value);
    for (const char *line = opt->help; line;) {
        const char *end = strchr(line, '\n');
        char format[128];
        snprintf(format, sizeof(format), "%.*s", end ? (int)(end - line) : (int)strlen(line), line);
        if (col >= HELP_COLUMN) { /* the left column is full, or a line is done */
            fputc('\n', f);
            col = 0;
        }
        fprintf(f, "%*s", HELP_COLUMN - col, "");
        fprintf(f, format, norm_names_wrapped(HELP_COLUMN, 80));
        col = HELP_COLUMN;
        line = end ? end + 1 : NULL;
    }
    fprintf(f, "\n");
}

static void usage(FILE *f) {
    fprintf(f, "usage: run MODEL [PROMPT] [options]\n");
    for (int id = 0; id < N_OPTIONS; id++) usage_row(f, &options[id]);
    fprintf(f, "chat: \"User: \" and \"Assistant: \" mark the turns on stdout (a turn read from\n"
               "a pipe or file is echoed after its marker); a reply ends at the template's end\n"
               "of turn (EOS, <|eot_id|>, <|im_end|>) or BOS, and the kv cache keeps the\n"
               "whole conversation. The chat ends with status 0 at the end of stdin or when\n"
               "the context (-n, seq_len) is full, saying which.\n"
               "A Ctrl-C stops a reply; at the User: prompt it ends the chat.\n"
               "The summary line on stderr gives the seed used (-s with it repeats a text)\n"
               "and why the text stopped (EOS, BOS, -n reached, context full, ...).\n"
               "sampling: repetition penalty, temperature, top-k, top-p, min-p, one draw\n"
               "(e.g. --top-k 40 --min-p 0.05 --repeat-penalty 1.1; see docs/USAGE.md).\n"
               "examples:\n"
               "  run models/stories260K.bin \"Once upon a time\"\n"
               "  run models/stories260K.bin -t 0 -n 64 -f prompt.txt\n"
               "  run models/stories260K.bin -s 42 --norm=layernorm \"Lily saw a cat\"\n"
               "  run models/stories260K.bin -m chat -y \"You tell stories.\"\n"
               "  run models/stories260K.bin --ppl data/stories.txt\n");
}

/* ----------------------------------------------------------------------------
 * The parser */

/* The row one of whose names is the first len bytes of arg, and that name; NULL if none. */
static const Option *find_option(const char *arg, size_t len, const char **name) {
    for (int id = 0; id < N_OPTIONS; id++) {
        for (int k = 0; k < MAX_NAMES && options[id].names[k]; k++) {
            *name = options[id].names[k];
            if (strlen(*name) == len && strncmp(arg, *name, len) == 0) return &options[id];
        }
    }
    return NULL;
}

/* The Levenshtein distance between a[0..la) and b (at most 63 bytes each; longer ones are far). */
static int edit_distance(const char *a, size_t la, const char *b) {
    size_t lb = strlen(b);
    if (la > 63 || lb > 63) return INT_MAX;
    int row[64]; /* row[j]: the distance between a's first i bytes and b's first j */
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diagonal = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int substitute = diagonal + (a[i - 1] != b[j - 1]);
            int best = row[j] + 1 < row[j - 1] + 1 ? row[j] + 1 : row[j - 1] + 1;
            diagonal = row[j];
            row[j] = substitute < best ? substitute : best;
        }
    }
    return row[lb];
}

/* The known name nearest to the unknown option a[0..len): the one fewest edits away, if at most a
 * third of its letters ("--top_k": --top-k), or one that a starts with or that starts with a
 * ("--temperature": --temp, "--ctx": --ctx-size, three letters at least); NULL if none. */
static const char *nearest_name(const char *a, size_t len) {
    size_t letters = len - strspn(a, "-");
    const char *nearest = NULL;
    int best = (int)(letters / 3) + 1;
    for (int id = 0; id < N_OPTIONS; id++) {
        for (int k = 0; k < MAX_NAMES && options[id].names[k]; k++) {
            const char *name = options[id].names[k];
            size_t n = strlen(name), shorter = n < len ? n : len;
            if (name[0] != '-') continue;
            int d = edit_distance(a, len, name);
            if (shorter >= 5 && strncmp(a, name, shorter) == 0 && d > 0) d = 1;
            if (d > 0 && d < best) best = d, nearest = name;
        }
    }
    return nearest;
}

/* Reads the option at argv[*i] (it starts with '-'), moving *i past a separate value. */
static void parse_option(Parse *p, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    size_t name_len = strcspn(a, "=");
    const char *name = NULL;
    const Option *opt = find_option(a, name_len, &name);
    int equals = a[name_len] == '=';
    if (!opt || (equals && kinds[opt->kind].arity == NO_VALUE)) {
        const char *nearest = opt ? NULL : nearest_name(a, name_len);
        if (nearest) die("unknown option '%s' (did you mean %s? see run --help)", a, nearest);
        die("unknown option '%s' (see run --help)", a);
    }
    Given g = {.flag = name, .next = *i + 1 < argc ? argv[*i + 1] : NULL};
    if (equals) {
        g.value = a + name_len + 1;
    } else if (kinds[opt->kind].arity == VALUE) {
        if (*i + 1 >= argc) die("%s needs a value", name);
        g.value = argv[++*i];
    }
    kinds[opt->kind].set(p, opt, &g);
    mark_given(p, (int)(opt - options), g.value);
}

/* An argument without a leading '-' (or "-" alone): the first of MODEL and PROMPT not given. */
static void parse_plain(Parse *p, const char *a) {
    for (int id = 0; id < N_OPTIONS; id++) {
        if (options[id].names[0][0] != '-' && !p->given[id]) {
            Given g = {.flag = options[id].names[0], .value = a};
            kinds[options[id].kind].set(p, &options[id], &g);
            mark_given(p, id, a);
            return;
        }
    }
    die("unexpected argument '%s' (the prompt is given already; quote one with spaces)", a);
}

/* ----------------------------------------------------------------------------
 * The checks across options, from the rows' refusals */

static unsigned modes_of(const Options *o) {
    return (o->chat ? CHAT : 0) | (o->compare ? COMPARE : 0) | (o->ppl_path ? PPL : 0) |
           (o->tokenize_text ? TOKENIZE : 0) | (o->tokenize_file ? TOKENIZE_FILE : 0) |
           (o->info ? INFO : 0) | (o->trace_pos >= 0 ? TRACE : 0);
}

/* Whether option id, in the parse p whose modes are `modes`, breaks refusal r. */
static int breaks(const Parse *p, int id, const Refusal *r, unsigned modes) {
    if (r->when == MISSING) return !p->given[id];
    if (!p->given[id] || (r->value && strcmp(p->values[id], r->value) != 0)) return 0;
    if (r->when == IN_MODES) return (modes & r->modes) != 0;
    if (r->when == NEEDS_MODE) return (modes & r->modes) == 0;
    if (r->when == NEEDS_MODE_OR_OTHER) return (modes & r->modes) == 0 && !p->given[r->other];
    return p->given[r->other];
}

static const char *last_name(const Option *opt) {
    int k = 0;
    while (k + 1 < MAX_NAMES && opt->names[k + 1]) k++;
    return opt->names[k];
}

/* Dies on the first rule broken, in the order of Rule; of the options that break one rule, the
 * first given is named (-n 5 -t 0 --ppl FILE: -n). */
static void check_options(const Parse *p) {
    int order[N_OPTIONS], n = p->n_given;
    memcpy(order, p->order, sizeof(int) * (size_t)n);
    for (int id = 0; id < N_OPTIONS; id++)
        if (!p->given[id]) order[n++] = id;
    unsigned modes = modes_of(&p->o);
    for (int rule = 0; rule < N_RULES; rule++) {
        for (int k = 0; k < N_OPTIONS; k++) {
            const Option *opt = &options[order[k]];
            for (const Refusal *r = opt->refusals; r < opt->refusals + MAX_REFUSALS && r->message;
                 r++)
                if ((int)r->rule == rule && breaks(p, order[k], r, modes))
                    die(r->message, last_name(opt));
        }
    }
    static const struct {
        unsigned mode;
        const char *message;
    } own[] = {{INFO, "%s does not go with --info, which describes the model file"},
               {TRACE, "%s does not go with --trace, which traces a position of the prompt"}};
    for (int i = 0; i < 2; i++) /* after the rules: -m chat --info */
        for (int k = 0; k < p->n_given && (modes & own[i].mode); k++)
            if (!(options[order[k]].goes_with & own[i].mode))
                die(own[i].message, last_name(&options[order[k]]));
}

Options options_parse(int argc, char **argv) {
    Parse p = {.o = {.temperature = 1.0f,
                     .topp = 0.9f,
                     .repeat_penalty = 1.0f,
                     .repeat_last_n = 64,
                     .trace_pos = -1,
                     .chat_template = -1,
                     .n_predict = NO_N_PREDICT}};
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            parse_option(&p, argc, argv, &i);
        else
            parse_plain(&p, argv[i]);
    }
    check_options(&p);
    return p.o;
}
