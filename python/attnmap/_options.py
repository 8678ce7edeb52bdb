"""Keyword arguments as attnmap's settings: the engine's flag registry says what each keyword is.

Every keyword of the module is a setting of a command (docs/cli.md): ``upsample="nearest"`` is the setting
``upsample`` (``--upsample nearest`` on the command line), ``skip_existing=True`` the switch
``skip_existing``, ``size=(448, 448)`` the value ``448,448``. ``_attnmap.settings_of(command)`` gives each
setting's keyword, id and flag, whether it is a switch (a negated one: ``exif=False`` is ``--no-exif``), makes
the model, is taken by ``Model.forward`` or is set by the calling function: nothing is copied here. The
engine parses and checks the settings (``make_request``, one place, one wording) and raises its errors with
the keywords spelled as they are written here.
"""

import os
import re

_SETTINGS = {}


def settings(command):
    """The settings of ``command`` ("render", "eval", "figure", ...) by keyword: dicts with id, keyword, flag,
    topic (the help's: "Text", "Views", ...), is_switch, makes_model, repeatable, negated, forward, set_by_call (the engine's registry)."""
    if command not in _SETTINGS:
        from . import _attnmap
        _SETTINGS[command] = {s["keyword"]: s for s in _attnmap.settings_of(command)}
    return _SETTINGS[command]


def model_keywords():
    """What makes the model (attnmap.load / from_state_dict): they go with every run of that model."""
    return tuple(k for k, s in settings("render").items() if s["makes_model"])


def text_keywords():
    """The keywords that give a CLIP's or SigLIP's texts (the registry's "Text" topic: text, texts, prompt, vocab,
    truncate_text; docs/text.md)."""
    return tuple(k for k, s in settings("render").items() if s["topic"] == "Text")


def forward_keywords():
    """What forward() takes: the settings that choose and compute the maps (the rest of render's draw or write)."""
    return frozenset(k for k, s in settings("render").items() if s["forward"])


def _value(key, value):
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # NumPy / torch values
        value = value.tolist()
    if isinstance(value, (bytes, bytearray, dict, set)):  # str() would make "b'a dog'" or "{'a': 1}" a value
        raise TypeError("%s=%r: expected a str, a number or a path (a list or tuple of them), found %s"
                        % (key, value, type(value).__name__))
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_value(key, v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _refused(key, s, command, caller, allowed):
    """Why the keyword ``key`` (its setting ``s``, None when ``command`` has none) is refused; None if it is not."""
    if s is not None and s["makes_model"]:
        return "it makes the model: give it to attnmap.load() / from_state_dict()"
    if s is not None and s["set_by_call"]:
        return "%s() sets %s itself%s" % (caller or command, s["flag"],
                                          "; model= takes the model" if s["id"] == "weights" else "")
    if s is None:
        return "not an option of attnmap %s (docs/cli.md)" % command
    if allowed is not None and key not in allowed:
        return "it does not change the maps; overlay(), panel() and render_folder() draw"
    return None


def to_given(kwargs, command=None, caller=None, allowed=None):
    """``kwargs`` as the engine's settings as given: [(setting id, [values])].

    command: the command whose settings the keywords must be ("render", "figure", "eval"; None: the model's
    keywords, unchecked); allowed: a narrower set of its keywords; caller: the function named in the
    TypeError for any other keyword.

    True -> the switch given; False / None -> nothing (a negated keyword such as exif=False -> its switch);
    a list or tuple -> one value per item for a repeatable setting (text=["a dog", "a cat"] as --text twice),
    else comma-separated; anything else -> str().
    """
    table = settings(command or "render")
    given = []
    for key, value in kwargs.items():
        if value is None:
            continue
        s = table.get(key)
        if command is not None:
            why = _refused(key, s, command, caller, allowed)
            if why:
                raise TypeError("%s() got an unexpected keyword argument '%s' (%s)" % (caller or command, key, why))
            if s["is_switch"] and not s["negated"] and not isinstance(value, bool):
                raise TypeError("%s() keyword %s= takes True or False, found %r" % (caller or command, key, value))
            if not s["is_switch"] and isinstance(value, bool):
                raise TypeError("%s() keyword %s= takes a value, not %r" % (caller or command, key, value))
        if s is None:
            raise TypeError("unexpected keyword argument '%s'" % key)
        if s["negated"]:
            if value is False:
                given.append((s["id"], []))
            elif value is not True:
                raise TypeError("%s= expects True or False, found %r" % (key, value))
            continue
        if value is True:
            given.append((s["id"], []))
        elif s["repeatable"] and isinstance(value, (list, tuple)):  # text=["a dog", "a cat"]: --text twice
            if any(isinstance(v, (list, tuple)) for v in value):
                raise TypeError("%s=%r: expected a list of values, found a list inside it" % (key, value))
            given.append((s["id"], [_value(key, v) for v in value]))
        elif value is not False:
            given.append((s["id"], [_value(key, value)]))
    return given
