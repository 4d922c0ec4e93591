"""The real RAVE's `rave train` (acids-rave 2.3.1: scripts/main_cli.py, then scripts/train.py and
its Lightning 1.9 loop), runnable where some of RAVE's declared requirements cannot be installed.

  python benchmarks/rave_train.py [--replace-unused-imports] [--step_times FILE] -- ARGS OF `rave train`

Where every requirement imports (the oracle venv, tests/oracle/run.sh's .venv-rave), this is
exactly `rave train ARGS`. With --replace-unused-imports, for a Python 3.12 machine such as a
GPU node's (torch 2.11, a scipy newer than RAVE's pinned 1.10, no network):

- GPUtil, librosa, requests and flask, when they do not import, are replaced by modules whose
  functions raise when called. `rave train --gpu N` never asks GPUtil; librosa serves the mel
  encoder (hybrid) and the pitch augmentations; requests and flask serve the remote dataset.
  Anything else missing fails as it would in `rave train`: lmdb, udls and protobuf read the
  database; scipy's lfilter is the phase mangle; scikit-learn's PCA is validation_epoch_end's.
- scipy >= 1.13 no longer exports `scipy.signal.kaiser`, which rave/pqmf.py imports; it is
  `scipy.signal.windows.kaiser` (the same function, moved in scipy 1.1), put back under the old name.
- The PQMF prototype is designed by scipy.optimize.fmin, whose result depends on scipy's version.
  With a scipy other than 1.10.0, rave.pqmf.get_prototype answers from rave_pqmf_prototypes.json
  (computed with scipy 1.10.0: rave_gpu_step.py), and the largest difference from this scipy's
  own design (which fails with numpy 2 and scipy 1.18) is printed.

What was replaced is printed on the first line, prefixed `rave_train:`.

--step_times FILE adds one Lightning callback to the Trainer that `rave train` builds, and
changes nothing else: the wall time of every training batch, from one on_train_batch_start to
the next (so the wait for the next batch from RAVE's DataLoader is included, as in the native
timing profile's total_batch_time), and the part of it spent waiting (on_train_batch_end to the
next on_train_batch_start). FILE gets {"step_seconds": [...], "data_seconds": [...]} when
training ends; the last batch, which has no successor, is not counted.
"""
import json
import os
import sys
from importlib.metadata import version

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPLACEABLE = ("GPUtil", "librosa", "requests", "flask")


def prepare(replace):
    notes = []
    # RAVE's real dependencies first, so that their optional-import probes see no stand-ins.
    import pytorch_lightning, torchaudio, gin, cached_conv, einops, numpy  # noqa: F401,E401
    if not replace:
        return notes
    sys.path.insert(0, HERE)
    from rave_gpu_step import replace_unused_imports
    missing = replace_unused_imports(REPLACEABLE)
    if missing:
        notes.append("replaced " + ", ".join(missing))
    import scipy.signal
    import scipy.signal.windows
    if not hasattr(scipy.signal, "kaiser"):
        scipy.signal.kaiser = scipy.signal.windows.kaiser
        notes.append("scipy.signal.kaiser = scipy.signal.windows.kaiser")
    with open(os.path.join(HERE, "rave_pqmf_prototypes.json")) as f:
        table = json.load(f)
    if version("scipy") != table["scipy"]:
        import numpy as np
        import rave.pqmf
        from rave_gpu_step import pqmf_lookup
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
    import time
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
            doc = {"step_seconds": [b - a for a, b in zip(s, s[1:])],
                   "data_seconds": [b - a for a, b in zip(e, s[1:])]}
            benchlib.emit(doc, path + ".tmp")
            os.replace(path + ".tmp", path)

    init = pl.Trainer.__init__

    def trainer_init(self, *args, **kwargs):
        kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), StepTimes()]
        init(self, *args, **kwargs)
    pl.Trainer.__init__ = trainer_init


def main():
    argv = sys.argv[1:]
    ours = argv[:argv.index("--")] if "--" in argv else []
    rave_args = argv[argv.index("--") + 1:] if "--" in argv else [a for a in argv if a != "--replace-unused-imports"]
    replace = "--replace-unused-imports" in (ours if "--" in argv else argv)
    notes = prepare(replace)
    if "--step_times" in ours:
        time_steps(ours[ours.index("--step_times") + 1])
    print("rave_train: acids-rave " + version("acids-rave") + ", torch " + version("torch")
          + (" (" + "; ".join(notes) + ")" if notes else ""), flush=True)
    # RAVE's console script: `rave train ...` is scripts.main_cli.main with that argv.
    from scripts.main_cli import main as rave_main
    sys.argv = ["rave", "train", *rave_args]
    return rave_main()


if __name__ == "__main__":
    sys.exit(main())
