#!/usr/bin/python3
"""The Python module's per-image cost against the command line's, measured in the same run (issue 31).

Target: calling the module on one image costs no more than the CLI's per-image time plus a small constant.

For each model (the bundled default weights; a ViT-B/16: torchvision's vit_b_16 with random weights saved
as a .pth, or --vitb FILE):
  module   m = attnmap.load(W) once; m.forward(path) over N image files, the same view as the CLI's default;
           per-image = wall time / N (the best of --repeats runs, after one warm-up image).
  module+  attnmap.render_folder over the same N files: the CLI's whole job (decode, forward, draw, write
           the PNG) in process, per image.
  CLI      `attnmap render` over the N files and over 1 file (-j 1, -q, a new output folder each run); the
           per-image time is the slope (t(N) - t(1)) / (N - 1) (best of --repeats), which removes the program
           start and the weights' loading; the manifest's per-image "milliseconds" (median) is printed too.
forward does less than render (no drawing, no PNG), so module <= CLI is expected; render_folder is the
like-for-like figure. Printed: per-image ms of each, ratio module / CLI and difference in ms.

  /usr/bin/python3 bench/python_overhead.py [--n 8] [--repeats 3] [--build build] [--vitb FILE] [--no-vitb]
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def cli_run(cli, images, weights, out, extra=()):
    if out.exists():
        shutil.rmtree(out)
    args = [str(cli), "render", *map(str, images), "--out", str(out), "-q", "-j", "1",
            "--manifest", str(out) + ".jsonl", *extra]
    if weights:
        args += ["-w", str(weights)]
    t0 = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t = time.perf_counter() - t0
    rows = [json.loads(ln) for ln in open(str(out) + ".jsonl")][1:]
    os.unlink(str(out) + ".jsonl")
    return t, [r["milliseconds"] for r in rows]


def bench_model(attnmap, cli, label, weights, images, repeats, tmp):
    n = len(images)
    m = attnmap.load(str(weights)) if weights else attnmap.load()
    m.forward(str(images[0]))  # warm-up (thread pool, caches)
    fwd = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for img in images:
            m.forward(str(img))
        fwd.append((time.perf_counter() - t0) / n)
    folder = []
    src = tmp / f"in-{label}"
    src.mkdir(exist_ok=True)
    for img in images:
        dst = src / img.name
        if not dst.exists():
            os.symlink(img, dst)
    for i in range(repeats):
        out = tmp / f"mod-{label}-{i}"
        t0 = time.perf_counter()
        rep = attnmap.render_folder(str(src), str(out), model=m, jobs=1, quiet=True)
        folder.append((time.perf_counter() - t0) / n)
        assert rep.exit_code == 0
        shutil.rmtree(out)
    tn, t1, ms = [], [], []
    for i in range(repeats):
        t, rows = cli_run(cli, images, weights, tmp / f"cli-{label}-n{i}")
        tn.append(t)
        ms += rows
        t, _ = cli_run(cli, images[:1], weights, tmp / f"cli-{label}-1{i}")
        t1.append(t)
    slope = (min(tn) - min(t1)) / (n - 1)
    return {"model": label, "n": n, "module_forward_ms": 1e3 * min(fwd), "module_render_folder_ms": 1e3 * min(folder),
            "cli_slope_ms": 1e3 * slope, "cli_manifest_median_ms": statistics.median(ms),
            "cli_1_image_s": min(t1), "cli_n_images_s": min(tn)}


def make_vitb(tmp):
    import torch
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(weights=None).eval()
    path = tmp / "vit_b_16.pth"
    torch.save(model.state_dict(), str(path))
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=8, help="images per run (default 8)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each measurement; the best is kept")
    ap.add_argument("--build", default=str(REPO / "build"), help="the build folder (its attnmap and python/)")
    ap.add_argument("--images", default=str(REPO / "data" / "composites"), help="a folder of images")
    ap.add_argument("--vitb", help="a ViT-B checkpoint to use instead of a random torchvision vit_b_16")
    ap.add_argument("--no-vitb", action="store_true", help="the bundled model only")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    build = pathlib.Path(a.build).resolve()
    sys.path.insert(0, str(build / "python"))
    import attnmap
    cli = build / "attnmap"
    images = sorted(p for p in pathlib.Path(a.images).iterdir() if p.suffix.lower() in (".png", ".jpg", ".jpeg"))
    if len(images) < a.n:
        sys.exit(f"python_overhead: {a.images} has {len(images)} images, fewer than --n {a.n}")
    images = images[:a.n]
    if a.n < 2:
        sys.exit("python_overhead: --n must be at least 2 (the CLI's per-image time is a slope)")
    results = []
    with tempfile.TemporaryDirectory(prefix="attnmap-pybench-") as d:
        tmp = pathlib.Path(d)
        models = [("default", None)]
        if not a.no_vitb:
            models.append(("vit_b_16", pathlib.Path(a.vitb) if a.vitb else make_vitb(tmp)))
        for label, w in models:
            results.append(bench_model(attnmap, cli, label, w, images, a.repeats, tmp))
    print(f"attnmap {attnmap.__version__}, {os.cpu_count()} cores, {a.n} images of {a.images}, best of {a.repeats}")
    print(f"{'model':10s} {'module fwd':>11s} {'module run':>11s} {'CLI slope':>10s} {'CLI rows':>9s}   "
          f"{'fwd/CLI':>7s} {'fwd-CLI':>9s} {'run/CLI':>7s} {'run-CLI':>9s}")
    for r in results:
        c = r["cli_slope_ms"]
        f, g = r["module_forward_ms"], r["module_render_folder_ms"]
        r.update(ratio_forward=f / c, diff_forward_ms=f - c, ratio_render_folder=g / c, diff_render_folder_ms=g - c)
        print(f"{r['model']:10s} {f:9.1f}ms {g:9.1f}ms {c:8.1f}ms {r['cli_manifest_median_ms']:7.1f}ms   "
              f"{f / c:7.2f} {f - c:+7.1f}ms {g / c:7.2f} {g - c:+7.1f}ms")
    print("module fwd: Model.forward(path) per image; module run: attnmap.render_folder per image (decode, "
          "forward, draw, write: the CLI's job); CLI slope: (t(N) - t(1)) / (N - 1) of `attnmap render -j 1`; "
          "CLI rows: the manifest's median per-image milliseconds")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
