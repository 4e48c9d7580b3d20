#!/usr/bin/env python3
"""The twin study (`make twins`): train the stories260K shape with RMSNorm and with LayerNorm
(train.py, the same seed, init, batches and optimizer), export both (normllama files, and GGUFs
for llama.cpp: llama and stablelm), and compare them with run:
validation loss and perplexity (each twin with its own norm, and the 2 x 2 swap), stories260K on
the same text, training and inference speed and the norms' share of each, the norm sites'
|mean| / RMS, the greedy texts; over --seeds seeds (mean and spread). Prints the table, writes
build/twins/results.json, the picture (tools/plot_twins.py) and the section of docs/NORMS.md
between its two markers.

usage: tools/twins.py [--seeds N] [--steps N] [--out DIR] [--train FILE] [--valid FILE]
                      [--ppl-stories N] [--profile-repeats N] [--docs FILE] [--no-train]
                      [--no-docs]
Timings are of a machine shared with other jobs: the medians are what to read.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from nllm_format import TWINS  # noqa: E402 (the repository's root on the path first)

PYTHON = sys.executable
RUN = os.path.join(ROOT, "run")
OTHER = {"rmsnorm": "layernorm", "layernorm": "rmsnorm"}
TRAIN = os.path.join(ROOT, "data/cache/tinystories_train.txt")
VALID = os.path.join(ROOT, "data/cache/tinystories_valid.txt")
END = "\n<|endoftext|>\n"
PPL_STORIES = 200  # of the valid text, for run --ppl (the whole of it takes minutes per model)
PROFILE_REPEATS = 7
PROMPT = "Once upon a time"
DOCS = os.path.join(ROOT, "docs/NORMS.md")
BEGIN_MARK, END_MARK = "<!-- twins:begin -->", "<!-- twins:end -->"


def sh(cmd, **kwargs):
    """Runs cmd (a list); returns (stdout, stderr); a failure stops the study with its stderr."""
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kwargs)
    if p.returncode != 0:
        sys.exit(f"twins: {' '.join(cmd)} failed:\n{p.stderr.strip()}")
    return p.stdout, p.stderr


def train_args(a, norm, seed, d):
    return ["train.py", "--norm", norm, "--seed", str(seed), "--steps", str(a.steps),
            "--batch-size", str(a.batch_size), "--seq-len", "256", "--lr", str(a.lr),
            "--warmup", str(a.warmup), "--eval-every", str(a.eval_every), "--eval-windows", "64",
            "--threads", "1", "--train", a.train, "--valid", a.valid, "--out", f"{d}/{norm}.pt",
            "--export", f"{d}/{norm}.nllm", "--log", f"{d}/{norm}.jsonl"]


def train_twins(a, seed, times):
    """Trains the two twins of one seed at the same time, one thread each on the machine's two
    cores: each gets a core, both see the same load from anything else, and the pair ends in
    the time of one. The RMSNorm twin draws the progress bar; the LayerNorm twin runs --quiet."""
    d = os.path.join(a.out, f"seed{seed}")
    os.makedirs(d, exist_ok=True)
    start, procs = time.time(), {}
    for norm in TWINS:
        args = train_args(a, norm, seed, d) + (["--quiet"] if norm == "layernorm" else [])
        print(f"twins: seed {seed}, {norm}: {PYTHON} {' '.join(args)}", flush=True)
        procs[norm] = subprocess.Popen([PYTHON, *args], cwd=ROOT)
    for norm, p in procs.items():
        if p.wait() != 0:
            for other in procs.values():
                other.kill()
            sys.exit(f"twins: training seed {seed} {norm} failed")
        times[f"train seed {seed} {norm}"] = time.time() - start
    for norm in TWINS:  # the twins for llama.cpp too (docs/MODELS.md): llama and stablelm
        sh([PYTHON, "export.py", f"{d}/{norm}.pt", "--tokenizer", "models/tok512.model", "--out",
            f"{d}/{norm}.gguf", "--quiet"])
    return d


def ppl_text(a):
    """The first --ppl-stories stories of the valid text, one paragraph of lines each."""
    path = os.path.join(a.out, "valid_ppl.txt")
    stories = open(a.valid, encoding="utf-8").read().split(END)[:a.ppl_stories]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(stories) + "\n")
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


def compare(model, norm):
    """--compare of the twin's own norm against the other: JSON."""
    out, _ = sh([RUN, model, "-z", "models/tok512.bin", "-t", "0", "-n", "256", "--threads=1",
                 f"--compare={norm},{OTHER[norm]}", "--json", PROMPT])
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
    speeds = profile([f"{d}/{norm}.nllm" for norm in TWINS], prompt, a.profile_repeats)
    for norm in TWINS:
        model = f"{d}/{norm}.nllm"
        r = read_log(f"{d}/{norm}.jsonl")
        r["ppl"] = {n: perplexity(model, text, n) for n in TWINS}
        r["prefill_tokens_per_s"], r["decode_tokens_per_s"], r["inference_norm_share"] = \
            speeds[model]
        c = compare(model, norm)
        r["texts"] = c["texts"]
        r["swap_kl"] = c["summary"]["mean_kl"]
        r["swap_top1"] = c["summary"]["top1_agreement"]
        r["sites"] = [(s["site"], s["a"]["mean_over_rms"]) for s in c["sites"]]
        result[norm] = r
    return result


