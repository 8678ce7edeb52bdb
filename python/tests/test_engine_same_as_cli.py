"""figure() and evaluate() on the engine give what the command line gives (issue 42's fresh-eyes findings): a
folder among figure()'s images is walked as `attnmap figure` walks it (the same bytes), every image missing is
the command's usage error (exit 2), and evaluate()'s text keeps the report's blank separator lines."""
import subprocess

import pytest

from amtest import CLI, DATA, composites_folder

NAMES = sorted(p.name for p in (DATA / "composites").glob("*.png"))[:3]


def _folder(tmp_path):
    return composites_folder(tmp_path, NAMES)


def test_a_folder_is_walked_as_the_figure_command_walks_it(attnmap, default_model, tmp_path):
    src = _folder(tmp_path)
    fig = attnmap.figure([str(src)], "photo,L1/h3", model=default_model)
    out = tmp_path / "f.png"
    subprocess.run([str(CLI), "figure", str(src), "--views", "photo,L1/h3", "-o", str(out), "-q"], check=True)
    assert fig.data == out.read_bytes()
    assert len(fig.record["images"]) == len(NAMES)


def test_every_image_missing_is_a_usage_error(attnmap, default_model, tmp_path):
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.figure([str(tmp_path / "nope.png")], "photo,L1/h3", model=default_model)
    assert e.value.exit_code == 2
    assert "no such file or folder; nothing to draw" in str(e.value)


def test_evaluate_text_keeps_the_blank_lines(attnmap, default_model):
    rep = attnmap.evaluate(str(DATA / "composites"), str(DATA / "composites" / "masks"), model=default_model,
                           views="L1/h3,rollout")
    cli = subprocess.run([str(CLI), "eval", "--masks", str(DATA / "composites" / "masks"), str(DATA / "composites"),
                          "--views", "L1/h3,rollout"], capture_output=True, text=True)
    assert "\n\nattnmap eval: " in rep.text
    assert rep.text.rstrip("\n") == cli.stdout.rstrip("\n")
