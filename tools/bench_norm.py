"""Norm microbenchmark tables: our rmsnorm and layernorm (tools/bench_norm.c) next to PyTorch's
F.layer_norm and the eager RMSNorm formula w * x * rsqrt(mean(x^2) + eps), with the same thread
count, and the memory-bandwidth bound measured by a streaming kernel in the same run; then every
other norm of run's table (the siblings) beside rmsnorm, from the same run.

    /usr/bin/python3 tools/bench_norm.py build/bench_norm [REPEATS]

Every time is the median of REPEATS runs (default 11 for C, 2/3 of it for PyTorch). GB/s counts
one read and one write of the matrix (weight and bias are negligible).

PyTorch allocates a new output tensor per call. glibc serves a 50 MB block as a fresh mapping and
unmaps it on free, so every call page-faults its output in, which on some machines costs more
than the norm itself. PyTorch is therefore timed twice, in two worker processes: with glibc's
defaults ("fresh pages") and with MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1e11, which keep freed
memory in the heap for the next call ("reused heap"). Our kernels write into one buffer.
"""
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F


def torch_median(fn, repeats):
    fn()  # warm-up: allocations, first touch
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def torch_worker(threads, repeats, shapes):
    """Prints "dim layer_norm_s rms_s" per shape: PyTorch's times in this process's allocator."""
    torch.set_num_threads(threads)
    for dim, rows in shapes:
        x = torch.rand(rows, dim) * 2 - 0.9
        w = torch.ones(dim)
        b = torch.zeros(dim)
        n = max(3, repeats * 2 // 3)
        with torch.no_grad():
            t_ln = torch_median(lambda: F.layer_norm(x, (dim,), w, b, 1e-5), n)
            t_rms = torch_median(
                lambda: w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5), n)
        print(dim, t_ln, t_rms, flush=True)


def torch_times(threads, repeats, shapes, reuse_heap):
    env = dict(os.environ)
    env.pop("MALLOC_MMAP_MAX_", None)
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    if reuse_heap:
        env.update(MALLOC_MMAP_MAX_="0", MALLOC_TRIM_THRESHOLD_="100000000000")
    spec = ",".join(f"{d}x{r}" for d, r in shapes)
    out = subprocess.run([sys.executable, __file__, "--torch-worker", str(threads), str(repeats),
                          spec], check=True, capture_output=True, text=True, env=env).stdout
    return {int(d): (float(ln), float(rms)) for d, ln, rms in (l.split() for l in out.splitlines())}


def main():
    if sys.argv[1] == "--torch-worker":
        shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[4].split(",")]
        torch_worker(int(sys.argv[2]), int(sys.argv[3]), shapes)
        return
    binary = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 11
    lines = subprocess.run([binary, str(repeats)], check=True, capture_output=True,
                           text=True).stdout.splitlines()
    threads = int(lines[0].split("\t")[1])
    names = lines[1].split("\t")[1:]  # a line: dim, rows, each norm's time, the stream's
    times = [tuple(float(v) for v in line.split("\t")) for line in lines[2:]]
    ours = [(t[0], t[1], t[2 + names.index("rmsnorm")], t[2 + names.index("layernorm")], t[-1])
            for t in times]
    shapes = [(int(r[0]), int(r[1])) for r in ours]
    fresh = torch_times(threads, repeats, shapes, reuse_heap=False)
    reused = torch_times(threads, repeats, shapes, reuse_heap=True)
    rows_out = [(int(d), int(r), rms, ln, stream) + fresh[int(d)] + reused[int(d)]
                for d, r, rms, ln, stream in ours]

    gb = lambda rows, dim, t: 2 * rows * dim * 4 / t / 1e9
    ns = lambda rows, t: t / rows * 1e9
    print(f"norm microbenchmark: fp32, {rows_out[0][0] * rows_out[0][1]} elements per shape, "
          f"{threads} threads (ours: OpenMP over rows; PyTorch {torch.__version__}: "
          f"set_num_threads({threads})), medians")
    header = ("| rows x dim | rmsnorm ns/row | GB/s | layernorm ns/row | GB/s | ln/rms | "
              "stream ns/row (GB/s) | rms/stream | ln/stream | torch layer_norm ns/row "
              "(fresh pages / reused heap) | torch eager rms ns/row (fresh / reused) | "
              "torch ln / our ln (fresh / reused) | torch rms / our rms (fresh / reused) |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for dim, rows, rms, ln, stream, f_ln, f_rms, r_ln, r_rms in rows_out:
        shape = f"{rows} x {dim}" + (" (32, 512, 768)" if (rows, dim) == (16384, 768) else "")
        print(f"| {shape} | {ns(rows, rms):.1f} | {gb(rows, dim, rms):.1f} | {ns(rows, ln):.1f} | "
              f"{gb(rows, dim, ln):.1f} | {ln / rms:.2f} | {ns(rows, stream):.1f} "
              f"({gb(rows, dim, stream):.1f}) | {rms / stream:.2f} | {ln / stream:.2f} | "
              f"{ns(rows, f_ln):.1f} / {ns(rows, r_ln):.1f} | "
              f"{ns(rows, f_rms):.1f} / {ns(rows, r_rms):.1f} | "
              f"{f_ln / ln:.1f} / {r_ln / ln:.1f} | {f_rms / rms:.1f} / {r_rms / rms:.1f} |")
    siblings_table(names, times)


def siblings_table(names, times):
    """Each norm of the table in ns/row and as a multiple of rmsnorm's time, shape by shape."""
    others = [n for n in names if n != "rmsnorm"]
    print("\nevery norm of run's table (ns/row, and / rmsnorm's time), the same run:")
    header = "| rows x dim | rmsnorm | " + " | ".join(others) + " |"
    print(header + "\n" + "|---" * (len(others) + 2) + "|")
    for dim, rows, *t in times:
        rms = t[names.index("rmsnorm")]
        print(f"| {int(rows)} x {int(dim)} | {rms / rows * 1e9:.1f} | "
              + " | ".join(f"{t[names.index(n)] / rows * 1e9:.1f} ({t[names.index(n)] / rms:.2f})"
                           for n in others) + " |")


if __name__ == "__main__":
    main()
