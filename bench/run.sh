#!/usr/bin/env bash
# attnmap benchmark (not a test): everything timed in one run on this machine, peers included, ratios printed.
#
#   bash bench/run.sh            # work files in /tmp/attnmap-bench (ViT-B weights ~0.7 GB JSON, 240 photos)
#   QUICK=1 bash bench/run.sh    # ViT-B/16 at 224 only, 2 rounds, no folder / JSON / PyTorch parts: minutes
#
# 1. Forward + class-token map per image, random weights (bench/make_vitb.py): ViT-B/16 (D=768, 12 heads),
#    ViT-S/16 (D=384, 6 heads), ViT-B/16 at 448 px (785 tokens). ROUNDS rounds, interleaved: each round prints
#    the load average, then runs the sgemm peak of the project's wrapper, attnmap at batch 1 and 8 on all
#    cores and batch 1 on one core, ONNX Runtime (onnxruntime-node from bench/onnx, the model exported from
#    the same weights by bench/onnx/export.py) the same, ONNX Runtime's second graph (export.py
#    --fused-attention: every block's attention as its fused contrib op com.microsoft.Attention, the last
#    block's class row as a small MatMul / Softmax) at batch 1 and 8, and PyTorch at batch 1 and 8; both ORT
#    graphs' maps are checked against attnmap's to 1e-4 before any timing. On an AVX-512 CPU, ViT-B/16 also
#    runs with ONEDNN_MAX_CPU_ISA=AVX2 (attnmap's AVX2 path; ORT runs as always). On a CPU with avx512_bf16,
#    attnmap also runs with ATTNMAP_BENCH_PRECISION=bf16 at batch 1 and 8 (--precision bf16). Best and median
#    over the rounds (each round's figure is best of ITERS). The ORT figure a ratio uses is the faster of the
#    two graphs (best over the rounds) for that model and batch.
#    attnmap's per-stage breakdown (GEMM, attention, element-wise, decode, resize, overlay, PNG) at batch 1.
# 2. A folder of 240 photos of mixed sizes, default model, end to end (whole process, wall clock): attnmap
#    render (default -j) vs the same job in Python (PIL + torch + matplotlib colormap + PIL save).
# 3. JSON weight loading MB/s (ViT-B JSON) and peak RSS.
# 4. The same folder with the ViT-B/16 (issue 20), end to end, whole process, wall clock, the same map in all
#    three (last block, mean over heads): attnmap render -w vitb.safetensors --layer -1 --head mean vs the job
#    written the usual way with ONNX Runtime (bench/folder_ort.py: PIL, numpy, vitb.onnx in an onnxruntime-node
#    co-process at full threads, batch 1, matplotlib, PIL save) and with PyTorch (torch_vit.py folder vitb.pt).
# Targets (2 cores; issue 30): (1) ViT-B/16, ViT-S/16 and ViT-B/16 448, batch 1 and 8: attnmap >= 1.05x
# faster than the faster ORT graph (attnmap ms * 1.05 <= ORT ms); the ViT-B forward >= 85 % of the same run's
# sgemm peak; the AVX2 path (ONEDNN_MAX_CPU_ISA=AVX2, ViT-B/16, batch 1 and 8) within 1.10x of the faster ORT
# graph (attnmap ms <= 1.10 x ORT ms); bf16 (where the CPU has it): ViT-B/16 >= 1.7x attnmap's fp32 speed at
# batch 1 and 8 (its ratio to ORT printed beside); (2) >= 8x PyTorch (bundled model);
# (3) >= 300 MB/s; a ViT-B safetensors F32 load + render: peak RSS <= file size + 120 MiB (every mode);
# (4) attnmap >= 1.3x faster than the ONNX Runtime job and >= 3x faster than the PyTorch one.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
W="${ATTNMAP_BENCH_DIR:-/tmp/attnmap-bench}"
PY=/usr/bin/python3
QUICK="${QUICK:-0}"
if [ "$QUICK" = 1 ]; then ITERS="${ITERS:-3}"; ROUNDS="${ROUNDS:-2}"; MODELS="${MODELS:-vitb}"
else ITERS="${ITERS:-4}"; ROUNDS="${ROUNDS:-3}"; MODELS="${MODELS:-vitb vits vitb448}"; fi
# BUILD: the build folder (default build/); GEMM=openblas|onednn: the sgemm wrapper's back-end for it.
B="${BUILD:-$ROOT/build}"
mkdir -p "$W"
cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release -DATTNMAP_BUILD_BENCH=ON ${GEMM:+-DATTNMAP_GEMM=$GEMM} >/dev/null
cmake --build "$B" -j2 --target attnmap attnmap_bench attnmap_bench_explain >/dev/null
if grep -q avx512_bf16 /proc/cpuinfo; then cmake --build "$B" -j2 --target attnmap_isa_peak >/dev/null; fi
# The PyTorch peers run with the machine's OpenBLAS tuning variables removed (this command only).
TORCH_ENV=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
# The ONNX Runtime peer (bench tooling only): onnxruntime-node pinned by bench/onnx/package-lock.json; its
# postinstall would fetch CUDA libraries, which the CPU peer does not need.
[ -d "$ROOT/bench/onnx/node_modules/onnxruntime-node" ] ||
  (cd "$ROOT/bench/onnx" && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error)

