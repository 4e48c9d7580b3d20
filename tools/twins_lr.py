#!/usr/bin/env python3
"""The twin study's learning-rate sweep (`make twins-lr`, issue 28 item 2): both norms trained at
each of --lrs peak learning rates over --seeds seeds with the twins' recipe (tools/twins.py's
train_args: the same data, init, batches, AdamW, clipping at 1, warmup and cosine), in short runs
(--steps, default 200), --jobs trainings at a time with one thread each. Each run is
train.py --stop-if-diverged: it stops at the first step whose training loss is not finite or,
after the warmup, above ln(512) + 0.1 (train.py's DIVERGED_MARGIN), and says so in its log. A
run that ends is classed: "diverged at step N" (train.py's stop), "unigram" (its final
validation loss not at least --margin below the unigram level: a model that learned only the
tokens' frequencies, or less), or "learns". Prints the table, writes --out/results.json, the picture (tools/plot_twins_lr.py) and
the section of docs/NORMS.md between its two markers.

usage: tools/twins_lr.py [--lrs LR ...] [--seeds N] [--first-seed S] [--steps N] [--warmup N]
                         [--eval-every N] [--jobs N] [--margin NATS] [--out DIR] [--docs FILE]
                         [--no-train] [--no-docs]
A run whose log in --out is complete and of the same settings is not trained again, so that an
interrupted sweep continues where it stopped; --no-train tables the complete runs alone.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import twins  # noqa: E402 (tools/, this script's directory)
from nllm_format import TWINS  # noqa: E402 (the repository's root on the path first)
from train import TrainError  # noqa: E402

PYTHON = sys.executable
LRS = [3e-3, 3e-2, 1e-1, 3e-1, 1.0, 3.0]
MARGIN = 0.1
DOCS = os.path.join(ROOT, "docs/NORMS.md")
BEGIN_MARK, END_MARK = "<!-- twins-lr:begin -->", "<!-- twins-lr:end -->"
NAMES = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}
# the settings a log's config record must share with this sweep for the run to be reused
SETTINGS = ("norm", "seed", "lr", "steps", "batch_size", "warmup", "eval_every", "train",
            "valid")


def run_args(a, lr):
    """The sweep's arguments as twins.train_args reads them, at one learning rate."""
    return argparse.Namespace(**{**vars(a), "lr": lr})


def log_path(a, lr, seed, norm):
    return os.path.join(a.out, f"lr{lr:g}", f"seed{seed}", f"{norm}.jsonl")


def read_log(path):
    """The records of a train.py log; those of an unfinished last line are left out."""
    records = []
    with open(path) as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return records


def complete(a, lr, seed, norm):
    """The log's records when it is of a finished run with this sweep's settings, else None."""
    path = log_path(a, lr, seed, norm)
    if not os.path.exists(path):
        return None
    records = read_log(path)
    want = {**vars(run_args(a, lr)), "norm": norm, "seed": seed}
    if not records or any(records[0].get(k) != want[k] for k in SETTINGS):
        return None
    last = records[-1]
    done = last["kind"] == "diverged" or (last["kind"] == "eval" and last["step"] == a.steps)
    return records if done else None


