#include "norm.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

void rmsnorm(float *out, const float *x, const float *weight, const float *bias, int dim,
             float eps) {
    (void)bias;
    float ss = 0.0f;
    for (int i = 0; i < dim; i++) ss += x[i] * x[i];
    float inv_rms = 1.0f / sqrtf(ss / dim + eps);
    for (int i = 0; i < dim; i++) out[i] = weight[i] * (inv_rms * x[i]);
}

void layernorm(float *out, const float *x, const float *weight, const float *bias, int dim,
               float eps) {
    float sum = 0.0f;
    for (int i = 0; i < dim; i++) sum += x[i];
    float mean = sum / dim;
    float ss = 0.0f;
    for (int i = 0; i < dim; i++) {
        float d = x[i] - mean;
        ss += d * d;
    }
    float inv_std = 1.0f / sqrtf(ss / dim + eps);
    for (int i = 0; i < dim; i++) {
        float y = weight[i] * (inv_std * (x[i] - mean));
        out[i] = bias ? y + bias[i] : y;
    }
}

static const struct {
    const char *name;
    NormFn fn;
} norms[] = {
    {"rmsnorm", rmsnorm},
    {"layernorm", layernorm},
};

#define N_NORMS (sizeof(norms) / sizeof(norms[0]))

NormFn norm_by_name(const char *name) {
    for (size_t i = 0; i < N_NORMS; i++)
        if (strcmp(norms[i].name, name) == 0) return norms[i].fn;
    return NULL;
}

const char *norm_name(NormFn fn) {
    for (size_t i = 0; i < N_NORMS; i++)
        if (norms[i].fn == fn) return norms[i].name;
    return "?";
}

const char *norm_names(void) {
    static char names[128];
    if (names[0] == '\0') {
        for (size_t i = 0; i < N_NORMS; i++) {
            if (i > 0) strcat(names, "|");
            strcat(names, norms[i].name);
        }
    }
    return names;
}
