#!/usr/bin/python3
"""NumPy references for eval's flags (issue 28): the bootstrap interval of a mean, the median, max/mean and
the brightness (Rec. 709 luma) baseline map, as src/maps/evaluate.hpp and faithfulness.hpp define them.

    /usr/bin/python3 tools/make_eval_flags_fixtures.py     # rewrites tests/fixtures/eval_flags/reference.json

The index stream is SplitMix64 (Steele, Lea & Flood 2014), written out here in Python integers, so that the
C++ and this script draw the same resamples; the percentiles are numpy.percentile's default (linear).
"""
import json
import os

import numpy as np

MASK = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def bootstrap_interval(x, resamples, seed, level):
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    state = seed
    means = np.empty(resamples)
    for b in range(resamples):
        idx = np.empty(n, dtype=np.int64)
        for i in range(n):
            state, z = splitmix64(state)
            idx[i] = z % n
        means[b] = x[idx].mean()
    lo, hi = np.percentile(means, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(lo), float(hi)


def main():
    rng = np.random.default_rng(28)
    cases = []
    # pointing-game differences (hit - centre hit), energy differences, a tiny sample, a constant one
    xs = [
        (rng.integers(0, 2, 24) - rng.integers(0, 2, 24)).astype(float).tolist(),
        (rng.random(24) * 0.6 - 0.1).tolist(),
        [0.25, -0.5, 1.0],
        [0.125] * 7,
    ]
    for x, resamples, seed, level in [(xs[0], 2000, 28, 0.95), (xs[1], 2000, 28, 0.95), (xs[2], 50, 7, 0.9),
                                      (xs[3], 2000, 28, 0.95), (xs[1], 333, 12345678901234567, 0.5)]:
        lo, hi = bootstrap_interval(x, resamples, seed, level)
        cases.append({"x": x, "resamples": resamples, "seed": seed, "level": level, "lo": lo, "hi": hi})
    first = []
    state = 28
    for _ in range(4):
        state, z = splitmix64(state)
        first.append(str(z))
    medians = [{"x": v, "median": float(np.median(v))} for v in ([3.0, 1.0, 2.0], [4.0, 1.0, 3.0, 2.0], [1.5])]
    m = rng.random(12).astype(np.float32)
    peak = [{"map": m.astype(float).tolist(), "peak_to_mean": float(m.astype(np.float64).max() / m.astype(np.float64).mean())},
            {"map": [1.0] * 5, "peak_to_mean": 1.0}]
    rgb = rng.integers(0, 256, (3, 4, 3)).astype(np.uint8)  # (height, width, RGB)
    luma = rgb.astype(np.float64) @ np.array([0.2126, 0.7152, 0.0722])
    out = {"splitmix64_seed28_first4": first, "bootstrap": cases, "median": medians, "peak_to_mean": peak,
           "brightness": {"width": 4, "height": 3, "rgb": rgb.reshape(-1).tolist(), "luma": luma.reshape(-1).tolist()}}
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "eval_flags", "reference.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
