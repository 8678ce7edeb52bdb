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
  # a torchvision vit_b_16 state_dict (num_heads cannot be read from a state_dict: --heads or --config)
  python3 tools/export_weights.py vit_b_16.pth -o vit_b_16.json --heads 12 \\
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
# Heads of timm's architecture size words (timm vision_transformer.py / deit.py model defs), for a timm hub
# config.json that names its architecture but has no model_args.num_heads.  A width alone never says the heads
# (a 192-wide model may have 3 or 6 heads), so nothing here is keyed by width.
TIMM_SIZE_HEADS = {'tiny': 3, 'small': 6, 'base': 12, 'large': 16, 'huge': 16, 'giant': 16, 'gigantic': 16,
                   'medium': 8, 'mediumd': 8, 'so400m': 16, 'little': 5, 'betwixt': 4, 'wee': 4, 'pwee': 4}


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


def hf_to_timm(sd):
    """Rename a Hugging Face ViTModel / ViTForImageClassification state_dict to timm's key names
    (query/key/value stacked into one qkv, rows [q; k; v] as timm's fused projection)."""
    pre = 'vit.' if any(k.startswith('vit.embeddings.') for k in sd) else ''
    out, parts = {}, {}
    for k, v in sd.items():
        if pre and k.startswith(pre):
            k = k[len(pre):]
        if k.startswith('pooler.'):
            continue  # ViTModel's pooler: not part of the attention maps
        m = re.match(r'encoder\.layer\.(\d+)\.(.*)', k)
        if m:
            i, rest = m.group(1), m.group(2)
            q = re.match(r'attention\.attention\.(query|key|value)\.(weight|bias)$', rest)
            if q:
                parts[(i, q.group(2), q.group(1))] = v
                continue
            for a, b in (('layernorm_before.', 'norm1.'), ('layernorm_after.', 'norm2.'),
                         ('attention.output.dense.', 'attn.proj.'), ('intermediate.dense.', 'mlp.fc1.'),
                         ('output.dense.', 'mlp.fc2.')):
                if rest.startswith(a):
                    rest = b + rest[len(a):]
                    break
            out['blocks.%s.%s' % (i, rest)] = v
            continue
        k = {'embeddings.cls_token': 'cls_token', 'embeddings.position_embeddings': 'pos_embed'}.get(k, k)
        k = k.replace('embeddings.patch_embeddings.projection.', 'patch_embed.proj.')
        if k.startswith('layernorm.'):
            k = 'norm.' + k[len('layernorm.'):]
        if k.startswith('classifier.'):
            k = 'head.' + k[len('classifier.'):]
        out[k] = v
    for (i, kind) in sorted(set((i, kind) for (i, kind, _) in parts)):
        qkv = [parts.get((i, kind, n)) for n in ('query', 'key', 'value')]
        if any(t is None for t in qkv):
            raise ValueError('block %s has only some of query/key/value %s' % (i, kind))
        out['blocks.%s.attn.qkv.%s' % (i, kind)] = np.concatenate([_to_numpy(t) for t in qkv], axis=0)
    return out


def _module_heads(mod):
    """The head count a model object records: timm / train_default (blocks[0].attn.num_heads), torchvision
    (encoder.layers[0].self_attention.num_heads), Hugging Face (config.num_attention_heads); None if none."""
    for name, get in (('timm blocks[0].attn.num_heads', lambda m: m.blocks[0].attn.num_heads),
                      ('torchvision encoder.layers[0].self_attention.num_heads',
                       lambda m: m.encoder.layers[0].self_attention.num_heads),
                      ('Hugging Face config.num_attention_heads', lambda m: m.config.num_attention_heads)):
        try:
            h = get(mod)
        except (AttributeError, IndexError, KeyError, TypeError):
            continue
        if isinstance(h, int) and not isinstance(h, bool):
            return h, 'the model object (%s)' % name
    return None, None


def read_config_file(path):
    """Hints from a Hugging Face config.json (num_attention_heads, layer_norm_eps, image_size, patch_size,
    id2label) or a timm hub config.json (model_args.num_heads, else the architecture's size word;
    pretrained_cfg mean, std, input_size)."""
    with open(path) as f:
        c = json.load(f)
    if not isinstance(c, dict):
        raise ValueError('%s: not a JSON object' % path)
    hints, src = {}, {}
    if 'architecture' in c or 'pretrained_cfg' in c:  # timm hub config
        ma = c.get('model_args') or {}
        pc = c.get('pretrained_cfg') or {}
        if 'num_heads' in ma:
            hints['num_heads'], src['num_heads'] = ma['num_heads'], '%s (model_args.num_heads)' % path
        elif isinstance(c.get('architecture'), str):
            m = re.match(r'(?:vit|deit3|deit|beit|beitv2)_([a-z0-9]+)', c['architecture'])
            if m and m.group(1) in TIMM_SIZE_HEADS:
                hints['num_heads'] = TIMM_SIZE_HEADS[m.group(1)]
                src['num_heads'] = '%s (architecture %s)' % (path, c['architecture'])
        for k in ('mean', 'std'):
            if k in pc:
                hints[k] = pc[k]
        if isinstance(pc.get('input_size'), list) and len(pc['input_size']) == 3:
            hints['image_size'] = pc['input_size'][1]
    else:  # Hugging Face PretrainedConfig
        if 'num_attention_heads' in c:
            hints['num_heads'], src['num_heads'] = c['num_attention_heads'], '%s (num_attention_heads)' % path
        for a, b in (('layer_norm_eps', 'layer_norm_eps'), ('image_size', 'image_size'), ('patch_size', 'patch_size')):
            if a in c:
                hints[b] = c[a]
        if isinstance(c.get('id2label'), dict):
            try:
                hints['labels'] = [c['id2label'][str(i)] for i in range(len(c['id2label']))]
            except KeyError:
                pass
    if 'num_heads' in hints and (not isinstance(hints['num_heads'], int) or hints['num_heads'] <= 0):
        raise ValueError('%s: num_heads must be a positive integer, found %r' % (path, hints['num_heads']))
    return hints, src