def mean_sd(values):
    values = list(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return statistics.mean(values), sd


def fmt(values, digits=3):
    m, sd = mean_sd(values)
    return f"{m:.{digits}f} ± {sd:.{digits}f}" if len(values) > 1 else f"{m:.{digits}f}"


def table(res, stories, a, n_tokens):
    """The comparison in markdown: each row a quantity, a column per norm; mean ± sd over seeds."""
    seeds = sorted(res)

    def col(norm, get, digits=3):
        return fmt([get(res[s][norm]) for s in seeds], digits)

    rows = [("final validation loss (train.py, 64 windows of 256), nats/token",
             lambda r: r["eval"][-1][2], 3),
            (f"run --ppl, own norm: mean NLL ({n_tokens} tokens)",
             lambda r: r["ppl"][r["own"]][0], 3),
            ("run --ppl, own norm: perplexity", lambda r: r["ppl"][r["own"]][1], 2),
            ("run --ppl under the other norm: perplexity", lambda r: r["ppl"][OTHER[r["own"]]][1], 2),
            ("swap: mean KL(own ‖ other), greedy text, nats", lambda r: r["swap_kl"], 4),
            ("swap: top-1 agreement", lambda r: r["swap_top1"], 3),
            ("training tokens/s (median step, 1 thread)", lambda r: r["tokens_per_s"], 0),
            ("norms' share of a training step (hooks)", lambda r: r["norm_share"], 3),
            ("training wall clock, s", lambda r: r["train_seconds"], 0),
            ("inference prefill tokens/s (run --profile, 1 thread)",
             lambda r: r["prefill_tokens_per_s"], 0),
            ("inference decode tokens/s", lambda r: r["decode_tokens_per_s"], 0),
            ("norms' share of inference (--profile)", lambda r: r["inference_norm_share"], 4),
            ("norm sites' mean |mean|/RMS (own norm)",
             lambda r: statistics.mean(v for _, v in r["sites"]), 3)]
    for s in seeds:
        for n in TWINS:
            res[s][n]["own"] = n
    lines = [f"| quantity ({len(seeds)} seed{'s' if len(seeds) > 1 else ''}: "
             f"{', '.join(map(str, seeds))}) | RMSNorm twin | LayerNorm twin |", "|---|---|---|"]
    lines += [f"| {name} | {col('rmsnorm', get, d)} | {col('layernorm', get, d)} |"
              for name, get, d in rows]
    # stories260K is no twin: its figures under each norm go below the table, not in its columns
    lines += ["", f"stories260K (trained with RMSNorm on all of TinyStories), the same text at "
              f"seq_len 256: mean NLL {stories[0]:.3f}, perplexity {stories[1]:.2f} under RMSNorm; "
              f"{stories[2]:.3f}, {stories[3]:.2f} under LayerNorm"]
    return "\n".join(lines)


def ratios(res):
    """RMSNorm / LayerNorm speed ratios per seed (each ratio within one seed's runs)."""
    seeds = sorted(res)
    out = {}
    for key in ("tokens_per_s", "prefill_tokens_per_s", "decode_tokens_per_s"):
        out[key] = [res[s]["rmsnorm"][key] / res[s]["layernorm"][key] for s in seeds]
    out["ppl_ratio"] = [res[s]["layernorm"]["ppl"]["layernorm"][1] /
                        res[s]["rmsnorm"]["ppl"]["rmsnorm"][1] for s in seeds]
    return out


def sites_table(res):
    seeds = sorted(res)
    names = [n for n, _ in res[seeds[0]]["rmsnorm"]["sites"]]
    lines = ["| site | RMSNorm twin |mean|/RMS | LayerNorm twin |mean|/RMS |", "|---|---|---|"]
    for i, name in enumerate(names):
        lines.append(f"| {name} | {fmt([res[s]['rmsnorm']['sites'][i][1] for s in seeds])} | "
                     f"{fmt([res[s]['layernorm']['sites'][i][1] for s in seeds])} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--steps", type=int, default=2400)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--out", default=os.path.join(ROOT, "build/twins"))
    p.add_argument("--train", default=TRAIN, help="training text (train.py's --train)")
    p.add_argument("--valid", default=VALID, help="validation text: train.py's, run --ppl's "
                   "(its first --ppl-stories stories) and the --profile prompt's (the next)")
    p.add_argument("--ppl-stories", type=int, default=PPL_STORIES)
    p.add_argument("--profile-repeats", type=int, default=PROFILE_REPEATS)
    p.add_argument("--docs", default=DOCS, help="the markdown file whose twins section to write "
                   "(its picture goes beside it)")
    p.add_argument("--no-train", action="store_true", help="measure the twins already in --out")
    p.add_argument("--no-docs", action="store_true", help="leave docs/NORMS.md as it is")
    a = p.parse_args()
    if min(a.seeds, a.steps, a.ppl_stories, a.profile_repeats) < 1:
        p.error("--seeds, --steps, --ppl-stories and --profile-repeats must be at least 1")
    os.makedirs(a.out, exist_ok=True)
    times, started = {}, time.time()
    seeds = list(range(1, a.seeds + 1))
    if not a.no_train:
        for seed in seeds:
            train_twins(a, seed, times)
    elif os.path.exists(os.path.join(a.out, "results.json")):  # the training times of the twins
        with open(os.path.join(a.out, "results.json")) as f:
            times.update({k: v for k, v in json.load(f)["times_s"].items()
                          if k.startswith("train seed")})
    start = time.time()
    text = ppl_text(a)
    stories = os.path.join(a.out, "stories260K_256.nllm")
    sh([PYTHON, "export.py", "models/stories260K.pt", "--seq-len", "256", "--out", stories,
        "--quiet"])
    s_rms, s_ln = perplexity(stories, text), perplexity(stories, text, "layernorm")
    n_tokens = s_rms[2]
    prompt = open(a.valid, encoding="utf-8").read().split(END)[a.ppl_stories][:400]
    res = {seed: measure(a, seed, text, prompt) for seed in seeds}
    times["compare (run --ppl, --profile, --compare)"] = time.time() - start
    result = {"seeds": seeds, "args": vars(a), "results": res, "ratios": ratios(res),
              "stories260K": {"rmsnorm": s_rms, "layernorm": s_ln}, "times_s": times}
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    start = time.time()
    # --no-docs leaves docs/ alone: the picture goes beside results.json
    picture = os.path.join(a.out if a.no_docs else os.path.dirname(a.docs), "twins_loss.png")
    sh([PYTHON, "tools/plot_twins.py", os.path.join(a.out, "results.json"), picture])
    times["plot"] = time.time() - start
    times["total" if not a.no_train else "total of the measuring (--no-train) run"] = \
        time.time() - started
    t = table(res, (*s_rms[:2], *s_ln[:2]), a, n_tokens)
    r = result["ratios"]
    summary = (f"RMSNorm / LayerNorm speed, per seed: training {fmt(r['tokens_per_s'])}x, "
               f"prefill {fmt(r['prefill_tokens_per_s'])}x, decode "
               f"{fmt(r['decode_tokens_per_s'])}x; perplexity LayerNorm twin / RMSNorm twin "
               f"{fmt(r['ppl_ratio'])}")
    print(t + "\n\n" + sites_table(res) + "\n\n" + summary)
    print("\n".join(f"twins: {k}: {v:.0f} s" for k, v in times.items()))
    if not a.no_docs:
        write_docs(a, result, t, sites_table(res), summary)


def write_docs(a, result, t, sites, summary):
    seeds = result["seeds"]
    first = result["results"][seeds[0]]
    command = (f"make twins TWIN_SEEDS={len(seeds)}  # tools/twins.py --seeds {len(seeds)} "
               f"--steps {a.steps} --batch-size {a.batch_size} --lr {a.lr} --warmup {a.warmup} "
               f"--eval-every {a.eval_every} --ppl-stories {a.ppl_stories} --profile-repeats "
               f"{a.profile_repeats}")
    if a.no_train:
        command += (f"\n    {PYTHON} tools/twins.py --seeds {len(seeds)} --no-train  # the "
                    "trained twins measured again")
    texts = "\n".join(f"- {n} twin, seed {seeds[0]}, greedy from \"{PROMPT}\": "
                      f"{json.dumps(first[n]['texts'][0][:600])}" for n in TWINS)
    times = ", ".join(f"{k} {v:.0f} s" for k, v in result["times_s"].items())
    section = f"""{BEGIN_MARK}
Made by (on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {times}):

    {command}

{t}

{summary}

Norm sites' |mean| / RMS of each twin under its own norm (`run --compare --json`, greedy from
"{PROMPT}", 256 positions):

{sites}

{texts}

![validation loss of the twins against step and wall clock](twins_loss.png)
{END_MARK}"""
    doc = open(a.docs).read()
    if BEGIN_MARK in doc:
        doc = doc[:doc.index(BEGIN_MARK)] + section + doc[doc.index(END_MARK) + len(END_MARK):]
    else:
        doc += "\n" + section + "\n"
    with open(a.docs, "w") as f:
        f.write(doc)


if __name__ == "__main__":
    main()
