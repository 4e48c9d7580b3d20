"""The error run's arithmetic makes, as a random model, so that a test can bound |run's logits -
an exact float64 forward pass| by a tolerance derived from that arithmetic rather than set around
a past measurement.

The sources, each an independent random variable of the size the arithmetic gives it:
- float32 rounding. Every operation rounds its result to the nearest float32: an error uniform
  within half a unit in the last place (ulp) of the result, none for a result float32 holds
  exactly (RoPE's angle pos * 1 of pair 0). A sum computed as one chain of multiply-adds in
  order (matmul.h: "each output is one chain of multiply-adds over the columns in order";
  attention's scores, sums and weighted values) has the error variance u^2/3 (sum of the
  products^2 + sum of the partial sums^2), u = 2^-24 (each multiply and add rounding with a
  relative error uniform in [-u, u]): exactly for a sum of positive terms, and for terms of
  either sign with each partial sum's expectation as a random walk (term j in every partial sum
  from j on; zero terms, as the future positions of causal attention, add nothing).
- q8_0's int16 inputs (matmul.h, quantize_input): each value of a product's input x rounded to a
  step of max |x| / 32767: an error uniform in +-step / 2, the same for every product of x.
- q4_0's int8 inputs (quantize_input_blocks): the step is max |x| / 127 over each block of 32
  values of x (the last block shorter).
- bf16's weights rounded to nearest (export.py): each weight moved by an error uniform within
  half a bf16 ulp (8 significant bits), fixed for the file (bf16_weights).
Each logit's error sums thousands of such terms: Gaussian, of a standard deviation that the
forward pass run K times with the errors drawn at random estimates (sigma; the float32 roundings
are drawn Gaussian of their variance, an operation of several roundings with the variance of as
many at its result's ulp). run's error is one
more draw from the same distribution, so |error| / sigma follows Student's t with K degrees of
freedom, and over n logits it stays below bound(K, n) but with probability 1e-3: the tolerance,
bound(K, n) * sigma for each logit, derived rather than measured.
"""
import math

import numpy as np

import forward_f64

U = 2.0 ** -24  # float32's unit roundoff


def sigma(draws):
    """The standard deviation of each logit's error over the draws (K, positions, vocab) of the
    logits minus the exact ones."""
    return np.sqrt((np.asarray(draws) ** 2).mean(axis=0))


def t_tail(k, x):
    """P(|T| > x) for Student's t with k degrees of freedom: the density integrated from x on, in
    the variable s = 1 / t (which makes the interval finite)."""
    log_c = math.lgamma((k + 1) / 2) - math.lgamma(k / 2) - 0.5 * math.log(k * math.pi)
    s = np.linspace(0.0, 1.0 / x, 20001)[1:]
    density = np.exp(log_c - (k + 1) / 2 * np.log1p(1 / (k * s * s))) / (s * s)
    return 2 * float(np.sum((density[1:] + density[:-1]) / 2 * np.diff(s)))


def bound(k, n, p=1e-3):
    """The x that n draws of |T| (k degrees of freedom) all stay below but with probability p
    (a union bound: n * P(|T| > x) = p), by bisection."""
    lo, hi = 1.0, 1e3
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if n * t_tail(k, mid) > p else (lo, mid)
    return hi


def float32_inputs(name, cols):
    return None


def int16_inputs(name, cols):
    return "int16"


def int8_inputs(name, cols):
    return "int8"


def quantized_inputs(dtype):
    """Draw's inputs for a normllama file's dtype code: int16 for q8_0 (2), int8 for q4_0 (4),
    float32 for the others."""
    return {2: int16_inputs, 4: int8_inputs}.get(dtype, float32_inputs)


