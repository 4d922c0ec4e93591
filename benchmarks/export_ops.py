#!/usr/bin/python3
"""Where an exported file's `forward` spends its time, by operator and input shape: the products
(aten::mm, aten::addmv_, aten::addmm, quantized::linear_dynamic) and every other operator's total,
per call, under the LibTorch of the Python that runs this script (Debian's /usr/bin/python3: 1.13;
.venv-rave-cpu/bin/python: 2.11). For reading export_bench.sh's figures (docs/perf/export.md).

  PYTHON benchmarks/export_ops.py FILE.ts [--block 2048] [--threads 1] [--calls 20] [--top 20]

FILE.ts: e.g. `build/bin/export_bench --version v2 --block 2048 --threads 1 --seconds 1 --keep
FILE.ts [--quantize int8]`. The blocks are noise (0.1 σ), batch 1, mono, under inference mode,
after 10 warm-up calls; times are the profiler's self CPU time divided by the calls."""
import warnings

import torch
import benchlib  # noqa: E402  (beside this file)

PRODUCTS = ("aten::mm", "aten::addmv_", "aten::addmm", "aten::linear", "quantized::linear_dynamic")


def main():
    a = benchlib.options(__doc__, {"_args": [], "block": 2048, "threads": 1, "calls": 20, "top": 20})
    a.file = a.args[0]
    warnings.simplefilter("ignore")
    torch.set_num_threads(a.threads)
    m = torch.jit.load(a.file)
    x = torch.randn(1, 1, a.block) * 0.1
    with torch.inference_mode():
        for _ in range(10):
            m.forward(x)
        with torch.autograd.profiler.profile(record_shapes=True) as p:
            for _ in range(a.calls):
                m.forward(x)
    by_shape = p.key_averages(group_by_input_shape=True)
    products = sorted(((e.key, e.input_shapes, e.self_cpu_time_total / a.calls / 1e3, e.count // a.calls)
                       for e in by_shape if e.key in PRODUCTS), key=lambda r: -r[2])
    total = sum(e.self_cpu_time_total for e in p.key_averages()) / a.calls / 1e3
    in_products = sum(r[2] for r in products)
    print(f"torch {torch.__version__}, {a.threads} thread(s), block {a.block}: {total:.2f} ms per call in "
          f"operators, {in_products:.2f} ms in products")
    print(f"{'operator':28s} {'input shapes':52s} {'ms/call':>8s} {'calls':>6s}")
    for key, shapes, ms, n in products[:a.top]:
        print(f"{key:28s} {str(shapes)[:52]:52s} {ms:8.3f} {n:6d}")
    others = sorted(((e.key, e.self_cpu_time_total / a.calls / 1e3, e.count // a.calls)
                     for e in p.key_averages() if e.key not in PRODUCTS),
                    key=lambda r: -r[1])
    print(f"other operators (forward: the TorchScript interpreter's own time): {total - in_products:.2f} ms per call; "
          "largest:")
    for key, ms, n in others[:8]:
        print(f"{key:28s} {'':52s} {ms:8.3f} {n:6d}")


if __name__ == "__main__":
    main()
