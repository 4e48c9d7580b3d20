#!/usr/bin/env python3
"""The twin study (`make twins`): train the stories260K shape with RMSNorm and with LayerNorm
(train.py, the same seed, init, batches and optimizer), export both (normllama files, and GGUFs
for llama.cpp: llama and stablelm), and compare them with run:
validation loss and perplexity (each twin with its own norm, and the 2 x 2 swap), stories260K on
the same text, training and inference speed and the norms' share of each, the norm sites'
|mean| / RMS, the greedy texts; over --seeds seeds (mean and spread), and each difference paired
by seed (LayerNorm twin - RMSNorm twin) with its 95% interval (Student's t, n - 1 degrees of
freedom). Prints the table, writes build/twins/results.json, the picture (tools/plot_twins.py)
and the section of docs/NORMS.md between its two markers.

The siblings (`make siblings`): --norms rmsnorm and the variants (train.py's --norm choices),
trained and measured alike, two at a time, each compared with the first of --norms paired by
seed; each sibling also run with rmsnorm swapped in; build/siblings and the siblings markers.

A model already trained in --out (checkpoint, export and a log whose last step is --steps, with
this run's settings) is not trained again: `--seeds 5` after a 3-seed run trains seeds 4 and 5.

usage: tools/twins.py [--seeds N] [--steps N] [--norms NORM ...] [--out DIR] [--train FILE]
                      [--valid FILE] [--ppl-stories N] [--profile-repeats N] [--docs FILE]
                      [--section NAME] [--dim N] [--hidden-dim N] [--n-layers N] [--n-heads N]
                      [--n-kv-heads N] [--no-train] [--no-docs]
Timings are of a machine shared with other jobs: the medians are what to read.
"""
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from nllm_format import NORMS, TWINS  # noqa: E402 (the repository's root on the path first)
from train import ArgumentParser, TrainError, read_stories  # noqa: E402 (one-line errors)

PYTHON = sys.executable
RUN = os.path.join(ROOT, "run")
OTHER = {"rmsnorm": "layernorm", "layernorm": "rmsnorm"}
LABELS = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}
TRAIN = os.path.join(ROOT, "data/cache/tinystories_train.txt")
VALID = os.path.join(ROOT, "data/cache/tinystories_valid.txt")
PPL_STORIES = 200  # of the valid text, for run --ppl (the whole of it takes minutes per model)
PROFILE_REPEATS = 7
PROMPT = "Once upon a time"
DOCS = os.path.join(ROOT, "docs/NORMS.md")
# train.py's shape options; their defaults are stories260K's shape (train.py's too)
STORIES260K_SHAPE = {"dim": 64, "hidden_dim": 172, "n_layers": 5, "n_heads": 8, "n_kv_heads": 4}
# Student's t 0.975 quantiles for 1..30 degrees of freedom (4 decimals, as the printed tables;
# tests/test_tools.py checks each against the t density integrated)
T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
        2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
        2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)
Z975 = 1.959963984540054  # the normal's 0.975 quantile


def t975(df):
    """Student's t 0.975 quantile, df >= 1: the table to 30, beyond it the Cornish-Fisher
    expansion in 1 / df (Abramowitz & Stegun 26.7.5, three terms; 2e-6 low at df 30, closer
    above)."""
    if df <= len(T975):
        return T975[df - 1]
    z = Z975
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


def paired(base, other):
    """other - base, paired by position (seed): (mean, low, high) of the differences, low and
    high the 95% interval of their mean (mean +- t975(n - 1) sd / sqrt(n)); None, None for one
    pair."""
    d = [o - b for b, o in zip(base, other, strict=True)]
    m = statistics.mean(d)
    if len(d) < 2:
        return m, None, None
    half = t975(len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d))
    return m, m - half, m + half


def fmt_interval(m, low, high, digits):
    return f"{m:+.{digits}f}" + ("" if low is None else f" [{low:+.{digits}f}, {high:+.{digits}f}]")


