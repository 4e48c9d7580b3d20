/* Byte-level BPE encoding and decoding (bpe.h) over the tables bpe_load.c builds.
 *
 * A word's merges run as SentencePiece's and Hugging Face's BPE run them: the word's bytes are
 * symbols in a doubly linked list, a binary heap holds every adjacent pair that has a merge,
 * lowest rank first and then leftmost, and a popped pair whose sides have changed since it was
 * pushed is skipped (lazy invalidation), so that a word of n bytes costs O(n log n). Words up to
 * CACHED_WORD_MAX bytes are remembered during one call: prose repeats its words.
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "bpe.h"
#include "bpe_tables.h"

/* A symbol: a span of the word that no merge has crossed; merged-away symbols have len 0. */
typedef struct {
    int id, len;
    int prev, next; /* neighbours in the list, -1 at the ends */
} Symbol;

/* A candidate merge of symbols left and right (its neighbour then) into token id; len is their
 * total length when the pair was pushed: if it changed, one side did, and the pair is stale. */
typedef struct {
    int rank, left, right, len, id;
} Pair;

static int pair_before(const Pair *a, const Pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(Pair *heap, int *n, Pair p) {
    int i = (*n)++;
    while (i > 0 && pair_before(&p, &heap[(i - 1) / 2])) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = p;
}

static Pair heap_pop(Pair *heap, int *n) {
    Pair top = heap[0], last = heap[--*n];
    int i = 0;
    for (int child; (child = 2 * i + 1) < *n; i = child) {
        if (child + 1 < *n && pair_before(&heap[child + 1], &heap[child])) child++;
        if (!pair_before(&heap[child], &last)) break;
        heap[i] = heap[child];
    }
    if (*n > 0) heap[i] = last;
    return top;
}

/* Words up to this many bytes are remembered during one encode. */
#define CACHED_WORD_MAX 32

/* A remembered word: its len bytes at word gave ids[first .. first + count). */
typedef struct {
    const char *word;
    uint32_t first;
    uint16_t len, count; /* len 0: an empty slot */
} CachedWord;

/* One call's state. */
typedef struct {
    const Bpe *b;
    const char *text;
    int *ids;
    long n_ids;
    Symbol *syms; /* room for cap symbols and 3 cap pairs */
    Pair *heap;
    int cap;
    uint32_t *cuts; /* room for n_cuts */
    size_t n_cuts;
    CachedWord *cache;
    size_t cache_mask, cache_used;
    char **normalized; /* the NFC text of each stretch normalized, kept for the cache's words */
    int n_normalized;
} Encoder;

/* Pushes the pair (left, right) when the vocabulary merges their tokens. */
static void try_pair(Encoder *e, int left, int right, Pair *heap, int *n_heap) {
    if (left < 0 || right < 0) return;
    const Bpe *b = e->b;
    const struct BpeMerge *m = &b->merges[merge_slot(b, e->syms[left].id, e->syms[right].id)];
    if (m->left < 0) return;
    heap_push(heap, n_heap,
              (Pair){m->rank, left, right, e->syms[left].len + e->syms[right].len, m->id});
}

/* Makes room for a word of n bytes: n symbols, 3n pairs (n - 1 first, at most 2 a merge). */
static int reserve(Encoder *e, int n) {
    if (n <= e->cap) return 0;
    int cap = n > 2 * e->cap ? n : 2 * e->cap;
    Symbol *syms = realloc(e->syms, (size_t)cap * sizeof *syms);
    if (syms) e->syms = syms;
    Pair *heap = realloc(e->heap, 3 * (size_t)cap * sizeof *heap);
    if (heap) e->heap = heap;
    if (!syms || !heap) return -1;
    e->cap = cap;
    return 0;
}

/* BPE over the word's bytes w[0..n): appends its ids. */
static int merge_word(Encoder *e, const unsigned char *w, int n) {
    if (reserve(e, n) != 0) return -1;
    Symbol *syms = e->syms;
    for (int i = 0; i < n; i++) syms[i] = (Symbol){e->b->byte_ids[w[i]], 1, i - 1, i + 1};
    syms[n - 1].next = -1;
    int n_heap = 0;
    for (int i = 0; i + 1 < n; i++) try_pair(e, i, i + 1, e->heap, &n_heap);
    while (n_heap > 0) {
        Pair p = heap_pop(e->heap, &n_heap);
        Symbol *l = &syms[p.left], *r = &syms[p.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != p.len) continue; /* stale */
        l->id = p.id;
        l->len = p.len;
        l->next = r->next;
        if (r->next >= 0) syms[r->next].prev = p.left;
        r->len = 0;
        try_pair(e, l->prev, p.left, e->heap, &n_heap);
        try_pair(e, p.left, l->next, e->heap, &n_heap);
    }
    for (int i = 0; i >= 0; i = syms[i].next) e->ids[e->n_ids++] = syms[i].id;
    return 0;
}

/* The cache slot of the word w[0..len): its entry, or the empty one it would take. */
static CachedWord *cache_slot(Encoder *e, const char *w, int len) {
    for (size_t i = text_home(w, (size_t)len, e->cache_mask);; i = (i + 1) & e->cache_mask) {
        CachedWord *c = &e->cache[i];
        if (c->len == 0 || (c->len == len && memcmp(c->word, w, (size_t)len) == 0)) return c;
    }
}

/* One word, w[0..len) (alive until the call ends): its token when it is one and the family
 * ignores merges, its ids from the cache when seen before, else its merges. */
static int encode_word(Encoder *e, const char *w, int len) {
    const Bpe *b = e->b;
    if (len == 1) {
        e->ids[e->n_ids++] = b->byte_ids[(unsigned char)w[0]];
        return 0;
    }
    if (b->pretok.family->ignore_merges) {
        int id = b->normal_index[index_slot(b, b->normal_index, w, (size_t)len)];
        if (id >= 0) {
            e->ids[e->n_ids++] = id;
            return 0;
        }
    }
    CachedWord *c = len <= CACHED_WORD_MAX && e->cache ? cache_slot(e, w, len) : NULL;
    if (c && c->len) {
        memcpy(e->ids + e->n_ids, e->ids + c->first, c->count * sizeof *e->ids);
        e->n_ids += c->count;
        return 0;
    }
    long first = e->n_ids;
    if (merge_word(e, (const unsigned char *)w, len) != 0) return -1;
    if (c && 2 * (e->cache_used + 1) <= e->cache_mask + 1) { /* at most half full */
        *c = (CachedWord){w, (uint32_t)first, (uint16_t)len, (uint16_t)(e->n_ids - first)};
        e->cache_used++;
    }
    return 0;
}

/* The NFC form of the well-formed s[0..*n) (utf8proc), kept in e until the call ends; *n becomes
 * its length. ASCII is its own NFC form and is returned as it is. NULL out of memory. */
static const char *nfc(Encoder *e, const char *s, size_t *n) {
    size_t i = 0;
    while (i < *n && (unsigned char)s[i] < 0x80) i++;
    if (i == *n) return s;
    char **more = realloc(e->normalized, (size_t)(e->n_normalized + 1) * sizeof *more);
    if (!more) return NULL;
    e->normalized = more;
    utf8proc_uint8_t *out;
    utf8proc_ssize_t len = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)*n, &out,
                                        UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (len < 0) return NULL;
    e->normalized[e->n_normalized++] = (char *)out;
    *n = (size_t)len;
    return (const char *)out;
}

