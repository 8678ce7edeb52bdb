#!/usr/bin/env python3
"""Export ViT weights to attnmap's JSON format (and optionally safetensors).

Input can be
  * a .pt/.pth file holding a state_dict, or a checkpoint dict with the state_dict under
    'model', 'state_dict' or 'model_state_dict' (tools/train_default.py checkpoints
    also carry the model config and labels, which are then used as defaults),
  * (Python API) a state_dict, a timm VisionTransformer, tools/train_default.ViT,
    or a torchvision.models.VisionTransformer.
torchvision names (conv_proj, class_token, encoder.pos_embedding,
encoder.layers.encoder_layer_N.*, heads.head) are renamed to timm's layout
(patch_embed.proj, cls_token, pos_embed, blocks.N.*, head); torchvision's
in_proj_weight is already ordered [q; k; v] with heads contiguous, like timm's qkv.

Output JSON: one object {tensor_name: nested lists, ..., "config": {...}} written
without spaces, floats as the shortest string that round-trips to the same float32
(numpy's float32 repr).  Config keys: num_heads, layer_norm_eps, mean, std,
patch_size, image_size, labels, default_layer, default_head.

Examples:
  # the default model, from the training checkpoint
  python3 tools/export_weights.py /work/train/ckpt.pt -o weights/default.json \\
      --default-layer -1 --default-head mean
  # a torchvision vit_b_16 state_dict (num_heads cannot be read from a state_dict)
  python3 tools/export_weights.py vit_b_16.pth -o vit_b_16.json --num-heads 12 \\
      --labels-file imagenet_classes.txt --safetensors vit_b_16.safetensors

Python:
  from export_weights import export
  export(model_or_state_dict, 'out.json', num_heads=4, labels=[...])
"""
import argparse
import json
import os
import re
import struct
import sys

import numpy as np

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
# num_heads of the usual ViT widths, used only when nothing else says it
KNOWN_HEADS = {192: 3, 384: 6, 768: 12, 1024: 16, 1280: 16}


def _to_numpy(v):
    if hasattr(v, 'detach'):
        v = v.detach().cpu().float().numpy()
    return np.asarray(v, dtype=np.float32)


def torchvision_to_timm(sd):
    """Rename a torchvision VisionTransformer state_dict to timm's key names."""
    out = {}
    for k, v in sd.items():
        n = k
        n = n.replace('conv_proj.', 'patch_embed.proj.')
        if n == 'class_token':
            n = 'cls_token'
        if n == 'encoder.pos_embedding':
            n = 'pos_embed'
        m = re.match(r'encoder\.layers\.encoder_layer_(\d+)\.(.*)', n)
        if m:
            i, rest = m.group(1), m.group(2)
            rest = (rest.replace('ln_1.', 'norm1.').replace('ln_2.', 'norm2.')
                    .replace('self_attention.in_proj_weight', 'attn.qkv.weight')
                    .replace('self_attention.in_proj_bias', 'attn.qkv.bias')
                    .replace('self_attention.out_proj.', 'attn.proj.')
                    .replace('mlp.0.', 'mlp.fc1.').replace('mlp.3.', 'mlp.fc2.')
                    .replace('mlp.linear_1.', 'mlp.fc1.').replace('mlp.linear_2.', 'mlp.fc2.'))
            n = 'blocks.%s.%s' % (i, rest)
        if n.startswith('encoder.ln.'):
            n = 'norm.' + n[len('encoder.ln.'):]
        if n.startswith('heads.head.'):
            n = 'head.' + n[len('heads.head.'):]
        elif n.startswith('heads.'):
            raise ValueError('unsupported torchvision head layer %r (pre_logits?)' % k)
        out[n] = v
    return out