if [ "$QUICK" = 1 ]; then
  [ -f "$W/vitb.safetensors" ] && [ -f "$W/vitb.pt" ] || "$PY" "$ROOT/bench/make_vitb.py" "$W/vitb" --no-json
else
  [ -f "$W/vitb.json" ] && [ -f "$W/vitb.pt" ] || "$PY" "$ROOT/bench/make_vitb.py" "$W/vitb"
  [ -f "$W/vitb.safetensors" ] || "$PY" "$ROOT/bench/make_vitb.py" "$W/vitb" --only-safetensors
  [ -d "$W/photos" ] || "$PY" "$ROOT/bench/make_photos.py" "$W/photos" 240
fi
for m in $MODELS; do
  case $m in vits) opt=(--dim 384);; vitb448) opt=(--size 448);; *) opt=();; esac
  [ -f "$W/$m.safetensors" ] && [ -f "$W/$m.pt" ] || "$PY" "$ROOT/bench/make_vitb.py" "$W/$m" --no-json "${opt[@]}"
  [ -f "$W/$m.onnx" ] || "$PY" "$ROOT/bench/onnx/export.py" "$W/$m.pt" "$W/$m.onnx"
  [ -f "$W/$m.fused.onnx" ] || "$PY" "$ROOT/bench/onnx/export.py" "$W/$m.pt" "$W/$m.fused.onnx" --fused-attention
done
size_of() { case $1 in vitb448) echo 448;; *) echo 224;; esac; }
ORT=(node "$ROOT/bench/onnx/ort_vit.js")

R="$W/results.txt"
: >"$R"
# OpenBLAS reads OPENBLAS_CORETYPE at start-up; a machine that pins it to Haswell (AVX2) on an AVX-512 CPU
# gets half-width kernels (ONNX Runtime and oneDNN pick AVX-512 themselves). Then each round also times
# attnmap with OPENBLAS_CORETYPE=SkylakeX, printed beside the default (the targets use the default).
AVX512_CORE=""
if grep -q avx512f /proc/cpuinfo && [ "${OPENBLAS_CORETYPE:-}" = Haswell ] &&
   grep -q 'ATTNMAP_GEMM:STRING=openblas' "$B/CMakeCache.txt"; then AVX512_CORE=SkylakeX; fi
