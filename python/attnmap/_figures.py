"""Figures, evaluation and folders: the command line's render, figure and eval run in process.

Each call runs the command (app/command_line.hpp) with the model lent to it, in a temporary folder when the
result is bytes, so the files are exactly the command line's (same pixels, same settings record).
"""

import json
import os
import re
import sys
import tempfile

from . import _attnmap
from ._options import command_names, reword, to_flags

AttnmapError = _attnmap.AttnmapError


class _Tee:
    """A run's standard output or error: the lines kept, and passed on to sys.stdout / sys.stderr (looked up
    as each line comes, so a notebook shows them under the running cell) unless quiet."""

    def __init__(self, stream):
        self.stream = stream  # "stdout", "stderr" or None (quiet)
        self.text = []

    def write(self, s):
        self.text.append(s)
        if self.stream is not None:
            getattr(sys, self.stream).write(s)
        return len(s)

    def lines(self):
        return "".join(self.text).splitlines()


def _run(args, model=None, progress=None, quiet=True, names=None):
    """Runs the command line `args` (without the program name). Returns (exit status, stdout lines, stderr
    lines). quiet: nothing is printed (the lines are returned); else they go to sys.stdout / sys.stderr as
    they come."""
    out, err = _Tee(None if quiet else "stdout"), _Tee(None if quiet else "stderr")
    engine = model._m if model is not None else None
    rc = _attnmap.run([str(a) for a in args], engine, progress, out.write, err.write)
    return rc, out.lines(), err.lines()


def _errors(lines, names):
    msgs = [l[len("attnmap: error: "):] for l in lines if l.startswith("attnmap: error: ")]
    return reword("\n".join(msgs) if msgs else "\n".join(lines), names or {})


def _raise(rc, err, names):
    from . import _error
    raise _error(_errors(err, names), rc)


def _model_args(model, command="render"):
    from . import load
    if model is None:
        model = load(quiet=True)
    return model, ["-w", model.name] + list(model._m.flags), {**command_names(command), **model._names}


def _image_file(image, folder, index, name=None):
    """A path the command line can read: the path itself, or the array written as a PNG (lossless)."""
    from . import _image_arg
    image = _image_arg(image)
    if isinstance(image, str):
        return image
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, (name or ("image" if index is None else "image%d" % (index + 1))) + ".png")
    _attnmap.write_png(path, image)
    return path


class Figure:
    """A figure attnmap drew: ``data`` (the file's bytes), ``format`` ("png", "pdf" or "svg"), ``record``
    (the settings record the file carries, a dict; {} when none), ``save(path)``. A notebook shows PNG and
    SVG figures (``_repr_png_`` / ``_repr_svg_``)."""

    def __init__(self, data, fmt, name=""):
        self.data = data
        self.format = fmt
        self.name = name

    @property
    def record(self):
        if self.format == "png":
            return _png_record(self.data)
        if self.format == "svg":
            m = re.search(rb"<metadata[^>]*>(.*?)</metadata>", self.data, re.S)
            text = m.group(1).decode("utf-8") if m else ""
            import html
            text = html.unescape(re.sub(r"<!\[CDATA\[(.*?)\]\]>", r"\1", text, flags=re.S)).strip()
        else:
            text = _pdf_subject(self.data)
        try:
            return json.loads(text) if text else {}
        except ValueError:
            return {}

    def save(self, path):
        """Writes the bytes to `path` (through a temporary file, renamed: never half-written)."""
        path = os.fspath(path)
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp.", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(self.data)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return path

    def _repr_png_(self):
        return self.data if self.format == "png" else None

    def _repr_svg_(self):
        return self.data.decode("utf-8") if self.format == "svg" else None

    def __repr__(self):
        return "<attnmap.Figure %s%s, %d bytes>" % (self.format, " " + self.name if self.name else "", len(self.data))


