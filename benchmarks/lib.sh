# shellcheck shell=bash
# The preamble every benchmarks/*.sh shares; source it first:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# Sets ROOT (the repository), BUILD_DIR (default $ROOT/build; set it before sourcing for another
# default) and BIN ($BUILD_DIR/bin), BENCH_PY (the Python of the summaries: Debian's, standard
# library only), RESULTS_DIR (where the result JSON goes: $BENCH_RESULTS_DIR, default
# benchmarks/results; --results_dir sets it), BENCH_LOAD_BEFORE (the load averages when the
# script started) and BENCH_NAME; exports OMP_WAIT_POLICY=PASSIVE unless it is set (a shared
# machine needs it; docs/cli.md), and OPENBLAS_CORETYPE where OpenBLAS would fall back.

BENCH_NAME="$(basename "${BASH_SOURCE[1]:-$0}")"
BENCH_SELF="${BASH_SOURCE[1]:-$0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
BIN="$BUILD_DIR/bin"
BENCH_PY="${BENCH_PY:-/usr/bin/python3}"
# shellcheck disable=SC2034  # used by the scripts that source this file
RESULTS_DIR="${BENCH_RESULTS_DIR:-$ROOT/benchmarks/results}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# A CPU OpenBLAS does not know gets its SSE3 fallback in every process that loads it, the Python
# peers as well as ours (docs/cli.md, "Threads and BLAS kernels"): every arm runs on the kernels
# the CPU allows, as our programs choose them (benchlib.openblas_coretype).
OPENBLAS_CORETYPE="$("$BENCH_PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import benchlib
print(benchlib.openblas_coretype() or "")' "$ROOT/benchmarks")"
if [[ -n "$OPENBLAS_CORETYPE" ]]; then export OPENBLAS_CORETYPE; else unset OPENBLAS_CORETYPE; fi

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

bench_no_args() {  # bench_no_args "$@": --help prints the header comment; any argument is refused
  case "${1:-}" in
    -h|--help) bench_usage ;;
    "") ;;
    *) bench_die "unknown argument '$1' (accepted: no arguments)" ;;
  esac
}

# bench_args SPEC QUICK "$@": the calling script's arguments. SPEC, space-separated: --NAME=VAR
# (takes a value), --NAME=VAR+ (repeatable, appended to the array VAR), --NAME=VAR:VALUE (a
# flag), and ARG... when arguments other than options are taken (into the array BENCH_ARGS).
# QUICK: the assignments --quick makes where it stands (empty: no --quick). Every script also
# takes --results_dir DIR (RESULTS_DIR) and -h/--help (bench_usage).
# shellcheck disable=SC2034  # RESULTS_DIR: the calling script's
bench_args() {
  local spec="$1" quick="$2" s name var accepted
  shift 2
  BENCH_ARGS=()
  while [ $# -gt 0 ]; do
    case "$1" in
      -h|--help) bench_usage ;;
      --results_dir) RESULTS_DIR="${2:?--results_dir needs a folder}"; shift 2; continue ;;
      --quick) if [ -n "$quick" ]; then eval "$quick"; shift; continue; fi ;;
    esac
    for s in $spec; do
      name="${s%%=*}" var="${s#*=}"
      [ "$1" = "$name" ] || continue
      case "$var" in
        *+) eval "${var%+}+=(\"\${2?$name needs a value}\")"; shift 2 ;;
        *:*) printf -v "${var%%:*}" '%s' "${var#*:}"; shift ;;
        *) printf -v "$var" '%s' "${2?$name needs a value}"; shift 2 ;;
      esac
      continue 2
    done
    if [[ "$1" != -* && " $spec " == *" ARG... "* ]]; then
      BENCH_ARGS+=("$1")
      shift
      continue
    fi
    accepted="$(for s in $spec; do printf '%s, ' "${s%%=*}"; done)${quick:+--quick, }--results_dir DIR"
    bench_die "unknown argument '$1' (accepted: $accepted; --help says more)"
  done
}

bench_need_bin() {  # bench_need_bin PROGRAM...: each must be built in $BIN
  local b
  for b in "$@"; do
    [[ -x "$BIN/$b" ]] || bench_die "$BIN/$b is not built (cmake --build $BUILD_DIR --target $b)"
  done
}

bench_command() {  # bench_command ARGS...: how the calling script was run, for the result
  local shown="benchmarks/$BENCH_NAME" a
  for a in "$@"; do
    if [[ "$a" =~ [[:space:]] || -z "$a" ]]; then shown+=" \"$a\""; else shown+=" $a"; fi
  done
  printf '%s\n' "$shown"
}

bench_run() {  # bench_run LOG COMMAND...: runs it with its output in LOG; on failure, LOG's end, exit 1
  local log="$1"
  shift
  "$@" >"$log" 2>&1 || { echo "$BENCH_NAME: $* failed; the end of $log:" >&2; tail -20 "$log" >&2; exit 1; }
}

# The demo databases every benchmark trains on, made by $BIN/preprocess (its output in DB.log).
bench_audio_db() {  # bench_audio_db DB SECONDS [PREPROCESS ARGS...]: the demo audio (SECONDS per file,
  # seed 1; made once per folder and length, in DB's folder) imported into the LMDB DB
  local db="$1" audio
  audio="$(dirname "$1")/demo_audio_$2s"
  [ -d "$audio" ] || bench_run "$db.log" "$BIN/preprocess" --generate_demo "$audio" --force --demo_seconds "$2" --seed 1
  shift 2
  rm -rf "$db"
  bench_run "$db.log" "$BIN/preprocess" --input_path "$audio" --output_path "$db" "$@"
}

bench_neural_db() {  # bench_neural_db DB UNITS [TRIALS]: one synthetic reaching session (seed 1) as DB
  bench_run "$1.log" "$BIN/preprocess" --generate_neural_demo "$1_h5" --force --groups 1 --units "$2" \
    ${3:+--trials "$3"} --seed 1
  rm -rf "$1"
  bench_run "$1.log" "$BIN/preprocess" --kind neural --input_path "$1_h5" --output_path "$1"
}
