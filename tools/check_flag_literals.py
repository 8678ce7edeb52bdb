#!/usr/bin/python3
"""Issue 42: each long flag ("--max-pixels") is written once in src/'s string literals - in the flag registry
(src/app/cli/flag_table.cpp); every other message names the setting ({setting:max_pixels}, core/setting_ref.hpp)
and the front end spells it. Prints each flag written in more than one string literal of src/**/*.{cpp,hpp}
with the places (FILE:LINE), and exits 1 if any; exit 0 otherwise. Comments do not count.
With --outside-cli: lists every string literal outside src/app/cli/ that spells a flag (a to-do list) instead."""
import collections
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from check_no_flags import LITERAL, code_lines  # noqa: E402  (the same reading of code and comments)

FLAG = re.compile(r'(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]')
BUILT_IN = {"--help", "--version"}  # CLI11's own (the help hint names --help), not settings of the registry


def literals(src):
    """(path, line, literal) of every string literal in src/**/*.{cpp,hpp}."""
    for path in sorted(src.rglob("*.[ch]pp")):
        for number, code in code_lines(path.read_text(encoding="utf-8")):
            for lit in LITERAL.findall(code):
                yield path, number, lit


def main(argv):
    src = pathlib.Path(__file__).resolve().parent.parent / "src"
    places = collections.defaultdict(list)
    outside = []
    for path, number, lit in literals(src):
        where = f"{path.relative_to(src.parent)}:{number}"
        for flag in FLAG.findall(lit):
            if flag not in BUILT_IN:
                places[flag].append(where)
        if FLAG.search(lit) and "app/cli" not in path.relative_to(src).as_posix():
            outside.append(f"{where}: {lit}")
    if "--outside-cli" in argv:
        print("\n".join(outside))
        print(f"{len(outside)} string literal(s) outside src/app/cli/ spell a flag")
        return 0
    twice = {flag: at for flag, at in sorted(places.items()) if len(at) > 1}
    for flag, at in twice.items():
        print(f"{flag} written {len(at)} times: {', '.join(at)}")
    print(f"{len(twice)} flag(s) written more than once in src/" if twice else "each flag written once in src/")
    return 1 if twice else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
