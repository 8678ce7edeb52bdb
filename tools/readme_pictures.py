#!/usr/bin/python3
"""The README's pictures against what their own commands make.

  readme_pictures.py check SOURCE_DIR WORK_DIR   every picture README.md shows (docs/img/...png) that a README
                                                 command wrote under WORK_DIR (tests/readme_commands.sh ran
                                                 them there) must match the committed one; exit 1 naming each
                                                 that does not (ctest Readme.EveryCommandRuns)
  readme_pictures.py update SOURCE_DIR WORK_DIR  copies those pictures from WORK_DIR over docs/img (after a
                                                 change that alters them: tools/readme_pictures.sh)

"Match": the same size, and per channel at most 24 levels apart in at most 0.1 % of the pixels (another CPU's
rounding moves a few pixels of a map by a level or two; a changed layout, label, colour bar or view moves
thousands). Pictures no README command writes (the explorer's screenshot, the stats plot written to out/)
are listed as not checked.
"""
import re
import shutil
import sys
from pathlib import Path

import numpy as np
from PIL import Image

TOLERANCE_LEVELS = 24
TOLERANCE_SHARE = 0.001


def pictures(readme: Path):
    return sorted(set(re.findall(r"!\[[^\]]*\]\((docs/img/[^)]+\.png)\)", readme.read_text(encoding="utf-8"))))


def difference(a: Path, b: Path) -> str:
    x = np.asarray(Image.open(a).convert("RGBA"), dtype=np.int16)
    y = np.asarray(Image.open(b).convert("RGBA"), dtype=np.int16)
    if x.shape != y.shape:
        return f"size {x.shape[1]}x{x.shape[0]} committed, {y.shape[1]}x{y.shape[0]} made"
    far = (np.abs(x - y) > TOLERANCE_LEVELS).any(axis=2)
    share = float(far.mean())
    if share > TOLERANCE_SHARE:
        return f"{100 * share:.2f} % of the pixels differ by more than {TOLERANCE_LEVELS} levels"
    return ""


def main() -> int:
    if len(sys.argv) != 4 or sys.argv[1] not in ("check", "update"):
        print(__doc__, file=sys.stderr)
        return 2
    src, work = Path(sys.argv[2]), Path(sys.argv[3])
    stale = 0
    for p in pictures(src / "README.md"):
        made = work / p
        if not made.is_file():
            print(f"not checked: {p} (no README command writes it)")
            continue
        if sys.argv[1] == "update":
            shutil.copyfile(made, src / p)
            print(f"updated: {p}")
            continue
        why = difference(src / p, made)
        if why:
            stale += 1
            print(f"STALE: {p} is not what its README command makes: {why} (tools/readme_pictures.sh remakes it)")
        else:
            print(f"matches: {p}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
