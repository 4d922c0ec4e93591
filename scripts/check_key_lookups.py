#!/usr/bin/env python3
"""Checks that config keys are read one way: through the tables of config/ and the families.

A key is bound to a struct's field by a table (config/options_table.h; the common keys in
config/run_keys.h, each family's own in families/) and read once per run into that struct. Outside
config/ and tests/, no source may
  - read a key by its name from a Config: `.get_int("train.batch")`, `.get_enum<E>("model.x")` ...
    (a table's converter reads the key the table hands it, never a literal one);
  - read a config file's keys as raw TOML: `at_path(` (config/run_keys.h reads a stored
    config.toml for the commands that need one).
Exit 0 when none does; otherwise each one is printed as file:line and exit 1.
"""
import argparse
import os
import re
import subprocess
import sys

GETTER = re.compile(r"\.get_(bool|int|float|string|enum|int_list|int_list_list|float_list)\s*(<[^<>()]*>)?\s*\(\s*\"")
RAW_TOML = re.compile(r"\bat_path\s*\(")
ALLOWED = ("config/", "tests/")


def violations(root, files):
    for rel in files:
        if rel.startswith(ALLOWED) or not rel.endswith((".h", ".cpp")):
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                code = line.split("//", 1)[0]
                if GETTER.search(code):
                    yield f"{rel}:{n}: a key read by name; bind it in a table (config/run_keys.h or the family's)"
                elif RAW_TOML.search(code):
                    yield f"{rel}:{n}: a config read as raw TOML; read it through config/ (config/run_keys.h)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("files", nargs="*", help="files relative to --source (default: git ls-files)")
    args = ap.parse_args()
    root = os.path.abspath(args.source)
    files = args.files or subprocess.run(["git", "-C", root, "ls-files", "*.h", "*.cpp"], check=True,
                                         capture_output=True, text=True).stdout.split()
    bad = list(violations(root, files))
    for b in bad:
        print(b)
    if bad:
        print(f"check_key_lookups: {len(bad)} key read(s) outside config/", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