def _pdf_subject(data):
    """The PDF's /Subject string (where attnmap puts the settings record), decoded: a literal (...) string with
    its escapes, or a <FEFF...> UTF-16 hex string."""
    i = data.find(b"/Subject")
    if i < 0:
        return ""
    j = i + len(b"/Subject")
    while j < len(data) and data[j:j + 1] in b" \r\n\t":
        j += 1
    if data[j:j + 1] == b"<":
        k = data.find(b">", j)
        raw = bytes.fromhex(data[j + 1:k].decode("ascii"))
        return raw[2:].decode("utf-16-be") if raw.startswith(b"\xfe\xff") else raw.decode("latin-1")
    if data[j:j + 1] != b"(":
        return ""
    out, depth, k = bytearray(), 1, j + 1
    esc = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}
    while k < len(data) and depth:
        c = data[k:k + 1]
        if c == b"\\":
            n = data[k + 1:k + 2]
            if n in esc:
                out += esc[n]
                k += 2
            elif n.isdigit():
                m = re.match(rb"[0-7]{1,3}", data[k + 1:k + 4])
                out.append(int(m.group(0), 8))
                k += 1 + len(m.group(0))
            elif n in b"\r\n":
                k += 2
            else:
                out += n
                k += 2
            continue
        if c == b"(":
            depth += 1
        elif c == b")":
            depth -= 1
            if not depth:
                break
        out += c
        k += 1
    raw = bytes(out)
    return raw[2:].decode("utf-16-be") if raw.startswith(b"\xfe\xff") else raw.decode("utf-8", "replace")


def _png_record(data):
    """The tEXt chunk `attnmap` of a PNG (the settings record), as a dict."""
    import struct
    pos = 8
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"tEXt":
            key, _, text = body.partition(b"\0")
            if key == b"attnmap":
                try:
                    return json.loads(text.decode("latin-1"))
                except ValueError:
                    return {}
        if kind == b"IEND":
            break
        pos += 12 + n
    return {}


def _read_tree(folder):
    files = {}
    for root, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                files[os.path.relpath(p, folder)] = f.read()
    return files


def _render_image(image, model, flags, names, name=None):
    """Runs `attnmap render` on one image into a temporary folder; returns {relative path: bytes}."""
    if isinstance(image, (str, bytes, os.PathLike)) and not os.path.isfile(image):
        from . import _error  # a failed input (exit_code 1), as forward() says it
        p = os.fsdecode(image)
        raise _error("%s: %s" % (p, "not a regular file" if os.path.exists(p) else "cannot open: No such file or directory"), 1)
    with tempfile.TemporaryDirectory(prefix="attnmap-") as d:
        src = _image_file(image, os.path.join(d, "in"), None, name)
        out = os.path.join(d, "out")
        rc, _, err = _run(["render", src, "--out", out, *flags, "-q"], model, names=names)
        if rc != 0:
            _raise(rc, err, names)
        return _read_tree(out)


def _view_flags(target):
    """The --views / --class of a Map (or a view name)."""
    from . import Map
    if isinstance(target, Map):
        r = target._result
        opts = {k: v for k, v in r.options.items()
                if k not in ("views", "layer", "head", "rollout", "explain", "classes", "query", "column",
                             "received")}
        opts["views"] = target.view
        if target.class_index is not None:
            opts["classes"] = target.class_index
        return r.model, opts
    return None, {"views": target}


def overlay(image, map, *, model=None, **options):
    """NAME.png as ``attnmap render`` draws it: the map over the photo, with its legend strip (colour bar in
    the map's units, range, contrast) unless legend=False. `map`: a Map from ``Model.forward`` (its view,
    class and settings are reused) or a view name (then model= says which model; default: the bundled one).
    options: render's drawing options (colormap, alpha, upsample, style, scale, threshold, alpha_by_value,
    dpi, ...). Returns a PNG Figure."""
    if "format" in options:
        raise TypeError("overlay() draws NAME.png, a PNG; panel() and figure() take format=")
    owner, view_opts = _view_flags(map)
    model = model or owner
    model, margs, names = _model_args(model)
    flags, n2 = to_flags({**view_opts, **options}, "render", "overlay")
    names.update(n2)
    files = _render_image(image, model, margs + flags, names)
    pngs = sorted(k for k in files if k.endswith(".png") and ".panel." not in k and ".layers." not in k
                  and ".heads." not in k)
    if len(pngs) != 1:
        from . import _error
        raise _error("overlay: the render wrote %d maps (%s); name one view (and one class)" % (len(pngs), ", ".join(pngs)))
    return Figure(files[pngs[0]], "png", pngs[0])


