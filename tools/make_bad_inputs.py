#!/usr/bin/python3
"""Writes the robustness corpus (tests/images/corpus/): odd-but-valid images attnmap must render, each with
the RGB picture it must decode to, and broken or hostile files it must refuse with a clear reason.

    /usr/bin/python3 tools/make_bad_inputs.py

Layout (all committed, < 2 MB, so CI needs no Python):
    good/NAME      inputs that must decode and render
    ref/NAME.png   the RGB picture each good input must decode to, as viewers show it (EXIF applied),
                   lossless; the test compares exactly for lossless formats and with a tolerance for JPEG
    expect.json    {"good": {NAME: {"tol": max mean abs diff}}, "bad": {NAME: "substring of the error"}}
    bad/NAME       inputs that must be refused, one error line each
Deterministic (fixed seeds, PIL's encoders). References for PNG/BMP/TGA/GIF/PNM/PSD/HDR are computed in
numpy from the pixel values written (16-bit scaled by >> 8 as stb_image does, not clipped as PIL's
convert('L') would; alpha dropped as PIL's convert('RGB') does); JPEG references are PIL's (libjpeg) decode.
WebP and TIFF (issue 18): lossless references are the arrays written (TIFF layouts PIL cannot write - 16-bit
RGB, big-endian, planar, tiled, BigTIFF, associated alpha, Orientation - are written by hand, tiff_bytes);
lossy WebP and libtiff's RGBA-reader layouts (palette, bilevel) are PIL's decode through the same libraries.
Also writes fuzz/seeds/image/ (small WebP/TIFF seeds for fuzz_image, one per decoder path).
"""
import io
import json
import os
import shutil
import struct
import zlib

import numpy as np
from PIL import Image, ImageOps

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "images", "corpus")
W, H = 48, 32


def pattern(w=W, h=H):
    """An asymmetric RGB test picture: big colour blocks (so JPEG error stays small) plus gradients."""
    yy, xx = np.mgrid[0:h, 0:w]
    r = (xx * 255 // max(w - 1, 1)).astype(np.uint8)
    g = (yy * 255 // max(h - 1, 1)).astype(np.uint8)
    b = np.where((xx < w // 3) & (yy < h // 2), 230, 40).astype(np.uint8)
    return np.stack([r, g, b], -1)


def png_chunk(tag, data):
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def png_header_only(w, h, bit_depth, colour_type):
    """A valid PNG signature + IHDR declaring w x h, one tiny IDAT, IEND: 'huge' with almost no data."""
    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, colour_type, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 64)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b"")


def png_grey_bits(v, bits):
    """A greyscale PNG of bit depth 1, 2 or 4 (PIL writes only 1 and 8), samples packed MSB first."""
    h, w = v.shape
    per = 8 // bits
    raw = b""
    for row in v:
        padded = np.concatenate([row, np.zeros((-w) % per, np.uint8)]).reshape(-1, per)
        packed = np.zeros(len(padded), np.uint32)
        for i in range(per):
            packed = (packed << bits) | padded[:, i]
        raw += b"\x00" + packed.astype(np.uint8).tobytes()
    ihdr = struct.pack(">IIBBBBB", w, h, bits, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw, 9)) +
            png_chunk(b"IEND", b""))


def psd_rgb(rgb):
    """A minimal uncompressed 8-bit RGB Photoshop file (the layout stb_image reads: merged image data)."""
    h, w, _ = rgb.shape
    head = b"8BPS" + struct.pack(">H6sHIIHH", 1, b"\0" * 6, 3, h, w, 8, 3)
    body = struct.pack(">I", 0) + struct.pack(">I", 0) + struct.pack(">I", 0) + struct.pack(">H", 0)
    planes = b"".join(rgb[..., c].tobytes() for c in range(3))
    return head + body + planes


def pic_rgb(rgb):
    """A Softimage PIC of uncompressed 8-bit RGB (one channel packet R|G|B, size 8, type 0), as stb_image
    reads it: 88-byte header (magic, version, comment), "PICT", width, height, ratio, fields, pad."""
    h, w, _ = rgb.shape
    head = struct.pack(">I", 0x5380F634) + struct.pack(">f", 3.71) + b"made by make_bad_inputs".ljust(80, b"\0")
    head += b"PICT" + struct.pack(">HHfHH", w, h, 1.0, 3, 0)
    packet = bytes([0, 8, 0, 0x80 | 0x40 | 0x20])  # last packet, 8 bits, uncompressed, R G B
    return head + packet + rgb.astype(np.uint8).tobytes()


def bmp_top_down(bottom_up):
    """The same 24-bit BMP stored top-down: negative height, rows in display order."""
    data = bytearray(bottom_up)
    off = struct.unpack("<I", data[10:14])[0]
    w, h = struct.unpack("<ii", data[18:26])
    stride = (w * 3 + 3) // 4 * 4
    rows = [data[off + r * stride: off + (r + 1) * stride] for r in range(h)]
    data[22:26] = struct.pack("<i", -h)
    data[off:off + h * stride] = b"".join(reversed(rows))
    return bytes(data)


def tga_right_to_left(rgb):
    """An uncompressed 24-bit TGA, top-down, with descriptor bit 4 set: each row stored right to left."""
    h, w, _ = rgb.shape
    head = struct.pack("<BBBHHBHHHHBB", 0, 0, 2, 0, 0, 0, 0, 0, w, h, 24, 0x20 | 0x10)
    return head + rgb[:, ::-1, ::-1].astype(np.uint8).tobytes()  # columns reversed, BGR


def bmp_os2_palette(idx, pal):
    """An OS/2 BMP (12-byte BITMAPCOREHEADER) with an 8-bit palette of 3-byte BGR entries."""
    h, w = idx.shape
    stride = (w + 3) // 4 * 4
    rows = b"".join(idx[r].astype(np.uint8).tobytes().ljust(stride, b"\0") for r in range(h - 1, -1, -1))
    palb = b"".join(bytes([b, g, r]) for r, g, b in pal)
    off = 14 + 12 + len(palb)
    return (b"BM" + struct.pack("<IHHI", off + len(rows), 0, 0, off) + struct.pack("<IHHHH", 12, w, h, 1, 8) +
            palb + rows)


def gif_lzw(idx, min_code):
    """GIF LZW data for palette indices: every index as a literal code, a clear code before the table would
    grow (so the code width never changes), in 255-byte sub-blocks."""
    clear, width, bits, run = 1 << min_code, min_code + 1, [], 0

    def emit(c):
        bits.extend((c >> i) & 1 for i in range(width))

    emit(clear)
    for v in idx.reshape(-1):
        emit(int(v))
        run += 1
        if run == (1 << width) - clear - 3:
            emit(clear)
            run = 0
    emit(clear + 1)
    bits.extend([0] * (-len(bits) % 8))
    data = bytes(sum(bits[i + j] << j for j in range(8)) for i in range(0, len(bits), 8))
    return bytes([min_code]) + b"".join(bytes([len(data[i:i + 255])]) + data[i:i + 255]
                                        for i in range(0, len(data), 255)) + b"\0"