def to_timm_state_dict(obj):
    """Accept a module, a state_dict or a checkpoint dict; return (state_dict, hints).
    hints['num_heads_src'] says where hints['num_heads'] came from."""
    hints = {}
    if hasattr(obj, 'state_dict') and callable(obj.state_dict):
        mod = obj
        sd = mod.state_dict()
        h, src = _module_heads(mod)
        if h is not None:
            hints['num_heads'], hints['num_heads_src'] = h, src
        cfg = getattr(mod, 'config', None)  # Hugging Face: the rest of its config too
        for a, b in (('layer_norm_eps', 'layer_norm_eps'), ('image_size', 'image_size'), ('patch_size', 'patch_size')):
            if cfg is not None and isinstance(getattr(cfg, a, None), (int, float)):
                hints[b] = getattr(cfg, a)
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
                        hints['num_heads'], hints['num_heads_src'] = c['heads'], "the checkpoint's cfg['heads']"
                sd = sd[key]
                break
    sd = {k[len('module.'):] if k.startswith('module.') else k: v for k, v in sd.items()}
    if 'conv_proj.weight' in sd or 'class_token' in sd:
        sd = torchvision_to_timm(sd)
    elif any(k.endswith('embeddings.patch_embeddings.projection.weight') for k in sd):
        sd = hf_to_timm(sd)
        hints.setdefault('layer_norm_eps', 1e-12)  # Hugging Face ViTConfig's default, not timm's 1e-6
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
        raise ValueError('--heads must be positive, found %d' % num_heads)
    said = hints.get('num_heads')
    if num_heads is not None and said is not None and num_heads != said:
        raise ValueError('--heads %d contradicts num_heads %d from %s' % (num_heads, said, hints.get('num_heads_src')))
    nh = num_heads or said
    if not nh:  # never guessed from the width: D = 192 is 3 heads in DeiT-Ti and 6 in other models
        raise ValueError('cannot tell the number of heads of this %d-wide model: a state_dict does not record it; '
                         'pass --heads N or --config config.json (Hugging Face or timm)' % D)
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


def export(obj, out_json=None, safetensors=None, config_file=None, **cfg):
    """obj: module / state_dict / checkpoint dict / path; config_file: a Hugging Face or timm config.json.
    Returns the config written. Raises ValueError (one line) when the heads cannot be told."""
    if isinstance(obj, (str, os.PathLike)):
        import torch
        obj = torch.load(obj, map_location='cpu')
    sd, hints = to_timm_state_dict(obj)
    if config_file:
        fh, fsrc = read_config_file(config_file)
        if 'num_heads' in fh and 'num_heads' in hints and fh['num_heads'] != hints['num_heads']:
            raise ValueError('num_heads %d from %s contradicts num_heads %d from %s'
                             % (fh['num_heads'], fsrc['num_heads'], hints['num_heads'], hints['num_heads_src']))
        labels = fh.pop('labels', None)  # names only for a head of that many classes (a backbone has none)
        if labels and 'head.weight' in sd and len(labels) == int(sd['head.weight'].shape[0]):
            hints.setdefault('labels', labels)
        for k, v in fh.items():
            hints.setdefault(k, v)
        if 'num_heads' in fsrc:
            hints.setdefault('num_heads_src', fsrc['num_heads'])
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
    ap.add_argument('--heads', '--num-heads', dest='num_heads', type=int,
                    help='attention heads (needed for a bare state_dict unless --config gives them)')
    ap.add_argument('--config', metavar='CONFIG_JSON',
                    help="a Hugging Face or timm config.json: num_attention_heads / model_args.num_heads, ...")
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
        cfg = export(a.input, a.out, a.safetensors, config_file=a.config, num_heads=a.num_heads,
                     layer_norm_eps=a.layer_norm_eps, mean=a.mean, std=a.std,
                     patch_size=a.patch_size, image_size=a.image_size, labels=labels,
                     default_layer=a.default_layer, default_head=a.default_head)
    except (ValueError, OSError) as e:  # a bad option, checkpoint or config file: one line, no traceback
        ap.exit(2, '%s: error: %s\n' % (ap.prog, e))
    for p in (a.out, a.safetensors):
        if p:
            print('wrote %s (%d bytes)' % (p, os.path.getsize(p)))
    print('config', json.dumps(cfg))


if __name__ == '__main__':
    main()
