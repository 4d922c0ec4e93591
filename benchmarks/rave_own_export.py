"""RAVE's own export of a full-size v2, made by RAVE's own code (acids-rave 2.3.1).

  .venv-rave-cpu/bin/python benchmarks/rave_own_export.py --out RAVE.ts [--match OURS.ts | --latent_size N]
  .venv-rave-cpu/bin/python benchmarks/rave_own_onnx.py --weights DIR/weights --out DIR/rave.onnx

TorchScript: `rave export --streaming` (scripts/export.py) on a random model, its fidelity buffer
filled to keep --latent_size dimensions (or as many as --match's file keeps). ONNX (--weights):
scripts/export_onnx.py's steps on the weights export_bench --onnx_dir wrote. sections.toml's
[export.text] and [onnx.text] "models" say each step. Stand-ins for RAVE's unused imports as in
rave_gpu_step.py. Prints one JSON object.
"""
import importlib.metadata as md
import importlib.util
import logging
import math
import os
import sys

import torch

import benchlib
from rave_gpu_step import import_rave


def fidelity_for(full, keep, threshold):
    """A monotone fidelity curve of `full` entries for which export.py's rule,
    2**ceil(log2(max(argmax(fidelity > threshold), 1))), gives `keep`."""
    for first in range(full - 1, -1, -1):  # the largest index that gives `keep`
        if 2 ** math.ceil(math.log2(max(first, 1))) == keep:
            f = torch.full((full,), 1.0)
            f[:first] = torch.linspace(0.0, threshold, first + 1)[1:]  # <= threshold before `first`
            return f
    raise SystemExit(f"rave_own_export: no fidelity curve keeps {keep} of {full} latent dimensions")


