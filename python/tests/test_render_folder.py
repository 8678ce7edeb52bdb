"""attnmap.render_folder(): `attnmap render` in process: the same outputs and manifest rows as the CLI, the
progress callback once per image, --skip-existing's resume, a corrupt image failing alone (exit code 1)."""
import json
import shutil


from amtest import DATA, run_cli

NAMES = ["0000_trouser.png", "0001_sneaker.png", "0002_bag.png"]
VOLATILE = ("milliseconds", "input", "outputs")


def _folder(tmp_path, bad=False):
    src = tmp_path / "in"
    src.mkdir()
    for n in NAMES:
        shutil.copy(DATA / "composites" / n, src / n)
    if bad:
        (src / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nthis is not a PNG")
    return src


def _manifest(path):
    lines = [json.loads(ln) for ln in path.read_text().splitlines()]
    return lines[0], lines[1:]


def _same_rows(rows, cli_rows):
    assert len(rows) == len(cli_rows)
    for a, b in zip(rows, cli_rows):
        assert {k: v for k, v in a.items() if k not in VOLATILE} == {k: v for k, v in b.items() if k not in VOLATILE}
        assert [p.split("/")[-1] for p in a["outputs"]] == [p.split("/")[-1] for p in b["outputs"]]


def test_render_folder_manifest_progress_resume(attnmap, default_model, tmp_path):
    src = _folder(tmp_path)
    out, man = tmp_path / "out", tmp_path / "m.jsonl"
    calls = []
    rep = attnmap.render_folder(str(src), str(out), model=default_model, manifest=str(man), save_raw=True,
                                views="L-1/mean,rollout", progress=lambda *a: calls.append(a))
    assert rep.exit_code == 0 and rep.failed in (0, [])
    assert len(rep.rows) == 3 and all(r["status"] == "done" for r in rep.rows)
    assert sorted(r["input"].split("/")[-1] for r in rep.rows) == NAMES
    # progress(done, total, input, status) as each image ends
    assert len(calls) == 3
    assert sorted(c[0] for c in calls) == [1, 2, 3] and all(c[1] == 3 for c in calls)
    assert sorted(str(c[2]).split("/")[-1] for c in calls) == NAMES and all(c[3] == "done" for c in calls)
    # the files and the manifest the CLI writes for the same run
    cli_out, cli_man = tmp_path / "cli_out", tmp_path / "cli.jsonl"
    run_cli("render", src, "--out", cli_out, "--manifest", cli_man, "--save-raw", "--views", "L-1/mean,rollout",
            "-q")
    head, cli_rows = _manifest(cli_man)
    phead, prows = _manifest(man)
    assert phead["settings"] == head["settings"]
    _same_rows(prows, cli_rows)
    _same_rows(rep.rows, cli_rows)
    for f in sorted(cli_out.iterdir()):
        assert (out / f.name).read_bytes() == f.read_bytes(), f.name
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in cli_out.iterdir())
    # a second run with skip_existing skips all three
    calls.clear()
    rep2 = attnmap.render_folder(str(src), str(out), model=default_model, manifest=str(man), save_raw=True,
                                 views="L-1/mean,rollout", skip_existing=True, progress=lambda *a: calls.append(a))
    assert rep2.exit_code == 0
    assert len(calls) == 3 and all(c[3] == "skipped" for c in calls)
    assert all(r["carried"] is True for r in rep2.rows)
    run_cli("render", src, "--out", cli_out, "--manifest", cli_man, "--save-raw", "--views", "L-1/mean,rollout",
            "-q", "--skip-existing")
    _same_rows(rep2.rows, _manifest(cli_man)[1])


def test_render_folder_corrupt_image(attnmap, default_model, tmp_path):
    src = _folder(tmp_path, bad=True)
    out = tmp_path / "out"
    calls = []
    rep = attnmap.render_folder(str(src), str(out), model=default_model, manifest=str(tmp_path / "m.jsonl"),
                                progress=lambda *a: calls.append(a))
    assert rep.exit_code == 1
    st = {r["input"].split("/")[-1]: r for r in rep.rows}
    assert st["broken.png"]["status"] == "failed" and "broken.png" in st["broken.png"]["error"]
    assert all(st[n]["status"] == "done" for n in NAMES)
    assert sorted(p.name for p in out.iterdir()) == NAMES
    assert len(calls) == 4 and sorted(c[3] for c in calls) == ["done", "done", "done", "failed"]
    # failed: one entry per failed input, naming it (the docstring's [(input, error)])
    assert len(rep.failed) == 1
    f = rep.failed[0]
    name = f["input"] if isinstance(f, dict) else (f[0] if isinstance(f, tuple) else str(f))
    assert str(name).endswith("broken.png")
    # the CLI's error text for the same file
    p = run_cli("render", src, "--out", tmp_path / "cli", "-q", check=False)
    assert p.returncode == 1
    assert st["broken.png"]["error"] in p.stderr
