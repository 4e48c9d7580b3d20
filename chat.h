/* Chat (-m chat): a conversation in the Llama 2 chat template. User turns come from the first
 * turn given and then stdin, line by line; each is fed after the conversation so far (the kv
 * cache keeps it all) and answered with a reply sampled and streamed to stdout, until stdin ends
 * or the context is full.
 *
 * It leaves the checks of -m chat's options (and the choice of steps) to run.c, the sampling to
 * sampler.h, the summary line to generate.h.
 */
#ifndef CHAT_H
#define CHAT_H

#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

/* What a conversation starts from. */
typedef struct {
    const char *system_prompt; /* -y; NULL: asked for once when stdin is a terminal */
    const char *first_turn;    /* the first user turn (-i, -f, PROMPT), "" for none */
    int steps;                 /* positions all turns and replies may fill, at most seq_len */
} ChatRequest;

/* Runs the conversation of req on m. Each user turn is "[INST] {user} [/INST]" (the first with
 * a system prompt "[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]"), after BOS, and after
 * the EOS that ended the reply before it, as Meta's reference code and llama2.c write them; a
 * reply ends at a token that ends_text. stdout gets the transcript: "User: " and "Assistant: "
 * mark the turns, and a turn read from a pipe or file is echoed after its marker (on a terminal
 * the markers are prompts). A Ctrl-C stops a reply and the next turn is read, as in llama.cpp; a
 * Ctrl-C while waiting for a turn ends the chat. Ends with the summary line on stderr (its stop
 * reason "end of input", "interrupted" or "context full") at the end of stdin, at that Ctrl-C,
 * or when a turn or reply does not fit in the positions left, saying so in one line on stderr. Dies
 * on a stdin read error, a line with a NUL byte or not valid UTF-8 (named by its number), a
 * non-finite logit. */
void run_chat(Model *m, const Tokenizer *t, Sampler *sampler, const ChatRequest *req);

#endif
