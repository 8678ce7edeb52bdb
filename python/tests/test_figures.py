"""Figures: overlay() / panel() / figure() return Figure objects whose bytes are valid PNG / PDF / SVG and, for a
file input, the very bytes `attnmap render` / `attnmap figure` write with the same settings (the PNG's pixels
and its tEXt records 'attnmap' (settings) and 'attnmap:stats').

Where the bytes cannot be the CLI's (an in-memory array has no file to hash: input_sha256), the decoded pixels
must still be equal; the tests say which they check.
"""
import json

import numpy as np
import pytest

from amtest import DATA, png_pixels, png_text, rgb_array, run_cli

PNG = b"\x89PNG\r\n\x1a\n"
ROCKET = DATA / "rocket.jpg"
COFFEE = DATA / "coffee.png"


def _cli_png(tmp, img, *args, name=None):
    run_cli("render", img, "--out", tmp, "-q", *args)
    return (tmp / (name or (img.stem + ".png"))).read_bytes()


def test_overlay_bytes_equal_cli(attnmap, default_model, tmp_path):
    """overlay(path, view) is NAME.png of `attnmap render path --views view` byte for byte (pixels and
    records); the run without --views (whose stats record has no "view") is accepted too."""
    fig = attnmap.overlay(str(ROCKET), "L1/h3", model=default_model)
    assert fig.format == "png" and fig.data[:8] == PNG
    with_views = _cli_png(tmp_path / "a", ROCKET, "--views", "L1/h3")
    plain = _cli_png(tmp_path / "b", ROCKET)
    assert np.array_equal(png_pixels(fig.data), png_pixels(with_views)), "pixels differ from the CLI's NAME.png"
    assert png_text(fig.data) in (png_text(with_views), png_text(plain)), \
        f"records differ:\n{png_text(fig.data)}\nCLI:\n{png_text(with_views)}"
    assert fig.data in (with_views, plain)


@pytest.mark.parametrize("kw,args", [
    ({"colormap": "inferno", "alpha": 0.7, "legend": False}, ["--colormap", "inferno", "--alpha", "0.7", "--no-legend"]),
    ({"colormap": "gray", "upsample": "nearest"}, ["--colormap", "gray", "--upsample", "nearest"]),
])
def test_overlay_options_equal_cli(attnmap, default_model, tmp_path, kw, args):
    fig = attnmap.overlay(str(COFFEE), "rollout", model=default_model, **kw)
    ref = _cli_png(tmp_path, COFFEE, "--views", "rollout", *args)
    assert np.array_equal(png_pixels(fig.data), png_pixels(ref))
    assert fig.data == ref
    rec = json.loads(png_text(ref)["attnmap"])
    assert fig.record == rec


def test_overlay_of_array_and_map(attnmap, default_model, tmp_path):
    """An in-memory photo and a Map from forward(): the CLI's pixels (the record cannot hash a file)."""
    ref = _cli_png(tmp_path, COFFEE, "--views", "L3/mean,L0/h1", name="coffee.L3-mean.png")
    arr = rgb_array(COFFEE)
    fig = attnmap.overlay(arr, "L3/mean", model=default_model)
    assert np.array_equal(png_pixels(fig.data), png_pixels(ref))
    mp = default_model.forward(arr, views="L3/mean,L0/h1").maps[0]
    fig2 = attnmap.overlay(arr, mp)
    assert np.array_equal(png_pixels(fig2.data), png_pixels(ref))


def test_panel_equals_cli(attnmap, default_model, tmp_path):
    fig = attnmap.panel(str(ROCKET), model=default_model)
    run_cli("render", ROCKET, "--out", tmp_path, "-q", "--panel", "--figure-format", "png,pdf,svg")
    ref = (tmp_path / "rocket.panel.png").read_bytes()
    assert fig.format == "png" and fig.data[:8] == PNG
    assert np.array_equal(png_pixels(fig.data), png_pixels(ref))
    assert fig.data == ref
    pdf = attnmap.panel(str(ROCKET), model=default_model, format="pdf")
    assert pdf.format == "pdf" and pdf.data[:5] == b"%PDF-" and pdf.data.rstrip().endswith(b"%%EOF")
    svg = attnmap.panel(str(ROCKET), model=default_model, format="svg")
    assert svg.format == "svg" and b"<svg" in svg.data[:2000]
    assert svg.data == (tmp_path / "rocket.panel.svg").read_bytes()
    assert isinstance(svg._repr_svg_(), str) and "<svg" in svg._repr_svg_()


def test_panel_of_views(attnmap, default_model, tmp_path):
    fig = attnmap.panel(str(COFFEE), views="rollout", model=default_model, colormap="magma")
    run_cli("render", COFFEE, "--out", tmp_path, "-q", "--panel", "--views", "rollout", "--colormap", "magma")
    assert np.array_equal(png_pixels(fig.data), png_pixels((tmp_path / "coffee.panel.png").read_bytes()))


