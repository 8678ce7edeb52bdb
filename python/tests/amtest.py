"""Shared helpers of the attnmap pytest suite (imported by conftest.py and the test modules).

Paths: REPO is the repository root; PYTHON_PATH the folder holding the importable package (env
ATTNMAP_PYTHON_PATH, default REPO/build/python); CLI the attnmap program of the same build (env ATTNMAP_CLI,
default PYTHON_PATH/../attnmap). With ATTNMAP_REQUIRE_ALL=1 (set by ctest) a missing optional package
(torch, torchvision, PIL) fails the test instead of skipping it.
"""
import importlib
import json
import os
import pathlib
import re
import struct
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PYTHON_PATH = pathlib.Path(os.environ.get("ATTNMAP_PYTHON_PATH", str(REPO / "build" / "python"))).resolve()
CLI = pathlib.Path(os.environ.get("ATTNMAP_CLI", str(PYTHON_PATH.parent / "attnmap"))).resolve()
REQUIRE_ALL = os.environ.get("ATTNMAP_REQUIRE_ALL", "") == "1"
FIX = REPO / "tests" / "fixtures"
DATA = REPO / "data"
DEFAULT_WEIGHTS = REPO / "weights" / "default.json"

if str(PYTHON_PATH) not in sys.path:
    sys.path.insert(0, str(PYTHON_PATH))


def import_attnmap():
    """The attnmap package from PYTHON_PATH; a failure is an error (never a skip)."""
    try:
        mod = importlib.import_module("attnmap")
    except ImportError as e:  # pragma: no cover - reported loudly
        raise ImportError(f"cannot import attnmap from {PYTHON_PATH} ({e}); build with -DATTNMAP_PYTHON=ON "
                          f"or set ATTNMAP_PYTHON_PATH") from e
    where = pathlib.Path(mod.__file__).resolve()
    if PYTHON_PATH not in where.parents:
        raise ImportError(f"attnmap was imported from {where}, not from {PYTHON_PATH} (an installed copy shadows "
                          f"the build's)")
    return mod


def need(name):
    """Import an optional test dependency (torch, torchvision, PIL): skip when missing, fail under
    ATTNMAP_REQUIRE_ALL=1."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        msg = f"{name} is not importable ({e}); install the test packages with: bash tools/deps.sh test"
        if REQUIRE_ALL:
            pytest.fail(msg + " (ATTNMAP_REQUIRE_ALL=1: a missing package is a failure)")
        pytest.skip(msg)


def run_cli(*args, check=True, cwd=None):
    """Runs the attnmap program; returns the CompletedProcess (text). check: a non-zero exit is an
    AssertionError carrying stderr."""
    if not CLI.exists():
        raise AssertionError(f"the attnmap program is missing: {CLI} (build first, or set ATTNMAP_CLI)")
    p = subprocess.run([str(CLI), *[str(a) for a in args]], capture_output=True, text=True, cwd=cwd, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError(f"attnmap {' '.join(map(str, args))} exited {p.returncode}:\n{p.stderr}")
    return p


def cli_error(p):
    """The message of the CLI's 'attnmap: error: ...' line (the last one), without the prefix."""
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("attnmap: error: ")]
    assert lines, f"no error line in the CLI's stderr:\n{p.stderr}"
    return lines[-1][len("attnmap: error: "):]


def strip_flag(msg):
    """'--views: 'L9/mean': layer 9 ...' -> ''L9/mean': layer 9 ...': the part of a CLI message after the flag
    name it starts with (the module names keywords instead of flags)."""
    if msg.startswith("--") and ": " in msg:
        return msg.split(": ", 1)[1]
    return msg


def parse_render_stdout(stdout):
    """attnmap render's stdout (not -q) -> {input as printed: [output PNG path, ...] in view order}.

    One view:    'INPUT -> PATH'
    Many views:  'INPUT -> N maps:' then '  DESCRIPTION -> PATH' per map, then '  top-5: ...'."""
    out, cur = {}, None
    for ln in stdout.splitlines():
        if not ln.startswith(" ") and " -> " in ln:
            inp, rest = ln.split(" -> ", 1)
            if rest.endswith(" maps:") or rest.endswith(" map:"):
                cur = inp
                out[cur] = []
            else:  # 'PATH' or 'PATH (chefer, class Pullover 42.8%)'
                mp = re.match(r"(.*?\.png)( \(.*\))?$", rest.strip())
                out[inp] = [mp.group(1) if mp else rest.strip()]
                cur = None
        elif ln.startswith("  ") and " -> " in ln and cur is not None:
            rest = ln.split(" -> ", 1)[1].strip()  # 'PATH' or 'PATH (flat map: ...)'
            mp = re.match(r"(.*?\.png)( \(.*\))?$", rest)
            out[cur].append(mp.group(1) if mp else rest)
    return out


