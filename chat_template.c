/* Chat templates (chat_template.h): one table row a family, its markers and its rendering. */
#include "chat_template.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A growing text; `failed` once an allocation failed (the text is then dropped). */
typedef struct {
    char *s;
    size_t len, cap;
    int failed;
} Text;

static void put_bytes(Text *t, const char *s, size_t n) {
    if (t->failed) return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = 2 * (t->len + n + 1);
        char *grown = realloc(t->s, cap);
        if (!grown) {
            t->failed = 1;
            return;
        }
        t->s = grown, t->cap = cap;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void put(Text *t, const char *s) {
    put_bytes(t, s, strlen(s));
}

/* Whether code point c is whitespace to Python's str.strip (str.isspace: Unicode's White_Space
 * and the separators U+001C..U+001F). */
static int is_python_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* The code point of the well-formed UTF-8 sequence of n bytes at s (n from the lead byte). */
static uint32_t code_point(const unsigned char *s, int n) {
    uint32_t c = n == 1 ? s[0] : s[0] & (0x7F >> n);
    for (int i = 1; i < n; i++) c = c << 6 | (s[i] & 0x3F);
    return c;
}

static int sequence_length(unsigned char lead) {
    return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
}

/* Appends s with Python's str.strip() applied: leading and trailing whitespace characters gone.
 * The text is UTF-8 (run checks its inputs); a stray byte counts as no space. */
static void put_stripped(Text *t, const char *s) {
    const unsigned char *b = (const unsigned char *)s, *end = b + strlen(s);
    while (b < end) {
        int n = sequence_length(*b);
        if (b + n > end || !is_python_space(code_point(b, n))) break;
        b += n;
    }
    while (end > b) {
        const unsigned char *last = end - 1;
        while (last > b && (*last & 0xC0) == 0x80) last--; /* to the lead byte */
        int n = sequence_length(*last);
        if (last + n != end || !is_python_space(code_point(last, n))) break;
        end = last;
    }
    put_bytes(t, (const char *)b, (size_t)(end - b));
}

/* Meta's Llama 2 template: the system message, when first, goes inside the first user turn. */
static void render_llama2(Text *t, const ChatMessage *m, int n, const ChatTokens *tokens) {
    const char *system = NULL;
    if (n > 0 && strcmp(m[0].role, "system") == 0) system = m[0].content, m++, n--;
    for (int i = 0; i < n; i++) {
        if (strcmp(m[i].role, "assistant") == 0) {
            put(t, " ");
            put_stripped(t, m[i].content);
            put(t, " ");
            put(t, tokens->eos);
            continue;
        }
        put(t, tokens->bos);
        put(t, "[INST] ");
        if (i == 0 && system) {
            /* strip() applies to the whole content, the system block included */
            Text content = {0};
            put(&content, "<<SYS>>\n");
            put(&content, system);
            put(&content, "\n<</SYS>>\n\n");
            put(&content, m[i].content);
            if (content.failed) t->failed = 1;
            put_stripped(t, content.s ? content.s : "");
            free(content.s);
        } else {
            put_stripped(t, m[i].content);
        }
        put(t, " [/INST]");
    }
}

/* A family whose every message is a header naming its role, the content and an end. */
typedef struct {
    int bos_first;         /* bos before the first message */
    const char *role_open; /* the header: role_open + role + role_close */
    const char *role_close;
    int strip;              /* the content stripped */
    const char *end;        /* after the content (NULL: the vocabulary's eos) */
    const char *end_suffix; /* after end */
} Headed;

static void render_headed(Text *t, const Headed *h, const ChatMessage *m, int n,
                          const ChatTokens *tokens) {
    if (h->bos_first && n > 0) put(t, tokens->bos);
    for (int i = 0; i < n; i++) {
        put(t, h->role_open);
        put(t, m[i].role);
        put(t, h->role_close);
        if (h->strip)
            put_stripped(t, m[i].content);
        else
            put(t, m[i].content);
        put(t, h->end ? h->end : tokens->eos);
        put(t, h->end_suffix);
    }
}

/* One row a family: its name, rendering (headed, or Llama 2's own when NULL), generation prompt
 * and end-of-turn text (NULL: eos). */
typedef struct {
    const char *name;
    const Headed *headed;
    const char *generation_prompt;
    const char *end_of_turn;
} Family;

static const Headed LLAMA3 = {1, "<|start_header_id|>", "<|end_header_id|>\n\n",
                              1, "<|eot_id|>",          ""};
static const Headed CHATML = {0, "<|im_start|>", "\n", 0, "<|im_end|>", "\n"};
static const Headed ZEPHYR = {0, "<|", "|>\n", 0, NULL, "\n"};

static const Family FAMILIES[CHAT_TEMPLATES] = {
    [CHAT_TEMPLATE_LLAMA2] = {"llama2", NULL, "", NULL},
    [CHAT_TEMPLATE_LLAMA3] = {"llama3", &LLAMA3,
                              "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
    [CHAT_TEMPLATE_CHATML] = {"chatml", &CHATML, "<|im_start|>assistant\n", "<|im_end|>"},
    [CHAT_TEMPLATE_ZEPHYR] = {"zephyr", &ZEPHYR, "<|assistant|>\n", NULL},
};

const char *chat_template_name(ChatTemplate t) {
    return FAMILIES[t].name;
}

int chat_template_from_name(const char *name) {
    for (int i = 0; i < CHAT_TEMPLATES; i++)
        if (strcmp(name, FAMILIES[i].name) == 0) return i;
    return -1;
}

const char *chat_template_names(void) {
    return "llama2, llama3, chatml, zephyr";
}

int chat_template_recognize(const char *tmpl) {
    int named = chat_template_from_name(tmpl);
    if (named >= 0) return named;
#define HAS(marker) (strstr(tmpl, marker) != NULL)
    if (HAS("<|im_start|>"))
        return HAS("<|im_sep|>") || HAS("<end_of_utterance>") ? -1 : CHAT_TEMPLATE_CHATML;
    if (HAS("[INST]"))
        return HAS("<<SYS>>") && !HAS("[SYSTEM_PROMPT]") && !HAS("[AVAILABLE_TOOLS]") &&
                       !HAS("' [INST] ' + system_message")
                   ? CHAT_TEMPLATE_LLAMA2
                   : -1;
    if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>")) return CHAT_TEMPLATE_LLAMA3;
    if (HAS("<|user|>") && HAS("<|assistant|>") && !HAS("<|end|>") &&
        (HAS("eos_token") || HAS("</s>") || HAS("<|endoftext|>")))
        return CHAT_TEMPLATE_ZEPHYR;
#undef HAS
    return -1;
}

const char *chat_template_end_of_turn(ChatTemplate t, const ChatTokens *tokens) {
    return FAMILIES[t].end_of_turn ? FAMILIES[t].end_of_turn : tokens->eos;
}

char *chat_template_render(ChatTemplate t, const ChatMessage *messages, int n,
                           int add_generation_prompt, const ChatTokens *tokens) {
    Text text = {0};
    put(&text, ""); /* an empty conversation is "" */
    const Family *f = &FAMILIES[t];
    if (f->headed)
        render_headed(&text, f->headed, messages, n, tokens);
    else
        render_llama2(&text, messages, n, tokens);
    if (add_generation_prompt) put(&text, f->generation_prompt);
    if (text.failed) {
        free(text.s);
        return NULL;
    }
    return text.s;
}
