#!/bin/sh
exec /usr/bin/python3 "$(dirname "$0")/bench.py" --only "$(basename "$0")" "$@"  # bench.py --list: its options