def gif_frame(screen, rect, idx, global_pal=None, local_pal=None, background=0, transparent=None):
    """A one-frame GIF89a: a (w, h) screen, the frame's (x, y) offset, its indices (fh, fw); palettes are
    (2**k, 3) uint8 arrays."""
    flags = 0x70 | (0x80 | (len(global_pal).bit_length() - 2) if global_pal is not None else 0)
    out = b"GIF89a" + struct.pack("<HHBBB", screen[0], screen[1], flags, background, 0)
    if global_pal is not None:
        out += global_pal.astype(np.uint8).tobytes()
    if transparent is not None:
        out += b"\x21\xF9\x04" + bytes([1, 0, 0, transparent, 0])
    fh, fw = idx.shape
    lflags = 0x80 | (len(local_pal).bit_length() - 2) if local_pal is not None else 0
    out += b"\x2C" + struct.pack("<HHHHB", rect[0], rect[1], fw, fh, lflags)
    if local_pal is not None:
        out += local_pal.astype(np.uint8).tobytes()
    n = len(local_pal if local_pal is not None else global_pal)
    return out + gif_lzw(idx, max(2, n.bit_length() - 1)) + b"\x3B"


def psd16_rle(rgb16):
    """A 16-bit RGB PSD with RLE (PackBits) compression: one literal run per row of big-endian bytes."""
    h, w, _ = rgb16.shape
    head = b"8BPS" + struct.pack(">H6sHIIHH", 1, b"\0" * 6, 3, h, w, 16, 3) + struct.pack(">III", 0, 0, 0)
    rows = [bytes([w * 2 - 1]) + rgb16[y, :, c].astype(">u2").tobytes() for c in range(3) for y in range(h)]
    return head + struct.pack(">H", 1) + b"".join(struct.pack(">H", len(r)) for r in rows) + b"".join(rows)


def hdr_rgbe(mant, exp):
    """A flat (uncompressed) Radiance RGBE file; pixel value = mant * 2**(exp - 136)."""
    h, w, _ = mant.shape
    head = b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y %d +X %d\n" % (h, w)
    px = np.concatenate([mant, exp[..., None]], -1).astype(np.uint8)
    return head + px.tobytes()


