# shellcheck shell=bash
# The preamble every scripts/bench/*.sh shares; source it first:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# Sets ROOT (the repository), BUILD_DIR (default $ROOT/build; set it before sourcing for another
# default) and BIN ($BUILD_DIR/bin), BENCH_PY (the Python of the summaries: Debian's, standard
# library only), RESULTS_DIR (where the result JSON goes: $BENCH_RESULTS_DIR, default
# scripts/bench/results; the scripts' --results_dir sets it), BENCH_LOAD_BEFORE (the load
# averages when the script started) and BENCH_NAME; exports OMP_WAIT_POLICY=PASSIVE unless it
# is set (a shared machine needs it; docs/cli.md).
# Functions: bench_usage (--help: the calling script's header comment), bench_no_args, bench_die, bench_bad_arg,
# bench_need_bin, bench_load, bench_command.

BENCH_NAME="$(basename "${BASH_SOURCE[1]:-$0}")"
BENCH_SELF="${BASH_SOURCE[1]:-$0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
BIN="$BUILD_DIR/bin"
BENCH_PY="${BENCH_PY:-/usr/bin/python3}"
# shellcheck disable=SC2034  # used by the scripts that source this file
RESULTS_DIR="${BENCH_RESULTS_DIR:-$ROOT/scripts/bench/results}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"

bench_load() {  # the 1-, 5- and 15-minute load averages, space-separated
  cut -d' ' -f1-3 /proc/loadavg
}
# shellcheck disable=SC2034
BENCH_LOAD_BEFORE="$(bench_load)"

bench_usage() {  # prints the calling script's header comment (after the #! line) and exits 0
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$BENCH_SELF"
  exit 0
}

bench_die() {  # bench_die MESSAGE...: the script's name, the message, exit 2
  echo "$BENCH_NAME: $*" >&2
  exit 2
}

bench_bad_arg() {  # bench_bad_arg ARG ACCEPTED
  bench_die "unknown argument '$1' (accepted: $2; --help says more)"
}

bench_no_args() {  # bench_no_args "$@": --help prints the header comment; any argument is refused
  case "${1:-}" in
    -h|--help) bench_usage ;;
    "") ;;
    *) bench_bad_arg "$1" "no arguments" ;;
  esac
}

bench_need_bin() {  # bench_need_bin PROGRAM...: each must be built in $BIN
  local b
  for b in "$@"; do
    [[ -x "$BIN/$b" ]] || bench_die "$BIN/$b is not built (cmake --build $BUILD_DIR --target $b)"
  done
}

bench_command() {  # bench_command ARGS...: how the calling script was run, for the result
  local shown="scripts/bench/$BENCH_NAME" a
  for a in "$@"; do
    if [[ "$a" =~ [[:space:]] || -z "$a" ]]; then shown+=" \"$a\""; else shown+=" $a"; fi
  done
  printf '%s\n' "$shown"
}
