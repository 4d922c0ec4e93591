"""Time the real RAVE training step (acids-rave 2.3.1) on one device.

  python benchmarks/rave_gpu_step.py [--device cuda] [--out rave_gpu_step.json]
      [--config v2|v3] [--configs b8x131072,b4x32768:bf16:nocrop] [--phase 1|2|both]
      [--steps 20] [--warmup 5] [--threads N] [--replace-unused-imports] [--op_table PREFIX]
  python benchmarks/rave_gpu_step.py --device cpu --threads 1 --configs b4x32768:fp32:nocrop \
      --phase 1 --out -      (bench.py's CPU comparison: the JSON on stdout's last line, the table on stderr)

The model is what `rave train --config v2` builds: RAVE's own v2.gin (which includes v1.gin) with
SAMPLING_RATE 44100 and RAVE.n_channels 1, at full size,
built, crop-prepared and stepped through tests/oracle/rave_oracle.py (build, prepare, Harness:
Lightning 1.9's per-batch calls: callbacks' on_train_batch_start, training_step,
on_train_batch_end). n_signal is not a gin setting in v2: it is the length of the batches.

Each config (batch x n_signal, fp32 or bf16) gets a fresh model; phase 1 (before RAVE's warm-up:
VAE only) is timed, then phase 2 on the same model after setting WarmupCallback's step count to
model.warmup, so the callback switches the model to warmed_up as RAVE's does (discriminator
active; every update_discriminator_every-th batch steps the discriminator, the others the
decoder). Each phase: --warmup untimed steps, then --steps timed ones, synchronised.

bf16 is Lightning 1.9's precision="bf16" (MixedPrecisionPlugin): torch.autocast(bfloat16) around
training_step only, weights stay float32. RAVE optimises manually, so its optimizer steps happen
inside training_step, hence inside autocast, as under Lightning; the callbacks and
on_train_batch_end (LR scheduler) run outside it.

--replace-unused-imports: RAVE imports GPUtil, librosa, lmdb, requests, scipy, sklearn and udls at module
level (v1.gin imports rave.dataset too) but its training step uses none of them (GPU selection,
mel filters, the LMDB/HTTP datasets and their protobuf records, data augmentations, and the PCA
of validation_epoch_end). Those that fail to import are replaced by empty modules
whose functions raise if called, and are listed in the JSON. scipy is also used to design the
PQMF prototype at construction; with scipy replaced, rave.pqmf.get_prototype answers from
rave_pqmf_prototypes.json and the built PQMF state is checked against the table's sha256 of the
real-scipy build. The table was computed once by RAVE's own get_prototype under its pinned scipy
1.10.0 (attenuation 100 dB, 2 to 32 bands), a CachedPQMF built through it checked bit-identical to
one built with that scipy.
"""
import functools
import gc
import hashlib
import importlib
import importlib.abc
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
import types
from importlib.metadata import version

import torch
import benchlib  # noqa: E402  (beside this file)

HERE = os.path.dirname(os.path.abspath(__file__))
REPLACEABLE = ("GPUtil", "librosa", "lmdb", "requests", "scipy", "sklearn", "udls")
# At full size v2's receptive field is about 27000 samples each side, so its valid-signal crop
# leaves nothing of a 32768-sample batch (RAVE itself fails there, as does the native trainer with
# train.valid_signal_crop = true): n_signal 32768 runs with RAVE.valid_signal_crop = False
# (:nocrop).
FULL_CONFIGS = ["b8x131072:fp32", "b8x131072:bf16", "b4x32768:fp32:nocrop", "b4x32768:bf16:nocrop"]
SR = 44100