echo "== OpenBLAS core type from the environment: ${OPENBLAS_CORETYPE:-<unset: detected>}${AVX512_CORE:+ on an AVX-512 CPU (also timed with $AVX512_CORE)}" | tee -a "$R"
# attnmap's AVX2 path on an AVX-512 CPU (oneDNN reads ONEDNN_MAX_CPU_ISA at start-up), and its bf16 path
# where the CPU has bf16 dot products (attnmap_bench forward reads ATTNMAP_BENCH_PRECISION; a build that does
# not know it times fp32 again, and the summary's bf16 ratios are then about 1).
AVX2_ISA=""; grep -q avx512f /proc/cpuinfo && AVX2_ISA=AVX2
BF16=""; grep -q avx512_bf16 /proc/cpuinfo && BF16=bf16
echo "== CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); AVX2 path timed: ${AVX2_ISA:-no (no AVX-512: the default is it)}; bf16 timed: ${BF16:-no (no avx512_bf16)}" | tee -a "$R"
echo "== machine: $(nproc) cores, ROUNDS=$ROUNDS ITERS=$ITERS models: $MODELS, GEMM back-end: $(grep -o 'ATTNMAP_GEMM:STRING=.*' "$B/CMakeCache.txt" | cut -d= -f2)" | tee -a "$R"
# Each line "key value" is kept as "r<round>.<model>.key value"; the summary takes best and median.
tag() { sed "s/^/r$1.$2./" | tee -a "$R"; }
# Where bf16 is timed: one core's float32 FMA and bf16 dot-product peaks (bench/isa_peak.cpp), which bound
# what --precision bf16 can gain on this CPU.
if [ -n "$BF16" ]; then "$B/attnmap_isa_peak" | tag 0 all; fi
for m in $MODELS; do  # the peer's map against attnmap's, on bench's exact input pattern, before any timing
  "$B/attnmap_bench" check "$W/$m.safetensors" 2 "$W/$m.map.bin" >/dev/null
  ORT_SIZE=$(size_of "$m") "${ORT[@]}" "$W/$m.onnx" 2 1 2 "$W/$m.map.bin" | grep diff | tag 0 "$m"
  ORT_SIZE=$(size_of "$m") "${ORT[@]}" "$W/$m.fused.onnx" 2 1 2 "$W/$m.map.bin" | grep diff |
    sed 's/^ort_/ort_fused_/' | tag 0 "$m"
done
for r in $(seq 1 "$ROUNDS"); do
  echo "load_average_before_round $(cut -d' ' -f1 /proc/loadavg)" | tag "$r" all
  "$B/attnmap_bench" sgemm | grep gflops | tag "$r" all
  for m in $MODELS; do
    s=$(size_of "$m")
    echo "load_average $(cut -d' ' -f1 /proc/loadavg)" | tag "$r" "$m"
    "$B/attnmap_bench" forward "$W/$m.safetensors" "$ITERS" 1 8 | grep -v "^load_\|^cores" | tag "$r" "$m"
    if grep -q 'ATTNMAP_GEMM:STRING=onednn' "$B/CMakeCache.txt"; then  # oneDNN's matmul for the products
      ATTNMAP_GEMM_KERNELS=onednn "$B/attnmap_bench" forward "$W/$m.safetensors" "$ITERS" 1 8 |
        grep '^forward_\(median_\)\?ms' | sed 's/^forward_/forward_onednn_/' | tag "$r" "$m"
    fi
    if [ -n "$AVX512_CORE" ]; then  # the same forward with OpenBLAS's AVX-512 kernels (see the header line)
      OPENBLAS_CORETYPE=$AVX512_CORE "$B/attnmap_bench" forward "$W/$m.safetensors" "$ITERS" 1 8 |
        grep forward_ms | sed 's/forward_ms/forward_avx512_ms/' | tag "$r" "$m"
    fi
    if [ -n "$AVX2_ISA" ] && [ "$m" = vitb ]; then  # attnmap's AVX2 path (oneDNN capped; ORT is not)
      ONEDNN_MAX_CPU_ISA=$AVX2_ISA "$B/attnmap_bench" forward "$W/$m.safetensors" "$ITERS" 1 8 |
        grep '^forward_\(median_\)\?ms' | sed 's/^forward_/forward_avx2_/' | tag "$r" "$m"
    fi
    if [ -n "$BF16" ]; then  # --precision bf16 (see above); a failing bf16 run is reported, not fatal
      { ATTNMAP_BENCH_PRECISION=bf16 "$B/attnmap_bench" forward "$W/$m.safetensors" "$ITERS" 1 8 ||
          echo "note: attnmap_bench forward with ATTNMAP_BENCH_PRECISION=bf16 failed (exit $?): no bf16 figures" >&2; } |
        { grep '^forward_\(median_\)\?ms\|^checksum' || true; } |
        sed 's/^forward_/forward_bf16_/; s/^checksum_/checksum_bf16_/' | tag "$r" "$m"
    fi
    ATTNMAP_BENCH_THREADS=1 "$B/attnmap_bench" forward "$W/$m.safetensors" "$ITERS" 1 |
      grep forward_ms | sed 's/forward_ms/forward_1core_ms/' | tag "$r" "$m"
    ORT_SIZE=$s "${ORT[@]}" "$W/$m.onnx" 1 "$ITERS" 2 | tag "$r" "$m"
    ORT_SIZE=$s "${ORT[@]}" "$W/$m.onnx" 8 "$ITERS" 2 | tag "$r" "$m"
    ORT_SIZE=$s "${ORT[@]}" "$W/$m.onnx" 1 "$ITERS" 1 | tag "$r" "$m"
    for b in 1 8; do  # the fused com.microsoft.Attention graph, keys ort_fused_*
      ORT_SIZE=$s "${ORT[@]}" "$W/$m.fused.onnx" $b "$ITERS" 2 | sed 's/^ort_/ort_fused_/' | tag "$r" "$m"
    done
    if [ "$QUICK" != 1 ]; then
      for b in 1 8; do
        "${TORCH_ENV[@]}" "$PY" "$ROOT/bench/torch_vit.py" forward "$W/$m.pt" $b "$ITERS" |
          sed "s/image /image_b$b /" | tag "$r" "$m"
      done
    fi
  done
