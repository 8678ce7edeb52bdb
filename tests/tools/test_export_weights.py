#!/usr/bin/python3
"""ctest Tools.ExportWeightsHeads: tools/export_weights.py takes the head count from the model object, a
Hugging Face / timm config.json or --heads, and otherwise fails with one line (it used to guess from the
width: 192 -> 3 for a 6-head model). Needs numpy only: the models are stand-ins with the attributes timm,
torchvision and transformers modules have; the command-line case runs only where torch can save a .pt.
Exit 77 (ctest: skipped) when numpy is missing."""
import json
import os
import subprocess
import sys
import tempfile
import types

try:
    import numpy as np
except ImportError:
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, '..', '..', 'tools')
sys.path.insert(0, TOOLS)
import export_weights as ew  # noqa: E402

D, DEPTH, P, G = 192, 2, 4, 2  # a 192-wide model: DeiT-Ti has 3 heads there, this one 6
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print('FAIL:', what)


def timm_sd():
    r = np.random.default_rng(0)
    sd = {'patch_embed.proj.weight': r.standard_normal((D, 3, P, P)), 'patch_embed.proj.bias': np.zeros(D),
          'cls_token': np.zeros((1, 1, D)), 'pos_embed': np.zeros((1, 1 + G * G, D)),
          'norm.weight': np.ones(D), 'norm.bias': np.zeros(D)}
    for i in range(DEPTH):
        b = 'blocks.%d.' % i
        sd.update({b + 'norm1.weight': np.ones(D), b + 'norm1.bias': np.zeros(D),
                   b + 'attn.qkv.weight': r.standard_normal((3 * D, D)), b + 'attn.qkv.bias': r.standard_normal(3 * D),
                   b + 'attn.proj.weight': np.eye(D), b + 'attn.proj.bias': np.zeros(D),
                   b + 'norm2.weight': np.ones(D), b + 'norm2.bias': np.zeros(D),
                   b + 'mlp.fc1.weight': np.zeros((2 * D, D)), b + 'mlp.fc1.bias': np.zeros(2 * D),
                   b + 'mlp.fc2.weight': np.zeros((D, 2 * D)), b + 'mlp.fc2.bias': np.zeros(D)})
    return sd


class Module:
    """Stands in for an nn.Module: state_dict() and the attributes the exporter reads."""

    def __init__(self, sd, **attrs):
        self._sd = sd
        self.__dict__.update(attrs)

    def state_dict(self):
        return dict(self._sd)


def heads_of(obj, **kw):
    return ew.export(obj, **kw)['num_heads']


def error_of(f):
    try:
        f()
    except ValueError as e:
        return str(e)
    return None


ns = types.SimpleNamespace
sd = timm_sd()

# A bare state_dict never gets a guessed head count.
e = error_of(lambda: ew.export(timm_sd()))
check(e is not None and 'cannot tell the number of heads of this 192-wide model' in e and '--heads' in e, repr(e))
check(heads_of(timm_sd(), num_heads=6) == 6, '--heads 6')

# timm: blocks[0].attn.num_heads
check(heads_of(Module(sd, blocks=[ns(attn=ns(num_heads=6))])) == 6, 'timm module heads')
e = error_of(lambda: ew.export(Module(sd, blocks=[ns(attn=ns(num_heads=6))]), num_heads=3))
check(e is not None and '--heads 3 contradicts num_heads 6 from the model object (timm' in e, repr(e))

# torchvision: encoder.layers[0].self_attention.num_heads, torchvision names
tv = {}
for k, v in sd.items():
    k = k.replace('patch_embed.proj.', 'conv_proj.').replace('cls_token', 'class_token').replace('pos_embed', 'encoder.pos_embedding')
    if k.startswith('norm.'):
        k = 'encoder.ln.' + k[5:]
    if k.startswith('blocks.'):
        _, i, rest = k.split('.', 2)
        rest = (rest.replace('norm1.', 'ln_1.').replace('norm2.', 'ln_2.').replace('attn.qkv.weight', 'self_attention.in_proj_weight')
                .replace('attn.qkv.bias', 'self_attention.in_proj_bias').replace('attn.proj.', 'self_attention.out_proj.')
                .replace('mlp.fc1.', 'mlp.0.').replace('mlp.fc2.', 'mlp.3.'))
        k = 'encoder.layers.encoder_layer_%s.%s' % (i, rest)
    tv[k] = v
check(heads_of(Module(tv, encoder=ns(layers=[ns(self_attention=ns(num_heads=6))]))) == 6, 'torchvision module heads')

