#!/usr/bin/env bash
# Installs the Debian packages attnmap needs (as root on Debian 12). Idempotent: does nothing when every
# package is already installed.
#   bash tools/deps.sh        what building and running attnmap needs (tools/quickstart.sh)
#   bash tools/deps.sh test   that plus the test suite's and the fuzz targets' tools (tools/test.sh)
set -euo pipefail
RUNTIME=(cmake g++ make pkg-config libstb-dev libcli11-dev nlohmann-json3-dev libfast-float-dev libopenblas-dev libcurl4-openssl-dev
         libspng-dev libdeflate-dev libexif-dev libwebp-dev libtiff-dev fonts-dejavu-core fonts-noto-core fonts-noto-cjk
         libcairo2-dev libpango1.0-dev
         libssl-dev libzip-dev zlib1g-dev libsleef-dev libdnnl-dev libicu-dev libsentencepiece-dev
         pybind11-dev python3-dev python3-numpy)
# libicu-dev: CLIP's tokenizer (src/text: NFC, lower-casing, the Unicode categories of its pattern).
# libsentencepiece-dev: SigLIP's tokenizer (src/text/siglip_tokenizer: its headers; libsentencepiece0, which it
# depends on, is opened at the first SigLIP text).
# pybind11-dev and python3-dev: building the Python module (-DATTNMAP_PYTHON=ON, tools/install_python.sh);
# python3-numpy: the module's arrays at run time (import attnmap).
# fonts-noto-core and fonts-noto-cjk: the figure labels' fallback fonts (Greek, Cyrillic, Arabic, Hebrew,
# Devanagari, CJK... where DejaVu Sans has no glyph; src/draw/canvas figure_font_stack, docs/figures.md Fonts).
# slurm-wlm (slurmctld, slurmd, slurm-client) and munge: ctest Slurm.ArrayJobShardsEqualOneRun starts its own
# daemons (no service is enabled or started by that test); python3 reads its manifests.
# nodejs, npm and chromium: ctest Gallery.Browser drives Debian's chromium headless through puppeteer-core
# (tools/test.sh runs npm ci in tests/browser); firefox-esr: ctest Explore.Firefox, the explorer in Firefox.
# python3-pytest, python3-torchvision (pulls python3-torch), python3-pil: ctest Python.Pytest (python/tests);
# jupyter-nbconvert and python3-ipykernel: ctest Python.Notebook runs docs/notebook.ipynb headless
# (tools/run_notebook.sh). ninja-build: tools/test.sh's build folders (Ninja keeps both cores busy between stages).
# python3-regex: tools/make_tokenizer_fixtures.py (the regex module OpenAI CLIP's and open_clip's tokenizers import).
# python3-sentencepiece: tools/make_siglip_spm.py (trains tests/fixtures/siglip/spiece.model) and
# tools/make_siglip_tokenizer_fixtures.py (transformers' SiglipTokenizer imports the sentencepiece module);
# python3-protobuf: tools/make_siglip_fixtures.py (SiglipTokenizer reads spiece.model's normaliser through it).
# python3-tqdm, python3-filelock: transformers' import (tools/make_family_fixtures_hf*.py, make_siglip_fixtures.py,
# make_explain_pool_fixtures.py --transformers).
TEST=(libgtest-dev util-linux clang libclang-rt-14-dev ninja-build poppler-utils librsvg2-bin slurm-wlm munge
      python3 nodejs npm chromium firefox-esr
      python3-pytest python3-torch python3-torchvision python3-pil jupyter-nbconvert python3-ipykernel python3-regex
      python3-sentencepiece python3-protobuf python3-tqdm python3-filelock)
PACKAGES=("${RUNTIME[@]}")
if [ "${1:-}" = test ]; then PACKAGES+=("${TEST[@]}"); fi
missing=()
for p in "${PACKAGES[@]}"; do
  # A nodejs package that bundles npm (NodeSource's provides and conflicts with Debian's npm) is enough.
  if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # No package's service is started by the install (munge, slurmd, ...): the tests start what they need.
  created_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && created_policy=1
  fi
  status=0
  apt-get install -y -qq --no-install-recommends "${missing[@]}" || status=$?
  if [ "$created_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
  if [ "$status" != 0 ]; then exit "$status"; fi
fi
