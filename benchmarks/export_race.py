"""Streaming exports side by side: `forward` block by block, as nn~ calls it, the files interleaved
(bench.py --only export runs it under each LibTorch; sections.toml's [export.text] says how).

  PYTHON benchmarks/export_race.py --file ours=OURS.ts --file rave=RAVE.ts [--threads "1 2"]
      [--blocks "2048 4096"] [--rounds 3] [--seconds 10] [--first_round 1]
  PYTHON benchmarks/export_race.py --ops FILE.ts [--block 2048] [--threads 1] [--calls 20] [--top 20]

The files' order is reversed every other round, counted from --first_round (one process per round
keeps alternating). Prints one JSON line per file, round, thread count and block. --ops: where one
file's `forward` spends its time, by operator and input shape (docs/perf/export.md).
"""
import importlib.metadata
import itertools
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import warnings

import torch

import benchlib

SR = 44100
WARMUP_BLOCKS = 5
PRODUCTS = ("aten::mm", "aten::addmv_", "aten::addmm", "aten::linear", "quantized::linear_dynamic")


def blas_info():
    """torch.__config__.show()'s BLAS: its first line naming one, BLAS_INFO, and the BLAS
    libraries mapped into this process (Debian's torch reaches OpenBLAS through libblas.so.3)."""
    shown = torch.__config__.show()
    line = next((ln.strip(" -") for ln in shown.splitlines() if "BLAS" in ln or "Math Kernel Library" in ln), None)
    m = re.search(r"BLAS_INFO=([^,\s]+)", shown)
    torch.mm(torch.ones(64, 64), torch.ones(64, 64))  # loads a lazily-opened BLAS
    with open("/proc/self/maps") as f:
        libs = {ln.split()[-1] for ln in f if len(ln.split()) >= 6
                and re.search(r"lib(open)?blas|libmkl", os.path.basename(ln.split()[-1]))}
    if line and len(line) > 120:  # the "Build settings" line: only its BLAS_INFO
        line = f"BLAS_INFO={m.group(1)}" if m else line[:120]
    return {"line": line, "blas_info": m.group(1) if m else None, "libraries": sorted(libs)}


def torch_package():
    """Debian's python3-torch and its version where torch is Debian's (it reports 1.13.0a0 for
    1.13.1), else the pip distribution's."""
    if not torch.__file__.startswith("/usr/lib/python3/"):
        return f"torch {importlib.metadata.version('torch')} (pip)"
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "python3-torch"], capture_output=True, text=True)
    return f"python3-torch {out.stdout.strip()}" if out.returncode == 0 else None


def weights_read_ms(module, reps=9):
    """Median ms of one pass summing every parameter, after one uncounted pass."""
    params = list(module.parameters())

    def read(_):
        total = torch.zeros((), dtype=torch.float64)
        for p in params:
            total += p.sum()
        total.item()
    with torch.inference_mode():
        return statistics.median(benchlib.time_calls(read, [None], range(reps)))


