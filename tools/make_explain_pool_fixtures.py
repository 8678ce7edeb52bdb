#!/usr/bin/python3
"""Class-specific explanation references for classifiers that read no class-token row (issue 44): timm's mean
pooling (timm_gap, timm_gap_reg: global_pool='avg', with and without fc_norm) and SigLIP's attention-pool (MAP)
head (timm_siglip), by torch autograd through timm's OWN VisionTransformer on the weights and input already
stored in tests/fixtures/families/<case>/ by tools/make_family_fixtures_timm.py (run that first; its run_case
empties the folder, so run this one after it).

    /usr/bin/python3 tools/make_explain_pool_fixtures.py --timm /work/ext/timm [--cases timm_gap,...] \
        [--transformers /work/ext/transformers]

With --vit-pytorch (lucidrains/vit-pytorch at the commit its meta.json names), also vit_pytorch_vit_mean
(pool='mean': the mean of every token, query 'token_mean'). With --transformers (a tree at v4.48.3), also tests/fixtures/siglip/hf/ (after tools/make_siglip_fixtures.py,
which empties it): the same files for a text's logit, by autograd through transformers' SiglipModel with the
texts of tests/fixtures/siglip/texts.json (the target: the logit, not its sigmoid, as for CLIP).

Writes into each case folder (new files only; model.pth, input.npy, meta.json ... are left as they are):
  grad_attn.npy  (L, H, T, T)  dlogit_c/dA of every block (A = the input of blocks[l].attn.attn_drop), float64 run
  probe_grad.npy (H, T)        MAP only: dlogit_c/dA_p for the probe's softmax inside attn_pool.forward
  explain_maps.npy (1 + 2L, N) rows: [chefer (every block); attn-grad at block 0..L-1; gradcam at block 0..L-1]
  explain.json                 the target class, the query, the rules below, the float32-vs-float64 spreads
The maps are computed here with numpy from those tensors (and blocks[l].norm1's output and its gradient for
Grad-CAM) by the definitions in docs/explain.md:
  Abar_l = mean_h (dA_l * A_l)^+ (Chefer, Gur & Wolf ICCV 2021 rule 5); query weights w (T): 1/N on the patch
  rows (PatchMean; the MAP probe at the blocks too), 1/T on every row (TokenMean);
  chefer: r0 = w, or for MAP r0 = mean_h (dA_p * A_p)^+ (T); r <- r + r Abar_l for l = L-1 .. 0 (rule 6, the row
  of R = (I + Abar_L-1) ... (I + Abar_0)); for the means r - w (the row of R - I: the identity's uniform share
  left out, as the class token's own entry is left out of its row); the map is r's patch part;
  attn-grad at l: (w Abar_l) patch part; gradcam at l: ReLU(act_l[patches] . mean_patches(grad_l)).
Deterministic: a second run writes the same bytes. Needs Debian's python3 (torch 1.13, numpy).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402
import make_family_fixtures_timm as mt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = "tools/make_explain_pool_fixtures.py"
QUERY = {"timm_gap": "patch_mean", "timm_gap_reg": "patch_mean", "timm_siglip": "probe"}


def numpy_maps(A, G, PA, PG, acts, gacts, num_prefix, query):
    """The definitions above. A, G (L, H, T, T); PA, PG (H, T) or None; acts, gacts (L, T, D). -> (1 + 2L, N)."""
    L, H, T, _ = A.shape
    w = np.zeros(T)
    if query == "token_mean":
        w[:] = 1.0 / T
    else:
        w[num_prefix:] = 1.0 / (T - num_prefix)
    abar = np.maximum(A * G, 0).mean(1)            # (L, T, T)
    r0 = np.maximum(PA * PG, 0).mean(0) if query == "probe" else w.copy()
    r = r0.copy()
    for l in reversed(range(L)):
        r = r + r @ abar[l]
    if query != "probe":  # the identity's uniform share w (each patch's own skip path into the mean) left out
        r = r - r0
    rows = [r[num_prefix:]]
    rows += [(w @ abar[l])[num_prefix:] for l in range(L)]
    for l in range(L):
        wc = gacts[l, num_prefix:].mean(0)
        rows.append(np.maximum(acts[l, num_prefix:] @ wc, 0))
    return np.stack(rows)


def kept_and_grads(attn, acts):
    """The kept attention probabilities and norm1 outputs of every block with their gradients, image 0, as float64
    numpy: A, G (L, H, T, T), acts, gacts (L, T, D)."""
    def stack(lst, grad):
        return torch.stack([(a.grad if grad else a)[0] for a in lst]).double().detach().numpy()
    return stack(attn, False), stack(attn, True), stack(acts, False), stack(acts, True)


def autograd_timm(case, folder, dtype, target=None):
    """Runs timm's model (float64 / float32) on the stored input, backward of logits[c] (c = argmax unless given)."""
    sd = case.load_sd(folder)
    x = torch.from_numpy(np.load(os.path.join(folder, "input.npy"))).unsqueeze(0).to(dtype)
    m = case.build().to(dtype).eval()
    m.load_state_dict(sd)
    attn, acts, probe, hs = [], [], [], []

    def keep(lst):
        def f(t):
            t.retain_grad()
            lst.append(t)
        return f
    for b in m.blocks:
        b.attn.fused_attn = False
        hs.append(b.attn.attn_drop.register_forward_pre_hook(lambda mod, inp, k=keep(attn): k(inp[0])))
        hs.append(b.norm1.register_forward_hook(lambda mod, inp, out, k=keep(acts): k(out)))
    pool = getattr(m, "attn_pool", None)
    orig = torch.Tensor.softmax
    if pool is not None:  # the probe's softmax, recorded only while attn_pool.forward runs
        pool.fused_attn = False

        def patched(t, *a, **k):
            out = orig(t, *a, **k)
            keep(probe)(out)
            return out
        hs.append(pool.register_forward_pre_hook(lambda mod, inp: setattr(torch.Tensor, "softmax", patched)))
        hs.append(pool.register_forward_hook(lambda mod, inp, out: setattr(torch.Tensor, "softmax", orig)))
    try:
        logits = m(x)[0]
    finally:
        torch.Tensor.softmax = orig
        for h in hs:
            h.remove()
    c = int(logits.argmax()) if target is None else target
    logits[c].backward()
    A, G, acts_, gacts = kept_and_grads(attn, acts)
    PA = PG = None
    if pool is not None:
        assert len(probe) == 1, len(probe)
        PA = probe[0][0, :, 0, :].double().detach().numpy()  # (H, T), latent_len 1
        PG = probe[0].grad[0, :, 0, :].double().numpy()
    return c, logits.detach().double().numpy(), A, G, PA, PG, acts_, gacts