class Draw(forward_f64.Arithmetic):
    """One random draw of run's arithmetic errors for forward_f64.logits. rounding: add float32's
    rounding errors; inputs(name, cols): "int16" or "int8" for a product whose inputs run
    quantizes (q8_0, q4_0), None for one it multiplies in float32."""

    def __init__(self, rng, rounding=True, inputs=float32_inputs):
        self.rng, self.rounding, self.inputs = rng, rounding, inputs
        self.last = (None, None)  # the input quantized last, and its quantized values

    def noise(self, variance):
        return self.rng.standard_normal(np.shape(variance), dtype=np.float32) * np.sqrt(variance)

    def chain(self, a, b):
        """a @ b, each sum along a's last axis one chain of multiply-adds in float32."""
        y = a @ b
        if not self.rounding:
            return y
        if b.ndim == 1:
            terms = a * b
            partial = np.cumsum(terms, axis=-1)
            variance = (terms * terms).sum(-1) + np.where(terms != 0, partial * partial, 0).sum(-1)
        else:
            # terms from j on, for nonzero terms followed by zeros alone (attention's causal rows)
            later = np.maximum((a != 0).sum(-1, keepdims=True) - np.arange(a.shape[-1]), 0)
            variance = ((a * a) * (1 + later)) @ (b * b)
        return y + self.noise(U * U / 3 * variance)

    def quantized(self, x, kind):
        """x plus the error of rounding it to int16 or to int8 blocks, drawn once per input."""
        if self.last[0] is not x:
            if kind == "int16":
                step = np.abs(x).max(axis=-1, keepdims=True) / 32767
            else:
                blocks = -(-x.shape[-1] // 32)
                padded = np.zeros(x.shape[:-1] + (blocks * 32,))
                padded[..., :x.shape[-1]] = np.abs(x)
                block_max = padded.reshape(x.shape[:-1] + (blocks, 32)).max(axis=-1)
                step = np.repeat(block_max / 127, 32, axis=-1)[..., :x.shape[-1]]
            self.last = (x, x + self.rng.uniform(-0.5, 0.5, x.shape) * step)
        return self.last[1]

    def product(self, name, w, x):
        kind = self.inputs(name, w.shape[1])
        return self.chain(x if kind is None else self.quantized(x, kind), w.T)

    def dot(self, a, b):
        return self.chain(a, b)

    def round(self, v, ops=1):
        if not self.rounding:
            return v
        single = np.abs(v).astype(np.float32)
        ulp = np.spacing(single)
        if ops == 1:  # a result float32 holds exactly is not rounded
            ulp = np.where(single == np.abs(v), 0, ulp)
        return v + self.noise(ops * ulp * ulp / 12)


def check(label, got, want, sig, k):
    """Asserts that every logit of got is within bound(k, got.size) sigmas (sig: each logit's,
    from k draws) of want, and prints the largest error against that bound."""
    ratio = np.abs(got - want) / sig
    limit = bound(k, ratio.size)
    worst = np.unravel_index(ratio.argmax(), ratio.shape)
    print(f"  {label}: max |logit - float64| {np.abs(got - want).max():.2e}, sigma "
          f"{np.median(sig):.1e} (median); largest error {ratio.max():.2f} sigma (position "
          f"{worst[0]}) against the derived bound {limit:.2f} sigma")
    assert ratio.max() <= limit, (label, ratio.max(), limit, worst)


def bf16_weights(t, rng):
    """The tensors t with each matrix weight moved by an error uniform within half a bf16 ulp
    (8 significant bits: ulp = 2^(floor(log2 |w|) - 7)), as rounding to nearest moves it."""
    out = dict(t)
    for name in ("token_embedding", "wq", "wk", "wv", "wo", "w1", "w2", "w3", "wcls"):
        if name in t:
            w = t[name]
            ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(w), 1e-30))) - 7)
            out[name] = w + rng.uniform(-0.5, 0.5, w.shape) * ulp
    return out


def draws(header, t, tokens, k, seed=0, **arithmetic):
    """k draws (k, positions, vocab_size) of forward_f64's logits with Draw(rng, **arithmetic)'s
    errors, minus the exact logits."""
    exact = forward_f64.logits(header, t, tokens)
    rng = np.random.default_rng(seed)
    return np.array([forward_f64.logits(header, t, tokens, Draw(rng, **arithmetic)) - exact
                     for _ in range(k)])
