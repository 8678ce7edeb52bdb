"""Texts as a CLIP model's classes (issue 43; docs/text.md): the keyword text= takes a list, one text per item
(as --text repeated: a comma inside a text stays in it), and the engine's refusals come through as the CLI's."""
import json
import os
import struct

import numpy as np
import pytest

from amtest import DATA, FIX, cli_error, run_cli

ROCKET = str(DATA / "rocket.jpg")
HEAD_MODEL = str(FIX / "timm_small" / "weights.json")


def test_a_list_is_one_text_per_item(attnmap):
    from attnmap._options import to_given
    assert to_given({"text": ["a dog", "a cat, sitting"]}) == [("text", ["a dog", "a cat, sitting"])]
    assert to_given({"text": "a dog, sitting"}) == [("text", ["a dog, sitting"])]
    assert to_given({"prompt": ["a photo of a {}.", "a {}, drawn"]}) == [
        ("prompt", ["a photo of a {}.", "a {}, drawn"])]


def test_the_text_keywords_come_from_the_engine_registry(attnmap):
    """The keywords that give texts are the registry's "Text" topic (issue 42: no hand copy in python/)."""
    from attnmap._options import settings, text_keywords
    assert set(text_keywords()) == {"text", "texts", "prompt", "vocab", "truncate_text"}
    assert all(settings("render")[k]["topic"] == "Text" for k in text_keywords())
    assert attnmap._TEXT_KEYWORDS == text_keywords()


def test_texts_per_call_need_a_clip(attnmap):
    """forward(text=[...]) is valid since issue 43 point 5 (it was a TypeError "it makes the model"): on a model
    with a classifier head it is the engine's refusal, as render --text's."""
    with pytest.raises(attnmap.AttnmapError, match="has a classifier head of 10 classes") as e:
        attnmap.load(HEAD_MODEL, quiet=True).forward(ROCKET, text=["a dog"])
    assert e.value.exit_code == 2


def test_a_head_model_refuses_texts_as_the_cli_does(attnmap, tmp_path):
    p = run_cli("render", ROCKET, "-w", HEAD_MODEL, "--text", "a dog", "-o", tmp_path, "-q", check=False)
    assert p.returncode == 2
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.load(HEAD_MODEL, text=["a dog", "a cat"]).forward(ROCKET)
    assert e.value.exit_code == 2
    want = cli_error(p).split(": ", 1)[1].split("(--labels")[0]  # the settings are spelled per front end
    assert want in str(e.value) and "(labels names them)" in str(e.value)
    assert "has a classifier head of" in str(e.value)


def test_texts_as_classes_end_to_end(attnmap):
    """load(text=[...]) on tests/fixtures/clip_zero_shot: the family's probabilities (OpenAI CLIP's
    logits_per_image.softmax) to 1e-4, the texts as labels, one chefer map per text."""
    import json
    fx = FIX / "clip_zero_shot"
    meta = json.loads((fx / "meta.json").read_text())
    m = attnmap.load(fx / "model.safetensors", text=meta["texts"], vocab=fx / "bpe_small.txt.gz", quiet=True)
    r = m.forward(str(fx / "input.png"), views="chefer", classes="top3")
    assert [t for t, _ in r.top5] == meta["texts"]
    for (_, p), want in zip(r.top5, meta["probs"]):
        assert abs(p - want) < 1e-4
    assert len(r.maps) == 3


def test_values_str_would_garble_are_type_errors_and_class_tag_is_the_file_name(attnmap):
    """text=b"a dog" was the class "b'a dog'"; class_tag is the name render writes, also for texts that need
    a hash ("a/bird" -> a_bird-548cee40, as NAME.class-a_bird-548cee40.png)."""
    fx = FIX / "clip_zero_shot"
    for bad in (b"a dog", {"a": 1}, [["a", "b"]]):
        with pytest.raises(TypeError):
            attnmap.load(str(fx / "model.safetensors"), text=bad, vocab=str(fx / "vocab.json"), quiet=True)
    m = attnmap.load(str(fx / "model.safetensors"), text=["a dog", "a/bird"], vocab=str(fx / "vocab.json"), quiet=True)
    maps = m.forward(str(fx / "input.png"), views="chefer", classes="top2").maps
    assert sorted((mp.class_name, mp.class_tag) for mp in maps) == [("a dog", "a_dog"), ("a/bird", "a_bird-548cee40")]