class _Missing:
    """Stands for any name of a replaced module: usable in annotations, raises when called."""

    def __init__(self, name):
        self.name = name

    def __call__(self, *a, **k):
        raise RuntimeError(f"{self.name} is a stand-in (--replace-unused-imports): not available here")


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes `import root[.sub]` give an empty package for each replaced root."""

    def __init__(self, roots):
        self.roots = set(roots)

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.roots:
            return importlib.util.spec_from_loader(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []

        def getattr_(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return _Missing(f"{spec.name}.{attr}")
        m.__getattr__ = getattr_
        return m

    def exec_module(self, module):
        pass


# What RAVE imports from a module that is there but too new for it: scipy >= 1.11 has no
# scipy.signal.kaiser (rave/pqmf.py imports it), so such a scipy is replaced as if missing.
NEEDED_NAMES = {"scipy": ("scipy.signal", "kaiser")}
SCIPY_DEPENDENTS = ("sklearn", "librosa")


def replace_unused_imports(roots=REPLACEABLE):
    """Replace each of `roots` that does not import (or lacks what RAVE imports from it)."""
    missing = []
    for root in roots:
        try:
            importlib.import_module(root)
            if root in NEEDED_NAMES:
                module, name = NEEDED_NAMES[root]
                getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            missing.append(root)
    # What imports a replaced scipy breaks (the real scikit-learn subclasses scipy's classes at
    # import): replaced with it. RAVE uses sklearn only for validation_epoch_end's PCA.
    if "scipy" in missing:
        missing += [m for m in SCIPY_DEPENDENTS if m not in missing]
    if missing:
        # A module already imported (by a dependency's probe) is dropped from sys.modules so that
        # RAVE's own imports reach the stand-in; the importers keep their reference.
        for name in [n for n in sys.modules if n.split(".")[0] in missing]:
            del sys.modules[name]
        sys.meta_path.insert(0, _StandInFinder(missing))
    return missing


def state_sha256(module):
    """sha256 over a module's state tensors (sorted names, their bytes): the table's check."""
    d = hashlib.sha256()
    for k, v in sorted(module.state_dict().items()):
        d.update(k.encode())
        d.update(v.detach().cpu().contiguous().numpy().tobytes())
    return d.hexdigest()


def pqmf_lookup(table):
    """A rave.pqmf.get_prototype(atten, M, N=None) answering from the table (float64, exact)."""
    def get_prototype(atten, M, N=None):
        import numpy as np
        key = f"{int(atten)},{int(M)}"
        if N is not None or key not in table:
            raise KeyError(f"no PQMF prototype stored for attenuation={atten} n_band={M} N={N}")
        return np.array([float.fromhex(s) for s in table[key]["h"]], dtype=np.float64)
    return get_prototype


def import_rave(replace):
    """Imports RAVE (and the oracle's helpers), replacing what --replace-unused-imports allows."""
    # RAVE's real dependencies first, so their own optional-import probes see no stand-ins.
    import pytorch_lightning, torchaudio, gin, cached_conv, einops  # noqa: F401,E401
    replaced = replace_unused_imports() if replace else []
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))
    sys.path.insert(0, HERE)
    import rave_oracle
    import rave.pqmf
    with open(os.path.join(HERE, "rave_pqmf_prototypes.json")) as f:
        table = json.load(f)
    pqmf_source = "scipy " + version("scipy") if "scipy" not in replaced else None
    if pqmf_source is None:
        rave.pqmf.get_prototype = pqmf_lookup(table["prototypes"])
        pqmf_source = f"table rave_pqmf_prototypes.json (scipy {table['scipy']})"
    return rave_oracle, replaced, pqmf_source, table, state_sha256


def parse_configs(spec):
    """bBxN[:fp32|:bf16][:nocrop] -> (batch, n_signal, precision, crop); no precision: both."""
    out = []
    for tok in (spec.split(",") if spec else FULL_CONFIGS):
        shape, *flags = tok.split(":")
        b, n = shape.lstrip("b").split("x")
        assert set(flags) <= {"fp32", "bf16", "nocrop"}, tok
        for p in ([f for f in flags if f != "nocrop"] or ["fp32", "bf16"]):
            out.append((int(b), int(n), p, "nocrop" not in flags))
    return out


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def summary(ms):
    return {"median_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms),
            "min_ms": min(ms), "max_ms": max(ms)} if ms else {}


