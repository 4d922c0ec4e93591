#!/bin/sh
# benchmarks/bench.py --only export_fidelity.sh: its options and --quick with --list there.
exec /usr/bin/python3 "$(dirname "$0")/bench.py" --only "$(basename "$0")" "$@"