def verdict(name, unit, interval, digits):
    """What the interval allows, in words: "no difference larger than X at 95%" when it holds 0,
    "higher (lower) by X to Y at 95%" when it does not."""
    m, low, high = interval
    unit = f" {unit}" if unit else ""
    if low is None:
        return f"{name} {m:+.{digits}f}{unit} (one seed: no interval)"
    if low <= 0 <= high:
        largest = max(abs(low), abs(high))
        return (f"{name}: no difference larger than {largest:.{digits}f}{unit} at 95% (mean "
                f"{m:+.{digits}f})")
    near, far = sorted((abs(low), abs(high)))
    return (f"{name}: {'higher' if m > 0 else 'lower'} by {near:.{digits}f} to "
            f"{far:.{digits}f}{unit} at 95% (mean {m:+.{digits}f})")


def sh(cmd, **kwargs):
    """Runs cmd (a list); returns (stdout, stderr); a failure stops the study with its stderr.
    A byte that is not UTF-8 reads as U+FFFD: run prints the tokens' bytes as they are, and a
    model early in training generates lone byte tokens."""
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", cwd=ROOT, **kwargs)
    if p.returncode != 0:
        sys.exit(f"twins: {' '.join(cmd)} failed:\n{p.stderr.strip()}")
    return p.stdout, p.stderr


def shape(a):
    """The model's shape: the shape options given, stories260K's for the others."""
    return {k: getattr(a, k, None) or v for k, v in STORIES260K_SHAPE.items()}


def train_args(a, norm, seed, d):
    """train.py's command line for one model of the study in directory d. a: the study's
    options (steps, batch_size, lr, warmup, eval_every, train, valid; the shape options are
    passed when a has them set)."""
    given = [(k, getattr(a, k, None)) for k in STORIES260K_SHAPE]
    return ["train.py", "--norm", norm, "--seed", str(seed), "--steps", str(a.steps),
            "--batch-size", str(a.batch_size), "--seq-len", "256", "--lr", str(a.lr),
            "--warmup", str(a.warmup), "--eval-every", str(a.eval_every), "--eval-windows", "64",
            *[x for k, v in given if v is not None for x in (f"--{k.replace('_', '-')}", str(v))],
            "--threads", "1", "--train", a.train, "--valid", a.valid, "--out", f"{d}/{norm}.pt",
            "--export", f"{d}/{norm}.nllm", "--log", f"{d}/{norm}.jsonl"]


NOT_COMPARED = ("train", "valid", "out", "export", "log", "threads")  # may differ on resuming


def trained(a, seed, norm):
    """True if the model of norm and seed in --out is trained to --steps: its checkpoint,
    export and log there, the log's last step --steps. Stops the study if that model was trained
    with other settings (train.py's options but the files and threads, and the shape)."""
    d = os.path.join(a.out, f"seed{seed}")
    log = f"{d}/{norm}.jsonl"
    if not all(os.path.isfile(f"{d}/{norm}.{ext}") for ext in ("pt", "nllm", "jsonl")):
        return False
    try:
        records = [json.loads(line) for line in open(log)]
    except json.JSONDecodeError:  # a log cut short by a stopped run
        return False
    steps = [r["step"] for r in records if r["kind"] == "train"]
    if not steps or steps[-1] != a.steps:
        return False
    args = train_args(a, norm, seed, d)
    want = {k[2:].replace("-", "_"): v for k, v in zip(args[1::2], args[2::2])}
    want.update({k: str(v) for k, v in shape(a).items()})
    config = records[0]
    differ = [f"--{k.replace('_', '-')} {config.get(k)} (this run: {v})" for k, v in want.items()
              if k not in NOT_COMPARED and not same_value(config.get(k), v)]
    if differ:
        sys.exit(f"twins: {log} was trained with {', '.join(differ)}: give another --out, or "
                 "remove it to train it again")
    return True


def same_value(logged, given):
    """A value of train.py's config record against the command line's string."""
    if isinstance(logged, (int, float)) and not isinstance(logged, bool):
        return float(given) == float(logged)
    return str(logged) == given


