#!/usr/bin/env bash
# gemm_backends.sh - bench tooling (not a test): builds bench/gemm_backends.cpp once per candidate GEMM
# (OpenBLAS, BLIS, libxsmm, oneDNN's dnnl_sgemm, attnmap's own kernels) and runs them one after the other,
# ROUNDS times (a shared machine's slow spells then hit every candidate), on one thread each, OpenBLAS and BLIS
# also with the kernels they pick for known CPUs; prints each candidate's best GFLOP/s per model, the CPU,
# the checksums, and the own kernels' ratio to the best library.
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

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model\s*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(grep -o -w 'avx512f\|avx512_bf16\|amx_tile\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
# Each library also with the kernels it picks on a CPU it knows: OpenBLAS honours OPENBLAS_CORETYPE (which a
# machine may set, e.g. to Haswell), BLIS BLIS_ARCH_TYPE (Debian's build falls back to "generic" on a CPU family
# it does not know, e.g. AMD family 26). A library's figure is its best variant's.
variants=("openblas:" "blis:" "blis:BLIS_ARCH_TYPE=haswell" "blis:BLIS_ARCH_TYPE=zen3" "libxsmm:" "onednn_sgemm:" "own:")
if grep -q -w avx512f /proc/cpuinfo; then
  variants+=("openblas:OPENBLAS_CORETYPE=SkylakeX" "blis:BLIS_ARCH_TYPE=skx")
fi
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then variants+=("openblas:OPENBLAS_CORETYPE=Zen"); fi
: > "$T/all.txt"
for r in $(seq "$ROUNDS"); do
  for v in "${variants[@]}"; do
    c=${v%%:*} e=${v#*:}
    # shellcheck disable=SC2086
    env $e "$T/$c" "$REPS" | sed "s/^/${e:-default} /" >> "$T/all.txt"
  done
done
/usr/bin/python3 - "$T/all.txt" <<'PYEOF'
import sys, collections
best, how, sums, arch = collections.defaultdict(float), {}, {}, set()
for line in open(sys.argv[1]):
    env, k, v = line.split()
    if k == "blis_arch":
        arch.add("%s (%s)" % (v, env))
    elif k.endswith("_checksum"):
        sums[k[5:-9]] = float(v)
    elif float(v) > best[k]:
        best[k], how[k] = float(v), env
libs = ["openblas", "blis", "libxsmm", "onednn_sgemm"]
print("BLIS sub-configurations run: " + ", ".join(sorted(arch)))
print("checksums of the products (they agree to rounding): " + ", ".join("%s %.6g" % kv for kv in sorted(sums.items())))
for model in ["vits", "vitb"]:
    keys = {c: "gemm_%s_%s_gflops" % (c, model) for c in libs + ["own"]}
    row = {c: best.get(keys[c], 0) for c in keys}
    lib = max(libs, key=lambda c: row[c])
    print("%s batch 1, one thread, GFLOP/s (best of rounds and variants): %s" % (model, ", ".join(
        "%s %.1f%s" % (c, row[c], "" if how.get(keys[c], "default") == "default" else " (%s)" % how[keys[c]])
        for c in libs + ["own"])))
    print("  own / best library (%s): %.2fx" % (lib, row["own"] / row[lib] if row[lib] else 0))
PYEOF
