"""CaiT's class-specific maps, rollout and patch queries from Python (issue 44): the same engine as the CLI
(their numbers against timm's autograd are checked in tests/test_cait_explain.cpp)."""
import numpy as np

from amtest import DATA, FIX, import_attnmap

attnmap = import_attnmap()
CAIT = FIX / "cait" / "cait_tiny" / "model.safetensors"


def test_cait_explains_rolls_out_and_takes_patch_queries():
    m = attnmap.load(str(CAIT), quiet=True)
    image = str(DATA / "chelsea.png")
    for method in ("chefer", "gradcam", "attn-grad"):
        maps = m.explain(image, method)
        assert len(maps) == 1
        a = np.asarray(maps[0])
        assert a.shape == (4, 4) and np.isfinite(a).all() and a.max() > 0, method
    res = m.views(image, "rollout,L1/mean:q=r1c1,rollout:q=r2c2")
    for v in res:
        a = np.asarray(v)
        assert a.shape == (4, 4) and a.max() > 0
    try:
        m.views(image, "L4/mean:q=r1c1")
    except Exception as e:  # noqa: BLE001 - attnmap's error type
        assert "only the class token queries" in str(e)
    else:
        raise AssertionError("a patch query in a class-attention block was not refused")
