"""Our ONNX export against RAVE's own under ONNX Runtime, one thread, side by side (bench.py --only
onnx runs it in .venv-onnx; sections.toml's [onnx.text] says what is measured and how).

  .venv-onnx/bin/python benchmarks/onnx_race.py --dir DIR [--rounds 3] [--seconds 10]
  .venv-onnx/bin/python benchmarks/onnx_race.py --ops FILE.onnx [--block 2048] [--calls 60] [--top 15]

DIR holds export_bench --onnx_dir's files and printout (ours_int8.json) and rave_own_onnx.py's
rave.onnx and rave.json; prints the figures as one JSON object (bench_export.onnx_section makes the
section of them). --ops: one graph's nodes as ONNX Runtime optimises it and its profiler's kernel
time per call by operator type (docs/perf/export.md).
"""
import collections
import json
import os
import statistics
import sys
import tempfile

import numpy as np
import onnxruntime as ort

import benchlib

SR = 44100
WARMUP = 5
SCALES = (2048, 1024, 512, 256, 128)


def session(path, **options):
    """An ONNX Runtime session on one thread (intra- and inter-op); options: more SessionOptions."""
    o = ort.SessionOptions()
    o.intra_op_num_threads = o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.log_severity_level = 3
    for k, v in options.items():
        setattr(o, k, v)
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])


class Caller:
    """Calls a forward graph block by block; a streaming graph keeps its state. `extra`: other
    feeds of every call (noise_scale)."""

    def __init__(self, sess, extra=None):
        self.sess = sess
        self.extra = dict(extra or {})
        self.input = sess.get_inputs()[0].name
        self.outputs = [o.name for o in sess.get_outputs()]
        self.audio = next(i for i, name in enumerate(self.outputs) if not name.startswith("state."))
        self.state = {}
        for i in sess.get_inputs():
            if i.name.startswith("state."):
                rows = int(i.shape[0].split("*")[1]) if "*" in str(i.shape[0]) else 1
                self.state[i.name] = np.zeros((rows, i.shape[1], i.shape[2]), np.float32)

    def __call__(self, x):
        feeds = {**self.state, **self.extra}
        feeds[self.input] = x
        out = self.sess.run(self.outputs, feeds)
        for name, value in zip(self.outputs, out):
            if name.endswith(".next"):
                self.state[name[:-len(".next")]] = value
        return out[self.audio]


