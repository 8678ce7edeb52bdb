# browser_tools.sh - sourced by the browser tests' runners (run_gallery_test.sh, run_explore_test.sh):
# sets src, bin, out, here from SOURCE_DIR ATTNMAP_BIN OUTDIR, defines fail, and checks node, chromium and
# puppeteer-core. Missing tools are a failure with what to run, never a silent skip: CI installs them
# (tools/deps.sh test, then npm ci in tests/browser: tools/test.sh does both). Needs TEST_NAME set.
src="$1"
bin="$2"
out="$3"
here="$src/tests/browser"
chromium="${CHROMIUM:-/usr/bin/chromium}"
fail() {
  echo "$TEST_NAME: $*" >&2
  exit 1
}
command -v node >/dev/null 2>&1 || fail "node is not installed: run 'bash tools/deps.sh test' (Debian nodejs npm chromium)"
[ -x "$chromium" ] || fail "$chromium is missing: run 'bash tools/deps.sh test' (Debian chromium), or set CHROMIUM"
[ -f "$here/node_modules/puppeteer-core/package.json" ] ||
  fail "puppeteer-core is not installed in $here: run 'cd $here && npm ci' (tools/test.sh does)"