def write_case(folder, name, source, c, q, A, G, PA, PG, acts, gacts, maps32, G32, PG32, rule):
    """grad_attn.npy, probe_grad.npy (MAP), explain_maps.npy and explain.json (the float32 run for the spreads)."""
    maps = numpy_maps(A, G, PA, PG, acts, gacts, json.load(open(os.path.join(folder, "meta.json")))["num_prefix"], q)
    fl.save_npy(os.path.join(folder, "grad_attn.npy"), G)
    if PG is not None:
        fl.save_npy(os.path.join(folder, "probe_grad.npy"), PG)
    fl.save_npy(os.path.join(folder, "explain_maps.npy"), maps)
    L = A.shape[0]
    info = {
        "generator": GENERATOR, "case": name, "target_class": c, "query": q, "source": source,
        "grad_attn": {"file": "grad_attn.npy", "shape": list(G.shape), "max_abs": float(np.abs(G).max()),
                      "spread_f32_f64": float(np.abs(G - G32).max()), "rule": rule},
        "maps": {"file": "explain_maps.npy", "shape": list(maps.shape),
                 "rows": ["chefer"] + ["attn-grad@%d" % l for l in range(L)] + ["gradcam@%d" % l for l in range(L)],
                 "peak": [float(np.abs(r).max()) for r in maps],
                 "spread_f32_f64": [float(v) for v in np.abs(maps - maps32).max(1)],
                 "rule": __doc__.split("The maps are computed")[1].split("Deterministic")[0].strip()},
    }
    if PG is not None:
        info["probe_grad"] = {"file": "probe_grad.npy", "shape": list(PG.shape), "max_abs": float(np.abs(PG).max()),
                              "spread_f32_f64": float(np.abs(PG - PG32).max()),
                              "rule": "d logits[c] / d softmax output inside attn_pool.forward (probe, latent_len 1)"}
    with open(os.path.join(folder, "explain.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    print("%-20s class %d  |dA| max %.3g spread %.1e  maps spread %.1e" % (
        name, c, info["grad_attn"]["max_abs"], info["grad_attn"]["spread_f32_f64"],
        max(info["maps"]["spread_f32_f64"])))


