"""Format rt-golden/1 in Python: named tensors as <stem>.json (manifest) + <stem>.bin (values).

The spec is tests/assets/README.md ("Format rt-golden/1"); the C++ side is
util/tensor_manifest.h. Writers: tests/oracle/rave_oracle.py and
tests/oracle/make_golden.py (the committed goldens). Readers: s5_maze.py --check
(ssm_step_bench --export's file).

  import rt_golden                      (tests/oracle/ on sys.path)
  w = rt_golden.Writer(); w.add("input:x", tensor); w.save(out_dir, "name", {...})
  manifest, arrays = rt_golden.read("dir/name")

The writer needs torch (it takes tensors); the reader only numpy.
"""
import json
import os
import sys

import numpy as np

FORMAT = "rt-golden/1"
# Stored dtype -> numpy type of the values in <stem>.bin (little-endian).
DTYPES = {"float32": "<f4", "float64": "<f8", "pcm16": "<i2"}


class Writer:
    """Named tensors into one raw blob and its manifest entries (float32 unless told)."""

    def __init__(self):
        self.blob = bytearray()
        self.entries = []

    def add(self, name, t, dtype="float32"):
        import torch

        t = t.detach().cpu().contiguous()
        if dtype == "float32":
            a = t.to(torch.float32).numpy().astype("<f4")
        elif dtype == "float64":
            a = t.to(torch.float64).numpy().astype("<f8")
        elif dtype == "pcm16":
            q = torch.round(t.to(torch.float64) * 32768.0)
            assert torch.equal(q / 32768.0, t.to(torch.float64)), f"{name}: not 16-bit PCM values"
            a = q.numpy().astype("<i2")
        else:
            raise ValueError(dtype)
        e = {"name": name, "shape": list(t.shape), "offset": len(self.blob)}
        if dtype != "float32":
            e["dtype"] = dtype
        self.entries.append(e)
        self.blob += a.tobytes()

    def save(self, out, stem, manifest):
        """Writes <out>/<stem>.bin and <out>/<stem>.json: `manifest`'s keys (in their order,
        "format" first when it has it) and the tensors, one line each. Returns the manifest as
        written (with "tensors")."""
        manifest = dict(manifest, tensors=self.entries)
        with open(os.path.join(out, stem + ".bin"), "wb") as f:
            f.write(bytes(self.blob))
        head = json.dumps({k: v for k, v in manifest.items() if k != "tensors"}, indent=1)
        rows = ",\n".join("  " + json.dumps(e) for e in self.entries)  # one line per tensor
        with open(os.path.join(out, stem + ".json"), "w") as f:
            f.write(head[:-2] + ',\n "tensors": [\n' + rows + "\n ]\n}\n")
        return manifest


def golden_args(doc, *extra):
    """The command line of a golden writer: --out (default tests/assets/golden), then `extra`
    as (flags, keyword arguments) pairs for argparse; the output folder is made."""
    import argparse
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(root, "tests", "assets", "golden"))
    for flags, kwargs in extra:
        ap.add_argument(*flags, **kwargs)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    return a


def read(stem):
    """Reads <stem>.json and <stem>.bin: (manifest, {name: numpy array}), the arrays in their
    stored dtype except pcm16, which comes as float32 value / 32768. Exits naming the file
    unless every byte of the .bin belongs to exactly one tensor, in manifest order."""
    json_path, bin_path = stem + ".json", stem + ".bin"
    with open(json_path) as f:
        manifest = json.load(f)
    if manifest.get("format") != FORMAT:
        sys.exit(f"{json_path}: not format {FORMAT}")
    raw = np.fromfile(bin_path, dtype=np.uint8)
    arrays, offset = {}, 0
    for e in manifest["tensors"]:
        name, shape, dtype = e["name"], e["shape"], e.get("dtype", "float32")
        if dtype not in DTYPES:
            sys.exit(f"{json_path}: tensor '{name}' has dtype '{dtype}' (accepted: {', '.join(DTYPES)})")
        if name in arrays:
            sys.exit(f"{json_path}: tensor '{name}' is listed twice")
        width = np.dtype(DTYPES[dtype]).itemsize
        size = int(np.prod(shape, dtype=np.int64)) * width
        if e["offset"] != offset or offset + size > raw.size:
            sys.exit(f"{bin_path}: tensor '{name}' at offset {e['offset']} ({size} bytes), expected {offset}")
        a = raw[offset: offset + size].view(DTYPES[dtype]).reshape(shape).copy()
        arrays[name] = a.astype(np.float32) / np.float32(32768.0) if dtype == "pcm16" else a
        offset += size
    if offset != raw.size:
        sys.exit(f"{bin_path}: {raw.size - offset} bytes after its last tensor")
    return manifest, arrays
