#!/usr/bin/python3
"""Checks the manifests of a Slurm array run of attnmap against one single-machine run (tests/slurm).

  check_manifests.py outputs MANIFEST
      prints the first output of each row, in row order (what the test waits for before a kill)
  check_manifests.py check --in IN --ref-manifest REF.jsonl --ref-out REF --out OUT --shards N
                           [--skipped LIST] MANIFEST-1 ... MANIFEST-N
      every line of every manifest is one complete JSON object; objects without an "input" key (a header
      with the run's settings) are ignored; the rows of MANIFEST-K are exactly the sorted inputs with index
      i % N == K-1, in that order, so the N manifests concatenated hold every input of IN once; a row's
      outputs are the single run's, relative to OUT instead of REF; when its first output is listed in LIST
      (paths relative to OUT, one a line: the outputs present before a resumed run) it is either carried
      (status "done" and "carried": true: the earlier manifest's row of the run that made it) or "skipped"
      ("carried": false: no earlier row), else it is "done" with "carried": false; a done row's statistics
      (map_max, argmax_row/col, entropy, top5) equal the single run's exactly; a skipped row's are null or
      equal to them.
Exit 0 when all holds, 1 with one line per violation.
"""
import json
import os
import sys

STATS = ("map_max", "argmax_row", "argmax_col", "entropy", "top5")


def read_rows(path, problems):
    """The objects of a JSON-lines file that have an "input" key, in file order."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.endswith("\n"):
                problems.append(f"{path}:{n}: incomplete last line (no newline): {line[:80]!r}")
            try:
                obj = json.loads(line)
            except ValueError as e:
                problems.append(f"{path}:{n}: not one JSON object ({e}): {line[:80]!r}")
                continue
            if not isinstance(obj, dict):
                problems.append(f"{path}:{n}: not a JSON object: {line[:80]!r}")
            elif "input" in obj:
                rows.append(obj)
    return rows


def sorted_inputs(root):
    """The files below root as attnmap names them (root + '/' + relative path), in attnmap's order: paths
    compared element by element (std::filesystem::path), hidden entries left out."""
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        for name in files:
            if not name.startswith("."):
                found.append(os.path.relpath(os.path.join(d, name), root))
    found.sort(key=lambda rel: rel.split(os.sep))
    return [root + "/" + rel for rel in found]


def rel_outputs(row, base):
    return [os.path.relpath(o, base) for o in row.get("outputs") or []]


def check(argv):
    opts, manifests = {}, []
    it = iter(argv)
    for a in it:
        if a.startswith("--"):
            opts[a[2:]] = next(it)
        else:
            manifests.append(a)
    problems = []
    n = int(opts["shards"])
    if len(manifests) != n:
        problems.append(f"{len(manifests)} manifests given for {n} shards")
    inputs = sorted_inputs(opts["in"])
    ref = {r["input"]: r for r in read_rows(opts["ref-manifest"], problems)}
    if sorted(ref) != sorted(inputs):
        problems.append(f"the single run's manifest has {len(ref)} rows for {len(inputs)} inputs")
    skipped = set()
    if opts.get("skipped"):
        with open(opts["skipped"], encoding="utf-8") as f:
            skipped = {line.strip() for line in f if line.strip()}
    seen, counts = {}, {"done": 0, "skipped": 0, "carried": 0}
    for k, path in enumerate(manifests, 1):
        rows = read_rows(path, problems)
        got = [r["input"] for r in rows]
        want = inputs[k - 1::n]
        if got != want:
            problems.append(f"{path}: rows {got} but shard {k}/{n} is {want}")
        for r in rows:
            inp = r["input"]
            if inp in seen:
                problems.append(f"{inp}: a row in {seen[inp]} and in {path}")
            seen[inp] = path
            rr = ref.get(inp)
            if rr is None:
                problems.append(f"{path}: row for {inp}, which is not an input")
                continue
            outs, ref_outs = rel_outputs(r, opts["out"]), rel_outputs(rr, opts["ref-out"])
            if outs != ref_outs:
                problems.append(f"{path}: {inp}: outputs {outs}, the single run wrote {ref_outs}")
            present = bool(outs) and outs[0] in skipped
            got_state = (r.get("status"), r.get("carried"))
            allowed = [("done", True), ("skipped", False)] if present else [("done", False)]
            if got_state not in allowed or r.get("error") is not None:
                problems.append(f"{path}: {inp}: status {r.get('status')!r} carried {r.get('carried')!r} error "
                                f"{r.get('error')!r}, expected one of {allowed} (status, carried) and no error")
                continue
            status = "carried" if r.get("carried") else r.get("status")
            counts[status] += 1
            for key in STATS:
                if key not in rr:
                    continue
                if rr[key] is None and key != "top5":
                    problems.append(f"{opts['ref-manifest']}: {inp}: {key} is null")
                if r.get(key) != rr[key] and not (status == "skipped" and r.get(key) is None):
                    problems.append(f"{path}: {inp}: {key} {r.get(key)!r}, the single run has {rr[key]!r}")
    missing = [i for i in inputs if i not in seen]
    if missing:
        problems.append(f"inputs without a row in any manifest: {missing}")
    for p in problems:
        print("check_manifests: " + p)
    print(f"check_manifests: {len(seen)} rows for {len(inputs)} inputs over {len(manifests)} manifests: "
          f"{counts['done']} done, {counts['carried']} carried, {counts['skipped']} skipped; {len(problems)} problems")
    return 1 if problems else 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "outputs":
        problems = []
        for r in read_rows(sys.argv[2], problems):
            print((r.get("outputs") or [""])[0])
        for p in problems:
            print("check_manifests: " + p, file=sys.stderr)
        return 1 if problems else 0
    if len(sys.argv) > 2 and sys.argv[1] == "check":
        return check(sys.argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