def make_case(case, folder):
    meta = json.load(open(os.path.join(folder, "meta.json")))
    q = QUERY[case.name]
    c, l64, A, G, PA, PG, acts, gacts = autograd_timm(case, folder, torch.float64)
    c32, _, A32, G32, PA32, PG32, acts32, gacts32 = autograd_timm(case, folder, torch.float32, c)
    want = np.load(os.path.join(folder, "logits.npy"))
    assert np.abs(l64 - want).max() < 1e-5, "the rebuilt model does not give logits.npy"
    maps32 = numpy_maps(A32, G32, PA32, PG32, acts32, gacts32, meta["num_prefix"], q)
    write_case(folder, case.name, meta["source"], c, q, A, G, PA, PG, acts, gacts, maps32, G32, PG32,
               "torch autograd of logits[c] (c = argmax) through timm's VisionTransformer.forward, float64; d/dA "
               "for A = the input of each block's attn.attn_drop")


def autograd_vit_pytorch(vit_module, folder, dtype, target=None):
    """lucidrains/vit-pytorch ViT(pool='mean') (make_family_fixtures_clip.py's VITP dimensions) on the stored input:
    A = each Attention.attend (nn.Softmax) output, Grad-CAM's activation = each Attention.norm output."""
    import make_family_fixtures_clip as mfc
    m = vit_module.ViT(pool="mean", **mfc.VITP)
    m.load_state_dict(torch.load(os.path.join(folder, "model.pth"), map_location="cpu"), strict=True)
    m = m.to(dtype).eval()
    x = torch.from_numpy(np.load(os.path.join(folder, "input.npy"))).reshape(1, 3, 32, 32).to(dtype)
    attn, acts, hs = [], [], []

    def keep(lst):
        def f(mod, inp, out):
            out.retain_grad()
            lst.append(out)
        return f
    for layer in m.transformer.layers:
        hs.append(layer[0].attend.register_forward_hook(keep(attn)))
        hs.append(layer[0].norm.register_forward_hook(keep(acts)))
    try:
        logits = m(x)[0]
    finally:
        for h in hs:
            h.remove()
    c = int(logits.argmax()) if target is None else target
    logits[c].backward()
    A, G, acts_, gacts = kept_and_grads(attn, acts)
    return c, logits.detach().double().numpy(), A, G, None, None, acts_, gacts


def make_vit_pytorch_mean(path, commit, folder):
    import make_family_fixtures_clip as mfc
    fam = mfc.VitPytorch(path)
    meta = json.load(open(os.path.join(folder, "meta.json")))
    assert meta["source"]["commit"] == commit, (meta["source"]["commit"], commit)
    c, l64, A, G, _, _, acts, gacts = autograd_vit_pytorch(fam.vit, folder, torch.float64)
    _, _, A32, G32, _, _, acts32, gacts32 = autograd_vit_pytorch(fam.vit, folder, torch.float32, c)
    assert np.abs(l64 - np.load(os.path.join(folder, "logits.npy"))).max() < 1e-4
    write_case(folder, "vit_pytorch_vit_mean", meta["source"], c, "token_mean", A, G, None, None, acts, gacts,
               numpy_maps(A32, G32, None, None, acts32, gacts32, 0, "token_mean"), G32, None,
               "torch autograd of logits[c] (c = argmax) through vit_pytorch.vit.ViT.forward (pool='mean'), "
               "float64; d/dA for A = each Attention.attend (nn.Softmax) output; Grad-CAM's activation = each "
               "Attention.norm output")


