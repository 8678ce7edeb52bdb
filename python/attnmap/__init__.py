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

try:
    from . import _attnmap
except ImportError as _e:  # the source folder python/attnmap, or a build without the extension
    raise ImportError("attnmap's compiled part (_attnmap) is not beside %s: import the built package "
                      "(PYTHONPATH=build/python, a build with -DATTNMAP_PYTHON=ON) or install it with "
                      "tools/install_python.sh (%s)" % (__file__, _e)) from None
from ._options import forward_keywords, model_keywords, text_keywords, to_given

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


def _reraise(e):
    """An AttnmapError from the engine raised again from here (its settings are spelled as keywords by the
    engine)."""
    err = _error(str(e), getattr(e, "exit_code", 2))
    raise err from None


def default_weights():
    """The bundled default weights (a small ViT trained on garment composites, not an ImageNet model)."""
    here = os.path.join(os.path.dirname(__file__), "default.json")
    return here if os.path.exists(here) else _attnmap.default_weights_path()


# ---- images --------------------------------------------------------------------------------------------

def _pil_to_array(image):
    """A PIL image as uint8 RGB, converted as the command line converts a file: 16-bit grey (modes I;16*, and
    I holding 0..65535 as PIL opens a 16-bit PNG) scaled to 8 bits by value >> 8 (docs/formats.md), not
    clipped as PIL's convert("RGB") does; float images refused; alpha ignored."""
    mode = image.mode
    if mode == "F":
        raise _error("a PIL image of mode F (32-bit float) has no 8-bit reading attnmap can choose: convert it "
                     "to 8-bit RGB first", 1)
    if mode == "I" or mode.startswith("I;16"):
        a = np.asarray(image)
        if a.size and (a.min() < 0 or a.max() > 65535):
            raise _error("a PIL image of mode %s holds values outside 0..65535 (%d..%d): convert it to 8-bit RGB "
                         "first" % (mode, a.min(), a.max()), 1)
        g = (a.astype(np.uint32) >> 8).astype(np.uint8)
        return np.ascontiguousarray(np.stack([g, g, g], axis=-1))
    return np.asarray(image.convert("RGB"))


def _image_arg(image):
    """A path (str) or a C-contiguous uint8 (H, W, 3) array, from a path, an array or a PIL image."""
    if isinstance(image, bytes):
        image = os.fsdecode(image)
    if isinstance(image, (str, os.PathLike)):
        return os.fspath(image)
    if hasattr(image, "convert") and hasattr(image, "size") and hasattr(image, "mode"):  # PIL.Image.Image
        image = _pil_to_array(image)
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise _error("an image must be a path, a PIL image or a uint8 (H, W, 3) RGB array, found %s %s"
                     % (arr.dtype, arr.shape), 1)
    return np.ascontiguousarray(arr)


# ---- the model -----------------------------------------------------------------------------------------

def _model_settings(kwargs, owner):
    """The model's keywords as its settings as given, [(id, [values])]; `labels` may be a list of names
    (written to a file the model keeps)."""
    unknown = sorted(set(kwargs) - set(model_keywords()) - {"quiet"})
    if unknown:
        raise TypeError("unexpected keyword argument(s): %s (a model takes %s)" % (", ".join(unknown),
                                                                                   ", ".join(model_keywords())))
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
    return to_given(kw)


def _shape_tuple(text):
    """"(768, 3, 16, 16)" -> (768, 3, 16, 16); "()" -> (); a non-float tensor's "(I64)" -> "I64" (its dtype: the
    readers keep no shape of the tensors they skip)."""
    inner = text.strip().strip("()").strip()
    try:
        return tuple(int(x) for x in inner.split(",") if x.strip())
    except ValueError:
        return inner


