#!/usr/bin/env bash
# Installs the Debian packages attnmap needs (as root on Debian 12). Idempotent: does nothing when every
# package is already installed.
#   bash tools/deps.sh        what building and running attnmap needs (tools/quickstart.sh)
#   bash tools/deps.sh test   that plus the test suite's and the fuzz targets' tools (tools/test.sh)
set -euo pipefail
RUNTIME=(cmake g++ make pkg-config libstb-dev libcli11-dev nlohmann-json3-dev libfast-float-dev libopenblas-dev
         libspng-dev libexif-dev libsleef-dev libdnnl-dev fonts-dejavu-core)
TEST=(libgtest-dev util-linux clang libclang-rt-14-dev nodejs chromium)
PACKAGES=("${RUNTIME[@]}")
if [ "${1:-}" = test ]; then PACKAGES+=("${TEST[@]}"); fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The browser test's driver (test tooling only): puppeteer-core, pinned by tests/browser/package-lock.json;
# it drives Debian's chromium and downloads no browser of its own.
if [ "${1:-}" = test ] && [ ! -d "$(dirname "$0")/../tests/browser/node_modules/puppeteer-core" ]; then
  (cd "$(dirname "$0")/../tests/browser" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