/* The words of the well-formed s[0..n): the family's regexes cut it (after NFC when the family
 * normalizes), each word is encoded. */
static int encode_stretch(Encoder *e, const char *s, size_t n) {
    if (e->b->pretok.family->nfc && !(s = nfc(e, s, &n))) return -1;
    if (n > e->n_cuts) {
        uint32_t *cuts = realloc(e->cuts, n * sizeof *cuts);
        if (!cuts) return -1;
        e->cuts = cuts;
        e->n_cuts = n;
    }
    long n_words = bpe_pretok_split(&e->b->pretok, s, n, e->cuts);
    if (n_words < 0) return -1;
    for (long i = 0, from = 0; i < n_words; i++) {
        long to = e->cuts[i];
        if (encode_word(e, s + from, (int)(to - from)) != 0) return -1;
        from = to;
    }
    return 0;
}

/* Text between added tokens, text[start .. end): each well-formed UTF-8 stretch cut into words,
 * each byte that starts no character a word of its own. */
static int encode_plain(Encoder *e, size_t start, size_t end) {
    const unsigned char *u = (const unsigned char *)e->text;
    for (size_t at = start; at < end;) {
        size_t stretch = at;
        for (int n; stretch < end && (n = utf8_sequence(u + stretch, end - stretch)) > 0;)
            stretch += (size_t)n;
        if (stretch > at && encode_stretch(e, e->text + at, stretch - at) != 0) return -1;
        if (stretch < end) e->ids[e->n_ids++] = e->b->byte_ids[u[stretch]];
        at = stretch + 1;
    }
    return 0;
}

