/* The pre-tokenizers of byte-level BPE (bpe_pretok.h): each family's regexes, compiled by PCRE2
 * with its JIT, and the split of text into words.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <string.h>

#include "bpe_pretok.h"
#include "gguf.h"

/* Hugging Face's \s and \S, as Unicode's White_Space property (see bpe_pretok.h). */
#define S  "\\p{White_Space}"
#define NS "\\P{White_Space}"

/* The contractions of Llama 3's and Qwen's (?i:'s|'t|'re|'ve|'m|'ll|'d), ASCII letters folded. */
#define CONTRACTIONS_ANY_CASE "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

/* Llama 3's pattern, with its numbers as given: \p{N}{1,3} (Llama 3), \p{N} (Qwen). */
#define LLAMA3_WITH_NUMBERS(numbers)                                                               \
    CONTRACTIONS_ANY_CASE "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" numbers "| ?[^" S                      \
                          "\\p{L}\\p{N}]+[\\r\\n]*"                                                \
                          "|" S "*[\\r\\n]+|" S "+(?!" NS ")|" S "+"

/* GPT-2's pattern (the ByteLevel pre-tokenizer's own): lower-case contractions only. */
#define GPT2                                                                                       \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" S "\\p{L}\\p{N}]+|" S "+(?!" NS ")|" S "+"

static const BpeFamily families[] = {
    {"llama-bpe", {LLAMA3_WITH_NUMBERS("\\p{N}{1,3}"), NULL}, 1, 0, 1},
    {"gpt-2", {GPT2, NULL}, 0, 0, 0},
    {"qwen2", {LLAMA3_WITH_NUMBERS("\\p{N}"), NULL}, 0, 1, 0},
    {"smollm", {"\\p{N}", GPT2}, 0, 0, 0},
};
#define N_FAMILIES (sizeof families / sizeof families[0])

int bpe_pretok_init(BpePretok *p, const char *pre, size_t pre_len, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    for (size_t f = 0; f < N_FAMILIES && !p->family; f++)
        if (strlen(families[f].pre) == pre_len && memcmp(families[f].pre, pre, pre_len) == 0)
            p->family = &families[f];
    if (!p->family) {
        snprintf(err, errlen,
                 "tokenizer.ggml.pre \"%s\" is not a pre-tokenizer run knows (llama-bpe, gpt-2, "
                 "qwen2, smollm)",
                 gguf_shown((GgufString){pre, pre_len}).s);
        return -1;
    }
    for (int r = 0; r < BPE_MAX_REGEXES && p->family->regex[r]; r++) {
        int code;
        PCRE2_SIZE offset;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)p->family->regex[r], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP, &code, &offset, NULL);
        if (!re) {
            PCRE2_UCHAR message[128];
            pcre2_get_error_message(code, message, sizeof message);
            snprintf(err, errlen, "pre-tokenizer %s: PCRE2 refuses regex %d at %zu: %s",
                     p->family->pre, r, (size_t)offset, (const char *)message);
            bpe_pretok_free(p);
            return -1;
        }
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* without a JIT, pcre2_match interprets */
        p->code[r] = re;
    }
    return 0;
}

void bpe_pretok_free(BpePretok *p) {
    for (int r = 0; r < BPE_MAX_REGEXES; r++) pcre2_code_free(p->code[r]);
    memset(p, 0, sizeof *p);
}

/* A text being cut into words: the regexes, the text, PCRE2's match data, and the word ends found
 * so far (cuts[0 .. n - 1]). */
typedef struct {
    const BpePretok *p;
    const char *text;
    pcre2_match_data *md;
    uint32_t *cuts;
    long n;
} Cutter;

/* Cuts text[start, end) with regex r and each piece with the regexes after it; the last regex's
 * pieces are the words, whose ends go to c->cuts. Returns 0, or -1 if PCRE2 fails. */
static int split(Cutter *c, int r, size_t start, size_t end) {
    if (r == BPE_MAX_REGEXES || !c->p->code[r]) {
        c->cuts[c->n++] = (uint32_t)end;
        return 0;
    }
    const PCRE2_SPTR subject = (PCRE2_SPTR)c->text + start;
    const size_t len = end - start;
    size_t at = 0; /* where the text not yet cut starts, relative to start */
    while (at < len) {
        /* NO_UTF_CHECK: the caller checked the text once; PCRE2 would check all that is left on
         * every call, which makes a split quadratic */
        int rc = pcre2_match(c->p->code[r], subject, len, at, PCRE2_NO_UTF_CHECK, c->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return -1;
        const PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(c->md);
        size_t from = ovector[0], to = ovector[1];
        if (to == from) { /* none of the patterns matches nothing, but never loop on one */
            to = from + 1;
            while (to < len && (subject[to] & 0xC0) == 0x80) to++;
        }
        if (from > at && split(c, r + 1, start + at, start + from) != 0) return -1;
        if (split(c, r + 1, start + from, start + to) != 0) return -1;
        at = to;
    }
    return at < len ? split(c, r + 1, start + at, end) : 0;
}

long bpe_pretok_split(const BpePretok *p, const char *text, size_t len, uint32_t *cuts) {
    if (len == 0) return 0;
    Cutter c = {p, text, pcre2_match_data_create(1, NULL), cuts, 0};
    if (!c.md) return -1;
    int rc = split(&c, 0, 0, len);
    pcre2_match_data_free(c.md);
    return rc == 0 ? c.n : -1;
}
