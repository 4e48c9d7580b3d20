#!/usr/bin/env python3
"""train.py end to end on a tiny shape and a small part of the TinyStories sample: the loss falls
for each twin, run's logits of an exported model of each norm (twins and siblings) equal the
PyTorch forward pass of its checkpoint, twins share their initial weights and batches, runs are
deterministic and resumable, two DDP processes follow one process, --stop-if-diverged stops
where the loss leaves the uniform guess, and bad input gets one line.
Run from the repository root with /usr/bin/python3 (make test does); the program under test is
$NORMLLAMA_RUN (default ./run). Prints one line per test and "N passed, M failed"."""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import sentencepiece as spm
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nllm_format  # noqa: E402
import nllm_model  # noqa: E402
import train as train_py  # noqa: E402
import decode_layouts  # noqa: E402  (tests/, the script's directory)
from harness import collector, run_tests  # noqa: E402  (tests/, the script's directory)

RUN = os.environ.get("NORMLLAMA_RUN", "./run")
TOK_MODEL, TOK_BIN = "models/tok512.model", "models/tok512.bin"
VALID = "data/cache/tinystories_valid.txt"
SP = spm.SentencePieceProcessor(model_file=TOK_MODEL)
TMP = tempfile.mkdtemp(prefix="normllama-train-")
END = "\n<|endoftext|>\n"
# a tiny shape: 2 layers, grouped kv heads, 64 positions
SHAPE = ["--dim", "32", "--hidden-dim", "64", "--n-layers", "2", "--n-heads", "4",
         "--n-kv-heads", "2", "--seq-len", "64", "--batch-size", "8", "--warmup", "5",
         "--eval-windows", "16", "--threads", "1", "--quiet"]

TESTS = []
test = collector(TESTS)


def tmp(name):
    return os.path.join(TMP, name)


def data_files():
    """train: 300 stories of the valid sample; valid: the next 60 (the tests need no more)."""
    train, valid = tmp("train.txt"), tmp("valid.txt")
    if not os.path.exists(train):
        stories = open(VALID, encoding="utf-8").read().split(END)[:-1]
        open(train, "w").write(END.join(stories[:300]) + END)
        open(valid, "w").write(END.join(stories[300:360]) + END)
    return ["--train", train, "--valid", valid]


def train(name, *args, steps=30, torchrun=None):
    """Runs train.py into TMP/name.{pt,nllm,jsonl}; returns (exit code, stderr, log records)."""
    import json

    out = [f"--out={tmp(name + '.pt')}", f"--export={tmp(name + '.nllm')}",
           f"--log={tmp(name + '.jsonl')}"]
    cmd = [sys.executable, "train.py", *SHAPE, *data_files(), "--steps", str(steps), *out, *args]
    if torchrun:
        # Debian's torch 1.13 under Python 3.11 fails with torchrun's default --redirects 0 and
        # --tee 0 (Std.from_str finds no flag of value 0): any other value works
        cmd = ["torchrun", "--standalone", f"--nproc_per_node={torchrun}", "--redirects=1",
               "--tee=2", *cmd[1:]]
    p = subprocess.run(cmd, capture_output=True, text=True)
    records = []
    if p.returncode == 0:
        records = [json.loads(line) for line in open(tmp(name + ".jsonl"))]
    return p.returncode, p.stderr, records


def trained(name, *args, **kwargs):
    code, err, records = train(name, *args, **kwargs)
    assert code == 0, err
    return records


def losses(records, kind="train", key="loss"):
    return [r[key] for r in records if r["kind"] == kind]


def checkpoint(name):
    return train_py.load_checkpoint(tmp(name + ".pt"))


@test
def training_loss_falls_for_each_twin():
    for norm in nllm_format.TWINS:  # the siblings': run_logits_equal_... and docs/NORMS.md
        records = trained(f"falls-{norm}", "--norm", norm, "--lr", "1e-2", "--eval-every", "15",
                          steps=45)
        train_loss, val = losses(records), losses(records, "eval", "val_loss")
        first, last = np.mean(train_loss[:5]), np.mean(train_loss[-5:])
        print(f"  {norm}: train loss {first:.3f} -> {last:.3f}, validation {val[0]:.3f} -> "
              f"{val[-1]:.3f}")
        # ln(512) = 6.24 at the start; unigram statistics alone bring it below 5
        assert abs(first - np.log(512)) < 0.3 and last < first - 1.0, (first, last)
        assert val[-1] < val[0] - 1.0, val


