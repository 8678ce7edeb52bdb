"""attnmap.from_state_dict(): the tensors of a fixture file, read in Python into a dict of NumPy arrays (or torch
tensors), give bit-identical maps and probabilities to attnmap.load(file); the same tensor accounting as a
file (an unknown tensor or a missing one is refused, naming it); integer buffers accepted as in files."""
import re

import numpy as np
import pytest

import amtest
from amtest import DATA, DEFAULT_WEIGHTS, FIX, read_attnmap_json, read_safetensors, torch_state_dict

IMAGES = [DATA / "coffee.png", DATA / "composites" / "0004_sneaker.png"]
LAYOUT_TIMM = FIX / "layouts" / "timm"


def _default():
    sd, cfg = read_attnmap_json(DEFAULT_WEIGHTS)
    return sd, {"config": cfg}, DEFAULT_WEIGHTS, {}, "L-1/mean,L0/h1,rollout,L1/mean:q=r3c4,chefer"


def _timm_f32():
    sd, _ = read_safetensors(LAYOUT_TIMM / "weights.safetensors")
    # load() reads num_heads from the config.json beside the file; in memory it is given as the config
    return sd, {"config": {"num_heads": 3}}, LAYOUT_TIMM / "weights.safetensors", {}, \
        "L-1/mean,L0/h1,rollout,L1/mean:q=r2c3,chefer"


def _timm_bf16():
    sd, _ = read_safetensors(LAYOUT_TIMM / "weights.bf16.safetensors")  # BF16 -> float32, exact
    return sd, {"config": {"num_heads": 3}}, LAYOUT_TIMM / "weights.bf16.safetensors", {}, "L-1/mean,rollout,chefer"


def _timm_f16():
    sd, _ = read_safetensors(LAYOUT_TIMM / "weights.f16.safetensors")  # float16 arrays as they are
    assert all(v.dtype == np.float16 for v in sd.values())
    return sd, {"config": {"num_heads": 3}}, LAYOUT_TIMM / "weights.f16.safetensors", {}, "L-1/mean,rollout,chefer"


def _beit_unilm():
    path = FIX / "families" / "beit_relpos" / "model_unilm.pth"
    sd = torch_state_dict(path, key="model")  # with int64 relative_position_index buffers
    assert any(v.dtype == np.int64 for v in sd.values())
    return sd, {}, path, {}, "L-1/mean,L0/h1,rollout,L1/mean:q=r1c2"  # no chefer: mean-pooled


def _openai_clip():
    path = FIX / "families" / "openai_clip_full" / "model_openai.pth"
    sd = torch_state_dict(path)  # int64 scalars input_resolution, context_length, vocab_size; the text tower
    return sd, {"act": "quickgelu"}, path, {"act": "quickgelu"}, "L-1/mean,L0/h1,rollout"


CASES = {"default.json": _default, "timm-f32-safetensors": _timm_f32, "timm-bf16-safetensors": _timm_bf16,
         "timm-f16-safetensors": _timm_f16, "beit-unilm-pth-int-buffers": _beit_unilm,
         "openai-clip-pth-int-scalars": _openai_clip}

SAME_LINES = ("layout:", "tokens:", "grid:", "positions:", "depth:", "heads:", "mlp:", "layer scale:", "qk norm:",
              "map row:", "classifier:", "parameters:", "tensors:")


def _lines(text, starts):
    return [ln for ln in text.splitlines() if ln.startswith(starts)]


@pytest.mark.parametrize("case", list(CASES))
def test_state_dict_same_as_file(attnmap, case):
    sd, kw, path, load_kw, views = CASES[case]()
    m_mem = attnmap.from_state_dict(sd, name=f"sd:{case}", **kw)
    m_file = attnmap.load(str(path), **load_kw)
    # the same model: every info field but the provenance
    a, b = dict(m_mem.info), dict(m_file.info)
    assert a.pop("name") == f"sd:{case}" == m_mem.name
    b.pop("name")
    sha_mem, sha_file = a.pop("weights_sha256"), b.pop("weights_sha256")
    assert re.fullmatch(r"[0-9a-f]{64}", sha_mem) and sha_mem != sha_file
    assert a.pop("format") == "state_dict"
    b.pop("format")
    # source: where each setting came from (a file's name or config.json, the state dict's name or config=)
    src_mem, src_file = a.pop("source"), b.pop("source")
    assert set(src_mem) <= set(src_file)
    assert a == b
    # the same report where it describes the model and its tensors
    assert _lines(m_mem.describe(), SAME_LINES) == _lines(m_file.describe(), SAME_LINES)
    # the same bits
    for img in IMAGES:
        r1 = m_mem.forward(str(img), views=views)
        r2 = m_file.forward(str(img), views=views)
        assert [x.view for x in r1.maps] == [x.view for x in r2.maps]
        for x, y in zip(r1.maps, r2.maps):
            assert np.array_equal(x.array, y.array), f"{case} {img.name} {x.view}"
        if r2.probs is not None:
            assert np.array_equal(r1.probs, r2.probs)
    # the same tensor accounting: (name, shape, reason) of every tensor, in the same order
    assert list(m_mem.tensors) == list(m_file.tensors)


