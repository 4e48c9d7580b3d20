/* Loading a checkpoint (load.h): the memory map and the return of its pages, the tensors read
 * out of it by the layout (format.c tells the layout from the header), llama2.c version 2's
 * dequantization, and the packing of every matrix into panels (panel.h's layout) in 2 MiB pages.
 * The run state's memory is state.c's; what the weights compute is model.c's.
 */
#define _DEFAULT_SOURCE /* MADV_DONTNEED */
#include "load.h"

#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "align.h"
#include "format.h"
#include "panel.h"
#include "state.h"

/* ----------------------------------------------------------------------------
 * The tensors, out of the map */

/* A TENSOR_AK42_F32's pieces dequantized into `owned`: value j of a piece times the scale of
 * its group j / group_size. Points the matrix's values there. */
static void dequantize_ak42(const TensorSpec *t, const char *piece, uint64_t gs, float *owned) {
    uint64_t n = t->numel / t->parts;
    *t->mat = owned;
    for (uint64_t p = 0; p < t->parts; p++, piece += ak42_piece_bytes(n, gs)) {
        const int8_t *q = (const int8_t *)piece;
        const char *scales = piece + n; /* not float-aligned in general */
        for (uint64_t g = 0; g < n / gs; g++) {
            float scale;
            memcpy(&scale, scales + g * sizeof(float), sizeof(float));
            for (uint64_t j = g * gs; j < (g + 1) * gs; j++) owned[j] = q[j] * scale;
        }
        owned += n;
    }
}

/* The file map: where it starts and its size. */
typedef struct {
    const char *start;
    size_t size;
} Map;

/* Gives the map's pages back to the OS: the page cache still holds them, but they leave this
 * process's resident memory, which would otherwise peak at the weights twice. A read-only map's
 * pages given back are read again from the page cache if touched. */
static void release_map(const Map *map) {
    madvise((void *)map->start, map->size, MADV_DONTNEED);
}

/* Gives back the whole pages of the map from `from` to `to`. */
static void release_pages(const char *from, const char *to) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t first = ((uintptr_t)from + page - 1) / page * page, end = (uintptr_t)to / page * page;
    if (end > first) madvise((void *)first, end - first, MADV_DONTNEED);
}

/* Sets every tensor's pointer: the norms' into `norms` (layout_norm_floats), copied there; the
 * matrices' into the map, or for llama2.c version 2's int8 with groups across rows into `owned`
 * (owned_bytes each), dequantized there. A version 2 q8_0 matrix's scales
 * follow its first layer's values: its groups lie within rows, so a piece's scales in order are
 * its rows' groups in order, (rows, cols / group_size) as q8_0's; and with a group size of 32 or
 * 64 every piece's values and scales take a multiple of 4 bytes (read_ak42 checks that a piece
 * holds whole groups), so the scales are float-aligned. Only called once layout_end has matched
 * the file size, so every read is inside the map. */
static void layout_place(const Layout *l, const char *map, char *owned, float *norms) {
    uint64_t off = l->start;
    for (int i = 0; i < l->n; i++) {
        const TensorSpec *t = &l->tensors[i];
        if (t->pieces) { /* GGUF: a norm's layers, each a tensor of its own */
            *t->vec = norms;
            for (uint64_t p = 0; p < t->parts; p++, norms += t->numel / t->parts)
                memcpy(norms, t->pieces[p], t->numel / t->parts * sizeof(float));
            continue;
        }
        off = align_up(off, l->align);
        const char *data = map + off;
        uint64_t bytes = tensor_bytes(t, l->group_size);
        if (t->kind == TENSOR_NORM) {
            memcpy(norms, data, bytes);
            *t->vec = norms;
            norms += t->numel;
        } else if (t->kind == TENSOR_AK42_F32) {
            dequantize_ak42(t, data, l->group_size, (float *)owned);
            release_pages(data, data + bytes); /* packing reads the copy */
            owned += owned_bytes(t);
        } else if (t->kind == TENSOR_AK42_Q8) {
            *t->mat = data;
            *t->vec = (const float *)(data + t->numel / t->parts);
        } else {
            if (t->vec) *t->vec = (const float *)data;
            if (t->mat) *t->mat = data;
        }
        off += bytes;
    }
}

