"""The issue's acceptance test: a torchvision vit_b_16() state dict passed in memory gives the same maps as torch
hooks on the model itself (within a stated tolerance) and the same maps, bit for bit, as the CLI on the
saved file.

The model is random (torch.manual_seed(0); no download is possible). torchvision's EncoderBlock calls
nn.MultiheadAttention with need_weights=False; the hook wraps each block's self_attention.forward to call it
with need_weights=True, average_attn_weights=False and keeps the (B, H, T, T) probabilities.

Preprocessing: the photo is a 224 x 224 RGB PNG, so attnmap's squash resize to 224 x 224 is the identity; torch
gets (x / 255 - mean) / std with ImageNet's mean and std in float32, the same normalised tensor.
"""
import numpy as np
import pytest

import amtest
from amtest import DATA, cli_raw_maps, rgb_array

TOL = 1e-4  # absolute, on attention probabilities, rollout mass and class probabilities
VIEWS = "L-1/mean,L0/h0,L5/h3,rollout,L5/h3:q=r7c3,L11/max:k=r3c9"
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


@pytest.fixture(scope="module")
def vit(torch):
    tv = amtest.need("torchvision")
    torch.manual_seed(0)
    model = tv.models.vit_b_16().eval()
    return model


def _torch_attentions(torch, model, arr):
    captured = []
    originals = []
    for blk in model.encoder.layers:
        sa = blk.self_attention
        orig = sa.forward

        def fwd(*args, _orig=orig, **kw):
            kw["need_weights"] = True
            kw["average_attn_weights"] = False
            out, w = _orig(*args, **kw)
            captured.append(w.detach())
            return out, w
        sa.forward = fwd
        originals.append((sa, orig))
    try:
        x = torch.from_numpy(arr).permute(2, 0, 1).to(torch.float32) / 255
        x = (x - torch.from_numpy(MEAN)[:, None, None]) / torch.from_numpy(STD)[:, None, None]
        with torch.no_grad():
            logits = model(x[None])
    finally:
        for sa, orig in originals:
            del sa.forward  # back to the class's forward
            assert sa.forward.__func__ is type(sa).forward
    A = torch.stack(captured)[:, 0].numpy()  # (L, H, T, T) float32
    return A, logits[0].double().softmax(-1).numpy()


def _rollout(A):
    """attnmap's rollout (docs/cli.md): heads averaged, (A + I) / 2, rows normalised, R = Â_L ... Â_0."""
    T = A.shape[-1]
    R = np.eye(T)
    for a in A.astype(np.float64):
        ah = (a.mean(0) + np.eye(T)) / 2
        ah /= ah.sum(-1, keepdims=True)
        R = ah @ R
    return R


def test_vit_b_16_in_memory_equals_torch_and_cli(attnmap, torch, vit, tmp_path):
    img = DATA / "composites" / "0000_trouser.png"
    arr = rgb_array(img)
    assert arr.shape == (224, 224, 3)

    sd = {k: v.numpy() for k, v in vit.state_dict().items()}
    m = attnmap.from_state_dict(sd, name="vit_b_16")
    info = m.info
    assert info["layout"] == "torchvision"
    assert (info["depth"], info["num_heads"], info["dim"], info["patch"]) == (12, 12, 768, 16)
    assert tuple(info["grid"]) == (14, 14) and info["tokens"] == 197 and info["num_classes"] == 1000
    assert all(r == "" for _, _, r in m.tensors), [t for t in m.tensors if t[2]]

    r = m.forward(arr, views=VIEWS, attentions=True)
    At, probs_t = _torch_attentions(torch, vit, arr)
    A = r.attentions
    assert A.shape == At.shape == (12, 12, 197, 197)
    d_att = float(np.abs(A.astype(np.float64) - At).max())
    g = lambda v: v.reshape(14, 14)  # noqa: E731
    want = {
        "L11/mean": g(At[11].astype(np.float64).mean(0)[0, 1:]),
        "L0/h0": g(At[0, 0, 0, 1:]),
        "L5/h3": g(At[5, 3, 0, 1:]),
        "rollout": g(_rollout(At)[0, 1:]),
        "L5/h3:q=r7c3": g(At[5, 3, 1 + 7 * 14 + 3, 1:]),
        "L11/max:k=r3c9": g(At[11].max(0)[1:, 1 + 3 * 14 + 9]),
    }
    assert [mp.view for mp in r.maps] == list(want)
    d_maps = {v: float(np.abs(r[v].array.astype(np.float64) - w).max()) for v, w in want.items()}
    d_probs = float(np.abs(r.probs - probs_t).max())
    report = f"max |attnmap - torch|: attentions {d_att:.3g}, maps {d_maps}, probs {d_probs:.3g}"
    print(report)
    assert d_att < TOL and max(d_maps.values()) < TOL and d_probs < TOL, report

    # the CLI on the saved file: the same maps bit for bit
    pth = tmp_path / "vit_b_16.pth"
    torch.save(vit.state_dict(), str(pth))
    ref = cli_raw_maps(tmp_path / "out", [str(img)], ["-w", str(pth), "--views", VIEWS])[str(img)]
    for mp, (fname, a) in zip(r.maps, ref):
        assert np.array_equal(mp.array, a), f"{mp.view} differs from the CLI's {fname}"
    # load() of the saved file: the same model
    mf = attnmap.load(str(pth))
    a, b = dict(mf.info), dict(info)
    for k in ("name", "weights_sha256", "format", "source"):  # provenance
        a.pop(k), b.pop(k)
    assert a == b
    # a 1000-class head without labels in the weights: ImageNet-1k's names (as --labels' default), in info too
    top = int(np.argmax(r.probs))
    assert len(info["labels"]) == 1000, f"info['labels'] has {len(info['labels'])} names; top-5 says {r.top5[:2]}"
    assert r.top5[0][0] == info["labels"][top] == mf.info["labels"][top], (r.top5[0], len(info["labels"]))