done
PHOTO="$ROOT/data/astronaut.png"
[ -f "$PHOTO" ] || PHOTO=$(find "$ROOT/data" -name '*.png' | head -1)
echo "== attnmap stages, ViT-B/16 batch 1, photo $(basename "$PHOTO")" | tee -a "$R"
"$B/attnmap_bench" stages "$W/vitb.safetensors" "$PHOTO" "$ITERS" | grep stage_ | tag 0 vitb
# Peak RSS of a ViT-B safetensors F32 run (load + one render): the tensors are used in place from the file's
# mapping, so the target is the file size + 120 MiB.
echo "== peak RSS: ViT-B safetensors F32, load + one render of $(basename "$PHOTO")" | tee -a "$R"
rm -rf "$W/out_rss"
/usr/bin/time -f "peak_rss_kb_safetensors_render %M" -a -o "$R" "$B/attnmap" render "$PHOTO" -w "$W/vitb.safetensors" -o "$W/out_rss" -q
echo "safetensors_file_bytes $(stat -c %s "$W/vitb.safetensors")" | tee -a "$R"
# Explanation maps (issue 19) on the same ViT-B with a random 1000-class head: chefer / gradcam / attn-grad per
# image vs attnmap's forward to the last block's map (target chefer <= 3x), and the same in eager PyTorch autograd.
if [ "$QUICK" != 1 ]; then
  echo "== ViT-B/16 explanation maps: attnmap chefer / gradcam / attn-grad vs its forward, and PyTorch" | tee -a "$R"
  "$B/attnmap_bench_explain" explain "$W/vitb.safetensors" "$ITERS" | tee -a "$R"
  "${TORCH_ENV[@]}" "$PY" "$ROOT/bench/torch_explain.py" "$W/vitb.pt" "$ITERS" \
    "$(awk '$1 == "explain_chefer_ms" {print $2}' "$R")" | tee -a "$R"
