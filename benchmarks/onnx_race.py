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
RAVE's file. Writes benchmarks/results/onnx_export.json (benchlib's format).
"""
import json
import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402

SR = 44100
WARMUP = 5
BUFFERS = (128, 256, 512, 1024, 2048)
SCALES = (2048, 1024, 512, 256, 128)


def session(path):
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.log_severity_level = 3
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


def main():
    a = benchlib.options(__doc__, {"dir": ..., "rounds": 3, "seconds": 10.0, "command": ..., "load_before": "",
                                   "results_dir": None})
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
    reads = []
    for _ in range(10):
        t0 = time.perf_counter()
        weights.sum()
        reads.append(1e3 * (time.perf_counter() - t0))
    floor = statistics.median(reads[1:])
    derived["weights_read_ms"] = floor
    bl = benchlib.Blocks()
    bl.text("RAVE v2 at full size (capacity 96, latent 128, ratio 2048), random weights, the same weights in all "
            "files. **Ours**: `build/bin/export_bench --onnx_dir` writes the forward graphs `export --format onnx` "
            "writes (opset 17), streaming and offline. **RAVE's own**: `benchmarks/rave_own_onnx.py` follows "
            f"acids-rave {rave_record['acids-rave']}'s `scripts/export_onnx.py` (cached_conv replaced by plain "
            "convolutions, weight norm removed, `torch.onnx.export` at opset 12 with a dynamic length) on torch "
            f"{rave_record['torch']}'s TorchScript-based exporter; its file is offline only (no state: each block on "
            f"its own, with clicks at the edges). export_onnx.py as shipped {rave_record['export_onnx_py_status']}. "
            f"All four run under ONNX Runtime {ort.__version__}, one thread (intra- and inter-op), "
            f"{a.rounds} rounds of {a.seconds:g} s of noise per block size, the files alternating "
            "(`benchmarks/onnx_race.py`). ms per call: median over a round's calls, then over rounds; "
            "ours ÷ RAVE's own: the median of the per-round ratios (range).")
    bl.table(["block", "ours, streaming: ms", "ours, offline graph: ms", "ours, streaming, int8: ms",
              "RAVE's own ONNX: ms", "ours (streaming) ÷ RAVE's own", "ours (streaming, int8) ÷ RAVE's own"], table)
    bl.text(f"int8: `--quantize int8` on the same weights, {int8_record['int8_layers']} layers "
            f"({100.0 * int8_record['int8_weights'] / (int8_record['int8_weights'] + int8_record['float_weights']):.0f} % "
            "of the weights) stored as int8, one scale per output channel, their inputs quantized per call "
            "(DynamicQuantizeLinear → MatMulInteger, which ONNX Runtime fuses into DynamicQuantizeMatMul). "
            f"Lossy: on the chord below, streaming at noise_scale 0, int8 against float32 is {snr_int8:.1f} dB SNR "
            "on these random weights (what it adds on a trained model: `export` prints it for each file).")
    half = statistics.median(ms("rave", 2048)) / 2
    bl.text(f"The floor: one read of the {weights.nbytes / 2**20:.0f} MiB of float32 weights takes {floor:.1f} ms "
            "here (numpy, one thread, median of 9), and every call reads them all. Half of RAVE's own time at 2048 "
            f"samples is {half:.1f} ms, {'below' if half < floor else 'above'} that floor: "
            + ("no float32 file can meet ≤ 0.5 on this host, however few operators it runs."
               if half < floor else "the goal is within reach of a float32 file."))
    bl.text("Realtime at 48 kHz: both files take whole latent frames (2048 samples); a host with a smaller buffer "
            "collects 2048 samples and calls once. Run in the callback that completes them, the call must finish "
            "within one buffer: deadline ÷ median call time (≥ 1 keeps up; below 1 the host must run the model "
            "on another thread, with one more block of latency).")
    bl.table(["host buffer", "deadline", "ours, streaming", "ours, streaming, int8", "RAVE's own"], rt_rows)
    bl.text(f"Output: both graphs sample (RAVE's posterior and noise, ours at noise_scale 1). On 16 frames of a "
            f"chord, the multi-scale spectral distance between ours and RAVE's output is {d_ours:.3f}, between two "
            f"calls of RAVE's file {d_rave:.3f} (scales {', '.join(map(str, SCALES))}: mean |log-magnitude "
            "difference| + relative magnitude error).")
    host = benchlib.cpu_identity()["label"]
    targets = [benchlib.target("ONNX export, RAVE v2 forward, 2048- and 4096-sample blocks, 1 thread, ONNX Runtime: "
                               "time per block, ours (streaming) ÷ RAVE's own ONNX export", "≤ 0.5", "<=", 0.5,
                               ratio_runs, over="rounds × blocks", host=host),
               benchlib.target("ONNX export `--quantize int8`, RAVE v2 forward, 2048- and 4096-sample blocks, 1 thread, "
                               "ONNX Runtime: time per block, ours (streaming, int8) ÷ RAVE's own ONNX export", "≤ 0.5",
                               "<=", 0.5, int8_runs, over="rounds × blocks", host=host)]
    # One row per host: the hosts an earlier result measured stay beside this one.
    carried = benchlib.keep_other_hosts(bl, targets, "onnx_export", host, a.results_dir)
    env = benchlib.environment(a.load_before, onnxruntime=ort.__version__)
    rec = benchlib.record("onnx_export", "ONNX export under ONNX Runtime", a.command, env, bl,
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
