#!/usr/bin/python3
"""Family fixtures for Hugging Face BEiT (issue 44) made by transformers' OWN code:
BeitForImageClassification (models/beit/modeling_beit.py) with random weights, saved with save_pretrained.
Format: tests/fixtures/families/FORMAT.md.  Read by tests/test_families.cpp and tests/test_hf_beit.cpp.

Run (from anywhere; nothing here is needed at run time by attnmap):

    /usr/bin/python3 tools/make_family_fixtures_hf_beit.py --transformers /work/ext/transformers \\
        [--only hf_beit_relpos_mean] [--out tests/fixtures/families]

--transformers is a work tree of huggingface/transformers at 298b3f19303294293f7af075609481d64cb13de3
(tag v4.48.3), taken from the git history of github:TonyRHouston/huggingface-transformers (a fork holding
upstream's commits; the upstream snapshot exceeds the fetch size limit); never committed to attnmap.
The shims (Debian has no transformers / safetensors / huggingface_hub) are tools/make_family_fixtures_hf.py's,
imported from it and recorded in every meta.json.

Cases (image 32, patch 8, hidden 32, 2 heads, depth 3, MLP 128, 5 classes; LayerNorm weights random,
lambda_1 / lambda_2 random in [0.2, 0.9], relative position tables N(0, 1), q/k scaled until every block's
mean row max >= 0.6):
  hf_beit_relpos_mean  use_relative_position_bias (a table per layer), use_mean_pooling (pooler.layernorm of
                       the mean patch token = timm's fc_norm): microsoft/beit-base-patch16-224's settings.
  hf_beit_shared_cls   use_shared_relative_position_bias (one table, encoder.relative_position_bias),
                       use_absolute_position_embeddings, use_mean_pooling false (beit.layernorm, class token).
Each also runs the same model on a 48 px input (other_size: transformers resizes the position embeddings
bicubically and the relative position tables bilinearly in every forward), and checks that
Data2VecVisionForImageClassification (models/data2vec/modeling_data2vec_vision.py) given the same tensors
under data2vec_vision.* gives the same attention and logits (meta "data2vec_vision").
Attention: output_attentions=True with attn_implementation="eager", in float32 and float64 on the stored float32
weights and input; attn.npy = the float64 result.  explain (FORMAT.md): dlogit/dA of every layer by autograd
(grad_attn.npy), and for the class-token case the chefer / gradcam / attn_grad references of
tools/fixture_explain.py.  Deterministic: two runs write identical files.
"""
import argparse
import copy
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402
import make_family_fixtures_hf as hf  # noqa: E402

GENERATOR = "tools/make_family_fixtures_hf_beit.py"
CASES = ["hf_beit_relpos_mean", "hf_beit_shared_cls"]
S, OTHER_S, PATCH, DIM, HEADS, DEPTH, MLP = 32, 48, 8, 32, 2, 3, 128
LABELS = {i: "class_%d" % i for i in range(5)}
BEIT_STANDARD_MEAN = [0.5, 0.5, 0.5]  # BeitImageProcessor's default IMAGENET_STANDARD_MEAN / STD

hf.LAYERSCALE_NAMES = hf.LAYERSCALE_NAMES + ("lambda_1", "lambda_2")  # BeitLayer's LayerScale


def settings(case):
    common = dict(image_size=S, patch_size=PATCH, hidden_size=DIM, num_hidden_layers=DEPTH,
                  num_attention_heads=HEADS, intermediate_size=MLP, layer_scale_init_value=0.1,
                  id2label=LABELS, label2id={v: k for k, v in LABELS.items()}, attn_implementation="eager")
    if case == "hf_beit_relpos_mean":
        return dict(common, use_relative_position_bias=True, use_mean_pooling=True)
    return dict(common, use_shared_relative_position_bias=True, use_absolute_position_embeddings=True,
                use_mean_pooling=False)


def randomise_beit(model, seed):
    hf.randomise(model, seed, keep=("relative_position_bias_table",))
    g = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("relative_position_bias_table"):
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64).float())


def qk_of(model):
    """Each layer's query (weight, bias) and key (weight; BEiT's key has no bias), scaled together."""
    out = []
    for layer in model.base_model.encoder.layer:
        a = layer.attention.attention
        assert a.key.bias is None and a.query.bias is not None and a.value.bias is not None
        out.append([(a.query.weight, None), (a.query.bias, None), (a.key.weight, None)])
    return out


