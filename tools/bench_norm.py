"""Norm microbenchmark table: our rmsnorm and layernorm (tools/bench_norm.c) next to PyTorch's
F.layer_norm and the eager RMSNorm formula w * x * rsqrt(mean(x^2) + eps), with the same thread
count, and the memory-bandwidth bound measured by a streaming kernel in the same run.

    /usr/bin/python3 tools/bench_norm.py build/bench_norm [REPEATS]

Every time is the median of REPEATS runs (default 11 for C, 7 for PyTorch). GB/s counts one read
and one write of the matrix (weight and bias are negligible).
"""
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


def main():
    binary = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 11
    lines = subprocess.run([binary, str(repeats)], check=True, capture_output=True,
                           text=True).stdout.splitlines()
    threads = int(lines[0].split("\t")[1])
    torch.set_num_threads(threads)
    rows_out = []
    for line in lines[1:]:
        dim, rows, rms, ln, stream = line.split("\t")
        dim, rows, rms, ln, stream = int(dim), int(rows), float(rms), float(ln), float(stream)
        x = torch.rand(rows, dim) * 2 - 0.9
        w = torch.ones(dim)
        b = torch.zeros(dim)
        with torch.no_grad():
            t_ln = torch_median(lambda: F.layer_norm(x, (dim,), w, b, 1e-5), max(3, repeats * 2 // 3))
            t_rms = torch_median(
                lambda: w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5),
                max(3, repeats * 2 // 3))
        rows_out.append((dim, rows, rms, ln, stream, t_ln, t_rms))

    gb = lambda rows, dim, t: 2 * rows * dim * 4 / t / 1e9
    ns = lambda rows, t: t / rows * 1e9
    print(f"norm microbenchmark: fp32, {rows_out[0][0] * rows_out[0][1]} elements per shape, "
          f"{threads} threads (ours: OpenMP over rows; PyTorch {torch.__version__}: "
          f"set_num_threads({threads})), medians")
    header = ("| rows x dim | rmsnorm ns/row | GB/s | layernorm ns/row | GB/s | ln/rms | "
              "stream ns/row (GB/s) | rms/stream | ln/stream | torch layer_norm ns/row | "
              "torch eager rms ns/row | torch ln / our ln | torch rms / our rms |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for dim, rows, rms, ln, stream, t_ln, t_rms in rows_out:
        shape = f"{rows} x {dim}" + (" (32, 512, 768)" if (rows, dim) == (16384, 768) else "")
        print(f"| {shape} | {ns(rows, rms):.1f} | {gb(rows, dim, rms):.1f} | {ns(rows, ln):.1f} | "
              f"{gb(rows, dim, ln):.1f} | {ln / rms:.2f} | {ns(rows, stream):.1f} "
              f"({gb(rows, dim, stream):.1f}) | {rms / stream:.2f} | {ln / stream:.2f} | "
              f"{ns(rows, t_ln):.1f} | {ns(rows, t_rms):.1f} | {t_ln / ln:.1f} | {t_rms / rms:.1f} |")


if __name__ == "__main__":
    main()
