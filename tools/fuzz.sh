#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz/ and runs each for SECONDS (default 60)
# seeded with the committed corpus. CI runs a 20 s smoke run (tools/test.sh); for a longer local run:
#     bash tools/fuzz.sh 3600            # one hour per target
#     bash tools/fuzz.sh 600 fuzz_image  # one target
# New interesting inputs collect in build-fuzz/corpus/TARGET (not committed). A crash stops the run with
# the crashing input saved as build-fuzz/crash-*: add it under fuzz/regressions/TARGET/ (the test suite
# replays every file there) and fix the bug.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_image fuzz_weights_json fuzz_safetensors fuzz_pth fuzz_clip_text)
# clang and its fuzzer runtime (tools/test.sh has checked them already: ATTNMAP_DEPS_DONE=1)
[ "${ATTNMAP_DEPS_DONE:-0}" = 1 ] || bash tools/deps.sh test
# FUZZ_BUILD_DIR: a build folder configured with -DATTNMAP_FUZZ=ON already (tools/test.sh passes its
# sanitizer build, build-san/); by default build-fuzz/, configured here.
bdir="${FUZZ_BUILD_DIR:-build-fuzz}"
if [ "$bdir" = build-fuzz ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTNMAP_FUZZ=ON \
    -DATTNMAP_BUILD_TESTS=OFF -DATTNMAP_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$bdir" -j"$(nproc)" --target "${targets[@]}"
seeds_for() {
  case "$1" in
    fuzz_image) echo tests/images/corpus/good tests/images/corpus/bad tests/images/basic fuzz/seeds/image fuzz/regressions/image ;;
    fuzz_weights_json) echo fuzz/seeds/weights_json fuzz/regressions/weights_json ;;
    fuzz_safetensors) echo fuzz/seeds/safetensors fuzz/regressions/safetensors ;;
    fuzz_pth) echo fuzz/seeds/pth tests/fixtures/pth_hostile fuzz/regressions/pth ;;
    fuzz_clip_text) echo fuzz/seeds/clip_text fuzz/regressions/clip_text ;;
  esac
}
# One target: its libFuzzer run, its summary lines; status 1 (with the log's end) when it found something.
run_one() {
  local t="$1" log="$bdir/$1.log" status=0 d seeds=()
  mkdir -p "$bdir/corpus/$t"
  # -rss_limit_mb: an input that makes attnmap allocate more than this is a finding (no huge allocations).
  # Seed folders that git does not carry while empty (e.g. fuzz/regressions/image) are left out. The seed
  # folders are looked for and named from the top folder, before the cd into the build folder (looked for
  # from there, none was found and every run started from an empty corpus).
  for d in $(seeds_for "$t"); do if [ -d "$d" ]; then seeds+=("$PWD/$d"); fi; done
  (cd "$bdir" && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "./fuzz/$t" -max_total_time="$secs" \
     -timeout=20 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 "corpus/$t" \
     "${seeds[@]}") >"$log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    echo "fuzz: $t FAILED (status $status); the end of $log:"
    tail -n 60 "$log"
    return 1
  fi
}
# The targets as many at a time as there are cores (each libFuzzer run is one process on one core): the
# same seconds each, half the wall time on 2 cores (CI's smoke run: 5 targets x 20 s in 60 s, not 100 s).
failed=0
at_once="$(nproc)"
for ((i = 0; i < ${#targets[@]}; i += at_once)); do
  batch=("${targets[@]:i:at_once}")
  pids=()
  for t in "${batch[@]}"; do
    echo "fuzz: $t for ${secs}s"
    run_one "$t" >"$bdir/$t.summary" 2>&1 &
    pids+=($!)
  done
  for k in "${!pids[@]}"; do
    wait "${pids[$k]}" || failed=1
    t="${batch[$k]}"
    grep -E "^(INFO: seed corpus|#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|SUMMARY|==[0-9]+==ERROR)" "$bdir/$t.log" || true
    cat "$bdir/$t.summary"
  done
done
[ "$failed" = 0 ] || exit 1
