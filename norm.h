/* Normalization kernels and their selection.
 *
 * Every norm in the model is called through a NormFn, picked once by name. Adding a third norm
 * is one new function here and one new row in the table in norm.c.
 */
#ifndef NORM_H
#define NORM_H

/* Normalizes one vector: out = norm(x) * weight (+ bias).
 * out, x, weight, bias: (dim,). out may alias x. bias may be NULL (no shift). eps > 0. */
typedef void (*NormFn)(float *out, const float *x, const float *weight, const float *bias, int dim,
                       float eps);

/* RMSNorm (Zhang & Sennrich 2019, eq. 4), as llama2.c's rmsnorm and Meta's Llama reference:
 *   out[i] = weight[i] * (x[i] / sqrt(mean_j(x[j]^2) + eps))
 * Shapes as NormFn. The mean is accumulated in fp32; eps sits inside the square root.
 * bias is ignored: RMSNorm has no shift. An all-zero x gives an all-zero out (eps > 0). */
void rmsnorm(float *out, const float *x, const float *weight, const float *bias, int dim,
             float eps);

/* LayerNorm (Ba, Kiros & Hinton 2016, eq. 4; PyTorch's F.layer_norm with biased variance):
 *   mu = mean(x), var = mean((x - mu)^2)
 *   out[i] = weight[i] * (x[i] - mu) / sqrt(var + eps) + bias[i]
 * Shapes as NormFn; bias NULL means zero bias. Two passes in fp32 (mean first, then the centred
 * squares), so a large common offset does not cancel the variance away. */
void layernorm(float *out, const float *x, const float *weight, const float *bias, int dim,
               float eps);

/* Looks up a norm by its command-line name ("rmsnorm", "layernorm").
 * Returns its function, or NULL for an unknown name. */
NormFn norm_by_name(const char *name);

/* The command-line name of a norm function from norm_by_name, or "?" for any other pointer. */
const char *norm_name(NormFn fn);

/* The known names joined by '|' ("rmsnorm|layernorm"), for usage and error messages. */
const char *norm_names(void);

#endif