fi
if [ "$QUICK" != 1 ]; then
echo "== JSON weight loading: the same ViT-B as 0.7 GB of attnmap JSON" | tee -a "$R"
/usr/bin/time -f "peak_rss_kb_json_load %M" -a -o "$R" "$B/attnmap_bench" load "$W/vitb.json" | tee -a "$R"
/usr/bin/time -f "peak_rss_kb_vitb %M" -a -o "$R" "$B/attnmap_bench" forward "$W/vitb.safetensors" 1 8 >/dev/null
echo "== folder of $(find "$W/photos" -type f | wc -l) photos, end to end, whole process" | tee -a "$R"
rm -rf "$W/out_attnmap" "$W/out_python"
t0=$(date +%s.%N)
/usr/bin/time -f "peak_rss_kb_folder %M" -a -o "$R" "$B/attnmap" render "$W/photos" -o "$W/out_attnmap" -q
t1=$(date +%s.%N)
echo "attnmap_folder_seconds $(echo "$t1 - $t0" | bc)" | tee -a "$R"
t0=$(date +%s.%N)
"${TORCH_ENV[@]}" "$PY" "$ROOT/bench/torch_vit.py" folder "$ROOT/weights/default.json" "$W/photos" "$W/out_python" \
  --layer 1 --head 3 | tee -a "$R"  # the bundled model's default view, as attnmap draws it
t1=$(date +%s.%N)
echo "python_process_seconds $(echo "$t1 - $t0" | bc)" | tee -a "$R"
echo "== folder of $(find "$W/photos" -type f | wc -l) photos, ViT-B/16, end to end, whole process" | tee -a "$R"
[ -f "$W/vitb.onnx" ] || "$PY" "$ROOT/bench/onnx/export.py" "$W/vitb.pt" "$W/vitb.onnx"
rm -rf "$W/out_attnmap_vitb" "$W/out_ort_vitb" "$W/out_torch_vitb"
t0=$(date +%s.%N)
"$B/attnmap" render "$W/photos" -o "$W/out_attnmap_vitb" -w "$W/vitb.safetensors" --layer -1 --head mean -q
t1=$(date +%s.%N)
echo "attnmap_vitb_folder_seconds $(echo "$t1 - $t0" | bc)" | tee -a "$R"
t0=$(date +%s.%N)
"$PY" "$ROOT/bench/folder_ort.py" "$W/vitb.onnx" "$W/photos" "$W/out_ort_vitb" | tee -a "$R"
t1=$(date +%s.%N)
echo "ort_vitb_process_seconds $(echo "$t1 - $t0" | bc)" | tee -a "$R"
t0=$(date +%s.%N)
"${TORCH_ENV[@]}" "$PY" "$ROOT/bench/torch_vit.py" folder "$W/vitb.pt" "$W/photos" "$W/out_torch_vitb" --layer -1 --head mean |
  sed 's/^python_folder_/torch_vitb_folder_/' | tee -a "$R"
t1=$(date +%s.%N)
echo "torch_vitb_process_seconds $(echo "$t1 - $t0" | bc)" | tee -a "$R"

fi

"$PY" - "$R" <<'PYEOF'
import statistics
import sys
v, rounds, byround = {}, {}, {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) != 2:
        continue
    try:
        x = float(p[1])
    except ValueError:
        continue
    v[p[0]] = x
    k = p[0].split(".", 2)
    if len(k) == 3 and k[0].startswith("r"):
        rounds.setdefault((k[1], k[2]), []).append(x)
        byround.setdefault((k[1], k[2]), {})[k[0]] = x
def best(m, key, low=True):
    xs = rounds.get((m, key), [])
    return (min(xs) if low else max(xs)) if xs else float("nan")
def med(m, key):
    xs = rounds.get((m, key), [])
    return statistics.median(xs) if xs else float("nan")
def same_round(m, num, den):  # num / den of each round that has both (num: the smaller of num's keys), in round order
    d = byround.get((m, den), {})
    out = []
    for r in sorted(d, key=lambda s: int(s[1:])):
        n = [byround.get((m, k), {}).get(r) for k in num]
        n = [x for x in n if x is not None]
        if n:
            out.append(min(n) / d[r])
    return out
def show_ratios(xs):
    return "%s (median %.2fx)" % (" / ".join("%.2f" % x for x in xs), statistics.median(xs)) if xs else "-"
