"""Texts as a CLIP model's classes (issue 43; docs/text.md): the keyword text= takes a list, one text per item
(as --text repeated: a comma inside a text stays in it), and the engine's refusals come through as the CLI's."""
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


def test_texts_make_the_model(attnmap):
    with pytest.raises(TypeError, match="it makes the model"):
        attnmap.load(HEAD_MODEL).forward(ROCKET, text=["a dog"])


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
