#!/usr/bin/env python3
"""Train a LLaMA-style model (nllm_model.py, the forward pass run computes) with one of run's
norms (--norm: RMSNorm, LayerNorm or a sibling) on TinyStories text, on the CPU, and export it as a
normllama file.

Twins: two runs that differ in --norm alone get the same initial values of every tensor they share
(all but the norms' parameters: weights 1, biases 0, DyT's alpha and the learned log eps as
nllm_model.py says), the same batches in the same order
(each step's batch is drawn from a generator seeded by --seed and the step), the same optimizer
(AdamW, linear warmup then cosine decay to lr / 10, gradient clipping at 1) and hyperparameters.
The same command on the same machine gives the same losses.

Data: a text file of stories separated by lines "<|endoftext|>" (TinyStories-train.txt's format;
`models/fetch.sh --data tinystories_train.txt tinystories_valid.txt` fetches the project's sample
into data/cache/). Each story is tokenized with --tokenizer (a SentencePiece model), BOS first,
and the stories are concatenated; the ids are cached as build/data/*.npy (uint16, or uint32 for a
vocabulary of more than 65,536), keyed by the sha256 of the text and of the tokenizer. A batch is
--batch-size windows of seq_len + 1 tokens at random offsets; validation scores the first
--eval-windows consecutive windows of the valid text.

Outputs: --out, a checkpoint (llama2.c's layout: "model_args" and a "model" state dict, plus the
optimizer's state and the step, for --resume; export.py reads it too); --export, the normllama file
(it records the norm and carries its biases and per-site scalars, so run uses that norm by
default; the file carries --tokenizer's vocabulary, so run needs no -z);
--log, JSON lines: one "config" record, one "train" record per step (loss, lr, tokens/s, the
batch's crc32), one "eval" record per --eval-every steps (validation loss, the training wall clock
so far) and one "norms" record after each eval (the time the norms took, forward and backward,
within one step, timed by hooks on the norm modules, and its share of that step).

--stop-if-diverged (the learning-rate sweep, tools/twins_lr.py): a run whose training loss is not
finite, or exceeds ln(vocab_size) + 0.1 after the warmup (worse than the uniform guess it started
from, by more than a first step's noise), stops at that step with a "diverged" record (step, loss, reason) and exit status 0, writing no
final evaluation, checkpoint or export; without it a non-finite loss is an error.

Under `torchrun --nproc_per_node=N train.py ...` each process takes 1/N of every batch (gloo,
DistributedDataParallel): the losses equal one process's with the same --batch-size within
floating-point rounding. Errors print one line "train.py: error: ..." and exit 1.

Full TinyStories (2.1 M stories): download TinyStories-train.txt and TinyStories-valid.txt from
https://huggingface.co/datasets/roneneldan/TinyStories and pass them as --train and --valid.
"""
import argparse
import hashlib
import json
import math
import os
import signal
import sys
import time
import zlib

import numpy as np
import torch

import nllm_model
from nllm_checkpoint import require_regular_file, torch_load
from nllm_format import (BIASED, NORMS, Config, ExportError, Output, sentencepiece_vocab,
                         write_model)
from nllm_model import Transformer

STORY_END = "\n<|endoftext|>\n"
# --stop-if-diverged's margin above ln(vocab_size), in nats: an untrained model's loss sits within
# 0.015 of ln(512) (the first step's loss was 6.238 to 6.253 over the 22 runs of the twins and
# siblings), so a run that has barely moved (a tiny learning rate) must not read as diverged.
DIVERGED_MARGIN = 0.1
CACHE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "build", "data")


class TrainError(Exception):
    """A problem with the input, reported as one line without a traceback."""


# ----------------------------------------------------------------------------
# Data


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_stories(path):
    """The stories of a text file in TinyStories' format; a file without separators is one story."""
    if not os.path.exists(path):
        raise TrainError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise TrainError(f"{path}: not a regular file")
    try:
        text = open(path, encoding="utf-8").read()
    except UnicodeDecodeError as e:
        raise TrainError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})")
    stories = [s for s in text.split(STORY_END) if s.strip()]
    if not stories:
        raise TrainError(f"{path}: empty (no stories)")
    return stories


