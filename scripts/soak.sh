#!/usr/bin/env bash
# A soak run (see scripts/soak.py): http_server and echo_server under load_tester with
# misbehaving clients and chaos proxies (tests/support/chaos_proxy_main.cpp) mixed in, sampled
# every second; exits non-zero when memory or descriptors grow after warm-up or an unexpected
# error appears.
#   scripts/soak.sh [minutes] [preset]   default: 10 minutes, the release build
# Writes soak-results/ (samples.csv, summary.txt, soak.png).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes="${1:-10}"
preset="${2:-release}"
scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)" \
  --target http_server echo_server load_tester chaos_proxy
python3 scripts/soak.py "build/$preset" soak-results "$minutes"