def mark(ok):
    return "MET" if ok else "NOT MET"
print("\n== summary (%s)" % sys.argv[1])
print("load average before each round: %s" % ", ".join("%.2f" % x for x in rounds.get(("all", "load_average_before_round"), [])))
peak = max(best("all", "sgemm_square_gflops", False), best("all", "sgemm_vitb_shapes_gflops", False))
print("sgemm peak (best over rounds): %.1f GFLOP/s" % peak)
if "r0.all.isa_fp32_fma_gflops_per_core" in v:  # the arithmetic bound (bench/isa_peak.cpp) on every core
    import os
    fma = v["r0.all.isa_fp32_fma_gflops_per_core"] * os.cpu_count()
    print("float32 FMA peak: %.0f GFLOP/s per core x %d cores = %.0f GFLOP/s; the sgemm peak is %.0f%% of it" % (
        v["r0.all.isa_fp32_fma_gflops_per_core"], os.cpu_count(), fma, 100 * peak / fma))
names = {"vitb": "ViT-B/16 224", "vits": "ViT-S/16 224", "vitb448": "ViT-B/16 448"}
nan = float("nan")
def ort(m, b):  # the faster ORT graph at batch b, 2 threads: (best ms, median ms, graph), by best over rounds
    c = [(best(m, "ort%s_ms_per_image_b%d_t2" % (k, b)), med(m, "ort%s_median_ms_per_image_b%d_t2" % (k, b)), g)
         for k, g in (("", "MatMul"), ("_fused", "fused"))]
    c = [x for x in c if x[0] == x[0]]
    return min(c) if c else (nan, nan, "-")
print("ms per image, best / median over the rounds (best: of every round's best of ITERS; median: of every round's median);")
print("ORT: MatMul/Softmax graph and com.microsoft.Attention graph; % peak: attnmap GFLOP/s / sgemm peak;")
print("speed-up = the faster ORT graph's best / attnmap's best, over all rounds (target >= 1.05x); below each row the")
print("same ratio round by round (each round's faster graph against attnmap in that round) and its median")
print("%-13s %-2s %17s %17s %17s %15s %6s %8s" % ("model", "b", "attnmap", "ORT MatMul", "ORT fused",
                                                   "speed-up", "% peak", "PyTorch"))
