"""attnmap.evaluate(): the eval table of a small masked set equals `attnmap eval --json`'s report."""
import json

import pytest

from amtest import FIX, run_cli

SET = FIX / "eval_top5"  # 4 garment images with masks, a 10-class model (tests/test_eval_*.cpp use it too)
CASES = [({}, []),
         ({"views": "L-1/mean,L0/h1,rollout,chefer", "tolerance": 8},
          ["--views", "L-1/mean,L0/h1,rollout,chefer", "--tolerance", "8"])]


@pytest.fixture(scope="module")
def runs(attnmap, tmp_path_factory):
    weights = SET / "weights.json"
    m = attnmap.load(str(weights))
    out = []
    for i, (kw, args) in enumerate(CASES):
        js = tmp_path_factory.mktemp("eval") / "r.json"
        run_cli("eval", SET / "images", "--masks", SET / "masks", "-w", weights, "--json", js, "-q", *args)
        cli = json.loads(js.read_text())
        rep = attnmap.evaluate(str(SET / "images"), str(SET / "masks"), model=m, **kw)
        out.append((cli, rep))
    return out


def _strip_paths(report):
    r = json.loads(json.dumps(report))
    r.pop("weights", None)
    return r


@pytest.mark.parametrize("i", range(len(CASES)))
def test_evaluate_report_equals_cli_json(runs, i):
    """The whole report: the same numbers (the weights' printed name may be the model's name)."""
    cli, rep = runs[i]
    assert _strip_paths(rep.report) == _strip_paths(cli)
    assert rep.exit_code == 0


@pytest.mark.parametrize("i", range(len(CASES)))
def test_evaluate_rows(runs, i):
    """rows: list[dict], one per view in the report's order, each the summary's per-view values and its view."""
    cli, rep = runs[i]
    views = cli["summary"]["views"]
    assert isinstance(rep.rows, list), f"rows is a {type(rep.rows).__name__}, not a list of dicts"
    assert [row["view"] for row in rep.rows] == list(views)
    for row in rep.rows:
        for k, v in views[row["view"]].items():
            assert row[k] == v, (row["view"], k, row[k], v)