def call(m, px):
    return m(pixel_values=px, output_attentions=True)


def logits_fn(m, x):
    return m(pixel_values=x.unsqueeze(0)).logits[0]


def other_size(model, m64, attn_fn, blocks, seed, folder):
    """The same model on a 48 px input: transformers' own resizing of the positions and tables."""
    x = hf.make_input(seed + 1, OTHER_S, BEIT_STANDARD_MEAN, BEIT_STANDARD_MEAN)
    m32 = copy.deepcopy(model).float().eval()
    with torch.no_grad():
        a64 = hf.pick(attn_fn(m64, x.double()), blocks)
        a32 = hf.pick([a.double() for a in attn_fn(m32, x)], blocks)
    spread = float((a32 - a64).abs().max())
    fl.save_npy(os.path.join(folder, "input_other.npy"), x.numpy())
    fl.save_npy(os.path.join(folder, "attn_other.npy"), a64.float().numpy())
    tol = max(1e-5, 2 * spread)
    # transformers resizes the tables at 48 px: dropping them must move the attention far beyond the tolerance
    mod = copy.deepcopy(m64)
    with torch.no_grad():
        for n, p in mod.named_parameters():
            if n.endswith("relative_position_bias_table"):
                p.zero_()
        d = float((hf.pick(attn_fn(mod, x.double()), blocks) - a64).abs().max())
    assert d > hf.SANITY_FACTOR * tol, d
    return {"image_size": OTHER_S, "input": "input_other.npy", "attn": "attn_other.npy",
            "tolerance": float("%.6g" % tol), "spread_f32_f64": float("%.6g" % spread),
            "built_as": "the same BeitForImageClassification (config image_size 32) called on a 48 px input: "
                        "BeitPatchEmbeddings interpolates the patch position rows (bicubic, size=(6, 6)), "
                        "BeitRelativePositionBias the tables' offset rows (bilinear, size=(11, 11))",
            "sanity": {"change": "at 48 px: every relative position table -> 0", "max_abs_attn_diff": float("%.6g" % d),
                       "times_tolerance": float("%.4g" % (d / tol))}}