def train_models(a, jobs, times):
    """Trains the (seed, norm) jobs two at a time, one thread each on the machine's two cores:
    each gets a core, both see the same load from anything else, and the pair ends in the time of
    one. The first of a pair draws the progress bar; the other runs --quiet."""
    for i in range(0, len(jobs), 2):
        start, procs = time.time(), {}
        for k, (seed, norm) in enumerate(jobs[i:i + 2]):
            d = os.path.join(a.out, f"seed{seed}")
            os.makedirs(d, exist_ok=True)
            args = train_args(a, norm, seed, d) + (["--quiet"] if k else [])
            print(f"twins: seed {seed}, {norm}: {PYTHON} {' '.join(args)}", flush=True)
            procs[seed, norm] = subprocess.Popen([PYTHON, *args], cwd=ROOT)
        for (seed, norm), p in procs.items():
            if p.wait() != 0:
                for other in procs.values():
                    other.kill()
                sys.exit(f"twins: training seed {seed} {norm} failed")
            times[f"train seed {seed} {norm}"] = time.time() - start


def export_ggufs(a, seeds):
    """The twins as GGUFs too, for llama.cpp (its llama and stablelm, docs/MODELS.md; no llama.cpp
    architecture computes the siblings): each one missing or older than its checkpoint."""
    for seed in seeds:
        for norm in set(a.norms) & set(TWINS):
            d = os.path.join(a.out, f"seed{seed}")
            gguf, checkpoint = f"{d}/{norm}.gguf", f"{d}/{norm}.pt"
            if not os.path.exists(gguf) or os.path.getmtime(gguf) < os.path.getmtime(checkpoint):
                sh([PYTHON, "export.py", checkpoint, "--tokenizer", "models/tok512.model",
                    "--out", gguf, "--quiet"])


