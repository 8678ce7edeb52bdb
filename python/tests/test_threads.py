"""Threads: forward() from two Python threads at once gives the same arrays as one after the other, and the GIL
is released while the engine computes (another Python thread keeps running)."""
import threading
import time

import numpy as np

from amtest import DATA

IMAGES = [str(DATA / "rocket.jpg"), str(DATA / "coffee.png"), str(DATA / "chelsea.png"), str(DATA / "camera.png")]
VIEWS = "L-1/mean,L0/h1,rollout,L1/mean:q=r3c4,chefer"


def _arrays(r):
    return [m.array for m in r.maps] + [r.probs]


def test_two_threads_same_arrays(default_model):
    seq = {img: _arrays(default_model.forward(img, views=VIEWS)) for img in IMAGES}
    got, errors = {}, []
    start = threading.Barrier(2)

    def work(imgs):
        try:
            start.wait()
            for _ in range(2):
                for img in imgs:
                    got.setdefault(img, []).append(_arrays(default_model.forward(img, views=VIEWS)))
        except Exception as e:  # reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(IMAGES[:2] + IMAGES[2:3],)),
          threading.Thread(target=work, args=(IMAGES[2:] + IMAGES[:1],))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for img, runs in got.items():
        for arrays in runs:
            assert all(np.array_equal(a, b) for a, b in zip(arrays, seq[img])), img


def test_gil_released(attnmap):
    """While forward() computes (the default model at 448 x 448: 785 tokens, three images in one call), a Python
    thread still runs: it ticks during the call. A GIL held through the computation would give it no tick at
    all until the call returns. No time is asserted, only that the other thread ran."""
    m = attnmap.load(size=448)
    img = np.ascontiguousarray(np.full((448, 448, 3), 128, np.uint8))
    m.forward(img)  # warm up
    stop = threading.Event()
    stamps = []

    def ticker():
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0.001)
    t = threading.Thread(target=ticker)
    t.start()
    time.sleep(0.02)
    t0 = time.perf_counter()
    m.forward([img, img, img], views="L-1/mean,rollout,chefer")
    t1 = time.perf_counter()
    stop.set()
    t.join()
    inside = [s for s in stamps if t0 < s < t1]
    assert len(inside) >= 2, f"a Python thread ticked {len(inside)} times during forward(): the GIL seems held"
