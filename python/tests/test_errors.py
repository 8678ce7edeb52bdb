"""Errors: attnmap.AttnmapError carries the CLI's message (a keyword instead of a flag name) and its exit code
(2 usage or unusable weights, 1 an input that failed)."""
import numpy as np
import pytest

from amtest import DATA, cli_error, run_cli, strip_flag

ROCKET = str(DATA / "rocket.jpg")


def test_error_type(attnmap):
    assert issubclass(attnmap.AttnmapError, Exception)


@pytest.mark.parametrize("view", ["L9/mean", "bogus", "L1/h7", "L1/mean:q=r20c1", "rollout@L12"])
def test_bad_view(attnmap, default_model, tmp_path, view):
    p = run_cli("render", ROCKET, "--views", view, "--out", tmp_path, "-q", check=False)
    assert p.returncode == 2
    want = strip_flag(cli_error(p))  # the CLI's message after '--views: '
    with pytest.raises(attnmap.AttnmapError) as e:
        default_model.forward(ROCKET, views=view)
    assert e.value.exit_code == 2
    assert want in str(e.value), f"{str(e.value)!r} does not hold the CLI's {want!r}"
    assert "--views" not in str(e.value)


def test_bad_weights_path(attnmap, tmp_path):
    missing = str(tmp_path / "nope.safetensors")
    p = run_cli("inspect", missing, check=False)
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.load(missing)
    assert e.value.exit_code == 2 == p.returncode
    assert str(e.value) == cli_error(p)


def test_bad_weights_file(attnmap, tmp_path):
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    p = run_cli("inspect", junk, check=False)
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.load(str(junk))
    assert e.value.exit_code == 2 == p.returncode
    assert str(e.value) == cli_error(p)


def test_bad_image_path(attnmap, default_model, tmp_path):
    missing = str(tmp_path / "nope.png")
    with pytest.raises(attnmap.AttnmapError) as e:
        default_model.forward(missing)
    assert missing in str(e.value)
    assert e.value.exit_code in (1, 2)


def test_corrupt_image(attnmap, default_model, tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"garbage")
    p = run_cli("render", bad, "--out", tmp_path / "o", "-q", check=False)
    assert p.returncode == 1
    with pytest.raises(attnmap.AttnmapError) as e:
        default_model.forward(str(bad))
    assert str(e.value) == cli_error(p)
    # the CLI exits 1 (an input failed); the module's docstring leaves forward's code open: 1 or 2 accepted
    assert e.value.exit_code in (1, 2)


@pytest.mark.parametrize("arr", [np.zeros((10, 10, 3), np.float32), np.zeros((10, 10), np.uint8),
                                 np.zeros((10, 10, 5), np.uint8)])
def test_bad_array(attnmap, default_model, arr):
    """Only uint8 (H, W, 3) arrays are photos: anything else is refused with an exception, not a crash."""
    with pytest.raises((attnmap.AttnmapError, TypeError, ValueError)) as e:
        default_model.forward(arr)
    assert str(e.value)


def test_bad_option(attnmap, default_model):
    with pytest.raises((attnmap.AttnmapError, TypeError, ValueError)):
        default_model.forward(ROCKET, resize="stretch")
    # an unknown keyword: Python's TypeError, or at least an error naming the keyword
    with pytest.raises((TypeError, attnmap.AttnmapError)) as e:
        default_model.forward(ROCKET, no_such_keyword=1)
    assert "no_such_keyword" in str(e.value), str(e.value)


def test_cli_in_process(attnmap, capsys, tmp_path):
    """attnmap.cli(args): the CLI in process, its stdout on sys.stdout, its exit code returned."""
    path = str(DATA.parent / "weights" / "default.json")
    assert attnmap.cli(["inspect", path]) == 0
    assert capsys.readouterr().out == run_cli("inspect", path).stdout
    assert attnmap.cli(["render", ROCKET, "--views", "L9/mean", "--out", str(tmp_path), "-q"]) == 2
    err = capsys.readouterr().err
    assert "layer 9 out of range" in err
