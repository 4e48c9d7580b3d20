#!/usr/bin/env python3
"""The learning-rate sweep's picture, from tools/twins_lr.py's results.json: left, the final
validation loss against the peak learning rate (log x), a line per norm through the seeds' mean
and each seed a point, a diverged run an x at the top of the panel labelled with its step; right,
the validation loss of seed 1 against step at every learning rate (RMSNorm solid, LayerNorm
dashed, a colour per learning rate; a diverged run's line ends where it stopped).

usage: tools/plot_twins_lr.py build/twins_lr/results.json docs/twins_lr.png
"""
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"rmsnorm": "tab:blue", "layernorm": "tab:orange"}
STYLES = {"rmsnorm": "-", "layernorm": "--"}
NAMES = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}
OFFSET = {"rmsnorm": 0.96, "layernorm": 1.04}  # the two norms' points side by side on log x


def main(results_path, out):
    result = json.load(open(results_path))
    res, lrs = result["results"], sorted(result["results"], key=float)
    norms = [n for n in COLORS
             if any(n in runs for seeds in res.values() for runs in seeds.values())]
    fig, (by_lr, by_step) = plt.subplots(1, 2, figsize=(12, 4.6))
    finals = [r["val_loss"] for seeds in res.values() for runs in seeds.values()
              for r in runs.values() if r["val_loss"] is not None]
    top = max(finals + [result["unigram"]]) + 0.3
    for norm in norms:
        xs, means = [], []
        for lr in lrs:
            x = float(lr) * OFFSET[norm]
            runs = [seeds[norm] for seeds in res[lr].values() if norm in seeds]
            losses = [r["val_loss"] for r in runs if r["val_loss"] is not None]
            by_lr.scatter([x] * len(losses), losses, color=COLORS[norm], s=18, alpha=0.7)
            for r in runs:
                if r["diverged_step"] is not None:
                    by_lr.scatter([x], [top], marker="x", color=COLORS[norm], s=50)
                    by_lr.annotate(str(r["diverged_step"]), (x, top), fontsize=7,
                                   color=COLORS[norm], xytext=(3, -10 if norm == "rmsnorm" else 4),
                                   textcoords="offset points")
            if runs and len(losses) == len(runs):  # the line joins the lrs no seed diverged at
                xs.append(x)
                means.append(statistics.mean(losses))
        by_lr.plot(xs, means, color=COLORS[norm], linestyle=STYLES[norm], label=NAMES[norm])
    by_lr.axhline(result["unigram"], color="gray", linestyle=":", linewidth=1,
                  label=f"unigram level {result['unigram']:.2f}")
    by_lr.scatter([], [], marker="x", color="gray", label="diverged (at step)")
    by_lr.set_xscale("log")
    by_lr.set_ylim(top=top + 0.25)
    by_lr.set_xlabel("peak learning rate (AdamW, warmup then cosine)")
    by_lr.set_ylabel("final validation loss, nats/token")
    by_lr.legend(fontsize=8)
    cmap = plt.get_cmap("viridis")
    for i, lr in enumerate(lrs):
        color = cmap(i / max(1, len(lrs) - 1))
        for norm in norms:
            r = res[lr].get("1", {}).get(norm)
            if r is None:
                continue
            if r["eval"]:
                steps, loss = zip(*r["eval"])
                by_step.plot(steps, loss, color=color, linestyle=STYLES[norm], linewidth=1.3,
                             label=f"lr {lr}" if norm == norms[0] else None)
            if r["diverged_step"] is not None:
                by_step.axvline(r["diverged_step"], color=color, linestyle=STYLES[norm],
                                linewidth=0.8, alpha=0.6)
    by_step.set_xlabel("optimizer step (seed 1; solid RMSNorm, dashed LayerNorm; a vertical "
                       "line: diverged)", fontsize=8)
    by_step.set_ylabel("validation loss, nats/token")
    by_step.legend(fontsize=7, ncol=2)
    for ax in (by_lr, by_step):
        ax.grid(alpha=0.3)
    a = result["args"]
    fig.suptitle(f"Learning-rate sweep of the twins: {a['steps']} steps of {a['batch_size']} x 256 "
                 f"tokens, {a['warmup']} of warmup, {len(a['seeds'])} seeds, the same init and "
                 "batches", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: tools/plot_twins_lr.py RESULTS.json OUT.png")
    main(*sys.argv[1:])
