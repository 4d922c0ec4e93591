#!/usr/bin/python3
"""Golden tensors for tests/models/golden_test.cpp, from this folder's Python S5 reference.
(RAVE's golden tensors come from the real RAVE: rave_oracle.py.)

  make_golden.py [--out tests/assets/golden]

Run once with Debian's /usr/bin/python3 (apt-get install python3-torch python3-scipy); its output is
committed. It writes <name>.json (manifest) and <name>.bin (the tensors, raw little-endian
float32) through rt_golden.py, in the format tests/assets/README.md describes:

  s5_tiny       the s5_maze decoder (s5_maze.py) around one S5 block: 6 units → d_model 8
                (state 8) → 2 outputs, batch 2 × 16 bins, dropout 0, MSE to a stored target.

Weights come from the reference's own initialisation under torch.manual_seed(SEED) and are
stored rounded to float32, by the native parameter names (which the reference shares).

The losses, outputs and gradients are computed in float64 from exactly the stored float32
values (model.double()), so they are the true values of the function a float32 model computes,
up to the final rounding to float32. The same step in float32 is also run, and its largest
deviations from the float64 values are recorded as "float32_vs_float64": the size of the
rounding error a correct float32 implementation shows, against which the test's tolerances are
chosen.
"""
import json
import sys

import torch
import torch.nn.functional as F

import rt_golden
import s5_maze

SEED = 7
FORMAT = rt_golden.FORMAT
GENERATED_BY = "tests/oracle/make_golden.py"


def trainable(model):
    return {k: p for k, p in model.named_parameters() if p.requires_grad}


def deviation(losses32, losses64, model32, model64):
    """Largest float32-vs-float64 differences: relative per loss, and per gradient tensor
    relative to that tensor's largest magnitude."""
    loss_rel = max(abs(float(losses32[k]) - float(losses64[k])) / abs(float(losses64[k]))
                   for k in losses64)
    g32, g64 = trainable(model32), trainable(model64)
    grad_rel = max(float((g32[k].grad.double() - g64[k].grad).abs().max()
                         / g64[k].grad.abs().max()) for k in g64)
    return {"loss_max_rel": loss_rel, "grad_max_rel_to_tensor_max": grad_rel}


def write_step(out, stem, model, build, step, inputs, output, manifest):
    """Runs `step(model, *inputs)` on the float32 `model` and on a float64 copy of its weights,
    and writes <stem>.{json,bin}: the inputs, the weights, the float64 `output`, losses and
    gradients, and `manifest`'s model-specific keys. `step` back-propagates its loss and returns
    (losses, output). Returns (bytes written, manifest)."""
    model64 = build()
    model64.load_state_dict(model.state_dict())
    model64.double().train()
    losses32, _ = step(model, *inputs.values())
    losses64, out64 = step(model64, *(t.double() for t in inputs.values()))

    w = rt_golden.Writer()
    for k, t in inputs.items():
        w.add("input:" + k, t)
    for k, p in trainable(model).items():
        w.add("weight:" + k, p)
    w.add("output:" + output, out64)
    for k, p in trainable(model64).items():
        w.add("grad:" + k, p.grad)
    manifest = dict({"format": FORMAT, "model": manifest.pop("model"), "generated_by": GENERATED_BY,
                     "torch": torch.__version__, "seed": SEED}, **manifest)
    manifest["losses"] = {k: float(v) for k, v in losses64.items()}
    manifest["derived"] = sorted(k for k, p in model.named_parameters() if not p.requires_grad)
    manifest["float32_vs_float64"] = deviation(losses32, losses64, model, model64)
    written = w.save(out, stem, manifest)
    return len(w.blob), written


def step_s5(model, x, target):
    pred = model(x)
    loss = F.mse_loss(pred, target)
    loss.backward()
    return {"loss": loss}, pred


def make_s5(out):
    options = {"variant": "s5_maze", "input_dim": 6, "output_dim": 2, "d_model": 8, "state_dim": 8,
               "n_layers": 1, "dropout": 0.0}
    batch, bins = 2, 16

    def build():
        return s5_maze.S5Decoder(options["input_dim"], options["d_model"], options["state_dim"],
                                 options["output_dim"], options["n_layers"], options["dropout"])

    torch.manual_seed(SEED)
    model = build()
    model.train()
    x = torch.rand(batch, bins, options["input_dim"]) * 0.5
    target = torch.randn(batch, bins, options["output_dim"])
    return write_step(out, "s5_tiny", model, build, step_s5, {"x": x, "target": target}, "pred",
                      {"model": "s5", "options": options, "loss": "loss"})


def main():
    a = rt_golden.golden_args(__doc__)
    torch.set_num_threads(1)
    for make in (make_s5,):
        size, m = make(a.out)
        print(json.dumps({"model": m["model"], "bin_bytes": size, "tensors": len(m["tensors"]),
                          "losses": m["losses"], "float32_vs_float64": m["float32_vs_float64"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
