#!/usr/bin/env bash
# One command: install dependencies, build attnmap, render every photo in data/ into out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
./build/attnmap render data/ -o out/
echo "quickstart: overlays written to $(pwd)/out/"