# ---- texts after the model is made: forward(text=...), encode_text, encode_image (issue 43 point 5) ----------

CLIP = FIX / "clip_zero_shot"
FAMILIES = [("openai", CLIP / "model.safetensors", CLIP), ("open_clip", CLIP / "open_clip" / "model.safetensors", CLIP),
            ("hf", CLIP / "hf", None)]  # (family, weights, vocab: None = the HF folder's own vocab.json)


def _safetensors(path):
    """{name: array} and the __metadata__ of a small safetensors file (F16 / F32)."""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for k, v in header.items():
        if k != "__metadata__":
            a, b = v["data_offsets"]
            dt = {"F16": np.float16, "F32": np.float32}[v["dtype"]]
            out[k] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dt).reshape(v["shape"])
    return out, header.get("__metadata__", {})


def _write_safetensors(path, tensors, metadata):
    header, data = {"__metadata__": metadata}, b""
    for k, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[k] = {"dtype": "F16", "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


@pytest.mark.parametrize("family,weights,vocab", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_encode_text_and_image_equal_the_familys_features(attnmap, tmp_path, family, weights, vocab):
    """The fixtures' features by each family's own code (tools/make_clip_explain_fixtures.py, ..._text_family_...):
    text_features.npy (N, E) normalised, image_features.npy encode_image (not normalised), logits.npy
    logits_per_image[0]; here to 1e-5 (measured: features <= 7e-7, logits <= 6.2e-6)."""
    d = weights if weights.is_dir() else weights.parent
    meta = json.loads((d / "meta.json").read_text())
    m = attnmap.load(weights, quiet=True)  # no texts: the text tower is read again at the first text call
    kw = {} if vocab is None else {"vocab": vocab}
    t = m.encode_text(meta["texts"], **kw)
    assert t.dtype == np.float32 and t.shape == (3, 16)
    assert np.abs(t - np.load(d / "text_features.npy")).max() < 1e-5
    img = np.load(d / "image_features.npy")
    i = m.encode_image(str(CLIP / "input.png"))
    assert i.dtype == np.float32 and i.shape == (16,)
    assert np.abs(i - img / np.linalg.norm(img)).max() < 1e-5
    assert abs(m.logit_scale - meta.get("scale", 20.085536923187668)) < 1e-5
    assert np.abs(m.logit_scale * i @ t.T - np.load(d / "logits.npy")).max() < 1e-5
    pixels = np.random.default_rng(43).integers(0, 256, (32, 32, 3), dtype=np.uint8)  # a list: (B, E), a file
    attnmap._attnmap.write_png(str(tmp_path / "x.png"), pixels)                      # and its pixels alike
    both = m.encode_image([str(CLIP / "input.png"), str(tmp_path / "x.png"), pixels])
    assert both.shape == (3, 16) and np.array_equal(both[0], i) and np.array_equal(both[1], both[2])
    assert np.allclose(np.linalg.norm(both, axis=1), 1, atol=1e-6) and not np.allclose(both[0], both[1])


def test_forward_texts_per_call(attnmap):
    """forward(text=[...]) on a CLIP loaded without texts: the family's probabilities to 1e-4 and chefer maps to
    1e-4 of their peak (the fixture's autograd through openai/CLIP); texts per call override load's, and
    the model's own come back on the next call without text=."""
    meta = json.loads((CLIP / "meta.json").read_text())
    m = attnmap.load(CLIP / "model.safetensors", quiet=True)
    r = m.forward(str(CLIP / "input.png"), text=meta["texts"], vocab=CLIP, views="chefer", classes="top3")
    assert [t for t, _ in r.top5] == meta["texts"]
    assert np.abs(r.probs - np.array(meta["probs"])).max() < 1e-4
    want = np.load(CLIP / "chefer.npy")
    for mp in r.maps:
        j = meta["texts"].index(mp.class_name)
        assert np.abs(mp.array - want[j]).max() <= 1e-4 * np.abs(want[j]).max()
    m2 = attnmap.load(CLIP / "model.safetensors", text=["a dog", "a cat"], vocab=CLIP, quiet=True)
    r2 = m2.forward(str(CLIP / "input.png"), text=["a photo of a bird", "a cat"], classes="top2", views="chefer")
    assert [mp.class_name for mp in r2.maps] == ["a cat", "a photo of a bird"]  # load's vocab= kept
    assert [t for t, _ in m2.forward(str(CLIP / "input.png")).top5] == ["a dog", "a cat"]
    one = m2.forward(str(CLIP / "input.png"), text="a cat", views="chefer")
    assert one.top5 == [("a cat", 1.0)] and "100% by construction" in one.notes[0]
    with pytest.raises(attnmap.AttnmapError, match="given to forward"):
        one.panel()
    # the prompt ensemble: each template's feature normalised, averaged, normalised again
    ens = m.encode_text(["dog", "cat"], prompt=["a {}", "a photo of a {}"], vocab=CLIP)
    each = m.encode_text(["a dog", "a photo of a dog", "a cat", "a photo of a cat"], vocab=CLIP)
    mean = each.reshape(2, 2, 16).sum(axis=1)
    assert np.abs(ens - mean / np.linalg.norm(mean, axis=1, keepdims=True)).max() < 1e-6
    # load(vocab=, prompt=) without texts: kept for the later text calls (a call's own keyword wins)
    m3 = attnmap.load(CLIP / "model.safetensors", vocab=CLIP, prompt="a {}", quiet=True)
    assert np.abs(m3.encode_text(["dog"]) - m.encode_text(["a dog"], vocab=CLIP)).max() < 1e-6
    assert np.abs(m3.encode_text(["a dog"], prompt="{}") - m.encode_text(["a dog"], vocab=CLIP)).max() < 1e-6
    r3 = m3.forward(str(CLIP / "input.png"), text=["dog", "cat"])
    r4 = m.forward(str(CLIP / "input.png"), text=["a dog", "a cat"], vocab=CLIP)
    assert np.abs(r3.probs - r4.probs).max() < 1e-6


def test_text_refusals_name_what_is_wrong(attnmap, tmp_path):
    """A model without a text tower (vision-only file, a state dict), a head model, a text over 77 tokens, a
    file changed since the load: AttnmapError, exit_code 2, naming it."""
    def refused(match, f):
        with pytest.raises(attnmap.AttnmapError, match=match) as e:
            f()
        assert e.value.exit_code == 2
    long = "a dog " * 80
    m = attnmap.load(CLIP / "model.safetensors", quiet=True)
    refused("is 322 tokens .* more than CLIP's context of 77 .* give truncate_text", lambda: m.encode_text([long], vocab=CLIP))
    refused("is 322 tokens", lambda: m.forward(ROCKET, text=[long], vocab=CLIP))
    assert m.encode_text([long], vocab=CLIP, truncate_text=True).shape == (1, 16)
    refused("no visual projection", lambda: attnmap.load(HEAD_MODEL, quiet=True).encode_image(ROCKET))
    tensors, meta = _safetensors(CLIP / "model.safetensors")
    vision = {k: v for k, v in tensors.items() if k.startswith("visual.")}
    _write_safetensors(tmp_path / "vision.safetensors", vision, meta)
    v = attnmap.load(tmp_path / "vision.safetensors", quiet=True)
    assert np.array_equal(v.encode_image(ROCKET), m.encode_image(ROCKET))  # the image side needs no text tower
    refused("holds no CLIP text tower", lambda: v.encode_text(["a dog"]))
    sd = attnmap.from_state_dict(tensors, config=json.loads(meta["config"]), quiet=True)
    refused("state dict .* without its text tower", lambda: sd.forward(ROCKET, text=["a dog"], vocab=CLIP))
    _write_safetensors(tmp_path / "clip.safetensors", tensors, meta)
    c = attnmap.load(tmp_path / "clip.safetensors", quiet=True)
    tensors["logit_scale"] = np.asarray(tensors["logit_scale"] + 1).astype(np.float16)
    _write_safetensors(tmp_path / "new.safetensors", tensors, meta)
    os.replace(tmp_path / "new.safetensors", tmp_path / "clip.safetensors")
    refused("changed since the model was loaded", lambda: c.encode_text(["a dog"], vocab=CLIP))