/* ----------------------------------------------------------------------------
 * Packing: the file's row-major matrices into panels (panel.h, Matrix) */

/* The first write to a page has the kernel zero all of it, the slow part of allocating (about
 * 1.5 GB/s on one thread on the VMs measured here): done here in parallel at load rather than in
 * the first forward passes. */
static void fault_in(char *p, size_t bytes) {
    size_t whole = bytes / HUGE_PAGE * HUGE_PAGE;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
#pragma omp parallel for schedule(static, 1)
    for (size_t off = 0; off < whole; off += HUGE_PAGE) p[off] = 0;
    for (size_t off = whole; off < bytes; off += page) p[off] = 0;
}

/* The file's bytes packed among the threads between two returns of the map's pages (release_map):
 * what of the map is resident meanwhile is the page-cache folios the chunk's reads touched, each
 * mapped whole (2 MiB ones on the Linux 6.18 measured), at most two for a chunk within one layer's
 * tensor (64 panels at a time had held 11.5 MiB of a 1.1B f32 file's w2, which put the run's peak
 * 8 MiB over the weights + used kv cache + 10 MiB bound). */
#define PACK_CHUNK_BYTES (1u << 20)

/* Whether a GGUF source's layers are of different K-quants (format_gguf.c's join), each then held
 * in its own dtype: its Matrix's layers, one matrix a layer. */
static int mixed(const Source *src) {
    for (int l = 0; l < src->layers && src->layer_tensors; l++)
        if (src->layer_tensors[l].type->dtype != src->matrix->dtype &&
            dtype_kquant(src->matrix->dtype))
            return 1;
    return 0;
}

/* Layer l of a mixed source as a source of its own: one layer, its matrix `one` (set here) in the
 * layer's dtype. */
static Source layer_source(const Source *src, int l, Matrix *one) {
    const Matrix *m = src->matrix;
    matrix_init(one, src->layer_tensors[l].type->dtype, m->rows, m->cols, 0);
    Source s = *src;
    s.matrix = one;
    s.layers = 1;
    s.layer_tensors = &src->layer_tensors[l];
    return s;
}

/* Bytes of the whole stack of a source's matrix in panels, rounded up to a cache line; a mixed
 * source's, its layers' matrices first, then each layer's panels. */
static size_t packed_bytes(const Source *src) {
    const Matrix *m = src->matrix;
    if (!mixed(src)) return round_up_64((size_t)src->layers * m->n_panels * m->panel_bytes);
    size_t bytes = round_up_64(src->layers * sizeof(Matrix));
    for (int l = 0; l < src->layers; l++) {
        Matrix one;
        Source s = layer_source(src, l, &one);
        bytes += packed_bytes(&s);
    }
    return bytes;
}

/* Layer l's values and scales in a source. */
static const char *layer_values(const Source *src, int l) {
    return (const char *)src->values + l * src->value_stride;
}

static const float *layer_scales(const Source *src, int l) {
    return (const float *)((const char *)src->scales + l * src->scale_stride);
}

/* ----------------------------------------------------------------------------
 * A GGUF source's rows, each layer a tensor of its own type (format.h's LayerTensor), read into
 * its matrix's dtype as dtype.h's GgufReading says */

/* Bytes of a row of cols values of a GGUF type in the file. */
static size_t gguf_row_bytes(uint32_t type, int cols) {
    return (size_t)cols / gguf_tensor_types[type].values * gguf_tensor_types[type].bytes;
}

/* The file's row holding row `row` of a source's matrix: the same, or with rotate_half (format.h)
 * row 2i of a head from file row i, row 2i + 1 from file row head_size / 2 + i. */
static int file_row(const Source *src, int row) {
    int d = src->rotate_half;
    if (d == 0) return row;
    int k = row % d;
    return row - k + (k % 2 ? d / 2 + k / 2 : k / 2);
}

/* Whether layer l of a GGUF source is packed from the map as it is: its type's row layout is its
 * matrix's dtype's, in the same row order. */
static int gguf_in_place(const Source *src, int l) {
    const GgufDType *t = src->layer_tensors[l].type;
    return t->reading == GGUF_IN_PLACE && t->dtype == src->matrix->dtype && !src->rotate_half;
}