def hdr_rgbe_rle(mant, exp):
    """The same picture with run-length-encoded scanlines (02 02 width, then each of R, G, B, E as
    literal runs of at most 128 bytes), the form stb_image's RLE path reads."""
    h, w, _ = mant.shape
    out = bytearray(b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y %d +X %d\n" % (h, w))
    px = np.concatenate([mant, exp[..., None]], -1).astype(np.uint8)
    for row in px:
        out += bytes([2, 2, w >> 8, w & 255])
        for k in range(4):
            comp = row[:, k].tobytes()
            for at in range(0, w, 128):
                part = comp[at:at + 128]
                out += bytes([len(part)]) + part
    return bytes(out)


def tiff_bytes(tags, chunks, endian="<", bigtiff=False, tiled=False):
    """A one-page TIFF (or BigTIFF) written by hand, for layouts PIL cannot write (16-bit RGB, big-endian,
    planar, tiled, associated alpha, an Orientation tag): header, the strips/tiles `chunks`, then the
    directory. `tags` maps tag -> (type, values) with type 3 SHORT, 4 LONG, 16 LONG8; the strip or tile
    offsets and byte counts (273/279 or 324/325) are added here."""
    e = endian
    pos = 16 if bigtiff else 8
    offsets = []
    body = b""
    for c in chunks:
        offsets.append(pos + len(body))
        body += c
    off_type = 16 if bigtiff else 4
    tags = dict(tags)
    tags[324 if tiled else 273] = (off_type, offsets)
    tags[325 if tiled else 279] = (off_type, [len(c) for c in chunks])
    ifd_at = pos + len(body)
    sizes = {3: ("H", 2), 4: ("I", 4), 16: ("Q", 8)}
    entry_len, inline = (20, 8) if bigtiff else (12, 4)
    n = len(tags)
    extra_at = ifd_at + (8 if bigtiff else 2) + n * entry_len + (8 if bigtiff else 4)
    entries, extra = b"", b""
    for tag in sorted(tags):
        typ, vals = tags[tag]
        code, size = sizes[typ]
        data = struct.pack(e + code * len(vals), *vals)
        if len(data) <= inline:
            value = data.ljust(inline, b"\0")
        else:
            value = struct.pack(e + ("Q" if bigtiff else "I"), extra_at + len(extra))
            extra += data
        entries += struct.pack(e + ("HHQ" if bigtiff else "HHI"), tag, typ, len(vals)) + value
    ifd = struct.pack(e + ("Q" if bigtiff else "H"), n) + entries + struct.pack(e + ("Q" if bigtiff else "I"), 0)
    head = (b"II" if e == "<" else b"MM") + (struct.pack(e + "HHHQ", 43, 8, 0, ifd_at) if bigtiff
                                             else struct.pack(e + "HI", 42, ifd_at))
    return head + body + ifd + extra


def tiff_tags(w, h, bps, spp, photometric, **more):
    """The baseline tags of an uncompressed image; `more` adds or replaces tags by name."""
    names = {"planar": 284, "extra": 338, "orientation": 274, "rows": 278, "tile_w": 322, "tile_h": 323,
             "format": 339, "compression": 259}
    tags = {256: (4, [w]), 257: (4, [h]), 258: (3, [bps] * spp), 259: (3, [1]), 262: (3, [photometric]),
            277: (3, [spp]), 278: (4, [h])}
    for k, v in more.items():
        tags[names[k]] = (3, v if isinstance(v, list) else [v])
    return tags


def webp_lossless_header_patch(data, w, h):
    """The same VP8L file with its header declaring w x h (14 bits each, minus one)."""
    at = data.index(b"VP8L") + 8
    assert data[at] == 0x2F
    bits = struct.unpack("<I", data[at + 1:at + 5])[0]
    bits = (bits & ~0xFFFFFFF) | ((w - 1) & 0x3FFF) | (((h - 1) & 0x3FFF) << 14)
    return data[:at + 1] + struct.pack("<I", bits) + data[at + 5:]


def webp_anim_header(w, h):
    """A RIFF/WebP with a VP8X chunk (animation flag) declaring a w x h canvas and an ANIM chunk, no frames."""
    vp8x = b"VP8X" + struct.pack("<I", 10) + bytes([0x02, 0, 0, 0]) + (w - 1).to_bytes(3, "little") + \
        (h - 1).to_bytes(3, "little")
    anim = b"ANIM" + struct.pack("<I", 6) + bytes(6)
    body = b"WEBP" + vp8x + anim
    return b"RIFF" + struct.pack("<I", len(body)) + body


def save_jpeg(img, path, **kw):
    img.save(path, "JPEG", quality=95, **kw)


def orient_raw(disp, k):
    """The stored pixels whose EXIF orientation k displays as `disp` (inverse of ImageOps.exif_transpose)."""
    im = Image.fromarray(disp)
    inv = {2: [Image.FLIP_LEFT_RIGHT], 3: [Image.ROTATE_180], 4: [Image.FLIP_TOP_BOTTOM],
           5: [Image.TRANSPOSE], 6: [Image.ROTATE_90], 7: [Image.TRANSVERSE], 8: [Image.ROTATE_270]}
    for op in inv.get(k, []):
        im = im.transpose(op)
    return im


def webp_tiff_good(good, add_good, rgb, grey8, rgba, g16):
    """WebP (libwebp) and TIFF (libtiff) files attnmap must decode. Lossless references are the arrays
    written; lossy WebP and the layouts libtiff's RGBA reader converts are PIL's decode of the file."""
    def write(name, data):
        with open(os.path.join(good, name), "wb") as f:
            f.write(data)

    def pil_rgb(name):
        return np.array(Image.open(os.path.join(good, name)).convert("RGB"))

    im = Image.fromarray(rgb)
    h, w, _ = rgb.shape
    # --- WebP: lossless (exact pixels, also under transparent alpha with exact=True), lossy, animated.
    im.save(os.path.join(good, "webp_lossless.webp"), "WEBP", lossless=True)
    assert np.array_equal(pil_rgb("webp_lossless.webp"), rgb)
    add_good("webp_lossless.webp", rgb)
    Image.fromarray(rgba, "RGBA").save(os.path.join(good, "webp_lossless_alpha.webp"), "WEBP", lossless=True, exact=True)
    assert np.array_equal(pil_rgb("webp_lossless_alpha.webp"), rgba[..., :3])
    add_good("webp_lossless_alpha.webp", rgba[..., :3])  # alpha dropped, the colours under it kept
    im.save(os.path.join(good, "webp_lossy.webp"), "WEBP", quality=90)
    add_good("webp_lossy.webp", pil_rgb("webp_lossy.webp"))  # PIL decodes with the same libwebp
    Image.fromarray(rgba, "RGBA").save(os.path.join(good, "webp_lossy_alpha.webp"), "WEBP", quality=90)
    add_good("webp_lossy_alpha.webp", pil_rgb("webp_lossy_alpha.webp"))
    f2 = Image.fromarray(255 - rgb)
    im.save(os.path.join(good, "webp_anim.webp"), "WEBP", save_all=True, append_images=[f2], duration=100,
            lossless=True)
    assert getattr(Image.open(os.path.join(good, "webp_anim.webp")), "n_frames", 1) == 2
    assert np.array_equal(pil_rgb("webp_anim.webp"), rgb)
    add_good("webp_anim.webp", rgb)  # the first frame
    exif = Image.Exif()
    exif[0x0112] = 6
    orient_raw(rgb, 6).save(os.path.join(good, "webp_exif_orient_6.webp"), "WEBP", lossless=True, exif=exif.tobytes())
    assert np.array_equal(np.array(ImageOps.exif_transpose(Image.open(os.path.join(good, "webp_exif_orient_6.webp")))), rgb)
    add_good("webp_exif_orient_6.webp", rgb)  # displayed upright, as the JPEG EXIF files
    # --- TIFF through PIL: uncompressed, LZW, Deflate, PackBits; grey, 16-bit grey, RGBA, grey+alpha,
    # palette and bilevel (libtiff's RGBA reader), multi-page (page 1).
    grey3 = np.repeat(grey8[..., None], 3, -1)
    for comp in ("raw", "tiff_lzw", "tiff_adobe_deflate", "packbits"):
        name = "tiff_rgb8_%s.tif" % comp.replace("tiff_", "").replace("adobe_", "")
        im.save(os.path.join(good, name), compression=comp)
        add_good(name, rgb)
    Image.fromarray(grey8, "L").save(os.path.join(good, "tiff_grey8.tif"), compression="tiff_lzw")
    add_good("tiff_grey8.tif", grey3)
    Image.fromarray(g16.astype(np.int32), "I").convert("I;16").save(os.path.join(good, "tiff_grey16.tif"))
    assert np.array_equal(np.array(Image.open(os.path.join(good, "tiff_grey16.tif"))), g16)
    add_good("tiff_grey16.tif", np.repeat((g16 >> 8).astype(np.uint8)[..., None], 3, -1))
    Image.fromarray(rgba, "RGBA").save(os.path.join(good, "tiff_rgba8.tif"), compression="tiff_adobe_deflate")
    add_good("tiff_rgba8.tif", rgba[..., :3])  # unassociated alpha: dropped, as PIL's convert("RGB")
    Image.fromarray(np.stack([grey8, 255 - grey8], -1), "LA").save(os.path.join(good, "tiff_grey_alpha.tif"))
    add_good("tiff_grey_alpha.tif", grey3)
    pal = im.quantize(colors=12, dither=Image.Dither.NONE)
    pal.save(os.path.join(good, "tiff_palette.tif"))
    add_good("tiff_palette.tif", np.array(pal.convert("RGB")))
    bilevel = Image.fromarray(np.where(grey8 > 128, 255, 0).astype(np.uint8), "L").convert("1")
    bilevel.save(os.path.join(good, "tiff_bilevel_g4.tif"), compression="group4")
    add_good("tiff_bilevel_g4.tif", pil_rgb("tiff_bilevel_g4.tif"))
    im.save(os.path.join(good, "tiff_jpeg_rgb.tif"), compression="jpeg", quality=90)  # JPEG-in-TIFF, RGB
    add_good("tiff_jpeg_rgb.tif", pil_rgb("tiff_jpeg_rgb.tif"))  # PIL decodes through the same libtiff/libjpeg
    im.convert("YCbCr").save(os.path.join(good, "tiff_jpeg_ycbcr.tif"), compression="jpeg", quality=90)
    assert Image.open(os.path.join(good, "tiff_jpeg_ycbcr.tif")).tag_v2.get(262) == 6  # libtiff's RGBA reader
    add_good("tiff_jpeg_ycbcr.tif", pil_rgb("tiff_jpeg_ycbcr.tif"))
    im.save(os.path.join(good, "tiff_multipage.tif"), save_all=True, append_images=[f2, Image.fromarray(grey8, "L")])
    assert Image.open(os.path.join(good, "tiff_multipage.tif")).n_frames == 3
    add_good("tiff_multipage.tif", rgb)  # page 1 (and a note naming the 3 pages)
    # --- TIFF by hand: 16-bit RGB big-endian, 16-bit RGBA, MinIsWhite, planar, tiled, BigTIFF, associated
    # alpha, an Orientation tag.
    rgb16 = rgb.astype(np.uint16) * 257 + np.random.default_rng(17).integers(0, 256, size=rgb.shape).astype(np.uint16)
    write("tiff_rgb16_be.tif", tiff_bytes(tiff_tags(w, h, 16, 3, 2), [rgb16.astype(">u2").tobytes()], ">"))
    add_good("tiff_rgb16_be.tif", (rgb16 >> 8).astype(np.uint8))
    a16 = np.where(np.mgrid[0:h, 0:w][1] < w // 2, 0, 65535).astype(np.uint16)
    rgba16 = np.concatenate([rgb16, a16[..., None]], -1)
    write("tiff_rgba16.tif", tiff_bytes(tiff_tags(w, h, 16, 4, 2, extra=2), [rgba16.astype("<u2").tobytes()]))
    add_good("tiff_rgba16.tif", (rgb16 >> 8).astype(np.uint8))
    write("tiff_miniswhite8.tif", tiff_bytes(tiff_tags(w, h, 8, 1, 0), [(255 - grey8).tobytes()]))
    add_good("tiff_miniswhite8.tif", grey3)
    planes = b"".join(rgb[..., c].tobytes() for c in range(3))
    write("tiff_planar.tif", tiff_bytes(tiff_tags(w, h, 8, 3, 2, planar=2),
                                        [rgb[..., c].tobytes() for c in range(3)]))
    assert len(planes) == 3 * w * h
    add_good("tiff_planar.tif", rgb)
    tiles = []
    for ty in range(0, h, 16):
        for tx in range(0, w, 32):  # 2 x 2 tiles of 32 x 16, the right ones padded past the 48 columns
            t = np.zeros((16, 32, 3), np.uint8)
            part = rgb[ty:ty + 16, tx:tx + 32]
            t[:part.shape[0], :part.shape[1]] = part
            tiles.append(t.tobytes())
    write("tiff_tiled.tif", tiff_bytes({k: v for k, v in tiff_tags(w, h, 8, 3, 2, tile_w=32, tile_h=16).items()
                                        if k != 278}, tiles, tiled=True))
    add_good("tiff_tiled.tif", rgb)
    write("tiff_bigtiff.tif", tiff_bytes(tiff_tags(w, h, 8, 3, 2), [rgb.tobytes()], bigtiff=True))
    add_good("tiff_bigtiff.tif", rgb)
    alpha = np.where(np.mgrid[0:h, 0:w][1] < w // 3, 0, np.where(np.mgrid[0:h, 0:w][1] < 2 * w // 3, 128, 255))
    alpha = alpha.astype(np.uint32)
    pre = (rgb.astype(np.uint32) * alpha[..., None] // 255).astype(np.uint8)
    write("tiff_assoc_alpha.tif", tiff_bytes(tiff_tags(w, h, 8, 4, 2, extra=1),
                                             [np.concatenate([pre, alpha.astype(np.uint8)[..., None]], -1).tobytes()]))
    # PIL's RGBa unpacking: a = 0 -> 0, else min(255, c * 255 // a)
    a = alpha[..., None]
    un = np.where(a == 0, 0, np.minimum(255, pre.astype(np.uint32) * 255 // np.maximum(a, 1))).astype(np.uint8)
    assert np.array_equal(pil_rgb("tiff_assoc_alpha.tif"), un)
    add_good("tiff_assoc_alpha.tif", un)
    stored = np.array(orient_raw(rgb, 6))
    sh, sw, _ = stored.shape
    write("tiff_orientation_6.tif", tiff_bytes(tiff_tags(sw, sh, 8, 3, 2, orientation=6), [stored.tobytes()]))
    add_good("tiff_orientation_6.tif", rgb)  # displayed upright, as the JPEG EXIF files
    # A private tag libtiff does not know (it warns; attnmap prints nothing) and 16 rows per strip.
    tags = tiff_tags(w, h, 8, 3, 2, rows=16)
    tags[65000] = (4, [12345])
    write("tiff_unknown_tag.tif", tiff_bytes(tags, [rgb[:16].tobytes(), rgb[16:].tobytes()]))
    add_good("tiff_unknown_tag.tif", rgb)


def webp_tiff_bad(add_bad, rgb):
    """WebP and TIFF files that must be refused: cut short, corrupt headers and data, huge declared sizes,
    sample formats attnmap does not read."""
    im = Image.fromarray(rgb)
    h, w, _ = rgb.shape
    buf = io.BytesIO()
    im.save(buf, "WEBP", quality=90)
    lossy = buf.getvalue()
    add_bad("webp_truncated_70.webp", lossy[: len(lossy) * 7 // 10], "truncated WebP: its RIFF header declares")
    buf = io.BytesIO()
    im.save(buf, "WEBP", lossless=True)
    lossless = buf.getvalue()
    add_bad("webp_lossless_truncated_70.webp", lossless[: len(lossless) * 7 // 10], "truncated WebP")
    # The RIFF size patched to match the cut: libwebp itself finds the image data short.
    cut = bytearray(lossy[: len(lossy) * 7 // 10])
    cut[4:8] = struct.pack("<I", len(cut) - 8)
    cut[16:20] = struct.pack("<I", len(cut) - 20)  # the VP8 chunk's size too
    add_bad("webp_truncated_patched_size.webp", bytes(cut), "truncated WebP")
    bad_sig = bytearray(lossless)
    bad_sig[lossless.index(b"VP8L") + 8] = 0x00  # the VP8L signature byte (0x2f)
    add_bad("webp_corrupt_header.webp", bytes(bad_sig), "corrupt WebP")
    add_bad("webp_huge_16384.webp", webp_lossless_header_patch(lossless, 16384, 16384), "exceeds the limit")
    add_bad("webp_huge_anim_30000.webp", webp_anim_header(30000, 30000), "exceeds the limit")
    # TIFF: PIL writes an uncompressed file's directory before its strip (cut: the strip runs past the end),
    # libtiff a compressed one's after its data (cut: the directory is missing).
    buf = io.BytesIO()
    im.save(buf, "TIFF")
    raw = buf.getvalue()
    add_bad("tiff_truncated_70.tif", raw[: len(raw) * 7 // 10], "truncated TIFF: strip 1 of 1")
    buf = io.BytesIO()
    im.save(buf, "TIFF", compression="tiff_lzw")
    lzw = buf.getvalue()
    add_bad("tiff_lzw_truncated_70.tif", lzw[: len(lzw) * 7 // 10], "truncated TIFF: its first directory is at byte")
    add_bad("tiff_header_only.tif", b"II*\0", "truncated TIFF: the file ends inside its 8-byte header")
    # A directory without ImageLength; an LZW strip of junk.
    tags = tiff_tags(w, h, 8, 3, 2)
    del tags[257]
    add_bad("tiff_no_height.tif", tiff_bytes(tags, [rgb.tobytes()]), "corrupt TIFF")
    junk = bytes(np.random.default_rng(18).integers(0, 256, 600, dtype=np.uint8))
    add_bad("tiff_lzw_junk.tif", tiff_bytes(tiff_tags(w, h, 8, 3, 2, compression=5), [junk]),
            "corrupt TIFF: strip 1 of 1 could not be decoded")
    add_bad("tiff_huge_30000.tif", tiff_bytes(tiff_tags(30000, 30000, 8, 3, 2), [bytes(64)]), "exceeds the limit")
    buf = io.BytesIO()
    Image.fromarray(rgb[..., 0].astype(np.float32) / 255, "F").save(buf, "TIFF")
    add_bad("tiff_float32.tif", buf.getvalue(), "unsupported TIFF")
    # Formats attnmap does not decode, named by their signatures whatever the file is called (stb_image would
    # say "unknown image type"); named .jpg/.png here, as renamed files are (a folder walk picks them).
    ftyp = lambda brand: struct.pack(">I", 24) + b"ftyp" + brand + b"\0\0\0\0" + brand + b"mif1" + bytes(40)
    add_bad("heic_named.jpg", ftyp(b"heic"), "unsupported image format HEIF/HEIC")
    add_bad("avif_named.png", ftyp(b"avif"), "unsupported image format AVIF")
    add_bad("jxl_named.jpg", b"\xff\x0a" + bytes(30), "unsupported image format JPEG XL")
    add_bad("jp2_named.jpg", b"\0\0\0\x0cjP  \r\n\x87\n" + bytes(30), "unsupported image format JPEG 2000")
    add_bad("svg_named.png", b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>\n',
            "unsupported image format SVG")


def fuzz_seeds(rgb):
    """Small WebP and TIFF files (8 x 6) for fuzz/seeds/image/, one per decoder path, so that libFuzzer starts
    from every layout: WebP lossy/lossless/alpha/animated/EXIF orientation; TIFF per compression, 16-bit big-endian, planar,
    tiled, BigTIFF, palette, bilevel, JPEG-in-TIFF (YCbCr), float (refused), multi-page."""
    seeds = os.path.join(ROOT, "fuzz", "seeds", "image")
    shutil.rmtree(seeds, ignore_errors=True)
    os.makedirs(seeds)
    small = np.ascontiguousarray(rgb[::5, ::6][:6, :8])
    h, w, _ = small.shape
    im = Image.fromarray(small)
    rgba = Image.fromarray(np.concatenate([small, (small[..., :1] // 2 + 100)], -1), "RGBA")

    def save(name, img, fmt, **kw):
        img.save(os.path.join(seeds, name), fmt, **kw)

    def write(name, data):
        with open(os.path.join(seeds, name), "wb") as f:
            f.write(data)

    save("lossy.webp", im, "WEBP", quality=50)
    save("lossless.webp", im, "WEBP", lossless=True)
    save("alpha_lossy.webp", rgba, "WEBP", quality=50)
    save("alpha_lossless.webp", rgba, "WEBP", lossless=True)
    save("anim.webp", im, "WEBP", save_all=True, append_images=[Image.fromarray(255 - small)], duration=50)
    exif = Image.Exif()
    exif[0x0112] = 5
    save("exif_orient_5.webp", im, "WEBP", lossless=True, exif=exif.tobytes())
    for comp in ("raw", "tiff_lzw", "tiff_adobe_deflate", "packbits", "jpeg"):
        save("rgb_%s.tif" % comp, im, "TIFF", compression=comp)
    save("grey_lzw.tif", im.convert("L"), "TIFF", compression="tiff_lzw")
    save("rgba_deflate.tif", rgba, "TIFF", compression="tiff_adobe_deflate")
    save("palette.tif", im.quantize(colors=4), "TIFF")
    save("bilevel_g4.tif", im.convert("1"), "TIFF", compression="group4")
    save("float.tif", im.convert("F"), "TIFF")
    save("multipage.tif", im, "TIFF", save_all=True, append_images=[im.convert("L")])
    rgb16 = small.astype(np.uint16) * 257
    write("rgb16_be.tif", tiff_bytes(tiff_tags(w, h, 16, 3, 2), [rgb16.astype(">u2").tobytes()], ">"))
    write("planar.tif", tiff_bytes(tiff_tags(w, h, 8, 3, 2, planar=2), [small[..., c].tobytes() for c in range(3)]))
    tile = np.zeros((16, 16, 3), np.uint8)
    tile[:h, :w] = small
    write("tiled.tif", tiff_bytes({k: v for k, v in tiff_tags(w, h, 8, 3, 2, tile_w=16, tile_h=16).items()
                                   if k != 278}, [tile.tobytes()], tiled=True))
    write("bigtiff.tif", tiff_bytes(tiff_tags(w, h, 8, 3, 2), [small.tobytes()], bigtiff=True))
    write("orientation_8.tif", tiff_bytes(tiff_tags(w, h, 8, 3, 2, orientation=8), [small.tobytes()]))
    total = sum(os.path.getsize(os.path.join(seeds, n)) for n in os.listdir(seeds))
    print("fuzz seeds: %d files, %d bytes" % (len(os.listdir(seeds)), total))


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    good, bad, ref = (os.path.join(OUT, d) for d in ("good", "bad", "ref"))
    for d in (good, bad, ref):
        os.makedirs(d)
    expect = {"good": {}, "bad": {}}

    def add_good(name, want_rgb, tol=0.0):
        Image.fromarray(np.ascontiguousarray(want_rgb), "RGB").save(os.path.join(ref, name + ".png"))
        expect["good"][name] = {"tol": tol}

    def add_bad(name, data, reason):
        with open(os.path.join(bad, name), "wb") as f:
            f.write(data)
        expect["bad"][name] = reason

    rgb = pattern()
    grey8 = rgb[..., 0] // 2 + rgb[..., 1] // 2
    rng = np.random.default_rng(6)

    # --- PNG: every bit depth of greyscale, scaled to 0..255 the way stb_image expands them.
    for bits in (1, 2, 4):
        levels = (1 << bits) - 1
        v = (grey8.astype(np.uint32) * levels // 255).astype(np.uint8)
        name = "png_grey%d.png" % bits
        with open(os.path.join(good, name), "wb") as f:
            f.write(png_grey_bits(v, bits))
        chk = np.array(Image.open(os.path.join(good, name)).convert("L")).astype(np.uint32)
        assert np.array_equal(chk * levels // 255 if bits > 1 else chk // 255, v), name
        want = (v.astype(np.uint32) * 255 // levels).astype(np.uint8)
        add_good(name, np.repeat(want[..., None], 3, -1))
    Image.fromarray(grey8, "L").save(os.path.join(good, "png_grey8.png"))
    add_good("png_grey8.png", np.repeat(grey8[..., None], 3, -1))
    yy, xx = np.mgrid[0:H, 0:W]
    g16 = (xx * 1365 + yy * 10).astype(np.uint16)  # spans 0..64475: clipping would make it all white
    Image.fromarray(g16.astype(np.int32), "I").convert("I;16").save(os.path.join(good, "png_grey16.png"))
    add_good("png_grey16.png", np.repeat((g16 >> 8).astype(np.uint8)[..., None], 3, -1))

    pal = Image.fromarray(rgb).quantize(colors=12, dither=Image.Dither.NONE)
    pal.save(os.path.join(good, "png_palette.png"))
    add_good("png_palette.png", np.array(pal.convert("RGB")))
    trns = pal.copy()
    trns.info["transparency"] = 0
    trns.save(os.path.join(good, "png_palette_trns.png"), transparency=0)
    add_good("png_palette_trns.png", np.array(pal.convert("RGB")))

    Image.fromarray(np.stack([grey8, 255 - grey8], -1), "LA").save(os.path.join(good, "png_grey_alpha.png"))
    add_good("png_grey_alpha.png", np.repeat(grey8[..., None], 3, -1))
    junk = rng.integers(0, 256, size=rgb.shape, dtype=np.uint8)
    alpha = np.where(xx < W // 2, 0, 255).astype(np.uint8)  # left half fully transparent, junk colours
    rgba = np.concatenate([np.where(alpha[..., None] == 0, junk, rgb), alpha[..., None]], -1)
    Image.fromarray(rgba, "RGBA").save(os.path.join(good, "png_rgba_junk.png"))
    add_good("png_rgba_junk.png", rgba[..., :3])  # alpha ignored, as PIL convert('RGB') / timm do

    # Interlaced (Adam7): PIL cannot write it, so build the file: 7 passes of filter-0 rows.
    def adam7(img):
        passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
        raw = b""
        for x0, y0, dx, dy in passes:
            sub = img[y0::dy, x0::dx]
            if sub.size == 0:
                continue
            for row in sub:
                raw += b"\x00" + row.tobytes()
        h, w, _ = img.shape
        ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1)
        return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw, 9)) +
                png_chunk(b"IEND", b""))
    with open(os.path.join(good, "png_interlaced.png"), "wb") as f:
        f.write(adam7(rgb))
    assert np.array_equal(np.array(Image.open(os.path.join(good, "png_interlaced.png")).convert("RGB")), rgb)
    add_good("png_interlaced.png", rgb)

    one = np.array([[[200, 30, 90]]], dtype=np.uint8)
    Image.fromarray(one).save(os.path.join(good, "png_1x1.png"))
    add_good("png_1x1.png", one)
    wide = pattern(4000, 3)
    Image.fromarray(wide).save(os.path.join(good, "png_4000x3.png"))
    add_good("png_4000x3.png", wide)

    # --- JPEG: references are libjpeg's decode (PIL); stb's IDCT/upsampling differ by a few levels.
    im = Image.fromarray(rgb)
    jpeg_tol = 4.0

    def add_jpeg(name, img, tol=jpeg_tol, **kw):
        path = os.path.join(good, name)
        save_jpeg(img, path, **kw)
        add_good(name, np.array(ImageOps.exif_transpose(Image.open(path)).convert("RGB")), tol)

    add_jpeg("jpeg_baseline.jpg", im)
    add_jpeg("jpeg_progressive.jpg", im, progressive=True)
    add_jpeg("jpeg_grey.jpg", Image.fromarray(grey8, "L"))
    # CMYK as Adobe Photoshop writes it (APP14 transform 0, inverted samples): PIL's libjpeg path.
    cmyk = im.convert("CMYK")
    add_jpeg("jpeg_cmyk.jpg", cmyk)
    # YCCK: same CMYK, stored as Y/Cb/Cr of the inverted C,M,Y plus K, APP14 transform 2.
    c = np.array(cmyk).astype(np.float64)
    inv = c[..., :3]  # YCCK holds Y/Cb/Cr of the true C, M, Y (libjpeg's ycck_cmyk_convert: C = 255 - R)
    y = 0.299 * inv[..., 0] + 0.587 * inv[..., 1] + 0.114 * inv[..., 2]
    cb = 128 - 0.168736 * inv[..., 0] - 0.331264 * inv[..., 1] + 0.5 * inv[..., 2]
    cr = 128 + 0.5 * inv[..., 0] - 0.418688 * inv[..., 1] - 0.081312 * inv[..., 2]
    # PIL's CMYK encoder writes Adobe-inverted samples; pre-invert so the file holds Y, Cb, Cr, 255-K.
    ycck = np.clip(np.stack([255 - y, 255 - cb, 255 - cr, c[..., 3]], -1).round(), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    save_jpeg(Image.fromarray(ycck, "CMYK"), buf)
    data = bytearray(buf.getvalue())
    at = data.find(b"\xff\xee")
    assert at > 0 and data[at + 4:at + 9] == b"Adobe", "PIL no longer writes an Adobe APP14 marker for CMYK"
    data[at + 15] = 2  # transform: 0 = CMYK, 2 = YCCK
    with open(os.path.join(good, "jpeg_ycck.jpg"), "wb") as f:
        f.write(data)
    # libjpeg must read it back as the same CMYK picture, or the file is not a real YCCK JPEG.
    back = np.array(Image.open(os.path.join(good, "jpeg_ycck.jpg")).convert("RGB")).astype(int)
    assert np.abs(back - np.array(cmyk.convert("RGB")).astype(int)).mean() < 4, "YCCK file is not what libjpeg reads"
    add_good("jpeg_ycck.jpg", np.array(cmyk.convert("RGB")), 6.0)
    # 100 junk bytes after the end-of-image marker.
    buf = io.BytesIO()
    save_jpeg(im, buf)
    jpg = buf.getvalue()
    with open(os.path.join(good, "jpeg_junk_after_eoi.jpg"), "wb") as f:
        f.write(jpg + bytes(rng.integers(0, 256, 100, dtype=np.uint8)))
    add_good("jpeg_junk_after_eoi.jpg", np.array(Image.open(io.BytesIO(jpg)).convert("RGB")), jpeg_tol)
    # EXIF orientation 1..8: every file displays as `rgb` once the orientation is applied.
    for k in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = k
        add_jpeg("exif_orient_%d.jpg" % k, orient_raw(rgb, k), exif=exif.tobytes())

    # --- Other formats stb_image reads.
    im.save(os.path.join(good, "bmp.bmp"))
    add_good("bmp.bmp", rgb)
    with open(os.path.join(good, "bmp.bmp"), "rb") as f:
        bmp = f.read()
    with open(os.path.join(good, "bmp_top_down.bmp"), "wb") as f:
        f.write(bmp_top_down(bmp))
    add_good("bmp_top_down.bmp", rgb)
    with open(os.path.join(good, "tga_right_to_left.tga"), "wb") as f:
        f.write(tga_right_to_left(rgb))
    add_good("tga_right_to_left.tga", rgb)  # stb_image ignores descriptor bit 4; attnmap mirrors the rows
    with open(os.path.join(good, "pic.pic"), "wb") as f:
        f.write(pic_rgb(rgb))
    add_good("pic.pic", rgb)
    im.save(os.path.join(good, "tga.tga"))
    add_good("tga.tga", rgb)
    im.save(os.path.join(good, "tga_rle.tga"), compression="tga_rle")
    add_good("tga_rle.tga", rgb)
    im.save(os.path.join(good, "ppm.ppm"))
    add_good("ppm.ppm", rgb)
    Image.fromarray(grey8, "L").save(os.path.join(good, "pgm.pgm"))
    add_good("pgm.pgm", np.repeat(grey8[..., None], 3, -1))
    # 16-bit PNM (big-endian samples), scaled from 0..maxval to 0..255 and rounded. attnmap decodes these
    # itself: Debian's stb_image (2022) takes the samples in little-endian order and overreads its buffer
    # on 16-bit greyscale forced to RGB (a fuzz finding).
    def scale16(v, maxval):
        return ((np.minimum(v.astype(np.uint32), maxval) * 255 + maxval // 2) // maxval).astype(np.uint8)
    with open(os.path.join(good, "pgm16.pgm"), "wb") as f:
        f.write(b"P5\n# a comment line\n%d %d\n65535\n" % (W, H) + g16.astype(">u2").tobytes())
    add_good("pgm16.pgm", np.repeat(scale16(g16, 65535)[..., None], 3, -1))
    rgb16 = rgb.astype(np.uint16) * 257 + np.random.default_rng(16).integers(0, 256, size=rgb.shape).astype(np.uint16)
    with open(os.path.join(good, "ppm16.ppm"), "wb") as f:
        f.write(b"P6 %d %d 65535\n" % (W, H) + rgb16.astype(">u2").tobytes())
    add_good("ppm16.ppm", scale16(rgb16, 65535))
    g12 = (g16 >> 4).astype(np.uint16)  # a 12-bit scan: maxval 4095
    with open(os.path.join(good, "pgm12.pgm"), "wb") as f:
        f.write(b"P5 %d %d 4095\n" % (W, H) + g12.astype(">u2").tobytes())
    add_good("pgm12.pgm", np.repeat(scale16(g12, 4095)[..., None], 3, -1))
    f1 = Image.fromarray(rgb).quantize(colors=8, dither=Image.Dither.NONE)
    f2 = Image.fromarray(255 - rgb).quantize(colors=8, dither=Image.Dither.NONE)
    f1.save(os.path.join(good, "gif_anim.gif"), save_all=True, append_images=[f2], duration=100, loop=0)
    add_good("gif_anim.gif", np.array(f1.convert("RGB")))  # the first frame
    f1.save(os.path.join(good, "gif_single.gif"))  # one frame: nothing after it but the trailer
    add_good("gif_single.gif", np.array(f1.convert("RGB")))
    with open(os.path.join(good, "psd.psd"), "wb") as f:
        f.write(psd_rgb(rgb))
    add_good("psd.psd", rgb)
    # HDR: stb maps linear floats to 8 bits with gamma 2.2, scale 1: round(255 * v ** (1/2.2)).
    mant = (rgb // 2 + 64).astype(np.uint8)
    expo = np.full((H, W), 128, np.uint8)  # v = mant / 256
    with open(os.path.join(good, "hdr.hdr"), "wb") as f:
        f.write(hdr_rgbe(mant, expo))
    v = mant.astype(np.float64) / 256.0
    add_good("hdr.hdr", np.clip(np.floor(255 * v ** (1 / 2.2) + 0.5), 0, 255).astype(np.uint8), 0.01)
    hdr_rle = hdr_rgbe_rle(mant, expo)
    with open(os.path.join(good, "hdr_rle.hdr"), "wb") as f:
        f.write(hdr_rle)
    add_good("hdr_rle.hdr", np.clip(np.floor(255 * v ** (1 / 2.2) + 0.5), 0, 255).astype(np.uint8), 0.01)
    # 8-bit PGM with maxval 15: scaled 0..15 -> 0..255 (stb_image alone would keep 0..15: nearly black).
    g4 = (grey8 // 17).astype(np.uint8)
    with open(os.path.join(good, "pgm_maxval15.pgm"), "wb") as f:
        f.write(b"P5 %d %d 15\n" % (W, H) + g4.tobytes())
    add_good("pgm_maxval15.pgm", np.repeat((g4.astype(np.uint32) * 255 // 15).astype(np.uint8)[..., None], 3, -1))
    # GIFs where stb_image alone differs from PIL's convert("RGB"): transparent pixels (stb: black; PIL: the
    # transparent index's palette colour), and a first frame smaller than the screen (stb: black, or the
    # background colour with red and blue swapped; PIL: palette[transparent index, else 0]).
    grng = np.random.default_rng(9)
    gpal = grng.integers(0, 256, (16, 3)).astype(np.uint8)
    lpal = grng.integers(0, 256, (8, 3)).astype(np.uint8)
    gidx = grng.integers(0, 16, (H, W)).astype(np.uint8)
    gidx[grng.random((H, W)) < 0.3] = 3
    with open(os.path.join(good, "gif_transparent.gif"), "wb") as f:
        f.write(gif_frame((W, H), (0, 0), gidx, gpal, transparent=3))
    add_good("gif_transparent.gif", gpal[gidx])
    fidx = grng.integers(0, 16, (20, 30)).astype(np.uint8)
    with open(os.path.join(good, "gif_offset_frame.gif"), "wb") as f:
        f.write(gif_frame((W, H), (9, 6), fidx, gpal, background=2))
    want = np.repeat(np.repeat(gpal[0][None, None], H, 0), W, 1)
    want[6:26, 9:39] = gpal[fidx]
    add_good("gif_offset_frame.gif", want)
    lidx = grng.integers(0, 8, (20, 30)).astype(np.uint8)
    lidx[grng.random((20, 30)) < 0.3] = 5
    with open(os.path.join(good, "gif_offset_local_transparent.gif"), "wb") as f:
        f.write(gif_frame((W, H), (12, 3), lidx, gpal, local_pal=lpal, background=1, transparent=5))
    want = np.repeat(np.repeat(lpal[5][None, None], H, 0), W, 1)
    want[3:23, 12:42] = lpal[lidx]
    add_good("gif_offset_local_transparent.gif", want)
    # A transparent index past the end of a short (4-colour) palette: PIL fills with the grey (200, 200, 200).
    sidx = grng.integers(0, 4, (20, 30)).astype(np.uint8)
    with open(os.path.join(good, "gif_offset_transparent_past_palette.gif"), "wb") as f:
        f.write(gif_frame((W, H), (4, 8), sidx, gpal[:4], transparent=200))
    want = np.full((H, W, 3), 200, np.uint8)
    want[8:28, 4:34] = gpal[:4][sidx]
    add_good("gif_offset_transparent_past_palette.gif", want)
    # Two graphic control extensions, only the first marking a transparent index: PIL keeps it for the fill.
    two = gif_frame((W, H), (9, 6), fidx, gpal, transparent=7)
    k = 13 + 3 * len(gpal) + 8  # after the screen descriptor, the global palette and the first extension
    assert two[k - 8:k - 5] == b"\x21\xF9\x04" and two[k:k + 1] == b"\x2C"
    two = two[:k] + b"\x21\xF9\x04\x00\x00\x00\x00\x00" + two[k:]
    with open(os.path.join(good, "gif_two_control_blocks.gif"), "wb") as f:
        f.write(two)
    want = np.repeat(np.repeat(gpal[7][None, None], H, 0), W, 1)
    want[6:26, 9:39] = gpal[fidx]
    add_good("gif_two_control_blocks.gif", want)
    for name in ("gif_transparent.gif", "gif_offset_frame.gif", "gif_offset_local_transparent.gif",
                 "gif_offset_transparent_past_palette.gif", "gif_two_control_blocks.gif"):
        got = np.array(Image.open(os.path.join(good, name)).convert("RGB"))
        assert (got == np.array(Image.open(os.path.join(ref, name + ".png")))).all(), name + ": PIL disagrees"
    # An image smaller than the 14 x 14 patch grid: its map is shrunk to 10 x 14 pixels, which aborted
    # Debian's stb_image_resize (triangle filter) before attnmap shrank bilinear maps itself.
    tiny = pattern(10, 14)
    Image.fromarray(tiny).save(os.path.join(good, "png_10x14.png"))
    add_good("png_10x14.png", tiny)
    # Names with spaces and non-ASCII characters.
    im.save(os.path.join(good, "café 猫.png"))
    add_good("café 猫.png", rgb)

    webp_tiff_good(good, add_good, rgb, grey8, rgba, g16)

    # --- Files that must be refused, each with the reason the error line must contain.
    add_bad("empty.png", b"", "empty file (0 bytes)")
    add_bad("text.png", b"This is a text file with a .png name.\n", "not a readable image")
    add_bad("jpeg_truncated_70.jpg", jpg[: len(jpg) * 7 // 10], "truncated JPEG")
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, size=(H, W, 3), dtype=np.uint8)).save(buf, "PNG")
    add_bad("png_truncated_70.png", buf.getvalue()[: len(buf.getvalue()) * 7 // 10],
            "truncated PNG: the file ends inside its IDAT chunk")
    # Cut inside a text chunk before any image data: stb_image stops without a reason of its own.
    png = buf.getvalue()
    text = png_chunk(b"tEXt", b"Comment\0" + b"x" * 200)
    add_bad("png_cut_in_text_chunk.png", (png[:33] + text + png[33:])[:33 + 100],
            "truncated PNG: the file ends inside its tEXt chunk (100 of its 220 bytes present)")
    # Full length, but the IDAT chunk's length field is past the spec's 2^31-1: corrupt, not cut short.
    bad_len = bytearray(png)
    bad_len[png.index(b"IDAT") - 4:png.index(b"IDAT")] = b"\xff\xff\xff\xff"
    add_bad("png_idat_length_corrupt.png", bytes(bad_len),
            "corrupt PNG: the IDAT chunk at byte 33 declares 4294967295 bytes (the limit is 2^31-1)")
    # Four components without an Adobe APP14 marker: CMYK or YCCK cannot be told apart -> refused.
    buf = io.BytesIO()
    save_jpeg(cmyk, buf)
    data = bytearray(buf.getvalue())
    at = data.find(b"\xff\xee")
    seg = struct.unpack(">H", data[at + 2:at + 4])[0]
    del data[at:at + 2 + seg]
    add_bad("jpeg_cmyk_no_adobe.jpg", bytes(data), "unsupported colour space")
    pgm = b"P5\n%d %d\n255\n" % (W, H) + grey8.tobytes()
    add_bad("pgm_truncated_70.pgm", pgm[: len(pgm) * 7 // 10], "truncated PGM/PPM")
    add_bad("pgm16_no_pixels.pgm", b"P5 5 5555 555\n", "truncated PGM/PPM")
    add_bad("pgm_overflowing_width.pgm", b"P5 99999999999 2 255\n" + b"\0" * 64, "malformed PGM/PPM header")
    add_bad("ppm_huge_30000.ppm", b"P6 30000 30000 255\n" + b"\0" * 64, "exceeds the limit")
    # Cut HDR and TGA files: stb_image (2022) loops forever on a cut RLE HDR (CVE-2021-42715) and leaves
    # the missing rows of an uncompressed TGA uninitialised; both are refused after a walk of the data.
    add_bad("hdr_rle_truncated_70.hdr", hdr_rle[: len(hdr_rle) * 7 // 10], "truncated HDR")
    flat = hdr_rgbe(mant, expo)
    add_bad("hdr_flat_truncated_70.hdr", flat[: len(flat) * 7 // 10], "truncated HDR")
    buf = io.BytesIO()
    im.save(buf, "TGA")
    add_bad("tga_truncated_70.tga", buf.getvalue()[: len(buf.getvalue()) * 7 // 10], "truncated TGA")
    # Cut BMP, GIF, PSD and RLE TGA files: stb_image reads zeros past a buffer's end and would draw the
    # missing part black; attnmap decodes these formats through a reader that sees the decoder run out.
    for name, fmt, kw in (("bmp_truncated_70.bmp", "BMP", {}),
                          ("tga_rle_truncated_70.tga", "TGA", {"compression": "tga_rle"})):
        buf = io.BytesIO()
        im.save(buf, fmt, **kw)
        add_bad(name, buf.getvalue()[: len(buf.getvalue()) * 7 // 10], "truncated " + fmt)
    buf = io.BytesIO()
    f1.save(buf, "GIF")
    add_bad("gif_truncated_70.gif", buf.getvalue()[: len(buf.getvalue()) * 7 // 10], "truncated GIF")
    # A GIF whose trailer comes before any image: stb_image stops without a reason.
    add_bad("gif_no_image.gif", b"GIF89a" + struct.pack("<HHBBB", 8, 8, 0x80, 0, 0) + bytes(6) + b"\x3B",
            "no image before the GIF's end marker")
    psd = psd_rgb(rgb)
    add_bad("psd_truncated_70.psd", psd[: len(psd) * 7 // 10], "truncated PSD")
    # Variants stb_image decodes wrongly without an error: refused by name.
    pal = [(i * 7 % 256, 255 - i, i * 13 % 256) for i in range(256)]
    add_bad("bmp_os2_palette.bmp", bmp_os2_palette((rgb[..., 0] // 2 + rgb[..., 1] // 2), pal),
            "unsupported OS/2 BMP (12-byte header) with a colour palette")
    add_bad("psd16_rle.psd", psd16_rle(rgb.astype(np.uint16) * 257), "unsupported 16-bit PSD with RLE compression")
    # stb_image quotes an unknown critical PNG chunk's type in its reason; a newline there stays out of the line.
    crit = png_chunk(b"I\nXT", b"")
    plain = png_grey_bits(np.zeros((2, 2), np.uint8), 8)
    # (stb_image would quote it in its reason; attnmap names the invalid chunk type first, without quoting it.)
    add_bad("png_chunk_newline.png", plain[:33] + crit + plain[33:],
            "corrupt PNG: the chunk at byte 33 has an invalid type")
    # stb_image sees a cut PIC itself ("bad file"), but then converted its null result to RGB and crashed
    # (Debian's 2022 copy), until attnmap asked for the RGBA a PIC is made of.
    pic = pic_rgb(rgb)
    add_bad("pic_truncated_70.pic", pic[: len(pic) * 7 // 10], "cannot decode image (bad file)")
    add_bad("huge_20000x20000.png", png_header_only(20000, 20000, 8, 0), "exceeds the limit")
    add_bad("huge_23169x23169_rgba.png", png_header_only(23169, 23169, 8, 6), "exceeds the limit")
    # A JPEG whose frame header declares 30000 x 30000 (SOF0 height/width patched).
    data = bytearray(jpg)
    at = data.find(b"\xff\xc0")
    data[at + 5:at + 9] = struct.pack(">HH", 30000, 30000)
    add_bad("huge_jpeg_30000.jpg", bytes(data[: at + 200]), "exceeds the limit")
    webp_tiff_bad(add_bad, rgb)

    with open(os.path.join(OUT, "expect.json"), "w", encoding="utf-8") as f:
        json.dump(expect, f, indent=1, ensure_ascii=False, sort_keys=True)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(dp, n)) for dp, _, ns in os.walk(OUT) for n in ns)
    print("corpus: %d good, %d bad, %d bytes" % (len(expect["good"]), len(expect["bad"]), total))
    assert total < 2_000_000
    fuzz_seeds(rgb)


if __name__ == "__main__":
    main()
