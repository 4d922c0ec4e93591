#!/usr/bin/env python3
"""Checks the source tree's layering against the library graph declared in CMake.

CMake (rt_library in the top-level CMakeLists.txt) writes <build>/layering.json:
{library: {"folder": "profiling/report", "deps": [libraries it links]}}. Every quoted
#include "a/b/c.h" of a library's sources must name a file of the same library or of a library it
depends on (directly or transitively), and no folder may include from a folder that, directly
or through others, includes from it (no folder cycle, sub-folders counted on their own).
Two rules of our own hold besides, whatever CMake declares:
  - export/'s rooms in their order (ROOMS): a room includes only from the rooms below it, never
    from its sibling or above (graph, then torchscript and onnx side by side, checks, the
    command);
  - narrow doors (DOORS): a folder reaches another only through the headers named (generate
    reaches export/ through its loader alone);
  - folders that never meet (NEVER): the model families include nothing of the training loop
    (families/ → trainer/); what both are built from is in training/, below them.
Exit 0 when all hold; otherwise each violation is printed with file:line and exit 1.
"""
import argparse
import json
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

# export/'s rooms, lowest first; rooms on one level may not include each other.
ROOMS = [["export/graph"], ["export/torchscript", "export/onnx"], ["export/checks"], ["export"]]
# folder → {other folder: the only headers of it the folder may include}
DOORS = {"generate": {"export": ["export/loader.h"]}}
# folder → folders it may never include from, whatever CMake declares
NEVER = {"families": ["trainer"]}


def room_level(folder):
    for level, rooms in enumerate(ROOMS):
        if folder in rooms:
            return level
    return None


def room_rule(rel_dir, target):
    """A message when the include breaks export/'s room order or a narrow door, else None."""
    to_dir = os.path.dirname(target)
    here, there = room_level(rel_dir), room_level(to_dir)
    if here is not None and there is not None and to_dir != rel_dir and there >= here:
        return f"{rel_dir} may include only from the export rooms below it, not {target}"
    for other in NEVER.get(rel_dir.split("/")[0], []):
        if target.startswith(other + "/"):
            return f"{rel_dir} never includes from {other}/ ({target}): what both use belongs in training/"
    for other, allowed in DOORS.get(rel_dir.split("/")[0], {}).items():
        if (target == other or target.startswith(other + "/")) and target not in allowed:
            return f"{rel_dir} reaches {other}/ only through {', '.join(allowed)}, not {target}"
    return None


def owner(path, folders):
    """The library whose folder is the longest prefix of `path` (relative, with '/')."""
    best = None
    for lib, folder in folders.items():
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(folders[best]):
                best = lib
    return best


def closure(graph):
    out = {}
    for lib in graph:
        seen, stack = set(), list(graph[lib]["deps"])
        while stack:
            d = stack.pop()
            if d in seen or d not in graph:
                continue
            seen.add(d)
            stack.extend(graph[d]["deps"])
        out[lib] = seen
    return out


def find_cycle(edges):
    state, path = {}, []

    def visit(n):
        state[n] = 1
        path.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        path.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--graph", required=True)
    args = ap.parse_args()
    graph = json.load(open(args.graph))
    folders = {lib: v["folder"] for lib, v in graph.items()}
    deps = closure(graph)
    errors = []
    folder_edges = {}
    for lib, folder in folders.items():
        root = os.path.join(args.source, folder)
        for dirpath, _, files in os.walk(root):
            rel_dir = os.path.relpath(dirpath, args.source)
            for f in files:
                if not f.endswith((".h", ".cpp")):
                    continue
                rel = os.path.join(rel_dir, f)
                if owner(rel, folders) != lib:
                    continue  # a sub-folder that is a library of its own
                for n, line in enumerate(open(os.path.join(dirpath, f), errors="replace"), 1):
                    m = INCLUDE.match(line)
                    if not m or "/" not in m.group(1):
                        continue
                    target = m.group(1)
                    if not os.path.exists(os.path.join(args.source, target)):
                        continue  # generated (protobuf) or system-style header
                    to = owner(target, folders)
                    if to is None:
                        errors.append(f"{rel}:{n}: includes {target}, which belongs to no library")
                        continue
                    if to != lib and to not in deps[lib]:
                        errors.append(f"{rel}:{n}: {lib} includes {target} of {to}, "
                                      f"but {lib} does not depend on {to} in CMake")
                    rule = room_rule(rel_dir, target)
                    if rule:
                        errors.append(f"{rel}:{n}: {rule}")
                    to_dir = os.path.dirname(target)
                    if to_dir != rel_dir:
                        folder_edges.setdefault(rel_dir, set()).add(to_dir)
    cycle = find_cycle(folder_edges)
    if cycle:
        errors.append("folder cycle: " + " -> ".join(cycle))
    for e in errors:
        print(e)
    if errors:
        return 1
    print(f"layering: {len(folders)} libraries, {sum(len(v) for v in folder_edges.values())} "
          f"folder dependencies, no violation, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
