#!/usr/bin/env bash
# bf16_folder.sh - issue 45 point 2 (not a test): a folder of 16 photos through a ViT-B/16, end to end (whole
# process, wall clock: load, packing, decode, forward, overlay, PNG), in float32 and in `--precision bf16`,
# ROUNDS interleaved rounds with the load average before each run, beside one core's float32 FMA and bf16
# dot-product rates (bench/isa_peak.cpp). Prints the CPU (family, model, bf16 / AMX flags), each run, and per
# precision the best and median wall time, and the median of the same-round ratios fp32 / bf16 (target >= 1.8x
# where VDPBF16PS runs at >= 1.8x the FMA).
#
#   bash bench/bf16_folder.sh                  # work files in /tmp/attnmap-bench (random ViT-B, 16 photos)
#   ROUNDS=8 BUILD=build-bench bash bench/bf16_folder.sh
#
# Needs $BUILD/attnmap and $BUILD/attnmap_isa_peak built (Release; bench/run.sh builds both).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
W="${ATTNMAP_BENCH_DIR:-/tmp/attnmap-bench}"
B="${BUILD:-$ROOT/build}"
ROUNDS="${ROUNDS:-5}"
PY=/usr/bin/python3
grep -q avx512_bf16 /proc/cpuinfo || { echo "this CPU has no avx512_bf16: --precision bf16 is refused here" >&2; exit 2; }
mkdir -p "$W"
[ -f "$W/vitb.safetensors" ] || "$PY" "$ROOT/bench/make_vitb.py" "$W/vitb" --no-json
[ -d "$W/photos16" ] || "$PY" "$ROOT/bench/make_photos.py" "$W/photos16" 16
echo "== CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(nproc) cores; flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|avx512_fp16|amx_bf16|amx_tile)$' | tr '\n' ' ')"
"$B/attnmap_isa_peak"
R="$W/bf16_folder.txt"
: >"$R"
for r in $(seq 1 "$ROUNDS"); do
  for p in fp32 bf16; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    rm -rf "$W/out_bf16_folder"
    /usr/bin/time -f "%e %U %S" -o "$W/bf16_folder.time" "$B/attnmap" render "$W/photos16" -w "$W/vitb.safetensors" \
      -o "$W/out_bf16_folder" --layer -1 --head mean -q --precision "$p"
    read -r wall user sys <"$W/bf16_folder.time"
    echo "round $r $p load $load wall_s $wall cpu_s $(echo "$user + $sys" | bc)" | tee -a "$R"
  done
done
"$PY" - "$R" <<'PYEOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    p = line.split()
    runs.setdefault(p[2], []).append((int(p[1]), float(p[6]), float(p[8])))
f, b = runs["fp32"], runs["bf16"]
for name, xs in (("fp32", f), ("bf16", b)):
    w = [x[1] for x in xs]
    print("%s: wall best %.2f s, median %.2f s; CPU median %.2f s" % (name, min(w), statistics.median(w),
                                                                   statistics.median(x[2] for x in xs)))
ratios = [a[1] / c[1] for a, c in zip(f, b)]
r = statistics.median(ratios)
print("fp32 / bf16 wall, same round: %s; median %.2fx, best-over-best %.2fx   >= 1.8x: %s" % (
    ", ".join("%.2f" % x for x in ratios), r, min(x[1] for x in f) / min(x[1] for x in b),
    "MET" if r >= 1.8 else "NOT MET"))
PYEOF
