#!/usr/bin/env bash
# attnmap benchmark (not a test): everything timed in one run on this machine, peers included, ratios printed.
#
#   bash bench/run.sh            # work files in /tmp/attnmap-bench (ViT-B weights ~0.7 GB JSON, 240 photos)
#
# 1. ViT-B/16 (random weights, 12 blocks, 12 heads, D=768): attnmap forward + class-token map per image at
#    batch 1 and 8, vs PyTorch (torch.set_num_threads = cores) at batch 1 and 8, vs the sgemm peak of the
#    project's sgemm wrapper measured in this run.
# 2. A folder of 240 photos of mixed sizes, default model, end to end (whole process, wall clock): attnmap
#    render (default -j) vs the same job in Python (PIL + torch + matplotlib colormap + PIL save).
# 3. JSON weight loading MB/s (ViT-B JSON) and peak RSS.
# 4. Explanation maps (issue 19) on the same ViT-B with a random 1000-class head: chefer / gradcam / attn-grad
#    per image vs attnmap's forward to the last block's map (target chefer <= 3x), and Chefer's notebook method
#    in eager PyTorch autograd with hooks (bench/torch_explain.py).
# Targets (2 cores): (1) >= 5x PyTorch batch 1 and >= 75 % of the sgemm peak; (2) >= 3x Python; (3) >= 200 MB/s.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
W="${ATTNMAP_BENCH_DIR:-/tmp/attnmap-bench}"
PY=/usr/bin/python3
ITERS="${ITERS:-4}"
mkdir -p "$W"
cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DATTNMAP_BUILD_BENCH=ON >/dev/null
cmake --build "$ROOT/build" -j2 --target attnmap attnmap_bench >/dev/null
B="$ROOT/build"
# The PyTorch peers run with the machine's OpenBLAS tuning variables removed (this command only).
TORCH_ENV=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)

[ -f "$W/vitb.json" ] && [ -f "$W/vitb.pt" ] || "$PY" "$ROOT/bench/make_vitb.py" "$W/vitb"
[ -f "$W/vitb.safetensors" ] || "$PY" "$ROOT/bench/make_vitb.py" "$W/vitb" --only-safetensors
[ -d "$W/photos" ] || "$PY" "$ROOT/bench/make_photos.py" "$W/photos" 240

R="$W/results.txt"
: >"$R"
echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$R"
echo "== sgemm peak (project wrapper, OpenBLAS, all cores)" | tee -a "$R"
"$B/attnmap_bench" sgemm | tee -a "$R"
echo "== ViT-B/16 attnmap forward + map (weights from safetensors)" | tee -a "$R"
/usr/bin/time -f "peak_rss_kb_vitb %M" -a -o "$R" "$B/attnmap_bench" forward "$W/vitb.safetensors" "$ITERS" 1 8 |
  sed 's/^load_/st_load_/' | tee -a "$R"
echo "== JSON weight loading: the same ViT-B as 0.7 GB of attnmap JSON" | tee -a "$R"
/usr/bin/time -f "peak_rss_kb_json_load %M" -a -o "$R" "$B/attnmap_bench" load "$W/vitb.json" | tee -a "$R"
echo "== ViT-B/16 PyTorch forward + map" | tee -a "$R"
"${TORCH_ENV[@]}" "$PY" "$ROOT/bench/torch_vit.py" forward "$W/vitb.pt" 1 "$ITERS" | sed 's/image /image_b1 /' | tee -a "$R"
"${TORCH_ENV[@]}" "$PY" "$ROOT/bench/torch_vit.py" forward "$W/vitb.pt" 8 "$ITERS" | sed 's/image /image_b8 /' | tee -a "$R"
echo "== ViT-B/16 explanation maps (issue 19): attnmap chefer / gradcam / attn-grad vs its forward, and PyTorch" | tee -a "$R"
"$B/attnmap_bench" explain "$W/vitb.safetensors" "$ITERS" | tee -a "$R"
"${TORCH_ENV[@]}" "$PY" "$ROOT/bench/torch_explain.py" "$W/vitb.pt" "$ITERS" \
  "$(awk '$1 == "explain_chefer_ms" {print $2}' "$R")" | tee -a "$R"
echo "== sgemm peak again (after the forward runs)" | tee -a "$R"
"$B/attnmap_bench" sgemm | sed 's/^sgemm_/sgemm2_/' | tee -a "$R"