def sweep(a, times):
    """Trains every (lr, seed, norm) not already complete, a.jobs at a time; the two twins of an
    (lr, seed) are next to each other in the queue, so that they mostly train side by side, and
    the first seed goes through every lr before the next seed starts."""
    queue = [(lr, seed, norm) for seed in a.seeds for lr in a.lrs for norm in TWINS
             if not complete(a, lr, seed, norm)]
    print(f"twins_lr: {len(queue)} of {len(a.lrs) * len(a.seeds) * len(TWINS)} runs to train",
          flush=True)
    running = {}
    while queue or running:
        while queue and len(running) < a.jobs:
            lr, seed, norm = queue.pop(0)
            d = os.path.dirname(log_path(a, lr, seed, norm))
            os.makedirs(d, exist_ok=True)
            args = twins.train_args(run_args(a, lr), norm, seed, d) + ["--stop-if-diverged",
                                                                       "--quiet"]
            print(f"twins_lr: lr {lr:g}, seed {seed}, {norm}: {PYTHON} {' '.join(args)}",
                  flush=True)
            err = open(os.path.join(d, f"{norm}.stderr"), "w")
            running[(lr, seed, norm)] = (subprocess.Popen([PYTHON, *args], cwd=ROOT, stderr=err),
                                         err, time.time())
        time.sleep(0.5)
        for key, (p, err, start) in list(running.items()):
            if p.poll() is None:
                continue
            err.close()
            del running[key]
            if p.returncode != 0:
                for other, _, _ in running.values():
                    other.kill()
                sys.exit(f"twins_lr: training lr {key[0]:g} seed {key[1]} {key[2]} failed:\n" +
                         open(err.name).read().strip())
            times[f"lr {key[0]:g} seed {key[1]} {key[2]}"] = time.time() - start


def unigram_level(a):
    """The validation loss of the unigram model (each token's frequency in the training text,
    add-one smoothed) on the windows train.py validates on (64 of 256): what a model that
    learned only the tokens' frequencies scores."""
    import sentencepiece as spm

    import train as train_py

    tokenizer = os.path.join(ROOT, "models/tok512.model")
    sp = spm.SentencePieceProcessor(model_file=tokenizer)
    sha = train_py.sha256_of(tokenizer)
    counts = np.bincount(train_py.load_tokens(a.train, sp, sha), minlength=sp.vocab_size()) + 1
    targets = train_py.load_tokens(a.valid, sp, sha)[1:64 * 256 + 1]
    return float(-np.mean(np.log(counts[targets] / counts.sum())))


def outcome(records, unigram, margin):
    """One run's result: final validation loss (None when diverged), final training loss (the
    mean of the last 10 steps), the step of divergence (or None), the largest training loss
    (nan if any was), its class."""
    train = [r["loss"] for r in records if r["kind"] == "train"]
    diverged = [r for r in records if r["kind"] == "diverged"]
    result = {"train_loss": statistics.mean(train[-10:]), "steps": len(train),
              "eval": [(r["step"], r["val_loss"]) for r in records if r["kind"] == "eval"],
              "train": train, "val_loss": None, "diverged_step": None,
              "peak_train_loss": max(train, key=lambda x: math.inf if math.isnan(x) else x)}
    if diverged:
        result.update(diverged_step=diverged[0]["step"], reason=diverged[0]["reason"],
                      outcome="diverged")
    else:
        result["val_loss"] = result["eval"][-1][1]
        result["outcome"] = "learns" if result["val_loss"] < unigram - margin else "unigram"
    return result


def mean_sd(values):
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def runs_of(res, lr, norm):
    """The runs of one (lr, norm), in seed order (those a --no-train table has)."""
    seeds = res.get(f"{lr:g}", {})
    return [seeds[s][norm] for s in sorted(seeds, key=int) if norm in seeds[s]]


def cell(runs):
    """The outcome of each seed of one (lr, norm), in seed order: 'learns', 'unigram',
    'diverged at N (peak P)', P its largest training loss; '–' for no run."""
    return ", ".join(f"diverged at {r['diverged_step']} (peak {r['peak_train_loss']:.3g})"
                     if r["outcome"] == "diverged" else r["outcome"] for r in runs) or "–"


