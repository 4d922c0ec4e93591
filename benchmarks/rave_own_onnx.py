"""RAVE's own ONNX export of a full-size v2 holding our model's weights (benchmarks/onnx_bench.sh).

  .venv-rave-cpu/bin/python benchmarks/rave_own_onnx.py --weights DIR/weights --out DIR/rave.onnx

The steps of acids-rave 2.3.1's scripts/export_onnx.py main(), on RAVE's own classes:
  - rave.RAVE built from RAVE's v2.gin as `rave train --config v2` builds it
    (tests/oracle/rave_oracle.py build()), with cached_conv's default (not streaming);
  - the weights: export_onnx.py loads a checkpoint's state_dict; here every parameter comes from
    export_bench --onnx_dir's rt-golden/1 file, by name (our state-dict names are RAVE's), and a
    parameter without a value stops the script;
  - eval(), weight norm removed (nn.utils.remove_weight_norm), every cached_conv Conv1d and
    ConvTranspose1d replaced by torch.nn's with the same padding (its recursive_replace), one
    forward on 2**15 samples;
  - torch.onnx.export(opset_version=12, input_names=["audio_in"], output_names=["audio_out"],
    dynamic audio length, do_constant_folding=False). torch 2.9 and later export with dynamo
    unless told; export_onnx.py was written for the TorchScript-based exporter, asked for here
    (dynamo=False).
export_onnx.py itself does not import on acids-rave 2.3.1 (it imports effortless_config, which
the package does not install); the script reports whether it does.
Prints one JSON object (the file, versions, parameters loaded, export_onnx.py importable).
"""
import importlib.metadata
import importlib.util
import logging
import os
import sys

import torch
import benchlib  # noqa: E402  (beside this file)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))


def export_onnx_importable():
    dist = importlib.metadata.distribution("acids-rave")
    path = os.path.realpath(str(dist.locate_file(os.path.join("scripts", "export_onnx.py"))))
    if not os.path.exists(path):
        return path, "not installed"
    spec = importlib.util.spec_from_file_location("rave_export_onnx", path)
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        return path, "imports"
    except Exception as e:  # noqa: BLE001 - reported, not handled
        return path, f"does not import: {type(e).__name__}: {e}"


def main():
    a = benchlib.options(__doc__, {"weights": ..., "out": ...})  # weights: the rt-golden/1 stem export_bench wrote

    import cached_conv as cc
    import rt_golden
    from rave_gpu_step import import_rave
    oracle, replaced, _, _, _ = import_rave(True)
    export_onnx_path, export_onnx_status = export_onnx_importable()

    torch.set_grad_enabled(False)
    logging.getLogger().setLevel(logging.CRITICAL)   # gin's "Path not found" as it searches for v2.gin
    pretrained = oracle.build("v2", ["SAMPLING_RATE = 44100"])
    logging.getLogger().setLevel(logging.WARNING)
    _, arrays = rt_golden.read(a.weights)
    state = pretrained.state_dict()
    loaded, missing = [], []
    for name, p in pretrained.named_parameters():
        if name in arrays:
            p.copy_(torch.from_numpy(arrays[name]).reshape(p.shape))
            loaded.append(name)
        elif not name.startswith("discriminator."):
            missing.append(name)
    for name in ("latent_pca", "latent_mean", "fidelity"):
        if name in arrays and name in state:
            state[name].copy_(torch.from_numpy(arrays[name]).reshape(state[name].shape))
    if missing:
        raise SystemExit(f"rave_own_onnx: RAVE parameters without a value in {a.weights}: {missing[:10]}")
    pretrained.eval()

    for m in pretrained.modules():
        if hasattr(m, "weight_g"):
            torch.nn.utils.remove_weight_norm(m)

    def replace(model):
        for name, child in model.named_children():
            if isinstance(child, cc.convs.Conv1d):
                conv = torch.nn.Conv1d(child.in_channels, child.out_channels, child.kernel_size, child.stride,
                                       child._pad[0], child.dilation, child.groups, child.bias is not None)
            elif isinstance(child, cc.convs.ConvTranspose1d):
                conv = torch.nn.ConvTranspose1d(child.in_channels, child.out_channels, child.kernel_size,
                                                child.stride, child.padding, child.output_padding, child.groups,
                                                child.bias is not None, child.dilation, child.padding_mode)
            else:
                replace(child)
                continue
            conv.weight.data.copy_(child.weight.data)
            if conv.bias is not None:
                conv.bias.data.copy_(child.bias.data)
            setattr(model, name, conv)

    replace(pretrained)
    x = torch.randn(1, pretrained.n_channels, 2**15)
    pretrained(x)
    torch.onnx.export(pretrained, x, a.out, export_params=True, opset_version=12, input_names=["audio_in"],
                      output_names=["audio_out"], dynamic_axes={"audio_in": {2: "audio_length"}, "audio_out": [0]},
                      do_constant_folding=False, dynamo=False)
    benchlib.emit({"file": a.out, "torch": torch.__version__,
                      "acids-rave": importlib.metadata.version("acids-rave"),
                      "cached_conv": importlib.metadata.version("cached-conv"),
                      "parameters_loaded": len(loaded), "export_onnx_py": export_onnx_path,
                      "export_onnx_py_status": export_onnx_status, "replaced_imports": replaced})


if __name__ == "__main__":
    main()