def test_figure_equals_cli(attnmap, default_model, tmp_path):
    imgs = [str(ROCKET), str(COFFEE)]
    views = "photo,L3/mean,rollout,chefer"
    fig = attnmap.figure(imgs, views, model=default_model)
    out = tmp_path / "fig.png"
    run_cli("figure", *imgs, "--views", views, "-o", out, "-q")
    ref = out.read_bytes()
    assert fig.format == "png" and fig.data[:8] == PNG
    assert np.array_equal(png_pixels(fig.data), png_pixels(ref))
    assert fig.data == ref
    fig = attnmap.figure(imgs, views, model=default_model, format="pdf", title="two photos")
    assert fig.data[:5] == b"%PDF-"
    fig = attnmap.figure(imgs, views, model=default_model, format="svg", scale="figure")
    assert b"<svg" in fig.data[:2000]


def test_repr_and_save(attnmap, default_model, tmp_path):
    fig = attnmap.overlay(str(COFFEE), "L1/h3", model=default_model)
    assert fig._repr_png_() == fig.data
    p = tmp_path / "x.png"
    fig.save(str(p))
    assert p.read_bytes() == fig.data
    assert fig.record["view"] == "L1/h3" and fig.record["colormap"] == "viridis"
    assert fig.record == json.loads(png_text(fig.data)["attnmap"])


def test_figure_returns_its_notes(attnmap, default_model, tmp_path):
    """figure()'s .notes are what `attnmap figure` prints about the figure (its clipped colour bar, --scale
    map's undrawn note), without "attnmap: note: " and with settings spelled as keywords; overlay() has none."""
    imgs = [str(ROCKET), str(COFFEE)]
    for views, scale in (("L3/mean", "run"), ("photo,L3/mean", "map")):
        fig = attnmap.figure(imgs, views, model=default_model, scale=scale)
        p = run_cli("figure", *imgs, "--views", views, "--scale", scale, "-o", tmp_path / "f.png")
        said = [ln[len("attnmap: note: "):] for ln in p.stderr.splitlines() if ln.startswith("attnmap: note: ")]
        said = [s for s in said if "bundled default model" not in s]  # the loader's note: Model.notices
        assert said, p.stderr
        assert fig.notes == [s.replace("--scale", "scale").replace("--notes", "notes") for s in said]
    assert any("bar ends at" in n for n in attnmap.figure(imgs, "L3/mean", model=default_model).notes)
    assert attnmap.overlay(str(COFFEE), "L1/h3", model=default_model).notes == []


def test_figure_class_message_reads_as_python(attnmap, default_model):
    """A topK class for a figure is refused in words that read alike as flags and as keywords."""
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.figure([str(COFFEE)], "chefer", model=default_model, classes="top2")
    assert str(e.value) == ("a figure cell holds one map, so classes takes top1, a class index or a label here, "
                            "found 'top2' (render's explain draws the top K classes, one file each)")
    assert e.value.exit_code == 2


def test_figure_too_large_for_cairo_is_a_usage_error(attnmap, default_model):
    """A figure over cairo's 32767 pixels a side raises exit_code 2 before any map, naming its size and a dpi
    (as a keyword) that fits; a PDF is held to the same pixels."""
    tall = np.zeros((1000, 10, 3), dtype=np.uint8)
    for fmt in ("png", "pdf"):
        with pytest.raises(attnmap.AttnmapError) as e:
            attnmap.figure([tall, tall], "L1/mean", model=default_model, width_in=3, dpi=100, format=fmt)
        msg = str(e.value)
        assert e.value.exit_code == 2
        assert "over cairo's limit of 32767 pixels a side" in msg and "make it smaller: dpi " in msg, msg
        assert ("a PDF figure is laid out in the same pixels" in msg) == (fmt == "pdf"), msg
        assert "--" not in msg, msg


def test_model_keyword_takes_a_model_not_a_path(attnmap, default_model):
    """model= given a path is refused with a TypeError that says to load it once (not an AttributeError)."""
    for call in (lambda m: attnmap.overlay(str(COFFEE), "L1/h3", model=m),
                 lambda m: attnmap.panel(str(COFFEE), "L1/h3", model=m),
                 lambda m: attnmap.figure([str(COFFEE)], "L1/h3", model=m)):
        with pytest.raises(TypeError, match=r"model= takes an attnmap.Model .*found str; m = attnmap.load\('w.pth'\)"):
            call("w.pth")
        with pytest.raises(TypeError, match="found int; load one first"):
            call(3)
    assert attnmap.overlay(str(COFFEE), "L1/h3", model=default_model).data
