#!/usr/bin/env python3
"""Loads exported RAVE files with Python's torch.jit.load (Debian's python3-torch) and checks
that encode, decode and forward give what the C++ model gave (python_loading_test.cpp writes
model_<name>.ts and reference_<name>.pt into DIR).

Random draws are compared by seeding: the export draws with torch.randn_like / rand_like in
the same order and shapes as the C++ model, so torch.manual_seed(s) before a call reproduces
the C++ model's draw after torch::manual_seed(s). With noise_scale = 0, encode is the
posterior mean. Exit status 0 when every check holds; each check prints one line.
"""
import pathlib
import sys

import torch

TOLERANCE = 1e-5


def main(folder):
    failures = 0
    models = sorted(pathlib.Path(folder).glob("model_*.ts"))
    if not models:
        print(f"no model_*.ts in {folder}")
        return 1
    for path in models:
        name = path.stem[len("model_"):]
        m = torch.jit.load(str(path))
        ref = torch.jit.load(str(path.with_name(f"reference_{name}.pt")))
        m.eval()
        assert m.get_methods() == ["encode", "decode", "forward"], m.get_methods()
        assert m.encode_params.dtype == torch.int64
        checks = []
        with torch.no_grad():
            torch.manual_seed(5)
            checks.append(("encode (sampled)", m.encode(ref.x), ref.encode_sampled))
            torch.manual_seed(6)
            checks.append(("decode", m.decode(ref.z), ref.decode))
            torch.manual_seed(7)
            checks.append(("forward", m.forward(ref.x), ref.forward_out))
            assert m.set_noise_scale(0.0) == 0
            checks.append(("encode (posterior mean)", m.encode(ref.x), ref.encode_mean))
        for what, got, want in checks:
            diff = (got - want).abs().max().item() if got.shape == want.shape else float("inf")
            ok = diff <= TOLERANCE
            failures += not ok
            print(f"{name}: {what}: shape {tuple(got.shape)}, max |python - C++| = {diff:.3g} "
                  f"{'ok' if ok else 'FAIL'}")
    for path in sorted(pathlib.Path(folder).glob("stream_*.ts")):
        m = torch.jit.load(str(path))
        channels, _, _, ratio = m.encode_params.tolist()
        with torch.no_grad():
            shapes = [tuple(m.forward(torch.zeros(batch, channels, 2048)).shape) for batch in (1, 4)]
        ok = shapes == [(1, channels, 2048), (4, channels, 2048)] and m.streaming
        failures += not ok
        print(f"{path.stem}: streaming forward on 2048-sample blocks -> {shapes} {'ok' if ok else 'FAIL'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