echo "== folder of $(find "$W/photos" -type f | wc -l) photos, end to end, whole process" | tee -a "$R"
rm -rf "$W/out_attnmap" "$W/out_python"
t0=$(date +%s.%N)
/usr/bin/time -f "peak_rss_kb_folder %M" -a -o "$R" "$B/attnmap" render "$W/photos" -o "$W/out_attnmap" -q
t1=$(date +%s.%N)
echo "attnmap_folder_seconds $(echo "$t1 - $t0" | bc)" | tee -a "$R"
t0=$(date +%s.%N)
"${TORCH_ENV[@]}" "$PY" "$ROOT/bench/torch_vit.py" folder "$ROOT/weights/default.json" "$W/photos" "$W/out_python" | tee -a "$R"
t1=$(date +%s.%N)
echo "python_process_seconds $(echo "$t1 - $t0" | bc)" | tee -a "$R"

"$PY" - "$R" <<'PYEOF'
import sys
v = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 2:
        try:
            v[p[0]] = float(p[1])
        except ValueError:
            pass
peak = max(v["sgemm_vitb_shapes_gflops"], v["sgemm_square_gflops"], v["sgemm2_vitb_shapes_gflops"], v["sgemm2_square_gflops"])
def line(name, ratio, target, unit="x"):
    ok = "MET" if ratio >= target else "NOT MET"
    print("%-52s %8.2f%s   (target >= %g%s: %s)" % (name, ratio, unit, target, unit, ok))
print("\n== summary (%s)" % sys.argv[1])
print("ViT-B ms/image (best of ITERS): attnmap b1 %.1f  b8 %.1f   PyTorch: b1 %.1f  b8 %.1f" % (
    v["forward_ms_per_image_b1"], v["forward_ms_per_image_b8"], v["torch_forward_ms_per_image_b1"], v["torch_forward_ms_per_image_b8"]))
best = min(v["forward_ms_per_image_b1"], v["forward_ms_per_image_b8"])
line("(1) PyTorch b1 / attnmap b1", v["torch_forward_ms_per_image_b1"] / v["forward_ms_per_image_b1"], 5)
line("    PyTorch b8 / attnmap best batch", v["torch_forward_ms_per_image_b8"] / best, 1)
line("(1) attnmap b1 GFLOP/s / sgemm peak", 100 * v["forward_gflops_b1"] / peak, 75, "%")
line("    attnmap b8 GFLOP/s / sgemm peak", 100 * v["forward_gflops_b8"] / peak, 75, "%")
line("(2) Python folder / attnmap folder (whole process)", v["python_process_seconds"] / v["attnmap_folder_seconds"], 3)
print("    images/s: attnmap %.1f, Python %.1f (in its loop: %.1f)" % (
    v["python_folder_images"] / v["attnmap_folder_seconds"], v["python_folder_images"] / v["python_process_seconds"],
    v["python_folder_images"] / v["python_folder_seconds"]))
print("    explanation maps (issue 19), ms per image: attnmap chefer %.1f, gradcam %.1f, attn-grad %.1f; PyTorch chefer %.1f" % (
    v["explain_chefer_ms"], v["explain_gradcam_ms"], v["explain_attn_grad_ms"], v["torch_chefer_ms"]))
ok = "MET" if v["explain_chefer_over_forward"] <= 3 else "NOT MET"
print("%-52s %8.2fx   (target <= 3x: %s)" % ("    attnmap chefer / attnmap forward", v["explain_chefer_over_forward"], ok))
line("    PyTorch chefer / attnmap chefer", v["attnmap_chefer_speedup_over_torch"], 1)
line("(3) JSON load MB/s (wall clock)", v["load_mb_per_s"], 200, " MB/s")
print("    JSON load MB/s per CPU-second: %.0f (the wall clock counts other jobs on shared cores)" % v["load_mb_per_cpu_s"])
print("    peak RSS: ViT-B forward run %.0f MB, JSON load %.0f MB (weights %.0f MB as float32), folder run %.0f MB" % (
    v["peak_rss_kb_vitb"] / 1024, v["peak_rss_kb_json_load"] / 1024, 86.6e6 * 4 / 2**20, v["peak_rss_kb_folder"] / 1024))
PYEOF
