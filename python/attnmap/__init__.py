"""attnmap in Python: where a Vision Transformer looks, from a checkpoint file or a live ``state_dict()``.

The same engine as the ``attnmap`` command (one C++ library): the same layouts, tensor accounting, views,
figures and records, and the same bits — ``Model.forward`` returns exactly the maps ``attnmap render
--save-raw`` writes for the same image and settings. Options are the command line's, as keywords
(``upsample="nearest"`` is ``--upsample nearest``; docs/cli.md), checked and worded by the same code.

    import attnmap
    m = attnmap.from_state_dict({k: v.numpy() for k, v in model.state_dict().items()})
    r = m.forward("cat.jpg", views="L-1/mean,rollout")
    r["rollout"].array          # (grid_h, grid_w) float32
    attnmap.overlay("cat.jpg", r["rollout"])   # the PNG render draws, shown by a notebook

Errors raise ``attnmap.AttnmapError`` with the command line's message (keywords for flags) and
``exit_code`` (2: usage or unusable weights; 1: some input failed). docs/python.md has the whole API.
"""

import os
import tempfile
import weakref

import numpy as np

from . import _attnmap
from ._options import FORWARD_FLAGS, MODEL_KEYWORDS, MODEL_NAMES, reword, to_flags

AttnmapError = _attnmap.AttnmapError
__version__ = _attnmap.__version__

__all__ = [
    "AttnmapError", "Model", "Result", "Map", "load", "from_state_dict", "overlay", "panel", "figure",
    "evaluate", "render_folder", "cli", "Figure", "EvalReport", "RunReport", "default_weights",
]


def _error(message, exit_code=2):
    e = AttnmapError(message)
    e.exit_code = exit_code
    return e


def _reraise(e, names):
    """An AttnmapError from the engine, its flags reworded as the caller's keywords."""
    err = _error(reword(str(e), names), getattr(e, "exit_code", 2))
    raise err from None


def default_weights():
    """The bundled default weights (a small ViT trained on garment composites, not an ImageNet model)."""
    here = os.path.join(os.path.dirname(__file__), "default.json")
    return here if os.path.exists(here) else _attnmap.default_weights_path()


# ---- images --------------------------------------------------------------------------------------------

def _image_arg(image):
    """A path (str) or a C-contiguous uint8 (H, W, 3) array, from a path, an array or a PIL image."""
    if isinstance(image, (str, os.PathLike)):
        return os.fspath(image)
    if hasattr(image, "convert") and hasattr(image, "size") and hasattr(image, "mode"):  # PIL.Image.Image
        image = np.asarray(image.convert("RGB"))
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise _error("an image must be a path, a PIL image or a uint8 (H, W, 3) RGB array, found %s %s"
                     % (arr.dtype, arr.shape), 1)
    return np.ascontiguousarray(arr)


# ---- the model -----------------------------------------------------------------------------------------

def _model_flags(kwargs, owner):
    """The model's keywords as flags; `labels` may be a list of names (written to a file the model keeps)."""
    unknown = sorted(set(kwargs) - set(MODEL_KEYWORDS) - {"quiet"})
    if unknown:
        raise TypeError("unexpected keyword argument(s): %s (a model takes %s)" % (", ".join(unknown),
                                                                                   ", ".join(MODEL_KEYWORDS)))
    kw = {k: v for k, v in kwargs.items() if k != "quiet"}
    labels = kw.get("labels")
    if isinstance(labels, (list, tuple)):
        f = tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="attnmap-labels-", delete=False,
                                        encoding="utf-8")
        f.write("".join(str(n) + "\n" for n in labels))
        f.close()
        weakref.finalize(owner, os.unlink, f.name)
        kw["labels"] = f.name
    if isinstance(kw.get("size"), int):
        kw["size"] = str(kw["size"])
    flags, names = to_flags(kw)
    return flags, {**MODEL_NAMES, **names}