/* One thread's scratch for a panel of a GGUF source's rows in its matrix's dtype's row layout
 * (values, and scales for q8_0 and q4_0), and one row as float32 on its way to q8_0. */
typedef struct {
    char *values;
    float *scales;
    float *row;
} PanelScratch;

/* Row `row` of layer l of a GGUF source into values and scales, in its matrix's dtype's row
 * layout: copied, repacked, or decoded to float32 (and for q8_0 quantized from there). */
static void read_gguf_row(const Source *src, int l, int row, char *values, float *scales,
                          float *f32) {
    const Matrix *m = src->matrix;
    const GgufDType *t = src->layer_tensors[l].type;
    const uint8_t *data = src->layer_tensors[l].data +
                          (size_t)file_row(src, row) * gguf_row_bytes(t->ggml_type, m->cols);
    if (t->dtype == m->dtype && t->reading == GGUF_IN_PLACE) {
        memcpy(values, data, dtype_row_bytes(m->dtype, m->cols));
    } else if (t->dtype == m->dtype && t->reading == GGUF_REPACKED) {
        t->repack(data, m->cols, values, scales);
    } else if (m->dtype == DTYPE_F32) { /* a stack joining layers of different dtypes */
        t->to_f32(data, m->cols, (float *)values);
    } else { /* q8_0: a converted type, or q4_0 layers joined with q8_0 ones */
        t->to_f32(data, m->cols, f32);
        quantize_q8_0_row(f32, m->cols, m->group_size, (int8_t *)values, scales);
    }
}

/* Packs panel p of layer l of a GGUF source into dst, its rows first read into scratch. */
static void pack_gguf_panel(const Source *src, char *dst, int l, int p, const PanelScratch *s) {
    const Matrix *m = src->matrix;
    int first = p * PANEL_ROWS, n_rows = matrix_panel_rows(m, p);
    size_t row_bytes = dtype_row_bytes(m->dtype, m->cols);
    int n_groups = matrix_row_groups(m);
    for (int r = 0; r < n_rows; r++)
        read_gguf_row(src, l, first + r, s->values + r * row_bytes, s->scales + r * n_groups,
                      s->row);
    DTYPES[m->dtype].pack(m, dst, s->values, s->scales, 0, n_rows);
}

/* Scratch for each thread packing a GGUF source that is not read in place (NULL when every layer
 * is, or out of memory: *failed set). One block, freed with free(). */
static PanelScratch *scratch_alloc(const Source *src, int threads, int *failed) {
    const Matrix *m = src->matrix;
    int needed = 0;
    for (int l = 0; l < src->layers && src->layer_tensors; l++) needed |= !gguf_in_place(src, l);
    *failed = 0;
    if (!needed) return NULL;
    size_t values = PANEL_ROWS * dtype_row_bytes(m->dtype, m->cols);
    size_t scales = PANEL_ROWS * ((size_t)m->cols / 32 + 1) * sizeof(float);
    size_t row = (size_t)m->cols * sizeof(float);
    size_t each = round_up_64(values + scales + row);
    PanelScratch *s = malloc(threads * (sizeof(*s) + each));
    if (!s) {
        *failed = 1;
        return NULL;
    }
    char *at = (char *)(s + threads);
    for (int i = 0; i < threads; i++, at += each)
        s[i] = (PanelScratch){at, (float *)(at + values), (float *)(at + values + scales)};
    return s;
}

/* Whether a source's scales lie apart from its values in the map (a normllama or version 2 q8_0
 * or q4_0 matrix), so that pack_matrix copies each chunk's scales out first. */
static int scales_apart(const Source *src) {
    return src->scales && !src->layer_tensors;
}

/* The scales of panels q0 .. q1 - 1 (one layer's) of a scales_apart source copied into `out`,
 * and the map's pages given back: packing the chunk then holds the folios of its values alone.
 * With the folios of both tensors mapped, the 1.1B q8_0 .nllm had peaked 0.7-0.9 MiB over the
 * weights + used kv cache + 10 MiB bound (docs/BENCH.md, 2026-12-05). */