def to_timm_state_dict(obj):
    """Accept a module, a state_dict or a checkpoint dict; return (state_dict, hints)."""
    hints = {}
    if hasattr(obj, 'state_dict') and callable(obj.state_dict):
        mod = obj
        sd = mod.state_dict()
        # num_heads from the module if available
        try:  # torchvision
            hints['num_heads'] = mod.encoder.layers[0].self_attention.num_heads
        except Exception:
            pass
        try:  # timm / train_default
            hints['num_heads'] = mod.blocks[0].attn.num_heads
        except Exception:
            pass
        for attr in ('image_size',):
            if isinstance(getattr(mod, attr, None), int):
                hints['image_size'] = getattr(mod, attr)
        if isinstance(getattr(mod, 'patch_size', None), int):
            hints['patch_size'] = mod.patch_size
    else:
        sd = obj
        for key in ('model', 'state_dict', 'model_state_dict'):
            if isinstance(sd, dict) and key in sd and isinstance(sd[key], dict):
                if isinstance(sd.get('cfg'), dict):
                    c = sd['cfg']
                    hints.update({k: c[k] for k in ('labels', 'mean', 'std', 'patch_size',
                                                    'image_size', 'layer_norm_eps')
                                  if k in c})
                    if 'heads' in c:
                        hints['num_heads'] = c['heads']
                sd = sd[key]
                break
    sd = {k[len('module.'):] if k.startswith('module.') else k: v for k, v in sd.items()}
    if 'conv_proj.weight' in sd or 'class_token' in sd:
        sd = torchvision_to_timm(sd)
    # drop buffers / things attnmap does not use
    sd = {k: v for k, v in sd.items() if not k.endswith('num_batches_tracked')}
    missing = [k for k in ('patch_embed.proj.weight', 'cls_token', 'pos_embed') if k not in sd]
    if 'head.weight' in sd and 'norm.weight' not in sd:
        missing.append('norm.weight')  # the classifier reads the final LayerNorm; a backbone may lack both
    if missing:
        raise ValueError('not a ViT state_dict in timm/torchvision layout; missing %s' % missing)
    return sd, hints


def _fmt_float(x):
    s = repr(np.float32(x))  # shortest round-trip representation
    if s.startswith('np.float32('):  # numpy >= 2
        s = s[len('np.float32('):-1]
    if s in ('nan', 'inf', '-inf'):
        raise ValueError('non-finite weight')
    return s


def _dump_array(a):
    if a.ndim == 0:
        return _fmt_float(a)
    if a.ndim == 1:
        return '[' + ','.join(map(_fmt_float, a.tolist())) + ']'
    return '[' + ','.join(_dump_array(x) for x in a) + ']'


def make_config(sd, hints, num_heads=None, layer_norm_eps=None, mean=None, std=None,
                patch_size=None, image_size=None, labels=None, default_layer=-1,
                default_head='mean'):
    pw = sd['patch_embed.proj.weight']
    D = int(pw.shape[0])
    ps = patch_size or hints.get('patch_size') or int(pw.shape[-1])
    npos = int(sd['pos_embed'].shape[1]) - 1
    g = int(round(npos ** 0.5))
    isz = image_size or hints.get('image_size') or g * ps
    if num_heads is not None and num_heads <= 0:
        raise ValueError('--num-heads must be positive, found %d' % num_heads)
    nh = num_heads or hints.get('num_heads') or KNOWN_HEADS.get(D)
    if not nh:
        raise ValueError('cannot tell num_heads for width %d: pass --num-heads' % D)
    if D % nh:
        raise ValueError('width %d not divisible by num_heads %d' % (D, nh))
    labels = list(labels or hints.get('labels') or [])
    if 'head.weight' in sd:
        ncls = int(sd['head.weight'].shape[0])
        if labels and len(labels) != ncls:
            raise ValueError('%d labels for a head with %d outputs' % (len(labels), ncls))
    elif labels:
        raise ValueError('labels given but the state_dict has no classifier head (head.weight)')
    depth = 1 + max([int(k.split('.')[1]) for k in sd if k.startswith('blocks.') and k.split('.')[1].isdigit()],
                    default=-1)
    if not -depth <= int(default_layer) < depth:
        raise ValueError('--default-layer %d out of range for %d blocks (0..%d, or -1..-%d)'
                         % (default_layer, depth, depth - 1, depth))
    if isinstance(default_head, str) and default_head not in ('mean', 'max', 'min'):
        try:
            default_head = int(default_head)
        except ValueError:
            raise ValueError("--default-head must be mean, max, min or a head index, found '%s'" % default_head)
    if isinstance(default_head, int) and not 0 <= default_head < nh:
        raise ValueError('--default-head %d out of range for %d heads (0..%d)' % (default_head, nh, nh - 1))
    eps = layer_norm_eps if layer_norm_eps is not None else hints.get('layer_norm_eps', 1e-6)
    if not eps >= 0:
        raise ValueError('--layer-norm-eps must be >= 0, found %r' % eps)
    cfg = {
        'num_heads': int(nh),
        'layer_norm_eps': float(eps),
        'mean': [float(v) for v in (mean or hints.get('mean') or IMAGENET_MEAN)],
        'std': [float(v) for v in (std or hints.get('std') or IMAGENET_STD)],
        'patch_size': int(ps),
        'image_size': int(isz),
        'default_layer': int(default_layer),
        'default_head': default_head,
    }
    if labels:  # without them attnmap shows "class N"
        cfg['labels'] = labels
    return cfg


