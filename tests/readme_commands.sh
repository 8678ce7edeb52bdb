#!/usr/bin/env bash
# ctest Readme.EveryCommandRuns: runs every attnmap command of README.md's ```sh blocks, as a user would
# after the quick start (attnmap on the PATH), in a scratch folder where data/ is the project's and the
# recipes' placeholders exist: photos/ (a few of data/'s photos), vit.safetensors (a tiny timm-layout
# fixture with its config.json), model.pth (the same as a wrapped torch.save checkpoint) and
# openai/clip_visual.pth (a tiny OpenAI CLIP visual tower, tests/fixtures/families/openai_clip_visual). Each command must exit 0. The quick start's and the test command's own
# lines (bash tools/...) are not run here: the second is what CI runs, the first is checked on a fresh clone.
#   usage: readme_commands.sh SOURCE_DIR ATTNMAP_BINARY
set -euo pipefail
src="$(cd "$1" && pwd)"
bin="$(realpath "$2")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/photos"
ln -s "$bin" "$work/bin/attnmap"
ln -s "$src/data" "$work/data"
cp "$src/data/chelsea.png" "$src/data/rocket.jpg" "$src/data/camera.png" "$work/photos/"
cp "$src/tests/fixtures/layouts/timm/weights.safetensors" "$work/vit.safetensors"
cp "$src/tests/fixtures/layouts/timm/config.json" "$work/config.json"
cp "$src/tests/fixtures/layouts/timm/weights.wrapped.pth" "$work/model.pth"  # a training checkpoint {model, ...}
mkdir -p "$work/openai"  # a folder of its own: the config.json above belongs to vit.safetensors
cp "$src/tests/fixtures/families/openai_clip_visual/model.pth" "$work/openai/clip_visual.pth"  # CLIP's visual tower
export PATH="$work/bin:$PATH"
cd "$work"
# Lines of ```sh blocks, continuation lines joined, comments dropped; those whose first word is attnmap.
mapfile -t cmds < <(awk '
  /^```sh/ {inblock=1; next}
  /^```/   {inblock=0; next}
  inblock {
    line=$0; sub(/[ \t]+#.*$/, "", line); if (line ~ /^[ \t]*#/) next
    if (acc != "") line = acc " " line
    if (line ~ /\\$/) {sub(/\\$/, "", line); acc=line; next}
    acc=""; if (line ~ /^[ \t]*(\.\/build\/)?attnmap /) print line
  }' "$src/README.md")
passed=0 failed=0
for c in "${cmds[@]}"; do
  c="${c/.\/build\/attnmap/attnmap}"
  rc=0
  (eval "$c") >"$work/log" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1)); echo "ok: $c"
  else
    failed=$((failed + 1)); echo "FAILED (exit $rc): $c"; sed 's/^/    /' "$work/log" | tail -20
  fi
done
[ ${#cmds[@]} -gt 0 ] || { echo "no attnmap command found in README.md"; exit 1; }
echo "README commands: $passed passed, $failed failed"
[ "$failed" = 0 ]
