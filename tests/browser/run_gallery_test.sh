#!/usr/bin/env bash
# ctest Gallery.Browser: builds a gallery with the real CLI (render of a few data/ photos and one file that
# is not an image, --gallery, each with its panel and layer strip: several outputs a card), moves the output folder with its gallery elsewhere (the links must still hold),
# then opens it in Debian's chromium, headless, through puppeteer-core (gallery_test.mjs): every thumbnail
# loaded, sorting by a statistic reorders the rows, the filter works, no request left the folder. The
# screenshot is kept in OUTDIR/gallery.png.
#   usage: run_gallery_test.sh SOURCE_DIR ATTNMAP_BIN OUTDIR
# Missing node, chromium or the npm package is a failure with what to run, never a silent skip: CI installs
# them (tools/deps.sh test, then npm ci in tests/browser: tools/test.sh does both).
set -euo pipefail
TEST_NAME=Gallery.Browser
# shellcheck source=browser_tools.sh
source "$(dirname "$0")/browser_tools.sh"

rm -rf "$out"
mkdir -p "$out/inputs"
cp "$src/data/chelsea.png" "$src/data/rocket.jpg" "$src/data/composites/0002_bag.png" \
  "$src/data/composites/0005_sandal.png" "$src/data/composites/0016_dress.png" "$out/inputs/"
cp "$src/data/rocket.jpg" "$out/inputs/a_rather_long_camera_roll_name-2024.07.14_0016.jpg"  # wraps on its card
printf 'not an image' >"$out/inputs/broken.png"
# Exit 1 expected: broken.png fails (its row has no thumbnail and sorts last), the others are done.
status=0
"$bin" render "$out/inputs" -o "$out/run" --panel --strip layers --gallery "$out/run/gallery" -q || status=$?
[ "$status" = 1 ] || fail "attnmap render exited $status, expected 1 (one input is not an image)"
[ -f "$out/run/gallery/index.html" ] || fail "no $out/run/gallery/index.html"
# Moved with its outputs, the gallery must still work: its links are relative.
mv "$out/run" "$out/moved"
node "$here/gallery_test.mjs" "$out/moved/gallery/index.html" "$out/moved" "$out/gallery.png"