def write_json(sd, config, path):
    with open(path, 'w') as f:
        f.write('{')
        first = True
        for k, v in sd.items():
            f.write(('' if first else ',') + json.dumps(k) + ':' + _dump_array(_to_numpy(v)))
            first = False
        f.write(',"config":' + json.dumps(config, separators=(',', ':')) + '}')


def write_safetensors(sd, path, config=None):
    arrays = {k: np.ascontiguousarray(_to_numpy(v), dtype='<f4') for k, v in sd.items()}
    try:
        from safetensors.numpy import save_file
        save_file(arrays, path, metadata={'config': json.dumps(config)} if config else None)
        return
    except ImportError:
        pass
    header = {}
    off = 0
    for k, a in arrays.items():
        header[k] = {'dtype': 'F32', 'shape': list(a.shape), 'data_offsets': [off, off + a.nbytes]}
        off += a.nbytes
    if config:
        header['__metadata__'] = {'config': json.dumps(config)}
    hb = json.dumps(header, separators=(',', ':')).encode('utf-8')
    hb += b' ' * ((8 - len(hb) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(hb)))
        f.write(hb)
        for a in arrays.values():
            f.write(a.tobytes())


def export(obj, out_json=None, safetensors=None, **cfg):
    """obj: module / state_dict / checkpoint dict / path. Returns the config written."""
    if isinstance(obj, (str, os.PathLike)):
        import torch
        obj = torch.load(obj, map_location='cpu')
    sd, hints = to_timm_state_dict(obj)
    config = make_config(sd, hints, **cfg)
    if out_json:
        write_json(sd, config, out_json)
    if safetensors:
        write_safetensors(sd, safetensors, config)
    return config


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('input', help='.pt/.pth state_dict or checkpoint')
    ap.add_argument('-o', '--out', help='output attnmap JSON')
    ap.add_argument('--safetensors', metavar='OUT', help='also write a .safetensors file')
    ap.add_argument('--num-heads', type=int)
    ap.add_argument('--layer-norm-eps', type=float)
    ap.add_argument('--mean', type=float, nargs=3)
    ap.add_argument('--std', type=float, nargs=3)
    ap.add_argument('--patch-size', type=int)
    ap.add_argument('--image-size', type=int)
    ap.add_argument('--labels', help='comma-separated class names in head order')
    ap.add_argument('--labels-file', help='one class name per line, in head order')
    ap.add_argument('--default-layer', type=int, default=-1,
                    help='0-based, negative counts from the end (default -1)')
    ap.add_argument('--default-head', default='mean',
                    help='mean | max | min | head index (default mean)')
    a = ap.parse_args(argv)
    if not a.out and not a.safetensors:
        ap.error('give -o OUT.json and/or --safetensors OUT')
    same = lambda x, y: os.path.realpath(x) == os.path.realpath(y)
    for p in (a.out, a.safetensors):
        if p and same(p, a.input):
            ap.error('%s is the input checkpoint: choose another output name' % p)
    if a.out and a.safetensors and same(a.out, a.safetensors):
        ap.error('-o and --safetensors name the same file: %s' % a.out)
    labels = None
    if a.labels_file:
        with open(a.labels_file) as f:
            labels = [ln.strip() for ln in f if ln.strip()]
    elif a.labels:
        labels = [x.strip() for x in a.labels.split(',')]
    try:
        cfg = export(a.input, a.out, a.safetensors, num_heads=a.num_heads,
                     layer_norm_eps=a.layer_norm_eps, mean=a.mean, std=a.std,
                     patch_size=a.patch_size, image_size=a.image_size, labels=labels,
                     default_layer=a.default_layer, default_head=a.default_head)
    except ValueError as e:  # a bad option or checkpoint: one line, no traceback
        ap.exit(2, '%s: error: %s\n' % (ap.prog, e))
    for p in (a.out, a.safetensors):
        if p:
            print('wrote %s (%d bytes)' % (p, os.path.getsize(p)))
    print('config', json.dumps(cfg))


if __name__ == '__main__':
    main()
