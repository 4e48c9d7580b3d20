/* options: what reads run's command-line table (options_table.c, one row an option; options.h
 * the result): the kinds of values and their parsers, --help's text, the parser of argv, and the
 * checks across options, which each row states as refusals ("not in these modes", "not with that
 * option", each with its message).
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
#include "options_table.h"

#define NORMLLAMA_VERSION "0.1"

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
