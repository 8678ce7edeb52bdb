#!/usr/bin/env bash
# Runs docs/notebook.ipynb headless (Debian's jupyter-nbconvert and python3-ipykernel, /usr/bin/python3's
# "python3" kernel; no network is used) and saves every figure the notebook displays as a file to look at.
#
#   bash tools/run_notebook.sh [PYTHON_DIR] [FIGURES_DIR]
#     PYTHON_DIR   the folder holding the importable attnmap package (default: build/python; put first on
#                  the kernel's PYTHONPATH, so the build is tested rather than an installed copy)
#     FIGURES_DIR  where the displayed figures go as cellNN-K.png / .svg (default: a new temporary folder)
#
# The committed notebook is never modified: the executed copy is written to a temporary folder (kept only as
# FIGURES_DIR/notebook.executed.ipynb). The kernel starts in docs/, as when a person opens the notebook there.
# Exit status: 0 when every cell ran; non-zero on any cell error (nbconvert's CellExecutionError, with the
# cell and traceback on stderr), on a cell running past ATTNMAP_NOTEBOOK_CELL_TIMEOUT seconds (default 300),
# the whole run past ATTNMAP_NOTEBOOK_TIMEOUT (default 900), or when the notebook displayed no figure.
# ctest Python.Notebook runs it; tools/deps.sh test installs jupyter-nbconvert and python3-ipykernel.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pydir=${1:-$repo/build/python}
[ -d "$pydir/attnmap" ] || { echo "run_notebook: no attnmap package in $pydir (build with -DATTNMAP_PYTHON=ON)" >&2; exit 2; }
pydir=$(cd "$pydir" && pwd)
if [ -n "${2:-}" ]; then
  figs=$2
  mkdir -p "$figs"
else
  figs=$(mktemp -d "${TMPDIR:-/tmp}/attnmap-notebook-figures.XXXXXX")
fi
figs=$(cd "$figs" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/attnmap-notebook.XXXXXX")
trap 'rm -rf "$work"' EXIT

export PYTHONPATH="$pydir${PYTHONPATH:+:$PYTHONPATH}"
export PYDEVD_DISABLE_FILE_VALIDATION=1   # ipykernel's debugger note on frozen modules, not ours
export MPLBACKEND=Agg                      # should anything import matplotlib: never a window
export JUPYTER_RUNTIME_DIR="$work/runtime" # connection files out of $HOME
cell_timeout=${ATTNMAP_NOTEBOOK_CELL_TIMEOUT:-300}
start=$(date +%s.%N)
# nbconvert writes only to --output-dir; the kernel's working folder is the input notebook's (docs/).
timeout "${ATTNMAP_NOTEBOOK_TIMEOUT:-900}" /usr/bin/python3 -m nbconvert --to notebook --execute \
  --ExecutePreprocessor.timeout="$cell_timeout" --ExecutePreprocessor.kernel_name=python3 \
  --output-dir "$work" --output notebook.executed.ipynb "$repo/docs/notebook.ipynb"
end=$(date +%s.%N)

/usr/bin/python3 - "$work/notebook.executed.ipynb" "$figs" <<'EOF'
import base64, json, pathlib, sys
nb = json.loads(pathlib.Path(sys.argv[1]).read_text())
out = pathlib.Path(sys.argv[2])
written, errors = [], []
for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
    k = 0
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            errors.append(f"cell {i}: {o.get('ename')}: {o.get('evalue')}")
        data = o.get("data", {})
        if "image/png" in data:
            k += 1
            p = out / f"cell{i:02d}-{k}.png"
            p.write_bytes(base64.b64decode(data["image/png"]))
            written.append(p)
        elif "image/svg+xml" in data:
            k += 1
            p = out / f"cell{i:02d}-{k}.svg"
            svg = data["image/svg+xml"]
            p.write_text(svg if isinstance(svg, str) else "".join(svg))
            written.append(p)
if errors:
    sys.exit("run_notebook: cells with errors:\n" + "\n".join(errors))
if not written:
    sys.exit("run_notebook: the notebook displayed no figure")
for p in written:
    print(p)
EOF
cp "$work/notebook.executed.ipynb" "$figs/notebook.executed.ipynb"
awk -v s="$start" -v e="$end" 'BEGIN { printf "run_notebook: every cell ran in %.1f s; figures in the folder above\n", e - s }' >&2
