/* options_table.h: the types of run's command-line table (options_table.c) and the table itself,
 * private to options.c, which reads it: the modes an option can be refused in, the order of the
 * checks across options, how a value is read, its range, and one row an option.
 */
#ifndef OPTIONS_TABLE_H
#define OPTIONS_TABLE_H

#include <stddef.h>

#include "options.h"

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

/* One row an option, indexed by options.h's OPT_*, in --help's order. */
extern const Option options[N_OPTIONS];

#endif
