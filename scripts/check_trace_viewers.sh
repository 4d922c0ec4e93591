#!/usr/bin/env bash
# Opens a real training trace and its collapsed stacks in speedscope (headless Chromium) and
# checks the screenshots are not blank (the trace must open in speedscope).
# Not run in CI: it installs Debian's chromium (apt) and speedscope 1.25.0 (npm).
# speedscope served over 127.0.0.1 HTTP (a
# file:// URL hangs), the file next to index.html, headless screenshot.
#
#   scripts/check_trace_viewers.sh [BUILD_DIR]     (default: build; needs bin/train, bin/preprocess)
# Keeps its work in $OUT_DIR (default: a new temp dir): traces, screenshots, logs.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
OUT_DIR="${OUT_DIR:-$(mktemp -d /tmp/trace_viewers.XXXXXX)}"
mkdir -p "$OUT_DIR"
for bin in train preprocess; do
  [[ -x "$BUILD/bin/$bin" ]] || { echo "error: $BUILD/bin/$bin not found; build it first (cmake --build $BUILD --target train preprocess)" >&2; exit 2; }
done

# 1. Viewers.
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
NPM_DIR="$OUT_DIR/npm"
if [[ ! -f "$NPM_DIR/node_modules/speedscope/dist/release/index.html" ]]; then
  mkdir -p "$NPM_DIR"
  (cd "$NPM_DIR" && npm install --silent --no-audit --no-fund speedscope@1.25.0 >/dev/null)
fi
SITE="$NPM_DIR/node_modules/speedscope/dist/release"

# 2. A short profiled training of tiny_rave: steps 2-3 traced with stacks and module spans.
"$BUILD/bin/preprocess" --generate_demo "$OUT_DIR/audio" --force --demo_seconds 3 --seed 1 >"$OUT_DIR/preprocess.log" 2>&1
"$BUILD/bin/preprocess" --input_path "$OUT_DIR/audio" --output_path "$OUT_DIR/db" --num_signal 8192 >>"$OUT_DIR/preprocess.log" 2>&1
rm -rf "$OUT_DIR/runs"
"$BUILD/bin/train" --config tiny_rave --db_path "$OUT_DIR/db" --out_path "$OUT_DIR/runs" --name viewers \
  --max_steps 5 --train.threads 1 --train.val_every 1000 --train.save_every 1000 \
  --enable_profiling --profiling.wait 1 --profiling.warmup 1 --profiling.active 2 --profiling.skip_first 0 \
  --profiling.with_stack --profiling.with_modules --profiling.record_shapes >"$OUT_DIR/train.log" 2>&1
RUN="$(cd "$OUT_DIR/runs" && readlink -f "$(cat latest)")"
cp "$RUN/profile_step_2.json" "$SITE/trace.json"
cp "$RUN/profile_step_2_stacks.txt" "$SITE/stacks.txt"
cp "$RUN/profile_step_2.json" "$RUN/profile_step_2_stacks.txt" "$OUT_DIR/"

# 3. Serve speedscope on loopback and screenshot each file.
PORT="${PORT:-$((20000 + RANDOM % 20000))}"
python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$SITE" >"$OUT_DIR/http.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do
  python3 - "$PORT" 2>/dev/null <<'PY' && break
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/index.html", timeout=1)
PY
  sleep 0.2
done

shot() {  # shot <file> <png>
  local profile="$1" png="$2"
  rm -rf "$OUT_DIR/chrome-profile"
  mkdir -p "$OUT_DIR/chrome-profile"
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$OUT_DIR/chrome-profile" --window-size=1400,800 --virtual-time-budget=6000 \
    --screenshot="$png" "http://127.0.0.1:$PORT/index.html#profileURL=$profile" >>"$OUT_DIR/chromium.log" 2>&1
  [[ -s "$png" ]] || { echo "error: chromium wrote no screenshot for $profile (see $OUT_DIR/chromium.log)" >&2; exit 1; }
}
shot trace.json "$OUT_DIR/speedscope_trace.png"
shot stacks.txt "$OUT_DIR/speedscope_stacks.png"

# 4. Not blank: decode the PNG with the standard library only (zlib + PNG filters) and require
# a flame chart's worth of colour — speedscope's landing page ("Drag and drop a profile") is
# nearly uniform, a loaded profile fills the view with many coloured frames.
check_png() {
  python3 - "$1" <<'PY'
import struct, sys, zlib
path = sys.argv[1]
data = open(path, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, width = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and ctype in (2, 6), f"unsupported PNG type {ctype}/{depth}"
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = width * bpp
prev = bytearray(stride)
colours, counts, total = set(), {}, 0
i = 0
for y in range(height):
    f = raw[i]; line = bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + ((a + b) >> 1)) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    prev = line
    for x in range(0, stride, bpp * 2):  # every other pixel is plenty
        px = bytes(line[x:x + 3]); colours.add(px); counts[px] = counts.get(px, 0) + 1; total += 1
background = max(counts.values()) / total
print(f"{path}: {width}x{height}, {len(colours)} colours, background share {background:.1%}")
if len(colours) < 40 or background > 0.9:
    sys.exit(f"{path} looks blank (speedscope did not render a profile)")
PY
}
check_png "$OUT_DIR/speedscope_trace.png"
check_png "$OUT_DIR/speedscope_stacks.png"
echo "speedscope rendered the trace and the stacks; screenshots in $OUT_DIR"
