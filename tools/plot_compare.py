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


def plot(d, out):
    """The three charts of d (read_compare's) into the image file out."""
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
    try:
        fig.savefig(out, dpi=100)
    except (OSError, ValueError) as e:  # ValueError: an extension matplotlib has no writer for
        raise CompareError(f"cannot write {out}: {getattr(e, 'strerror', None) or e}")


if __name__ == "__main__":
    main()
