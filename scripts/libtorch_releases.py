#!/usr/bin/env python3
"""Writes export/checks/releases/libtorch_releases.inc: for every LibTorch release on PyPI (1.4 onwards, the
newest patch of each minor version), the newest TorchScript file format version its reader accepts
(torch/include/caffe2/serialize/versions.h) and the aten operators it has, all read from the
release's own wheel. The operators are the native functions of
torch/include/ATen/RegistrationDeclarations.h and the schemas registered as string literals in
the wheel's libtorch_cpu (TorchScript's own aten operators, aten::dim or aten::len, which are
native functions only in some releases). Checked against torch 1.13's
torch._C._jit_get_all_schemas(): the two together hold every aten schema but the 8 RPC ones
libtorch_python registers.

`export --target_libtorch X.Y` and `export --inspect` check a TorchScript file against this
table (docs/export.md). Run once per new torch release; it needs network access to PyPI and
reads only the zip directory, the two headers and the library of each release's smallest wheel
(HTTP range requests).

  python3 scripts/libtorch_releases.py [--out export/checks/releases/libtorch_releases.inc]
"""
import argparse
import re
import sys
import urllib.request
import zipfile
from collections import defaultdict
from pathlib import Path

INDEX = "https://pypi.org/simple/torch/"
FIRST = (1, 4)


class RangeFile:
    """A read-only, seekable file over HTTP range requests: what zipfile needs."""

    def __init__(self, url):
        self.url, self.pos = url, 0
        head = urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=120)
        self.size = int(head.headers["Content-Length"])

    def seekable(self):
        return True

    def seek(self, offset, whence=0):
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def tell(self):
        return self.pos

    def read(self, n=-1):
        if n is None or n < 0:
            n = self.size - self.pos
        if n == 0 or self.pos >= self.size:
            return b""
        end = min(self.size, self.pos + n) - 1
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end}"})
        data = urllib.request.urlopen(req, timeout=120).read()
        self.pos += len(data)
        return data


def releases():
    """(major, minor) -> (patch, wheel url) of the newest patch, one wheel of it."""
    page = urllib.request.urlopen(INDEX, timeout=120).read().decode()
    found = defaultdict(list)
    for url, name in re.findall(r'href="([^"]+)"[^>]*>([^<]+)<', page):
        m = re.match(r"torch-(\d+)\.(\d+)\.(\d+)(?:-\d+)?-.*\.whl$", name)
        if m and (int(m[1]), int(m[2])) >= FIRST:
            found[(int(m[1]), int(m[2]))].append((int(m[3]), name, url.split("#")[0]))
    out = {}
    for key, wheels in found.items():
        patch = max(w[0] for w in wheels)
        newest = [w for w in wheels if w[0] == patch]
        # macOS wheels are the smallest (no CUDA); the smallest of them.
        mac = [w for w in newest if "macosx" in w[1]] or newest
        out[key] = (patch, min((RangeFile(w[2]).size, w[2]) for w in mac)[1])
    return dict(sorted(out.items()))


def constants(header):
    """versions.h's constexpr values, its #if/#else on #define'd booleans resolved."""
    defines, stack, values = {}, [], {}
    for line in header.splitlines():
        s = line.strip()
        if m := re.match(r"#define (\w+) (true|false|1|0)\b", s):
            defines[m[1]] = m[2] in ("true", "1")
        elif m := re.match(r"#if (\w+)$", s):
            stack.append(defines.get(m[1], False))
        elif s.startswith("#if"):  # include guards and the like: their body is the header
            stack.append(True)
        elif s.startswith("#else"):
            stack[-1] = not stack[-1]
        elif s.startswith("#endif"):
            stack.pop()
        elif (m := re.match(r"(?:static )?constexpr uint64_t (k\w+) = (0x[0-9A-Fa-f]+)L;", s)) and all(stack):
            values[m[1]] = int(m[2], 16)
    return values


def operators(header):
    """Every "aten::name.overload" schema in RegistrationDeclarations.h."""
    return set(re.findall(r'(?:"schema": "|; // )(aten::[\w.]+)\(', header))  # 1.4 has no JSON


def registered(library):
    """Every "aten::name.overload(" string literal in the library: schemas registered by string."""
    return set(m.decode() for m in re.findall(rb"(aten::[A-Za-z_]\w*(?:\.\w+)?)\(", library))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "export/checks/releases/libtorch_releases.inc"))
    args = ap.parse_args()
    rows, ops, natives = [], [], []
    for (major, minor), (patch, url) in releases().items():
        z = zipfile.ZipFile(RangeFile(url))
        names = z.namelist()
        find = lambda suffix, prefix="": next((n for n in names if n.endswith(suffix) and n.startswith(prefix)), None)
        # The constants are in versions.h from 1.6 on, in inline_container.h before.
        v = constants(z.read(find("caffe2/serialize/versions.h") or find("caffe2/serialize/inline_container.h")).decode())
        # torchgen's template of the same name is not the list.
        native = operators(z.read(find("/RegistrationDeclarations.h", "torch/include/")).decode())
        lib = next(n for suffix in ("libtorch_cpu.dylib", "libtorch_cpu.so", "libtorch.dylib", "libtorch.so")
                   for n in names if n.startswith("torch/lib/") and n.endswith(suffix))
        o = native | registered(z.read(lib))
        # The version a file records is not kProducedFileFormatVersion but the lowest that keeps
        # its meaning (3, raised by the operators it calls: aten::div 4, aten::gelu's approximate
        # 10); the reader's bound decides whether a release loads it.
        rows.append((major, minor, patch, v["kMaxSupportedFileFormatVersion"]))
        ops.append(o)
        natives.append(native)
        print(f"{major}.{minor}.{patch}: reads file format <= {v['kMaxSupportedFileFormatVersion']}, "
              f"{len(o)} aten operators ({len(native)} native)", file=sys.stderr)
    assert len(rows) <= 64, "one bit per release in a 64-bit mask"
    masks, native_masks = defaultdict(int), defaultdict(int)
    for i, (o, native) in enumerate(zip(ops, natives)):
        for name in o:
            masks[name] |= 1 << i
        for name in native:
            native_masks[name] |= 1 << i
    with open(args.out, "w") as f:
        f.write("// Generated by scripts/libtorch_releases.py from each release's wheel on PyPI:\n"
                "// torch/include/caffe2/serialize/versions.h, torch/include/ATen/RegistrationDeclarations.h\n"
                "// and the aten schemas registered by name in its libtorch_cpu.\n"
                "// Do not edit; rerun the script for a new release.\n"
                "// RT_LIBTORCH_RELEASE(major, minor, patch, newest file format version its reader accepts)\n")
        for r in rows:
            f.write("RT_LIBTORCH_RELEASE(%d, %d, %d, %d)\n" % r)
        f.write("// RT_LIBTORCH_OP(\"aten::name.overload\", releases that have it, releases where it is a\n"
                "// native function (RegistrationDeclarations.h)): bit i = the i-th release above\n")
        for name in sorted(masks):
            f.write('RT_LIBTORCH_OP("%s", 0x%xULL, 0x%xULL)\n' % (name, masks[name], native_masks[name]))
    print(f"wrote {args.out}: {len(rows)} releases, {len(masks)} operators", file=sys.stderr)


if __name__ == "__main__":
    main()
