#!/usr/bin/env python3
"""Training speed of each norm, measured side by side (`make siblings-speed`, issue 28 item 3):
the studies' models (tools/twins.py) train in minutes-long runs at whatever load the machine had
then, so their tokens/s compare badly across runs. Here each norm of --norms after the first
trains --steps steps of the twins' recipe (tools/twins.py's train_args, one thread) beside the
first norm, one on each core, as the twins train; --rounds times, the order of the norms reversed
every other round. A run's speed is its tokens over its steps' seconds from step SKIP on (the
first steps allocate). Side by side because this machine's speed is not steady: step by step,
both cores run at about 11,000 tokens/s or both at about 7,000, switching within seconds (2
vCPUs of a shared host), so that only runs at the same time compare; a first version rotated the
norms through pairs of their own and read ratios of 0.6 to 1.6 between runs of the same code.
The table gives each norm's speed (median and range over rounds) and the first norm's speed over
it, run beside it (median and range of the rounds' ratios). Writes --out/results.json and,
unless --no-docs, the section of docs/NORMS.md between its markers.

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

SKIP = 5  # the steps that allocate, left out of a run's speed
STEPS, ROUNDS = 100, 3  # the defaults, make siblings-speed's
SIBLINGS = ["rmsnorm", "rmsnorm_bias", "rmsnorm_learned_eps", "prmsnorm", "dyt", "identity"]
BEGIN, END = "<!-- siblings-speed:begin -->", "<!-- siblings-speed:end -->"


def parse_args(argv=None):
    p = twins.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--norms", nargs="+", choices=NORMS, default=SIBLINGS, metavar="NORM")
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--rounds", type=int, default=ROUNDS)
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
    """A train.py log's tokens over its steps' seconds, from step SKIP + 1 on (each step's
    seconds its tokens over its logged tokens/s, the tokens the same every step)."""
    speeds = [r["tokens_per_s"] for r in map(json.loads, open(log))
              if r.get("kind") == "train" and r["step"] > SKIP]
    return len(speeds) / sum(1 / x for x in speeds)


def measure_round(a, r):
    """One round: each norm after the first trained beside the first; {norm: (its tokens/s, the
    first's beside it)}."""
    others = a.norms[1:] if r % 2 == 0 else a.norms[:0:-1]
    d = os.path.join(a.out, f"round{r + 1}")
    os.makedirs(d, exist_ok=True)
    speeds = {}
    for other in others:
        procs = {}
        for norm in (a.norms[0], other):
            args = twins.train_args(a.recipe, norm, 1, d) + ["--quiet"]
            args[args.index("--log") + 1] = os.path.join(d, f"{norm}-{other}.jsonl")
            procs[norm] = subprocess.Popen([twins.PYTHON, *args], cwd=ROOT)
        for norm, p in procs.items():
            if p.wait() != 0:
                sys.exit(f"train_speed: training {norm} failed")
        speeds[other] = tuple(run_speed(os.path.join(d, f"{n}-{other}.jsonl"))
                              for n in (other, a.norms[0]))
    return speeds


def table(rounds, norms):
    """The markdown table: each norm's tokens/s (median and range over rounds; the first norm's
    over all its runs) and the first norm's speed over each one's beside it, per round."""
    first = norms[0]
    lines = [f"| norm | training tokens/s, median (range) | {first} / it, side by side, median "
             "(range) |", "|---|---|---|"]
    mine = [r[n][1] for r in rounds for n in norms[1:]]
    lines.append(f"| {first} | {statistics.median(mine):.0f} ({min(mine):.0f}-{max(mine):.0f}) "
                 "| |")
    for norm in norms[1:]:
        s = [r[norm][0] for r in rounds]
        q = [r[norm][1] / r[norm][0] for r in rounds]
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
        json.dump({"norms": a.norms, "steps": a.steps, "took": took,
                   "rounds": [{n: {"tokens_per_s": v[0], "first_beside": v[1]}
                               for n, v in r.items()} for r in rounds]}, f, indent=1)
    print(t + "\n\n" + took)
    if not a.no_docs:
        given = [f"--norms {' '.join(a.norms)}", f"--steps {a.steps}", f"--rounds {a.rounds}"]
        given += [f"--{k} {getattr(a, k)}" for k in ("train", "valid")
                  if os.path.abspath(getattr(a, k)) != getattr(twins, k.upper())]
        made = given[3:] == [] and a.norms == SIBLINGS and a.steps == STEPS and a.rounds == ROUNDS
        command = ("make siblings-speed  # " if made else f"{twins.PYTHON} ") + \
            "tools/train_speed.py " + " ".join(given)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        section = f"{BEGIN}\nMade by (on {when}; {took}):\n\n    {command}\n\n{t}\n{END}"
        twins.replace_section(a.docs, section, BEGIN, END)


if __name__ == "__main__":
    main()