# Hugging Face: config.num_attention_heads, HF names (query/key/value stacked back into qkv)
hf = {}
for k, v in sd.items():
    if k.startswith('blocks.'):
        _, i, rest = k.split('.', 2)
        b = 'vit.encoder.layer.%s.' % i
        if rest.startswith('attn.qkv.'):
            kind = rest.rsplit('.', 1)[1]
            for n, part in zip(('query', 'key', 'value'), np.split(v, 3, axis=0)):
                hf[b + 'attention.attention.%s.%s' % (n, kind)] = part
            continue
        for a, c in (('norm1.', 'layernorm_before.'), ('norm2.', 'layernorm_after.'), ('attn.proj.', 'attention.output.dense.'),
                     ('mlp.fc1.', 'intermediate.dense.'), ('mlp.fc2.', 'output.dense.')):
            if rest.startswith(a):
                rest = c + rest[len(a):]
        hf[b + rest] = v
    else:
        hf['vit.' + {'patch_embed.proj.weight': 'embeddings.patch_embeddings.projection.weight',
                     'patch_embed.proj.bias': 'embeddings.patch_embeddings.projection.bias',
                     'cls_token': 'embeddings.cls_token', 'pos_embed': 'embeddings.position_embeddings',
                     'norm.weight': 'layernorm.weight', 'norm.bias': 'layernorm.bias'}[k]] = v
hf_mod = Module(hf, config=ns(num_attention_heads=6, layer_norm_eps=1e-12, image_size=G * P, patch_size=P))
check(heads_of(hf_mod) == 6, 'Hugging Face module heads')
check(ew.export(hf_mod)['layer_norm_eps'] == 1e-12, 'Hugging Face module eps')
e = error_of(lambda: ew.export(dict(hf)))  # a bare HF state_dict: no heads either
check(e is not None and 'cannot tell the number of heads' in e, repr(e))
check(ew.export(dict(hf), num_heads=6)['layer_norm_eps'] == 1e-12, 'HF state_dict: eps default 1e-12 (ViTConfig)')
check(ew.export(timm_sd(), num_heads=6)['layer_norm_eps'] == 1e-6, 'timm state_dict: eps default 1e-6')
conv, _ = ew.to_timm_state_dict(hf_mod)
check(np.array_equal(conv['blocks.1.attn.qkv.weight'], sd['blocks.1.attn.qkv.weight'].astype(np.float32)), 'HF q/k/v stacked as timm qkv')

# config.json files: Hugging Face and timm hub
with tempfile.TemporaryDirectory() as tmp:
    hf_cfg, timm_cfg, timm_arch = (os.path.join(tmp, n) for n in ('hf.json', 'timm.json', 'arch.json'))
    json.dump({'model_type': 'vit', 'num_attention_heads': 6, 'hidden_size': D}, open(hf_cfg, 'w'))
    json.dump({'architecture': 'vit_tiny_patch16_224', 'model_args': {'num_heads': 6}}, open(timm_cfg, 'w'))
    json.dump({'architecture': 'vit_small_patch16_224.augreg_in21k', 'pretrained_cfg': {}}, open(timm_arch, 'w'))
    check(heads_of(timm_sd(), config_file=hf_cfg) == 6, 'HF config.json heads')
    check(heads_of(timm_sd(), config_file=timm_cfg) == 6, 'timm model_args.num_heads')
    check(heads_of(timm_sd(), config_file=timm_arch) == 6, 'timm architecture size word (small: 6)')
    e = error_of(lambda: ew.export(Module(sd, blocks=[ns(attn=ns(num_heads=3))]), config_file=hf_cfg))
    check(e is not None and 'contradicts' in e, repr(e))

    # The command line: one line, exit status 2, nothing written (only where torch can write a .pt).
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        pt = os.path.join(tmp, 'sd.pt')
        torch.save({k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in timm_sd().items()}, pt)
        out = os.path.join(tmp, 'out.json')
        r = subprocess.run([sys.executable, os.path.join(TOOLS, 'export_weights.py'), pt, '-o', out],
                           capture_output=True, text=True)
        check(r.returncode == 2 and r.stderr.count('\n') == 1 and 'cannot tell the number of heads' in r.stderr,
              'CLI without heads: %d %r' % (r.returncode, r.stderr))
        check(not os.path.exists(out), 'nothing written')
        r = subprocess.run([sys.executable, os.path.join(TOOLS, 'export_weights.py'), pt, '-o', out, '--heads', '6'],
                           capture_output=True, text=True)
        check(r.returncode == 0 and json.load(open(out))['config']['num_heads'] == 6, 'CLI --heads 6: %r' % r.stderr)
    else:
        print('torch not importable: command-line cases skipped')

print('%d failure(s)' % len(failures))
sys.exit(1 if failures else 0)
