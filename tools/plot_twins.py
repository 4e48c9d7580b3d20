#!/usr/bin/env python3
"""The twin study's picture: validation loss against step and against training wall-clock time,
one line per model and seed (a colour per norm: RMSNorm blue, LayerNorm orange, the siblings
others), from tools/twins.py's results.json.

usage: tools/plot_twins.py build/twins/results.json docs/twins_loss.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"rmsnorm": "tab:blue", "layernorm": "tab:orange", "rmsnorm_bias": "tab:green",
          "rmsnorm_learned_eps": "tab:red", "prmsnorm": "tab:purple", "dyt": "tab:brown",
          "identity": "tab:gray"}
STYLES = ["-", "--", ":", "-."]


def main(results_path, out):
    result = json.load(open(results_path))
    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    # the first evaluation (ln 512 = 6.24, before any step) would flatten the rest
    later = [e[2] for twins in result["results"].values() for r in twins.values()
             for e in r["eval"][1:]]
    for i, (seed, twins) in enumerate(sorted(result["results"].items())):
        for norm, r in twins.items():
            steps, seconds, loss = zip(*r["eval"])
            label = f"{norm}, seed {seed}"
            style = dict(color=COLORS[norm], linestyle=STYLES[i % len(STYLES)], linewidth=1.4)
            by_step.plot(steps, loss, label=label, **style)
            by_time.plot(seconds, loss, label=label, **style)
    by_step.set_xlabel("optimizer step")
    by_time.set_xlabel("training wall clock, s (1 thread, shared 2-core machine)")
    by_step.set_ylabel("validation loss, nats/token")
    for ax in (by_step, by_time):
        ax.grid(alpha=0.3)
    if later:
        by_step.set_ylim(min(later) - 0.05, max(later) + 0.05)
    by_time.legend(fontsize=8)
    a = result["args"]
    shape = result.get("shape", {"dim": 64, "n_layers": 5})  # results.json before --dim had none
    norms = result.get("norms", ["rmsnorm", "layernorm"])
    fig.suptitle(f"dim {shape['dim']}, {shape['n_layers']} layers: {a['steps']} steps of "
                 f"{a['batch_size']} x 256 tokens, the same init and batches, "
                 f"{' vs '.join(norms)}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: tools/plot_twins.py RESULTS.json OUT.png")
    main(*sys.argv[1:])
