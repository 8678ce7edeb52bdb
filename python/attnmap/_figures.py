"""Figures, evaluation and folders: the engine's overlay, panel, figure and eval results in memory.

overlay() / panel() / figure() / evaluate() call the engine (python/src/figures_binding.hpp) with the model and
the settings as given: the bytes are the files the command line writes (the same encoder, the same settings
record), with no temporary folder and no captured output. render_folder() runs the batch engine with hooks
(python/src/batch_binding.hpp): its rows, progress and lines come to Python callables as the run makes them.
cli() alone runs the command line, its output captured line by line.
"""

import json
import os
import sys
import tempfile

from . import _attnmap
from ._options import to_given

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


def _run(args, quiet=True):
    """Runs the command line `args` (without the program name). Returns (exit status, stdout lines, stderr
    lines). quiet: nothing is printed (the lines are returned); else they go to sys.stdout / sys.stderr as
    they come."""
    out, err = _Tee(None if quiet else "stdout"), _Tee(None if quiet else "stderr")
    rc = _attnmap.run([str(a) for a in args], out.write, err.write)
    return rc, out.lines(), err.lines()


class Figure:
    """A figure attnmap drew: ``data`` (the file's bytes), ``format`` ("png", "pdf" or "svg"), ``record``
    (the settings record the file carries, a dict; {} when none), ``notes`` (what the command line prints
    about it - e.g. how much of the maps lies above a colour bar's top -, as ``Result.notes``: a list of str,
    a warning starting "warning: "; figure() fills it, [] for overlay() and panel()), ``save(path)``. A
    notebook shows PNG and SVG figures (``_repr_png_`` / ``_repr_svg_``)."""

    def __init__(self, data, fmt, name="", record="", notes=None):
        self.data = data
        self.format = fmt
        self.name = name
        self._record = record  # the engine's record (JSON text) of the figure
        self.notes = list(notes or [])

    @property
    def record(self):
        try:
            return json.loads(self._record) if self._record else {}
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


def _the_model(model):
    from . import Model, load
    if model is None:
        return load(quiet=True)
    if not isinstance(model, Model):  # a path or a name: loaded once by the caller, not on every call
        hint = " m = attnmap.load(%r), then model=m" % (os.fspath(model),) if isinstance(model, (str, os.PathLike)) else ""
        raise TypeError("model= takes an attnmap.Model (attnmap.load or attnmap.from_state_dict), found %s;%s"
                        % (type(model).__name__, hint or " load one first"))
    return model


def _render_image(image, model, given, name=None):
    """render's files of one image in memory (the engine's image outputs): a list of dicts with kind, view,
    class, format, name, data (bytes) and record (JSON text)."""
    from . import _error, _image_arg, _reraise
    if isinstance(image, (str, bytes, os.PathLike)) and not os.path.isfile(image):
        p = os.fsdecode(image)  # a failed input (exit_code 1), as forward() says it
        raise _error("%s: %s" % (p, "not a regular file" if os.path.exists(p) else "cannot open: No such file or directory"), 1)
    image = _image_arg(image)
    if isinstance(image, str):
        source, base = image, os.path.splitext(os.path.basename(image))[0]
    else:  # an array: named as the command line would name its PNG
        base = name or "image"
        source = base + ".png"
    try:
        return model._m.render_outputs(image, given, source, base)
    except AttnmapError as e:
        _reraise(e)


def _view_flags(target):
    """The --views / --class of a Map (or a view name)."""
    from . import Map
    if isinstance(target, Map):
        r = target._result
        if r._call_texts:  # the render would draw the model's own texts, not the call's
            from . import _error
            raise _error("overlay(): this map explains a text given to forward(); the figures draw a model's own "
                         "texts: attnmap.load(path, text=[...]), then overlay(image, view, model=that)")
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
    model = _the_model(model or owner)
    files = _render_image(image, model, to_given({**view_opts, **options}, "render", "overlay"))
    maps = [f for f in files if f["kind"] == "map"]
    if len(maps) != 1:
        from . import _error
        raise _error("overlay: the render drew %d maps (%s); name one view (and one class)"
                     % (len(maps), ", ".join(f["name"] for f in maps)))
    return Figure(maps[0]["data"], "png", maps[0]["name"], maps[0]["record"])


def panel(image, views=None, *, model=None, format="png", **options):
    """NAME.panel.* as ``attnmap render --panel`` draws it: photo | map | overlay for each view, a title and
    colour bars in the maps' units. format: "png", "pdf" or "svg". Returns a Figure."""
    model = _the_model(model)
    kw = dict(options)
    if views is not None:
        kw["views"] = views if isinstance(views, str) else ",".join(views)
    files = _render_image(image, model, to_given({**kw, "panel": True, "format": format}, "render", "panel"))
    want = sorted((f for f in files if f["kind"] == "figure" and ".panel." in f["name"] and f["format"] == format),
                  key=lambda f: f["name"])
    return Figure(want[0]["data"], format, want[0]["name"], want[0]["record"])


