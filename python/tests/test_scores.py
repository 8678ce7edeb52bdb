"""Zero-shot probabilities as the model computes them (issue 43 point 6; docs/python.md "Result"): a SigLIP's
texts are each scored alone, Result.probs / top5 are torch.sigmoid(logits_per_image) and Result.score_rule says
"sigmoid"; a CLIP's are the softmax over the texts ("softmax"). Fixtures: tests/fixtures/siglip/hf (a tiny
SigLIP made by transformers' SiglipModel, expected.json) and tests/fixtures/clip_zero_shot (OpenAI CLIP)."""
import json

import numpy as np
import pytest

from amtest import FIX

SIGLIP = FIX / "siglip"
CLIP = FIX / "clip_zero_shot"


def test_siglip_probs_are_each_texts_own_sigmoid(attnmap):
    texts = json.loads((SIGLIP / "texts.json").read_text())["texts"]
    want = np.array(json.loads((SIGLIP / "hf" / "expected.json").read_text())["probabilities"]["values"])
    r = attnmap.load(str(SIGLIP / "hf"), text=texts, quiet=True).forward(str(SIGLIP / "image.png"))
    assert r.score_rule == "sigmoid"
    np.testing.assert_allclose(r.probs, want, atol=1e-5)
    assert r.probs.sum() < 0.9  # each alone: no share of 1
    assert [t for t, _ in r.top5] == [texts[i] for i in np.argsort(-want)]
    assert "sigmoid %.1f%%" % (100 * r.top5[0][1]) in repr(r)


def test_clip_probs_are_the_softmax_over_the_texts(attnmap):
    m = attnmap.load(str(CLIP / "model.safetensors"), text=["a dog", "a cat", "a photo of a bird"], vocab=str(CLIP),
                     quiet=True)
    r = m.forward(str(CLIP / "input.png"))
    assert r.score_rule == "softmax"
    np.testing.assert_allclose(r.probs, np.load(CLIP / "probs.npy"), atol=1e-4)
    assert "sigmoid" not in repr(r)
    assert attnmap.load(str(FIX / "timm_small" / "weights.json"), quiet=True).forward(
        str(CLIP / "input.png")).score_rule == "softmax"  # a head's classes


def test_siglip_logits_are_scale_times_cos_plus_bias(attnmap):
    """logit_scale * encode_image @ encode_text.T + logit_bias is SiglipModel's logits_per_image; a CLIP's bias is 0."""
    texts = json.loads((SIGLIP / "texts.json").read_text())["texts"]
    want = json.loads((SIGLIP / "hf" / "expected.json").read_text())["logits_per_image"]["values"]
    m = attnmap.load(str(SIGLIP / "hf"), quiet=True)
    got = m.logit_scale * m.encode_image(str(SIGLIP / "image.png")) @ m.encode_text(texts).T + m.logit_bias
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert abs(m.logit_bias - (-2.0)) < 1e-3  # the fixture's logit_bias, stored as float16
    assert attnmap.load(str(CLIP / "model.safetensors"), quiet=True).logit_bias == 0.0


def test_siglip_texts_are_maps_through_the_probe(attnmap):
    """A SigLIP's texts are class-specific views through its attention-pool probe (issue 44): a figure of its
    texts, or classes= without such a view, gets CLIP's advice to add one; with chefer, the map of that text."""
    m = attnmap.load(str(SIGLIP / "hf"), text=["cat", "dog"], quiet=True)
    img = str(SIGLIP / "image.png")
    for call in (lambda: attnmap.figure(img, "photo,L1/mean", model=m), lambda: m.forward(img, classes="dog")):
        with pytest.raises(attnmap.AttnmapError) as e:
            call()
        msg = str(e.value)
        assert "add chefer" in msg or "add explain" in msg, msg
        assert "cannot be shown as maps" not in msg, msg
    r = m.forward(img, classes="dog", explain="chefer")
    assert len(r.maps) == 1
    assert "pool-probe query" in repr(r.maps[0]) and "class dog" in repr(r.maps[0]), repr(r.maps[0])
    assert r.score_rule == "sigmoid"