def write_op_table(h, phase, b, n, device, a):
    """One more step, untimed, under torch.profiler: the operators by self CPU time per step
    (what profile-report prints for the native trainer), to --op_table's file, one per phase."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    x = torch.randn(b, 1, n, device=device) * 0.1
    with profile(activities=activities) as prof:
        h.step(x, a.warmup + a.steps)
        sync(device)
    path = f"{a.op_table}.phase{phase}.txt"
    with open(path, "w") as f:
        f.write(f"RAVE {a.config}, phase {phase}, batch {b} x {n}, {torch.get_num_threads()} thread(s), "
                f"torch {torch.__version__}: one training step under torch.profiler\n")
        f.write(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))
    print(f"rave_gpu_step: operator table in {path}", file=sys.stderr)


def run_phase(h, model, phase, b, n, device, a):
    """--warmup then --steps timed Harness steps; returns the phase's record."""
    if phase == 2:   # WarmupCallback flips warmed_up once its count reaches model.warmup
        h.callbacks[0].state["training_steps"] = max(h.callbacks[0].state["training_steps"],
                                                     int(model.warmup))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, kinds, loss = [], [], None
    for i in range(a.warmup + a.steps):
        x = torch.randn(b, 1, n, device=device) * 0.1     # a fresh batch, as a loader gives
        sync(device)
        t0 = time.perf_counter()
        loss, _ = h.step(x, i)
        sync(device)
        dt = (time.perf_counter() - t0) * 1e3
        if i >= a.warmup:
            dis = bool(model.warmed_up) and i % model.update_discriminator_every == 0
            times.append(dt)
            kinds.append("discriminator" if dis else "generator")
    assert bool(model.warmed_up) == (phase == 2)
    if a.op_table:
        write_op_table(h, phase, b, n, device, a)
    r = {"phase": phase, "status": "ok", **summary(times), "step_ms": times, "kinds": kinds,
         "last_loss": float(loss), "audio_s_per_s": b * n / SR / (statistics.median(times) / 1e3)}
    if phase == 2:
        for k in ("generator", "discriminator"):
            r[k] = summary([t for t, kk in zip(times, kinds) if kk == k])
    if device.type == "cuda":
        r.update(max_memory_allocated=torch.cuda.max_memory_allocated(device),
                 max_memory_reserved=torch.cuda.max_memory_reserved(device),
                 memory_reserved=torch.cuda.memory_reserved(device))
    return r


