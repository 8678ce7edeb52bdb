"""Same bits as the CLI: Model.forward(...).maps[i].array equals, bit for bit (np.array_equal), the .npy that
`attnmap render IMG -w W --views V --save-raw` writes for the same image, weights and settings.

The CLI's file of each map is found from its stdout (the PNG it lists for the map, with .npy): maps come in
view order, class-specific views one per class (NAME.chefer.class-LABEL.npy with several classes).
"""
import json

import numpy as np
import pytest

import amtest
from amtest import DATA, FIX, REPO, cli_raw_maps, rgb_array, run_cli

DEFAULT_IMAGES = [DATA / "rocket.jpg", DATA / "camera.png", REPO / "tests" / "images" / "basic" / "rgba.png",
                  DATA / "composites" / "0000_trouser.png"]
SMALL_IMAGES = [DATA / "coffee.png", DATA / "composites" / "0003_coat.png"]

# (id, weights (None = bundled), load keywords, CLI weight args, images, forward keywords, CLI render args)
CASES = [
    ("default-views", None, {}, [], DEFAULT_IMAGES,
     {"views": "L-1/mean,L0/h1,rollout,L1/mean:q=r3c4,chefer"},
     ["--views", "L-1/mean,L0/h1,rollout,L1/mean:q=r3c4,chefer"]),
    ("default-single-view", None, {}, [], DEFAULT_IMAGES[:2], {}, []),
    ("default-layer-head", None, {}, [], DEFAULT_IMAGES[:2], {"layer": -1, "head": "max"},
     ["--layer", "-1", "--head", "max"]),
    ("default-rollout-discard", None, {}, [], DEFAULT_IMAGES[:2], {"rollout": True, "discard": 0.5},
     ["--rollout", "--discard", "0.5"]),
    ("default-query", None, {}, [], DEFAULT_IMAGES[:1], {"layer": 2, "head": 1, "query": "r7c3"},
     ["--layer", "2", "--head", "1", "--query", "r7c3"]),
    ("default-crop", None, {}, [], DEFAULT_IMAGES[:2], {"views": "L-1/mean,rollout,L0/h2:k=r5c5,L2/max:received",
                                                        "resize": "crop"},
     ["--views", "L-1/mean,rollout,L0/h2:k=r5c5,L2/max:received", "--resize", "crop"]),
    ("default-top2", None, {}, [], DEFAULT_IMAGES[:1], {"views": "chefer,attn-grad,gradcam", "classes": "top2"},
     ["--views", "chefer,attn-grad,gradcam", "--class", "top2"]),
    ("default-explain", None, {}, [], DEFAULT_IMAGES[:1], {"explain": "chefer"}, ["--explain", "chefer"]),
    ("default-size", None, {"size": (320, 224)}, ["--size", "320,224"], DEFAULT_IMAGES[:2],
     {"views": "L-1/mean,rollout,chefer"}, ["--views", "L-1/mean,rollout,chefer"]),
    ("layouts-timm-safetensors", FIX / "layouts" / "timm" / "weights.safetensors", {}, [], SMALL_IMAGES,
     {"views": "L-1/mean,L0/h1,rollout,L1/mean:q=r2c3,chefer"}, ["--views", "L-1/mean,L0/h1,rollout,L1/mean:q=r2c3,chefer"]),
    # (no chefer: attnmap's backward does not handle rotary embeddings (DINOv3) or a mean-pooled head (BEiT) yet)
    ("dinov3-small-safetensors", FIX / "families" / "dinov3_small" / "model.safetensors", {}, [], SMALL_IMAGES,
     {"views": "L-1/mean,L0/h1,rollout,L1/mean:q=r1c2"}, ["--views", "L-1/mean,L0/h1,rollout,L1/mean:q=r1c2"]),
    ("beit-relpos-pth", FIX / "families" / "beit_relpos" / "model.pth", {}, [], SMALL_IMAGES,
     {"views": "L-1/mean,L0/h1,rollout,L1/mean:q=r1c2"}, ["--views", "L-1/mean,L0/h1,rollout,L1/mean:q=r1c2"]),
    ("timm-clip-pth-chefer", FIX / "families" / "timm_clip" / "model.pth", {}, [], SMALL_IMAGES,
     {"views": "L-1/mean,rollout,chefer"}, ["--views", "L-1/mean,rollout,chefer"]),
    ("hf-dinov2-reg-folder", FIX / "families" / "hf_dinov2_reg", {}, [], SMALL_IMAGES[:1],
     {"views": "L-1/mean,L0/h1,rollout,L1/mean:q=r1c2,L-1/mean:q=reg0"},
     ["--views", "L-1/mean,L0/h1,rollout,L1/mean:q=r1c2,L-1/mean:q=reg0"]),
]