def figure(images, views, *, model=None, format="png", names=None, **options):
    """``attnmap figure``: rows = images, columns = views (the grammar of render's --views, "photo" a column
    of the photo), column titles, row labels, one colour bar per unit (scale="run" by default: every map
    of a unit on one scale). images: paths, arrays or PIL images (arrays are named image1, image2, ... or
    `names`). options: scale, title, row_labels, column_labels, width_in, dpi, colormap, alpha, style,
    upsample, discard, classes, gradcam_layer, block_numbering, notes. Returns a Figure."""
    from . import _image_arg, _reraise
    model = _the_model(model)
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
    given = to_given(kw, "figure", "figure")
    sources = [_image_arg(im) for im in imgs]
    labels = [s if isinstance(s, str) else (names[i] if names else "image%d" % (i + 1)) + ".png"
              for i, s in enumerate(sources)]
    try:
        r = model._m.figure(sources, labels, given, format)
    except AttnmapError as e:
        _reraise(e)
    return Figure(r["data"], format, "figure." + format, r["record"], r["notes"])


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
    from . import _error, _reraise
    model = _the_model(model)
    imgs = images if isinstance(images, (list, tuple)) else [images]
    kw = dict(options)
    if views is not None:
        kw["views"] = views if isinstance(views, str) else ",".join(views)
    given = to_given(kw, "eval", "evaluate")
    given += [("inputs", [os.fspath(i) for i in imgs]), ("masks", [os.fspath(masks)])]
    try:
        r = model._m.evaluate(given)
    except AttnmapError as e:
        _reraise(e)
    report = json.loads(r["report"])
    if r["status"] != 0 and not report.get("images"):  # nothing evaluated: an error, not an empty table
        raise _error("\n".join(r["errors"]) or "nothing was evaluated", r["status"])
    text = r["text"]
    return EvalReport(report, text[:-1] if text.endswith("\n") else text, r["status"])


class RunReport:
    """What ``render_folder`` did: ``exit_code`` (0 all done or skipped, 1 some failed), ``rows`` (the
    manifest's rows, one dict per input: status, outputs, error, map statistics, top-5; a skipped image's
    row is the run's that made it, "carried": true; the engine's rows, in the manifest's order, also without
    manifest=), ``failed`` ([(input, error)]), ``lines`` (what the run printed: standard output's lines, then
    standard error's)."""

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
    from . import _reraise
    model = _the_model(model)
    ins = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    kw = dict(options)
    if kw.get("shard") is not None and not isinstance(kw["shard"], str):
        kw["shard"] = "%d/%d" % tuple(kw["shard"])
    given = to_given(kw, "render", "render_folder")
    given += [("inputs", [os.fspath(i) for i in ins]), ("out", [os.fspath(out)])]
    if manifest is not None:
        given.append(("manifest", [os.fspath(manifest)]))
    if quiet:
        given.append(("quiet", []))
    rows, lines = {}, {"out": [], "err": []}

    def on_line(stream, text):  # the run's lines, printed as the command line prints them unless quiet
        if stream != "bar":
            lines[stream].append(text)
        if quiet:
            return
        f = sys.stdout if stream == "out" else sys.stderr
        try:
            f.write("\r\033[K" + text if stream == "bar" else text + "\n")
            if stream == "bar":
                f.flush()
        except (OSError, ValueError):  # a closed stream: the line is lost, the run goes on
            pass

    def on_row(index, text):  # each input's manifest row, by its place in the manifest
        rows[index] = json.loads(text)
    try:
        rc = model._m.render_folder(given, progress, on_line, on_row, not quiet and _isatty(sys.stderr))
    except AttnmapError as e:
        _reraise(e)
    rows = [rows[i] for i in sorted(rows)]
    failed = [(r.get("input"), r.get("error")) for r in rows if r.get("status") == "failed"]
    return RunReport(rc, rows, failed, lines["out"] + lines["err"])


def _isatty(stream):
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def cli(args):
    """The command line in process: ``attnmap.cli(["render", "cat.jpg", "--panel"])`` is ``attnmap render
    cat.jpg --panel``; its output goes to sys.stdout / sys.stderr. Returns the exit status."""
    if isinstance(args, (str, bytes)):
        raise TypeError("cli() takes the arguments as a list, e.g. cli(['inspect', 'weights.safetensors'])")
    rc, _, _ = _run(list(args), quiet=False)
    return rc
