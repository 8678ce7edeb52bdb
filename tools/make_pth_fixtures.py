#!/usr/bin/python3
"""PyTorch checkpoint fixtures (issue 18) for attnmap's .pth reader.

    /usr/bin/python3 tools/make_pth_fixtures.py [--out tests/fixtures]

Needs Debian's python3-torch (1.13) and numpy; CI does not run this, the outputs are committed.

1. tests/fixtures/layouts/NAME/weights{,.f16,.bf16}.pth: for every layout fixture made by make_fixtures.py,
   the tensors of weights{,.f16,.bf16}.safetensors (read back bit for bit) saved with torch.save as a plain
   OrderedDict state dict; and weights.wrapped.pth, one dtype per layout in turn, wrapped as a training
   checkpoint: {'model' or 'state_dict': sd, 'epoch': 3, 'optimizer': {...}}.  The C++ tests load both and
   require the same tensors and maps as the safetensors files.
2. tests/fixtures/pth_misc/: torch.save files exercising the reader (strided views, shared storages, a
   Parameter, integer buffers, an nn.Module state_dict with its _metadata, DINO-style teacher/student,
   a legacy-format save, a TorchScript archive).
3. tests/fixtures/pth_hostile/: hand-made pickles (raw opcodes) in torch.save's zip layout, each of which
   attnmap must refuse by name without executing anything.
"""

import argparse
import collections
import io
import json
import os
import pickle
import struct
import zipfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUTS = ["timm", "hf", "torchvision", "hf_model", "deit_distilled", "qv_bias", "dinov2_fb",
           "timm_reg_noembed", "timm_reg_full"]
DTYPES = [("", "F32"), (".f16", "F16"), (".bf16", "BF16")]


def read_safetensors(path):
    """{name: torch tensor} with exactly the stored values and dtype (F32 / F16 / BF16)."""
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = collections.OrderedDict()
    for name in sorted(k for k in header if k != "__metadata__"):
        e = header[name]
        b, end = e["data_offsets"]
        raw = blob[base + b:base + end]
        if e["dtype"] == "F32":
            t = torch.from_numpy(np.frombuffer(raw, "<f4").copy())
        elif e["dtype"] == "F16":
            t = torch.from_numpy(np.frombuffer(raw, "<f2").copy())
        elif e["dtype"] == "BF16":
            t = torch.from_numpy(np.frombuffer(raw, "<i2").copy()).view(torch.bfloat16)
        else:
            raise ValueError(e["dtype"])
        out[name] = t.reshape(e["shape"])
    return out


def make_layout_pths(out):
    for i, name in enumerate(LAYOUTS):
        folder = os.path.join(out, "layouts", name)
        for suffix, _ in DTYPES:
            sd = read_safetensors(os.path.join(folder, "weights%s.safetensors" % suffix))
            torch.save(sd, os.path.join(folder, "weights%s.pth" % suffix))
        # One wrapped training checkpoint per layout, the dtype and the wrapper key taken in turn.
        suffix, _ = DTYPES[i % 3]
        sd = read_safetensors(os.path.join(folder, "weights%s.safetensors" % suffix))
        key = "model" if i % 2 == 0 else "state_dict"
        ckpt = {key: sd, "epoch": 3, "optimizer": {"state": {}, "param_groups": [{"lr": 0.001, "params": [0, 1]}]},
                "best_acc": 81.25, "arch": "vit"}
        torch.save(ckpt, os.path.join(folder, "weights.wrapped.pth"))
        with open(os.path.join(folder, "weights.wrapped.json"), "w") as f:
            json.dump({"key": key, "source": "weights%s.safetensors" % suffix}, f, indent=1)
            f.write("\n")
    # Training-code prefixes, F16 timm weights: DDP's module. under 'state_dict'; a DINO-style checkpoint
    # (teacher and student, backbone. names beside a DINOHead's head.mlp.* / head.last_layer.*).
    folder = os.path.join(out, "layouts", "timm")
    sd = read_safetensors(os.path.join(folder, "weights.f16.safetensors"))
    ddp = collections.OrderedDict(("module." + k, v) for k, v in sd.items())
    torch.save({"state_dict": ddp, "epoch": 7}, os.path.join(folder, "weights.ddp.pth"))
    gen = torch.Generator().manual_seed(18)
    teacher = collections.OrderedDict(("backbone." + k, v) for k, v in sd.items() if not k.startswith("head."))
    teacher["head.mlp.0.weight"] = torch.randn((8, 24), generator=gen).half()
    teacher["head.last_layer.weight_g"] = torch.ones((16, 1)).half()
    student = collections.OrderedDict((k, -v) for k, v in teacher.items())
    torch.save({"student": student, "teacher": teacher, "epoch": 100}, os.path.join(folder, "weights.dino.pth"))