def cli_raw_maps(tmp, images, args):
    """Runs `attnmap render IMAGES --save-raw --out TMP ARGS` once; returns {str(image): [np.ndarray, ...]}
    the .npy of every map in view order (the files are the PNG paths the CLI prints with .npy)."""
    out = pathlib.Path(tmp)
    p = run_cli("render", *images, "--save-raw", "--out", out, "-j", "1", *args)
    listed = parse_render_stdout(p.stdout)
    res = {}
    for img in images:
        key = str(img)
        assert key in listed, f"{key} not in the CLI's output:\n{p.stdout}"
        arrays = []
        for png in listed[key]:
            npy = pathlib.Path(png[:-4] + ".npy")
            assert npy.exists(), f"the CLI did not write {npy}"
            arrays.append((npy.name, np.load(npy)))
        res[key] = arrays
    return res


SAFETENSORS_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
                      "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path):
    """A .safetensors file -> ({name: np.ndarray}, metadata dict). BF16 tensors become float32 (exact)."""
    d = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", d[:8])
    header = json.loads(d[8:8 + n])
    base = 8 + n
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        raw = d[base + a:base + b]
        if t["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(SAFETENSORS_DTYPES[t["dtype"]]).newbyteorder("<"))
        out[name] = arr.reshape(t["shape"]).copy()
    return out, meta


def write_safetensors(path, tensors, metadata=None):
    """{name: np.ndarray} -> a .safetensors file (F32/F16/F64/I64...)."""
    rev = {np.dtype(v).str: k for k, v in SAFETENSORS_DTYPES.items()}
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        arr = arr.astype(arr.dtype.newbyteorder("<"))
        raw = arr.tobytes()
        header[name] = {"dtype": rev[np.dtype(arr.dtype).str], "shape": list(arr.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    hb = json.dumps(header).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))


def read_attnmap_json(path):
    """attnmap JSON v1 -> ({name: float32 array}, config dict)."""
    w = json.loads(pathlib.Path(path).read_text())
    config = w.pop("config", None)
    return {k: np.asarray(v, dtype=np.float32) for k, v in w.items()}, config


def torch_state_dict(path, key=None):
    """A torch.save'd state dict (optionally under key) -> {name: np.ndarray} (integer buffers kept integer)."""
    torch = need("torch")
    obj = torch.load(str(path), map_location="cpu")
    if key:
        for k in key.split("/"):
            obj = obj[k]
    return {k: v.detach().cpu().numpy() for k, v in obj.items() if hasattr(v, "detach")}


def png_chunks(data):
    """PNG bytes -> [(type, payload)]; asserts the signature."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    i, out = 8, []
    while i < len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        out.append((data[i + 4:i + 8].decode("latin-1"), data[i + 8:i + 8 + n]))
        i += 12 + n
    return out


def png_pixels(data):
    """PNG bytes -> uint8 array (PIL)."""
    import io
    Image = need("PIL.Image")
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"))


def png_text(data):
    """PNG bytes -> {keyword: text} of its tEXt chunks."""
    out = {}
    for t, p in png_chunks(data):
        if t == "tEXt":
            k, v = p.split(b"\0", 1)
            out[k.decode("latin-1")] = v.decode("latin-1")
    return out


def rgb_array(path):
    """An image file as the uint8 (H, W, 3) RGB array PIL decodes (use lossless files for same-bits tests)."""
    Image = need("PIL.Image")
    return np.array(Image.open(path).convert("RGB"), dtype=np.uint8, copy=True)


def composites_folder(tmp_path, names):
    """A folder tmp_path/in holding copies of data/composites' `names`."""
    import shutil
    src = tmp_path / "in"
    src.mkdir()
    for n in names:
        shutil.copy(DATA / "composites" / n, src / n)
    return src