/* The added token that starts at s[0..n) and may be taken: the longest, user-defined always,
 * control ones with BPE_PARSE_SPECIAL; -1 if none. */
static int added_at(const Bpe *b, const char *s, size_t n, int flags) {
    int n_lengths = b->n_added_lengths ? b->n_added_lengths : b->max_token_bytes;
    for (int k = 0; k < n_lengths; k++) {
        size_t len = (size_t)(b->n_added_lengths ? b->added_lengths[k] : n_lengths - k);
        if (len > n) continue;
        int id = b->added_index[index_slot(b, b->added_index, s, len)];
        if (id >= 0 && (b->type[id] == BPE_TOKEN_USER_DEFINED || (flags & BPE_PARSE_SPECIAL)))
            return id;
    }
    return -1;
}

size_t bpe_max_ids(const Bpe *b, size_t len) {
    return (b->pretok.family->nfc ? 3 * len : len) + 1;
}

long bpe_encode(const Bpe *b, const char *text, size_t len, int flags, int *ids) {
    Encoder e = {.b = b, .text = text, .ids = ids};
    if ((flags & BPE_ADD_BOS) && b->add_bos && b->bos_id >= 0) ids[e.n_ids++] = b->bos_id;
    size_t slots = 64;
    while (slots < len / 2 && slots < (1u << 20)) slots *= 2; /* a word is ~4 bytes of prose */
    e.cache = calloc(slots, sizeof *e.cache);
    e.cache_mask = slots - 1;
    int rc = 0;
    size_t plain = 0; /* where the text since the last added token starts */
    for (size_t at = 0; rc == 0 && at < len; at++) {
        if (!b->added_first[(unsigned char)text[at]]) continue;
        int id = added_at(b, text + at, len - at, flags);
        if (id < 0) continue;
        rc = encode_plain(&e, plain, at);
        e.ids[e.n_ids++] = id;
        plain = at + token_len(b, id);
        at = plain - 1;
    }
    if (rc == 0) rc = encode_plain(&e, plain, len);
    for (int i = 0; i < e.n_normalized; i++) free(e.normalized[i]);
    free(e.normalized);
    free(e.cuts);
    free(e.cache);
    free(e.syms);
    free(e.heap);
    return rc == 0 ? e.n_ids : -1;
}

/* ----------------------------------------------------------------------------
 * Decoding */

const char *bpe_token_bytes(const Bpe *b, int id, size_t *len) {
    if (id < 0 || id >= b->vocab_size) {
        *len = 0;
        return "";
    }
    *len = token_len(b, id);
    return token_text(b, id);
}

/* How many bytes of the end of s[0..n) begin a UTF-8 character still missing bytes (0..3). */
static int incomplete_tail(const unsigned char *s, size_t n) {
    for (int back = 1; back <= 3 && (size_t)back <= n; back++) {
        unsigned c = s[n - back];
        if ((c & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        int need = c >= 0xC2 && c <= 0xDF   ? 2
                   : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4
                                            : 0;
        if (need <= back) return 0; /* complete, or not a lead byte */
        /* a prefix that no continuation can make well-formed goes out now: probe it with the
         * smallest second byte its lead allows, and 0x80 after */
        unsigned char probe[4] = {0x80, c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, 0x80, 0x80};
        probe[0] = (unsigned char)c;
        memcpy(probe, s + n - back, (size_t)back);
        return utf8_sequence(probe, 4) == need ? back : 0;
    }
    return 0;
}

size_t bpe_decode_stream(const Bpe *b, BpeStream *s, int id, char *out) {
    size_t len;
    const char *bytes = bpe_token_bytes(b, id, &len);
    memcpy(out, s->held, (size_t)s->n_held);
    memcpy(out + s->n_held, bytes, len);
    size_t n = (size_t)s->n_held + len;
    int hold = incomplete_tail((const unsigned char *)out, n);
    memcpy(s->held, out + n - (size_t)hold, (size_t)hold);
    s->n_held = hold;
    return n - (size_t)hold;
}

size_t bpe_stream_flush(BpeStream *s, char *out) {
    size_t n = (size_t)s->n_held;
    memcpy(out, s->held, n);
    s->n_held = 0;
    return n;
}
