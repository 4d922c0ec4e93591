"""The real RAVE's `rave train` (acids-rave 2.3.1: scripts/main_cli.py, scripts/train.py, its
Lightning 1.9 loop), runnable where some of RAVE's declared requirements cannot be installed.

  python benchmarks/rave_train.py [--replace-unused-imports] [--step_times FILE] -- ARGS OF `rave train`

Without options this is exactly `rave train ARGS`. --replace-unused-imports: stand-ins for GPUtil,
librosa, requests and flask, scipy.signal.kaiser put back, the PQMF prototype from
rave_pqmf_prototypes.json where scipy is not 1.10.0 (docs/offline_gpu.md says why); the first line,
`rave_train: ...`, says what was replaced. --step_times FILE adds one Lightning callback: FILE gets
{"step_seconds": [...], "data_seconds": [...]}, from one on_train_batch_start to the next, and from
on_train_batch_end to the next start (the last batch, with no successor, is not counted).
"""
import json
import os
import sys
import time
from importlib.metadata import version

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))


def prepare():
    import pytorch_lightning, torchaudio, gin, cached_conv, einops, numpy as np  # noqa: F401,E401 - before stand-ins
    from rave_gpu_step import pqmf_lookup, replace_unused_imports
    missing = replace_unused_imports(("GPUtil", "librosa", "requests", "flask"))
    notes = ["replaced " + ", ".join(missing)] if missing else []
    import scipy.signal
    import scipy.signal.windows
    if not hasattr(scipy.signal, "kaiser"):
        scipy.signal.kaiser = scipy.signal.windows.kaiser
        notes.append("scipy.signal.kaiser = scipy.signal.windows.kaiser")
    with open(os.path.join(HERE, "rave_pqmf_prototypes.json")) as f:
        table = json.load(f)
    if version("scipy") != table["scipy"]:
        import rave.pqmf
        designed, stored = rave.pqmf.get_prototype, pqmf_lookup(table["prototypes"])

        def get_prototype(atten, M, N=None):
            h = stored(atten, M, N)
            try:
                own = f"differs by {np.max(np.abs(designed(atten, M, N) - h)):.3g}"
            except Exception as e:  # numpy 2 with scipy >= 1.13: kaiserord fails on fmin's array
                own = f"fails here ({type(e).__name__}: {e})"
            print(f"rave_train: PQMF prototype ({atten} dB, {M} bands) from scipy {table['scipy']}'s table; "
                  f"scipy {version('scipy')}'s own design {own}", flush=True)
            return h
        rave.pqmf.get_prototype = get_prototype
        notes.append(f"PQMF prototype from rave_pqmf_prototypes.json (scipy {table['scipy']})")
    return notes


def time_steps(path):
    """Adds the --step_times callback to every pytorch_lightning.Trainer built from now on."""
    import pytorch_lightning as pl

    class StepTimes(pl.Callback):
        def __init__(self):
            self.starts, self.ends = [], []

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.starts.append(time.perf_counter())

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            self.ends.append(time.perf_counter())

        def on_train_end(self, trainer, module):
            s, e = self.starts, self.ends
            benchlib.emit({"step_seconds": [b - a for a, b in zip(s, s[1:])],
                           "data_seconds": [b - a for a, b in zip(e, s[1:])]}, path + ".tmp")
            os.replace(path + ".tmp", path)

    init = pl.Trainer.__init__

    def trainer_init(self, *args, **kwargs):
        init(self, *args, **dict(kwargs, callbacks=[*(kwargs.get("callbacks") or []), StepTimes()]))
    pl.Trainer.__init__ = trainer_init


def main():
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else None  # without "--", every argument but ours is rave train's
    ours = argv[:split] if split is not None else [a for a in argv if a == "--replace-unused-imports"]
    rave_args = argv[split + 1:] if split is not None else [a for a in argv if a != "--replace-unused-imports"]
    if any(a in ("-h", "--help") for a in (ours if split is not None else argv)):
        print(__doc__.strip(), flush=True)  # then, without "--", `rave train --help` below
        if split is not None:
            return 0
    notes = prepare() if "--replace-unused-imports" in ours else []
    if "--step_times" in ours:
        time_steps(ours[ours.index("--step_times") + 1])
    print(f"rave_train: acids-rave {version('acids-rave')}, torch {version('torch')}"
          + (" (" + "; ".join(notes) + ")" if notes else ""), flush=True)
    from scripts.main_cli import main as rave_main  # RAVE's console script: `rave train ...`
    sys.argv = ["rave", "train", *rave_args]
    return rave_main()


if __name__ == "__main__":
    sys.exit(main())