def ppl_text(a, stories):
    """The first --ppl-stories stories of the valid text, one paragraph of lines each."""
    path = os.path.join(a.out, "valid_ppl.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(stories[:a.ppl_stories]) + "\n")
    return path


def perplexity(model, text, norm=None):
    """(mean NLL, perplexity, tokens) of run --ppl."""
    extra = [f"--norm={norm}"] if norm else []
    out, _ = sh([RUN, model, "-z", "models/tok512.bin", "--threads=1", "--ppl", text, *extra])
    m = re.search(r"(\d+) tokens predicted.*mean NLL ([\d.]+) nats/token, perplexity ([\d.]+)", out)
    return float(m.group(2)), float(m.group(3)), int(m.group(1))


def profile_once(model, prompt):
    """(prefill tokens/s, decode tokens/s, the norms' share of the run's time) of one --profile
    run."""
    _, err = sh([RUN, model, "-z", "models/tok512.bin", "-t", "0", "-n", "256", "--threads=1",
                 "--profile", prompt])
    speed = re.search(r"prompt ([\d.]+) tokens/s, generation ([\d.]+) tokens/s", err)
    share = re.search(r"norms\s+[\d.]+\s+([\d.]+)%", err)
    return float(speed.group(1)), float(speed.group(2)), float(share.group(1)) / 100


def profile(models, prompt, repeats):
    """profile_once's three numbers for each of models, each the median of `repeats` runs; the
    models take turns in every repeat, so that a slow moment of the machine hits them alike."""
    runs = {m: [] for m in models}
    for _ in range(repeats):
        for m in models:
            runs[m].append(profile_once(m, prompt))
    return {m: tuple(statistics.median(r[i] for r in runs[m]) for i in range(3)) for m in models}


def swap_target(norm, norms):
    """The norm a model trained with norm is also run under (run --ppl --norm, --compare), where
    that measures something: the other twin when both twins are studied; rmsnorm for a sibling
    (run reads what rmsnorm needs from any model; the reverse, dyt or a learned eps into an
    rmsnorm model, it refuses); None for rmsnorm among siblings."""
    if OTHER.get(norm) in norms:
        return OTHER[norm]
    return None if norm == "rmsnorm" else "rmsnorm"


def compare(model, norm, other):
    """--compare of the model's own norm against other: JSON. (Its texts and sites are of the
    own norm; measure asks it of rmsnorm among siblings, no swap, against layernorm.)"""
    out, _ = sh([RUN, model, "-z", "models/tok512.bin", "-t", "0", "-n", "256", "--threads=1",
                 f"--compare={norm},{other}", "--json", PROMPT])
    return json.loads(out)


def read_log(path):
    records = [json.loads(line) for line in open(path)]
    train = [r for r in records if r["kind"] == "train"]
    return {"eval": [(r["step"], r["elapsed_s"], r["val_loss"]) for r in records
                     if r["kind"] == "eval"],
            "tokens_per_s": statistics.median(r["tokens_per_s"] for r in train[5:] or train),
            "norm_share": statistics.median(r["norm_share"] for r in records
                                            if r["kind"] == "norms"),
            "train_seconds": train[-1]["elapsed_s"], "steps": len(train),
            "tokens": sum(1 for _ in train) * records[0]["batch_size"] * records[0]["seq_len"]}


def measure(a, seed, text, prompt):
    d = os.path.join(a.out, f"seed{seed}")
    result = {}
    speeds = profile([f"{d}/{norm}.nllm" for norm in a.norms], prompt, a.profile_repeats)
    for norm in a.norms:
        model = f"{d}/{norm}.nllm"
        swap = swap_target(norm, a.norms)
        r = read_log(f"{d}/{norm}.jsonl")
        r["own"], r["swap"] = norm, swap
        r["ppl"] = {n: perplexity(model, text, n) for n in (norm, swap) if n}
        r["prefill_tokens_per_s"], r["decode_tokens_per_s"], r["inference_norm_share"] = \
            speeds[model]
        c = compare(model, norm, swap or OTHER[norm])
        r["texts"] = c["texts"]
        r["swap_kl"] = c["summary"]["mean_kl"] if swap else None
        r["swap_top1"] = c["summary"]["top1_agreement"] if swap else None
        r["sites"] = [(s["site"], s["a"]["mean_over_rms"]) for s in c["sites"]]
        result[norm] = r
    return result


def mean_sd(values):
    values = list(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return statistics.mean(values), sd


def fmt(values, digits=3):
    values = list(values)
    if any(v is None for v in values):
        return "–"
    m, sd = mean_sd(values)
    return f"{m:.{digits}f} ± {sd:.{digits}f}" if len(values) > 1 else f"{m:.{digits}f}"


def rows(norms, n_tokens):
    """The table's quantities: (key, label, value of one model's result, digits, unit of a
    paired difference or None where the norms are not compared so)."""
    swapped = "the other norm" if set(norms) == set(TWINS) else "rmsnorm swapped in"
    return [
        ("val_loss", "final validation loss (train.py, 64 windows of 256), nats/token",
         lambda r: r["eval"][-1][2], 3, "nats/token"),
        ("nll", f"run --ppl, own norm: mean NLL ({n_tokens} tokens)",
         lambda r: r["ppl"][r["own"]][0], 3, "nats/token"),
        ("ppl", "run --ppl, own norm: perplexity", lambda r: r["ppl"][r["own"]][1], 2, ""),
        ("swap_ppl", f"run --ppl under {swapped}: perplexity",
         lambda r: r["ppl"][r["swap"]][1] if r["swap"] else None, 2, None),
        ("swap_kl", "swap: mean KL(own ‖ other), greedy text, nats", lambda r: r["swap_kl"], 4,
         None),
        ("swap_top1", "swap: top-1 agreement", lambda r: r["swap_top1"], 3, None),
        ("train_tokens_per_s", "training tokens/s (median step, 1 thread)",
         lambda r: r["tokens_per_s"], 0, "tokens/s"),
        ("train_norm_share", "norms' share of a training step (hooks)",
         lambda r: r["norm_share"], 3, "of a step"),
        ("train_seconds", "training wall clock, s", lambda r: r["train_seconds"], 0, None),
        ("prefill_tokens_per_s", "inference prefill tokens/s (run --profile, 1 thread)",
         lambda r: r["prefill_tokens_per_s"], 0, "tokens/s"),
        ("decode_tokens_per_s", "inference decode tokens/s", lambda r: r["decode_tokens_per_s"],
         0, "tokens/s"),
        ("inference_norm_share", "norms' share of inference (--profile)",
         lambda r: r["inference_norm_share"], 4, "of the run"),
        ("sites_mean_over_rms", "norm sites' mean |mean|/RMS (own norm)",
         lambda r: statistics.mean(v for _, v in r["sites"]), 3, None)]


def label(norm, norms):
    """A model's name in the tables: "RMSNorm twin" in the twin study, the norm's name else."""
    return f"{LABELS[norm]} twin" if set(norms) == set(TWINS) else norm


def differences(res, norms, n_tokens):
    """Every compared quantity's difference, each norm but the first minus the first, paired by
    seed: {norm: {key: {"mean", "low", "high", "n", "t", "differences"}}}."""
    seeds, base = sorted(res), norms[0]
    out = {}
    for norm in norms[1:]:
        out[norm] = {}
        for key, _, get, _, unit in rows(norms, n_tokens):
            if unit is None:
                continue
            x = [get(res[s][base]) for s in seeds]
            y = [get(res[s][norm]) for s in seeds]
            m, low, high = paired(x, y)
            out[norm][key] = {"mean": m, "low": low, "high": high, "n": len(seeds),
                              "t": t975(len(seeds) - 1) if len(seeds) > 1 else None,
                              "differences": [b - a for a, b in zip(x, y)]}
    return out


def table(res, stories, norms, n_tokens):
    """The comparison in markdown: each row a quantity, a column per norm, mean ± sd over seeds;
    then the paired differences with their 95% intervals, a column per norm compared with the
    first."""
    seeds = sorted(res)
    lines = [f"| quantity ({len(seeds)} seed{'s' if len(seeds) > 1 else ''}: "
             f"{', '.join(map(str, seeds))}) | " + " | ".join(label(n, norms) for n in norms)
             + " |", "|---" * (len(norms) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(fmt([get(res[s][n]) for s in seeds], d) for n in norms)
              + " |" for _, name, get, d, _ in rows(norms, n_tokens)]
    diffs = differences(res, norms, n_tokens)
    base = label(norms[0], norms)
    df = len(seeds) - 1
    lines += ["", f"Paired by seed ({len(seeds)} pair{'s' if df else ''}): each difference's mean "
              + (f"and its 95% interval (Student's t, {df} degree{'s' if df > 1 else ''} of "
                 "freedom)" if df else "(one seed allows no interval)"), "",
              "| difference | " + " | ".join(f"{label(n, norms)} − {base}" for n in norms[1:])
              + " |", "|---" * len(norms) + "|"]
    for key, name, _, d, unit in rows(norms, n_tokens):
        if unit is not None:
            cells, short = [diffs[n][key] for n in norms[1:]], name.split(" (")[0]
            lines.append(f"| {short}{', ' + unit if unit not in short else ''} | "
                         + " | ".join(fmt_interval(c["mean"], c["low"], c["high"], d)
                                      for c in cells) + " |")
    if stories:  # stories260K is no twin: its figures go below the table, not in its columns
        lines += ["", f"stories260K (trained with RMSNorm on all of TinyStories), the same text "
                  f"at seq_len 256: mean NLL {stories[0]:.3f}, perplexity {stories[1]:.2f} under "
                  f"RMSNorm; {stories[2]:.3f}, {stories[3]:.2f} under LayerNorm"]
    return "\n".join(lines), diffs


def sentences(diffs, norms, n_tokens):
    """The paired differences in words: one sentence per norm compared with the first."""
    out = []
    for norm in norms[1:]:
        parts = [verdict(name.split(" (")[0], unit, (d["mean"], d["low"], d["high"]), digits)
                 for key, name, _, digits, unit in rows(norms, n_tokens)
                 if unit is not None for d in [diffs[norm][key]]]
        n = next(iter(diffs[norm].values()))["n"]
        out.append(f"{label(norm, norms)} − {label(norms[0], norms)}, paired by seed ({n} "
                   f"seed{'s' if n > 1 else ''}): " + "; ".join(parts) + ".")
    return "\n\n".join(out)


def ratios(res, norms):
    """First norm / each other norm, speed ratios per seed (each ratio within one seed's runs),
    and each other's own-norm perplexity / the first's."""
    seeds, base = sorted(res), norms[0]
    out = {}
    for norm in norms[1:]:
        out[norm] = {key: [res[s][base][key] / res[s][norm][key] for s in seeds]
                     for key in ("tokens_per_s", "prefill_tokens_per_s", "decode_tokens_per_s")}
        out[norm]["ppl_ratio"] = [res[s][norm]["ppl"][norm][1] / res[s][base]["ppl"][base][1]
                                  for s in seeds]
    return out


def sites_table(res, norms):
    seeds = sorted(res)
    names = [n for n, _ in res[seeds[0]][norms[0]]["sites"]]
    lines = ["| site | " + " | ".join(f"{label(n, norms)} |mean|/RMS" for n in norms) + " |",
             "|---" * (len(norms) + 1) + "|"]
    for i, name in enumerate(names):
        lines.append(f"| {name} | " + " | ".join(fmt([res[s][n]["sites"][i][1] for s in seeds])
                                                 for n in norms) + " |")
    return "\n".join(lines)


def parse_args(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--steps", type=int, default=2400)
    p.add_argument("--norms", nargs="+", choices=NORMS, default=list(TWINS), metavar="NORM",
                   help="the norms to train and compare, each with the first paired by seed "
                   f"(default: {' '.join(TWINS)}; train.py's --norm choices: {', '.join(NORMS)})")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=200)
    for k, v in STORIES260K_SHAPE.items():
        p.add_argument(f"--{k.replace('_', '-')}", type=int,
                       help=f"train.py's (default: {v}, stories260K's, the only shape compared "
                       "with stories260K)")
    p.add_argument("--out", help="the models, results.json and the picture (default: "
                   "build/SECTION)")
    p.add_argument("--train", default=TRAIN, help="training text (train.py's --train)")
    p.add_argument("--valid", default=VALID, help="validation text: train.py's, run --ppl's "
                   "(its first --ppl-stories stories) and the --profile prompt's (the next)")
    p.add_argument("--ppl-stories", type=int, default=PPL_STORIES)
    p.add_argument("--profile-repeats", type=int, default=PROFILE_REPEATS)
    p.add_argument("--docs", default=DOCS, help="the markdown file whose section to write "
                   "(its picture goes beside it)")
    p.add_argument("--section", help="the docs markers <!-- SECTION:begin --> and "
                   "<!-- SECTION:end -->, the picture SECTION_loss.png (default: twins for the "
                   "twin pair, siblings for any other --norms)")
    p.add_argument("--no-train", action="store_true", help="measure the models already in --out")
    p.add_argument("--no-docs", action="store_true", help="leave docs/NORMS.md as it is")
    a = p.parse_args(argv)
    if min(a.seeds, a.steps, a.ppl_stories, a.profile_repeats) < 1:
        p.error("--seeds, --steps, --ppl-stories and --profile-repeats must be at least 1")
    if len(a.norms) < 2 or len(set(a.norms)) < len(a.norms):
        p.error(f"--norms needs two or more different norms, got {' '.join(a.norms)}")
    for k in ("batch_size", "warmup", "eval_every", *STORIES260K_SHAPE):
        if getattr(a, k) is not None and getattr(a, k) < 1:
            p.error(f"--{k.replace('_', '-')} must be at least 1, got {getattr(a, k)}")
    if not (a.lr > 0 and math.isfinite(a.lr)):
        p.error(f"--lr must be a positive number, got {a.lr}")
    a.section = a.section or ("twins" if set(a.norms) == set(TWINS) else "siblings")
    if not re.fullmatch(r"[a-z0-9_-]+", a.section):
        p.error(f"--section {a.section!r}: letters, digits, _ and - only")
    a.out = a.out or os.path.join(ROOT, "build", a.section)
    return a


def check_files(a):
    """Refuses, before any training, what would stop the study after it: --out a file, a --valid
    text without the --ppl-stories stories and the prompt's story after them, a --docs file
    missing or whose section markers are broken. Returns the valid text's stories."""
    if os.path.exists(a.out) and not os.path.isdir(a.out):
        sys.exit(f"twins: --out {a.out} is a file, not a directory")
    try:
        stories = read_stories(a.valid)
    except TrainError as e:
        sys.exit(f"twins: --valid {e}")
    if len(stories) <= a.ppl_stories:
        sys.exit(f"twins: --valid {a.valid} holds {len(stories)} stories: --ppl-stories "
                 f"{a.ppl_stories} and the --profile prompt's story after them need "
                 f"{a.ppl_stories + 1}")
    if not a.no_docs:
        problem = section_problem(a.docs, f"<!-- {a.section}:begin -->",
                                  f"<!-- {a.section}:end -->")
        if problem:
            sys.exit(f"twins: --docs {problem} (--no-docs leaves docs alone)")
    return stories


def main():
    a = parse_args()
    valid = check_files(a)
    os.makedirs(a.out, exist_ok=True)
    times, started = {}, time.time()
    times.update({k: v for k, v in earlier_results(a.out).get("times_s", {}).items()
                  if k.startswith("train seed")})  # the training times of earlier runs
    seeds = list(range(1, a.seeds + 1))
    jobs = [(seed, norm) for seed in seeds for norm in a.norms if not trained(a, seed, norm)]
    if jobs and a.no_train:
        sys.exit(f"twins: --no-train, but {a.out} lacks "
                 f"{', '.join(f'seed {s} {n}' for s, n in jobs)} trained to {a.steps} steps")
    if jobs:
        print(f"twins: {len(seeds) * len(a.norms) - len(jobs)} of {len(seeds) * len(a.norms)} "
              f"models already trained in {a.out}; training {len(jobs)}", flush=True)
        train_models(a, jobs, times)
    if not a.no_train:
        export_ggufs(a, seeds)
    start = time.time()
    text = ppl_text(a, valid)
    s_rms = s_ln = None
    if shape(a) == STORIES260K_SHAPE:  # stories260K's numbers beside models of its shape alone
        stories = os.path.join(a.out, "stories260K_256.nllm")
        sh([PYTHON, "export.py", "models/stories260K.pt", "--seq-len", "256", "--out", stories,
            "--quiet"])
        s_rms, s_ln = perplexity(stories, text), perplexity(stories, text, "layernorm")
    prompt = valid[a.ppl_stories][:400]
    res = {seed: measure(a, seed, text, prompt) for seed in seeds}
    n_tokens = res[seeds[0]][a.norms[0]]["ppl"][a.norms[0]][2]
    times["compare (run --ppl, --profile, --compare)"] = time.time() - start
    t, diffs = table(res, s_rms and (*s_rms[:2], *s_ln[:2]), a.norms, n_tokens)
    result = {"seeds": seeds, "norms": a.norms, "shape": shape(a), "args": vars(a),
              "results": res, "paired": diffs, "ratios": ratios(res, a.norms),
              "stories260K": s_rms and {"rmsnorm": s_rms, "layernorm": s_ln}, "times_s": times}
    write_results(a.out, result)
    start = time.time()
    # --no-docs leaves docs/ alone: the picture goes beside results.json
    picture = os.path.join(a.out if a.no_docs else os.path.dirname(a.docs),
                           f"{a.section}_loss.png")
    sh([PYTHON, "tools/plot_twins.py", os.path.join(a.out, "results.json"), picture])
    times["plot"] = time.time() - start
    times["total" if jobs else "total of the measuring run (no training)"] = time.time() - started
    name = {n: LABELS[n] if set(a.norms) == set(TWINS) else n for n in a.norms}
    summary = "\n\n".join(
        f"{name[a.norms[0]]} / {name[n]} speed, per seed: training {fmt(r['tokens_per_s'])}x, "
        f"prefill {fmt(r['prefill_tokens_per_s'])}x, decode {fmt(r['decode_tokens_per_s'])}x; "
        f"perplexity {label(n, a.norms)} / {label(a.norms[0], a.norms)} {fmt(r['ppl_ratio'])}"
        for n, r in result["ratios"].items())
    summary += "\n\n" + sentences(diffs, a.norms, n_tokens)
    print(t + "\n\n" + sites_table(res, a.norms) + "\n\n" + summary)
    print("\n".join(f"twins: {k}: {v:.0f} s" for k, v in times.items()))
    if not a.no_docs:
        write_docs(a, result, t, sites_table(res, a.norms), summary)


def earlier_results(out):
    """The results.json that an earlier run left in out, or {} when there is none or it is not
    one (a note says so: its times are not carried over)."""
    path = os.path.join(out, "results.json")
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            old = json.load(f)
        if isinstance(old, dict):
            return old
    except (ValueError, OSError):  # json's errors and UnicodeDecodeError are ValueErrors
        pass
    prog = os.path.splitext(os.path.basename(sys.argv[0]))[0]  # twins or twins_lr
    print(f"{prog}: {path} is not a results file: the earlier runs' times are not carried over",
          file=sys.stderr, flush=True)
    return {}


def write_results(out, result):
    """out/results.json, whole or not at all: written beside it, then renamed over it, so that a
    run stopped while writing leaves the earlier one."""
    path = os.path.join(out, "results.json")
    with open(f"{path}.tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(f"{path}.tmp", path)


def command_line(a, seeds):
    """The twins.py command that makes this result: the options that differ from the
    defaults."""
    defaults = vars(parse_args([]))
    parts = [f"--seeds {seeds}", f"--steps {a.steps}"]
    for k in ("norms", "batch_size", "lr", "warmup", "eval_every", *STORIES260K_SHAPE,
              "ppl_stories", "profile_repeats", "section"):
        v = getattr(a, k)
        if v != defaults[k] or k in ("batch_size", "lr", "warmup", "eval_every", "ppl_stories",
                                     "profile_repeats"):
            parts.append(f"--{k.replace('_', '-')} {' '.join(v) if k == 'norms' else v}")
    parts += [f"--{k} {getattr(a, k)}" for k in ("train", "valid") if not same_text(a, k)]
    return "tools/twins.py " + " ".join(parts)


def same_text(a, k):
    """Whether a's --train or --valid (k) is the default file."""
    return os.path.abspath(getattr(a, k)) == os.path.abspath({"train": TRAIN, "valid": VALID}[k])


def make_line(a, seeds):
    """The make command that runs this study, or None when none does: make twins and make
    siblings give twins.py --seeds and --steps (TWIN_STEPS), make siblings --norms too, and leave
    every other option of the result at its default."""
    defaults = vars(parse_args([]))
    if not (same_text(a, "train") and same_text(a, "valid")) or any(
            getattr(a, k) != defaults[k] for k in ("batch_size", "lr", "warmup", "eval_every",
                                                   *STORIES260K_SHAPE, "ppl_stories",
                                                   "profile_repeats")):
        return None
    steps = f" TWIN_STEPS={a.steps}" if a.steps != defaults["steps"] else ""
    if a.section == "twins" and a.norms == list(TWINS):
        return f"make twins TWIN_SEEDS={seeds}{steps}"
    if a.section == "siblings" and set(a.norms) != set(TWINS):
        return f"make siblings SIBLING_NORMS=\"{' '.join(a.norms)}\" SIBLING_SEEDS={seeds}{steps}"
    return None


def write_docs(a, result, t, sites, summary):
    seeds = result["seeds"]
    first = result["results"][seeds[0]]
    begin, end = f"<!-- {a.section}:begin -->", f"<!-- {a.section}:end -->"
    make = make_line(a, len(seeds))
    command = f"{make}  # " if make else f"{PYTHON} "
    command += command_line(a, len(seeds))
    if a.no_train:
        command += f"\n    {PYTHON} {command_line(a, len(seeds))} --no-train  # measured again"
    kind = "twin" if set(a.norms) == set(TWINS) else "model"
    texts = "\n".join(f"- {n} {kind}, seed {seeds[0]}, greedy from \"{PROMPT}\": "
                      f"{json.dumps(first[n]['texts'][0][:600])}" for n in a.norms)
    times = ", ".join(f"{k} {v:.0f} s" for k, v in result["times_s"].items())
    section = f"""{begin}
Made by (on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {times}):

    {command}

{t}

{summary}

Norm sites' |mean| / RMS of each model under its own norm (`run --compare --json`, greedy from
"{PROMPT}", 256 positions):

{sites}

{texts}

![validation loss against step and wall clock, by norm and seed]({a.section}_loss.png)
{end}"""
    replace_section(a.docs, section, begin, end)


def section_problem(path, begin, end):
    """What keeps replace_section from writing path's section, in words, or None: the file
    missing or not writable, or its begin marker without the end marker after it."""
    if not os.path.isfile(path) or not os.access(path, os.W_OK):
        return f"{path}: no such writable file"
    doc = open(path, encoding="utf-8", errors="replace").read()
    if begin in doc and end not in doc[doc.index(begin):]:
        return f"{path} has {begin} but no {end} after it"
    return None


def replace_section(path, section, begin, end):
    """Puts section (which opens with begin and closes with end) in place of the file's text from
    begin to end, or at its end when the file has no begin (section_problem says what it
    cannot replace)."""
    doc = open(path).read()
    if begin in doc:
        doc = doc[:doc.index(begin)] + section + doc[doc.index(end) + len(end):]
    else:
        doc += "\n" + section + "\n"
    with open(path, "w") as f:
        f.write(doc)


if __name__ == "__main__":
    main()
