#!/usr/bin/env bash
# gemm_backends.sh - bench tooling (not a test): builds bench/gemm_backends.cpp once per candidate GEMM
# (OpenBLAS, BLIS, libxsmm, oneDNN's dnnl_sgemm, attnmap's own kernels) and runs them one after the other,
# ROUNDS times (a shared machine's slow spells then hit every candidate), on one thread each; prints each
# candidate's best GFLOP/s per model, the CPU, and the own kernels' ratio to the best library.
#
#   bash bench/gemm_backends.sh [BUILD_DIR]     (BUILD_DIR: a Release build with libattnmap_model.a; default build)
#   ROUNDS=3 REPS=5                             (environment)
#
# Installs the libraries it compares (Debian: libblis-dev, libxsmm-dev; the build's own: libopenblas-dev,
# libdnnl-dev) when run as root and missing.
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(realpath "${1:-build}")
ROUNDS=${ROUNDS:-3}
REPS=${REPS:-5}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

pkgs=()
for p in libopenblas-dev libblis-dev libxsmm-dev libdnnl-dev; do dpkg -s "$p" >/dev/null 2>&1 || pkgs+=("$p"); done
if [ ${#pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}" >/dev/null
  else echo "gemm_backends.sh: missing ${pkgs[*]}" >&2; exit 2; fi
fi
[ -f "$B/libattnmap_model.a" ] || { echo "gemm_backends.sh: no $B/libattnmap_model.a (build attnmap first)" >&2; exit 2; }

CXX="g++ -std=c++17 -O3 -march=native -Isrc"
SRC=bench/gemm_backends.cpp
MULTIARCH=$(gcc -print-multiarch)
$CXX -DUSE_OPENBLAS "$SRC" -o "$T/openblas" -I/usr/include/$MULTIARCH/openblas-pthread -lopenblas
$CXX -DUSE_BLIS "$SRC" -o "$T/blis" -I/usr/include/$MULTIARCH /usr/lib/$MULTIARCH/libblis.so -lpthread
$CXX -DUSE_XSMM "$SRC" -o "$T/libxsmm" /usr/lib/libxsmm.a /usr/lib/libxsmmnoblas.a -lpthread -ldl -lm
$CXX -DUSE_DNNL "$SRC" -o "$T/onednn_sgemm" -ldnnl -lgomp
$CXX -DUSE_OWN "$SRC" -o "$T/own" "$B/libattnmap_model.a" "$B/libattnmap_checkpoint.a" "$B/libattnmap_core.a" \
  -lsleef -lpthread

if [ -n "${OPENBLAS_CORETYPE:-}" ]; then echo "note: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE is set (OpenBLAS runs that core type's kernels)"; fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model\s*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(grep -o -w 'avx512f\|avx512_bf16\|amx_tile\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
: > "$T/all.txt"
for r in $(seq "$ROUNDS"); do
  for c in openblas blis libxsmm onednn_sgemm own; do "$T/$c" "$REPS" | grep gflops >> "$T/all.txt"; done
done
/usr/bin/python3 - "$T/all.txt" <<'EOF'
import sys, collections
best = collections.defaultdict(float)
for line in open(sys.argv[1]):
    k, v = line.split()
    best[k] = max(best[k], float(v))
libs = ["openblas", "blis", "libxsmm", "onednn_sgemm"]
for model in ["vits", "vitb"]:
    row = {c: best.get("gemm_%s_%s_gflops" % (c, model), 0) for c in libs + ["own"]}
    lib = max(libs, key=lambda c: row[c])
    print("%s batch 1, one thread, GFLOP/s (best of rounds): %s" % (model, ", ".join("%s %.1f" % (c, row[c]) for c in libs + ["own"])))
    print("  own / best library (%s): %.2fx" % (lib, row["own"] / row[lib] if row[lib] else 0))
EOF
