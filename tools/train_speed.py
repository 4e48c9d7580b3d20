#!/usr/bin/env python3
"""Training speed of each norm, measured side by side (`make siblings-speed`, issue 28 item 3):
the studies' models (tools/twins.py) train in minutes-long runs at whatever load the machine had
then, so their tokens/s compare badly across runs. Here each norm of --norms trains --steps steps
of the twins' recipe (tools/twins.py's train_args, one thread), two at a time on the two cores, the
norms rotated each round so that every norm meets a different neighbour; a run's speed is the
median of its steps' tokens/s from step SKIP on (the first steps allocate). The table gives each
norm's median over the rounds and the first norm's speed over its own, round by round (the
median of those ratios, and their range). Writes --out/results.json and, unless --no-docs, the
section of docs/NORMS.md between its markers.

usage: tools/train_speed.py [--norms NORM ...] [--steps N] [--rounds N] [--out DIR] [--train FILE]
                           [--valid FILE] [--docs FILE] [--no-docs]
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import twins  # noqa: E402 (the repository's tools on the path first)
from nllm_format import NORMS  # noqa: E402

SKIP = 5  # the steps that allocate, left out of a run's median
SIBLINGS = ["rmsnorm", "rmsnorm_bias", "rmsnorm_learned_eps", "prmsnorm", "dyt", "identity"]
BEGIN, END = "<!-- siblings-speed:begin -->", "<!-- siblings-speed:end -->"


def parse_args(argv=None):
    p = twins.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--norms", nargs="+", choices=NORMS, default=SIBLINGS, metavar="NORM")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=os.path.join(ROOT, "build", "train_speed"))
    p.add_argument("--train", default=twins.TRAIN)
    p.add_argument("--valid", default=twins.VALID)
    p.add_argument("--docs", default=twins.DOCS)
    p.add_argument("--no-docs", action="store_true")
    a = p.parse_args(argv)
    if a.steps <= SKIP:
        p.error(f"--steps must be more than {SKIP} (the steps left out), got {a.steps}")
    if a.rounds < 1 or len(set(a.norms)) < 2 or len(set(a.norms)) != len(a.norms):
        p.error("--rounds must be at least 1 and --norms two or more different norms")
    if os.path.exists(a.out) and not os.path.isdir(a.out):
        p.error(f"--out {a.out}: not a directory")
    if not a.no_docs and twins.section_problem(a.docs, BEGIN, END):
        p.error(twins.section_problem(a.docs, BEGIN, END))
    # the twins' recipe: their batches, lr, warmup; no validation
    recipe = twins.parse_args(["--no-docs", "--train", a.train, "--valid", a.valid])
    recipe.steps, recipe.eval_every = a.steps, 0
    a.recipe = recipe
    return a


def run_speed(log):
    """The median tokens/s of a train.py log's steps from SKIP + 1 on."""
    speeds = [r["tokens_per_s"] for r in map(json.loads, open(log))
              if r.get("kind") == "train" and r["step"] > SKIP]
    return statistics.median(speeds)


def measure_round(a, r):
    """One round: the norms rotated by r, trained two at a time; {norm: tokens/s}."""
    order = a.norms[r % len(a.norms):] + a.norms[:r % len(a.norms)]
    speeds = {}
    for i in range(0, len(order), 2):
        procs = {}
        for norm in order[i:i + 2]:
            d = os.path.join(a.out, f"round{r + 1}")
            os.makedirs(d, exist_ok=True)
            args = twins.train_args(a.recipe, norm, 1, d) + ["--quiet"]
            procs[norm] = subprocess.Popen([twins.PYTHON, *args], cwd=ROOT)
        for norm, p in procs.items():
            if p.wait() != 0:
                sys.exit(f"train_speed: training {norm} failed")
            speeds[norm] = run_speed(os.path.join(a.out, f"round{r + 1}", f"{norm}.jsonl"))
    return speeds


def table(rounds, norms):
    """The markdown table: tokens/s (median and range over rounds) and the first norm's speed
    over each norm's, per round."""
    first = norms[0]
    lines = [f"| norm | training tokens/s, median (range) | {first} / it, median (range) |",
             "|---|---|---|"]
    for norm in norms:
        s = [r[norm] for r in rounds]
        q = [r[first] / r[norm] for r in rounds]
        lines.append(f"| {norm} | {statistics.median(s):.0f} ({min(s):.0f}-{max(s):.0f}) | "
                     f"{statistics.median(q):.3f} ({min(q):.3f}-{max(q):.3f}) |")
    return "\n".join(lines)


def main():
    a = parse_args()
    os.makedirs(a.out, exist_ok=True)
    start, load = time.time(), os.getloadavg()[0]
    rounds = [measure_round(a, r) for r in range(a.rounds)]
    t = table(rounds, a.norms)
    took = (f"{a.rounds} rounds of {a.steps} steps, {time.time() - start:.0f} s, load "
            f"{load:.1f} at the start and {os.getloadavg()[0]:.1f} at the end")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"norms": a.norms, "steps": a.steps, "rounds": rounds, "took": took}, f,
                  indent=1)
    print(t + "\n\n" + took)
    if not a.no_docs:
        given = [f"--norms {' '.join(a.norms)}", f"--steps {a.steps}", f"--rounds {a.rounds}"]
        given += [f"--{k} {getattr(a, k)}" for k in ("train", "valid")
                  if os.path.abspath(getattr(a, k)) != getattr(twins, k.upper())]
        made = given[3:] == [] and a.norms == SIBLINGS and a.steps == 40 and a.rounds == 3
        command = ("make siblings-speed  # " if made else f"{twins.PYTHON} ") + \
            "tools/train_speed.py " + " ".join(given)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        section = f"{BEGIN}\nMade by (on {when}; {took}):\n\n    {command}\n\n{t}\n{END}"
        twins.replace_section(a.docs, section, BEGIN, END)


if __name__ == "__main__":
    main()
