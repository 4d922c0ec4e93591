#!/usr/bin/env bash
# Overhead of timing + memory profiling (budget: <= 1% of step time), measured as
# interleaved A/B training runs of the same job: A = no profiling flags, B =
# --enable_timing_profiling --enable_memory_profiling. Each run logs steps/s per interval of
# --log_every steps; the first interval (warm-up) is dropped and the rest averaged.
#   scripts/bench/profiling_overhead.sh [--quick]      (writes scripts/bench/profiling_results.md)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/bin"
PAIRS=6; STEPS=160; EVERY=40
[ "${1:-}" = "--quick" ] && { PAIRS=4; STEPS=120; }
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
[ -x "$BIN/train" ] || { echo "profiling_overhead.sh: $BIN/train is not built (scripts/build.sh)" >&2; exit 1; }
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
"$BIN/preprocess" --generate_demo "$TMP/audio" --demo_seconds 30 --seed 1 >/dev/null 2>&1
"$BIN/preprocess" --input_path "$TMP/audio" --output_path "$TMP/audio_db" --num_signal 16384 --max_db_size 1 >/dev/null 2>&1
JOBS=("tiny_rave|$TMP/audio_db")
if "$BIN/preprocess" --help 2>&1 | grep -q -- "--generate_neural_demo"; then
  "$BIN/preprocess" --generate_neural_demo "$TMP/neural" --groups 1 --units 182 --seed 1 >/dev/null 2>&1
  "$BIN/preprocess" --kind neural --input_path "$TMP/neural" --output_path "$TMP/neural_db" >/dev/null 2>&1
  JOBS+=("s5_maze|$TMP/neural_db")
fi

run() {  # config db threads flags... → prints mean steps/s after the first interval
  local cfg="$1" db="$2" threads="$3"; shift 3
  if ! "$BIN/train" --config "$cfg" --db_path "$db" --out_path "$TMP/runs" --max_steps "$STEPS" \
    --log_every "$EVERY" --val_every 100000 --save_every 100000 --threads "$threads" "$@" > "$TMP/log" 2>&1; then
    echo "profiling_overhead.sh: train --config $cfg failed:" >&2; tail -5 "$TMP/log" >&2; exit 1
  fi
  sed -n 's/.*| \([0-9.e+]*\) steps\/s$/\1/p' "$TMP/log" | tail -n +2 |
    awk '{ s += $1; n++ } END { if (n) printf "%.4f\n", s / n }'
}

{
  echo "## Timing + memory profiling overhead"
  echo
  echo "Command: \`scripts/bench/profiling_overhead.sh${1:+ $1}\` — $PAIRS interleaved A/B pairs of $STEPS-step runs,"
  echo "steps/s averaged over the intervals after the first (log_every $EVERY); load average before: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| job | threads | off: steps/s (median, min–max) | timing+memory: steps/s | overhead (median of pairs) |"
  echo "|---|---|---|---|---|"
} > "$TMP/table.md"

for job in "${JOBS[@]}"; do
  cfg="${job%%|*}"; db="${job#*|}"
  for threads in 1 2; do
    : > "$TMP/a"; : > "$TMP/b"
    for ((i = 0; i < PAIRS; i++)); do
      run "$cfg" "$db" "$threads" >> "$TMP/a"
      run "$cfg" "$db" "$threads" --enable_timing_profiling --enable_memory_profiling >> "$TMP/b"
    done
    /usr/bin/python3 - "$TMP/a" "$TMP/b" "$cfg" "$threads" >> "$TMP/table.md" <<'PY'
import statistics, sys
a = [float(x) for x in open(sys.argv[1]) if x.strip()]
b = [float(x) for x in open(sys.argv[2]) if x.strip()]
pairs = [(x / y - 1.0) * 100.0 for x, y in zip(a, b)]  # step-time ratio B/A − 1
f = lambda v: f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})"
print(f"| {sys.argv[3]} | {sys.argv[4]} | {f(a)} | {f(b)} | {statistics.median(pairs):+.2f}% "
      f"(pairs {min(pairs):+.1f}…{max(pairs):+.1f}%) |")
PY
  done
done
# Attribution: what separate processes cannot resolve (their spread is several %), sampling
# can: the share of CPU samples whose function is profiling code, in one profiled run.
PROF_RE='rt::prof::|rt::PhaseScope|counting_delete|counting_raw_delete|CountingCpuAllocator|record_cpu|ProfiledCPUMemoryReporter|reportMemoryUsage|memoryProfilingEnabled|ThreadLocalDebugInfo|nlohmann|_Map_base<void\*, std::pair<void\* const, unsigned long>|_Hashtable<void\*, std::pair<void\* const, unsigned long>'
{
  echo
  echo "Attribution by sampling (\`perf record -F 4999\` on one run with both flags, $STEPS steps, whole process"
  echo "including start-up): share of CPU samples in profiling code — our timers, phase scopes, memory"
  echo "reporter and counting allocator, profile writers and their JSON, and c10's memory hooks (regex"
  echo "\`$PROF_RE\`). Self time only, so the malloc/free behind a hook is not included."
  echo
  if command -v perf >/dev/null 2>&1; then
    echo "| job | threads | samples | in profiling code | top profiling symbols |"
    echo "|---|---|---|---|---|"
    for job in "${JOBS[@]}"; do
      cfg="${job%%|*}"; db="${job#*|}"
      if perf record -q -F 4999 -o "$TMP/perf.data" -- "$BIN/train" --config "$cfg" --db_path "$db" \
          --out_path "$TMP/runs" --max_steps "$STEPS" --log_every "$EVERY" --val_every 100000 --save_every 100000 \
          --threads 1 --enable_timing_profiling --enable_memory_profiling > "$TMP/log" 2>&1; then
        perf report -i "$TMP/perf.data" --no-children --sort symbol --stdio 2> /dev/null > "$TMP/report.txt" || true
        /usr/bin/python3 - "$TMP/report.txt" "$PROF_RE" "$cfg" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
m = re.search(r"^# Samples: ([0-9.]+)([KM]?)", text, re.M)
samples = m.group(1) + m.group(2) if m else "?"
rx = re.compile(sys.argv[2])
total, top = 0.0, []
for line in text.splitlines():
    mm = re.match(r"\s+([0-9.]+)%\s+\[\.\]\s+(.*\S)", line)
    if mm and rx.search(mm.group(2)):
        pct = float(mm.group(1))
        total += pct
        top.append((pct, mm.group(2)[:60].strip()))
top.sort(reverse=True)
names = "; ".join(f"{n} {p:.2f}%" for p, n in top[:3]) or "—"
print(f"| {sys.argv[3]} | 1 | {samples} | **{total:.2f} %** | {names} |")
PY
      else
        echo "| $cfg | 1 | — | perf record failed: $(tail -1 "$TMP/log") | |"
      fi
    done
  else
    echo "(perf is not installed: \`apt-get install linux-perf\` to add this table.)"
  fi
} >> "$TMP/table.md"
cp "$TMP/table.md" "$ROOT/scripts/bench/profiling_results.md"
cat "$ROOT/scripts/bench/profiling_results.md"
