"""Time the real RAVE training step (acids-rave 2.3.1) on one device.

  python benchmarks/rave_gpu_step.py [--device cuda] [--out rave_gpu_step.json] [--config v2|v3]
      [--configs b8x131072,b4x32768:bf16:nocrop] [--phase 1|2|both] [--steps 20] [--warmup 5]
      [--threads N] [--bind GIN] [--replace-unused-imports] [--op_table PREFIX]
  (--out -: the JSON on stdout's last line and the table on stderr, as bench.py's CPU comparison runs it)

The model is what `rave train --config CONFIG` builds (RAVE's own gin, SAMPLING_RATE 44100,
RAVE.n_channels 1, full size), built, crop-prepared and stepped through tests/oracle/rave_oracle.py
(Harness: Lightning 1.9's per-batch calls around training_step). --configs: a comma list of
bBxN[:fp32|:bf16][:nocrop] (no precision: both; default FULL_CONFIGS); each gets a fresh model.
Phase 1 (VAE only) is timed, then phase 2 on the same model once WarmupCallback's count reaches
model.warmup (discriminator active). Each phase: --warmup untimed steps, then --steps timed ones,
synchronised. bf16 is Lightning 1.9's precision="bf16": autocast around training_step only (RAVE
optimises manually, so its optimizer steps are inside it). --op_table: after each phase one more
step under torch.profiler, its operators by self CPU time in PREFIX.phaseN.txt.

--replace-unused-imports: those of REPLACEABLE that do not import (or lack what RAVE imports from
them) become modules whose names raise when called: the step uses none of them. With scipy
replaced, rave.pqmf.get_prototype answers from rave_pqmf_prototypes.json (RAVE's own design under
its pinned scipy 1.10.0, 100 dB, 2 to 32 bands) and the built PQMF is checked against the table's
sha256 of the real-scipy build.
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

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPLACEABLE = ("GPUtil", "librosa", "lmdb", "requests", "scipy", "sklearn", "udls")
# At full size v2's receptive field is about 27000 samples each side: its valid-signal crop leaves
# nothing of a 32768-sample batch (RAVE fails there, as train does), so those run without (:nocrop).
FULL_CONFIGS = ["b8x131072:fp32", "b8x131072:bf16", "b4x32768:fp32:nocrop", "b4x32768:bf16:nocrop"]
SR = 44100
# What RAVE imports from a module that is there but too new for it (rave/pqmf.py: scipy.signal.kaiser,
# gone in scipy 1.13), and what imports a replaced scipy breaks (sklearn subclasses scipy's classes).
NEEDED_NAMES = {"scipy": ("scipy.signal", "kaiser")}
SCIPY_DEPENDENTS = ("sklearn", "librosa")


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes `import root[.sub]` give an empty package for each replaced root, whose every name
    (usable in annotations) raises when called."""

    def __init__(self, roots):
        self.roots = set(roots)

    def find_spec(self, name, path, target=None):
        return importlib.util.spec_from_loader(name, self, is_package=True) if name.split(".")[0] in self.roots else None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []

        def missing(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)

            def stand_in(*a, **k):
                raise RuntimeError(f"{spec.name}.{attr} is a stand-in (--replace-unused-imports): not available here")
            return stand_in
        m.__getattr__ = missing
        return m

    def exec_module(self, module):
        pass


def replace_unused_imports(roots=REPLACEABLE):
    """Replace each of `roots` that does not import (or lacks what RAVE imports from it)."""
    missing = []
    for root in roots:
        try:
            importlib.import_module(root)
            if root in NEEDED_NAMES:
                getattr(importlib.import_module(NEEDED_NAMES[root][0]), NEEDED_NAMES[root][1])
        except (ImportError, AttributeError):
            missing.append(root)
    if "scipy" in missing:
        missing += [m for m in SCIPY_DEPENDENTS if m not in missing]
    if missing:
        # Modules already imported (by a dependency's probe) leave sys.modules, so that RAVE's own
        # imports reach the stand-in; their importers keep their reference.
        for name in [n for n in sys.modules if n.split(".")[0] in missing]:
            del sys.modules[name]
        sys.meta_path.insert(0, _StandInFinder(missing))
    return missing


def pqmf_lookup(table):
    """A rave.pqmf.get_prototype(atten, M, N=None) answering from the table (float64, exact)."""
    def get_prototype(atten, M, N=None):
        import numpy as np
        key = f"{int(atten)},{int(M)}"
        if N is not None or key not in table:
            raise KeyError(f"no PQMF prototype stored for attenuation={atten} n_band={M} N={N}")
        return np.array([float.fromhex(s) for s in table[key]["h"]], dtype=np.float64)
    return get_prototype