def table(res, a):
    """Markdown: a row per learning rate, for each norm the final validation loss (mean ± sd over
    the seeds that did not diverge), the final training loss and each seed's outcome."""
    head = ["peak lr"]
    for norm in TWINS:
        head += [f"{NAMES[norm]}: validation loss", f"{NAMES[norm]}: training loss (last 10)",
                 f"{NAMES[norm]}: seeds {', '.join(map(str, a.seeds))}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lr in a.lrs:
        row = [f"{lr:g}"]
        for norm in TWINS:
            runs = runs_of(res, lr, norm)
            row += [mean_sd([r["val_loss"] for r in runs if r["val_loss"] is not None]),
                    mean_sd([r["train_loss"] for r in runs if math.isfinite(r["train_loss"])]),
                    cell(runs)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def summary(res, a):
    """For each norm: the largest lr at which every seed learns, the smallest at which a seed
    diverges, and the lr of the lowest mean validation loss."""
    parts = []
    for norm in TWINS:
        by_lr = {lr: runs_of(res, lr, norm) for lr in a.lrs}
        learns = [lr for lr, runs in by_lr.items()
                  if runs and all(r["outcome"] == "learns" for r in runs)]
        diverges = [lr for lr, runs in by_lr.items()
                    if any(r["outcome"] == "diverged" for r in runs)]
        best = min(learns, key=lambda lr: statistics.mean(r["val_loss"] for r in by_lr[lr]),
                   default=None)
        learned = (f"every seed learns up to lr {max(learns):g}" if learns else
                   "no lr at which every seed learns")
        diverged = (f"a seed diverges from lr {min(diverges):g}" if diverges else
                    f"no seed diverges up to {max(a.lrs):g}")
        parts.append(f"{NAMES[norm]}: {learned}, {diverged}")
        if best is not None:
            parts[-1] += f"; best lr {best:g}"
    return "; ".join(parts)


def parser():
    p = twins.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lrs", type=float, nargs="+", default=LRS, help="peak learning rates")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--first-seed", type=int, default=1, help="the seeds are --first-seed, ... "
                   "(so that two sweeps can share the seeds of one --out)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--jobs", type=int, default=2, help="trainings at a time (one thread each)")
    p.add_argument("--margin", type=float, default=MARGIN,
                   help="nats below the unigram level a final validation loss must be to count "
                   "as learning")
    p.add_argument("--out", default=os.path.join(ROOT, "build/twins_lr"))
    p.add_argument("--train", default=twins.TRAIN, help="training text (train.py's --train)")
    p.add_argument("--valid", default=twins.VALID, help="validation text (train.py's --valid)")
    p.add_argument("--docs", default=DOCS, help="the markdown file whose twins-lr section to "
                   "write (its picture goes beside it)")
    p.add_argument("--no-train", action="store_true", help="table the complete runs in --out, "
                   "train none")
    p.add_argument("--no-docs", action="store_true", help="leave docs/NORMS.md as it is")
    return p


def main():
    p = parser()
    a = p.parse_args()
    if min(a.seeds, a.steps, a.jobs, a.eval_every, a.batch_size, a.warmup) < 1 or \
            a.first_seed < 0 or a.warmup >= a.steps:
        p.error("--seeds, --steps, --jobs, --eval-every, --batch-size and --warmup must be at "
                "least 1, --first-seed 0 or more, --warmup below --steps")
    if not all(lr > 0 and math.isfinite(lr) for lr in a.lrs):
        p.error("--lrs must be positive numbers")
    if not (a.margin >= 0 and math.isfinite(a.margin)):
        p.error(f"--margin must be 0 or more nats, got {a.margin}")
    if os.path.exists(a.out) and not os.path.isdir(a.out):
        p.error(f"--out {a.out} is a file, not a directory")
    problem = None if a.no_docs else twins.section_problem(a.docs, BEGIN_MARK, END_MARK)
    if problem:
        p.error(f"--docs {problem} (--no-docs leaves docs alone)")
    a.lrs, a.seeds = sorted(set(a.lrs)), list(range(a.first_seed, a.first_seed + a.seeds))
    for low, high in zip(a.lrs, a.lrs[1:]):  # a rate's directory and table row: lr{lr:g}
        if f"{low:g}" == f"{high:g}":
            p.error(f"--lrs {low!r} and {high!r} are both {low:g} to 6 digits (their runs' "
                    "directory and row)")
    os.makedirs(a.out, exist_ok=True)
    times, started, load = {}, time.time(), [os.getloadavg()[0]]
    if not a.no_train:
        sweep(a, times)
        times["sweep"] = time.time() - started
        load.append(os.getloadavg()[0])
    else:  # the times and load of the sweep that trained the runs
        old = twins.earlier_results(a.out)
        if "times_s" in old and "load_start_end" in old:
            times, load = old["times_s"], old["load_start_end"]
    runs = {(lr, s, norm): complete(a, lr, s, norm) for lr in a.lrs for s in a.seeds
            for norm in TWINS}
    if not any(runs.values()):  # --no-train alone finds none: there is no table to make
        sys.exit(f"twins_lr: --no-train, but {a.out} holds no complete run of these settings")
    try:
        unigram = unigram_level(a)
    except TrainError as e:
        sys.exit(f"twins_lr: {e}")
    res = {}
    for (lr, s, norm), records in runs.items():
        if records:
            res.setdefault(f"{lr:g}", {}).setdefault(str(s), {})[norm] = \
                outcome(records, unigram, a.margin)
    result = {"args": {k: v for k, v in vars(a).items()}, "unigram": unigram,
              "ln_vocab": math.log(512), "results": res, "times_s": times,
              "load_start_end": load}
    twins.write_results(a.out, result)
    picture = os.path.join(a.out if a.no_docs else os.path.dirname(a.docs), "twins_lr.png")
    twins.sh([PYTHON, "tools/plot_twins_lr.py", os.path.join(a.out, "results.json"), picture])
    t, s = table(res, a), summary(res, a)
    print(f"{t}\n\n{s}\nunigram level {unigram:.3f}")
    if "sweep" in times:
        print(f"twins_lr: the sweep {times['sweep']:.0f} s, load {load[0]:.1f} at its start, "
              f"{load[1]:.1f} at its end")
    if not a.no_docs:
        write_docs(a, result, t, s)


def write_docs(a, result, t, s):
    trained = [v for k, v in result["times_s"].items() if k.startswith("lr ")]
    command = (f"tools/twins_lr.py --lrs {' '.join(f'{lr:g}' for lr in a.lrs)} --seeds "
               f"{len(a.seeds)}{f' --first-seed {a.seeds[0]}' if a.seeds[0] != 1 else ''} "
               f"--steps {a.steps} --batch-size {a.batch_size} --warmup {a.warmup} --eval-every "
               f"{a.eval_every} --jobs {a.jobs} --margin {a.margin:g}"
               + "".join(f" --{k} {getattr(a, k)}" for k in ("train", "valid")
                         if not twins.same_text(a, k)))
    # make twins-lr runs the defaults: it names the command only when the sweep had them
    default = parser().parse_args([])
    makes = (a.lrs == sorted(set(default.lrs)) and a.seeds == list(range(1, default.seeds + 1))
             and all(getattr(a, k) == getattr(default, k)
                     for k in ("steps", "batch_size", "warmup", "eval_every", "jobs", "margin"))
             and twins.same_text(a, "train") and twins.same_text(a, "valid"))
    command = ("make twins-lr  # " + command if makes else f"{PYTHON} {command}"
               + (" --no-train" if a.no_train else ""))
    load = result["load_start_end"]
    made = (f"the sweep {result['times_s']['sweep']:.0f} s of wall clock, {len(trained)} runs "
            f"trained in it, {sum(trained):.0f} s of training in all; load average {load[0]:.1f} "
            f"at its start, {load[1]:.1f} at its end" if "sweep" in result["times_s"] else
            "the runs already in --out, tabled by --no-train")
    section = f"""{BEGIN_MARK}
Made by (on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {made}):

    {command}

{t}

{s}. Unigram level {result['unigram']:.3f} nats/token; ln(512) = {result['ln_vocab']:.3f}.

![final validation loss against peak learning rate, and the validation loss of seed 1 against step](twins_lr.png)
{END_MARK}"""
    twins.replace_section(a.docs, section, BEGIN_MARK, END_MARK)


if __name__ == "__main__":
    main()