def panel(image, views=None, *, model=None, format="png", **options):
    """NAME.panel.* as ``attnmap render --panel`` draws it: photo | map | overlay for each view, a title and
    colour bars in the maps' units. format: "png", "pdf" or "svg". Returns a Figure."""
    model, margs, names = _model_args(model)
    kw = dict(options)
    if views is not None:
        kw["views"] = views if isinstance(views, str) else ",".join(views)
    flags, n2 = to_flags({**kw, "panel": True, "format": format}, "render", "panel")
    names.update(n2)
    files = _render_image(image, model, margs + flags, names)
    want = [k for k in files if ".panel." in k and k.endswith("." + format)]
    return Figure(files[sorted(want)[0]], format, sorted(want)[0])


def figure(images, views, *, model=None, format="png", names=None, **options):
    """``attnmap figure``: rows = images, columns = views (the grammar of render's --views, "photo" a column
    of the photo), column titles, row labels, one colour bar per unit (scale="run" by default: every map
    of a unit on one scale). images: paths, arrays or PIL images (arrays are named image1, image2, ... or
    `names`). options: scale, title, row_labels, column_labels, width_in, dpi, colormap, alpha, style,
    upsample, discard, classes, gradcam_layer, block_numbering, notes. Returns a Figure."""
    model, margs, kwnames = _model_args(model, "figure")
    imgs = images if isinstance(images, (list, tuple)) else [images]
    if format not in ("png", "pdf", "svg"):
        raise ValueError("figure() format= is png, pdf or svg, found %r" % (format,))
    if names is not None:
        names = list(names)
        if len(names) != len(imgs):
            raise ValueError("figure() names= has %d names for %d images" % (len(names), len(imgs)))
        for n in names:
            if not n or "/" in n or "\0" in n or n in (".", ".."):
                raise ValueError("figure() names= are file stems without '/', found %r" % (n,))
    kw = dict(options)
    kw["views"] = views if isinstance(views, str) else ",".join(views)
    flags, n2 = to_flags(kw, "figure", "figure")
    kwnames.update(n2)
    with tempfile.TemporaryDirectory(prefix="attnmap-") as d:
        # each array in a folder of its own: two images may have the same name
        srcs = [_image_file(im, os.path.join(d, "in", str(i)), i, names[i] if names else None)
                for i, im in enumerate(imgs)]
        out = os.path.join(d, "figure." + format)
        rc, _, err = _run(["figure", *srcs, "-o", out, *margs, *flags, "-q"], model, names=kwnames)
        if rc != 0:
            _raise(rc, err, kwnames)
        with open(out, "rb") as f:
            return Figure(f.read(), format, "figure." + format)


class EvalReport:
    """``attnmap eval``'s report: ``rows`` (one dict per view, in the report's order: "view" its name, then
    the summary's values - pointing game, energy in mask, their ratios and margins over the baselines, ...), ``images`` (per-image scores), ``report`` (the whole JSON report, as
    --json writes it), ``text`` (the tables the command prints), ``exit_code`` (0, or 1 when an image
    failed; ``errors`` says which)."""

    def __init__(self, report, text, rc):
        self.report = report
        views = report.get("summary", {}).get("views", {})
        self.rows = [{"view": name, **row} for name, row in views.items()] if isinstance(views, dict) else list(views)
        self.images = report.get("images", [])
        self.errors = report.get("errors", [])
        self.text = text
        self.exit_code = rc

    def __repr__(self):
        return "<attnmap.EvalReport %d views, %d images>" % (len(self.rows), len(self.images))

    def _repr_pretty_(self, p, cycle):
        p.text(self.text)