static void copy_chunk_scales(const Source *src, int q0, int q1, float *out, const Map *map) {
    const Matrix *m = src->matrix;
    int n_panels = m->n_panels, first = q0 % n_panels * PANEL_ROWS;
    int end = (q1 - 1) % n_panels * PANEL_ROWS + PANEL_ROWS;
    size_t n_groups = matrix_row_groups(m);
    int rows = (end < m->rows ? end : m->rows) - first;
    memcpy(out, layer_scales(src, q0 / n_panels) + first * n_groups,
           rows * n_groups * sizeof(float));
    release_map(map);
}

/* Packs panel q of a source into dst (panel_bytes); scratch: this thread's, for a GGUF source's
 * layers not read in place; chunk_scales: for a scales_apart source, copy_chunk_scales' copy of
 * the scales of the chunk from panel q0 on. pack_matrix numbers the panels of all layers together:
 * panel q is panel q % n_panels of layer q / n_panels. */
static void pack_panel(const Source *src, char *dst, int q, const PanelScratch *scratch,
                       const float *chunk_scales, int q0) {
    const Matrix *m = src->matrix;
    int layer = q / m->n_panels, p = q % m->n_panels;
    if (src->layer_tensors && !gguf_in_place(src, layer)) {
        pack_gguf_panel(src, dst, layer, p, scratch);
    } else if (src->layer_tensors) {
        matrix_pack_panel(m, dst, src->layer_tensors[layer].data, NULL, p);
    } else if (chunk_scales) { /* the panel's rows from the layer's first row in both */
        int first = p * PANEL_ROWS, n_rows = matrix_panel_rows(m, p);
        size_t n_groups = matrix_row_groups(m);
        const char *values = layer_values(src, layer) + first * dtype_row_bytes(m->dtype, m->cols);
        const float *scales = chunk_scales + (size_t)(q - q0) * PANEL_ROWS * n_groups;
        DTYPES[m->dtype].pack(m, dst, values, scales, 0, n_rows);
    } else {
        matrix_pack_panel(m, dst, layer_values(src, layer), layer_scales(src, layer), p);
    }
}

/* Packs a source's stack of matrices into dst (packed_bytes(src)) and points its Matrix there:
 * PACK_CHUNK_BYTES of panels at a time (at least 2, one per thread), never past a layer's end,
 * among the threads (the slow part is the page faults: each file page is read in as it is first
 * touched, and where the OS gave no 2 MiB pages, each new page of dst that fault_in did not reach
 * is zeroed as it is first written), giving all the map's pages back after each chunk. A fault
 * maps the page-cache folio around it, before and past the rows read: given back only up to the
 * rows packed, the folios at a GGUF layer tensor's ends had stayed mapped, and a chunk across two
 * layers held three 2 MiB folios, which put 1.1B f32, f16 and q4_0 GGUFs' peaks up to 2.8 MiB
 * over the bound (docs/BENCH.md, 2026-12-04, 18:30). */
static int pack_layers(const Source *src, char *dst, const Map *map);

static int pack_matrix(const Source *src, char *dst, const Map *map) {
    if (mixed(src)) return pack_layers(src, dst, map);
    Matrix *m = src->matrix;
    m->data = dst;
    int threads = omp_get_max_threads(), failed;
    PanelScratch *scratch = scratch_alloc(src, threads, &failed);
    if (failed) return -1;
    int n_panels = src->layers * m->n_panels;
    int chunk =
        PACK_CHUNK_BYTES / m->panel_bytes > 2 ? (int)(PACK_CHUNK_BYTES / m->panel_bytes) : 2;
    float *chunk_scales = NULL;
    if (scales_apart(src)) {
        size_t n_groups = matrix_row_groups(m);
        chunk_scales = malloc((size_t)chunk * PANEL_ROWS * n_groups * sizeof(float));
        if (!chunk_scales) {
            free(scratch);
            return -1;
        }
    }
    for (int q0 = 0, q1; q0 < n_panels; q0 = q1) {
        int layer_end = (q0 / m->n_panels + 1) * m->n_panels;
        q1 = layer_end - q0 < chunk ? layer_end : q0 + chunk;
        if (chunk_scales) copy_chunk_scales(src, q0, q1, chunk_scales, map);
#pragma omp parallel for
        for (int q = q0; q < q1; q++)
            pack_panel(src, dst + (size_t)q * m->panel_bytes, q,
                       scratch ? &scratch[omp_get_thread_num()] : NULL, chunk_scales, q0);
        release_map(map);
    }
    free(chunk_scales);
    free(scratch);
    return 0;
}

