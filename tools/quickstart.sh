#!/usr/bin/env bash
# One command: install what attnmap needs, build the tool (tests and benchmarks are tools/test.sh's), install
# it onto the PATH (cmake --install: /usr/local/bin/attnmap and its bundled weights), render data/ into out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTNMAP_BUILD_TESTS=OFF -DATTNMAP_BUILD_BENCH=OFF
cmake --build build -j"$(nproc)" --target attnmap
cmake --install build
attnmap render data/ -o out/
echo "quickstart: overlays written to $(pwd)/out/ by $(command -v attnmap)"
echo "quickstart: the default model is a small ViT trained on garment composites (data/composites), not an" \
     "ImageNet model: on ordinary photos its maps show what it finds salient, nothing more. To see what your" \
     "own model looks at: attnmap render -w YOUR.safetensors ... (docs/checkpoints.md)."
