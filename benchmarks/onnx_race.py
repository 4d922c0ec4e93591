"""Our ONNX export against RAVE's own under ONNX Runtime, one thread, side by side
(benchmarks/onnx_bench.sh runs it in .venv-onnx, ONNX Runtime 1.17.3).

  .venv-onnx/bin/python benchmarks/onnx_race.py --dir DIR --command "..." [--rounds 3] [--seconds 10]

DIR holds export_bench --onnx_dir's files (ours_streaming.onnx, ours_offline.onnx: the forward
graphs of a random full-size v2; ours_streaming_int8.onnx: the streaming one on int8 weights, as
`export --format onnx --quantize int8` writes it) and rave_own_onnx.py's rave.onnx (the same weights, through
RAVE's export_onnx.py steps) with its JSON record rave.json. Per round, per block size (2048,
4096): each file in turn (order reversed every other round), 5 warm-up calls, then --seconds of
audio at 44.1 kHz in consecutive [1, 1, block] blocks of the same noise, each call timed:
  - ours, streaming (float32 and int8): the state inputs fed from the previous call's outputs (a
    host's loop);
  - ours, offline graph, and RAVE's own file (offline only): each block on its own.
The realtime factor at 48 kHz and a host buffer of B samples (128 … 2048): a call of 2048
samples (the ratio) must finish within B / 48000 s when the host runs it in the callback that
completes the block; the factor is that deadline ÷ the median call time (≥ 1: it keeps up).
Output difference: both forward graphs draw noise (RAVE's posterior sample and noise synthesis,
ours at noise_scale 1), so the files are compared in distribution: the multi-scale spectral
distance between ours and RAVE's output on the same audio, next to that between two calls of
RAVE's file. Writes benchmarks/results/onnx_export.json (benchlib's format; its text from
sections.toml's [onnx.text]).

  .venv-onnx/bin/python benchmarks/onnx_race.py --ops FILE.onnx [--block 2048] [--calls 60] [--top 15]

--ops: where one forward graph (e.g. DIR/ours_streaming_int8.onnx) spends its time under ONNX
Runtime, by operator, for reading the figures (docs/perf/export.md): the graph as ONNX Runtime
optimises it (its fused operators: DynamicQuantizeMatMul, FusedConv), then the kernel time per
call of each operator type and its share, from ONNX Runtime's own profiler (which adds a few
microseconds per node, so the shares matter more than the sum); [1, 1, block] blocks of uniform
noise (±0.5), one thread, the first 10 calls not counted.
"""
import collections
import json
import os
import statistics
import sys
import tempfile

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402

