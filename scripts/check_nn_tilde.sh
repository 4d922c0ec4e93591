#!/usr/bin/env bash
# Loads exported models with acids-ircam/nn_tilde's own backend (src/backend/backend.cpp and
# parsing_utils.cpp from an nn_tilde checkout, compiled against this build's LibTorch with
# scripts/interop/nn_tilde_driver.cpp): Backend::load, methods and params, Backend::perform at
# 1 and 4 batches and 2048/4096-sample buffers, a get/set of every settable attribute.
# Not run in CI: nn_tilde's source is not part of this repository.
#
#   scripts/check_nn_tilde.sh NN_TILDE_CHECKOUT [FILE.ts ...]
# Without files it trains tiny_rave for 30 steps on a small generated database, a tiny prior over it
# for 20, and exports it offline, with --streaming, and streaming at twice its rate with the prior
# (--sr 88200 --prior: nn~'s prior method), and streaming at 48000 (--sr 48000: forward alone, the
# rational converter inside): nn~ runs that one at 48000 Hz, and a 440 Hz sine through it has its
# output's spectral peak where the model-rate file's is at 44100 Hz.
# Work (and the driver binary) goes to $OUT_DIR (default: a temp dir).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NNT="${1:?usage: scripts/check_nn_tilde.sh NN_TILDE_CHECKOUT [FILE.ts ...]}"
shift
BIN="${BUILD_DIR:-$ROOT/build}/bin"
OUT_DIR="${OUT_DIR:-$(mktemp -d /tmp/nn_tilde_check.XXXXXX)}"
mkdir -p "$OUT_DIR"
for f in src/backend/backend.cpp src/backend/parsing_utils.cpp src/shared/static_buffer.h; do
  [[ -f "$NNT/$f" ]] || { echo "error: $NNT/$f not found: pass an acids-ircam/nn_tilde checkout" >&2; exit 2; }
done

# LibTorch as this build found it (CMake cache), else Debian's.
TORCH_DIR="$(sed -n 's/^Torch_DIR:PATH=//p' "${BUILD_DIR:-$ROOT/build}/CMakeCache.txt" 2>/dev/null || true)"
TORCH_PREFIX="${TORCH_DIR:-/usr/lib/x86_64-linux-gnu/cmake/Torch}"
while [[ "$TORCH_PREFIX" != / && ! -d "$TORCH_PREFIX/include/torch" ]]; do TORCH_PREFIX="$(dirname "$TORCH_PREFIX")"; done
INC=(-I"$TORCH_PREFIX/include" -I"$TORCH_PREFIX/include/torch/csrc/api/include" -I"$NNT/src/backend")
LIBDIR="$TORCH_PREFIX/lib"
[[ -d "$TORCH_PREFIX/lib/x86_64-linux-gnu" ]] && LIBDIR="$TORCH_PREFIX/lib/x86_64-linux-gnu"
echo "== compiling nn_tilde's backend ($(git -C "$NNT" log --oneline -1 2>/dev/null || echo "$NNT")) against $TORCH_PREFIX"
g++ -std=c++20 -O1 -w "${INC[@]}" -o "$OUT_DIR/nn_tilde_driver" "$ROOT/scripts/interop/nn_tilde_driver.cpp" \
  "$NNT/src/backend/backend.cpp" "$NNT/src/backend/parsing_utils.cpp" \
  -L"$LIBDIR" -Wl,-rpath,"$LIBDIR" -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -lpthread

FILES=("$@")
if [[ ${#FILES[@]} -eq 0 ]]; then
  for b in train preprocess export; do
    [[ -x "$BIN/$b" ]] || { echo "error: $BIN/$b not built (scripts/build.sh)" >&2; exit 2; }
  done
  echo "== training tiny_rave for 30 steps and exporting it"
  "$BIN/preprocess" --generate_demo "$OUT_DIR/audio" --force --demo_seconds 20 --seed 1 >/dev/null
  "$BIN/preprocess" --input_path "$OUT_DIR/audio" --output_path "$OUT_DIR/db" --sampling_rate 44100 --channels 1 \
    --num_signal 16384 --max_db_size 1 >/dev/null
  "$BIN/train" --config tiny_rave --db_path "$OUT_DIR/db" --out_path "$OUT_DIR/runs" --name nnt --max_steps 30 \
    --val_every 10 >/dev/null
  RUN="$(cd "$OUT_DIR/runs" && readlink -f "$(cat latest)")"
  "$BIN/export" --run "$RUN" --force --output "$OUT_DIR/tiny_rave.ts"
  "$BIN/export" --run "$RUN" --streaming --force --output "$OUT_DIR/tiny_rave_streaming.ts"
  "$BIN/train" --config tiny_prior --model "$RUN" --db_path "$OUT_DIR/db" --out_path "$OUT_DIR/runs" --name prior \
    --max_steps 20 --val_every 10 >/dev/null
  PRIOR="$(cd "$OUT_DIR/runs" && readlink -f "$(cat latest)")"
  "$BIN/export" --run "$RUN" --streaming --sr 88200 --prior "$PRIOR" --force --output "$OUT_DIR/tiny_rave_prior.ts"
  "$BIN/export" --run "$RUN" --streaming --sr 48000 --force --output "$OUT_DIR/tiny_rave_48k.ts"
  FILES=("$OUT_DIR/tiny_rave.ts" "$OUT_DIR/tiny_rave_streaming.ts" "$OUT_DIR/tiny_rave_prior.ts" "$OUT_DIR/tiny_rave_48k.ts")
fi
status=0
for f in "${FILES[@]}"; do
  echo "== $f"
  "$OUT_DIR/nn_tilde_driver" "$f" || status=1
done
if [[ $# -eq 0 ]]; then
  peak() { sed -n 's/.*output peak \([0-9.]*\) Hz.*/\1/p' "$1"; }
  echo "== $OUT_DIR/tiny_rave_streaming.ts at 44100 Hz"
  "$OUT_DIR/nn_tilde_driver" "$OUT_DIR/tiny_rave_streaming.ts" 44100 | tee "$OUT_DIR/at44.txt" || status=1
  echo "== $OUT_DIR/tiny_rave_48k.ts at 48000 Hz"
  "$OUT_DIR/nn_tilde_driver" "$OUT_DIR/tiny_rave_48k.ts" 48000 | tee "$OUT_DIR/at48.txt" || status=1
  # Within two DFT bins of 8192 samples at 48 kHz (11.7 Hz).
  if awk -v a="$(peak "$OUT_DIR/at44.txt")" -v b="$(peak "$OUT_DIR/at48.txt")" \
    'BEGIN { d = a - b; exit !(a > 0 && (d < 0 ? -d : d) <= 11.7) }'; then
    echo "ok   the 48 kHz file's output peak is the model-rate file's, in Hz"
  else
    echo "FAIL the 48 kHz file's output peak differs from the model-rate file's"
    status=1
  fi
fi
exit $status