/* Packs a mixed source (packed_bytes' layout at dst): each layer as a matrix of its own, which
 * the stack's layers point to. */
static int pack_layers(const Source *src, char *dst, const Map *map) {
    Matrix *layers = (Matrix *)dst;
    dst += round_up_64(src->layers * sizeof(Matrix));
    for (int l = 0; l < src->layers; l++) {
        Source s = layer_source(src, l, &layers[l]);
        if (pack_matrix(&s, dst, map) != 0) return -1;
        dst += packed_bytes(&s);
    }
    src->matrix->layers = layers;
    src->matrix->data = layers[0].data;
    return 0;
}

/* Packs every source of the layout (its tensors in the map of size bytes) into one allocation of
 * panels_alloc, m->packed. Returns -1 when out of memory. */
static int pack_weights(Model *m, const Layout *l, const Map *map) {
    size_t total = 0;
    for (int i = 0; i < l->n_sources; i++) total += packed_bytes(&l->sources[i]);
    char *packed = panels_alloc(total);
    if (!packed) return -1;
    m->packed = packed;
    fault_in(packed, total);
    release_map(map); /* the header's and the norms' pages */
    for (int i = 0; i < l->n_sources; i++) {
        if (pack_matrix(&l->sources[i], packed, map) != 0) return -1;
        packed += packed_bytes(&l->sources[i]);
    }
    return 0;
}

/* ----------------------------------------------------------------------------
 * The map and the entry points (load.h) */

/* Formats "<path>: <what>" into err, where `what` comes from a check's own message. */
static int fail(char *err, size_t errlen, const char *path, const char *what) {
    snprintf(err, errlen, "%s: %s", path, what);
    return -1;
}

/* Reads the header and the layout (read_layout), then sets the weights: the norms copied into
 * m->norms, the matrices packed into m->packed; nothing points into the map afterwards. */
static int load_weights(Model *m, const char *map, size_t size, char *what, size_t whatlen) {
    Layout l;
    if (read_layout(m, map, size, &l, what, whatlen) != 0) {
        layout_free(&l);
        return -1;
    }
    uint64_t owned_size = layout_owned_bytes(&l);
    char *owned = NULL;
    if (owned_size > 0 && !(owned = malloc(owned_size))) {
        snprintf(what, whatlen, "out of memory for %llu bytes of converted weights",
                 (unsigned long long)owned_size);
        layout_free(&l);
        return -1;
    }
    if (!(m->norms = malloc(layout_norm_floats(&l) * sizeof(float)))) {
        free(owned);
        layout_free(&l);
        snprintf(what, whatlen, "out of memory for the norms' weights");
        return -1;
    }
    layout_place(&l, map, owned, m->norms);
    int rc = pack_weights(m, &l, &(Map){map, size});
    free(owned);
    snprintf(m->converted, sizeof(m->converted), "%s", l.converted);
    layout_free(&l);
    if (rc != 0) {
        snprintf(what, whatlen, "out of memory for the weights");
        return -1;
    }
    if (m->config.shared_classifier) m->weights.wcls = m->weights.token_embedding;
    return 0;
}

/* Maps the checkpoint at path read-only into *map, its size into *size. On failure writes
 * "<path>: <problem>" into err[errlen]. */
static int map_file(const char *path, char **map, size_t *size, char *err, size_t errlen) {
    char what[256];
    int fd = open(path, O_RDONLY | O_NONBLOCK); /* a FIFO must not block before the check below */
    if (fd < 0) {
        snprintf(what, sizeof(what), "cannot open model: %s", strerror(errno));
        return fail(err, errlen, path, what);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, errlen, path, "not a regular file");
    }
    *size = (size_t)st.st_size;
    if (*size == 0) {
        close(fd);
        return fail(err, errlen, path, "model file is empty");
    }
    if (*size < sizeof(uint32_t)) {
        close(fd);
        return fail(err, errlen, path, "model file is shorter than its 4-byte magic");
    }
    void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping stays valid */
    if (p == MAP_FAILED) {
        snprintf(what, sizeof(what), "cannot map model: %s", strerror(errno));
        return fail(err, errlen, path, what);
    }
    *map = p;
    return 0;
}