def evaluate(images, masks, *, model=None, views=None, **options):
    """``attnmap eval``: how well each view's map localises the object against ground-truth masks (pointing
    game, energy in mask, their margins over the centre-prior and brightness baselines with bootstrap
    intervals; with perturb="drop" the deletion curves, with sanity=True the randomisation test).
    images: files or folders; masks: the folder of masks named like the images. Returns an EvalReport."""
    model, margs, names = _model_args(model, "eval")
    imgs = images if isinstance(images, (list, tuple)) else [images]
    kw = dict(options)
    if views is not None:
        kw["views"] = views if isinstance(views, str) else ",".join(views)
    flags, n2 = to_flags(kw, "eval", "evaluate")
    names.update(n2)
    with tempfile.TemporaryDirectory(prefix="attnmap-") as d:
        js = os.path.join(d, "report.json")
        rc, out, err = _run(["eval", *[os.fspath(i) for i in imgs], "--masks", os.fspath(masks), "--json", js,
                             *margs, *flags], model, names=names)
        if rc == 2 or not os.path.exists(js):
            _raise(rc or 2, err, names)
        with open(js, encoding="utf-8") as f:
            report = json.load(f)
    if rc != 0 and not report.get("images"):  # nothing evaluated: an error, not an empty table
        _raise(rc, err, names)
    return EvalReport(report, "\n".join(out), rc)


class RunReport:
    """What ``render_folder`` did: ``exit_code`` (0 all done or skipped, 1 some failed), ``rows`` (the
    manifest's rows, one dict per input: status, outputs, error, map statistics, top-5; a skipped image's
    row is the run's that made it, "carried": true), ``failed`` ([(input, error)]), ``lines`` (what the run
    printed)."""

    def __init__(self, rc, rows, failed, lines):
        self.exit_code = rc
        self.rows = rows
        self.failed = failed
        self.lines = lines

    def __repr__(self):
        return "<attnmap.RunReport exit %d, %d rows, %d failed>" % (self.exit_code, len(self.rows), len(self.failed))


def render_folder(inputs, out, *, model=None, manifest=None, progress=None, quiet=False, **options):
    """``attnmap render`` over files and folders, in process, with the model loaded once: every image's
    files under `out`, a JSON-lines manifest (manifest=), resume (skip_existing=True: images whose files
    exist with the same settings are skipped, a changed input or model redone), shards (shard="2/4"),
    jobs=, and render's every option (views, panel, save_raw, contact_sheet, gallery, ...).
    progress: called as progress(done, total, input, status) after each image (status "done", "skipped" or
    "failed"), from the run's threads with the GIL held.
    Returns a RunReport; raises AttnmapError (exit_code 2) for unusable options or weights, before anything
    is written. A bad image is a failed row, never the end of the run."""
    model, margs, names = _model_args(model)
    ins = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    kw = dict(options)
    if kw.get("shard") is not None and not isinstance(kw["shard"], str):
        kw["shard"] = "%d/%d" % tuple(kw["shard"])
    flags, n2 = to_flags(kw, "render", "render_folder")
    names.update(n2)
    if manifest is not None:
        names["--manifest"] = "manifest"
    if quiet:
        flags.append("-q")
    with tempfile.TemporaryDirectory(prefix="attnmap-") as d:
        # Without manifest= the rows come from a manifest of the run's own, left out of the output folder.
        mpath = os.fspath(manifest) if manifest is not None else os.path.join(d, "manifest.jsonl")
        rc, out, err = _run(["render", *[os.fspath(i) for i in ins], "--out", os.fspath(out), "--manifest", mpath,
                             *margs, *flags], model, progress=progress, quiet=quiet, names=names)
        if rc == 2:
            _raise(rc, err, names)
        rows = []
        if os.path.exists(mpath):
            with open(mpath, encoding="utf-8") as f:
                rows = [r for r in (json.loads(l) for l in f if l.strip()) if "input" in r]
    failed = [(r.get("input"), r.get("error")) for r in rows if r.get("status") == "failed"]
    return RunReport(rc, rows, failed, out + err)


def cli(args):
    """The command line in process: ``attnmap.cli(["render", "cat.jpg", "--panel"])`` is ``attnmap render
    cat.jpg --panel``; its output goes to sys.stdout / sys.stderr. Returns the exit status."""
    if isinstance(args, (str, bytes)):
        raise TypeError("cli() takes the arguments as a list, e.g. cli(['inspect', 'weights.safetensors'])")
    rc, _, _ = _run(list(args), None, None, quiet=False)
    return rc