SR = 44100
WARMUP = 5
BUFFERS = (128, 256, 512, 1024, 2048)
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
    a = benchlib.options(__doc__, {"dir": None, "rounds": 3, "seconds": 10.0, "command": None, "load_before": "",
                                   "results_dir": None, "ops": None, "block": 2048, "calls": 60, "top": 15})
    if a.ops:
        return ops(a)
    if not (a.dir and a.command):
        raise SystemExit("onnx_race: --dir and --command are needed unless --ops")
    files = {"ours": "ours_streaming.onnx", "ours_offline": "ours_offline.onnx", "ours_int8": "ours_streaming_int8.onnx",
             "rave": "rave.onnx"}
    streaming = ("ours", "ours_int8")
    sessions = {k: session(os.path.join(a.dir, f)) for k, f in files.items()}
    with open(os.path.join(a.dir, "rave.json")) as f:
        rave_record = json.loads(f.read().strip().splitlines()[-1])
    with open(os.path.join(a.dir, "ours_int8.json")) as f:
        int8_record = json.loads(f.read().strip().splitlines()[-1])
    rng = np.random.default_rng(1)
    blocks = (2048, 4096)
    raw = []
    for r in range(1, a.rounds + 1):
        for block in blocks:
            audio = ((rng.random((1, 1, (int(a.seconds * SR) // block + WARMUP) * block)) * 2 - 1) * 0.5
                     ).astype(np.float32)
            order = list(files) if r % 2 else list(reversed(files))
            for name in order:
                call = Caller(sessions[name]) if name in streaming else \
                    (lambda s: (lambda x: s.run(None, {"audio_in": x})[0]))(sessions[name])
                raw.append({"round": r, "block": block, "name": name,
                            "ms_per_block_median": time_blocks(call, audio, block)})
            print(json.dumps(raw[-len(files):]), file=sys.stderr)

    def ms(name, block):
        return [x["ms_per_block_median"] for x in raw if x["name"] == name and x["block"] == block]

    # The same audio through both offline graphs: a chord with a little noise, 16 frames.
    t = np.arange(16 * 2048) / SR
    x = (0.3 * np.sin(2 * np.pi * 220 * t) + 0.2 * np.sin(2 * np.pi * 331 * t) + 0.02 * rng.standard_normal(t.size))
    x = x.astype(np.float32).reshape(1, 1, -1)
    ours = sessions["ours_offline"].run(None, {"audio_in": x})[0]
    rave = [sessions["rave"].run(None, {"audio_in": x})[0] for _ in range(2)]
    d_ours = spectral_distance(rave[0], ours)
    d_rave = spectral_distance(rave[0], rave[1])
    # int8 against float32, both streaming and deterministic (noise_scale 0), on the same chord.
    quiet = {"noise_scale": np.array(0.0, np.float32)}

    def streamed(name):
        call = Caller(sessions[name], quiet)
        return np.concatenate([call(np.ascontiguousarray(x[..., i:i + 2048])) for i in range(0, x.shape[-1], 2048)],
                              -1)
    f32, i8 = streamed("ours"), streamed("ours_int8")
    snr_int8 = float(10 * np.log10(np.sum(f32.astype(np.float64) ** 2) / np.sum((f32 - i8).astype(np.float64) ** 2)))
    derived, table, ratio_runs, int8_runs = {}, [], [], []
    for block in blocks:
        o, f, q, rv = ms("ours", block), ms("ours_offline", block), ms("ours_int8", block), ms("rave", block)
        ratios = [a_ / b_ for a_, b_ in zip(o, rv)]
        qratios = [a_ / b_ for a_, b_ in zip(q, rv)]
        ratio_runs += ratios
        int8_runs += qratios
        derived[f"b{block}"] = {"ours_ms": benchlib.summary(o), "ours_offline_ms": benchlib.summary(f),
                                "ours_int8_ms": benchlib.summary(q), "rave_ms": benchlib.summary(rv),
                                "ours_over_rave": benchlib.summary(ratios),
                                "ours_int8_over_rave": benchlib.summary(qratios)}
        table.append([block, f"{statistics.median(o):.1f}", f"{statistics.median(f):.1f}",
                      f"{statistics.median(q):.1f}", f"{statistics.median(rv):.1f}",
                      f"**{statistics.median(ratios):.2f}** ({min(ratios):.2f}–{max(ratios):.2f})",
                      f"**{statistics.median(qratios):.2f}** ({min(qratios):.2f}–{max(qratios):.2f})"])
    rt_rows = []
    for b in BUFFERS:
        deadline = 1e3 * b / 48000
        rt_rows.append([b, f"{deadline:.2f} ms", f"{deadline / statistics.median(ms('ours', 2048)):.2f}×",
                        f"{deadline / statistics.median(ms('ours_int8', 2048)):.2f}×",
                        f"{deadline / statistics.median(ms('rave', 2048)):.2f}×"])
    derived["spectral_distance"] = {"ours_vs_rave": d_ours, "rave_vs_rave": d_rave}
    derived["int8_vs_float32_snr_db"] = snr_int8
    # The floor: a call reads every weight once (at 2048 samples the top layers see one frame).
    weights = np.fromfile(os.path.join(a.dir, "weights.bin"), dtype=np.float32)
    floor = statistics.median(benchlib.time_calls(lambda _: weights.sum(), [None], range(9)))
    derived["weights_read_ms"] = floor
    section = benchlib.sections()["onnx"]
    bl = benchlib.Blocks(section["text"])
    bl.say("models", r=rave_record, ort=ort.__version__, rounds=a.rounds, seconds=a.seconds).table("columns", table)
    bl.say("int8", layers=int8_record["int8_layers"], snr=snr_int8, share=100.0 * int8_record["int8_weights"]
           / (int8_record["int8_weights"] + int8_record["float_weights"]))
    half = statistics.median(ms("rave", 2048)) / 2
    bl.say("floor", mib=weights.nbytes / 2**20, floor=floor, half=half, side="below" if half < floor else "above",
           verdict=bl.line("below" if half < floor else "above"))
    bl.say("realtime").table("realtime_columns", rt_rows)
    bl.say("output", ours=d_ours, rave=d_rave, scales=", ".join(map(str, SCALES)))
    host = benchlib.cpu_identity()["label"]
    targets = [benchlib.target(bl.line("target"), "≤ 0.5", "<=", 0.5, ratio_runs, over="rounds × blocks", host=host),
               benchlib.target(bl.line("int8_target"), "≤ 0.5", "<=", 0.5, int8_runs, over="rounds × blocks",
                               host=host)]
    # One row per host: the hosts an earlier result measured stay beside this one.
    carried = benchlib.keep_other_hosts(bl, targets, "onnx_export", host, a.results_dir)
    env = benchlib.environment(a.load_before, onnxruntime=ort.__version__)
    rec = benchlib.record(section["name"], section["title"], a.command, env, bl,
                          raw={"runs": raw, "rave_own_onnx": rave_record, "ours_int8": int8_record}, derived=derived, targets=targets,
                          other_hosts=carried, analysis="docs/perf/export.md",
                          commands=["build/bin/export_bench --version v2 --onnx_dir DIR",
                                    ".venv-rave-cpu/bin/python benchmarks/rave_own_onnx.py --weights DIR/weights "
                                    "--out DIR/rave.onnx",
                                    f".venv-onnx/bin/python benchmarks/onnx_race.py --dir DIR --rounds {a.rounds} "
                                    f"--seconds {a.seconds:g}"])
    print(benchlib.write_result(rec, a.results_dir))


if __name__ == "__main__":
    main()
