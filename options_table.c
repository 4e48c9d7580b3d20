/* options_table.c: run's command line as one table, one row an option in --help's order (the
 * types in options_table.h): its names, how its value is read and into which field, its help
 * lines, and the refusals it states. options.c holds what reads the rows.
 */
#include <float.h>
#include <limits.h>
#include <stddef.h>

#include "chat_template.h"
#include "compare.h"
#include "options_table.h"

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

const Option options[N_OPTIONS] = {
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
