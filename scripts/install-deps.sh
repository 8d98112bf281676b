#!/usr/bin/env bash
# Installs the Debian packages cyan needs to build, test and benchmark, if any are missing.
# Only Debian's archive is used; nothing is downloaded from anywhere else.
#   scripts/install-deps.sh         what the build and the tests need (scripts/test.sh)
#   scripts/install-deps.sh bench   also the pool benchmarks' peers: oneTBB, rayon, Tokio, Go
#                                   (scripts/bench.sh; without them those arms are skipped)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkgconf git
  libgtest-dev libgmock-dev libbenchmark-dev libev-dev liburing-dev
  libssl-dev openssl curl                             # TLS; openssl and curl: its tests' peers
  libboost1.81-dev libconcurrentqueue-dev libcds-dev   # benchmark peers only
  libomp-dev                                          # OpenMP benchmark baseline (clang)
  clang-14 libclang-rt-14-dev                         # the fuzz targets (libFuzzer)
  gnuplot-nox fonts-dejavu-core                       # the benchmark report's panels
  wrk nginx-light node-llhttp                         # HTTP: load, the nginx peer, llhttp sources
  python3                                             # the net tests' asyncio peer, the bench report
)
# The pool benchmarks' peers (forkjoin, factorial, sync): only for the benchmark command, so
# that the test command (and CI) does not install and build three toolchains it does not test.
if [ "${1:-}" = bench ]; then
  packages+=(libtbb-dev librust-rayon-dev librust-tokio-dev cargo golang-go)
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "cyan: installing missing Debian packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