def time_blocks(call, audio, block):
    """The median ms of call on each block of audio, after WARMUP calls on its first blocks."""
    blocks = lambda n: (np.ascontiguousarray(audio[..., i * block:(i + 1) * block]) for i in range(n))  # noqa: E731
    return statistics.median(benchlib.time_calls(call, blocks(WARMUP), blocks(audio.shape[-1] // block)))


def spectral_distance(x, y):
    """Mean over scales of mean |log|X| − log|Y|| + ‖|X| − |Y|‖ / ‖|X|‖ (Hann window, hop n/4)."""
    total = 0.0
    for n in SCALES:
        w = np.hanning(n + 1)[:-1].astype(np.float32)

        def mag(s):
            frames = np.lib.stride_tricks.sliding_window_view(s.reshape(-1), n)[::n // 4] * w
            return np.abs(np.fft.rfft(frames, axis=-1))
        a, b = mag(x), mag(y)
        total += np.mean(np.abs(np.log(a + 1e-7) - np.log(b + 1e-7))) + np.linalg.norm(a - b) / np.linalg.norm(a)
    return float(total / len(SCALES))


def last_json(path):
    with open(path) as f:
        return json.loads(f.read().strip().splitlines()[-1])


def ops(a, warmup=10):
    """--ops: one graph's operators as ONNX Runtime optimises it, and its profiler's kernel time per call."""
    import onnx
    with tempfile.TemporaryDirectory() as tmp:
        optimized = os.path.join(tmp, "optimized.onnx")
        session(a.ops, optimized_model_filepath=optimized)
        counts = collections.Counter(n.op_type for n in onnx.load(optimized).graph.node)
    print(f"{a.ops}: {sum(counts.values())} nodes as ONNX Runtime {ort.__version__} optimises it: "
          + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    call, rng = Caller(session(a.ops, enable_profiling=True)), np.random.default_rng(0)
    times = benchlib.time_calls(call, [], (rng.random((1, 1, a.block), np.float32) - 0.5 for _ in range(warmup + a.calls)))
    with open(call.sess.end_profiling()) as f:
        events = json.load(f)
    os.remove(f.name)
    # Every call is in the profile; the kernels of the counted calls are the last ones.
    kernels = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    kernels = kernels[warmup * (len(kernels) // (warmup + a.calls)):]
    total, count = collections.Counter(), collections.Counter()
    for e in kernels:
        total[e["args"]["op_name"]] += e["dur"]
        count[e["args"]["op_name"]] += 1
    whole = sum(total.values())
    print(f"block {a.block}: {float(np.median(times[warmup:])):.2f} ms per call (median, profiled), "
          f"{whole / a.calls / 1e3:.2f} ms of it in kernels")
    for op, us in total.most_common(a.top):
        print(f"  {op:24s} {us / a.calls / 1e3:7.3f} ms per call  {100.0 * us / whole:5.1f} %  "
              f"{count[op] // a.calls} per call")


def main():
    a = benchlib.options(__doc__, {"dir": None, "rounds": 3, "seconds": 10.0, "ops": None, "block": 2048, "calls": 60,
                                   "top": 15})
    if a.ops:
        return ops(a)
    if not a.dir:
        raise SystemExit("onnx_race: --dir is needed unless --ops")
    files = {"ours": "ours_streaming.onnx", "ours_offline": "ours_offline.onnx", "ours_int8": "ours_streaming_int8.onnx",
             "rave": "rave.onnx"}
    sessions = {k: session(os.path.join(a.dir, f)) for k, f in files.items()}
    rave_record, int8_record = (last_json(os.path.join(a.dir, f)) for f in ("rave.json", "ours_int8.json"))
    rng, blocks, raw = np.random.default_rng(1), (2048, 4096), []
    for r in range(1, a.rounds + 1):
        for block in blocks:
            audio = ((rng.random((1, 1, (int(a.seconds * SR) // block + WARMUP) * block)) * 2 - 1) * 0.5).astype(np.float32)
            for name in list(files) if r % 2 else list(reversed(files)):
                raw.append({"round": r, "block": block, "name": name,
                            "ms_per_block_median": time_blocks(Caller(sessions[name]), audio, block)})
            print(json.dumps(raw[-len(files):]), file=sys.stderr)
    # The same audio through both offline graphs: a chord with a little noise, 16 frames.
    t = np.arange(16 * 2048) / SR
    x = (0.3 * np.sin(2 * np.pi * 220 * t) + 0.2 * np.sin(2 * np.pi * 331 * t) + 0.02 * rng.standard_normal(t.size))
    x = x.astype(np.float32).reshape(1, 1, -1)
    ours = sessions["ours_offline"].run(None, {"audio_in": x})[0]
    rave = [sessions["rave"].run(None, {"audio_in": x})[0] for _ in range(2)]
    d_ours, d_rave = spectral_distance(rave[0], ours), spectral_distance(rave[0], rave[1])

    def streamed(name):  # int8 against float32: both streaming, deterministic (noise_scale 0), the same chord
        call = Caller(sessions[name], {"noise_scale": np.array(0.0, np.float32)})
        return np.concatenate([call(np.ascontiguousarray(x[..., i:i + 2048])) for i in range(0, x.shape[-1], 2048)], -1)
    f32, i8 = streamed("ours"), streamed("ours_int8")
    snr_int8 = float(10 * np.log10(np.sum(f32.astype(np.float64) ** 2) / np.sum((f32 - i8).astype(np.float64) ** 2)))
    # The floor: a call reads every weight once (at 2048 samples the top layers see one frame).
    weights = np.fromfile(os.path.join(a.dir, "weights.bin"), dtype=np.float32)
    benchlib.emit({"runs": raw, "rave_own_onnx": rave_record, "ours_int8": int8_record, "onnxruntime": ort.__version__,
                   "spectral_distance": {"ours_vs_rave": d_ours, "rave_vs_rave": d_rave}, "scales": SCALES,
                   "int8_vs_float32_snr_db": snr_int8,
                   "weights_read_ms": statistics.median(benchlib.time_calls(lambda _: weights.sum(), [None], range(9))),
                   "weights_mib": weights.nbytes / 2**20})


if __name__ == "__main__":
    main()