@pytest.fixture(scope="module")
def models(attnmap):
    cache = {}

    def get(weights, load_kw):
        key = (str(weights), tuple(sorted(load_kw.items())))
        if key not in cache:
            cache[key] = attnmap.load(None if weights is None else str(weights), **load_kw)
        return cache[key]
    return get


@pytest.mark.parametrize("cid,weights,load_kw,wargs,images,fkw,cargs", CASES, ids=[c[0] for c in CASES])
def test_forward_equals_cli_npy(models, tmp_path, cid, weights, load_kw, wargs, images, fkw, cargs):
    m = models(weights, load_kw)
    w = [] if weights is None else ["-w", str(weights)]
    ref = cli_raw_maps(tmp_path, [str(p) for p in images], w + wargs + cargs)
    for img in images:
        r = m.forward(str(img), **fkw)
        want = ref[str(img)]
        assert len(r.maps) == len(want), f"{img.name}: {[mp.view for mp in r.maps]} vs {[n for n, _ in want]}"
        for mp, (fname, arr) in zip(r.maps, want):
            a = mp.array
            assert a.dtype == np.float32 and a.shape == arr.shape, (fname, a.dtype, a.shape, arr.shape)
            assert np.array_equal(a, arr), (f"{img.name} {mp.view}: differs from the CLI's {fname}, "
                                            f"max |diff| {np.abs(a.astype(np.float64) - arr).max():.3g}")
            # the file is NAME.<tag>[.class-LABEL].npy; one map alone keeps NAME.npy
            if len(want) > 1:
                assert fname.startswith(f"{img.stem}.{mp.tag}"), (fname, mp.tag)


def test_array_and_pil_inputs(attnmap, default_model, tmp_path):
    """A uint8 (H, W, 3) array and a PIL image of a lossless file give the file's bits."""
    Image = amtest.need("PIL.Image")
    views = "L-1/mean,L0/h1,rollout,L1/mean:q=r3c4,chefer"
    imgs = [DATA / "coffee.png", DATA / "camera.png", DATA / "composites" / "0002_bag.png"]
    ref = cli_raw_maps(tmp_path, [str(p) for p in imgs], ["--views", views])
    for img in imgs:
        arr = rgb_array(img)
        assert arr.dtype == np.uint8 and arr.ndim == 3 and arr.shape[2] == 3
        for inp in (arr, Image.open(img)):
            r = default_model.forward(inp, views=views)
            for mp, (fname, want) in zip(r.maps, ref[str(img)]):
                assert np.array_equal(mp.array, want), (type(inp).__name__, img.name, fname)
    # a list of inputs -> a list of results, in order, the same bits
    rs = default_model.forward([str(imgs[0]), rgb_array(imgs[1])], views=views)
    assert isinstance(rs, list) and len(rs) == 2
    for r, img in zip(rs, imgs[:2]):
        for mp, (fname, want) in zip(r.maps, ref[str(img)]):
            assert np.array_equal(mp.array, want), (img.name, fname)


