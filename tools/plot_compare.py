"""Charts of `run MODEL PROMPT --compare --json`: KL per position, |mean|/RMS per norm call site,
and where the forward pass spends its time, under each norm.

    ./run models/stories260K.bin "Once upon a time" -t 0 --compare --json > compare.json
    /usr/bin/python3 tools/plot_compare.py compare.json docs/compare_stories260K.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (the backend is chosen first)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_compare.py COMPARE.json OUT.png")
    with open(sys.argv[1], encoding="utf-8") as f:
        d = json.load(f)
    a, b = d["norms"]
    fig, (ax_kl, ax_site, ax_time) = plt.subplots(3, 1, figsize=(10, 11),
                                                  gridspec_kw={"height_ratios": [3, 3, 2]})
    fig.suptitle(f"{d['model']}: {a} (A) vs {b} (B), teacher-forced along A's text "
                 f"({d['summary']['positions']} positions)", fontsize=11)

    pos = [p["pos"] for p in d["positions"]]
    kl = [max(p["kl"], 1e-8) for p in d["positions"]]
    ax_kl.semilogy(pos, kl, lw=1, color="tab:blue", label="KL(A || B) per position")
    miss = [p for p in d["positions"] if not p["top1_agree"]]
    ax_kl.scatter([p["pos"] for p in miss], [max(p["kl"], 1e-8) for p in miss], color="tab:red",
                  s=18, zorder=3, label=f"top-1 token differs ({len(miss)})")
    ax_kl.axhline(d["summary"]["mean_kl"], color="gray", ls="--", lw=1,
                  label=f"mean {d['summary']['mean_kl']:.4f} nats")
    if d["first_difference"] >= 0:
        ax_kl.axvline(d["first_difference"], color="tab:orange", lw=1,
                      label=f"generated texts part (position {d['first_difference']})")
    ax_kl.axvspan(-0.5, d["n_prompt"] - 0.5, color="0.9", label="prompt")
    ax_kl.set_xlabel("position")
    ax_kl.set_ylabel("KL divergence, nats (log scale)")
    ax_kl.legend(fontsize=8, loc="lower right")
    ax_kl.set_title("How far B's next-token distribution is from A's", fontsize=10)

    sites = [s["site"] for s in d["sites"]]
    x = range(len(sites))
    width = 0.4
    ax_site.bar([i - width / 2 for i in x], [s["a"]["mean_over_rms"] for s in d["sites"]], width,
                label=f"under {a}")
    ax_site.bar([i + width / 2 for i in x], [s["b"]["mean_over_rms"] for s in d["sites"]], width,
                label=f"under {b}")
    ax_site.set_xticks(list(x))
    ax_site.set_xticklabels(sites, rotation=30, ha="right", fontsize=8)
    ax_site.set_ylabel("|mean| / RMS of the norm's input")
    ax_site.set_title("What LayerNorm removes and RMSNorm keeps: the mean of each norm's input, "
                      "relative to its RMS", fontsize=10)
    ax_site.legend(fontsize=8)

    ops = list(d["speed"][0]["op_seconds"].keys())
    colors = plt.cm.tab10.colors
    for row, run in enumerate(d["speed"]):
        total = sum(run["op_seconds"].values())
        left = 0.0
        for i, op in enumerate(ops):
            share = run["op_seconds"][op] / total
            ax_time.barh(row, share, left=left, color=colors[i % 10],
                         label=op if row == 0 else None)
            if share > 0.04:
                ax_time.text(left + share / 2, row, f"{100 * share:.0f}%", ha="center",
                             va="center", fontsize=8, color="white")
            left += share
    ax_time.set_yticks(range(len(d["speed"])))
    ax_time.set_yticklabels([f"{r['norm']}\n{r['tokens_per_s']:.0f} tok/s, norms "
                             f"{100 * r['norm_share']:.2f}%" for r in d["speed"]], fontsize=8)
    ax_time.invert_yaxis()
    ax_time.set_xlim(0, 1)
    ax_time.set_xlabel("share of the forward pass's time (teacher-forced, medians)")
    ax_time.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.35))
    ax_time.set_title("Where the time goes", fontsize=10)

    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)


if __name__ == "__main__":
    main()
