/* Chat (-m chat): a conversation in the model's chat template (chat_template.h). User turns come
 * from the first turn given and then stdin, line by line; each is fed after the conversation so far
 * (the kv cache keeps it all) and answered with a reply sampled and streamed to stdout, until stdin
 * ends or the context is full.
 *
 * It leaves the checks of -m chat's options (and the choice of steps) to run.c, the sampling to
 * sampler.h, the summary line to generate.h.
 */
#ifndef CHAT_H
#define CHAT_H

#include "model.h"
#include "sampler.h"
#include "vocab.h"

/* What a conversation starts from. */
typedef struct {
    const char *system_prompt;  /* -y; NULL: asked for once when stdin is a terminal */
    const char *first_turn;     /* the first user turn (-i, -f, PROMPT), "" for none */
    int steps;                  /* positions all turns and replies may fill, at most seq_len */
    const char *model_template; /* the chat template the model names (a Jinja string), or NULL */
    int template_override;      /* --chat-template's ChatTemplate, or -1 */
} ChatRequest;

/* Runs the conversation of req on m in a chat template: --chat-template's, else the one the
 * model names when chat_template.h recognizes it (one line on stderr when it does not), else
 * llama2, Meta's Llama 2 template, which llama2.c writes too: "<s>[INST] {user} [/INST]" (the
 * first turn with the system prompt, "<s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]";
 * an empty system prompt is none). Each turn feeds the token that ended the reply before it, when
 * that was the template's end of turn (EOS; llama3's <|eot_id|>, chatml's <|im_end|>), then the
 * text the turn adds to the conversation's rendering; in it the texts of BOS, EOS (the
 * vocabulary's: "<s>", "</s>"; "<|begin_of_text|>", ...) and the vocabulary's control tokens are
 * those tokens (vocab_encode's VOCAB_PARSE_SPECIAL). A reply ends at a token that ends_text
 * (sampler.h) or at the template's end of turn. stdout gets the transcript: "User: " and
 * "Assistant: " mark the turns, and a turn read from a pipe or file is echoed after its marker
 * (on a terminal the markers are prompts). A Ctrl-C stops a reply and the next turn is read, as
 * in llama.cpp; a Ctrl-C while waiting for a turn ends the chat. Ends with the summary line on
 * stderr (its stop reason "end of input", "interrupted" or "context full") at the end of stdin,
 * at that Ctrl-C, or when a turn or reply does not fit in the positions left, saying so in one
 * line on stderr. Dies on a stdin read error, a line with a NUL byte or not valid UTF-8 (named by
 * its number), a non-finite logit. */
void run_chat(Model *m, const Vocab *v, Sampler *sampler, const ChatRequest *req);

#endif
