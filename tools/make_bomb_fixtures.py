#!/usr/bin/python3
"""Decompression-bomb checkpoints for attnmap's .pth reader (fuzz/regressions/pth/bomb_*.pth).

    /usr/bin/python3 tools/make_bomb_fixtures.py [--out fuzz/regressions/pth]

Python's standard library only (zipfile, zlib, pickle's opcode names); the outputs are committed. Each file is
small on disk and declares far more than it holds: torch.save's zip layout (archive/data.pkl, archive/data/KEY,
archive/version) with deflated entries, which torch.save itself never writes (it stores entries uncompressed).
attnmap must refuse each before inflating it (or, for storages the state dict does not use, never inflate them):
tests/test_pth.cpp (PthBombs) checks the message, the time and that nothing of the declared size is allocated;
tests/test_robust.cpp (FuzzRegressions) replays them with the other fuzz regressions.

- bomb_storage.pth: one float32 tensor of 2^26 elements (256 MiB of zeros) deflated to ~260 KB.
- bomb_unused_tensor.pth: a small good tensor 'w' plus a 256 MiB deflated 'junk' tensor in the same state dict.
- bomb_optimizer.pth: {'model': {'w': small}, 'optimizer': {'state': 256 MiB deflated tensor}}: the state dict
  is 'model', so the optimizer's storage must never be inflated (the file loads with 'w').
- bomb_pickle.pth: a deflated data.pkl declaring 128 MiB ('N' POP repeated), over the 64 MiB pickle limit.
- bomb_pickle_values.pth: a deflated data.pkl of 40 MiB, under the pickle limit, of 20 million 'N' POP pairs:
  over the unpickler's 500 000 values.
"""

import argparse
import os
import pickle as P
import struct
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIG = 1 << 26  # float32 elements of a bomb storage: 256 MiB


def u(s):
    b = s.encode()
    return P.BINUNICODE + struct.pack("<I", len(b)) + b


def glob(module, name):
    return P.GLOBAL + module.encode() + b"\n" + name.encode() + b"\n"


def int_tuple(vals):
    return P.MARK + b"".join(P.BININT + struct.pack("<i", v) for v in vals) + P.TUPLE


def tensor(key, numel, size, stride):
    pid = P.MARK + u("storage") + glob("torch", "FloatStorage") + u(key) + u("cpu") + P.BININT + struct.pack("<i", numel) + P.TUPLE + P.BINPERSID
    return (glob("torch._utils", "_rebuild_tensor_v2") + P.MARK + pid + P.BININT + struct.pack("<i", 0)
            + int_tuple(size) + int_tuple(stride) + P.NEWFALSE + glob("collections", "OrderedDict")
            + P.EMPTY_TUPLE + P.REDUCE + P.TUPLE + P.REDUCE)


def ordered_dict(entries):
    return (glob("collections", "OrderedDict") + P.EMPTY_TUPLE + P.REDUCE + P.MARK
            + b"".join(u(k) + v for k, v in entries) + P.SETITEMS)


def plain_dict(entries):
    return P.EMPTY_DICT + P.MARK + b"".join(u(k) + v for k, v in entries) + P.SETITEMS


def pickled(obj):
    return P.PROTO + b"\x02" + obj + P.STOP


def write_archive(path, pkl, storages, deflate):
    """torch.save's layout; the entries named in `deflate` are deflated (level 9), the rest stored."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        def put(name, data):
            zi = zipfile.ZipInfo("archive/" + name, date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED if name in deflate else zipfile.ZIP_STORED
            z.writestr(zi, data, compresslevel=9)
        put("data.pkl", pkl)
        for k, data in storages.items():
            put("data/" + k, data)
        put("version", b"3\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "fuzz", "regressions", "pth"))
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    six = struct.pack("<6f", 0, 1, 2, 3, 4, 5)
    zeros = bytes(4 * BIG)
    small = tensor("0", 6, [2, 3], [3, 1])
    big = tensor("1", BIG, [BIG], [1])
    write_archive(os.path.join(out, "bomb_storage.pth"), pickled(ordered_dict([("w", big)])), {"1": zeros},
                  {"data/1"})
    write_archive(os.path.join(out, "bomb_unused_tensor.pth"), pickled(ordered_dict([("w", small), ("junk", big)])),
                  {"0": six, "1": zeros}, {"data/1"})
    write_archive(os.path.join(out, "bomb_optimizer.pth"),
                  pickled(plain_dict([("model", ordered_dict([("w", small)])),
                                      ("optimizer", plain_dict([("state", big)]))])),
                  {"0": six, "1": zeros}, {"data/1"})
    del zeros
    write_archive(os.path.join(out, "bomb_pickle.pth"), P.PROTO + b"\x02" + b"N0" * (64 << 20) + b"N" + P.STOP, {},
                  {"data.pkl"})
    write_archive(os.path.join(out, "bomb_pickle_values.pth"), P.PROTO + b"\x02" + b"N0" * (20 << 20) + b"N" + P.STOP,
                  {}, {"data.pkl"})


if __name__ == "__main__":
    main()