def load_tokens(path, sp, tokenizer_sha):
    """The ids of every story of path, BOS first, concatenated (uint16, or uint32 when the
    vocabulary has ids past 65,535, which uint16 would wrap); cached under CACHE_DIR."""
    stories = read_stories(path)
    key = hashlib.sha256((sha256_of(path) + tokenizer_sha).encode()).hexdigest()[:24]
    cache = os.path.join(CACHE_DIR, f"{os.path.basename(path)}-{key}.npy")
    if os.path.isfile(cache):
        return np.load(cache, allow_pickle=False)
    dtype = np.uint16 if sp.vocab_size() <= 1 << 16 else np.uint32
    ids = np.fromiter((t for s in sp.encode(stories) for t in [sp.bos_id()] + s), dtype=dtype)
    os.makedirs(CACHE_DIR, exist_ok=True)
    tmp = f"{cache}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        np.save(f, ids, allow_pickle=False)
    os.replace(tmp, cache)
    return ids


def batch_offsets(seed, step, n_tokens, seq_len, batch_size):
    """Start offsets of step's windows: a function of (seed, step) alone, so twins, resumed runs
    and every DDP process draw the same ones."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    return torch.randint(0, n_tokens - seq_len - 1, (batch_size,), generator=g)


def windows(tokens, offsets, seq_len):
    """(inputs, targets), each (len(offsets), seq_len) int64: tokens[o:o+T] and tokens[o+1:o+T+1]."""
    rows = np.stack([tokens[o:o + seq_len + 1] for o in offsets.tolist()]).astype(np.int64)
    rows = torch.from_numpy(rows)
    return rows[:, :-1], rows[:, 1:]


# ----------------------------------------------------------------------------
# Model, optimizer, schedule


def init_weights(model, seed):
    """Every matrix ~ N(0, 0.02), the residual outputs wo and w2 ~ N(0, 0.02 / sqrt(2 n_layers))
    (GPT-2, llama2.c), drawn in name order from one generator; norms keep their constructors'
    values (weight 1, bias 0, nllm_model's alpha and log eps) and draw nothing, so that twins and
    siblings share every other initial value."""
    g = torch.Generator().manual_seed(seed)
    std_out = 0.02 / math.sqrt(2 * model.config.n_layers)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if nllm_model.is_norm_parameter(name):
                continue
            std = std_out if name.endswith(("wo.weight", "w2.weight")) else 0.02
            p.copy_(torch.randn(p.shape, generator=g) * std)


def make_optimizer(model, a):
    """AdamW; weight decay on the matrices only (not on norm weights, biases and scalars: decay
    would pull DyT's alpha and the log eps towards 0)."""
    decay = [p for n, p in sorted(model.named_parameters()) if p.dim() >= 2]
    other = [p for n, p in sorted(model.named_parameters()) if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                              {"params": other, "weight_decay": 0.0}],
                             lr=a.lr, betas=(0.9, 0.95), eps=1e-8)


def learning_rate(step, a):
    """Linear warmup over --warmup steps, then cosine from lr down to lr / 10 at --steps."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    progress = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr / 10 + 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))) * (a.lr - a.lr / 10)


def model_args_dict(a):
    """The checkpoint's model_args, in llama2.c's names (export.py reads them) plus the norm, as
    the command line gave them (norm_eps not rounded to the file's float32)."""
    return {"dim": a.dim, "hidden_dim": a.hidden_dim, "n_layers": a.n_layers,
            "n_heads": a.n_heads, "n_kv_heads": a.n_kv_heads, "vocab_size": a.vocab_size,
            "max_seq_len": a.seq_len, "norm": a.norm, "norm_eps": a.norm_eps}


# ----------------------------------------------------------------------------
# The norms' share of a step: hooks on the norm modules


class NormTimer:
    """While on, times every norm call: forward from the module's pre-hook to its hook, backward
    from the moment its output's gradient is complete to the moment its input's is (autograd on
    the CPU runs one node at a time, and between the two only the norm's backward runs). A norm
    that returns its input (Identity) has no backward to time. clock: the wall clock, or another
    (tools/norm_share.py takes the process's CPU time, which other jobs on the machine do not
    inflate)."""

    def __init__(self, model, clock=time.perf_counter):
        self.seconds, self.on, self.clock = 0.0, False, clock
        for m in model.norms():
            m.register_forward_pre_hook(self.before)
            m.register_forward_hook(self.after)

    def before(self, module, inputs):
        if self.on:
            module._started = self.clock()

    def after(self, module, inputs, output):
        if self.on:
            self.seconds += self.clock() - module._started
            x = inputs[0]
            if output.requires_grad and x.requires_grad and output is not x:
                output.register_hook(lambda g, m=module: self.backward_started(m))
                x.register_hook(lambda g, m=module: self.backward_done(m))

    def backward_started(self, module):
        module._backward = self.clock()

    def backward_done(self, module):
        self.seconds += self.clock() - module._backward


# ----------------------------------------------------------------------------
# Checks of the command line, before any work


def model_config(a, vocab_size):
    """The model of the command line, refused as run would refuse it (nllm_format.Config,
    docs/FORMAT.md's limits): its classifier shared with the embedding, biases for the norms
    that learn one."""
    try:
        c = Config(a.dim, a.hidden_dim, a.n_layers, a.n_heads, a.n_kv_heads, a.vocab_size,
                   a.seq_len, norm_eps=a.norm_eps, norm=a.norm, norm_bias=a.norm in BIASED,
                   shared_classifier=True)
    except ExportError as e:
        raise TrainError(f"shape: {e}")
    if a.vocab_size != vocab_size:
        raise TrainError(f"--vocab-size {a.vocab_size} is not the tokenizer's {vocab_size}")
    return c


def check_writable(path, flag):
    """An output's directory must exist and be writable, and the path must not be a directory."""
    if path is None:
        return
    if path == "" or path.endswith(os.sep) or os.path.isdir(path):
        raise TrainError(f"{flag} {path!r} names a directory, not a file")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise TrainError(f"cannot write {flag} {path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise TrainError(f"cannot write {flag} {path}: permission denied")


def load_checkpoint(path):
    """A checkpoint train.py wrote, through nllm_checkpoint's restricted unpickler (tensors and
    plain containers only: a hostile file runs no code; Debian's torch.load would ignore a
    pickle_module of ours)."""
    return torch_load(path)


def load_resume(path, a):
    """The checkpoint to continue from; refused when its shape or norm is not this run's."""
    require_regular_file(path)
    try:
        ckpt = load_checkpoint(path)
    except Exception as e:
        raise TrainError(f"--resume {path}: not a train.py checkpoint ({type(e).__name__}: {e})")
    if not isinstance(ckpt, dict) or not {"model_args", "model", "optimizer", "step"} <= set(ckpt):
        raise TrainError(f"--resume {path}: not a train.py checkpoint (needs model_args, model, "
                         "optimizer and step)")
    want = model_args_dict(a)
    if ckpt["model_args"] != want:
        diff = ", ".join(f"{k} {ckpt['model_args'].get(k)!r} (this run: {v!r})"
                         for k, v in want.items() if ckpt["model_args"].get(k) != v)
        raise TrainError(f"--resume {path} is a model of another shape: {diff}")
    return ckpt


# ----------------------------------------------------------------------------
# Training


class Run:
    """One process's part of training: its model (DDP-wrapped when distributed), data, log."""

    def __init__(self, a, rank, world):
        import sentencepiece as spm

        self.a, self.rank, self.world = a, rank, world
        if a.batch_size % world:
            raise TrainError(f"--batch-size {a.batch_size} is not a multiple of the {world} "
                             "processes")
        require_regular_file(a.tokenizer)
        sp = spm.SentencePieceProcessor(model_file=a.tokenizer)
        self.config = model_config(a, sp.vocab_size())
        self.train_tokens = load_tokens(a.train, sp, sha256_of(a.tokenizer))
        self.valid_tokens = load_tokens(a.valid, sp, sha256_of(a.tokenizer))
        for path, tokens in ((a.train, self.train_tokens), (a.valid, self.valid_tokens)):
            if len(tokens) < a.seq_len + 2:
                raise TrainError(f"{path}: {len(tokens)} tokens, fewer than seq_len + 2 = "
                                 f"{a.seq_len + 2}")
        self.model = Transformer(self.config)
        init_weights(self.model, a.seed)
        self.optimizer = make_optimizer(self.model, a)
        self.step = 0
        if a.resume:
            ckpt = load_resume(a.resume, a)
            self.model.load_state_dict(ckpt["model"])
            self.optimizer.load_state_dict(ckpt["optimizer"])
            self.step = int(ckpt["step"])
        self.timer = NormTimer(self.model)
        self.net = self.model
        if world > 1:
            self.net = torch.nn.parallel.DistributedDataParallel(self.model)
        self.log_file = open(a.log, "a" if a.resume else "w") if a.log and rank == 0 else None
        self.train_seconds = 0.0

    def log(self, record):
        if self.log_file:
            self.log_file.write(json.dumps(record) + "\n")
            self.log_file.flush()

    def all_mean(self, value):
        """The mean over the processes of a per-process float (its own value alone)."""
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return t.item() / self.world

    def train_step(self, timed=False):
        a = self.a
        offsets = batch_offsets(a.seed, self.step, len(self.train_tokens), a.seq_len, a.batch_size)
        x, y = windows(self.train_tokens, offsets, a.seq_len)
        share = a.batch_size // self.world
        mine = slice(self.rank * share, (self.rank + 1) * share)
        lr = learning_rate(self.step, a)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.timer.on, self.timer.seconds = timed, 0.0
        start = time.perf_counter()
        _, loss = self.net(x[mine], y[mine])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        seconds = time.perf_counter() - start
        self.timer.on = False
        loss = self.all_mean(loss.item())
        if not math.isfinite(loss) and not a.stop_if_diverged:
            raise TrainError(f"the training loss became {loss} at step {self.step} (try a lower --lr)")
        self.train_seconds += seconds
        self.step += 1
        crc = zlib.crc32(x.numpy().astype("<u2").tobytes())
        return loss, lr, seconds, crc

    def divergence(self, loss):
        """Why the run has diverged, given the loss of the step just taken, or None: a loss that
        is not finite, or, once the warmup is over, one above ln(vocab_size), the loss of the
        uniform guess that the initial model makes (its weights N(0, 0.02) give logits near 0),
        by more than DIVERGED_MARGIN."""
        if not math.isfinite(loss):
            return f"the training loss became {loss}"
        limit = math.log(self.a.vocab_size) + DIVERGED_MARGIN
        if self.step > self.a.warmup and loss > limit:
            return (f"the training loss {loss:.6g} rose above ln({self.a.vocab_size}) + "
                    f"{DIVERGED_MARGIN} = {limit:.6g} after the warmup")
        return None

    @torch.no_grad()
    def evaluate(self):
        """Mean loss over the first --eval-windows windows of the valid text (fewer if it is
        short), each process scoring its share."""
        a = self.a
        n = min(a.eval_windows, (len(self.valid_tokens) - 1) // a.seq_len)
        offsets = torch.arange(n) * a.seq_len
        mine = offsets[self.rank::self.world]
        total = 0.0
        self.model.eval()
        for i in range(0, len(mine), a.batch_size):
            x, y = windows(self.valid_tokens, mine[i:i + a.batch_size], a.seq_len)
            _, loss = self.model(x, y)
            total += loss.item() * len(x)
        self.model.train()
        if self.world > 1:
            t = torch.tensor([total], dtype=torch.float64)
            torch.distributed.all_reduce(t)
            total = t.item()
        return total / n

    def checkpoint(self):
        ckpt = {"model_args": model_args_dict(self.a), "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(), "step": self.step, "seed": self.a.seed}
        with Output(self.a.out) as f:
            f.attempt(torch.save, ckpt, f.file)

    def export(self):
        state = self.model.state_dict()
        write_model(self.a.export, self.config,
                    lambda name, layer: state[nllm_model.parameter_name(name, layer)].numpy(),
                    progress=False, vocab=sentencepiece_vocab(self.a.tokenizer))

    def run(self):
        from tqdm import tqdm

        a = self.a
        if self.step == 0:
            self.log({**vars(a), "kind": "config", "world": self.world,
                      "threads": torch.get_num_threads(), "train_tokens": len(self.train_tokens),
                      "valid_tokens": len(self.valid_tokens),
                      "parameters": sum(p.numel() for p in self.model.parameters())})
        bar = tqdm(total=a.steps, initial=self.step, desc=f"train {a.norm}", unit="step",
                   disable=True if a.quiet or self.rank else None, dynamic_ncols=True)
        tokens_per_step, why = a.batch_size * a.seq_len, None
        while self.step < a.steps:
            if a.eval_every and self.step % a.eval_every == 0:
                self.log_eval()
                loss, lr, seconds, crc = self.train_step(timed=True)
                self.log({"kind": "norms", "step": self.step, "norm_seconds": self.timer.seconds,
                          "step_seconds": seconds, "norm_share": self.timer.seconds / seconds})
            else:
                loss, lr, seconds, crc = self.train_step()
            self.log({"kind": "train", "step": self.step, "loss": loss, "lr": lr,
                      "tokens_per_s": tokens_per_step / seconds, "elapsed_s": self.train_seconds,
                      "batch_crc": crc})
            bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tokens_per_step / seconds:.0f}")
            bar.update(1)
            why = self.divergence(loss) if a.stop_if_diverged else None
            if why:
                self.log({"kind": "diverged", "step": self.step, "loss": loss, "reason": why})
                break
        bar.close()
        if why:
            print(f"train.py: stopped (--stop-if-diverged): {why} at step {self.step}; no "
                  "evaluation, checkpoint or export", file=sys.stderr)
        elif a.eval_every:
            self.log_eval()
        if self.rank == 0 and not why:
            if a.out:
                self.checkpoint()
            if a.export:
                self.export()
        if self.log_file:
            self.log_file.close()

    def log_eval(self):
        self.log({"kind": "eval", "step": self.step, "val_loss": self.evaluate(),
                  "elapsed_s": self.train_seconds})


# ----------------------------------------------------------------------------
# Command line


class ArgumentParser(argparse.ArgumentParser):
    """Usage errors as every other error: one line and exit 1."""

    def error(self, message):
        self.exit(1, f"{self.prog}: error: {message}\n")


def parse_args(argv):
    root = os.path.dirname(os.path.abspath(__file__))
    p = ArgumentParser(prog="train.py", formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--norm", choices=NORMS, default="rmsnorm")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train", default=os.path.join(root, "data/cache/tinystories_train.txt"))
    p.add_argument("--valid", default=os.path.join(root, "data/cache/tinystories_valid.txt"))
    p.add_argument("--tokenizer", default=os.path.join(root, "models/tok512.model"))
    # the shape of stories260K by default
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--hidden-dim", type=int, default=172)
    p.add_argument("--n-layers", type=int, default=5)
    p.add_argument("--n-heads", type=int, default=8)
    p.add_argument("--n-kv-heads", type=int, default=4)
    p.add_argument("--vocab-size", type=int, default=512)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--batch-size", type=int, default=16, help="windows per step (all processes)")
    p.add_argument("--steps", type=int, default=1000,
                   help="optimizer steps in all (0: write the initial model)")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=50, help="steps of linear warmup")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--eval-every", type=int, default=50, help="steps between validations (0: none)")
    p.add_argument("--eval-windows", type=int, default=128, help="validation windows")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: all cores / "
                   "processes)")
    p.add_argument("--out", help="checkpoint to write at the end")
    p.add_argument("--export", help="normllama file to write at the end")
    p.add_argument("--log", help="JSON lines log")
    p.add_argument("--resume", help="checkpoint to continue from (same shape and norm)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--stop-if-diverged", action="store_true",
                   help="stop, without error, at the first step whose training loss is not "
                   "finite or, after the warmup, above ln(vocab_size): the log's last record is "
                   "a \"diverged\" one, and no checkpoint or export is written")
    a = p.parse_args(argv)
    for name in ("batch_size", "warmup", "eval_windows"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(a, name)}")
    for name in ("steps", "seed", "eval_every", "threads"):
        if getattr(a, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(a, name)}")
    if not (a.lr > 0 and math.isfinite(a.lr)):
        p.error(f"--lr must be a positive number, got {a.lr}")
    if not (a.weight_decay >= 0 and math.isfinite(a.weight_decay)):
        p.error(f"--weight-decay must be 0 or more, got {a.weight_decay}")
    return a


def main(argv=None):
    a = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.set_num_threads(a.threads or max(1, (os.cpu_count() or 1) // world))
    try:
        for path, flag in ((a.out, "--out"), (a.export, "--export"), (a.log, "--log")):
            check_writable(path, flag)
        outputs = [os.path.realpath(p) for p in (a.out, a.export, a.log) if p]
        if len(set(outputs)) < len(outputs):
            raise TrainError("--out, --export and --log must be different files")
        if world > 1:
            torch.distributed.init_process_group("gloo")
        Run(a, rank, world).run()
    except (TrainError, ExportError) as e:
        print(f"train.py: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"train.py: error: {e}", file=sys.stderr)
        return 1
    finally:
        if world > 1 and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