def read_safetensors(path):
    """{name: tensor} of a safetensors file (the safetensors package is not installed: its format read here)."""
    kinds = {"F16": np.float16, "F32": np.float32, "I64": np.int64}
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    head = json.loads(raw[8:8 + n])
    out = {}
    for k, e in head.items():
        if k == "__metadata__":
            continue
        a, b = e["data_offsets"]
        arr = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=kinds[e["dtype"]]).reshape(e["shape"])
        out[k] = torch.from_numpy(arr.astype(np.float32 if e["dtype"] == "F16" else arr.dtype))
    return out


def autograd_siglip_hf(T, folder, dtype, target=None):
    """Hugging Face SiglipModel (the stored float16 weights, run in dtype) on image.png and texts.json: backward of
    logits_per_image[0, j] (j = the most probable text unless given) through the family's own forward. The
    softmax outputs are kept while vision_model runs: its encoder layers' (eager attention: nn.functional.softmax
    in float32) then the MAP head's (nn.MultiheadAttention -> F.multi_head_attention_forward's softmax)."""
    import torch.nn.functional as F
    from PIL import Image
    model = T.SiglipModel(T.SiglipConfig.from_pretrained(folder, attn_implementation="eager"))
    missing, unexpected = model.load_state_dict(read_safetensors(os.path.join(folder, "model.safetensors")), strict=False)
    assert not unexpected and all(k.endswith("position_ids") for k in missing), (missing, unexpected)
    model = model.to(dtype).eval()
    img = np.asarray(Image.open(os.path.join(folder, "..", "image.png")).convert("RGB"))
    v = (img.astype(np.float64) * (1 / 255)).astype(np.float32)   # = SiglipImageProcessor's pixel_values
    x = torch.from_numpy(((v - np.float32(0.5)) / np.float32(0.5)).transpose(2, 0, 1)[None].copy()).to(dtype)
    ids = torch.tensor(json.load(open(os.path.join(folder, "..", "texts.json")))["ids"])
    vm = model.vision_model
    soft, acts, hs = [], [], []
    orig = F.softmax

    def patched(t, *a, **k):
        out = orig(t, *a, **k)
        out.retain_grad()
        soft.append(out)
        return out

    def keep(mod, inp, out):
        out.retain_grad()
        acts.append(out)
    hs.append(vm.register_forward_pre_hook(lambda mod, inp: setattr(F, "softmax", patched)))
    hs.append(vm.register_forward_hook(lambda mod, inp, out: setattr(F, "softmax", orig)))
    hs += [l.layer_norm1.register_forward_hook(keep) for l in vm.encoder.layers]
    try:
        logits = model(input_ids=ids, pixel_values=x).logits_per_image[0]
    finally:
        F.softmax = orig
        for h in hs:
            h.remove()
    L = len(vm.encoder.layers)
    assert len(soft) == L + 1, len(soft)
    j = int(logits.argmax()) if target is None else target
    logits[j].backward()
    A = torch.stack([a[0] for a in soft[:L]]).double().detach().numpy()
    G = torch.stack([a.grad[0] for a in soft[:L]]).double().numpy()
    PA = soft[L][:, 0, :].double().detach().numpy()   # (H, T): MHA's (B*H, 1, T), B = 1
    PG = soft[L].grad[:, 0, :].double().numpy()
    acts_ = torch.stack([a[0] for a in acts]).double().detach().numpy()
    gacts = torch.stack([a.grad[0] for a in acts]).double().numpy()
    return j, logits.detach().double().numpy(), A, G, PA, PG, acts_, gacts


