"""attnmap.load("ORG/NAME"): a Hugging Face Hub name in the module, as on the command line (issue 40).

A stand-in for the Hub's endpoints (tests/hub/fake_hub.py) is started on 127.0.0.1 for this module's tests only,
over a repository made from the committed hf_folder fixture; the environment variables huggingface_hub reads
(HF_ENDPOINT, HF_HUB_CACHE, HF_HUB_OFFLINE) point the module at it.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "hf_folder"
PHOTO = str(ROOT / "data" / "chelsea.png")
COMMIT = "89abcdef0123456789abcdef0123456789abcdef"


def _start_hub(tmp_path, *extra):
    repo = tmp_path / "repos" / "test-org" / "tiny-vit"
    (repo / COMMIT).mkdir(parents=True, exist_ok=True)
    for name in ("model.safetensors", "config.json", "preprocessor_config.json"):
        shutil.copy(FIXTURE / name, repo / COMMIT / name)
    (repo / "refs.json").write_text(json.dumps({"main": COMMIT}))
    ports = tmp_path / "ports"
    return ports, subprocess.Popen(["/usr/bin/python3", str(ROOT / "tests" / "hub" / "fake_hub.py"), "--root",
                                    str(tmp_path / "repos"), "--port-file", str(ports), "--log",
                                    str(tmp_path / "log"), "--lifetime", "120", *extra])


@pytest.fixture()
def hub(tmp_path, monkeypatch):
    ports, server = _start_hub(tmp_path)
    try:
        for _ in range(200):
            if ports.exists():
                break
            time.sleep(0.05)
        api_port = ports.read_text().split()[0]
        for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:" + api_port)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        yield tmp_path
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)


def test_a_hub_name_loads_the_same_model_as_its_folder(attnmap, hub, capfd):
    by_name = attnmap.load("test-org/tiny-vit", quiet=True)
    assert capfd.readouterr().err == ""  # quiet: no download lines either
    by_path = attnmap.load(str(FIXTURE), quiet=True)
    assert by_name.info["hub"] == {"repo": "test-org/tiny-vit", "revision": "main", "commit": COMMIT}
    assert by_path.info["hub"] is None
    a = by_name.forward(PHOTO)
    b = by_path.forward(PHOTO)
    assert np.array_equal(a.maps[0].array, b.maps[0].array)
    assert "hub:         test-org/tiny-vit (revision main, commit " + COMMIT in by_name.describe()
    snapshot = hub / "cache" / "models--test-org--tiny-vit" / "snapshots" / COMMIT
    assert os.path.islink(snapshot / "model.safetensors")
    # Offline, from the cache alone; and a name neither cached nor a path says both.
    os.environ["HF_HUB_OFFLINE"] = "1"
    again = attnmap.load("hf-hub:test-org/tiny-vit", quiet=True)
    assert np.array_equal(again.forward(PHOTO).maps[0].array, a.maps[0].array)
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.load("test-org/other", quiet=True)
    assert e.value.exit_code == 2
    assert "no such file or folder; as a Hugging Face Hub name" in str(e.value)
    assert "HF_HUB_OFFLINE is set" in str(e.value)


def test_ctrl_c_stops_a_download_and_keeps_its_partial_file(tmp_path):
    """Ctrl-C during load()'s download raises KeyboardInterrupt at once (not when the download ends), and the
    partial blob is kept for the next load."""
    ports, server = _start_hub(tmp_path, "--rate", "8000")  # 64 kB: about 8 s
    try:
        child = _load_in_child(tmp_path, ports)
        # Until bytes of the blob have arrived: its .incomplete file is made before the GET (as huggingface_hub
        # opens it), so its mere existence does not mean a byte came; a Ctrl-C before the first byte keeps an
        # empty partial file (a later run resumes from byte 0), which is not what this test asserts.
        for _ in range(400):
            if any(f.stat().st_size > 0 for f in (tmp_path / "cache").rglob("*.incomplete")):
                break
            time.sleep(0.05)
        t = time.time()
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=30)
        assert out.startswith("interrupted"), out
        assert time.time() - t < 4.0  # at once, not when the download ends (about 8 s)
        partial = list((tmp_path / "cache").rglob("*.incomplete"))
        assert len(partial) == 1 and partial[0].stat().st_size > 0
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=10)


def test_ctrl_c_stops_a_stalled_download_at_once(tmp_path):
    """Ctrl-C while the server sends nothing (one 4096-byte chunk, then a stall) stops load() at once, not when
    the stall times out (HF_HUB_DOWNLOAD_TIMEOUT, 10 s) and a retry brings a byte; the bytes received are kept."""
    ports, server = _start_hub(tmp_path, "--rate", "1")  # the first 4096 bytes, then none for 4096 s
    try:
        child = _load_in_child(tmp_path, ports, "HF_HUB_DOWNLOAD_TIMEOUT")
        for _ in range(400):  # until the first chunk is in the partial file; then the server stalls
            if any(f.stat().st_size == 4096 for f in (tmp_path / "cache").rglob("*.incomplete")):
                break
            time.sleep(0.05)
        time.sleep(0.3)  # the transfer now waits for bytes that do not come
        t = time.time()
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=30)
        assert out.startswith("interrupted"), out
        assert time.time() - t < 4.0  # libcurl's progress call polls the Ctrl-C about once a second
        partial = list((tmp_path / "cache").rglob("*.incomplete"))
        assert len(partial) == 1 and partial[0].stat().st_size == 4096
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=10)


def _load_in_child(tmp_path, ports, *unset):
    """A child Python that loads the fake Hub's model (the Hub of _start_hub, once its ports file is written)
    and prints 'interrupted' on KeyboardInterrupt; `unset`: environment variables left out besides the Hub's
    token and offline ones."""
    for _ in range(200):
        if ports.exists():
            break
        time.sleep(0.05)
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:" + ports.read_text().split()[0],
               HF_HUB_CACHE=str(tmp_path / "cache"), HF_HOME=str(tmp_path / "hf_home"),
               PYTHONPATH=os.environ.get("ATTNMAP_PYTHON_PATH", str(ROOT / "build" / "python")))
    for var in ("HF_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE") + unset:
        env.pop(var, None)
    code = ("import attnmap\ntry:\n    attnmap.load('test-org/tiny-vit', quiet=True)\n"
            "except KeyboardInterrupt:\n    print('interrupted')\n")
    return subprocess.Popen(["/usr/bin/python3", "-c", code], env=env, stdout=subprocess.PIPE, text=True)
