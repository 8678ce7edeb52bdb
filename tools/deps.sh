#!/usr/bin/env bash
# Installs the Debian packages attnmap needs to build and test (as root on Debian 12). Idempotent: does
# nothing when every package is already installed.
set -euo pipefail
PACKAGES=(cmake g++ make pkg-config libstb-dev libcli11-dev nlohmann-json3-dev libopenblas-dev libgtest-dev libspng-dev fonts-dejavu-core libexif-dev clang libclang-rt-14-dev libfast-float-dev util-linux libzip-dev zlib1g-dev)
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