def make_siglip_hf(T, folder):
    exp = json.load(open(os.path.join(folder, "expected.json")))
    j, l64, A, G, PA, PG, acts, gacts = autograd_siglip_hf(T, folder, torch.float64)
    _, _, A32, G32, PA32, PG32, acts32, gacts32 = autograd_siglip_hf(T, folder, torch.float32, j)
    want = np.array(exp["logits_per_image"]["values"])
    assert np.abs(l64 - want).max() < 1e-5, (l64, want)
    maps = numpy_maps(A, G, PA, PG, acts, gacts, 0, "probe")
    maps32 = numpy_maps(A32, G32, PA32, PG32, acts32, gacts32, 0, "probe")
    for name, arr in (("grad_attn.npy", G), ("probe_grad.npy", PG), ("explain_maps.npy", maps)):
        fl.save_npy(os.path.join(folder, name), arr)
    L = A.shape[0]
    info = {
        "generator": GENERATOR, "case": "siglip/hf with texts", "target_class": j, "query": "probe",
        "source": exp["source"],
        "target": "logits_per_image[0, j] = exp(logit_scale) cos(image, text j) + logit_bias (the logit, not its "
                  "sigmoid), j = the most probable of texts.json's texts",
        "grad_attn": {"file": "grad_attn.npy", "shape": list(G.shape), "max_abs": float(np.abs(G).max()),
                      "spread_f32_f64": float(np.abs(G - G32).max()),
                      "rule": "torch autograd through SiglipModel.forward (float64 weights from the stored float16; "
                              "the eager attention's softmax runs in float32 as the family's code casts it); d/dA "
                              "for A = each vision encoder layer's nn.functional.softmax output"},
        "probe_grad": {"file": "probe_grad.npy", "shape": list(PG.shape), "max_abs": float(np.abs(PG).max()),
                       "spread_f32_f64": float(np.abs(PG - PG32).max()),
                       "rule": "d/dA_p for the softmax inside vision_model.head.attention (nn.MultiheadAttention)"},
        "maps": {"file": "explain_maps.npy", "shape": list(maps.shape),
                 "rows": ["chefer"] + ["attn-grad@%d" % l for l in range(L)] + ["gradcam@%d" % l for l in range(L)],
                 "peak": [float(np.abs(r).max()) for r in maps],
                 "spread_f32_f64": [float(v) for v in np.abs(maps - maps32).max(1)],
                 "rule": "as tests/fixtures/families/timm_siglip/explain.json (query 'probe'); Grad-CAM's "
                         "activation = each encoder layer's layer_norm1 output"},
    }
    with open(os.path.join(folder, "explain.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    print("siglip/hf      text %d  |dA| max %.3g spread %.1e  maps spread %.1e" % (
        j, info["grad_attn"]["max_abs"], info["grad_attn"]["spread_f32_f64"], max(info["maps"]["spread_f32_f64"])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timm", required=True, help="work tree of huggingface/pytorch-image-models")
    ap.add_argument("--timm-commit")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "families"))
    ap.add_argument("--cases", default="", help="comma-separated subset of " + ",".join(QUERY))
    ap.add_argument("--vit-pytorch", help="lucidrains/vit-pytorch work tree: also vit_pytorch_vit_mean (pool='mean')")
    ap.add_argument("--vit-pytorch-commit")
    ap.add_argument("--transformers", help="a transformers tree at v4.48.3 (holding src/): also siglip/hf's texts")
    args = ap.parse_args()
    if args.transformers:  # first: transformers probes for torchvision at import, which timm's stub would answer
        import make_family_fixtures_hf as mfh
        make_siglip_hf(mfh.import_transformers(args.transformers), os.path.join(ROOT, "tests", "fixtures", "siglip", "hf"))
    if args.vit_pytorch:
        make_vit_pytorch_mean(os.path.abspath(args.vit_pytorch), mt.git_commit(args.vit_pytorch, args.vit_pytorch_commit),
                              os.path.join(args.out, "vit_pytorch_vit_mean"))
    _, tc = mt.import_timm(args.timm, args.timm_commit, fused_attn=False)
    want = [c for c in args.cases.split(",") if c] or list(QUERY)
    for case in mt.timm_cases(tc):
        if case.name in want:
            make_case(case, os.path.join(args.out, case.name))


if __name__ == "__main__":
    main()
