"""render_folder() on the batch engine's hooks: rows from the engine (no manifest written unless manifest=), the
run's lines printed to sys.stdout / sys.stderr as the command line prints them (none with quiet=True) and kept in
RunReport.lines, errors naming keywords."""

import pytest

from amtest import DATA, composites_folder

NAMES = ["0000_trouser.png", "0001_sneaker.png"]


def _folder(tmp_path):
    return composites_folder(tmp_path, NAMES)


def test_rows_without_a_manifest_and_lines_to_sys_streams(attnmap, default_model, tmp_path, capsys):
    src, out = _folder(tmp_path), tmp_path / "out"
    rep = attnmap.render_folder(str(src), str(out), model=default_model, jobs=2)
    assert rep.exit_code == 0
    assert [r["input"].split("/")[-1] for r in rep.rows] == NAMES  # the manifest's order
    assert all(r["status"] == "done" and r["outputs"] for r in rep.rows)
    # no manifest anywhere: the rows came from the engine
    assert sorted(p.name for p in out.iterdir()) == NAMES
    assert not list(tmp_path.rglob("*.jsonl"))
    printed = capsys.readouterr()
    for n in NAMES:
        line = "%s -> %s" % (src / n, out / n)
        assert line in printed.out.splitlines() and line in rep.lines
    assert any(l.startswith("attnmap: 2 done, 0 failed, 0 skipped, ") for l in printed.err.splitlines())
    assert rep.lines[-1].startswith("attnmap: 2 done, 0 failed, 0 skipped, ")


def test_quiet_prints_nothing(attnmap, default_model, tmp_path, capsys):
    src = _folder(tmp_path)
    (src / "broken.png").write_bytes(b"not a png")
    rep = attnmap.render_folder(str(src), str(tmp_path / "out"), model=default_model, quiet=True)
    assert rep.exit_code == 1 and len(rep.rows) == 3
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err == ""
    assert rep.failed == [(str(src / "broken.png"), rep.rows[2]["error"])]
    assert [l for l in rep.lines if l.startswith("attnmap: error: ") and "broken.png" in l]


def test_a_bad_setting_names_the_keyword(attnmap, default_model, tmp_path):
    with pytest.raises(attnmap.AttnmapError) as e:
        attnmap.render_folder(str(_folder(tmp_path)), str(tmp_path / "out"), model=default_model, jobs=-1, quiet=True)
    assert e.value.exit_code == 2 and "jobs" in str(e.value) and "--jobs" not in str(e.value)
    assert not (tmp_path / "out").exists()
