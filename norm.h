/* Normalization kernels, fast and plain, and their selection.
 *
 * Every norm in the model is called through a NormFn, picked once by name; each has a plain twin
 * for the plain forward pass (reference.c). Adding a fourth norm is its two functions here and one
 * new row in the table in norm.c.
 */
#ifndef NORM_H
#define NORM_H

/* Normalizes one vector: out = norm(x) * weight (+ bias).
 * out, x, weight, bias: (dim). out may alias x. bias may be NULL (no shift). The caller passes
 * dim >= 1 and eps > 0; neither is checked. */
typedef void (*NormFn)(float *out, const float *x, const float *weight, const float *bias, int dim,
                       float eps);

/* RMSNorm (Zhang & Sennrich 2019, eq. 4), as llama2.c's rmsnorm and Meta's Llama reference:
 *   out[i] = weight[i] * (x[i] / sqrt(mean_j(x[j]^2) + eps))
 * Shapes as NormFn. The mean is accumulated in fp32 in vector lanes (simd.h), added up in a
 * fixed order; eps sits inside the square root. bias is ignored: RMSNorm has no shift. An all-zero
 * x gives an all-zero out (eps > 0). */
void rmsnorm(float *out, const float *x, const float *weight, const float *bias, int dim,
             float eps);

/* RMSNorm with eps outside the square root, a form found in some implementations:
 *   out[i] = weight[i] * (x[i] / (sqrt(mean_j(x[j]^2)) + eps))
 * Not what Llama was trained with; it is here so that the difference can be measured
 * (./run MODEL PROMPT --compare=rmsnorm,rmsnorm_eps_outside). Shapes as NormFn, bias ignored. */
void rmsnorm_eps_outside(float *out, const float *x, const float *weight, const float *bias,
                         int dim, float eps);

/* LayerNorm (Ba, Kiros & Hinton 2016, eq. 4; PyTorch's F.layer_norm with biased variance):
 *   mu = mean(x), var = mean((x - mu)^2)
 *   out[i] = weight[i] * (x[i] - mu) / sqrt(var + eps) + bias[i]
 * Shapes as NormFn; bias NULL means zero bias. fp32, by shifted data (Chan, Golub & LeVeque
 * 1983): the sums of d = x - shift and of d^2 (one pass), with shift the mean of the first 64
 * values (all of them when dim <= 64), give mean = shift + mean(d), var = mean(d^2) - mean(d)^2.
 * A large common offset (1e4 + N(0, 1)) therefore does not cancel the variance away, as
 * E[x^2] - E[x]^2 would. An all-zero x gives out = bias. */
void layernorm(float *out, const float *x, const float *weight, const float *bias, int dim,
               float eps);

/* A norm with its parameters: fn(out, x, weight, bias, dim, eps). */
typedef struct {
    NormFn fn;
    const float *weight, *bias; /* (dim); bias may be NULL */
    float eps;
} NormCall;

/* Looks up a norm by its command-line name ("rmsnorm", "layernorm", "rmsnorm_eps_outside").
 * Returns its function, or NULL for an unknown name. */
NormFn norm_by_name(const char *name);

/* The command-line name of a norm function from norm_by_name, or "?" for any other pointer. */
const char *norm_name(NormFn fn);

/* The plain twin of a norm function from norm_by_name (rmsnorm_ref, layernorm_ref and
 * rmsnorm_eps_outside_ref in norm.c), or NULL for any other pointer: the same equation in scalar C,
 * top to bottom, the sums in double (LayerNorm's variance in a second pass over x - mean, which
 * cancels nothing), each output rounded once to fp32; shapes and bias as its twin's. The plain
 * forward pass's norms (reference.c), and the oracle of the fast ones (tests/test_norm.c). */
NormFn norm_plain(NormFn fn);

/* The known names joined by '|' ("rmsnorm|layernorm|rmsnorm_eps_outside"), for usage and error
 * messages. */
const char *norm_names(void);

#endif
