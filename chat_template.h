/* Chat templates: a model's chat template (a Jinja string, tokenizer.chat_template in a GGUF)
 * recognized among the families people run, and a conversation rendered to text as that family's
 * template renders it under Hugging Face's apply_chat_template (Jinja with trim_blocks and
 * lstrip_blocks). No Jinja runs here: each family is a few lines of C, recognized by distinctive
 * substrings of the template as llama.cpp's llm_chat_detect_template does (src/llama-chat.cpp),
 * and tests/test_chat_template.py holds every rendering to Jinja's rendering of real templates.
 *
 * The families (name: what a conversation renders to; bos and eos are the vocabulary's BOS and
 * EOS texts, strip() Python's str.strip, which Jinja's trim filter and .strip() are):
 *   llama2  Meta's Llama 2 chat template: each user turn bos + "[INST] " + strip(content) +
 *           " [/INST]", the first with the system prompt folded in, "<<SYS>>\n" + system +
 *           "\n<</SYS>>\n\n" before its content (inside the strip); each reply " " +
 *           strip(content) + " " + eos. No generation prompt: a reply follows "[/INST]".
 *   llama3  Llama 3's: bos once, then each message "<|start_header_id|>" + role +
 *           "<|end_header_id|>\n\n" + strip(content) + "<|eot_id|>"; the generation prompt
 *           "<|start_header_id|>assistant<|end_header_id|>\n\n".
 *   chatml  ChatML (SmolLM2, Qwen, TinyLlama-chat 0.x, OpenHermes): each message "<|im_start|>" +
 *           role + "\n" + content + "<|im_end|>\n"; the prompt "<|im_start|>assistant\n".
 *   zephyr  Zephyr's (HuggingFaceH4/zephyr-7b-beta, TinyLlama-1.1B-Chat-v1.0): each message
 *           "<|" + role + "|>\n" + content + eos + "\n"; the prompt "<|assistant|>\n".
 * A template's own extras are not rendered: a default system prompt it inserts when the
 * conversation has none (Qwen2.5's, SmolLM2's), Qwen3's thinking block around the last reply,
 * tools. llama.cpp's built-in renderings omit them too.
 */
#ifndef CHAT_TEMPLATE_H
#define CHAT_TEMPLATE_H

typedef enum {
    CHAT_TEMPLATE_LLAMA2,
    CHAT_TEMPLATE_LLAMA3,
    CHAT_TEMPLATE_CHATML,
    CHAT_TEMPLATE_ZEPHYR,
    CHAT_TEMPLATES, /* how many */
} ChatTemplate;

/* One message of a conversation: role "system", "user" or "assistant", and its text (UTF-8). */
typedef struct {
    const char *role;
    const char *content;
} ChatMessage;

/* The texts of the vocabulary's BOS and EOS tokens, which templates write as bos_token and
 * eos_token ("<s>" and "</s>" for Llama 2's vocabulary, "<|begin_of_text|>" for Llama 3's). */
typedef struct {
    const char *bos;
    const char *eos;
} ChatTokens;

/* The family's name, as --chat-template and llama.cpp's --chat-template name it: "llama2". */
const char *chat_template_name(ChatTemplate t);

/* The family named `name`; -1 for a name that is none of them. */
int chat_template_from_name(const char *name);

/* The names of all families, ", " between them (for messages): "llama2, llama3, chatml, zephyr". */
const char *chat_template_names(void);

/* The family of the Jinja template string `tmpl`, by its distinctive substrings (llama.cpp's
 * markers): "<|im_start|>" chatml (not Phi-4's "<|im_sep|>" nor SmolVLM's
 * "<end_of_utterance>"); "[INST]" with "<<SYS>>" llama2 (not Mistral's "[SYSTEM_PROMPT]",
 * "[AVAILABLE_TOOLS]" nor its v1 "' [INST] ' + system_message"); "<|start_header_id|>" with
 * "<|end_header_id|>" llama3; "<|user|>" with "<|assistant|>" and an end of message in eos_token,
 * "</s>" or "<|endoftext|>" zephyr (not Phi-3's "<|end|>"). A template that is also a family's
 * name is that family. -1: none of them. */
int chat_template_recognize(const char *tmpl);

/* The text that ends a reply in family t (its end-of-turn token's text): llama3 "<|eot_id|>",
 * chatml "<|im_end|>", llama2 and zephyr the vocabulary's eos. */
const char *chat_template_end_of_turn(ChatTemplate t, const ChatTokens *tokens);

/* The conversation messages[0..n) rendered in family t (malloc'd, NUL-terminated), followed by
 * the generation prompt when add_generation_prompt is 1 (llama2 has none). A system message is
 * rendered only as the first message (llama2 folds it into the first user turn). Returns NULL when
 * out of memory. */
char *chat_template_render(ChatTemplate t, const ChatMessage *messages, int n,
                           int add_generation_prompt, const ChatTokens *tokens);

#endif
