#!/usr/bin/env bash
# ctest Readme.EveryCommandRuns: runs every attnmap command of README.md's ```sh blocks, as a user would
# after the quick start (attnmap on the PATH), in a scratch folder where data/ is the project's and the
# recipes' placeholders exist: photos/ (a few of data/'s photos), vit.safetensors (a tiny timm-layout
# fixture with its config.json), model.pth (the same as a wrapped torch.save checkpoint) and
# openai/clip_visual.pth (a tiny OpenAI CLIP visual tower, tests/fixtures/families/openai_clip_visual), the texts'
# placeholders (photo.jpg, clip-vit-base-patch16/, siglip-base-patch16-224/, classes.txt), and the
# recipes' Hub names served by tests/hub/fake_hub.py on 127.0.0.1 (HF_ENDPOINT). Each command must exit 0. The quick start's and the test command's own
# lines (bash tools/...) are not run here: the second is what CI runs, the first is checked on a fresh clone.
# Then the README's pictures that those commands write are compared with the committed ones
# (tools/readme_pictures.py; README_PICTURES=update copies them over docs/img instead: tools/readme_pictures.sh).
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
# The texts' recipes: photo.jpg, a Hugging Face CLIPModel folder and a SiglipModel folder (tiny, with their
# tokenizer files: tests/fixtures/clip_zero_shot/hf, tests/fixtures/siglip/hf) and classes.txt.
cp "$src/data/rocket.jpg" "$work/photo.jpg"
cp -r "$src/tests/fixtures/clip_zero_shot/hf" "$work/clip-vit-base-patch16"
cp -r "$src/tests/fixtures/siglip/hf" "$work/siglip-base-patch16-224"
printf 'dog\ncat\nrocket\n' >"$work/classes.txt"
# The Hub names of the recipes (docs/hub.md), served by the stand-in for the Hub's endpoints on 127.0.0.1
# (tests/hub/fake_hub.py: bounded, stops with this script) from fixtures: a tiny model each, under the name.
hub_repo() {  # NAME FIXTURE_DIR FILE... (FILE or FIXTURE_FILE=REPO_FILE)
  local d="$work/hub/$1/0123456789abcdef0123456789abcdef0123456$((${#1} % 10))"
  mkdir -p "$d"
  for f in "${@:3}"; do cp "$src/tests/fixtures/$2/${f%%=*}" "$d/${f#*=}"; done
  printf '{"main": "%s"}' "$(basename "$d")" >"$work/hub/$1/refs.json"
}
hub_repo facebook/dinov2-small families/hf_dinov2 model.safetensors config.json preprocessor_config.json
hub_repo openai/clip-vit-base-patch16 families/hf_clip_full model.safetensors config.json preprocessor_config.json
hub_repo laion/CLIP-ViT-B-32-laion2B-s34B-b79K families/hf_clip_full model.safetensors config.json preprocessor_config.json
hub_repo timm/vit_base_patch16_224.augreg2_in21k_ft_in1k layouts/timm config.json weights.safetensors=model.safetensors
/usr/bin/python3 -I "$src/tests/hub/fake_hub.py" --root "$work/hub" --port-file "$work/hub.ports" --lifetime 1200 &
hub_pid=$!
trap 'kill "$hub_pid" 2>/dev/null; wait "$hub_pid" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/hub.ports" ] && break; sleep 0.1; done
export HF_ENDPOINT="http://127.0.0.1:$(cut -d' ' -f1 "$work/hub.ports")" HF_HUB_CACHE="$work/hfcache" HF_HOME="$work/hfhome"
unset HF_HUB_OFFLINE TRANSFORMERS_OFFLINE HF_TOKEN HUGGING_FACE_HUB_TOKEN HUGGINGFACE_HUB_CACHE
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
# The README's pictures that its commands write (docs/img/...) must still be what those commands make.
pictures=0
/usr/bin/python3 -I "$src/tools/readme_pictures.py" "${README_PICTURES:-check}" "$src" "$work" || pictures=$?
[ "$failed" = 0 ] && [ "$pictures" = 0 ]