def pqmf_matches(table, model):
    """Whether the model's PQMF state (sha256 over its sorted state tensors) is the real-scipy
    build's, as the table records it (v1.gin: 100 dB); None where the table has no entry."""
    entry = table["prototypes"].get(f"100,{model.pqmf.n_band}")
    if entry is None:
        return None
    d = hashlib.sha256()
    for k, v in sorted(model.pqmf.state_dict().items()):
        d.update(k.encode())
        d.update(v.detach().cpu().contiguous().numpy().tobytes())
    return d.hexdigest() == entry["state_sha256"]


def import_rave(replace):
    """Imports RAVE and tests/oracle/rave_oracle.py, replacing what --replace-unused-imports allows:
    (rave_oracle, the replaced modules, where the PQMF prototype comes from, the prototype table)."""
    import pytorch_lightning, torchaudio, gin, cached_conv, einops  # noqa: F401,E401 - before any stand-in
    replaced = replace_unused_imports() if replace else []
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))
    import rave_oracle
    import rave.pqmf
    with open(os.path.join(HERE, "rave_pqmf_prototypes.json")) as f:
        table = json.load(f)
    if "scipy" not in replaced:
        return rave_oracle, replaced, "scipy " + version("scipy"), table
    rave.pqmf.get_prototype = pqmf_lookup(table["prototypes"])
    return rave_oracle, replaced, f"table rave_pqmf_prototypes.json (scipy {table['scipy']})", table


def parse_configs(spec):
    """bBxN[:fp32|:bf16][:nocrop] -> (batch, n_signal, precision, crop); no precision: both."""
    out = []
    for tok in (spec.split(",") if spec else FULL_CONFIGS):
        shape, *flags = tok.split(":")
        b, n = shape.lstrip("b").split("x")
        assert set(flags) <= {"fp32", "bf16", "nocrop"}, tok
        out += [(int(b), int(n), p, "nocrop" not in flags) for p in [f for f in flags if f != "nocrop"] or ["fp32", "bf16"]]
    return out


def summary(ms):
    return {"median_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms), "min_ms": min(ms),
            "max_ms": max(ms)} if ms else {}


def run_phase(h, model, phase, b, n, device, a):
    """--warmup then --steps timed Harness steps; the phase's record."""
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    if phase == 2:  # WarmupCallback flips warmed_up once its count reaches model.warmup
        h.callbacks[0].state["training_steps"] = max(h.callbacks[0].state["training_steps"], int(model.warmup))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, kinds, loss = [], [], None
    for i in range(a.warmup + a.steps):
        x = torch.randn(b, 1, n, device=device) * 0.1  # a fresh batch, as a loader gives
        sync()
        t0 = time.perf_counter()
        loss, _ = h.step(x, i)
        sync()
        if i >= a.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
            dis = bool(model.warmed_up) and i % model.update_discriminator_every == 0
            kinds.append("discriminator" if dis else "generator")
    assert bool(model.warmed_up) == (phase == 2)
    if a.op_table:  # one more step, untimed, under torch.profiler
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])) as prof:
            h.step(torch.randn(b, 1, n, device=device) * 0.1, a.warmup + a.steps)
            sync()
        with open(f"{a.op_table}.phase{phase}.txt", "w") as f:
            f.write(f"RAVE {a.config}, phase {phase}, batch {b} x {n}, {torch.get_num_threads()} thread(s), "
                    f"torch {torch.__version__}: one training step under torch.profiler\n")
            f.write(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))
        print(f"rave_gpu_step: operator table in {a.op_table}.phase{phase}.txt", file=sys.stderr)
    r = {"phase": phase, "status": "ok", **summary(times), "step_ms": times, "kinds": kinds,
         "last_loss": float(loss), "audio_s_per_s": b * n / SR / (statistics.median(times) / 1e3)}
    if phase == 2:
        r.update({k: summary([t for t, kk in zip(times, kinds) if kk == k]) for k in ("generator", "discriminator")})
    if device.type == "cuda":
        r.update(max_memory_allocated=torch.cuda.max_memory_allocated(device),
                 max_memory_reserved=torch.cuda.max_memory_reserved(device),
                 memory_reserved=torch.cuda.memory_reserved(device))
    return r


