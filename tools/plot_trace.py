#!/usr/bin/env python3
"""A picture of `run MODEL --trace POS --json PROMPT`: where each head of each layer looks from
position POS (its attention weights over positions 0..POS, one map per layer, a row per head), and
the residual stream's mean and RMS through the layers with each norm's output RMS.

    ./run models/stories260K.bin --trace 7 --json "Once upon a time, Lily saw" > trace.json
    /usr/bin/python3 tools/plot_trace.py trace.json trace.png
    ./run ... --trace 7 --json ... | tools/plot_trace.py - trace.png

TRACE.json "-" reads stdin; --help prints this. Errors (a file missing, JSON that is not
--trace's, a picture that cannot be written) print one line "plot_trace.py: error: ..." and exit 1.
"""
import importlib.util
import json
import sys

# Started as ./tools/plot_trace.py, the python3 first on PATH runs it, which may lack matplotlib
if importlib.util.find_spec("matplotlib") is None:
    sys.exit(f"plot_trace.py: error: {sys.executable} cannot import matplotlib: run it with "
             "/usr/bin/python3, Debian's Python, with python3-matplotlib installed (make "
             "deps-plot)")

import matplotlib  # noqa: E402 (after the check above)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (the backend is chosen first)


class TraceError(Exception):
    """A problem with the input, reported as one line."""


def read_trace(path):
    """The --trace JSON at path ("-": stdin), with the fields the picture reads."""
    name = "stdin" if path == "-" else path
    try:
        d = json.load(sys.stdin) if path == "-" else json.load(open(path, encoding="utf-8"))
    except OSError as e:
        raise TraceError(f"{name}: {e.strerror}")
    except (ValueError, RecursionError) as e:
        raise TraceError(f"{name}: not JSON ({e})")
    try:
        steps = d["steps"]
        attention = [s for s in steps if s["step"] == "attention"]
        if not attention or any("weights" not in h for s in attention for h in s["heads"]):
            raise KeyError("attention")
        d["pos"], d["piece"], d["norm"]
    except (KeyError, TypeError) as e:
        raise TraceError(f"{name}: not the JSON of run --trace --json (no {e})")
    return d


def plot(d, out):
    steps = d["steps"]
    attention = [s for s in steps if s["step"] == "attention"]
    n_layers, pos = len(attention), d["pos"]
    fig = plt.figure(figsize=(3.2 * n_layers + 1, 7.5))
    grid = fig.add_gridspec(2, n_layers, height_ratios=[3, 2], hspace=0.45)
    fig.suptitle(f"token {d['token']} {d['piece']!r} at position {pos}, under {d['norm']}: "
                 "where each head looks, and the residual stream", fontsize=11)
    for l, s in enumerate(attention):
        ax = fig.add_subplot(grid[0, l])
        weights = [h["weights"] for h in s["heads"]]
        image = ax.imshow(weights, aspect="auto", cmap="viridis", vmin=0, vmax=1,
                          interpolation="nearest")
        ax.set_title(f"layer {l} attention", fontsize=9)
        ax.set_xlabel("position attended to", fontsize=8)
        ax.set_ylabel("head", fontsize=8)
        ax.set_yticks(range(len(weights)))
        ax.tick_params(labelsize=7)
    fig.colorbar(image, ax=fig.axes, fraction=0.02, pad=0.01, label="attention weight")

    ax = fig.add_subplot(grid[1, :])
    residual = [s for s in steps if s["step"].startswith("residual") or s["step"] == "embedding"]
    labels = ["embedding" if s["step"] == "embedding" else
              f"L{s['layer']} {s['step'].split()[-1]}" for s in residual]
    x = range(len(residual))
    ax.plot(x, [s["rms"] for s in residual], marker="o", label="residual stream RMS")
    ax.plot(x, [s["mean"] for s in residual], marker="s", label="residual stream mean")
    norms = [s for s in steps if s["step"].endswith("norm") and s["layer"] >= 0]
    # each norm reads the residual stream as it stands before its block: the point before it
    ax.scatter([2 * s["layer"] + (s["step"] == "ffn norm") for s in norms],
               [s["output_rms"] for s in norms], color="tab:green", marker="^", zorder=3,
               label="the next norm's output RMS")
    ax.axhline(0, color="gray", lw=0.5)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("value")
    ax.set_title("the residual stream after each block (mean and RMS over its dim values)",
                 fontsize=10)
    ax.legend(fontsize=8)
    try:
        fig.savefig(out, dpi=100, bbox_inches="tight")
    except (OSError, ValueError) as e:
        raise TraceError(f"cannot write {out}: {getattr(e, 'strerror', None) or e}")


def main():
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return
    if len(sys.argv) != 3:
        sys.exit("usage: plot_trace.py TRACE.json OUT.png (TRACE.json - reads stdin)")
    try:
        plot(read_trace(sys.argv[1]), sys.argv[2])
    except TraceError as e:
        sys.exit(f"plot_trace.py: error: {e}")


if __name__ == "__main__":
    main()