def checkpoint_config(name):
    """The nllm_format.Config of a checkpoint train.py wrote."""
    m = checkpoint(name)["model_args"]
    return nllm_format.Config(m["dim"], m["hidden_dim"], m["n_layers"], m["n_heads"],
                              m["n_kv_heads"], m["vocab_size"], m["max_seq_len"],
                              norm_eps=m["norm_eps"], norm=m["norm"],
                              norm_bias=m["norm"] in nllm_format.BIASED, shared_classifier=True)


def pytorch_logits(name, ids):
    """train.py's model (float32) with the checkpoint's weights, over one sequence."""
    ckpt = checkpoint(name)
    model = nllm_model.Transformer(checkpoint_config(name))
    model.load_state_dict(ckpt["model"])
    with torch.no_grad():
        return model(torch.tensor([ids]))[0].numpy(), ckpt["model"]


def run_logits(path, text, *extra):
    """run --logits over the 64 ids of text (the whole kv cache): (64, 512) float32, stderr."""
    out = path + ".f32"
    p = subprocess.run([RUN, path, "-z", TOK_BIN, "-t", "0", "-n", "64", "--logits", out, text,
                        *extra], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    logits = np.fromfile(out, dtype=np.float32).reshape(-1, 512)
    assert logits.shape == (64, 512), logits.shape
    return logits, p.stderr


@test
def run_logits_equal_the_training_forward_at_every_position_for_each_norm():
    """The test that makes the twins and their siblings trustworthy: run --logits on the exported
    file against the PyTorch forward pass of the checkpoint, 64 positions of a validation story
    (the whole kv cache), each norm under its own default, in the fast and the plain pass
    (--reference); and export.py turns the checkpoint into the same file. The bound, 1e-4, is
    the twins' (measured at most 1.7e-6 for them); each norm's learned parameters (biases, DyT's
    alpha, the log eps) have moved from their initial values, so the file carries trained ones."""
    story = open(VALID, encoding="utf-8").read().split(END)[400]
    ids = [1] + SP.encode(story)[:63]
    text = SP.decode(ids[1:])
    assert [1] + SP.encode(text) == ids  # the text run encodes is these 64 ids
    for norm in nllm_format.NORMS:
        name = f"logits-{norm}"
        # --eval-every times the norms of a step (NormTimer) too
        trained(name, "--norm", norm, "--lr", "1e-2", "--eval-every", "10", steps=20)
        ref, state = pytorch_logits(name, ids)
        initial = nllm_model.make_norm(checkpoint_config(name), "final").state_dict()
        for key, value in initial.items():  # the final norm's, far from their initial values
            if key != "weight" or norm != "identity":
                assert (state[f"norm.{key}"] - value).abs().max() > 1e-3, (norm, key)
        errs = []
        for extra in ([], ["--reference"]):
            logits, err = run_logits(tmp(name + ".nllm"), text, *extra)
            assert f"norm {norm}," in err and "ignores" not in err, err
            errs.append(np.abs(logits - ref).max())
        print(f"  {norm}: max |run - PyTorch| over 64 positions = {errs[0]:.2e}, --reference "
              f"{errs[1]:.2e} (logits up to {np.abs(ref).max():.1f})")
        assert max(errs) < 1e-4, errs
        header = open(tmp(name + ".nllm"), "rb").read(56)
        assert struct.unpack_from("<II", header, 44) == \
            (nllm_format.NORM_CODES[norm], norm in nllm_format.BIASED)
        # the whole file as docs/FORMAT.md lays it out, read by the reader written from it alone:
        # every norm tensor (weights, biases, log eps or alpha) is the checkpoint's
        _, tensors, _ = decode_layouts.read_model(tmp(name + ".nllm"))
        for tensor, per_layer, _ in nllm_format.tensor_order(checkpoint_config(name)):
            if "norm" not in tensor:
                continue
            for layer in range(2) if per_layer else [None]:
                got = tensors[tensor] if layer is None else tensors[tensor][layer]
                want = state[nllm_model.parameter_name(tensor, layer)].numpy()
                assert np.array_equal(got.reshape(-1), want.reshape(-1)), (norm, tensor, layer)
        p = subprocess.run([sys.executable, "export.py", tmp(name + ".pt"), "--tokenizer",
                            TOK_MODEL, "--out", tmp(name + "-export.nllm"), "--quiet"],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert open(tmp(name + "-export.nllm"), "rb").read() == \
            open(tmp(name + ".nllm"), "rb").read()
        # as a GGUF: llama.cpp computes the twins alone, and export.py says so for the others
        # (dyt's alpha and the learned eps had stopped it as "missing field" of the config)
        p = subprocess.run([sys.executable, "export.py", tmp(name + ".pt"), "--tokenizer",
                            TOK_MODEL, "--out", tmp(name + ".gguf"), "--quiet"],
                           capture_output=True, text=True)
        biased = " with biases" if norm in nllm_format.BIASED else ""
        assert (p.returncode, p.stderr) == ((0, "") if norm in nllm_format.TWINS else
                                            (1, f"export.py: error: no llama.cpp architecture "
                                             f"computes {norm}{biased}; GGUF takes rmsnorm "
                                             "(llama) and layernorm (stablelm)\n")), (norm, p.stderr)


@test
def twins_share_initial_weights_and_data_order():
    """--steps 0 writes the initial model: the twins' tensors are equal but for the norms (weight 1
    in both, LayerNorm's bias 0); their batches (crc32 of each step's ids) are the same, and
    another seed's differ."""
    for norm in nllm_format.TWINS:
        trained(f"init-{norm}", "--norm", norm, "--eval-every", "0", steps=0)
    rms, ln = checkpoint("init-rmsnorm")["model"], checkpoint("init-layernorm")["model"]
    assert set(ln) - set(rms) == {k for k in ln if k.endswith(".bias")} and set(rms) <= set(ln)
    assert len(set(ln) - set(rms)) == 2 * 2 + 1
    for key, value in rms.items():
        if nllm_model.is_norm_parameter(key):
            assert torch.equal(value, torch.ones(32)) and torch.equal(ln[key], value), key
        else:
            assert torch.equal(value, ln[key]) and value.std() > 0.005, key
    assert all(torch.equal(ln[k], torch.zeros(32)) for k in set(ln) - set(rms))
    crcs = {norm: losses(trained(f"order-{norm}", "--norm", norm, "--eval-every", "0", steps=6),
                         key="batch_crc") for norm in nllm_format.TWINS}
    other = losses(trained("order-seed2", "--seed", "2", "--eval-every", "0", steps=6),
                   key="batch_crc")
    assert crcs["rmsnorm"] == crcs["layernorm"] and len(crcs["rmsnorm"]) == 6, crcs
    assert all(a != b for a, b in zip(other, crcs["rmsnorm"])), other


@test
def same_seed_same_losses_and_resume_continues_the_run():
    """For each twin and DyT (the LayerNorm twin's biases and DyT's biases and alphas are trained,
    checkpointed and resumed too; the other siblings' parameters are of these kinds)."""
    for norm in (*nllm_format.TWINS, "dyt"):
        name = "" if norm == "rmsnorm" else "-" + norm
        args = ["--norm", norm, "--eval-every", "0"]
        a = losses(trained("det-a" + name, *args, steps=10))
        b = losses(trained("det-b" + name, *args, steps=10))
        assert a == b and len(a) == 10, (norm, a, b)
        if norm == "rmsnorm":
            c = losses(trained("det-c", "--seed", "3", *args, steps=10))
            assert all(x != y for x, y in zip(a, c)), (a, c)
        first = losses(trained("resume" + name, *args, steps=5))
        shutil.copy(tmp(f"resume{name}.pt"), tmp(f"resume-from{name}.pt"))
        # the log of a resumed run continues the one it resumes
        whole = losses(trained("resume" + name, *args, f"--resume={tmp(f'resume-from{name}.pt')}",
                               steps=10))
        assert len(first) == 5 and whole == a, (norm, first, whole, a)


@test
def two_ddp_processes_follow_one_process():
    """torchrun with 2 processes (gloo), each half of every batch of 8, against one process: the
    same losses within float32 rounding over 10 steps, and the same validation loss."""
    one = trained("ddp-1", "--eval-every", "5", steps=10)
    two = trained("ddp-2", "--eval-every", "5", steps=10, torchrun=2)
    a, b = np.array(losses(one)), np.array(losses(two))
    va, vb = np.array(losses(one, "eval", "val_loss")), np.array(losses(two, "eval", "val_loss"))
    print(f"  max |loss difference| over 10 steps = {np.abs(a - b).max():.1e}, validation "
          f"{np.abs(va - vb).max():.1e}")
    assert len(a) == len(b) == 10 and np.abs(a - b).max() < 1e-4, (a, b)
    assert len(va) == len(vb) == 3 and np.abs(va - vb).max() < 1e-4, (va, vb)
    assert a[-1] < a[0] - 0.3 and [r["world"] for r in two if r["kind"] == "config"] == [2]


@test
def stop_if_diverged_stops_where_the_loss_leaves_the_uniform_guess():
    """--stop-if-diverged (tools/twins_lr.py's runs). At lr 1 the tiny shape's training loss
    passes ln(512) after the 5 steps of warmup (13.6 at step 6, measured) and falls back later:
    without the option the run trains all 30 steps (a finite loss is no error); with it, the run
    stops at the first step past the warmup whose loss is above ln(512) + 0.1, with exit 0, one line on
    stderr, the same losses until then, a last "diverged" record, no final evaluation, checkpoint
    or export. At lr 1e6 the loss becomes nan within the warmup: an error without the option,
    a stop with it. At lr 1e-2, and at lr 1e-6, whose loss stays near ln(512) and above it at
    some steps, the option changes nothing."""
    args = ["--lr", "1", "--eval-every", "5"]
    whole = losses(trained("diverge-whole", *args))
    limit = np.log(512) + 0.1  # train.py's DIVERGED_MARGIN
    first = next(i + 1 for i, loss in enumerate(whole) if i + 1 > 5 and loss > limit)
    code, err, records = train("diverge-stop", *args, "--stop-if-diverged")
    print(f"  lr 1: losses {', '.join(f'{x:.2f}' for x in whole[:first + 2])}, ...; stopped at "
          f"step {first}")
    assert len(whole) == 30 and all(np.isfinite(whole)) and whole[-1] < np.log(512), whole
    assert code == 0 and err.count("\n") == 1, (code, err)
    assert err.startswith("train.py: stopped (--stop-if-diverged): the training loss "), err
    assert losses(records) == whole[:first] and records[-1]["kind"] == "diverged", records[-3:]
    assert records[-1]["step"] == first and records[-1]["loss"] == whole[first - 1], records[-1]
    assert [r["step"] for r in records if r["kind"] == "eval"] == [0, 5], records
    assert not any(os.path.exists(tmp("diverge-stop" + ext)) for ext in (".pt", ".nllm"))
    code, err, _ = train("nan", "--lr", "1e6", "--eval-every", "0")
    assert code == 1 and "train.py: error: the training loss became nan at step" in err, err
    code, err, records = train("nan-stop", "--lr", "1e6", "--eval-every", "0",
                               "--stop-if-diverged")
    stop = records[-1]
    assert code == 0 and stop["kind"] == "diverged" and stop["step"] <= 5, (code, err, stop)
    assert stop["reason"] == "the training loss became nan" and np.isnan(stop["loss"]), stop
    # lr 1e-2 learns; lr 1e-6 hardly moves from the uniform guess, within the margin
    for lr in ("1e-2", "1e-6"):
        fine = ["--lr", lr, "--warmup", "1", "--eval-every", "0"]
        plain = trained("fine", *fine, steps=10)
        flagged = trained("fine-stop", *fine, "--stop-if-diverged", steps=10)
        assert losses(plain) == losses(flagged) and flagged[-1]["kind"] == "train", flagged[-1]
    assert max(losses(plain)) > np.log(512), losses(plain)  # what the margin is for


def expect_error(args, needle, steps=2):
    p = subprocess.run([sys.executable, "train.py", *SHAPE, "--steps", str(steps), *args],
                       capture_output=True, text=True)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("train.py: error: "), p.stderr
    assert needle in p.stderr, (needle, p.stderr)


@test
def bad_input_gets_one_line_and_exit_1():
    data = data_files()
    empty, missing = tmp("empty.txt"), tmp("no-such.txt")
    open(empty, "w").write(END)
    expect_error(["--train", missing, "--valid", data[3]], f"{missing}: no such file")
    expect_error(["--train", empty, "--valid", data[3]], f"{empty}: empty (no stories)")
    expect_error([*data[:2], "--valid", TMP], f"{TMP}: not a regular file")
    short = tmp("short.txt")
    open(short, "w").write("Once upon a time." + END)
    expect_error([*data[:2], "--valid", short], f"{short}: 6 tokens, fewer than seq_len + 2 = 66")
    expect_error([*data, "--dim", "30"], "shape: dim 30 is not a multiple of n_heads 4")
    expect_error([*data, "--n-kv-heads", "3"], "shape: n_heads 4 is not a multiple of n_kv_heads 3")
    expect_error([*data, "--dim", "24", "--n-heads", "8"], "shape: head_size 3 (dim / n_heads) "
                 "is odd")
    expect_error([*data, "--seq-len", "0"], "shape: seq_len is 0, outside 1..1048576")
    expect_error([*data, "--vocab-size", "256"], "--vocab-size 256 is not the tokenizer's 512")
    expect_error([*data, "--steps", "-1"], "--steps must be 0 or more, got -1")
    expect_error([*data, "--lr", "nan"], "--lr must be a positive number, got nan")
    expect_error([*data, "--norm", "batchnorm"], "argument --norm: invalid choice: 'batchnorm'")
    expect_error([*data, "--out", tmp("no-dir/x.pt")],
                 f"cannot write --out {tmp('no-dir/x.pt')}: directory {tmp('no-dir')} does not "
                 "exist")
    expect_error([*data, "--export", TMP], f"--export {TMP!r} names a directory, not a file")
    expect_error([*data, "--out", tmp("same"), "--log", tmp("same")],
                 "--out, --export and --log must be different files")
    # a checkpoint of another shape (dim 48) or norm, and a file that is not a checkpoint
    trained("other-shape", "--dim", "48", "--eval-every", "0", steps=1)
    expect_error([*data, "--resume", tmp("other-shape.pt")],
                 f"--resume {tmp('other-shape.pt')} is a model of another shape: dim 48 (this run: "
                 "32)")
    expect_error([*data, "--norm", "layernorm", "--resume", tmp("det-a.pt")],
                 "is a model of another shape: norm 'rmsnorm' (this run: 'layernorm')")
    expect_error([*data, "--resume", empty], f"--resume {empty}: not a train.py checkpoint")
    # a hostile checkpoint: its pickle calls os.system, which must never run
    marker = tmp("hostile-ran")

    class Hostile:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    hostile = tmp("hostile.pt")
    torch.save({"model_args": {}, "model": Hostile()}, hostile)
    expect_error([*data, "--resume", hostile], "refused: its pickle names posix.system")
    assert not os.path.exists(marker), "the hostile checkpoint ran code"
    # nothing a failed run was to write is left behind
    assert not os.path.exists(tmp("no-dir")) and not os.path.exists(tmp("same"))


if __name__ == "__main__":
    # the valid text is mirror only: fetch.sh said so in one line when it could not be had
    missing = None if os.path.exists(VALID) else \
        f"{VALID} not fetched (no public address; set DATA_MIRROR)"
    sys.exit(run_tests(TESTS, TMP, skip_all=missing))
