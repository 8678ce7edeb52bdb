#!/usr/bin/env bash
# One command: installs the Python module `attnmap` into Debian's Python (/usr/bin/python3), offline, from
# Debian's packages only: the build's dependencies (tools/deps.sh: pybind11-dev, python3-dev, python3-numpy
# among them), the build with -DATTNMAP_PYTHON=ON, then `cmake --install --component python`, which puts the
# package (with the bundled default weights) into the interpreter's site folder
# (/usr/local/lib/python3.11/dist-packages on Debian 12). Then: /usr/bin/python3 -c "import attnmap".
#   BUILD_DIR=build-python (default) is the build folder used.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
build="${BUILD_DIR:-build-python}"  # its own folder: a release build of the module alone, no tests
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DATTNMAP_PYTHON=ON -DATTNMAP_BUILD_TESTS=OFF -DATTNMAP_BUILD_BENCH=OFF
cmake --build "$build" -j"$(nproc)" --target attnmap_python attnmap
cmake --install "$build" --component python
site="$(/usr/bin/python3 -c "import sysconfig; print(sysconfig.get_path('platlib'))")"
(cd / && /usr/bin/python3 -c "import attnmap; print('attnmap', attnmap.__version__, 'installed in', attnmap.__file__)")
echo "(from $site; uninstall: rm -r $site/attnmap)"