def test_torch_tensors_directly(attnmap, torch):
    """The tensors themselves (CPU torch tensors, via __array__) work as well as .numpy() arrays."""
    path = FIX / "families" / "beit_relpos" / "model_unilm.pth"
    sd_t = torch.load(str(path), map_location="cpu")["model"]
    m_t = attnmap.from_state_dict(sd_t)
    m_n = attnmap.from_state_dict({k: v.numpy() for k, v in sd_t.items()})
    assert m_t.info["weights_sha256"] == m_n.info["weights_sha256"]
    v = "L-1/mean,rollout,L1/h2:q=r1c1"
    for x, y in zip(m_t.forward(str(IMAGES[0]), views=v).maps, m_n.forward(str(IMAGES[0]), views=v).maps):
        assert np.array_equal(x.array, y.array)


def test_digest_of_tensors(attnmap):
    """weights_sha256 of a state dict is a digest of its tensors: the same tensors the same digest, one changed
    value another."""
    sd, _ = read_safetensors(LAYOUT_TIMM / "weights.safetensors")
    cfg = {"num_heads": 3}
    d1 = attnmap.from_state_dict(sd, config=cfg).info["weights_sha256"]
    d2 = attnmap.from_state_dict({k: v.copy() for k, v in reversed(list(sd.items()))}, config=cfg).info["weights_sha256"]
    sd2 = dict(sd)
    sd2["norm.weight"] = sd["norm.weight"].copy()
    sd2["norm.weight"][0] = np.nextafter(sd2["norm.weight"][0], np.float32(np.inf))
    d3 = attnmap.from_state_dict(sd2, config=cfg).info["weights_sha256"]
    assert d1 == d2 != d3


def _timm_sd():
    sd, _ = read_safetensors(LAYOUT_TIMM / "weights.safetensors")
    return sd


def test_extra_tensor_refused(attnmap):
    sd = _timm_sd()
    sd["bogus.extra"] = np.zeros(3, np.float32)
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.from_state_dict(sd, config={"num_heads": 3})
    assert "bogus.extra" in str(e.value)
    assert e.value.exit_code == 2


def test_extra_tensor_message_is_the_files(attnmap, tmp_path):
    """The refusal is the file reader's: the same message as `attnmap inspect` of a file with that tensor (the
    file's name in place of the state dict's)."""
    sd = _timm_sd()
    sd["bogus.extra"] = np.zeros(3, np.float32)
    f = tmp_path / "extra.safetensors"
    amtest.write_safetensors(f, sd)
    p = amtest.run_cli("inspect", f, "--heads", "3", check=False)
    assert p.returncode == 2
    cli_msg = amtest.cli_error(p)
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.from_state_dict(sd, config={"num_heads": 3}, name="mine")
    assert str(e.value) == cli_msg.replace(str(f), "mine")


@pytest.mark.parametrize("missing", ["blocks.1.attn.qkv.weight", "norm.bias", "pos_embed"])
def test_missing_tensor_refused(attnmap, missing):
    sd = _timm_sd()
    del sd[missing]
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.from_state_dict(sd, config={"num_heads": 3})
    assert missing in str(e.value) or missing.rsplit(".", 1)[0] in str(e.value), str(e.value)
    assert e.value.exit_code == 2


def test_wrong_shape_refused(attnmap):
    sd = _timm_sd()
    sd["blocks.0.mlp.fc1.weight"] = sd["blocks.0.mlp.fc1.weight"][:, :20].copy()
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.from_state_dict(sd, config={"num_heads": 3})
    assert "blocks.0.mlp.fc1.weight" in str(e.value) and e.value.exit_code == 2


def test_layout_check(attnmap):
    sd = _timm_sd()
    m = attnmap.from_state_dict(sd, config={"num_heads": 3}, layout="timm")
    assert m.info["layout"] == "timm"
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.from_state_dict(sd, config={"num_heads": 3}, layout="torchvision")
    assert "torchvision" in str(e.value) and "timm" in str(e.value) and e.value.exit_code == 2


def test_keywords_as_flags(attnmap):
    """heads= does what --heads does (the number of heads when the tensors do not say)."""
    sd = _timm_sd()
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.from_state_dict(sd)  # D = 24: no heads from D/64
    assert "heads" in str(e.value) and "--heads" not in str(e.value)
    m = attnmap.from_state_dict(sd, heads=3)
    assert m.info["num_heads"] == 3


def test_timm_dinov3_pool_and_eva_final_norm(attnmap):
    """A timm DINOv3 given as a state dict with its architecture and no global_pool is pooled as timm builds
    vit_*_dinov3* (the mean of the patch tokens: eva.py's Eva default, use_fc_norm=False), the same probabilities
    as the file with its config.json; an EVA-02 with a mean pool and neither norm nor fc_norm is refused by name."""
    d = FIX / "families" / "dinov3_small"
    sd, _ = read_safetensors(d / "model.safetensors")
    m = attnmap.from_state_dict(sd, config={"architecture": "vit_small_patch16_dinov3", "num_heads": 3, "image_size": 32})
    r_mem = m.forward(str(IMAGES[0]), views="rollout")
    r_file = attnmap.load(str(d / "model.safetensors")).forward(str(IMAGES[0]), views="rollout")
    assert np.array_equal(r_mem.probs, r_file.probs)
    e_sd, _ = read_safetensors(FIX / "families" / "eva02_tiny" / "model.safetensors")
    for k in ("fc_norm.weight", "fc_norm.bias"):
        del e_sd[k]
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.from_state_dict(e_sd, config={"architecture": "eva02_tiny_patch14_224", "num_heads": 3})
    assert "missing tensor 'fc_norm.weight'" in str(e.value) and e.value.exit_code == 2