/* A file mapped and its layout read, for the readers that need no weights. */
typedef struct {
    char *map;
    size_t size;
    Model m; /* a scratch model for read_layout: its config */
    Layout l;
} Scan;

static void scan_close(Scan *s) {
    layout_free(&s->l);
    munmap(s->map, s->size);
}

/* Maps the file at path and reads its layout into s; 0, or -1 with model_load's message in err
 * (nothing to close). */
static int scan_open(Scan *s, const char *path, char *err, size_t errlen) {
    memset(s, 0, sizeof(*s));
    if (map_file(path, &s->map, &s->size, err, errlen) != 0) return -1;
    char what[512];
    if (read_layout(&s->m, s->map, s->size, &s->l, what, sizeof(what)) == 0) return 0;
    fail(err, errlen, path, what);
    scan_close(s);
    return -1;
}

int model_read_config(Config *c, const char *path, char *err, size_t errlen) {
    Scan s;
    if (scan_open(&s, path, err, errlen) != 0) return -1;
    *c = s.m.config;
    scan_close(&s);
    return 0;
}

int model_read_vocabulary(Vocab *v, const char *path, char *err, size_t errlen) {
    Scan s;
    if (scan_open(&s, path, err, errlen) != 0) return -1;
    const Layout *l = &s.l;
    int rc = 1;
    if (l->has_vocab && l->gguf)
        rc = vocab_from_gguf(v, l->gguf, path, err, errlen);
    else if (l->has_vocab &&
             (rc = tokenizer_load_bytes(&v->sp, (const unsigned char *)s.map + l->vocab_offset,
                                        l->vocab_bytes, path, err, errlen)) == 0) {
        v->sp.remove_extra_whitespaces = l->vocab_flags & 1;
        *v = vocab_sentencepiece(&v->sp);
    }
    scan_close(&s);
    return rc;
}

int model_read_chat_template(char **tmpl, const char *path, char *err, size_t errlen) {
    *tmpl = NULL;
    Scan s;
    if (scan_open(&s, path, err, errlen) != 0) return -1;
    const Gguf *g = s.l.gguf;
    const char *key = "tokenizer.chat_template";
    char what[512];
    GgufString text;
    int rc = -1;
    if (!g || !gguf_find(g, key))
        rc = 1;
    else if (gguf_get_string(g, key, &text, what, sizeof(what)) != 0)
        fail(err, errlen, path, what);
    else if (memchr(text.s, '\0', text.len))
        fail(err, errlen, path, "tokenizer.chat_template holds a NUL byte");
    else if (!(*tmpl = strndup(text.s, text.len)))
        fail(err, errlen, path, "out of memory for tokenizer.chat_template");
    else
        rc = 0;
    scan_close(&s);
    return rc;
}

int model_load(Model *m, const char *path, char *err, size_t errlen) {
    memset(m, 0, sizeof(*m));
    char *map;
    size_t size;
    if (map_file(path, &map, &size, err, errlen) != 0) return -1;
    char what[512];
    int rc = load_weights(m, map, size, what, sizeof(what));
    /* every weight is copied: the file is not read again, so that changing or truncating it while
     * the model runs does no harm (a read of a truncated map's page faults with SIGBUS) */
    munmap(map, size);
    if (rc != 0) {
        model_free(m);
        return fail(err, errlen, path, what);
    }
    model_set_norm(m, m->config.trained_norm);
    if (state_alloc(&m->state, &m->config, m->weights.rope_freqs, size) != 0) {
        model_free(m);
        return fail(err, errlen, path, "out of memory for the run state and kv cache");
    }
    return 0;
}

void model_free(Model *m) {
    free(m->norms);
    free(m->packed);
    state_free(&m->state);
    memset(m, 0, sizeof(*m));
}