def data2vec_same(T, model, x32):
    """Data2VecVisionForImageClassification with the same config and tensors (beit. -> data2vec_vision.)."""
    from transformers import Data2VecVisionConfig, Data2VecVisionForImageClassification
    cfg = Data2VecVisionConfig(**{k: v for k, v in model.config.to_dict().items()
                                  if k not in ("model_type", "architectures", "transformers_version")})
    cfg._attn_implementation = "eager"
    d2v = Data2VecVisionForImageClassification(cfg).eval()
    sd = {("data2vec_vision." + k[5:] if k.startswith("beit.") else k): v for k, v in model.state_dict().items()}
    missing, unexpected = d2v.load_state_dict(sd, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    with torch.no_grad():
        a, b = call(model, x32.unsqueeze(0)), call(d2v, x32.unsqueeze(0))
    same = all(torch.equal(u, v) for u, v in zip(a.attentions, b.attentions)) and torch.equal(a.logits, b.logits)
    assert same
    return {"same_attention_and_logits": same, "names": "data2vec_vision.* for beit.*, classifier.* as is",
            "source": "src/transformers/models/data2vec/modeling_data2vec_vision.py"}


def sanity_of(case, m64, attn_fn, x32, ref, blocks, tol):
    out = []

    def changed(fn, desc):
        mod = copy.deepcopy(m64)
        with torch.no_grad():
            for n, p in mod.named_parameters():
                fn(n, p)
            out.append(hf.sanity_entry(desc, ref, hf.pick(attn_fn(mod, x32.double()), blocks), tol))
    changed(lambda n, p: p.fill_(1.0) if n.endswith(("lambda_1", "lambda_2")) else None,
            "every lambda_1 / lambda_2 -> 1 (LayerScale dropped)")
    changed(lambda n, p: p.zero_() if n.endswith("relative_position_bias_table") else None,
            "every relative_position_bias_table -> 0")
    changed(lambda n, p: p.zero_() if n.endswith(("query.bias", "value.bias")) else None,
            "query / value biases -> 0")
    if case == "hf_beit_shared_cls":
        changed(lambda n, p: p.zero_() if n.endswith("position_embeddings") else None,
                "beit.embeddings.position_embeddings -> 0")
    return out


def add_explain(model, folder, x32, class_token_pool):
    """grad_attn.npy (L, H, T, T): dlogit_c / dA of every layer by torch autograd through BeitForImageClassification
    (A = the attention probabilities output_attentions returns: the softmax output, dropout being the identity in
    eval), c = argmax of the float64 logits; with a class-token classifier also chefer / gradcam / attn_grad .npy as
    tools/fixture_explain.py defines them (gradcam's activation: layernorm_before's output). meta "explain"."""
    import fixture_explain as fe

    def run(dtype, target=None):
        m = copy.deepcopy(model).to(dtype).eval()
        ln = []

        def keep(mod, inp, o):
            o.retain_grad()
            ln.append(o)
        hs = [layer.layernorm_before.register_forward_hook(keep) for layer in m.beit.encoder.layer]
        o = m(pixel_values=x32.to(dtype).unsqueeze(0), output_attentions=True)
        for a in o.attentions:
            a.retain_grad()
        c = int(o.logits[0].argmax()) if target is None else target
        o.logits[0, c].backward()
        for h in hs:
            h.remove()
        return c, [a.detach()[0].double() for a in o.attentions], [a.grad[0].double() for a in o.attentions], \
            [y.detach()[0].double() for y in ln], [y.grad[0].double() for y in ln]
    c, A, G, Y, GY = run(torch.float64)
    _, A32, G32, Y32, GY32 = run(torch.float32, c)
    g64 = torch.stack(G, 0)
    spread = float((g64 - torch.stack(G32, 0)).abs().max())
    fl.save_npy(os.path.join(folder, "grad_attn.npy"), g64.float().numpy())
    ex = {"file": "grad_attn.npy", "target_class": c, "spread_f32_f64": float("%.6g" % spread),
          "tolerance": float("%.6g" % max(1e-5, 2 * spread)), "max_abs": float("%.6g" % g64.abs().max()),
          "rule": "torch autograd of logits[c] (c = argmax, float64) through BeitForImageClassification; d/dA for "
                  "A = each layer's attention probabilities (output_attentions)", "generator": GENERATOR}
    if class_token_pool:
        g = S // PATCH
        ex["maps"] = {}
        for name, m64, m32 in zip(("chefer", "gradcam", "attn_grad"), fe._maps(A, G, Y, GY, 1, g, g),
                                  fe._maps(A32, G32, Y32, GY32, 1, g, g)):
            fl.save_npy(os.path.join(folder, name + ".npy"), m64.float().numpy())
            ex["maps"][name] = {"file": name + ".npy", "shape": list(m64.shape),
                                "spread_f32_f64": float("%.6g" % (m64 - m32).abs().max()),
                                "peak": float("%.6g" % m64.abs().max())}
    return ex


def make_case(T, case, out):
    from transformers import BeitConfig, BeitForImageClassification, BeitImageProcessor
    seed = 4401 if case == "hf_beit_relpos_mean" else 4501
    model = BeitForImageClassification(BeitConfig(**settings(case))).eval()
    assert type(model.beit.encoder.layer[0].attention.attention).__name__ == "BeitSelfAttention"
    randomise_beit(model, seed)
    x32 = hf.make_input(seed, S, BEIT_STANDARD_MEAN, BEIT_STANDARD_MEAN)
    attn_fn = hf.hf_attn_fn(call)
    factors, peaks = hf.make_peaky(model, attn_fn, qk_of, x32)
    folder = hf.fresh(os.path.join(out, case))
    proc = BeitImageProcessor(size={"height": S, "width": S}, crop_size={"height": S, "width": S})
    hf.hf_save(model, folder, proc)
    a64, a32, l64, l32, m64 = hf.run_precisions(model, attn_fn, x32, logits_fn)
    blocks = [0, 1, 2]
    ref = hf.pick(a64, blocks)
    spread = float((hf.pick(a32, blocks) - ref).abs().max())
    lspread = float((l32 - l64).abs().max())
    tol = max(1e-5, 2 * spread)
    sanity = sanity_of(case, m64, attn_fn, x32, ref, blocks, tol)
    names = sorted(model.state_dict().keys())
    mean_pool = case == "hf_beit_relpos_mean"
    meta = dict(
        case=case, family="Hugging Face transformers BeitForImageClassification", layout="hf-beit",
        files=[{"path": "model.safetensors"}, {"path": "."}], heads_arg=None,
        image_size=S, patch=PATCH, dim=DIM, depth=DEPTH, heads=HEADS, tokens=(S // PATCH) ** 2 + 1, num_prefix=1,
        class_token=True, mean=BEIT_STANDARD_MEAN, std=BEIT_STANDARD_MEAN,
        source=hf.hf_source(["models/beit/modeling_beit.py", "models/beit/configuration_beit.py",
                             "models/beit/image_processing_beit.py", "modeling_utils.py"]),
        shims=hf.SHIMS_HF, generator=GENERATOR,
        description=("transformers v4.48.3 BeitForImageClassification (%s), 5 classes, saved with "
                     "save_pretrained; attention of layers 0,1,2 (output_attentions, eager BeitSelfAttention); "
                     "logits.npy = its logits" % (
                         "a relative position table per layer, use_mean_pooling: pooler.layernorm(mean patch token)"
                         if mean_pool else "one shared relative position table, absolute position embeddings, "
                         "use_mean_pooling false: beit.layernorm then the class token")),
        sanity=sanity, peaky_qk_factors=[float("%.4g" % f) for f in factors],
        mean_row_max=[float("%.4f" % p) for p in peaks], logits_spread_f32_f64=float("%.6g" % lspread),
        config=settings(case) | {"id2label": "class_0 .. class_4"},
        state_dict=names, relative_position_index_saved=any("relative_position_index" in n for n in names),
        forward=dict(layer_norm_eps=1e-12, hidden_act="gelu (exact erf)",
                     attention="softmax(q k^T / sqrt(head_dim) + relative position bias); key without bias",
                     layer="h += lambda_1 * attn(layernorm_before(h)); h += lambda_2 * mlp(layernorm_after(h))",
                     pooling=("pooler.layernorm(mean of the patch tokens) -> classifier" if mean_pool else
                              "beit.layernorm(h)[:, 0] -> classifier")),
    )
    meta["data2vec_vision"] = data2vec_same(T, model, x32)
    # what BeitRelativePositionBias gathers with at the 4x4 grid (transformers < 4.31 saved it as the buffer
    # relative_position_index): tests/test_hf_beit.cpp checks attnmap's computed index against it
    rpb = model.beit.encoder.relative_position_bias or model.beit.encoder.layer[0].attention.attention.relative_position_bias
    meta["relative_position_index_4x4"] = rpb.generate_relative_position_index((S // PATCH, S // PATCH)).tolist()
    meta["other_size"] = other_size(model, m64, attn_fn, blocks, seed, folder)
    meta["explain"] = add_explain(model, folder, x32, not mean_pool)
    hf.write_case(folder, meta=meta, x32=x32, attn64=ref.float(), blocks=blocks, spread=spread,
                  logits=l64.float(), logits_spread=lspread)
    with open(os.path.join(folder, "config.json")) as f:
        saved = json.load(f)
    return folder, saved


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--transformers", required=True, help="work tree of huggingface/transformers @ v4.48.3")
    ap.add_argument("--out", default=os.path.join(hf.ROOT, "tests", "fixtures", "families"))
    ap.add_argument("--only", default="", help="comma-separated case names")
    a = ap.parse_args()
    only = [c for c in a.only.split(",") if c] or CASES
    for c in only:
        if c not in CASES:
            raise SystemExit("unknown case %s" % c)
    torch.set_num_threads(1)
    T = hf.import_transformers(a.transformers)
    for c in only:
        f, saved = make_case(T, c, a.out)
        m = json.load(open(os.path.join(f, "meta.json")))
        print("%-20s %7d bytes  tol %.3g  spread %.3g  other %.3g  sanity %s  config keys %s" % (
            c, hf.folder_size(f), m["tolerance"], m["spread_f32_f64"], m["other_size"]["tolerance"],
            ", ".join("%.3gx" % s["times_tolerance"] for s in m["sanity"]), sorted(saved)))


if __name__ == "__main__":
    main()
