#!/usr/bin/env bash
# The benchmarks' own dependencies, installed when missing (idempotent, like scripts/setup.sh,
# which it runs first): the Python side of the side-by-side comparisons (Debian's python3-torch,
# the same LibTorch as the native build, with numpy and scipy), sox for the decoders compared
# with preprocess, linux-perf for the profiling-overhead attribution by sampling.
# Used by benchmarks/run.sh and the scripts that can run on their own (ddp.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh" >/dev/null
bench_missing=()
for p in python3-torch python3-numpy python3-scipy sox linux-perf; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || bench_missing+=("$p")
done
if [ ${#bench_missing[@]} -gt 0 ]; then
  echo "bench: installing ${bench_missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${bench_missing[@]}" >/dev/null
fi
if ! /usr/bin/python3 -c 'import torch, numpy, scipy' 2>/dev/null; then
  echo "bench: /usr/bin/python3 cannot import torch, numpy and scipy after installing python3-torch python3-scipy" >&2
  exit 1
fi
