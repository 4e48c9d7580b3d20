#!/usr/bin/env python3
"""Charts of `run MODEL PROMPT --compare --json`: KL per position, |mean|/RMS per norm call site,
and where the forward pass spends its time, under each norm.

    ./run models/stories260K.bin "Once upon a time" -t 0 --compare --json > compare.json
    /usr/bin/python3 tools/plot_compare.py compare.json docs/compare_stories260K.png
    ./run ... --compare --json | tools/plot_compare.py - compare.png

COMPARE.json "-" reads stdin; --help prints this. Errors (a file missing, JSON that is not
--compare's, a chart that cannot be written) print one line "plot_compare.py: error: ..." and
exit 1.
"""
import importlib.util
import json
import numbers
import sys

# Started as ./tools/plot_compare.py, the python3 first on PATH runs it, which may lack matplotlib
if importlib.util.find_spec("matplotlib") is None:
    sys.exit(f"plot_compare.py: error: {sys.executable} cannot import matplotlib: run it with "
             "/usr/bin/python3, Debian's Python, with python3-matplotlib installed (make "
             "deps-plot)")

import matplotlib  # noqa: E402 (after the check above)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (the backend is chosen first)


NUMBER = "a number"
# What the charts read of --compare's JSON (compare.c, print_comparison_json): a dict holds the keys
# named, a list [x] is a list of x's, a type the value's
SCHEMA = {
    "model": str, "norms": [str], "n_prompt": NUMBER, "first_difference": NUMBER,
    "summary": {"positions": NUMBER, "mean_kl": NUMBER},
    "positions": [{"pos": NUMBER, "kl": NUMBER, "top1_agree": bool}],
    "sites": [{"site": str, "a": {"mean_over_rms": NUMBER}, "b": {"mean_over_rms": NUMBER}}],
    "speed": [{"norm": str, "tokens_per_s": NUMBER, "norm_share": NUMBER, "op_seconds": dict}],
}


class CompareError(Exception):
    """A problem with the input, reported as one line."""


def check(value, schema, where):
    """Raises CompareError naming the first part of value that does not fit schema (SCHEMA)."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise CompareError(f"{where} is not an object")
        for key, part in schema.items():
            if key not in value:
                raise CompareError(f"{where} has no \"{key}\"")
            check(value[key], part, f"{where}.{key}")
    elif isinstance(schema, list):
        if not isinstance(value, list) or not value:
            raise CompareError(f"{where} is not a non-empty list")
        for i, item in enumerate(value):
            check(item, schema[0], f"{where}[{i}]")
    elif schema is NUMBER:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise CompareError(f"{where} is not a number")
    elif not isinstance(value, schema):
        raise CompareError(f"{where} is not {schema.__name__}")


def read_compare(path):
    """The --compare JSON at path ("-": stdin), checked against SCHEMA."""
    name = "stdin" if path == "-" else path
    try:
        if path == "-":
            d = json.load(sys.stdin)
        else:
            with open(path, encoding="utf-8") as f:
                d = json.load(f)
    except OSError as e:
        raise CompareError(f"{name}: {e.strerror}")
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise CompareError(f"{name}: not JSON ({e})")
    try:
        check(d, SCHEMA, "the JSON")
        if len(d["norms"]) != 2 or len(d["speed"]) != 2:
            raise CompareError("the JSON does not hold two norms and their two speeds")
    except CompareError as e:
        raise CompareError(f"{name}: not the JSON of run --compare --json: {e}")
    return d


def main():
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return
    if len(sys.argv) != 3:
        sys.exit("usage: plot_compare.py COMPARE.json OUT.png (COMPARE.json - reads stdin)")
    try:
        d = read_compare(sys.argv[1])
        plot(d, sys.argv[2])
    except CompareError as e:
        sys.exit(f"plot_compare.py: error: {e}")


def site_title(a, b):
    """The middle chart's title, from the two norms compared."""
    title = f"|mean| / RMS of each norm's input, under {a} and under {b}"
    centering = {"layernorm"}
    if (a in centering) != (b in centering):
        centred, kept = (a, b) if a in centering else (b, a)
        title += f"\n(the mean {centred} removes and {kept} keeps)"
    return title


