#!/usr/bin/env bash
# Each checkpoint family at the speed of a plain ViT of the same size (issue 24): a folder of photos rendered
# end to end (whole process, wall clock, default -j) with a ViT-B/16-sized random checkpoint in every family's
# own names (bench/make_families.py), against the plain timm ViT-B/16 in the same rounds; prints ms/image and
# the ratio to timm per family (1.00 = the same speed). A benchmark, not a test: nothing is asserted.
#
#   bash bench/families.sh              # 24 photos, 3 rounds interleaved, work files in /tmp/attnmap-bench
#   PHOTOS=60 ROUNDS=5 bash bench/families.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
W="${ATTNMAP_BENCH_DIR:-/tmp/attnmap-bench}/families"
PY=/usr/bin/python3
B="${BUILD:-$ROOT/build}"
PHOTOS="${PHOTOS:-24}"
ROUNDS="${ROUNDS:-3}"
FAMILIES=(timm timm-clip clip hf-clip timm-qknorm timm-ls timm-gap timm-siglip dinov2-swiglu vit-pytorch simple-vit cait eva02 beit)
mkdir -p "$W"
# ATTNMAP_BIN: a binary to time instead of building $B/attnmap.
BIN="${ATTNMAP_BIN:-$B/attnmap}"
if [ -z "${ATTNMAP_BIN:-}" ]; then
  cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$B" -j2 --target attnmap >/dev/null
fi
for f in "${FAMILIES[@]}"; do  # (re)made when any family's file is missing (a family added since)
  [ -f "$W/$f.safetensors" ] || { "$PY" "$ROOT/bench/make_families.py" "$W"; break; }
done
[ -d "$W/photos" ] || "$PY" "$ROOT/bench/make_photos.py" "$W/photos" "$PHOTOS"
n=$(find "$W/photos" -type f | wc -l)
declare -A best
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for f in "${FAMILIES[@]}"; do
    rm -rf "$W/out"
    t0=$(date +%s%N)
    "$BIN" render "$W/photos" -w "$W/$f.safetensors" -o "$W/out" -q
    t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    per=$(awk -v ms="$ms" -v n="$n" 'BEGIN { printf "%.1f", ms / n }')
    echo "  $f: $per ms/image"
    if [ -z "${best[$f]:-}" ] || awk -v a="$per" -v b="${best[$f]}" 'BEGIN { exit !(a < b) }'; then best[$f]=$per; fi
  done
done
echo
echo "best of $ROUNDS rounds, $n photos, ViT-B/16 224 px, $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs))"
printf "%-16s %10s %14s\n" family "ms/image" "ratio to timm"
for f in "${FAMILIES[@]}"; do
  printf "%-16s %10s %14s\n" "$f" "${best[$f]}" "$(awk -v a="${best[$f]}" -v b="${best[timm]}" 'BEGIN { printf "%.2f", a / b }')"
done
