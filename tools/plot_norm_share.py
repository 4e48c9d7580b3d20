#!/usr/bin/env python3
"""docs/norm_share.png from tools/norm_share.py's JSON: the norms' share of a training step
against width (one line per norm and sequence length) and run --profile's points, against the
articles' 15%.

usage: /usr/bin/python3 tools/plot_norm_share.py SHARE.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from norm_share import NORMS  # noqa: E402 (tools/, this file's directory)


def plot(result, path):
    fig, ax = plt.subplots(figsize=(7, 4.2))
    styles = {"rmsnorm": "o-", "layernorm": "s--", "layernorm_fused": "^:"}
    for seq_len in sorted({r["seq_len"] for r in result["train"]}):
        for norm in NORMS:
            rows = [r for r in result["train"] if r["seq_len"] == seq_len and r["norm"] == norm]
            if rows:
                ax.plot([r["dim"] for r in rows], [100 * r["share"] for r in rows], styles[norm],
                        label=f"train, {norm}, {seq_len} positions",
                        color="C0" if seq_len == 256 else "C1")
    for i, r in enumerate(result.get("inference", [])):
        ax.plot([r["dim"]], [100 * r["share"]], "kx" if r["norm"] == "rmsnorm" else "k+",
                markersize=9, label=f"run --profile, {r['norm']}" if i < 2 else None)
    ax.axhline(15, color="grey", linewidth=0.8)
    ax.text(64, 14.3, "the articles' 15% (LLaMA 7B, eager, GPU)", color="grey", fontsize=8)
    ax.set_ylim(bottom=0, top=16)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("dim (width)")
    ax.set_ylabel("norms' share of the time, %")
    ax.set_title("Norms' share: training step (PyTorch eager, 1 thread) and run's inference")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: tools/plot_norm_share.py SHARE.json OUT.png")
    with open(sys.argv[1]) as f:
        plot(json.load(f), sys.argv[2])


if __name__ == "__main__":
    main()