def plot_kl(ax, d):
    """KL per position on a log axis that reaches every positive value; zeros (the same
    distribution to double precision) drawn on the axis's floor and counted; the mean where it
    is."""
    positions = d["positions"]
    positive = [p for p in positions if p["kl"] > 0]
    zero = [p for p in positions if p["kl"] <= 0]
    mean = d["summary"]["mean_kl"]
    values = [p["kl"] for p in positive] + ([mean] if mean > 0 else [])
    low = min(values) / 3 if values else 1e-12
    high = max(values) * 3 if values else 1.0
    ax.set_yscale("log")
    ax.set_ylim(low, high)
    ax.plot([p["pos"] for p in positive], [p["kl"] for p in positive], lw=1, color="tab:blue",
            marker="." if len(positive) < 80 else None, label="KL(A || B) per position")
    if zero:
        ax.scatter([p["pos"] for p in zero], [low] * len(zero), marker="v", color="tab:gray",
                   s=14, zorder=3, clip_on=False, label=f"KL = 0 ({len(zero)} positions)")
    miss = [p for p in positions if not p["top1_agree"]]
    ax.scatter([p["pos"] for p in miss], [max(p["kl"], low) for p in miss], color="tab:red", s=18,
               zorder=3, label=f"top-1 token differs ({len(miss)})")
    if mean > 0:
        ax.axhline(mean, color="black", ls="--", lw=1, label=f"mean {mean:.3g} nats")
    if d["first_difference"] >= 0:
        ax.axvline(d["first_difference"], color="tab:orange", lw=1,
                   label=f"generated texts part (position {d['first_difference']})")
    ax.axvspan(-0.5, d["n_prompt"] - 0.5, color="0.9", label="prompt")
    ax.set_xlabel("position")
    ax.set_ylabel("KL divergence, nats (log scale)")
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    same = " (the generated texts are the same)" if d["first_difference"] < 0 else ""
    ax.set_title(f"How far B's next-token distribution is from A's{same}", fontsize=10)


def speed_label(run):
    """A norm's tick label: its median speed and, from run's --repeat rounds, their range, so that
    one speed is not read without its noise."""
    label = f"{run['norm']}\n{run['tokens_per_s']:.0f} tok/s"
    if "tokens_per_s_min" in run and "tokens_per_s_max" in run:
        label += f"\n({run['tokens_per_s_min']:.0f} to {run['tokens_per_s_max']:.0f})"
    return label


def speed_ratio_text(d):
    """B's speed over A's, round by round (compare.c's speed_ratio_b_over_a), for the title; empty
    when the JSON lacks it."""
    ratio = d.get("speed_ratio_b_over_a")
    if not isinstance(ratio, dict) or not {"median", "min", "max", "b_faster_rounds"} <= set(ratio):
        return ""
    rounds = d.get("rounds", "?")
    return (f": B's speed / A's {ratio['median']:.2f} (median; {ratio['min']:.2f} to "
            f"{ratio['max']:.2f}, B faster in {ratio['b_faster_rounds']} of {rounds} rounds)")


def plot_time(ax, d):
    """Each norm's forward time by operation class, the norms' share labelled where it is drawn
    (beside its sliver, with an arrow, when the sliver is too thin to hold the label)."""
    ops = list(d["speed"][0]["op_seconds"].keys())
    colors = plt.cm.tab10.colors
    for row, run in enumerate(d["speed"]):
        total = sum(run["op_seconds"].values())
        left = 0.0
        for i, op in enumerate(ops):
            share = run["op_seconds"][op] / total
            ax.barh(row, share, height=0.5, left=left, color=colors[i % 10],
                    label=op if row == 0 else None)
            if op == "norms":
                ax.annotate(f"norms {100 * share:.2f}%", xy=(left + share / 2, row - 0.25),
                            xytext=(left + share / 2 + 0.03, row - 0.55), fontsize=8,
                            arrowprops={"arrowstyle": "->", "lw": 0.8}, annotation_clip=False)
            elif share > 0.04:
                ax.text(left + share / 2, row, f"{100 * share:.0f}%", ha="center", va="center",
                        fontsize=8, color="white")
            left += share
    ax.set_yticks(range(len(d["speed"])))
    ax.set_yticklabels([speed_label(r) for r in d["speed"]], fontsize=8)
    ax.set_ylim(len(d["speed"]) - 0.6, -0.8)  # room above each bar for the norms' label
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the forward pass's time (teacher-forced, medians)")
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.35))
    ax.set_title("Where the time goes" + speed_ratio_text(d), fontsize=10)


def plot(d, out):
    """The three charts of d (read_compare's) into the image file out."""
    a, b = d["norms"]
    fig, (ax_kl, ax_site, ax_time) = plt.subplots(3, 1, figsize=(10, 12),
                                                  gridspec_kw={"height_ratios": [3, 3, 2]})
    fig.suptitle(f"{d['model']}: {a} (A) vs {b} (B), teacher-forced along A's text "
                 f"({d['summary']['positions']} positions)", fontsize=11)
    plot_kl(ax_kl, d)

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
    ax_site.set_title(site_title(a, b), fontsize=10)
    ax_site.legend(fontsize=8)

    plot_time(ax_time, d)
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=100)
    except (OSError, ValueError) as e:  # ValueError: an extension matplotlib has no writer for
        raise CompareError(f"cannot write {out}: {getattr(e, 'strerror', None) or e}")


if __name__ == "__main__":
    main()