def installed_script(name):
    """acids-rave's scripts/NAME as installed: its path, and it loaded as module scripts.NAME (or the
    error that stopped it)."""
    path = os.path.realpath(str(md.distribution("acids-rave").locate_file(os.path.join("scripts", name))))
    spec = importlib.util.find_spec("scripts." + name[:-3])
    if spec is None or os.path.realpath(spec.origin) != path:  # this repository's scripts/ shadows it
        spec = importlib.util.spec_from_file_location("scripts." + name[:-3], path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        return path, module
    except Exception as e:  # noqa: BLE001 - export_onnx.py's is reported, not handled
        return path, f"does not import: {type(e).__name__}: {e}" if os.path.exists(path) else "not installed"


def parameters(module):
    return sum(p.numel() for p in module.parameters())


def remove_weight_norm(model):
    for m in model.modules():  # both scripts, before exporting
        if hasattr(m, "weight_g"):
            torch.nn.utils.remove_weight_norm(m)


def torchscript(a, export, pretrained):
    matched = None
    if a.match:
        ours = torch.jit.load(a.match)
        matched = {"file": a.match, "latent_size": int(ours.latent_size),
                   "full_latent_size": int(ours.full_latent_size), "parameters": parameters(ours)}
    full = pretrained.latent_size
    keep = a.latent_size or (matched["latent_size"] if matched else full)
    pretrained.fidelity.copy_(fidelity_for(full, keep, a.fidelity))
    remove_weight_norm(pretrained)
    scripted = export.VariationalScriptedRAVE(pretrained=pretrained, channels=None, fidelity=a.fidelity,
                                              target_sr=None, prior=None)
    scripted.decode(scripted.encode(torch.zeros(1, pretrained.n_channels, 2**14)))
    assert scripted.latent_size == keep, (scripted.latent_size, keep)
    scripted.export_to_ts(a.out)  # nn_tilde.Module: eval(), torch.jit.script, save
    saved = torch.jit.load(a.out)
    rec = {"nn-tilde": md.version("nn-tilde"), "seed": a.seed, "latent_size": int(saved.latent_size),
           "full_latent_size": int(saved.full_latent_size), "parameters": parameters(saved),
           "parameter_bytes": sum(p.numel() * p.element_size() for p in saved.parameters())}
    return dict(rec, match=matched) if matched else rec


def onnx(a, cc, pretrained):
    import rt_golden  # tests/oracle/, on sys.path through import_rave
    _, arrays = rt_golden.read(a.weights)
    state = pretrained.state_dict()
    loaded = [name for name, p in pretrained.named_parameters() if name in arrays]
    missing = [name for name, _ in pretrained.named_parameters()
               if name not in arrays and not name.startswith("discriminator.")]
    if missing:
        raise SystemExit(f"rave_own_onnx: RAVE parameters without a value in {a.weights}: {missing[:10]}")
    for name in loaded + [n for n in ("latent_pca", "latent_mean", "fidelity") if n in arrays and n in state]:
        state[name].copy_(torch.from_numpy(arrays[name]).reshape(state[name].shape))
    pretrained.eval()
    remove_weight_norm(pretrained)

    def replace(model):  # export_onnx.py's recursive_replace
        for name, c in model.named_children():
            if isinstance(c, cc.convs.Conv1d):
                conv = torch.nn.Conv1d(c.in_channels, c.out_channels, c.kernel_size, c.stride, c._pad[0],
                                       c.dilation, c.groups, c.bias is not None)
            elif isinstance(c, cc.convs.ConvTranspose1d):
                conv = torch.nn.ConvTranspose1d(c.in_channels, c.out_channels, c.kernel_size, c.stride, c.padding,
                                                c.output_padding, c.groups, c.bias is not None, c.dilation,
                                                c.padding_mode)
            else:
                replace(c)
                continue
            conv.weight.data.copy_(c.weight.data)
            if conv.bias is not None:
                conv.bias.data.copy_(c.bias.data)
            setattr(model, name, conv)
    replace(pretrained)
    x = torch.randn(1, pretrained.n_channels, 2**15)
    pretrained(x)
    torch.onnx.export(pretrained, x, a.out, export_params=True, opset_version=12, input_names=["audio_in"],
                      output_names=["audio_out"], dynamic_axes={"audio_in": {2: "audio_length"}, "audio_out": [0]},
                      do_constant_folding=False, dynamo=False)
    return {"parameters_loaded": len(loaded)}


def main():
    # --match: a .ts whose latent_size the export keeps; --latent_size: dimensions to keep (default all,
    # or --match's); --fidelity: export.py's default; --weights: the rt-golden/1 stem (ONNX).
    a = benchlib.options(__doc__, {"out": ..., "match": None, "latent_size": 0, "seed": 0, "fidelity": 0.95,
                                   "weights": None})
    import cached_conv as cc
    cc.use_cached_conv(not a.weights)  # export.py main(): before RAVE is built
    oracle, replaced, pqmf_source, _ = import_rave(True)
    if not a.weights:
        logging.basicConfig(level=logging.WARNING)  # before export.py's basicConfig(level=INFO): no progress
    script, export = installed_script("export_onnx.py" if a.weights else "export.py")
    if not a.weights and isinstance(export, str):
        raise SystemExit(f"rave_own_export: {script} {export}")
    import rave.blocks
    torch.manual_seed(a.seed)
    torch.set_grad_enabled(not a.weights)
    logging.getLogger().setLevel(logging.CRITICAL)  # gin's "Path not found" as it searches for v2.gin
    pretrained = oracle.build("v2", ["SAMPLING_RATE = 44100"])
    logging.getLogger().setLevel(logging.WARNING)
    if not a.weights:
        pretrained.eval()
        assert isinstance(pretrained.encoder, rave.blocks.VariationalEncoder)  # export.py's script_class
    rec = {"file": a.out, "torch": torch.__version__, "acids-rave": md.version("acids-rave"),
           "cached_conv": md.version("cached-conv"), "replaced_imports": replaced}
    if a.weights:
        rec.update(onnx(a, cc, pretrained), export_onnx_py=script,
                   export_onnx_py_status=export if isinstance(export, str) else "imports")
    else:
        rec.update(torchscript(a, export, pretrained), export_py=script, pqmf_prototype=pqmf_source)
    benchlib.emit(rec)


if __name__ == "__main__":
    main()