def run_config(oracle, ctx, b, n, prec, crop, phases, device, a):
    rec = {"batch": b, "n_signal": n, "precision": prec, "valid_signal_crop": crop, "phases": []}
    model = h = None
    try:
        torch.manual_seed(0)
        nocrop = [] if crop else ["RAVE.valid_signal_crop = False"]
        model = oracle.build(a.config, ctx["bindings"] + nocrop)
        # The PQMF state as built here, against the real-scipy build's (the table's sha256).
        entry = ctx["table"]["prototypes"].get(f"100,{model.pqmf.n_band}")   # v1.gin: 100 dB
        rec["pqmf_matches_scipy_build"] = (None if entry is None
                                           else ctx["sha"](model.pqmf) == entry["state_sha256"])
        model.to(device)
        rec["receptive_field"] = rf = oracle.prepare(model)   # what Lightning's sanity check leaves
        if model.valid_signal_crop:   # rave.core.valid_signal_crop's slice of the multiband signal
            nb = model.pqmf.n_band
            left = len(range(n // nb)[rf[0] // nb:(-rf[1] // nb) if rf[1] else None])
            if left <= 0:
                raise ValueError(f"valid_signal_crop with receptive field {rf} leaves no samples "
                                 f"at n_signal {n} (RAVE fails here too); use :nocrop")
        rec["parameters"] = {k: sum(p.numel() for p in getattr(model, k).parameters())
                             for k in ("encoder", "decoder", "discriminator")}
        h = oracle.Harness(model)
        if prec == "bf16":    # Lightning 1.9 precision="bf16": autocast around training_step
            inner = model.training_step

            def training_step(*args, **kw):
                with torch.autocast(device.type, dtype=torch.bfloat16):
                    return inner(*args, **kw)
            model.training_step = training_step
        for phase in phases:
            try:
                rec["phases"].append(run_phase(h, model, phase, b, n, device, a))
            except torch.OutOfMemoryError as e:
                rec["phases"].append({"phase": phase, "status": "oom", "error": str(e)[:400]})
                break
    except torch.OutOfMemoryError as e:
        rec["status"] = "oom"
        rec["error"] = str(e)[:400]
    except Exception as e:  # noqa: BLE001 - record and go on to the next config
        rec["status"] = "error"
        rec["error"] = f"{type(e).__name__}: {e}"[:400]
    del model, h
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rec


def main():
    # --configs: comma list of bBxN[:fp32|:bf16][:nocrop] (no precision: both; default FULL_CONFIGS);
    # --bind: an extra gin binding for every config; --op_table PREFIX: after each phase's timed steps,
    # one more step under torch.profiler, its operators by self CPU time in PREFIX.phaseN.txt;
    # --replace-unused-imports: stand-ins for those of REPLACEABLE that fail to import.
    a = benchlib.options(__doc__, {"device": "cuda", "out": "rave_gpu_step.json", "config": "v2", "threads": 0,
                                   "configs": "", "bind": [], "phase": "both", "steps": 20, "warmup": 5,
                                   "op_table": None, "replace_unused_imports": False})
    if a.threads:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    # As RAVE's scripts/train.py does.
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.benchmark = True

    oracle, replaced, pqmf_source, table, sha = import_rave(a.replace_unused_imports)
    bindings = ["SAMPLING_RATE = 44100"] + a.bind
    ctx = {"bindings": bindings, "table": table, "sha": sha}
    phases = [1, 2] if a.phase == "both" else [int(a.phase)]
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
           "device": str(device), "acids-rave": version("acids-rave"),
           "pytorch-lightning": version("pytorch-lightning"), "numpy": version("numpy"),
           "torchaudio": version("torchaudio"), "replaced_imports": replaced, "pqmf_prototype": pqmf_source,
           "threads": torch.get_num_threads()}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        env.update(device_name=p.name, capability=f"{p.major}.{p.minor}",
                   total_memory=p.total_memory)
    else:
        env["device_name"] = platform.processor() or platform.machine()
    doc = {"benchmark": f"rave_{a.config}_training_step", "config": f"{a.config}.gin", "gin_bindings": bindings,
           "steps": a.steps, "warmup": a.warmup, "env": env, "results": []}
    for b, n, prec, crop in parse_configs(a.configs):
        rec = run_config(oracle, ctx, b, n, prec, crop, phases, device, a)
        doc["results"].append(rec)
        if a.out != "-":
            benchlib.emit(doc, a.out, indent=1)    # rewritten after each config: a cut run keeps some
    if a.out == "-":
        print_table(doc, sys.stderr)
        benchlib.emit(doc)
    else:
        print_table(doc)
    return 0


def print_table(doc, file=None):
    gib = 2 ** 30
    out = functools.partial(print, file=file or sys.stdout)
    out(f"{doc['env']['device_name']}  torch {doc['env']['torch']}  cuda {doc['env']['cuda']}")
    out(f"{'config':>16} {'prec':>5} {'ph':>2} {'median ms':>10} {'mean ms':>9} "
        f"{'peak GiB':>9} {'resv GiB':>9}  status")
    for r in doc["results"]:
        name = f"b{r['batch']}x{r['n_signal']}" + ("" if r["valid_signal_crop"] else ":nocrop")
        if not r["phases"]:
            out(f"{name:>16} {r['precision']:>5} {'-':>2} {'':>10} {'':>9} {'':>9} {'':>9}  "
                  f"{r.get('status')}: {r.get('error', '')[:60]}")
        for p in r["phases"]:
            if p["status"] != "ok":
                out(f"{name:>16} {r['precision']:>5} {p['phase']:>2} {'':>41}  {p['status']}")
                continue
            peak = p.get("max_memory_allocated", 0) / gib
            resv = p.get("max_memory_reserved", 0) / gib
            out(f"{name:>16} {r['precision']:>5} {p['phase']:>2} {p['median_ms']:>10.1f} "
                f"{p['mean_ms']:>9.1f} {peak:>9.2f} {resv:>9.2f}  ok")


if __name__ == "__main__":
    sys.exit(main())
