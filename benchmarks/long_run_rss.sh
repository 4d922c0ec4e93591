#!/bin/sh
# benchmarks/bench.py --only long_run_rss.sh: its options and --quick with --list there.
exec /usr/bin/python3 "$(dirname "$0")/bench.py" --only "$(basename "$0")" "$@"
