"""Where an ONNX forward graph spends its time under ONNX Runtime, by operator: the graph as ONNX
Runtime optimises it (its fused operators: DynamicQuantizeMatMul, FusedConv), then the kernel
time per call of each operator type and its share, from ONNX Runtime's own profiler (which adds
a few microseconds per node, so the shares matter more than the sum). For reading
onnx_bench.sh's figures (docs/perf/export.md).

  .venv-onnx/bin/python benchmarks/onnx_ops.py FILE.onnx [--block 2048] [--calls 60] [--top 15]

FILE.onnx: a forward graph, e.g. `build/bin/export_bench --version v2 --onnx_dir DIR` writes
DIR/ours_streaming.onnx, DIR/ours_offline.onnx and DIR/ours_streaming_int8.onnx. One thread
(intra- and inter-op); [1, 1, block] blocks of uniform noise (±0.5), a streaming graph's state
fed back from call to call; the first 10 calls are not counted."""
import collections
import json
import os
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
import benchlib  # noqa: E402  (beside this file)

WARMUP = 10


def options(**extra):
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.inter_op_num_threads = 1
    o.log_severity_level = 3
    for k, v in extra.items():
        setattr(o, k, v)
    return o


def main():
    a = benchlib.options(__doc__, {"_args": [], "block": 2048, "calls": 60, "top": 15})
    a.file = a.args[0]
    with tempfile.TemporaryDirectory() as tmp:
        optimized = os.path.join(tmp, "optimized.onnx")
        ort.InferenceSession(a.file, options(optimized_model_filepath=optimized), providers=["CPUExecutionProvider"])
        ops = collections.Counter(n.op_type for n in onnx.load(optimized).graph.node)
    print(f"{a.file}: {sum(ops.values())} nodes as ONNX Runtime {ort.__version__} optimises it: "
          + ", ".join(f"{k} {v}" for k, v in ops.most_common()))
    sess = ort.InferenceSession(a.file, options(enable_profiling=True), providers=["CPUExecutionProvider"])
    state = {}
    for i in sess.get_inputs():
        if i.name.startswith("state."):
            rows = int(i.shape[0].split("*")[1]) if "*" in str(i.shape[0]) else 1
            state[i.name] = np.zeros((rows, i.shape[1], i.shape[2]), np.float32)
    names = [o.name for o in sess.get_outputs()]
    rng = np.random.default_rng(0)
    times = []
    for _ in range(WARMUP + a.calls):
        x = rng.random((1, 1, a.block), np.float32) - 0.5
        t = time.perf_counter()
        out = dict(zip(names, sess.run(names, {**state, "audio_in": x})))
        times.append(time.perf_counter() - t)
        for name in state:
            state[name] = out[name + ".next"]
    with open(sess.end_profiling()) as f:
        events = json.load(f)
    os.remove(f.name)
    # Every call is in the profile; the kernels of the counted calls are the last ones.
    kernels = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    per_call = len(kernels) // (WARMUP + a.calls)
    kernels = kernels[WARMUP * per_call:]
    total, count = collections.Counter(), collections.Counter()
    for e in kernels:
        total[e["args"]["op_name"]] += e["dur"]
        count[e["args"]["op_name"]] += 1
    whole = sum(total.values())
    print(f"block {a.block}: {1e3 * float(np.median(times[WARMUP:])):.2f} ms per call (median, profiled), "
          f"{whole / a.calls / 1e3:.2f} ms of it in kernels")
    for op, us in total.most_common(a.top):
        print(f"  {op:24s} {us / a.calls / 1e3:7.3f} ms per call  {100.0 * us / whole:5.1f} %  "
              f"{count[op] // a.calls} per call")


if __name__ == "__main__":
    main()
