"""attnmap.load(): the bundled weights and the small fixture checkpoints of every format and family.

describe() must be exactly `attnmap inspect FILE` (same options); info's fields must agree with the fixtures'
meta.json (written by each family's own code) and with inspect's report.
"""
import hashlib
import json
import re

import pytest

import amtest
from amtest import FIX, REPO, run_cli


def _family_cases():
    cases = []
    for meta_path in sorted((FIX / "families").glob("*/meta.json")):
        meta = json.loads(meta_path.read_text())
        folder = meta_path.parent
        for f in meta["files"]:
            kw, cli = {}, []
            if f.get("key"):
                kw["key"] = f["key"]
                cli += ["--key", f["key"]]
            if isinstance(meta.get("heads_arg"), int):
                kw["heads"] = meta["heads_arg"]
                cli += ["--heads", str(meta["heads_arg"])]
            if isinstance(meta.get("act_arg"), str):
                kw["act"] = meta["act_arg"]
                cli += ["--act", meta["act_arg"]]
            if isinstance(meta.get("pool_arg"), str):
                kw["pool"] = meta["pool_arg"]
                cli += ["--pool", meta["pool_arg"]]
            path = folder if f["path"] == "." else folder / f["path"]
            label = f"{folder.name}/{f['path']}" + (f"[{f['key']}]" if f.get("key") else "")
            cases.append(pytest.param(path, kw, cli, meta, id=label))
    return cases


def _file_cases():
    cases = [pytest.param(REPO / "weights" / "default.json", {}, [], None, id="default.json")]
    for lay in ["timm", "hf", "hf_model", "torchvision", "deit_distilled", "dinov2_fb", "qv_bias", "timm_reg_full",
                "timm_reg_noembed"]:
        for f in ["weights.safetensors", "weights.pth", "weights.json", "weights.f16.safetensors",
                  "weights.bf16.pth"]:
            cases.append(pytest.param(FIX / "layouts" / lay / f, {}, [], None, id=f"layouts/{lay}/{f}"))
    cases += [
        pytest.param(FIX / "timm_small" / "weights.json", {}, [], None, id="timm_small/weights.json"),
        pytest.param(FIX / "hf_folder", {}, [], None, id="hf_folder"),
        pytest.param(FIX / "hf_sharded" / "model.safetensors.index.json", {}, [], None, id="hf_sharded/index"),
        pytest.param(FIX / "layouts" / "timm" / "weights.dino.pth", {"key": "teacher"}, ["--key", "teacher"], None,
                     id="layouts/timm/weights.dino.pth[teacher]"),
    ]
    return cases


ALL_CASES = _file_cases() + _family_cases()


@pytest.mark.parametrize("path,kw,cli,meta", ALL_CASES)
def test_describe_is_inspect(attnmap, path, kw, cli, meta):
    """describe() is the CLI's `attnmap inspect` stdout, character for character."""
    m = attnmap.load(str(path), **kw)
    p = run_cli("inspect", str(path), *cli)
    assert m.describe() == p.stdout
    assert m.name == str(path)


def _inspect_numbers(text):
    """The figures of an inspect report that info must repeat."""
    g = {}
    mt = re.search(r"^tokens:\s+(\d+) = ", text, re.M)
    g["tokens"] = int(mt.group(1))
    mg = re.search(r"^grid:\s+(\d+) x (\d+) patches \(rows x columns\) of (\d+) px, input (\d+) x (\d+) px", text, re.M)
    g["grid"] = (int(mg.group(1)), int(mg.group(2)))
    g["patch"] = int(mg.group(3))
    g["image_size"] = (int(mg.group(5)), int(mg.group(4)))  # (w, h)
    g["depth"] = int(re.search(r"^depth:\s+(\d+) blocks", text, re.M).group(1))
    mh = re.search(r"^heads:\s+(\d+) \(head dim (\d+), D = (\d+)\)", text, re.M)
    g["num_heads"], g["dim"] = int(mh.group(1)), int(mh.group(3))
    mc = re.search(r"^classifier:\s+(\d+) classes", text, re.M)
    g["num_classes"] = int(mc.group(1)) if mc else None
    g["n_tensors"] = int(re.search(r"^tensors:\s+(\d+) in the file", text, re.M).group(1))
    return g