for m in [x for x in ("vitb", "vits", "vitb448") if (x, "forward_ms_per_image_b1") in rounds]:
    for b in (1, 8):
        a = best(m, "forward_ms_per_image_b%d" % b)
        am = med(m, "forward_median_ms_per_image_b%d" % b)  # as ORT's: the median of the rounds' medians
        o, om = best(m, "ort_ms_per_image_b%d_t2" % b), med(m, "ort_median_ms_per_image_b%d_t2" % b)
        f, fm = best(m, "ort_fused_ms_per_image_b%d_t2" % b), med(m, "ort_fused_median_ms_per_image_b%d_t2" % b)
        ob, _, og = ort(m, b)
        g = 100 * best(m, "forward_gflops_b%d" % b, False) / peak
        t = best(m, "torch_forward_ms_per_image_b%d" % b)
        print("%-13s %-2d %7.1f / %-7.1f %7.1f / %-7.1f %7.1f / %-7.1f %5.2fx %-8s %5.0f%% %8.1f   >= 1.05x: %s%s" % (
            names[m], b, a, am, o, om, f, fm, ob / a, "(%s)" % og, g, t, mark(a * 1.05 <= ob),
            ("; >= 85%% peak: %s" % mark(g >= 85)) if m == "vitb" else ""))
        print("%-13s %-2d same-round speed-ups %s" % (names[m], b, show_ratios(same_round(
            m, ["ort_ms_per_image_b%d_t2" % b, "ort_fused_ms_per_image_b%d_t2" % b], "forward_ms_per_image_b%d" % b))))
    if (m, "forward_onednn_ms_per_image_b1") in rounds:  # the same run with oneDNN's matmul for the products
        print("%-13s products on oneDNN's matmul (ATTNMAP_GEMM_KERNELS=onednn): batch 1 %.1f / %.1f ms, batch 8 %.1f / %.1f ms;"
              " own kernels' speed-up %.2fx / %.2fx" % (
                  names[m], best(m, "forward_onednn_ms_per_image_b1"), med(m, "forward_onednn_ms_per_image_b1"),
                  best(m, "forward_onednn_ms_per_image_b8"), med(m, "forward_onednn_ms_per_image_b8"),
                  best(m, "forward_onednn_ms_per_image_b1") / best(m, "forward_ms_per_image_b1"),
                  best(m, "forward_onednn_ms_per_image_b8") / best(m, "forward_ms_per_image_b8")))
    if (m, "forward_avx2_ms_per_image_b1") in rounds:
        for b in (1, 8):
            a2, ob, og = best(m, "forward_avx2_ms_per_image_b%d" % b), *ort(m, b)[::2]
            print("%-13s AVX2 path (ONEDNN_MAX_CPU_ISA=AVX2) batch %d: attnmap %.1f / %.1f ms, ORT (%s, own ISA) %.1f ms:"
                  " attnmap / ORT %.2fx   <= 1.10x: %s" % (
                      names[m], b, a2, med(m, "forward_avx2_ms_per_image_b%d" % b), og, ob, a2 / ob, mark(a2 <= 1.10 * ob)))
    if (m, "forward_bf16_ms_per_image_b1") in rounds and "r0.all.isa_bf16_over_fp32" in v and m == "vitb":
        print("%-13s one core's peak: float32 FMA %.0f GFLOP/s, bf16 dot products (VDPBF16PS) %.0f GFLOP/s = %.2fx" % (
            "CPU", v["r0.all.isa_fp32_fma_gflops_per_core"], v["r0.all.isa_bf16_dot_gflops_per_core"],
            v["r0.all.isa_bf16_over_fp32"]))
        if "r0.all.isa_amx_bf16_gflops_per_core" in v:  # AMX's tiles (oneDNN's brg:avx512_core_amx_bf16)
            print("%-13s one core's peak: AMX bf16 tiles (TDPBF16PS) %.0f GFLOP/s = %.2fx the float32 FMA" % (
                "CPU", v["r0.all.isa_amx_bf16_gflops_per_core"], v["r0.all.isa_amx_bf16_over_fp32"]))
    if (m, "forward_bf16_ms_per_image_b1") in rounds:
        if rounds.get((m, "checksum_bf16_b1")) == rounds.get((m, "checksum_b1")):
            print("%-13s bf16: the maps' checksums equal fp32's: this attnmap_bench ignores ATTNMAP_BENCH_PRECISION, "
                  "the bf16 lines are fp32 figures" % names[m])
        for b in (1, 8):
            h, a, (ob, _, og) = best(m, "forward_bf16_ms_per_image_b%d" % b), best(m, "forward_ms_per_image_b%d" % b), ort(m, b)
            print("%-13s bf16 (ATTNMAP_BENCH_PRECISION=bf16) batch %d: %.1f / %.1f ms, %.2fx attnmap fp32%s, %.2fx ORT (%s)" % (
                names[m], b, h, med(m, "forward_bf16_ms_per_image_b%d" % b), a / h,
                ("   >= 1.7x: %s" % mark(a >= 1.7 * h)) if m == "vitb" else "", ob / h, og))
    if (m, "forward_avx512_ms_per_image_b1") in rounds:
        print("%-13s OPENBLAS_CORETYPE=SkylakeX: batch 1 %.1f / %.1f ms (%.2fx faster than ORT), batch 8 %.1f / %.1f ms (%.2fx)" % (
            names[m], best(m, "forward_avx512_ms_per_image_b1"), med(m, "forward_avx512_ms_per_image_b1"),
            ort(m, 1)[0] / best(m, "forward_avx512_ms_per_image_b1"),
            best(m, "forward_avx512_ms_per_image_b8"), med(m, "forward_avx512_ms_per_image_b8"),
            ort(m, 8)[0] / best(m, "forward_avx512_ms_per_image_b8")))
    s1 = best(m, "forward_1core_ms_per_image_b1") / best(m, "forward_ms_per_image_b1")
    so = best(m, "ort_ms_per_image_b1_t1") / best(m, "ort_ms_per_image_b1_t2")
    print("%-13s 1 -> 2 cores (batch 1): attnmap %.2fx, ORT MatMul graph %.2fx (no target); round by round attnmap %s, "
          "ORT %s" % (names[m], s1, so,
                      show_ratios(same_round(m, ["forward_1core_ms_per_image_b1"], "forward_ms_per_image_b1")),
                      show_ratios(same_round(m, ["ort_ms_per_image_b1_t1"], "ort_ms_per_image_b1_t2"))))
    print("%-13s map vs ORT max |diff|: MatMul graph %.1e, fused graph %.1e (both checked <= 1e-4 before timing)" % (
        names[m], v.get("r0.%s.ort_map_max_abs_diff_b2" % m, nan), v.get("r0.%s.ort_fused_map_max_abs_diff_b2" % m, nan)))