class Model:
    """A ViT as attnmap reads it: made by ``attnmap.load`` or ``attnmap.from_state_dict``.

    ``info`` (dict: layout, depth, num_heads, dim, patch, grid (h, w), image_size (w, h), tokens, ...),
    ``tensors`` ([(name, shape, reason)], reason "" when the forward pass reads the tensor), ``describe()``
    (``attnmap inspect``'s report), ``forward`` / ``views`` / ``explain`` (the maps), ``name`` (the file, or
    the state dict's name: what records and messages call the weights).
    """

    def __init__(self, engine, names, quiet):
        self._m = engine
        self._names = names
        if not quiet:
            import sys
            for n in engine.notices:
                sys.stderr.write("attnmap: note: %s: %s\n" % (engine.name, reword(n, names)))

    name = property(lambda self: self._m.name)
    info = property(lambda self: self._m.info)
    tensors = property(lambda self: self._m.tensors)
    notices = property(lambda self: self._m.notices)

    def describe(self):
        """What ``attnmap inspect`` prints for these weights: family, sizes, settings with their sources,
        and every tensor, read or not (with the reason)."""
        return self._m.describe()

    def __repr__(self):
        i = self.info
        return "<attnmap.Model %s: %s, %d blocks x %d heads, %dx%d input (%dx%d patches of %d px)>" % (
            self.name, i["layout"], i["depth"], i["num_heads"], i["image_size"][0], i["image_size"][1],
            i["grid"][1], i["grid"][0], i["patch"])

    def forward(self, images, *, views=None, attentions=False, **options):
        """The maps of one image (a Result) or of a list of images (a list of Results).

        images: a path, a uint8 (H, W, 3) RGB array or a PIL image, or a list of them.
        views: ``attnmap render --views``'s grammar, e.g. "L-1/mean", "L1/h3,rollout,chefer",
            "L5/h3:q=r7c3" (a query patch's row), "L2/mean:received"; without views the single view of
            layer= / head= / rollout= / explain= (default: the model's, else the last block's class-token
            row, heads averaged), as render.
        attentions: also return every block's attention probabilities, ``Result.attentions`` (L, H, T, T)
            float32 (T = prefix tokens + patches), from a second forward pass.
        options: render's options as keywords: layer, head, rollout, discard, query, column, received,
            classes ("top1", "top3", an index or a class name), explain, gradcam_layer, resize
            ("squash" | "crop"), exif, max_pixels.
        The GIL is released while the model runs; several threads may call forward at once.
        Raises AttnmapError with exit_code 2 for a bad option or view, and with exit_code 1 (the command
        line's status for a failed input) naming the image for one that cannot be read or used.
        """
        single = not isinstance(images, (list, tuple))
        items = [_image_arg(x) for x in ([images] if single else images)]
        call = dict(options)
        if views is not None:
            call["views"] = views if isinstance(views, str) else ",".join(views)
        flags, names = to_flags(call, "render", "forward", FORWARD_FLAGS)
        try:
            raw = self._m.forward(items, flags, attentions)
        except AttnmapError as e:
            _reraise(e, {**self._names, **names})
        results = [Result(self, img, call, r) for img, r in zip(items, raw)]
        return results[0] if single else results

    def views(self, image, views, **options):
        """``forward(image, views=views, **options).maps``: a list of Map."""
        return self.forward(image, views=views, **options).maps

    def explain(self, image, method="chefer", classes="top1", **options):
        """Class-specific maps (``--explain``): method "chefer" (Chefer et al. 2021 relevance), "gradcam" or
        "attn-grad", for classes ("top1", "topK", an index or a class name). A list of Map, one per class."""
        return self.forward(image, explain=method, classes=classes, **options).maps


def load(path=None, **options):
    """A model from a weights file: safetensors, a torch.save checkpoint (.pth / .pt), attnmap JSON, a
    Hugging Face folder or a sharded index — as ``attnmap render -w PATH`` reads it (config.json beside it
    included). path None: the bundled default weights.

    options: key (the state dict inside a checkpoint), heads, mean, std (3 numbers each), act, pool,
    size (S or (W, H): position embeddings resampled), pos_interp, labels (a file, or a list of class
    names), precision ("fp32" | "bf16"), quiet (True: the loader's notes are not printed; default True).
    Raises AttnmapError (exit_code 2) naming the file and tensor for weights it cannot use.
    """
    path = default_weights() if path is None else os.fspath(path)
    holder = _Holder()
    flags, names = _model_flags(options, holder)
    try:
        engine = _attnmap.load(path, flags)
    except AttnmapError as e:
        _reraise(e, names)
    m = Model(engine, names, options.get("quiet", True))
    m._holder = holder
    return m


class _Holder:
    """Owns what a model's flags point at (a labels file written from a list)."""


def _as_array(key, value):
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu()
        if str(getattr(value, "dtype", "")) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    try:
        arr = np.asarray(value)
    except Exception as e:  # noqa: BLE001 - said with the tensor's name
        raise _error("tensor %s cannot be read as an array: %s" % (key, e)) from None
    # np.asarray(order="C") keeps a 0-d tensor 0-d (np.ascontiguousarray would make it (1,)).
    if arr.dtype.kind == "f" and arr.dtype.itemsize in (2, 8):
        return np.asarray(arr, order="C")  # converted (and range-checked) by the engine
    if arr.dtype.kind == "f":
        return np.asarray(arr, dtype=np.float32, order="C")
    return np.asarray(arr, order="C")


