#!/usr/bin/python3
"""Hugging Face model-folder fixtures for tests/test_checkpoint_hf.cpp (issue 18).

Debian 12 packages neither `transformers` nor `safetensors` (apt-cache policy python3-transformers:
no candidate), so the files save_pretrained writes are written here by hand, in its format:
  * model.safetensors.index.json: json.dumps({"metadata": {"total_size": N}, "weight_map": {...}},
    indent=2, sort_keys=True) + "\\n" (transformers modeling_utils.save_pretrained), shards named
    model-0000K-of-0000N.safetensors, each with __metadata__ {"format": "pt"} (safetensors.torch.save_file);
  * config.json: ViTConfig.to_json_string (indent 2, sorted keys, every ViTConfig field);
  * preprocessor_config.json: ViTImageProcessor.to_json_string (same).
The tensors are those of tests/fixtures/layouts/hf/weights.safetensors (made by tools/make_fixtures.py,
Hugging Face ViTForImageClassification names), read back byte for byte, and the config values those of
tests/fixtures/layouts/hf/config.json and preprocessor_config.json: so a test can compare the sharded
and the folder forms with the single file, tensor for tensor and map for map.

Writes
  tests/fixtures/hf_folder/   model.safetensors, config.json, preprocessor_config.json
  tests/fixtures/hf_sharded/  model.safetensors.index.json, model-0000{1,2,3}-of-00003.safetensors,
                              config.json, preprocessor_config.json

Run: /usr/bin/python3 tools/make_hf_fixtures.py  (from the repository root)
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_lib as fl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "tests", "fixtures", "layouts", "hf")
OUT = os.path.join(ROOT, "tests", "fixtures")


def read_safetensors(path):
    """{name: float32 array} of an F32 safetensors file (the fixture's own format)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[base + b:base + end], dtype="<f4").reshape(e["shape"]).copy()
    return out


def hf_json(obj):
    """What transformers' to_json_string / save_pretrained write: indent 2, sorted keys, a final newline."""
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def write_text(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def vit_config(src_cfg):
    labels = src_cfg["id2label"]
    return {
        "architectures": ["ViTForImageClassification"],
        "attention_probs_dropout_prob": 0.0,
        "encoder_stride": src_cfg["patch_size"],
        "hidden_act": src_cfg["hidden_act"],
        "hidden_dropout_prob": 0.0,
        "hidden_size": src_cfg["hidden_size"],
        "id2label": labels,
        "image_size": src_cfg["image_size"],
        "initializer_range": 0.02,
        "intermediate_size": src_cfg["intermediate_size"],
        "label2id": {v: int(k) for k, v in labels.items()},
        "layer_norm_eps": src_cfg["layer_norm_eps"],
        "model_type": "vit",
        "num_attention_heads": src_cfg["num_attention_heads"],
        "num_channels": 3,
        "num_hidden_layers": src_cfg["num_hidden_layers"],
        "patch_size": src_cfg["patch_size"],
        "qkv_bias": src_cfg["qkv_bias"],
        "torch_dtype": "float32",
        "transformers_version": "4.46.3",
    }


def processor_config(src_pre):
    return {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": src_pre["image_mean"],
        "image_processor_type": "ViTImageProcessor",
        "image_std": src_pre["image_std"],
        "resample": 2,  # PIL.Image.BILINEAR, ViTImageProcessor's default
        "rescale_factor": 0.00392156862745098,
        "size": src_pre["size"],
    }


def shard_of(name):
    """Three shards in state_dict order, as save_pretrained fills them up to max_shard_size."""
    if name.startswith("vit.embeddings.") or name.startswith("vit.encoder.layer.0."):
        return 1
    if name.startswith("vit.encoder.layer.1."):
        return 2
    return 3


def main():
    tensors = read_safetensors(os.path.join(SRC, "weights.safetensors"))
    with open(os.path.join(SRC, "config.json")) as f:
        src_cfg = json.load(f)
    with open(os.path.join(SRC, "preprocessor_config.json")) as f:
        src_pre = json.load(f)
    cfg, pre = hf_json(vit_config(src_cfg)), hf_json(processor_config(src_pre))

    folder = os.path.join(OUT, "hf_folder")
    fl.write_safetensors(os.path.join(folder, "model.safetensors"), tensors, "F32", metadata={"format": "pt"})
    write_text(os.path.join(folder, "config.json"), cfg)
    write_text(os.path.join(folder, "preprocessor_config.json"), pre)

    sharded = os.path.join(OUT, "hf_sharded")
    n = 3
    weight_map, total = {}, 0
    for k in range(1, n + 1):
        name = "model-%05d-of-%05d.safetensors" % (k, n)
        part = {t: a for t, a in tensors.items() if shard_of(t) == k}
        fl.write_safetensors(os.path.join(sharded, name), part, "F32", metadata={"format": "pt"})
        for t, a in part.items():
            weight_map[t] = name
            total += a.nbytes
    write_text(os.path.join(sharded, "model.safetensors.index.json"),
               hf_json({"metadata": {"total_size": total}, "weight_map": weight_map}))
    write_text(os.path.join(sharded, "config.json"), cfg)
    write_text(os.path.join(sharded, "preprocessor_config.json"), pre)
    print("wrote %s and %s (%d tensors, %d bytes of F32 data in %d shards)"
          % (folder, sharded, len(tensors), total, n))


if __name__ == "__main__":
    main()