class Model:
    """A ViT as attnmap reads it: made by ``attnmap.load`` or ``attnmap.from_state_dict``.

    ``info`` (dict: layout, depth, num_heads, dim, patch, grid (h, w), image_size (w, h), tokens, ...: the model
    as its runs use it, after size= and labels=), ``tensors`` ([(name, shape tuple, reason)], reason "" when
    the forward pass reads the tensor; shape the dtype word such as "I64" for an integer buffer), ``describe()`` (``attnmap inspect``'s report of the weights as read,
    before size=), ``forward`` / ``views`` / ``explain`` (the maps), ``name`` (the file, or
    the state dict's name: what records and messages call the weights).
    """

    def __init__(self, engine, quiet):
        self._m = engine
        try:
            info = engine.info  # the model prepared as its runs use it: size, labels, precision checked now
        except AttnmapError as e:
            _reraise(e)
        self.notices = list(engine.notices)
        if info["source"].get("labels", "").startswith("assumed ImageNet-1k"):
            self.notices.append("a 1000-class head without class names: its classes are assumed to be ImageNet-1k's "
                                "(0 tench ... 999 toilet tissue); give labels= if they are not")
        if not quiet:
            import sys
            for n in self.notices:
                sys.stderr.write("attnmap: note: %s: %s\n" % (engine.name, n))

    name = property(lambda self: self._m.name)
    tensors = property(lambda self: [(n, _shape_tuple(sh), why) for n, sh, why in self._m.tensors])

    @property
    def info(self):
        return self._m.info

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
            ("squash" | "crop"), exif, max_pixels; a CLIP's texts for this call: text (a text or a list), texts
            (a file), prompt, vocab, truncate_text, as load() takes them (over load()'s; docs/python.md).
        The GIL is released while the model runs; several threads may call forward at once.
        Raises AttnmapError with exit_code 2 for a bad option or view, and with exit_code 1 (the command
        line's status for a failed input) naming the image for one that cannot be read or used.
        """
        single = not isinstance(images, (list, tuple))
        items = []
        for i, x in enumerate([images] if single else images):
            try:
                items.append(_image_arg(x))
            except AttnmapError as e:
                raise (e if single else _error("images[%d]: %s" % (i, e), 1)) from None
        call = dict(options)
        text_kw = {k: call.pop(k) for k in _TEXT_KEYWORDS if k in call}
        if text_kw.get("text") is not None or text_kw.get("texts") is not None:  # load()'s vocab=, prompt=, ...
            text_kw = dict(getattr(self, "_text_defaults", {}), **text_kw)
        text_given = to_given(_text_values(text_kw)) if any(v is not None for v in text_kw.values()) else []
        if isinstance(call.get("classes"), (list, tuple)):
            raise TypeError("classes= takes one class (an index or a name) or 'topK', not a list")
        if views is not None:
            call["views"] = views if isinstance(views, str) else ",".join(views)
        given = to_given(call, "render", "forward", forward_keywords())
        try:
            raw = self._m.forward(items, given, attentions, text_given)
        except AttnmapError as e:
            _reraise(e)
        results = [Result(self, img, call, r, bool(text_given)) for img, r in zip(items, raw)]
        return results[0] if single else results

    def encode_text(self, texts, *, prompt=None, vocab=None, truncate_text=False):
        """CLIP's or SigLIP's text features: (N, E) float32, each row L2-normalised - the family's ``encode_text``
        (OpenAI ``CLIP.encode_text``, open_clip's, HF ``get_text_features``) divided by its norm, tokenized by the
        family's rules (CLIP's BPE; SigLIP's SentencePiece spiece.model; docs/text.md).

        texts: a str or a list of str (duplicates allowed: one row each). prompt: a template ("a photo of a
        {}.") or a list of them: each text's features over the templates, each normalised, averaged and
        normalised again (CLIP's prompt ensemble). vocab: a vocabulary file or folder (CLIP's BPE files; SigLIP's
        spiece.model or a folder holding it; default: the weights' folder's tokenizer files, else for CLIP the
        bundled OpenAI vocabulary). truncate_text: cut a text over the text tower's context (CLIP: 77 tokens,
        SigLIP: 64) as open_clip does (default: refused).
        The first text call reads the weights file again for its text tower (kept from then on; docs/python.md).
        Raises AttnmapError (exit_code 2): a model without a text tower, a text over the context, ...
        """
        single = isinstance(texts, (str, os.PathLike))
        items = [texts] if single else list(texts)
        for t in items:
            if not isinstance(t, str):
                raise TypeError("encode_text() takes a str or a list of str, found %s" % type(t).__name__)
        defaults = getattr(self, "_text_defaults", {})  # load()'s vocab=, prompt=, truncate_text= without texts
        prompt = defaults.get("prompt") if prompt is None else prompt
        vocab = defaults.get("vocab") if vocab is None else vocab
        truncate_text = truncate_text or bool(defaults.get("truncate_text", False))
        prompts = [] if prompt is None else [prompt] if isinstance(prompt, str) else list(prompt)
        try:
            return self._m.encode_text(items, [str(p) for p in prompts],
                                       "" if vocab is None else os.fspath(vocab), bool(truncate_text))
        except AttnmapError as e:
            _reraise(e)

    def encode_image(self, images, **options):
        """CLIP's or SigLIP's image features, L2-normalised (the family's ``encode_image`` / HF
        ``get_image_features`` divided by its norm): CLIP's projected class token, SigLIP's attention-pool head
        output (no projection). (E,) float32 for one image, (B, E) for a list. images as forward(); options: resize
        ("squash" | "crop"), exif, max_pixels, as forward()."""
        single = not isinstance(images, (list, tuple))
        items = [_image_arg(x) for x in ([images] if single else images)]
        given = to_given(options, "render", "encode_image", frozenset(["resize", "exif", "max_pixels"]))
        try:
            out = self._m.encode_image(items, given)
        except AttnmapError as e:
            _reraise(e)
        return out[0] if single else out

    @property
    def logit_scale(self):
        """CLIP's logit scale, ``exp(logit_scale)`` (100 for OpenAI's trained models): logits_per_image =
        logit_scale * encode_image(img) @ encode_text(texts).T. Reads the text tower (as encode_text)."""
        try:
            return self._m.logit_scale
        except AttnmapError as e:
            _reraise(e)

    @property
    def logit_bias(self):
        """SigLIP's logit bias, added to every logit (0.0 for CLIP): logits_per_image = logit_scale *
        encode_image(img) @ encode_text(texts).T + logit_bias, and a SigLIP's probabilities are
        torch.sigmoid of each (Result.score_rule "sigmoid"). Reads the text tower (as encode_text)."""
        try:
            return self._m.logit_bias
        except AttnmapError as e:
            _reraise(e)

    def views(self, image, views, **options):
        """``forward(image, views=views, **options).maps``: a list of Map."""
        return self.forward(image, views=views, **options).maps

    def explain(self, image, method="chefer", classes="top1", **options):
        """Class-specific maps (``--explain``): method "chefer" (Chefer et al. 2021 relevance), "gradcam" or
        "attn-grad", for classes ("top1", "topK", an index or a class name). A list of Map, one per class."""
        return self.forward(image, explain=method, classes=classes, **options).maps


# The keywords that give a CLIP's texts (docs/text.md): load()'s, and forward()'s for one call.
_TEXT_KEYWORDS = text_keywords()  # the engine's registry (its "Text" topic)


def _text_values(kw):
    """forward()'s text keywords as load() takes them (a path as its str)."""
    return {k: (os.fspath(v) if isinstance(v, os.PathLike) else v) for k, v in kw.items()}


def load(path=None, **options):
    """A model from a weights file: safetensors, a torch.save checkpoint (.pth / .pt), attnmap JSON, a
    Hugging Face folder or a sharded index — as ``attnmap render -w PATH`` reads it (config.json beside it
    included). path None: the bundled default weights.

    options: key (the state dict inside a checkpoint), heads, mean, std (3 numbers each), act, pool,
    size (S or (W, H): position embeddings resampled), pos_interp, labels (a file, or a list of class
    names), precision ("fp32" | "bf16"), text (a CLIP's classes: a text or a list of texts, one per item;
    texts= a file, prompt= a template or a list, vocab=, truncate_text=: docs/text.md), quiet (True: the loader's notes - a setting inferred, a tensor
    absent and taken as zero, ImageNet-1k class names assumed - are not printed to sys.stderr; they are in
    ``Model.notices`` either way; default False, as the command line).
    Raises AttnmapError (exit_code 2) naming the file and tensor for weights it cannot use.
    """
    path = default_weights() if path is None else os.fspath(path)
    holder = _Holder()
    defaults = _text_defaults(options)
    given = _model_settings(options, holder)
    try:
        engine = _attnmap.load(path, given, bool(options.get("quiet", False)))
    except AttnmapError as e:
        _reraise(e)
    m = Model(engine, options.get("quiet", False))
    m._holder = holder
    m._text_defaults = defaults
    return m


def _text_defaults(options):
    """load()'s vocab=, prompt=, truncate_text= given without texts (the command line refuses them there: they
    would do nothing): taken out of `options` and kept for the model's later text calls (forward(text=),
    encode_text), where a call's own keyword wins. prompt= with labels= stays: the names fill it (docs/text.md)."""
    if options.get("text") is not None or options.get("texts") is not None:
        return {}
    keys = [k for k in _TEXT_KEYWORDS if k not in ("text", "texts")]  # how the texts are read, not the texts
    if options.get("labels") is not None:
        keys.remove("prompt")
    return {k: options.pop(k) for k in keys if options.get(k) is not None}


class _Holder:
    """Owns what a model's settings point at (a labels file written from a list)."""


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


# The keys of the attnmap config object the loader reads (weights/README.md "config"; timm's Eva settings).
_CONFIG_KEYS = frozenset(_attnmap.config_keys())  # the engine's list (checkpoint/weights.hpp config_keys)


def _json_value(v):
    """NumPy / torch scalars and arrays in a config, as JSON values."""
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError("config value %r is not a JSON value" % (v,))


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
    if not hasattr(state_dict, "items"):
        hint = " (pass model.state_dict())" if hasattr(state_dict, "state_dict") else ""
        raise TypeError("from_state_dict() takes a mapping of tensor names to arrays, found %s%s"
                        % (type(state_dict).__name__, hint))
    config = dict(config or {})
    unknown = sorted(set(config) - _CONFIG_KEYS)
    if unknown:
        raise _error("%s: config has %s, which attnmap does not read (a misspelt setting would be ignored and "
                     "change the maps); it reads %s" % (name, ", ".join(repr(k) for k in unknown),
                                                       ", ".join(sorted(_CONFIG_KEYS))))
    holder = _Holder()
    given = _model_settings(options, holder)
    items = [(str(k), _as_array(k, v)) for k, v in state_dict.items()]
    try:
        engine = _attnmap.from_state_dict(items, json.dumps(config, default=_json_value), name, given)
    except AttnmapError as e:
        _reraise(e)
    m = Model(engine, options.get("quiet", False))
    if layout is not None and m.info["layout"] != layout:
        raise _error("%s: the tensors are the %s layout, not %s" % (name, m.info["layout"], layout))
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

    __slots__ = ("array", "view", "tag", "written", "label", "units", "kind", "block", "head", "class_index",
                 "class_name", "class_tag", "class_probability", "marked_patch", "_result")

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
        if self._result._call_texts:
            return None  # no overlay of a call's texts (overlay() says why); the notebook shows repr()
        return self.overlay().data


class Result:
    """The maps of one image: ``maps`` (list of Map, in view order; ``result[view name]`` picks one),
    ``probs`` ((C,) float64 class probabilities, None without a classifier head), ``top5``
    ([(label, probability)]), ``score_rule`` (how probs were computed: "softmax" over the classes - a head, or
    CLIP over its texts -, "sigmoid" of each text alone - SigLIP, they need not sum to 1 -; None without
    classes), ``attentions`` ((L, H, T, T) float32 with attentions=True, else None),
    ``box`` (x, y, w, h: the model input's box on the photo), ``notes``, ``input_sha256``."""

    def __init__(self, model, image, call, raw, call_texts=False):
        self.model = model
        self._call_texts = call_texts  # forward(text=...): the figures of this result would draw the model's
        # its own copy of an array: a later change to the caller's array does not change the picture of a map
        self.image = image.copy() if isinstance(image, np.ndarray) else image
        self.options = call
        self.maps = [Map(d, self) for d in raw["maps"]]
        self.probs = raw["probs"]
        self.top5 = raw["top5"]
        self.score_rule = raw["score_rule"]
        self.attentions = raw["attentions"]
        self.box = raw["box"]
        self.notes = raw["notes"]
        self.input_sha256 = raw["input_sha256"]
        self.input = raw["input"]

    def __getitem__(self, key):
        if not isinstance(key, (str, tuple)):
            import operator
            return self.maps[operator.index(key)]
        if isinstance(key, tuple):
            view, cls = key
            for m in self.maps:
                if view in (m.view, m.tag, m.written) and cls in (m.class_index, m.class_name, m.class_tag):
                    return m
            raise KeyError(key)
        for m in self.maps:
            if key in (m.view, m.tag, m.written):
                return m
        raise KeyError("%r: this result's views are %s" % (key, ", ".join(m.view for m in self.maps)))

    def __iter__(self):
        return iter(self.maps)

    def __len__(self):
        return len(self.maps)

    def __repr__(self):
        rule = "sigmoid " if self.score_rule == "sigmoid" else ""  # SigLIP: the text's own sigmoid, as render's labels
        top = "" if not self.top5 else ", top-1 %s %s%.1f%%" % (self.top5[0][0], rule, 100 * self.top5[0][1])
        return "<attnmap.Result %s: %s%s>" % (self.input, ", ".join(m.view for m in self.maps), top)

    def panel(self, format="png", **options):
        """The image's panel (photo | map | overlay per view, colour bars), as ``render --panel``."""
        if self._call_texts:
            raise _error("panel(): the texts were given to forward(); the figures draw a model's own texts: "
                         "attnmap.load(path, text=[...]) and panel(image, model=that)")
        return panel(self.image, model=self.model, format=format, **{**self.options, **options})


from ._figures import (EvalReport, Figure, RunReport, cli, evaluate, figure, overlay, panel,  # noqa: E402
                       render_folder)