def make_misc(out):
    folder = os.path.join(out, "pth_misc")
    os.makedirs(folder, exist_ok=True)
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 8.0
    qkv = torch.arange(36, dtype=torch.float32).reshape(6, 6) - 10.0
    q, k, v = qkv.split(2, dim=0)  # views of one storage at offsets 0, 12, 24
    sd = collections.OrderedDict([
        ("transposed", base.t()),                      # (6, 4), stride (1, 6)
        ("every_other", base[:, ::2]),                 # (4, 3), stride (6, 2)
        ("q", q), ("k", k), ("v", v),                  # shared storage, offsets
        ("scalar", torch.tensor(2.5)),
        ("half_t", (base / 4).half().t()),
        ("bf16", torch.tensor([1.0, -0.5, 3.140625], dtype=torch.bfloat16)),
        ("f64", torch.tensor([0.1, -2.0], dtype=torch.float64)),
        ("position_ids", torch.arange(5)),             # I64: skipped
        ("mask", torch.tensor([True, False])),         # BOOL: skipped
        ("empty", torch.zeros(0, 3)),
        ("param", torch.nn.Parameter(torch.tensor([7.0, 8.0]))),
    ])
    torch.save(sd, os.path.join(folder, "views.pth"))
    expected = {n: (t.detach().to(torch.float32).reshape(-1).tolist(), list(t.shape)) for n, t in sd.items()
                if t.dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64)}
    with open(os.path.join(folder, "views.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")

    # A real nn.Module's state_dict: an OrderedDict carrying _metadata (pickled with BUILD).
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2), torch.nn.BatchNorm1d(2))
    torch.save(m.state_dict(), os.path.join(folder, "module_state_dict.pth"))
    with open(os.path.join(folder, "module_state_dict.json"), "w") as f:
        json.dump({n: t.reshape(-1).tolist() for n, t in m.state_dict().items() if t.is_floating_point()}, f, indent=1)
        f.write("\n")

    # DINO-style: teacher and student (teacher preferred), epoch; a nested wrapper; and a DINO checkpoint
    # with argparse.Namespace args (refused, as torch.load(weights_only=True) does).
    small = collections.OrderedDict([("backbone.w", torch.tensor([1.0, 2.0])), ("head.w", torch.tensor([3.0]))])
    student = collections.OrderedDict([("backbone.w", torch.tensor([-1.0, -2.0])), ("head.w", torch.tensor([-3.0]))])
    torch.save({"student": student, "teacher": small, "epoch": 100}, os.path.join(folder, "teacher_student.pth"))
    torch.save({"checkpoint": {"ema": {"state_dict": small}}, "epoch": 1}, os.path.join(folder, "nested.pth"))
    # timm's train.py checkpoint: 'state_dict' is used (as timm's load_checkpoint(use_ema=False)); the note names
    # 'state_dict_ema' so that a user who wants the EMA weights knows --key.
    torch.save({"epoch": 3, "arch": "vit_small", "state_dict": small, "state_dict_ema": student},
               os.path.join(folder, "timm_ema.pth"))
    torch.save({"a": small, "b": student}, os.path.join(folder, "two_unnamed.pth"))
    torch.save({"epoch": 3, "lr": 0.1}, os.path.join(folder, "no_state_dict.pth"))
    torch.save({"teacher": small, "args": argparse.Namespace(arch="vit_small", lr=0.0005)},
               os.path.join(folder, "dino_with_args.pth"))
    # Legacy format (a bare pickle) and a TorchScript archive: refused with what to do.
    # (its storage keys are object ids, different on every run: written once, kept.)
    if not os.path.exists(os.path.join(folder, "legacy.pth")):
        torch.save(small, os.path.join(folder, "legacy.pth"), _use_new_zipfile_serialization=False)
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 1)), os.path.join(folder, "torchscript.pt"))
    # The same state dict as a compressed zip (torch never compresses, another tool might): read, not mapped.
    src = os.path.join(folder, "views.pth")
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(os.path.join(folder, "views_deflated.pth"), "w",
                                                        zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zi = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zout.writestr(zi, zin.read(info.filename))


# ---- hostile pickles ------------------------------------------------------------------------------------

P = pickle


def u(s):
    b = s.encode()
    return P.BINUNICODE + struct.pack("<I", len(b)) + b


def glob(module, name):
    return P.GLOBAL + module.encode() + b"\n" + name.encode() + b"\n"


def storage_pid(key, numel, stype="FloatStorage"):
    return (P.MARK + u("storage") + glob("torch", stype) + u(key) + u("cpu") + P.BININT + struct.pack("<i", numel)
            + P.TUPLE + P.BINPERSID)


def int_tuple(vals):
    return P.MARK + b"".join(P.BININT + struct.pack("<i", v) if v < 2**31 else
                             P.LONG1 + bytes([8]) + struct.pack("<q", v) for v in vals) + P.TUPLE


def tensor(key, numel, offset, size, stride):
    return (glob("torch._utils", "_rebuild_tensor_v2") + P.MARK + storage_pid(key, numel)
            + P.BININT + struct.pack("<i", offset) + int_tuple(size) + int_tuple(stride) + P.NEWFALSE
            + glob("collections", "OrderedDict") + P.EMPTY_TUPLE + P.REDUCE + P.TUPLE + P.REDUCE)


def state_dict(entries):
    return (P.PROTO + b"\x02" + glob("collections", "OrderedDict") + P.EMPTY_TUPLE + P.REDUCE + P.MARK
            + b"".join(u(k) + v for k, v in entries) + P.SETITEMS + P.STOP)


def write_archive(path, pkl, storages, compress=False):
    """torch.save's layout: archive/data.pkl, archive/data/KEY, archive/version (stored, not compressed,
    unless `compress`)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        def put(name, data):
            zi = zipfile.ZipInfo("archive/" + name, date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
            z.writestr(zi, data)
        put("data.pkl", pkl)
        for k, data in storages.items():
            put("data/" + k, data)
        put("version", b"3\n")


def make_hostile(out):
    folder = os.path.join(out, "pth_hostile")
    os.makedirs(folder, exist_ok=True)
    six = np.arange(6, dtype="<f4").tobytes()
    good = tensor("0", 6, 0, [2, 3], [3, 1])
    cases = {
        # os.system('echo pwned') via GLOBAL + REDUCE: torch.load without weights_only would run it.
        "os_system.pth": (P.PROTO + b"\x02" + glob("os", "system") + u("echo pwned") + P.TUPLE1 + P.REDUCE
                          + P.STOP, {}),
        # builtins.eval('...') inside an otherwise good state dict.
        "builtins_eval.pth": (state_dict([("w", good), ("x", glob("builtins", "eval") + u("1+1") + P.TUPLE1
                                                         + P.REDUCE)]), {"0": six}),
        # An unknown class built by NEWOBJ and BUILD (what a pickled custom object looks like).
        "unknown_class.pth": (state_dict([("w", good), ("cfg", glob("__main__", "Evil") + P.EMPTY_TUPLE + P.NEWOBJ
                                                           + P.EMPTY_DICT + u("a") + P.BININT1 + b"\x01"
                                                           + P.SETITEM + P.BUILD)]), {"0": six}),
        # REDUCE on a whitelisted name that is not a function (a storage type).
        "reduce_storage_type.pth": (state_dict([("w", glob("torch", "FloatStorage") + P.EMPTY_TUPLE + P.REDUCE)]), {}),
        # BUILD on a tensor (setting attributes on it).
        "build_on_tensor.pth": (state_dict([("w", good + P.EMPTY_DICT + u("a") + P.NONE + P.SETITEM + P.BUILD)]),
                                {"0": six}),
        # Size (2, 3) stride (3, 1) from offset 4 needs elements 4..12 of a 6-element storage.
        "tensor_past_storage.pth": (state_dict([("w", tensor("0", 6, 4, [2, 3], [3, 1]))]), {"0": six}),
        # A stride whose product with the size overflows 64 bits.
        "stride_overflow.pth": (state_dict([("w", tensor("0", 6, 0, [3, 2], [2**62, 1]))]), {"0": six}),
        # The persistent id names storage '7', which the archive does not hold.
        "missing_storage.pth": (state_dict([("w", tensor("7", 6, 0, [2, 3], [3, 1]))]), {"0": six}),
        # The storage claims 600 elements, its entry holds 6.
        "storage_size_mismatch.pth": (state_dict([("w", tensor("0", 600, 0, [2, 3], [3, 1]))]), {"0": six}),
        # 200 001 nested MARKs: more than attnmap's 100 000 (bounded stack).
        "deep_nesting.pth": (P.PROTO + b"\x02" + P.MARK * 200001 + P.STOP, {}),
        # LONG_BINPUT / LONG_BINGET at index 2^32 - 1: looked up, never used to size an allocation.
        "huge_memo.pth": (P.PROTO + b"\x02" + P.EMPTY_DICT + P.LONG_BINPUT + b"\xff\xff\xff\xff" + P.POP
                          + P.LONG_BINGET + b"\xfe\xff\xff\xff" + P.STOP, {}),
    }
    sd_ok = state_dict([("w", good)])
    cases["truncated.pth"] = (sd_ok[:len(sd_ok) // 2], {"0": six})
    for name, (pkl, storages) in cases.items():
        write_archive(os.path.join(folder, name), pkl, storages, compress=len(pkl) > 10000)
    # The well-formed control: the same writer, accepted with w = 0..5 as (2, 3).
    write_archive(os.path.join(folder, "control_ok.pth"), sd_ok, {"0": six})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures"))
    args = ap.parse_args()
    make_layout_pths(args.out)
    make_misc(args.out)
    make_hostile(args.out)


if __name__ == "__main__":
    main()
