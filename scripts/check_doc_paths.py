#!/usr/bin/env python3
"""Checks that the repository paths our docs and comments name exist.

Reads every tracked file (git ls-files) that is documentation (.md) or source with comments
(.h, .cpp, .py, .sh, .cmake, CMakeLists.txt, .toml): all of a .md file, only the comments of the
others (after // in C++, after # in the rest). A path is a token that starts with one of the
repository's top-level folders and ends in a file extension or a slash ("models/ssm/s5.h",
"docs/perf/"); braces expand ("fused_ops.{h,cpp}") and globs must match something. A path may
also be relative to the file's own folder or one above it (tests/export/ names
"export/export_fixtures.h").

Not checked, as they name no file of this tree: paths on a line (or the line after one) that
speaks of another project (RAVE, foundational_ssm, PyTorch, TensorBoard, ...: their own trees
share our folder names), a path followed by "at <commit>" (a file as it stood in history),
placeholders (a component in capitals, such as NAME or DIR) and build products (.a, .so, .o).

Exit 0 when every path exists; otherwise each one missing is printed as file:line: path, exit 1.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

DOC_SUFFIXES = (".md",)
HASH_COMMENT = (".py", ".sh", ".cmake", ".toml", "CMakeLists.txt")
SLASH_COMMENT = (".h", ".cpp")
OTHER_PROJECT = re.compile(
    r"RAVE|acids|rave/|udls|foundational_ssm|fSSM|nn_tilde|nn~|\btorch\b|PyTorch|pytorch|TensorBoard's|"
    r"tensorflow|Kineto|kineto|Lightning|upstream|its own|their own")
AT_COMMIT = re.compile(r"\s+at\s+[0-9a-f]{7,40}\b")
PLACEHOLDER = re.compile(r"(^|/)[A-Z][A-Z_]+(/|\.|$)")
BUILD_PRODUCT = re.compile(r"\.(a|so|o)$")


def expand(token):
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    return [x for alt in m.group(1).split(",") for x in expand(token[:m.start()] + alt + token[m.end():])]


def comment_text(path, line):
    if path.endswith(DOC_SUFFIXES):
        return line
    if path.endswith(SLASH_COMMENT):
        i = line.find("//")
        if i >= 0:
            return line[i + 2:]
        s = line.lstrip()
        return s if s.startswith(("*", "/*")) else ""
    if path.endswith(HASH_COMMENT):
        i = line.find("#")
        return line[i + 1:] if i >= 0 else ""
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                    help="the repository (default: this script's)")
    a = ap.parse_args()
    root = os.path.abspath(a.source)
    listed = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True)
    if listed.returncode != 0:
        print(f"check_doc_paths: git ls-files failed in {root}: {listed.stderr.strip()}", file=sys.stderr)
        return 2
    files = listed.stdout.split()
    tops = sorted({f.split("/")[0] for f in files if "/" in f})
    folders = "|".join(map(re.escape, tops))
    path_re = re.compile(r"(?<![\w./~$-])((?:%s)/[\w./*{},+-]*\.[a-z]{1,5}\b|(?:%s)/[\w/*{},+-]*/(?=[\s`)'\".,;:]|$))"
                         % (folders, folders))
    missing = []
    for f in files:
        if not f.endswith(DOC_SUFFIXES + HASH_COMMENT + SLASH_COMMENT):
            continue
        try:
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        bases = [root]
        d = os.path.dirname(f)
        while d:
            bases.append(os.path.join(root, d))
            d = os.path.dirname(d)
        for n, line in enumerate(lines, 1):
            text = comment_text(f, line)
            if not text:
                continue
            context = (lines[n - 2] if n > 1 else "") + " " + line
            for m in path_re.finditer(text):
                token = m.group(1).rstrip(".,:;")
                if (OTHER_PROJECT.search(context) or AT_COMMIT.match(text, m.end()) or PLACEHOLDER.search(token)
                        or BUILD_PRODUCT.search(token)):
                    continue
                if not all(any(glob.glob(os.path.join(b, e)) for b in bases) for e in expand(token)):
                    missing.append(f"{f}:{n}: {token}")
    for line in missing:
        print(line)
    if missing:
        print(f"check_doc_paths: {len(missing)} path(s) named in docs or comments do not exist", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
