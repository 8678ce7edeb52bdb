#!/usr/bin/env bash
# Memory over a long run (not a test): renders a folder of N images (hard links to the bench photos, so
# every one is decoded and written) and samples the resident set size of the attnmap process when the
# manifest reaches 100 and N lines.
#   bash bench/rss.sh [N=1000] [extra attnmap options, e.g. -j 1]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
W="${ATTNMAP_BENCH_DIR:-/tmp/attnmap-bench}"
N="${1:-1000}"
shift || true
[ -d "$W/photos" ] || /usr/bin/python3 "$ROOT/bench/make_photos.py" "$W/photos" 240
rm -rf "$W/many" "$W/out_many"
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
  n=$(wc -l <"$W/many.jsonl" 2>/dev/null || echo 0)
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
  [ -z "$r100" ] && [ "$n" -ge 100 ] && r100=$rss && echo "rss_kb_after_100 $rss ($n done)"
  [ "$n" -ge $((N - 5)) ] && [ -n "$rss" ] && last=$rss && lastn=$n
  sleep 0.05
done
wait "$pid" || true
echo "rss_kb_near_end ${last:-?} (${lastn:-?} done of $N)"
[ -n "$r100" ] && [ -n "${last:-}" ] && echo "ratio $(echo "scale=3; $last / $r100" | bc)"
