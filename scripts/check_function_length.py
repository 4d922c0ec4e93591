#!/usr/bin/env python3
"""Reports the longest C++ functions of the folders given, and fails on any above --max lines.

A function is a brace block at namespace or class scope whose header (the text since the last
';', '{' or '}' at that scope) has a parameter list and is no type, namespace, initializer or
control statement: free functions, member functions, constructors, defined in .cpp or .h. Its
length runs from the header's first line to the closing brace, comments and blank lines
included (what a reader scrolls). Lambdas and local classes count toward the function holding
them. Comments, string and character literals are blanked first, raw strings included.

  scripts/check_function_length.py [--max 80] [--max_file_lines N] [--top 10] FOLDER...
Exit 0 when no function of the folders is longer than --max (and, with --max_file_lines, no .h or
.cpp file is longer than N lines); 1 otherwise, each one named with file:line, its name and length.
"""
import argparse
import os
import re
import sys

NOT_FUNCTIONS = {"if", "for", "while", "switch", "catch", "do", "else", "namespace", "class", "struct",
                 "enum", "union", "return", "try", "extern"}


def blank(text):
    """The text with comments and literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            d = text.find("(", i)
            delim = text[i + 2:d]
            j = text.find(")" + delim + '"', d)
            j = n if j < 0 else j + len(delim) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_function(header):
    h = " ".join(header.split())
    if "(" not in h or not h:
        return False
    first = re.match(r"[A-Za-z_]+", h.lstrip("~"))
    if first and first.group(0) in NOT_FUNCTIONS:
        return False
    if re.search(r"(^|[^=!<>])=\s*$", h) or h.endswith(",") or h.startswith("#"):
        return False  # an initializer
    before_paren = h[:h.index("(")]
    if "=" in before_paren and "operator" not in before_paren:
        return False  # `x = f(…) {…}`-like initialisation
    return True


def functions(path):
    text = blank(open(path, encoding="utf-8", errors="replace").read())
    # Preprocessor lines hold no braces we follow.
    text = re.sub(r"(?m)^[ \t]*#.*$", lambda m: " " * len(m.group(0)), text)
    stack = []  # per open brace: ("function"|"scope"|"block", start line, name)
    header_start = 0
    line_of = [0] * (len(text) + 1)
    line = 1
    for k, ch in enumerate(text):
        line_of[k] = line
        if ch == "\n":
            line += 1
    out = []
    for k, ch in enumerate(text):
        if ch in ";{}":
            if ch == "{":
                inside_function = any(kind == "function" for kind, _, _ in stack)
                header = text[header_start:k]
                if not inside_function and is_function(header):
                    first = header_start + (len(header) - len(header.lstrip()))
                    name = re.findall(r"([~A-Za-z_][\w:~]*(?:operator\S*)?)\s*\(", header)
                    stack.append(("function", line_of[first], name[0] if name else "?"))
                else:
                    stack.append(("scope" if not inside_function else "block", 0, ""))
            elif ch == "}" and stack:
                kind, start, name = stack.pop()
                if kind == "function":
                    out.append((line_of[k] - start + 1, start, name))
            header_start = k + 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=80)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--max_file_lines", type=int, default=0)
    ap.add_argument("folders", nargs="+")
    args = ap.parse_args()
    found, long_files = [], []
    for folder in args.folders:
        for dirpath, _, files in os.walk(folder):
            for f in sorted(files):
                if f.endswith((".h", ".cpp")):
                    path = os.path.join(dirpath, f)
                    lines = sum(1 for _ in open(path, encoding="utf-8", errors="replace"))
                    if args.max_file_lines and lines > args.max_file_lines:
                        long_files.append(f"{path}: {lines} lines, above {args.max_file_lines}")
                    found += [(n, path, start, name) for n, start, name in functions(path)]
    found.sort(reverse=True)
    print(f"longest functions of {', '.join(args.folders)} ({len(found)} functions):")
    for n, path, start, name in found[:args.top]:
        print(f"  {n:4d} lines  {path}:{start}  {name}")
    over = [f for f in found if f[0] > args.max]
    for n, path, start, name in over:
        print(f"{path}:{start}: {name} is {n} lines, above {args.max}")
    for line in long_files:
        print(line)
    return 1 if over or long_files else 0


if __name__ == "__main__":
    sys.exit(main())
