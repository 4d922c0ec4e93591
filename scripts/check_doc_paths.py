#!/usr/bin/env python3
"""Checks that the repository paths our docs, comments and benchmark results name exist, and that
no doc names a commit as "at <commit>" outside BENCHMARKS.md's provenance.

Reads every tracked file (git ls-files) that is documentation (.md, BENCHMARKS.md included) or
source with comments (.h, .cpp, .py, .sh, .cmake, CMakeLists.txt, .toml): all of a .md file, only
the comments of the others (after // in C++, after # in the rest); and every string of the tracked
JSON files under benchmarks/ (the results BENCHMARKS.md is rendered from: their commands, texts
and tables; rave_pqmf_prototypes.json). A path is a token that starts with one of the repository's
top-level folders and ends in a file extension or a slash ("models/ssm/s5.h", "docs/perf/");
braces expand ("fused_ops.{h,cpp}") and globs must match something. A path may also be relative
to the file's own folder or one above it (tests/export/ names "export/export_fixtures.h").

Not checked, as they name no file of this tree: paths in a passage that speaks of another project
(RAVE, foundational_ssm, PyTorch, TensorBoard, ...: their own trees share our folder names), the
passage being the line and the one before it, or in BENCHMARKS.md and a JSON string (a paragraph
to a line) the sentence; placeholders (a component in capitals, such as NAME
or DIR) and build products (.a, .so, .o).

Commits: a .md file may not say "at <commit>" ("at 8860fec", "At commit 17b7ef4": "at" and 7 to
40 hex digits, at least one of them a letter, so that "at 1000000 steps" is no commit): docs say
what holds now, and history stays in git. The one place for a commit is BENCHMARKS.md's
provenance, the form render.py and benchlib.py write: the commit right after the date a figure
was measured or the command that measured it ("Measured 2026-12-06 by `bench.py --only rave` at
e2b5830-dirty", "measured 2026-11-28 at 80c6270-dirty"), or after the address of another
project's repository the figures compare against ("github.com/OWNER/NAME at <commit>").

Exit 0 when every path exists and no commit is misplaced; otherwise each finding is printed as
file:line: what, exit 1.
"""
import argparse
import glob
import json
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
AT_COMMIT = re.compile(r"\b[Aa]t (?:commit )?(?=[0-9]*[a-f])[0-9a-f]{7,40}\b")
PROVENANCE_DOC = "BENCHMARKS.md"
PROVENANCE = re.compile(r"(?:\d{4}-\d{2}-\d{2}|`|github\.com/[\w.-]+/[\w.-]+) at (?=[0-9]*[a-f])[0-9a-f]{7,40}\b")
RESULTS_JSON = re.compile(r"^benchmarks/.*\.json$")
JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
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


def sentence(text, start, end):
    """The sentence of text around text[start:end]: a paragraph on one line (BENCHMARKS.md, a JSON
    string) mentions other projects in some sentences and names our files in others."""
    left = max(text.rfind(". ", 0, start), text.rfind("; ", 0, start))
    right = min((i for i in (text.find(". ", end), text.find("; ", end)) if i >= 0), default=len(text))
    return text[left + 1:right]


def json_strings(line):
    """The string literals of one line of a JSON file, decoded (keys and values alike)."""
    out = []
    for m in JSON_STRING.finditer(line):
        try:
            out.append(json.loads(m.group(0)))
        except ValueError:
            pass
    return out


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
    def exists(token, bases):
        return all(any(glob.glob(os.path.join(b, e)) for b in bases) for e in expand(token))

    def named_paths(text, context):
        for m in path_re.finditer(text):
            token = m.group(1).rstrip(".,:;")
            if not (OTHER_PROJECT.search(context or sentence(text, m.start(), m.end())) or PLACEHOLDER.search(token)
                    or BUILD_PRODUCT.search(token)):
                yield token

    findings = []
    for f in files:
        if not f.endswith(DOC_SUFFIXES + HASH_COMMENT + SLASH_COMMENT) and not RESULTS_JSON.match(f):
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
            if RESULTS_JSON.match(f):
                texts = [(t, None) for t in json_strings(line)]
            elif f == PROVENANCE_DOC:
                texts = [(line, None)]
            else:
                text = comment_text(f, line)
                texts = [(text, (lines[n - 2] if n > 1 else "") + " " + line)] if text else []
            for text, context in texts:
                findings += [f"{f}:{n}: {token}" for token in named_paths(text, context) if not exists(token, bases)]
            if f.endswith(DOC_SUFFIXES):
                for m in AT_COMMIT.finditer(line):
                    if not (f == PROVENANCE_DOC and any(p.end() == m.end() for p in PROVENANCE.finditer(line))):
                        findings.append(f"{f}:{n}: \"{m.group(0)}\" names a commit outside BENCHMARKS.md's provenance")
    for line in findings:
        print(line)
    if findings:
        print(f"check_doc_paths: {len(findings)} finding(s): paths named in docs, comments or benchmark results that "
              "do not exist, or commits named in docs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
