#!/usr/bin/env bash
# The attention variants of issue 29 at the cost of their FLOPs: the forward pass + class-token map alone
# (attnmap_bench forward: one load, ITERS timed passes, no image decode or drawing) of ViT-B/16-sized random
# checkpoints in each family's own names (bench/make_families.py) against the plain timm ViT-B/16, rounds
# interleaved; prints the best ms/image per family, the same-run ratio to timm, and the ratio the FLOPs predict.
# A benchmark, not a test: nothing is asserted.
#
#   bash bench/variants.sh              # 3 rounds, 8 passes each, batch 1 and 8; work files in /tmp/attnmap-bench
#   ROUNDS=5 ITERS=16 bash bench/variants.sh
#
# The FLOPs (multiply-adds x 2 of the products: qkv, Q K^T, P V, proj, MLP; the class-token map needs every
# block but the last one's MLP, as attnmap's forward runs): beit adds one (H, T, T) addition per block (bias) and
# eva02 the rotations of the patch queries and keys, the sub-LayerNorm, and a SwiGLU of 2 x 2048 hidden units
# (the same matrix FLOPs as ViT-B's 3072-unit GELU MLP); cait (10 talking-heads self-attention blocks over the
# 196 patches + 2 class-attention blocks of one query) does less matrix work than ViT-B and adds two (H, H)
# mixings of H x N x N scores per self-attention block.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
W="${ATTNMAP_BENCH_DIR:-/tmp/attnmap-bench}/families"
PY=/usr/bin/python3
B="${BUILD:-$ROOT/build}"
ROUNDS="${ROUNDS:-3}"
ITERS="${ITERS:-8}"
FAMILIES=(timm beit eva02 cait)
mkdir -p "$W"
if [ -z "${ATTNMAP_BENCH_BIN:-}" ]; then
  cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release -DATTNMAP_BUILD_BENCH=ON >/dev/null
  cmake --build "$B" -j2 --target attnmap_bench >/dev/null
fi
BIN="${ATTNMAP_BENCH_BIN:-$B/attnmap_bench}"
for f in "${FAMILIES[@]}"; do
  [ -f "$W/$f.safetensors" ] || { "$PY" "$ROOT/bench/make_families.py" "$W"; break; }
done
# FLOPs of the forward as attnmap runs it for the class-token map of the last block (2 x multiply-adds).
flops() {
  "$PY" - "$1" <<'PY'
import sys
f = sys.argv[1]
D, L, H, N, M = 768, 12, 12, 196, 3072
T = N + 1
def block(T, mlp=True, hidden=M, swiglu=False, talking=False, q_rows=None):
    q = T if q_rows is None else q_rows
    x = 2 * T * D * 3 * D + 2 * q * T * D * 2 + 2 * q * D * D      # qkv, QK^T + PV, proj
    if talking: x += 2 * 2 * H * H * q * T                         # proj_l, proj_w over (H, T, T)
    if mlp: x += 2 * q * D * (2 * hidden if swiglu else hidden) + 2 * q * hidden * D
    return x
if f == "cait":
    total = sum(block(N, talking=True) for _ in range(10)) + block(T, q_rows=1) + block(T, mlp=False, q_rows=1)
elif f == "eva02":
    total = sum(block(T, hidden=2048, swiglu=True) for _ in range(L - 1)) + block(T, mlp=False)
else:
    total = sum(block(T) for _ in range(L - 1)) + block(T, mlp=False)
print(total)
PY
}
declare -A best1 best8 fl
for f in "${FAMILIES[@]}"; do fl[$f]=$(flops "$f"); done
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for f in "${FAMILIES[@]}"; do
    out=$("$BIN" forward "$W/$f.safetensors" "$ITERS" 1 8)
    b1=$(echo "$out" | awk '$1 == "forward_ms_per_image_b1" { print $2 }')
    b8=$(echo "$out" | awk '$1 == "forward_ms_per_image_b8" { print $2 }')
    echo "  $f: b1 $b1 ms/image, b8 $b8 ms/image"
    if [ -z "${best1[$f]:-}" ] || awk -v a="$b1" -v b="${best1[$f]}" 'BEGIN { exit !(a < b) }'; then best1[$f]=$b1; fi
    if [ -z "${best8[$f]:-}" ] || awk -v a="$b8" -v b="${best8[$f]}" 'BEGIN { exit !(a < b) }'; then best8[$f]=$b8; fi
  done
done
echo
echo "best of $ROUNDS rounds x $ITERS passes, forward + class-token map, ViT-B/16 224 px, $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs))"
printf "%-8s %9s %9s %11s %11s %12s\n" family "b1 ms" "b8 ms" "b1 / timm" "b8 / timm" "FLOPs / timm"
for f in "${FAMILIES[@]}"; do
  printf "%-8s %9s %9s %11s %11s %12s\n" "$f" "${best1[$f]}" "${best8[$f]}" \
    "$(awk -v a="${best1[$f]}" -v b="${best1[timm]}" 'BEGIN { printf "%.2f", a / b }')" \
    "$(awk -v a="${best8[$f]}" -v b="${best8[timm]}" 'BEGIN { printf "%.2f", a / b }')" \
    "$(awk -v a="${fl[$f]}" -v b="${fl[timm]}" 'BEGIN { printf "%.2f", a / b }')"
done
