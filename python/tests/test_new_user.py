"""What a new user's first hour found (issue 31's fresh-eyes test), each kept from coming back: a 16-bit PIL image,
names in figure(), a caller's array changed after forward(), a manifest over a user's file, a misspelt config
key, a progress callback that raises, Ctrl-C in render_folder, class names, keywords in messages, exit codes,
the records of SVG and PDF figures, settings checked at load."""
import json
import os
import signal
import threading

import numpy as np
import pytest

from amtest import DATA, png_chunks

CAT = DATA / "chelsea.png"
CUP = DATA / "coffee.png"


def test_sixteen_bit_pil_image_is_read_as_the_file_is(attnmap, default_model, PIL_Image, tmp_path):
    """PIL opens a 16-bit grey PNG in mode I; convert('RGB') would clip it to white. The module scales it by
    value >> 8, as the file's decoder does: the same maps as the path."""
    a = np.linspace(0, 65535, 64 * 48).reshape(48, 64).astype(np.uint16)
    p = tmp_path / "g16.png"
    PIL_Image.fromarray(a).save(p)
    im = PIL_Image.open(p)
    assert im.mode in ("I", "I;16")
    r1, r2 = default_model.forward(im), default_model.forward(str(p))
    assert np.array_equal(r1.maps[0].array, r2.maps[0].array)
    with pytest.raises(attnmap.AttnmapError) as e:
        default_model.forward(PIL_Image.fromarray(np.zeros((8, 8), np.float32), mode="F"))
    assert e.value.exit_code == 1 and "mode F" in str(e.value)


def test_figure_names(attnmap, PIL_Image):
    cat = np.asarray(PIL_Image.open(CAT).convert("RGB"))
    cup = np.asarray(PIL_Image.open(CUP).convert("RGB"))
    same = attnmap.figure([cat, cup], "photo,L1/h3", names=["x", "x"])
    apart = attnmap.figure([cat, cup], "photo,L1/h3", names=["x", "y"])
    shas = [r["sha256"] for r in same.record["images"]]
    assert len(set(shas)) == 2, "two images named alike are still two images"
    assert [r["sha256"] for r in apart.record["images"]] == shas
    assert len(same.data) > 0 and len(apart.data) > 0
    for bad in (["../evil"], ["a/b"], [""]):
        with pytest.raises(ValueError):
            attnmap.figure([cat], "photo,L1/h3", names=bad)
    with pytest.raises(ValueError):
        attnmap.figure([cat, cup], "photo,L1/h3", names=["x"])
    with pytest.raises(ValueError):
        attnmap.figure([cat], "photo,L1/h3", format="jpg")


def test_a_result_keeps_its_own_image(default_model, PIL_Image):
    cat = np.array(PIL_Image.open(CAT).convert("RGB"))
    r = default_model.forward(cat)
    before = r.maps[0].overlay().data
    cat[:] = 0
    assert r.maps[0].overlay().data == before


