/* Normalization kernels, fast and plain, and their selection.
 *
 * Every norm in the model is called through a NormFn, picked once by name; each has a plain twin
 * for the plain forward pass (reference.c). Adding a norm is its two functions here and one new
 * row in the table in norm.c (and, for a norm a model can be trained with, a header code in
 * format.c and nllm_format.py: docs/FORMAT.md).
 */
#ifndef NORM_H
#define NORM_H

/* Normalizes one vector: out = norm(x) * weight (+ bias).
 * out, x, weight, bias: (dim). out may alias x. bias may be NULL (no shift). eps is the norm's one
 * scalar, what norm_scalar says: eps (> 0) for most, a site's learned log eps or alpha for the
 * norms trained with one. The caller passes dim >= 1 and eps > 0 where it is eps; neither is
 * checked. */
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

/* RMSNorm with a learned bias (beta), a variant the articles propose: RMSNorm's output shifted,
 *   out[i] = weight[i] * (x[i] / sqrt(mean_j(x[j]^2) + eps)) + bias[i]
 * The sum as rmsnorm's; bias NULL means zero bias, which is rmsnorm bit for bit. */
void rmsnorm_bias(float *out, const float *x, const float *weight, const float *bias, int dim,
                  float eps);

/* RMSNorm with eps learned at each norm site, kept positive by its parametrization
 * eps = exp(log_eps) (log_eps any float; the file stores it, docs/FORMAT.md):
 *   out[i] = weight[i] * (x[i] / sqrt(mean_j(x[j]^2) + exp(log_eps)))
 * The last argument is the site's log_eps, not eps (norm_scalar: NORM_TAKES_LOG_EPS); the sum as
 * rmsnorm's, e^log_eps by expf. bias ignored. */
void rmsnorm_learned_eps(float *out, const float *x, const float *weight, const float *bias,
                         int dim, float log_eps);

/* Partial RMSNorm, pRMSNorm (Zhang & Sennrich 2019): the RMS estimated from the first
 * k = ceil(dim p) values only, p = 6.25% = 1/16 (the paper's k = ceil(n p); its code rounds
 * down, the same k whenever dim is a multiple of 16, and none at all below 16):
 *   out[i] = weight[i] * (x[i] / sqrt(mean_{j < k}(x[j]^2) + eps))
 * eps inside the root as rmsnorm's (the paper's equation has none); the sum as rmsnorm's over
 * k values; bias ignored. */
void prmsnorm(float *out, const float *x, const float *weight, const float *bias, int dim,
              float eps);

/* k of prmsnorm: ceil(dim / 16), at least 1 for dim >= 1. */
int prmsnorm_count(int dim);

/* Dynamic Tanh, DyT (Zhu, Chen, He, LeCun & Liu 2025): no statistics, an S-shaped squashing in
 * place of the norm,
 *   out[i] = weight[i] * tanh(alpha x[i]) + bias[i]
 * The last argument is the site's learned alpha (norm_scalar: NORM_TAKES_ALPHA); bias NULL
 * means zero bias. tanh(y) as 1 - 2 / (e^(2y) + 1) with simd.h's vec_exp: within 7 u (u = 2^-24)
 * of tanh absolutely (tests/test_norm.c derives it), saturating to +-1 exactly. */
void dyt(float *out, const float *x, const float *weight, const float *bias, int dim, float alpha);

/* No norm at all, the control: out = x. weight, bias and eps are not read. */
void identity_norm(float *out, const float *x, const float *weight, const float *bias, int dim,
                   float eps);

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
    float eps;                  /* its scalar, what norm_scalar(fn) says */
} NormCall;

/* Looks up a norm by its command-line name (norm_names()). Returns its function, or NULL for an
 * unknown name. */
NormFn norm_by_name(const char *name);

/* The command-line name of a norm function from norm_by_name, or "?" for any other pointer. */
const char *norm_name(NormFn fn);

/* The plain twin of a norm function from norm_by_name (its name with _ref in norm.c), or NULL
 * for any other pointer: the same equation in scalar C, top to bottom, in double (sums,
 * LayerNorm's variance in a second pass over x - mean, which cancels nothing, exp and tanh),
 * each output rounded once to fp32; shapes and bias as its twin's. The plain forward pass's
 * norms (reference.c), and the oracle of the fast ones (tests/test_norm.c). */
NormFn norm_plain(NormFn fn);

/* What a norm's last argument (NormFn's eps) is at each norm site of a model. */
typedef enum {
    NORM_TAKES_EPS,     /* eps: the file's norm_eps, the same at every site */
    NORM_TAKES_LOG_EPS, /* the site's learned log eps (rmsnorm_learned_eps), from the file */
    NORM_TAKES_ALPHA,   /* the site's learned alpha (dyt), from the file */
} NormScalar;

/* What fn's last argument is; NORM_TAKES_EPS for a pointer outside the table. */
NormScalar norm_scalar(NormFn fn);

/* 1 if fn adds its bias (layernorm, rmsnorm_bias, dyt), 0 if it ignores it. */
int norm_reads_bias(NormFn fn);

/* The known names joined by '|' ("rmsnorm|layernorm|...", in the table's order), for usage and
 * error messages. */
const char *norm_names(void);

/* norm_names() broken after a '|' into lines of at most `width` columns, for --help: the text
 * starts at column `indent`, each further line after `indent` spaces. */
const char *norm_names_wrapped(int indent, int width);

#endif