st = [(k, v["r0.vitb.stage_%s_ms" % k]) for k in ("gemm", "attention", "elementwise", "decode", "resize", "overlay", "png")
      if "r0.vitb.stage_%s_ms" % k in v]
if st:
    print("attnmap stages (ViT-B batch 1, ms, best of ITERS): " + ", ".join("%s %.1f" % kv for kv in st))
if "peak_rss_kb_safetensors_render" in v:
    rss, fb = v["peak_rss_kb_safetensors_render"] * 1024, v["safetensors_file_bytes"]
    print("peak RSS, ViT-B safetensors F32 load + one render: %.0f MiB = file %.0f MiB + %.0f MiB   <= file + 120 MiB: %s" % (
        rss / 2**20, fb / 2**20, (rss - fb) / 2**20, mark(rss <= fb + 120 * 2**20)))
if "python_process_seconds" not in v:
    sys.exit(0)
def line(name, ratio, target, unit="x"):
    ok = "MET" if ratio >= target else "NOT MET"
    print("%-52s %8.2f%s   (target >= %g%s: %s)" % (name, ratio, unit, target, unit, ok))
line("(2) bundled model: PyTorch folder / attnmap folder (whole process)", v["python_process_seconds"] / v["attnmap_folder_seconds"], 8)
print("    images/s: attnmap %.1f, Python %.1f (in its loop: %.1f)" % (
    v["python_folder_images"] / v["attnmap_folder_seconds"], v["python_folder_images"] / v["python_process_seconds"],
    v["python_folder_images"] / v["python_folder_seconds"]))
line("(3) JSON load MB/s (wall clock)", v["load_mb_per_s"], 300, " MB/s")
print("    JSON load MB/s per CPU-second: %.0f (the wall clock counts other jobs on shared cores)" % v["load_mb_per_cpu_s"])
print("    peak RSS: ViT-B forward run %.0f MB, JSON load %.0f MB (weights %.0f MB as float32), folder run %.0f MB" % (
    v["peak_rss_kb_vitb"] / 1024, v["peak_rss_kb_json_load"] / 1024, 86.6e6 * 4 / 2**20, v["peak_rss_kb_folder"] / 1024))
if "torch_vitb_process_seconds" in v:
    a = v["attnmap_vitb_folder_seconds"]
    line("(4) ViT-B folder: ORT / attnmap (whole process)", v["ort_vitb_process_seconds"] / a, 1.3)
    line("(4) ViT-B folder: PyTorch / attnmap (whole process)", v["torch_vitb_process_seconds"] / a, 3)
    n = v["ort_folder_images"]
    print("    images/s: attnmap %.2f, ORT %.2f (in its loop: %.2f), PyTorch %.2f (in its loop: %.2f)" % (
        n / a, n / v["ort_vitb_process_seconds"], n / v["ort_folder_seconds"],
        n / v["torch_vitb_process_seconds"], n / v["torch_vitb_folder_seconds"]))
PYEOF
