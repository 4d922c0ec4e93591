#!/usr/bin/python3
"""Python side of the native-vs-Python RAVE benchmark (run with Debian's /usr/bin/python3,
whose python3-torch is the same LibTorch 1.13 the native build links).

  ref_bench.py check --dir DIR           phase-1 loss and gradients vs `rave_bench export`
  ref_bench.py step  --dir DIR --threads T --steps N
                                         phase-1 step timing on the exported weights/input
  ref_bench.py train --dir DIR --data FILE --steps N --batch B --n_signal T --threads T
                                         whole-run throughput: an in-process loader doing the
                                         native AudioDataset's augmentations, then the step
Every command prints one JSON object.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rave_v2  # noqa: E402
import rave_v3  # noqa: E402


def build(ref):
    mod = rave_v3 if ref["version"] == "v3" else rave_v2
    o = mod.preset(ref["version"], capacity=ref["capacity"], latent_size=ref.get("latent_size", 128))
    return rave_v2.RAVE(o)


def load_export(model, d):
    """Assigns every parameter and buffer of `model` from DIR/weights.{json,bin} by name.
    Returns (input tensor, names exported but absent here)."""
    manifest = json.load(open(os.path.join(d, "weights.json")))
    raw = open(os.path.join(d, "weights.bin"), "rb").read()
    tensors = {}
    for e in manifest:
        dtype = np.float32 if e["dtype"] == "float32" else np.int64
        n = int(np.prod(e["shape"])) if e["shape"] else 1
        a = np.frombuffer(raw, dtype=dtype, count=n, offset=e["offset"]).reshape(e["shape"])
        tensors[e["name"]] = torch.from_numpy(a.copy())
    ours = dict(model.named_parameters())
    ours.update(dict(model.named_buffers()))
    missing = [k for k in ours if k not in tensors]
    if missing:
        raise SystemExit(f"ref_bench: export lacks {len(missing)} of our names, e.g. {missing[:5]}")
    with torch.no_grad():
        for k, t in ours.items():
            if tuple(t.shape) != tuple(tensors[k].shape):
                raise SystemExit(f"ref_bench: {k}: shape {tuple(t.shape)} vs exported {tuple(tensors[k].shape)}")
            t.copy_(tensors[k])
    unused = sorted(k for k in tensors if k not in ours and k != "__input__")
    return tensors["__input__"], unused


def cmd_check(a):
    ref = json.load(open(os.path.join(a.dir, "reference.json")))
    torch.set_num_threads(ref["threads"])
    model = build(ref)
    model.train()
    x, unused = load_export(model, a.dir)
    torch.manual_seed(ref["seed"])
    losses = model.phase1_losses(x, ref["beta"])
    losses["loss_gen"].backward()
    out = {"version": ref["version"], "capacity": ref["capacity"], "batch": ref["batch"],
           "n_signal": ref["n_signal"], "unused_exported": len(unused),
           "unused_prefixes": sorted({".".join(k.split(".")[:2]) for k in unused})}
    worst = 0.0
    for k in ("fullband_spectral_distance", "multiband_spectral_distance", "regularization", "loss_gen"):
        py = float(losses[k])
        out[k] = {"native": ref[k], "python": py, "abs_diff": abs(py - ref[k])}
        worst = max(worst, abs(py - ref[k]))
    out["y_abs_sum"] = {"native": ref["y_abs_sum"], "python": float(losses["y"].abs().sum())}
    grads = dict(model.named_parameters())
    rel = []
    for k, g in ref["grad_norms"].items():
        if k in grads and grads[k].grad is not None:
            p = float(grads[k].grad.norm())
            rel.append(abs(p - g) / max(abs(g), 1e-12))
    out["grad_norm_params_compared"] = len(rel)
    out["grad_norm_max_rel_diff"] = max(rel) if rel else None
    out["loss_max_abs_diff"] = worst
    out["tolerance"] = 1e-4
    out["pass"] = worst <= 1e-4
    print(json.dumps(out))
    return 0 if out["pass"] else 1


def make_step(model):
    opt = torch.optim.Adam(model.generator_parameters(), lr=1e-3, betas=(0.5, 0.9))

    def step(x):
        t0 = time.perf_counter()
        losses = model.phase1_losses(x, 1e-6)
        opt.zero_grad()
        losses["loss_gen"].backward()
        opt.step()
        value = float(losses["loss_gen"])
        return time.perf_counter() - t0, value
    return step


def cmd_step(a):
    ref = json.load(open(os.path.join(a.dir, "reference.json")))
    torch.set_num_threads(a.threads if a.threads > 0 else os.cpu_count())
    if a.mkldnn >= 0:
        torch.backends.mkldnn.enabled = bool(a.mkldnn)
    model = build(ref)
    model.train()
    x, _ = load_export(model, a.dir)
    step = make_step(model)
    for _ in range(a.warmup):
        step(x)
    times, value = [], None
    for _ in range(a.steps):
        t, value = step(x)
        times.append(t)
    print(json.dumps({"impl": "python", "version": ref["version"], "capacity": ref["capacity"],
                      "batch": int(x.size(0)), "n_signal": int(x.size(-1)), "threads": torch.get_num_threads(),
                      "mkldnn_enabled": torch.backends.mkldnn.enabled, "step_seconds": times, "loss": value}))
    return 0


class Loader:
    """The native AudioDataset's augmentations (data/audio_dataset.h): random crop to
    n_signal, RAVE's random phase mangle with p = 0.8 (allpass b=[r², −2r cos ω, 1],
    a=[1, −2r cos ω, r²], r = 0.99, f log-uniform in [20, 2000] Hz), dequantize
    (+U[0,1)/2^16). In-process, on the training thread."""

    def __init__(self, path, n_signal, batch, seed=1):
        meta = json.load(open(path + ".json"))
        self.sr = meta["sampling_rate"]
        self.data = np.fromfile(path, dtype=np.float32).reshape(meta["records"], meta["channels"], meta["length"])
        self.n_signal, self.batch = n_signal, batch
        self.rng = np.random.default_rng(seed)
        from scipy.signal import lfilter
        self.lfilter = lfilter

    def example(self):
        rec = self.data[self.rng.integers(len(self.data))]
        start = self.rng.integers(rec.shape[-1] - self.n_signal + 1)
        x = rec[:, start:start + self.n_signal].astype(np.float64)
        if self.rng.random() < 0.8:
            f = math.exp(self.rng.uniform(math.log(20.0), math.log(2000.0)))
            w, r = 2 * math.pi * f / self.sr, 0.99
            b = [r * r, -2 * r * math.cos(w), 1.0]
            aa = [1.0, -2 * r * math.cos(w), r * r]
            x = self.lfilter(b, aa, x, axis=-1)
        x = x + self.rng.random(x.shape) / 65536.0
        return x.astype(np.float32)

    def next(self):
        return torch.from_numpy(np.stack([self.example() for _ in range(self.batch)]))


def cmd_train(a):
    ref = json.load(open(os.path.join(a.dir, "reference.json")))
    torch.set_num_threads(a.threads if a.threads > 0 else os.cpu_count())
    model = build(ref)
    model.train()
    load_export(model, a.dir)
    loader = Loader(a.data, a.n_signal, a.batch)
    step = make_step(model)
    step(loader.next())  # warm-up
    load_s, step_s, load_step_s, t0 = 0.0, [], [], time.perf_counter()
    for _ in range(a.steps):
        t = time.perf_counter()
        x = loader.next()
        load_step_s.append(time.perf_counter() - t)
        load_s += load_step_s[-1]
        step(x)
        step_s.append(time.perf_counter() - t)  # loading included, as in the native step time
    wall = time.perf_counter() - t0
    print(json.dumps({"impl": "python", "version": ref["version"], "steps": a.steps, "batch": a.batch,
                      "n_signal": a.n_signal, "threads": torch.get_num_threads(), "wall_seconds": wall,
                      "loading_seconds": load_s, "step_seconds": step_s,
                      "loading_step_seconds": load_step_s, "steps_per_second": a.steps / wall,
                      "examples_per_second": a.steps * a.batch / wall}))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--dir", required=True)
    s = sub.add_parser("step")
    s.add_argument("--dir", required=True)
    s.add_argument("--threads", type=int, default=0)
    s.add_argument("--steps", type=int, default=5)
    s.add_argument("--warmup", type=int, default=1)
    s.add_argument("--mkldnn", type=int, default=-1)
    t = sub.add_parser("train")
    t.add_argument("--dir", required=True)
    t.add_argument("--data", required=True)
    t.add_argument("--steps", type=int, default=10)
    t.add_argument("--batch", type=int, default=4)
    t.add_argument("--n_signal", type=int, default=32768)
    t.add_argument("--threads", type=int, default=0)
    a = p.parse_args()
    return {"check": cmd_check, "step": cmd_step, "train": cmd_train}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
