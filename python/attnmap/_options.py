"""Keyword arguments into attnmap's command-line flags, and the command line's words back into keywords.

Every option of the module is an option of the command line (docs/cli.md): ``upsample="nearest"`` is
``--upsample nearest``, ``skip_existing=True`` is ``--skip-existing``, ``size=(448, 448)`` is
``--size 448,448``. The command line parses and checks them (one place, one wording); an error that names a
flag is reworded here with the keyword the caller wrote.
"""

import os
import re

# Keywords whose flag is not their name with '_' -> '-'.
_RENAMED = {
    "classes": "--class",
    "format": "--figure-format",
    "jobs": "--jobs",
    "exif": "--no-exif",        # exif=False
    "legend": "--no-legend",    # legend=False
    "scale": "--scale",
}
# Keywords that are True by default and spelt as their negation on the command line.
_NEGATED = {"exif", "legend"}

# What the model is made with (attnmap.load / from_state_dict): they go with every run of that model.
MODEL_KEYWORDS = ("key", "heads", "mean", "std", "act", "pool", "size", "pos_interp", "labels", "precision")
# Their flags, for rewording every message about a model ("give --heads H" -> "give heads= H").
MODEL_NAMES = {"--" + k.replace("_", "-"): k for k in MODEL_KEYWORDS}


def _value(key, value):
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # NumPy / torch values
        value = value.tolist()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_value(key, v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


_FLAGS = {}
_SWITCHES = {}


def command_flags(command):
    """The long flags of one of attnmap's commands, as its option table declares them."""
    if command not in _FLAGS:
        from . import _attnmap
        _FLAGS[command] = frozenset(_attnmap.command_flags(command))
    return _FLAGS[command]


# What forward() takes: the options that choose and compute the maps (the rest of render's draw or write).
FORWARD_FLAGS = frozenset(["--views", "--layer", "--head", "--rollout", "--discard", "--query", "--column",
                           "--received", "--class", "--explain", "--gradcam-layer", "--resize", "--no-exif",
                           "--max-pixels", "--layers"])
# What the functions that run a command set themselves.
_SET_BY_CALL = frozenset(["--weights", "--out", "--json", "--masks", "--quiet"])


def to_flags(kwargs, command=None, caller=None, allowed=None):
    """``kwargs`` as command-line arguments, and a map flag -> keyword for rewording messages.

    command: the command whose option table the keywords must be in ("render", "figure", "eval"); allowed:
    a narrower set of its flags; caller: the function named in the TypeError for any other keyword.

    True -> the flag alone; False / None -> nothing (a default-True keyword such as exif=False -> its
    negation); a list or tuple -> comma-separated; anything else -> str().
    """
    args, names = [], {}
    for key, value in kwargs.items():
        if value is None:
            continue
        flag = _RENAMED.get(key, "--" + key.replace("_", "-"))
        if command is not None:
            if key in MODEL_KEYWORDS:
                why = "it makes the model: give it to attnmap.load() / from_state_dict()"
            elif flag in _SET_BY_CALL:
                why = "%s() sets %s itself%s" % (caller or command, flag, "; model= takes the model"
                                                 if flag == "--weights" else "")
            elif flag not in command_flags(command):
                why = "not an option of attnmap %s (docs/cli.md)" % command
            elif allowed is not None and flag not in allowed:
                why = "it does not change the maps; overlay(), panel() and render_folder() draw"
            else:
                why = None
            if why:
                raise TypeError("%s() got an unexpected keyword argument '%s' (%s)" % (caller or command, key, why))
        if command is not None:  # a switch takes True / False; any other flag a value
            if flag in command_switches(command) and key not in _NEGATED and not isinstance(value, bool):
                raise TypeError("%s() keyword %s= takes True or False, found %r" % (caller or command, key, value))
            if flag not in command_switches(command) and isinstance(value, bool):
                raise TypeError("%s() keyword %s= takes a value, not %r" % (caller or command, key, value))
        names[flag] = key
        if key in _NEGATED:
            if value is False:
                args.append(flag)
            elif value is not True:
                raise TypeError("%s= expects True or False, found %r" % (key, value))
            continue
        if value is True:
            args.append(flag)
        elif value is False:
            continue
        else:
            args += [flag, _value(key, value)]
    return args, names


def command_switches(command):
    """The flags of `command` that take no value (True / False keywords)."""
    if command not in _SWITCHES:
        from . import _attnmap
        _SWITCHES[command] = frozenset(_attnmap.command_switches(command))
    return _SWITCHES[command]


def command_names(command):
    """Every long flag of `command` as the keyword that spells it (for messages about options the caller did not
    give: "applies to --rollout only" -> "applies to rollout only")."""
    inverse = {v: k for k, v in _RENAMED.items()}
    return {f: inverse.get(f, f[2:].replace("-", "_")) for f in command_flags(command)}


def reword(message, names):
    """The command line's message with each flag it names (of ``names``) written as the keyword:
    "--views: 'L9/mean': ..." -> "views: 'L9/mean': ...", "give --heads H" -> "give heads=H"; a flag shown with
    its short name ("-j/--jobs: expected ...") as the keyword alone, and without the command line's pointer to
    its help ("(attnmap render --help for the options)": the keywords are documented in docs/python.md)."""
    message = re.sub(r"(?<![\w-])-[A-Za-z]/(?=--[a-z])", "", message)
    message = re.sub(r" \(attnmap [a-z]+ --help for the options\)", "", message)
    for flag in sorted(names, key=len, reverse=True):
        key = names[flag]
        f = re.escape(flag)
        # a flag followed by its value's placeholder (an upper-case word): keyword=PLACEHOLDER
        message = re.sub(r"(?<![\w-])" + f + r" ([A-Z][A-Z0-9_,]*)(?![\w-])", key + r"=\1", message)
        message = re.sub(r"(?<![\w-])" + f + r"(?![\w-])", key, message)
    return message
