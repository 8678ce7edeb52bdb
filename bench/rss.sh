#!/usr/bin/env bash
# Memory over a long run (not a test): renders a folder of N images (hard links to the bench photos, so
# every one is decoded and written) and samples the resident set size of the attnmap process when the
# manifest reaches 100 and N lines: VmRSS (now; depends on the images in flight) and VmHWM (the peak so
# far; grows over the run if anything leaks).
#   bash bench/rss.sh [N=1000] [extra attnmap options, e.g. -j 1]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
W="${ATTNMAP_BENCH_DIR:-/tmp/attnmap-bench}"
N="${1:-1000}"
shift || true
[ -d "$W/photos" ] || /usr/bin/python3 "$ROOT/bench/make_photos.py" "$W/photos" 240
rm -rf "$W/many" "$W/out_many" "$W/many.jsonl"
mkdir -p "$W/many"
i=0
while [ "$i" -lt "$N" ]; do
  for f in $(find "$W/photos" -type f | sort); do
    [ "$i" -ge "$N" ] && break
    ln "$f" "$W/many/$(printf '%05d' "$i").${f##*.}"
    i=$((i + 1))
  done
done
"$ROOT/build/attnmap" render "$W/many" -o "$W/out_many" -q --manifest "$W/many.jsonl" "$@" &
pid=$!
r100=""
while kill -0 "$pid" 2>/dev/null; do
  n=$( (cat "$W/many.jsonl" 2>/dev/null || true) | wc -l)
  mem=$(awk '/VmRSS/ {r=$2} /VmHWM/ {h=$2} END {print r, h}' "/proc/$pid/status" 2>/dev/null || true)
  if [ -z "$r100" ] && [ "$n" -ge 100 ]; then
    r100=$mem
    echo "after $n images: rss_kb hwm_kb = $mem"
  fi
  if [ "$n" -ge $((N - 5)) ] && [ -n "$mem" ]; then
    last=$mem
    lastn=$n
  fi
  sleep 0.05
done
wait "$pid" || true
echo "after ${lastn:-?} images: rss_kb hwm_kb = ${last:-?}"
if [ -n "$r100" ] && [ -n "${last:-}" ]; then
  set -- $r100 $last
  echo "ratio end/100: rss $(echo "scale=3; $3 / $1" | bc), peak (hwm) $(echo "scale=3; $4 / $2" | bc)"
fi
