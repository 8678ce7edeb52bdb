#!/usr/bin/python3
"""Issue 25: the stages below app/ never spell a command-line flag in a message (a string literal such as
"--heads"); they name the setting with core/setting_ref.hpp and app/ spells it. Prints each offending
literal as FILE:LINE and exits 1 if any; exit 0 otherwise. Comments are not messages and are skipped."""
import pathlib
import re
import sys

STAGES = ("core", "io", "hub", "checkpoint", "model", "maps", "draw", "engine")
LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"')
FLAG = re.compile(r'(?<![\w-])--[a-z]')


def code_lines(text):
    """(line number, code) with // and /* */ comments removed (string literals kept)."""
    in_block = False
    for number, line in enumerate(text.splitlines(), 1):
        out, i = [], 0
        while i < len(line):
            if in_block:
                end = line.find("*/", i)
                if end < 0:
                    i = len(line)
                    continue
                in_block, i = False, end + 2
                continue
            m = LITERAL.match(line, i)
            if m:
                out.append(m.group(0))
                i = m.end()
            elif line.startswith("//", i):
                break
            elif line.startswith("/*", i):
                in_block, i = True, i + 2
            else:
                out.append(line[i])
                i += 1
        yield number, "".join(out)


def main():
    src = pathlib.Path(__file__).resolve().parent.parent / "src"
    bad = []
    for stage in STAGES:
        # a stage's subfolders (engine/eval/, app/cli/) are the stage's
        for path in sorted((src / stage).rglob("*.[ch]pp")) + sorted((src / stage).rglob("*.inc")):
            for number, code in code_lines(path.read_text(encoding="utf-8")):
                for lit in LITERAL.findall(code):
                    if FLAG.search(lit):
                        bad.append(f"{path.relative_to(src.parent)}:{number}: {lit}")
    for b in bad:
        print(b)
    print(f"{len(bad)} string literal(s) below app/ spell a flag" if bad else "no flag spelled below app/")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