def from_state_dict(state_dict, *, config=None, layout=None, name="state_dict", **options):
    """A model from tensors in memory: ``{name: array}`` as ``model.state_dict()`` names them.

    state_dict: a mapping of NumPy arrays or anything with ``__array__`` (CPU torch tensors; bfloat16 is
        widened to float32). Float tensors are copied into the model as float32 (a later change to the live
        model does not change this one); integer and bool tensors are the buffers a file's reader skips
        (position ids; BEiT's index buffers are checked).
    config: the attnmap config object (weights/README.md: num_heads, eps, image_size, mean, std,
        labels, ...): what a file would say; heads= etc. override it, as on the command line.
    layout: the layout you expect ("timm", "torchvision", "hf", "open_clip", "dinov2", ...): refused when
        the tensors are another.
    name: what records and messages call these weights. Runs that write files record ``weights_sha256`` as
        the SHA-256 of the tensors (per tensor in name order: name, newline, shape as PyTorch prints it,
        newline, float32 little-endian values), so --skip-existing resumes with the same tensors only.
    options: as load().
    The same layout detection and tensor accounting as a file: a tensor the forward pass would not read
    and that is not on the layout's list of tensors that cannot change the maps stops the build with
    AttnmapError (exit_code 2) naming it.
    """
    import json
    holder = _Holder()
    flags, names = _model_flags(options, holder)
    items = [(str(k), _as_array(k, v)) for k, v in state_dict.items()]
    try:
        engine = _attnmap.from_state_dict(items, json.dumps(config or {}), name, flags)
    except AttnmapError as e:
        _reraise(e, names)
    if layout is not None and engine.info["layout"] != layout:
        raise _error("%s: the tensors are the %s layout, not %s" % (name, engine.info["layout"], layout))
    m = Model(engine, names, options.get("quiet", True))
    m._holder = holder
    return m


# ---- results -------------------------------------------------------------------------------------------

class Map:
    """One view's map of one image (and, for a class-specific view, one class).

    array: (grid_h, grid_w) float32, as computed (``np.asarray(map)`` gives it); view: the canonical name
    ("L1/h3", "rollout", "chefer"); tag: its file-name form; label: the words figures use ("block 1, head
    3"); units ("attention probability", "rollout mass", ...); kind; block; head; class_index, class_name,
    class_probability (class-specific views); marked_patch (the query patch a figure outlines).
    A notebook shows it as the overlay ``attnmap render`` draws (``overlay()``).
    """

    __slots__ = ("array", "view", "tag", "label", "units", "kind", "block", "head", "class_index", "class_name",
                 "class_probability", "marked_patch", "_result")

    def __init__(self, d, result):
        for k in Map.__slots__[:-1]:
            setattr(self, k, d[k])
        self._result = result

    shape = property(lambda self: self.array.shape)

    def __array__(self, dtype=None):
        return self.array if dtype is None else self.array.astype(dtype)

    def __repr__(self):
        cls = "" if self.class_name is None else ", class %s" % self.class_name
        return "<attnmap.Map %s (%s%s): %dx%d %s, max %.4g>" % (
            self.view, self.label, cls, self.shape[0], self.shape[1], self.units, float(self.array.max()))

    def overlay(self, **options):
        """This map over its photo, as ``attnmap render`` draws NAME.png (a Figure)."""
        return overlay(self._result.image, self, **options)

    def _repr_png_(self):
        return self.overlay().data


class Result:
    """The maps of one image: ``maps`` (list of Map, in view order; ``result[view name]`` picks one),
    ``probs`` ((C,) float64 class probabilities, None without a classifier head), ``top5``
    ([(label, probability)]), ``attentions`` ((L, H, T, T) float32 with attentions=True, else None),
    ``box`` (x, y, w, h: the model input's box on the photo), ``notes``, ``input_sha256``."""

    def __init__(self, model, image, call, raw):
        self.model = model
        self.image = image
        self.options = call
        self.maps = [Map(d, self) for d in raw["maps"]]
        self.probs = raw["probs"]
        self.top5 = raw["top5"]
        self.attentions = raw["attentions"]
        self.box = raw["box"]
        self.notes = raw["notes"]
        self.input_sha256 = raw["input_sha256"]
        self.input = raw["input"]

    def __getitem__(self, key):
        if isinstance(key, int):
            return self.maps[key]
        if isinstance(key, tuple):
            view, cls = key
            for m in self.maps:
                if view in (m.view, m.tag) and cls in (m.class_index, m.class_name):
                    return m
            raise KeyError(key)
        for m in self.maps:
            if key in (m.view, m.tag):
                return m
        raise KeyError("%r: this result's views are %s" % (key, ", ".join(m.view for m in self.maps)))

    def __iter__(self):
        return iter(self.maps)

    def __len__(self):
        return len(self.maps)

    def __repr__(self):
        top = "" if not self.top5 else ", top-1 %s %.1f%%" % (self.top5[0][0], 100 * self.top5[0][1])
        return "<attnmap.Result %s: %s%s>" % (self.input, ", ".join(m.view for m in self.maps), top)

    def panel(self, format="png", **options):
        """The image's panel (photo | map | overlay per view, colour bars), as ``render --panel``."""
        return panel(self.image, model=self.model, format=format, **{**self.options, **options})


from ._figures import (EvalReport, Figure, RunReport, cli, evaluate, figure, overlay, panel,  # noqa: E402
                       render_folder)