def run_config(oracle, table, bindings, b, n, prec, crop, phases, device, a):
    rec = {"batch": b, "n_signal": n, "precision": prec, "valid_signal_crop": crop, "phases": []}
    model = h = None
    try:
        torch.manual_seed(0)
        model = oracle.build(a.config, bindings + ([] if crop else ["RAVE.valid_signal_crop = False"]))
        rec["pqmf_matches_scipy_build"] = pqmf_matches(table, model)
        model.to(device)
        rec["receptive_field"] = rf = oracle.prepare(model)  # what Lightning's sanity check leaves
        if model.valid_signal_crop:  # rave.core.valid_signal_crop's slice of the multiband signal
            nb = model.pqmf.n_band
            if len(range(n // nb)[rf[0] // nb:(-rf[1] // nb) if rf[1] else None]) <= 0:
                raise ValueError(f"valid_signal_crop with receptive field {rf} leaves no samples at n_signal {n} "
                                 "(RAVE fails here too); use :nocrop")
        rec["parameters"] = {k: sum(p.numel() for p in getattr(model, k).parameters())
                             for k in ("encoder", "decoder", "discriminator")}
        h = oracle.Harness(model)
        if prec == "bf16":  # Lightning 1.9 precision="bf16": autocast around training_step
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
        rec.update(status="oom", error=str(e)[:400])
    except Exception as e:  # noqa: BLE001 - record and go on to the next config
        rec.update(status="error", error=f"{type(e).__name__}: {e}"[:400])
    del model, h
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rec


def main():
    a = benchlib.options(__doc__, {"device": "cuda", "out": "rave_gpu_step.json", "config": "v2", "threads": 0,
                                   "configs": "", "bind": [], "phase": "both", "steps": 20, "warmup": 5,
                                   "op_table": None, "replace_unused_imports": False})
    if a.threads:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    torch.set_float32_matmul_precision("high")  # as RAVE's scripts/train.py does
    torch.backends.cudnn.benchmark = True
    oracle, replaced, pqmf_source, table = import_rave(a.replace_unused_imports)
    bindings = ["SAMPLING_RATE = 44100"] + a.bind
    env = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "device": str(device), "acids-rave": version("acids-rave"),
           "pytorch-lightning": version("pytorch-lightning"), "numpy": version("numpy"),
           "torchaudio": version("torchaudio"), "replaced_imports": replaced, "pqmf_prototype": pqmf_source,
           "threads": torch.get_num_threads()}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        env.update(device_name=p.name, capability=f"{p.major}.{p.minor}", total_memory=p.total_memory)
    else:
        env["device_name"] = platform.processor() or platform.machine()
    doc = {"benchmark": f"rave_{a.config}_training_step", "config": f"{a.config}.gin", "gin_bindings": bindings,
           "steps": a.steps, "warmup": a.warmup, "env": env, "results": []}
    for b, n, prec, crop in parse_configs(a.configs):
        doc["results"].append(run_config(oracle, table, bindings, b, n, prec, crop,
                                         [1, 2] if a.phase == "both" else [int(a.phase)], device, a))
        if a.out != "-":
            benchlib.emit(doc, a.out, indent=1)  # rewritten after each config: a cut run keeps some
    print_table(doc, sys.stderr if a.out == "-" else sys.stdout)
    if a.out == "-":
        benchlib.emit(doc)


def print_table(doc, file):
    out = functools.partial(print, file=file)
    out(f"{doc['env']['device_name']}  torch {doc['env']['torch']}  cuda {doc['env']['cuda']}")
    out(f"{'config':>16} {'prec':>5} {'ph':>2} {'median ms':>10} {'mean ms':>9} {'peak GiB':>9} {'resv GiB':>9}  status")
    for r in doc["results"]:
        name = f"b{r['batch']}x{r['n_signal']}" + ("" if r["valid_signal_crop"] else ":nocrop")
        if not r["phases"]:
            out(f"{name:>16} {r['precision']:>5} {'-':>2} {'':>41}  {r.get('status')}: {r.get('error', '')[:60]}")
        for p in r["phases"]:
            figures = (f"{p['median_ms']:>10.1f} {p['mean_ms']:>9.1f} {p.get('max_memory_allocated', 0) / 2**30:>9.2f} "
                       f"{p.get('max_memory_reserved', 0) / 2**30:>9.2f}" if p["status"] == "ok" else f"{'':>41}")
            out(f"{name:>16} {r['precision']:>5} {p['phase']:>2} {figures}  {p['status']}")


if __name__ == "__main__":
    main()