def test_a_manifest_never_replaces_a_users_file(attnmap, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.render_folder(str(CAT), tmp_path / "out", manifest=notes, quiet=True)
    assert e.value.exit_code == 2 and "not an attnmap manifest" in str(e.value) and "--manifest" not in str(e.value)
    assert notes.read_text() == "my notes"
    assert attnmap.cli(["render", str(CAT), "--out", str(tmp_path / "o2"), "--manifest", str(notes), "-q"]) == 2
    assert notes.read_text() == "my notes"
    # a manifest is replaced by the next run's
    m = tmp_path / "run.jsonl"
    for _ in range(2):
        assert attnmap.render_folder(str(CAT), tmp_path / "out", manifest=m, quiet=True).exit_code == 0
    assert json.loads(m.read_text().splitlines()[0])["attnmap_manifest"] == 1


def test_a_misspelt_config_key_is_refused(attnmap):
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.from_state_dict({"a": np.zeros(1, np.float32)}, config={"num_head": 2})
    assert "'num_head'" in str(e.value) and "num_heads" in str(e.value)
    with pytest.raises(TypeError, match="state_dict"):
        attnmap.from_state_dict(type("M", (), {"state_dict": lambda self: {}})())


def _folder(tmp_path, n):
    src = tmp_path / "in"
    src.mkdir()
    for i in range(n):
        (src / f"c{i:02d}.png").write_bytes(CAT.read_bytes())
    return src


def test_a_progress_callback_that_raises_stops_the_run(attnmap, default_model, tmp_path):
    src = _folder(tmp_path, 12)
    calls = []

    def progress(*a):
        calls.append(a)
        if len(calls) == 2:
            raise RuntimeError("enough")
    with pytest.raises(RuntimeError, match="enough"):
        attnmap.render_folder(str(src), tmp_path / "out", model=default_model, manifest=tmp_path / "m.jsonl",
                              jobs=1, progress=progress, quiet=True)
    assert len(calls) == 2
    rows = [json.loads(l) for l in (tmp_path / "m.jsonl").read_text().splitlines()[1:]]
    assert len(rows) == 2 and all(r["status"] == "done" for r in rows)
    # resumed: the two are carried, the rest rendered
    r = attnmap.render_folder(str(src), tmp_path / "out", model=default_model, manifest=tmp_path / "m.jsonl",
                              skip_existing=True, quiet=True)
    assert r.exit_code == 0 and len(r.rows) == 12 and sum(bool(x.get("carried")) for x in r.rows) == 2


def test_ctrl_c_stops_render_folder(attnmap, default_model, tmp_path):
    """SIGINT during a run: the images under way finish, the run stops, KeyboardInterrupt is raised, nothing is
    half-written, and a resume carries what was done."""
    src = _folder(tmp_path, 60)
    out = tmp_path / "out"
    first = threading.Event()

    def progress(done, total, inp, status):
        if done == 2 and not first.is_set():
            first.set()
            os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        attnmap.render_folder(str(src), out, model=default_model, manifest=tmp_path / "m.jsonl", jobs=1,
                              panel=True, progress=progress, quiet=True)
    done = sorted(p.name for p in out.glob("*.panel.png"))
    assert 2 <= len(done) < 60
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "a temporary file was left"
    r = attnmap.render_folder(str(src), out, model=default_model, manifest=tmp_path / "m.jsonl", panel=True,
                              skip_existing=True, quiet=True)
    assert r.exit_code == 0 and sum(bool(x.get("carried")) for x in r.rows) == len(done)


def test_names_and_keys_of_maps(default_model):
    r = default_model.forward(str(CAT), views="L-1/mean,chefer", classes="top2")
    assert r["L-1/mean"] is r["L3/mean"] is r[np.int64(0)]
    cls = [m for m in r.maps if m.class_index is not None]
    assert [m.class_name for m in cls] == [t[0] for t in r.top5[:2]]
    assert r["chefer", cls[0].class_name] is cls[0]


def test_messages_name_keywords_and_exit_codes(attnmap, default_model, tmp_path):
    with pytest.raises(attnmap.AttnmapError) as e:
        default_model.forward(str(CAT), discard=0.5)
    assert "--" not in str(e.value) and "rollout" in str(e.value)
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.overlay(str(tmp_path / "missing.png"), "L1/h3")
    assert e.value.exit_code == 1
    with pytest.raises(attnmap.AttnmapError) as e:
        default_model.forward(str(tmp_path / "missing.png"))
    assert e.value.exit_code == 1
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.load(size=100)  # refused when the model is made, not when it is first used
    assert "size" in str(e.value) and "--size" not in str(e.value)
    src = attnmap.load(size=448, quiet=True).info["source"]["image_size"]
    assert "{setting:" not in src and "--" not in src
    with pytest.raises(TypeError):
        attnmap.overlay(str(CAT), "L1/h3", format="svg")
    with pytest.raises(TypeError):
        attnmap.cli("inspect")


@pytest.mark.parametrize("fmt", ["svg", "pdf"])
def test_the_record_of_svg_and_pdf_figures(attnmap, fmt):
    f = attnmap.panel(str(CAT), format=fmt)
    rec = f.record
    assert rec.get("view") == "L1/h3" and rec.get("weights") == "default.json"
    png = attnmap.panel(str(CAT))
    assert rec == png.record
    assert any(k == "tEXt" and p.startswith(b"attnmap\0") for k, p in png_chunks(png.data))


def test_switch_keywords_take_booleans(attnmap, default_model, tmp_path):
    """A switch given a path would be read as one more input by the command line: refused as a TypeError."""
    with pytest.raises(TypeError, match="panel= takes True or False"):
        attnmap.render_folder(str(CAT), tmp_path / "out", panel=str(CUP), quiet=True)
    assert not (tmp_path / "out").exists()
    with pytest.raises(TypeError, match="rollout= takes True or False"):
        default_model.forward(str(CAT), rollout="False")
    with pytest.raises(TypeError, match="layer= takes a value"):
        default_model.forward(str(CAT), layer=True)
    assert default_model.forward(str(CAT), rollout=True).maps[0].kind == "rollout"
