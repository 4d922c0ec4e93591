"""RAVE's own streaming export of a random full-size v2 model, made by RAVE's own code.

  .venv-rave-cpu/bin/python benchmarks/rave_own_export.py --out /tmp/rave_own.ts
      [--match OURS.ts | --latent_size N] [--seed 0] [--fidelity 0.95]

What `rave export --run RUN --streaming` (acids-rave 2.3.1, scripts/export.py main()) does, with
a random model in place of the checkpoint:
  - cached_conv.use_cached_conv(True) before anything is built (export.py's
    cc.use_cached_conv(FLAGS.streaming)), so every convolution is cached_conv's streaming one;
  - RAVE's own v2.gin parsed and rave.RAVE built as `rave train --config v2` builds it
    (tests/oracle/rave_oracle.py build(): RAVE.n_channels = 1; SAMPLING_RATE 44100), with
    torch.manual_seed(--seed) for its random initialisation (the speed does not depend on the
    weights' values), then eval();
  - the weight norm removed as export.py removes it (nn.utils.remove_weight_norm on every module
    with a weight_g);
  - export.py's own VariationalScriptedRAVE (imported from the installed module, not copied),
    built with fidelity --fidelity as export.py's default, its encode and decode called once as
    export.py does, then nn_tilde's export_to_ts: torch.jit.script and save.

A trained model's PCA buffers (latent_pca, latent_mean, fidelity: rave/model.py
validation_epoch_end) decide how many latent dimensions the export keeps; a random model has
fidelity 0 everywhere, which would keep one. The fidelity buffer is filled so that the export keeps
--latent_size dimensions, or as many as --match's file keeps (its `latent_size`): our streaming
export of a random model keeps them all. latent_pca stays RAVE's identity and latent_mean zero
(their values do not change the work).

RAVE imports GPUtil, librosa, ... at module level; the stand-ins of rave_gpu_step.py
(--replace-unused-imports) replace those that do not import, as in the other CPU comparisons.
Prints one JSON object: the file, the torch that saved it, the kept latent size, the parameter
count (and --match's).
"""
import importlib.metadata
import importlib.util
import logging
import math
import os
import sys

import torch
import benchlib  # noqa: E402  (beside this file)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def fidelity_for(full, keep, threshold):
    """A monotone fidelity curve (explained variance, cumulated) of `full` entries for which
    export.py's rule, 2**ceil(log2(max(argmax(fidelity > threshold), 1))), gives `keep`."""
    for first in range(full - 1, -1, -1):   # the largest index that gives `keep`
        if 2 ** math.ceil(math.log2(max(first, 1))) == keep:
            f = torch.full((full,), 1.0)
            f[:first] = torch.linspace(0.0, threshold, first + 1)[1:]   # <= threshold before `first`
            return f
    raise SystemExit(f"rave_own_export: no fidelity curve keeps {keep} of {full} latent dimensions "
                     "(export.py keeps a power of two)")


def parameter_count(module):
    return sum(p.numel() for p in module.parameters())


def load_export_module():
    """acids-rave 2.3.1's scripts/export.py as installed (its scripts package), not a copy."""
    dist = importlib.metadata.distribution("acids-rave")
    path = os.path.realpath(str(dist.locate_file(os.path.join("scripts", "export.py"))))
    spec = importlib.util.find_spec("scripts.export")
    if spec is None or os.path.realpath(spec.origin) != path:
        # Another `scripts` package (this repository's, when its root is on sys.path) would shadow it.
        spec = importlib.util.spec_from_file_location("scripts.export", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["scripts.export"] = module
    spec.loader.exec_module(module)
    return module, path, dist.version


def main():
    # --match: a .ts file whose `latent_size` the export keeps (ours); --latent_size: dimensions to keep
    # (default all, or --match's); --fidelity: export.py's (its default).
    a = benchlib.options(__doc__, {"out": ..., "match": None, "latent_size": 0, "seed": 0, "fidelity": 0.95})

    import cached_conv as cc
    cc.use_cached_conv(True)   # export.py main(): before RAVE is built
    from rave_gpu_step import import_rave
    oracle, replaced, pqmf_source, _, _ = import_rave(True)
    logging.basicConfig(level=logging.WARNING)   # before export.py's basicConfig(level=INFO): no progress lines
    export, export_path, rave_version = load_export_module()
    import rave.blocks

    torch.manual_seed(a.seed)
    logging.getLogger().setLevel(logging.CRITICAL)   # gin's "Path not found" as it searches for v2.gin
    pretrained = oracle.build("v2", ["SAMPLING_RATE = 44100"])
    logging.getLogger().setLevel(logging.WARNING)
    pretrained.eval()
    assert isinstance(pretrained.encoder, rave.blocks.VariationalEncoder)   # export.py's script_class

    matched = None
    if a.match:
        ours = torch.jit.load(a.match)
        matched = {"file": a.match, "latent_size": int(ours.latent_size),
                   "full_latent_size": int(ours.full_latent_size), "parameters": parameter_count(ours)}
        del ours
    full = pretrained.latent_size
    keep = a.latent_size or (matched["latent_size"] if matched else full)
    pretrained.fidelity.copy_(fidelity_for(full, keep, a.fidelity))

    for m in pretrained.modules():   # export.py, before scripting
        if hasattr(m, "weight_g"):
            torch.nn.utils.remove_weight_norm(m)

    x = torch.zeros(1, pretrained.n_channels, 2**14)
    scripted_rave = export.VariationalScriptedRAVE(pretrained=pretrained, channels=None, fidelity=a.fidelity,
                                                   target_sr=None, prior=None)
    z = scripted_rave.encode(x)
    scripted_rave.decode(z)
    assert scripted_rave.latent_size == keep, (scripted_rave.latent_size, keep)
    scripted_rave.export_to_ts(a.out)   # nn_tilde.Module: eval(), torch.jit.script, save

    saved = torch.jit.load(a.out)
    rec = {"file": a.out, "torch": torch.__version__, "acids-rave": rave_version,
           "nn-tilde": importlib.metadata.version("nn-tilde"), "export_py": export_path,
           "cached_conv": importlib.metadata.version("cached-conv"), "seed": a.seed,
           "latent_size": int(saved.latent_size), "full_latent_size": int(saved.full_latent_size),
           "parameters": parameter_count(saved),
           "parameter_bytes": sum(p.numel() * p.element_size() for p in saved.parameters()),
           "replaced_imports": replaced, "pqmf_prototype": pqmf_source}
    if matched:
        rec["match"] = matched
    benchlib.emit(rec)


if __name__ == "__main__":
    main()