def test_result_and_map_metadata(default_model, tmp_path):
    img = DATA / "rocket.jpg"
    r = default_model.forward(str(img), views="L-1/mean,L0/h1,rollout,L1/mean:q=r3c4,chefer")
    assert [mp.view for mp in r.maps] == ["L3/mean", "L0/h1", "rollout", "L1/mean:q=r3c4", "chefer"]
    assert [mp.tag for mp in r.maps] == ["L3-mean", "L0-h1", "rollout", "L1-mean-q-r3c4", "chefer"]
    assert r.maps[0].block == 3 and r.maps[1].block == 0 and r.maps[3].block == 1
    for mp in r.maps:
        assert mp.array.shape == (14, 14) and mp.array.dtype == np.float32
        assert np.array_equal(np.asarray(mp), mp.array)
        assert isinstance(mp.label, str) and mp.label and isinstance(mp.units, str) and mp.units
    assert r.maps[0].units == "attention probability"
    assert r.maps[1].label == "block 0, head 1"
    assert r.maps[3].marked_patch == 3 * 14 + 4
    # by view name or tag
    assert np.array_equal(r["L3/mean"].array, r.maps[0].array)
    assert np.array_equal(r["L0-h1"].array, r.maps[1].array)
    with pytest.raises(KeyError):
        r["L2/h0"]
    # class probabilities, top-5 and the class-specific map's class
    labels = default_model.info["labels"]
    assert r.probs.shape == (10,) and r.probs.dtype == np.float64
    assert abs(r.probs.sum() - 1) < 1e-12
    top = int(np.argmax(r.probs))
    ch = r.maps[4]
    assert ch.class_index == top and ch.class_name == labels[top] == "Pullover"
    assert r.maps[0].class_index is None and r.maps[0].class_name is None
    assert [lbl for lbl, _ in r.top5] == [labels[i] for i in np.argsort(-r.probs, kind="stable")[:5]]
    # the same top-5 as the CLI's manifest
    run_cli("render", str(img), "--out", tmp_path, "--manifest", tmp_path / "m.jsonl", "-q")
    row = [json.loads(ln) for ln in (tmp_path / "m.jsonl").read_text().splitlines()][1]
    assert [t["label"] for t in row["top5"]] == [lbl for lbl, _ in r.top5]
    for t, (_, p) in zip(row["top5"], r.top5):
        assert abs(t["probability"] - p) < 1e-6
    # the model input's box on the photo: squash = the whole photo
    assert tuple(r.box) == (0, 0, 640, 427)
    assert r.attentions is None
    assert isinstance(r.notes, list)


def test_attentions(default_model):
    """attentions=True: (L, H, T, T) float32 softmax rows; the maps are rows of it."""
    r = default_model.forward(str(DATA / "coffee.png"), views="L-1/mean,L0/h1,L1/mean:q=r3c4", attentions=True)
    A = r.attentions
    assert A.shape == (4, 4, 197, 197) and A.dtype == np.float32
    assert np.abs(A.sum(-1, dtype=np.float64) - 1).max() < 1e-5
    checks = [(r.maps[0], A[3].astype(np.float64).mean(0)[0, 1:]), (r.maps[1], A[0, 1, 0, 1:]),
              (r.maps[2], A[1].astype(np.float64).mean(0)[1 + 3 * 14 + 4, 1:])]
    for mp, row in checks:
        d = np.abs(mp.array.astype(np.float64) - row.reshape(14, 14)).max()
        assert d < 1e-6, f"{mp.view}: max |map - attentions row| = {d:.3g}"
    # a single head's map is that row of the returned attentions exactly
    assert np.array_equal(r.maps[1].array, A[0, 1, 0, 1:].reshape(14, 14))


def test_views_and_explain_helpers(default_model):
    img = str(DATA / "rocket.jpg")
    r = default_model.forward(img, views="L1/h3,rollout,chefer")
    ms = default_model.views(img, "L1/h3,rollout,chefer")
    assert [m.view for m in ms] == [m.view for m in r.maps]
    assert all(np.array_equal(a.array, b.array) for a, b in zip(ms, r.maps))
    ex = default_model.explain(img)  # chefer, top1
    assert len(ex) == 1 and ex[0].view == "chefer" and np.array_equal(ex[0].array, r["chefer"].array)
    ex2 = default_model.explain(img, method="chefer", classes="top2")
    assert [m.class_index for m in ex2] == list(np.argsort(-r.probs, kind="stable")[:2])