def ops(a):
    """--ops: the products by input shape and the other operators of one file's `forward`, per call."""
    warnings.simplefilter("ignore")
    threads = int(a.threads.replace(",", " ").split()[0])
    torch.set_num_threads(threads)
    m, x = torch.jit.load(a.ops), torch.randn(1, 1, a.block) * 0.1
    with torch.inference_mode():
        for _ in range(10):
            m.forward(x)
        with torch.autograd.profiler.profile(record_shapes=True) as p:
            for _ in range(a.calls):
                m.forward(x)
    products = sorted(((e.key, e.input_shapes, e.self_cpu_time_total / a.calls / 1e3, e.count // a.calls)
                       for e in p.key_averages(group_by_input_shape=True) if e.key in PRODUCTS), key=lambda r: -r[2])
    total = sum(e.self_cpu_time_total for e in p.key_averages()) / a.calls / 1e3
    in_products = sum(r[2] for r in products)
    print(f"torch {torch.__version__}, {threads} thread(s), block {a.block}: {total:.2f} ms per call in "
          f"operators, {in_products:.2f} ms in products")
    print(f"{'operator':28s} {'input shapes':52s} {'ms/call':>8s} {'calls':>6s}")
    for key, shapes, ms, n in products[:a.top]:
        print(f"{key:28s} {str(shapes)[:52]:52s} {ms:8.3f} {n:6d}")
    others = sorted(((e.key, e.self_cpu_time_total / a.calls / 1e3, e.count // a.calls)
                     for e in p.key_averages() if e.key not in PRODUCTS), key=lambda r: -r[1])
    print(f"other operators (forward: the TorchScript interpreter's own time): {total - in_products:.2f} ms per call; "
          "largest:")
    for key, ms, n in others[:8]:
        print(f"{key:28s} {'':52s} {ms:8.3f} {n:6d}")


def main():
    a = benchlib.options(__doc__, {"file": [], "threads": "1", "blocks": "2048 4096", "rounds": 3, "first_round": 1,
                                   "seconds": 10.0, "seed": 1, "ops": None, "block": 2048, "calls": 20, "top": 20})
    if a.ops:
        return ops(a)
    files = [tuple(spec.split("=", 1)) for spec in a.file]
    if any(len(f) != 2 or not all(f) for f in files) or len({n for n, _ in files}) != len(files):
        raise SystemExit(f"export_race: --file {a.file}: expected NAME=PATH, the names different")
    modules = {name: torch.jit.load(path) for name, path in files}
    meta = {name: {"file": path, "parameters": sum(p.numel() for p in modules[name].parameters()),
                   "parameter_bytes": sum(p.numel() * p.element_size() for p in modules[name].parameters()),
                   "latent_size": int(modules[name].latent_size) if hasattr(modules[name], "latent_size") else None}
            for name, path in files}
    env = {"torch": torch.__version__, "torch_package": torch_package(), "python": platform.python_version(),
           "executable": sys.executable, "blas": blas_info()}
    print(f"export_race: torch {env['torch']} ({env['blas']['line']}), "
          + ", ".join(f"{n} {meta[n]['parameters']:,} parameters" for n, _ in files), file=sys.stderr)
    for threads in [int(v) for v in a.threads.replace(",", " ").split()]:
        torch.set_num_threads(threads)
        floor = {name: weights_read_ms(modules[name]) for name, _ in files}
        for block in [int(v) for v in a.blocks.replace(",", " ").split()]:
            n_blocks = max(1, math.ceil(a.seconds * SR / block))
            g = torch.Generator().manual_seed(a.seed)
            audio = (torch.rand(1, 1, (n_blocks + WARMUP_BLOCKS) * block, generator=g) * 2 - 1) * 0.5
            for rnd in range(a.first_round, a.first_round + a.rounds):
                for position, (name, _) in enumerate(files if rnd % 2 else files[::-1]):
                    blocks = (audio[..., i * block:(i + 1) * block] for i in range(WARMUP_BLOCKS + n_blocks))
                    with torch.inference_mode():
                        ms = benchlib.time_calls(modules[name].forward, itertools.islice(blocks, WARMUP_BLOCKS), blocks)
                    rec = {"name": name, "round": rnd, "position": position, "threads": torch.get_num_threads(),
                           "block": block, "blocks_timed": n_blocks, "seconds": n_blocks * block / SR,
                           "ms_per_block_median": statistics.median(ms), "ms_per_block_mean": statistics.fmean(ms),
                           "ms_per_block_min": min(ms), "ms_per_block_max": max(ms),
                           "rtf": n_blocks * block / SR / (sum(ms) / 1e3), "block_ms": 1e3 * block / SR,
                           "weights_read_ms": floor[name], **meta[name], **env}
                    benchlib.emit(rec)
                    print(f"export_race: torch {env['torch']} t{threads} b{block} round {rnd} {name}: "
                          f"{rec['ms_per_block_median']:.1f} ms/block (median), {rec['rtf']:.2f}x realtime",
                          file=sys.stderr)


if __name__ == "__main__":
    main()
