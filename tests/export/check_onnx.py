"""ONNX Runtime runs the files `export --format onnx` writes (tests/export/onnx_runtime_test.cpp).

For each case folder under the directory given (manifest.json, the three graphs offline and
streaming, inputs and the C++ model's outputs as .npy):
  - onnx.checker.check_model(full_check=True) on every file (shape inference included);
  - offline: encode, decode and forward at noise_scale 0 equal the model within the tolerance;
  - streaming: forward and decode called block by block, every "state.*" input fed from the
    previous call's ".next" output (zeros first), equal the model shifted by the latency;
  - noise_scale left at its default (1) draws: two calls of decode differ.
With "streamed_references" (files on int8 weights) the references are export's own runner's
outputs of the same files, streaming ones block by block: compared without a shift, and with
"relative_tolerance" the tolerance is a share of the reference's largest magnitude.
Prints one line per case; exits 1 on any failure.
"""
import json
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort


def session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # noise_scale is an input with a default: ORT notes it at every load
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def state_inputs(sess, batch):
    """Zero state for every "state.*" input; its first dim is "batch" or "batch*R"."""
    states = {}
    for i in sess.get_inputs():
        if not i.name.startswith("state."):
            continue
        rows, channels, samples = i.shape
        factor = int(rows.split("*")[1]) if "*" in rows else 1
        states[i.name] = np.zeros((batch * factor, channels, samples), np.float32)
    return states


def run_blocks(sess, input_name, x, step):
    states = state_inputs(sess, x.shape[0])
    names = [o.name for o in sess.get_outputs()]
    outs = []
    quiet = np.array(0.0, np.float32)
    for t in range(0, x.shape[-1] - step + 1, step):
        feeds = dict(states)
        feeds[input_name] = np.ascontiguousarray(x[..., t:t + step])
        feeds["noise_scale"] = quiet
        result = dict(zip(names, sess.run(names, feeds)))
        for name in states:
            states[name] = result[name + ".next"]
        outs.append(next(v for k, v in result.items() if not k.startswith("state.")))
    return np.concatenate(outs, -1)


def run_once(sess, input_name, x, noise_scale=0.0):
    feeds = {input_name: x}
    if noise_scale is not None:
        feeds["noise_scale"] = np.array(noise_scale, np.float32)
    return sess.run(None, feeds)[0]


def check_case(case):
    m = json.loads((case / "manifest.json").read_text())
    tol = m["tolerance"]
    relative = m.get("relative_tolerance", False)  # tol × max |reference| (int8: outputs of any scale)
    load = lambda name: np.load(case / name)
    failures = []

    def expect(label, got, want):
        if got.shape != want.shape:
            failures.append(f"{label}: shape {got.shape} != {want.shape}")
            return
        d = float(np.abs(got - want).max())
        bound = tol * float(np.abs(want).max()) if relative else tol
        if not d < bound:
            failures.append(f"{label}: max |diff| {d:.3g} >= {bound:.3g}" + (f" ({tol} of max |reference|)" if relative else ""))

    for f in sorted(case.glob("*.onnx")):
        onnx.checker.check_model(onnx.load(str(f)), full_check=True)
    x, z = load("x.npy"), load("z.npy")
    offline = {k: session(case / f"offline.{k}.onnx") for k in ("encode", "decode", "forward")}
    expect("offline encode", run_once(offline["encode"], "audio_in", x), load("encode.npy"))
    expect("offline decode", run_once(offline["decode"], "latent_in", z), load("decode.npy"))
    expect("offline forward", run_once(offline["forward"], "audio_in", x), load("forward.npy"))
    a = run_once(offline["decode"], "latent_in", z, None)
    b = run_once(offline["decode"], "latent_in", z, None)
    # Untrained filters make faint noise (about 1e-5 here): any difference between two calls counts.
    if m["noise"] and np.array_equal(a, b):
        failures.append("decode at noise_scale 1 drew no noise")
    if not np.isfinite(a).all():
        failures.append("decode at noise_scale 1 is not finite")

    block, skip, compared = m["block"], m["skip"], m["compared"]
    stream = {k: session(case / f"streaming.{k}.onnx") for k in ("decode", "forward")}
    xs, zs = load("x_stream.npy"), load("z_stream.npy")
    streamed = m.get("streamed_references", False)
    lat = 0 if streamed else m["forward_latency"]
    got = run_blocks(stream["forward"], "audio_in", xs, block)
    expect("streaming forward", got[..., skip + lat:skip + lat + compared], load("forward_stream.npy")[..., skip:skip + compared])
    lat = 0 if streamed else m["decode_latency"]
    got = run_blocks(stream["decode"], "latent_in", zs, block // m["ratio"])
    expect("streaming decode", got[..., skip + lat:skip + lat + compared], load("decode_stream.npy")[..., skip:skip + compared])
    print(f"{case.name}: {'ok' if not failures else 'FAILED'} (onnxruntime {ort.__version__}, onnx {onnx.__version__})")
    for f in failures:
        print("  " + f)
    return not failures


def main():
    root = pathlib.Path(sys.argv[1])
    cases = sorted(p for p in root.iterdir() if (p / "manifest.json").exists())
    if not cases:
        print(f"no cases under {root}")
        return 1
    ok = [check_case(c) for c in cases]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
