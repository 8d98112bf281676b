#!/usr/bin/env bash
# Builds the libFuzzer targets (the fuzz preset: clang, ASan + UBSan) and runs them.
#   scripts/fuzz.sh                     every target, 60 s each, one after another
#   scripts/fuzz.sh http_request 3600   one target for an hour
# Targets: http_request endpoint_parse resolve_arguments http_response tls_server (see
# tests/fuzz/CMakeLists.txt). Each starts from its seeds in tests/fuzz/corpus/<target> and keeps
# what it learns in build/fuzz/tests/fuzz/corpus/<target>; a finding stops it, and the input is
# in build/fuzz/tests/fuzz/artifacts/ (copy it into the seeds once fixed: a regression input).
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(http_request endpoint_parse resolve_arguments http_response tls_server)
if [ $# -ge 1 ]; then
  targets=("$1")
fi
seconds="${2:-60}"

scripts/install-deps.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"

dir=build/fuzz/tests/fuzz
for target in "${targets[@]}"; do
  echo "== fuzz_${target}: ${seconds} s"
  "$dir/fuzz_${target}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/${target}-" \
    "$dir/corpus/${target}" "tests/fuzz/corpus/${target}"
done