@pytest.mark.parametrize("path,kw,cli,meta", ALL_CASES)
def test_info_agrees_with_inspect_and_meta(attnmap, path, kw, cli, meta):
    m = attnmap.load(str(path), **kw)
    info = m.info
    for k in ["layout", "depth", "num_heads", "dim", "patch", "grid", "image_size", "tokens", "num_prefix",
              "class_token", "num_classes", "labels", "weights_sha256", "name"]:
        assert k in info, f"info lacks {k!r}: {sorted(info)}"
    want = _inspect_numbers(m.describe())
    for k in ["tokens", "patch", "depth", "num_heads", "dim"]:
        assert info[k] == want[k], k
    assert tuple(info["grid"]) == want["grid"]
    assert tuple(info["image_size"]) == want["image_size"]
    assert info["num_classes"] == want["num_classes"] or (want["num_classes"] is None and not info["num_classes"])
    assert info["tokens"] == info["num_prefix"] + info["grid"][0] * info["grid"][1]
    assert len(m.tensors) == want["n_tensors"]
    assert re.fullmatch(r"[0-9a-f]{64}", info["weights_sha256"])
    assert info["name"] == m.name == str(path)
    if meta is not None:  # the family's own numbers
        assert info["layout"] == meta["layout"]
        assert info["depth"] == meta["depth"]
        assert info["num_heads"] == meta["heads"]
        assert info["dim"] == meta["dim"]
        assert info["patch"] == meta["patch"]
        assert info["num_prefix"] == meta["num_prefix"]
        assert bool(info["class_token"]) == bool(meta["class_token"])
        d = m.describe()  # no position table (none, or rotary positions): the size is not in the file
        if "positions:   none" not in d and "no position table" not in d:  # (224, as inspect says)
            assert info["tokens"] == meta["tokens"]
            assert tuple(info["image_size"]) == (meta["image_size"], meta["image_size"])


def test_default_weights(attnmap, default_model):
    """load() with no path: the bundled weights/default.json (a 4-block, 4-head ViT with 10 garment classes)."""
    m = default_model
    info = m.info
    assert info["layout"] == "timm"
    assert (info["depth"], info["num_heads"], info["dim"], info["patch"]) == (4, 4, 128, 16)
    assert tuple(info["grid"]) == (14, 14) and tuple(info["image_size"]) == (224, 224)
    assert (info["tokens"], info["num_prefix"], info["num_classes"]) == (197, 1, 10)
    assert info["class_token"] is True
    assert list(info["labels"]) == ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                                    "Sneaker", "Bag", "Ankle boot"]
    # the CLI's manifests and PNG records carry the same digest: sha256 of the file's bytes
    assert info["weights_sha256"] == hashlib.sha256(amtest.DEFAULT_WEIGHTS.read_bytes()).hexdigest()
    assert info["weights_sha256"] == "919d6aff6ca838375404b043b6b762cb1d42db43034f45399ee29825036a4de9"
    # the bundled file the CLI would use, and its inspect report
    assert m.name.endswith("default.json")
    assert m.describe() == run_cli("inspect", m.name).stdout
    assert len(m.tensors) == 56 and all(r == "" for _, _, r in m.tensors)


def test_tensors_lists_what_is_not_read(attnmap):
    """m.tensors: (name, shape tuple, reason), reason '' when consumed; the HF ViTModel pooler is listed as unread."""
    path = FIX / "layouts" / "hf_model" / "weights.safetensors"
    m = attnmap.load(str(path))
    assert len(m.tensors) == 40
    for t in m.tensors:
        assert isinstance(t, tuple) and len(t) == 3 and isinstance(t[0], str) and isinstance(t[2], str)
        assert isinstance(t[1], tuple) and all(isinstance(d, int) for d in t[1])
    unread = {n: (s, r) for n, s, r in m.tensors if r}
    assert sorted(unread) == ["module.pooler.dense.bias", "module.pooler.dense.weight"]
    assert unread["module.pooler.dense.bias"][0] == (24,)
    assert unread["module.pooler.dense.weight"][0] == (24, 24)
    assert "pooler" in unread["module.pooler.dense.weight"][1]


def test_load_options(attnmap):
    """Keyword options act as the CLI's flags: size, mean/std, labels as a list."""
    m = attnmap.load(size=(320, 224))
    assert tuple(m.info["image_size"]) == (320, 224) and tuple(m.info["grid"]) == (14, 20)
    m = attnmap.load(size=448)
    assert tuple(m.info["grid"]) == (28, 28) and m.info["tokens"] == 785
    names = [f"c{i}" for i in range(10)]
    m = attnmap.load(labels=names)
    assert list(m.info["labels"]) == names
    r = m.forward(str(REPO / "data" / "composites" / "0000_trouser.png"))
    assert all(lbl in names for lbl, _ in r.top5)
