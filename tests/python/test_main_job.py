"""The main job's output (`reproduce --all --quick`, as `scripts/run-main` runs it): a summary
of the five papers' verdicts, each reproduction's claims in the verdict model, an HTML report
that renders in a real browser, and `report` / `plot` on every reproduction's output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from microsched.reproduce import names
from microsched.reproduce.claims import DIRECTION, NOT_REPRODUCED, OUT_OF_REGIME, VERDICTS, check_claims

from conftest import run_cli
from test_sweep import _browser

PAPERS = {"coresync", "study", "protego", "synergy", "harvest"}


def test_summary_counts_every_paper_and_every_claim(all_quick: Path):
    s = json.loads((all_quick / "summary.json").read_text(encoding="utf-8"))
    assert s["quick"] is True and s["ok"] is True
    assert {p["paper"] for p in s["papers"]} == PAPERS
    total = 0
    for name in names():
        claims = json.loads((all_quick / name / "claims.json").read_text(encoding="utf-8"))
        check_claims(claims)
        total += len(claims)
    assert sum(s["counts"][v] for v in VERDICTS) == total
    listed = sum(len(p["not_reproduced"]) for p in s["papers"])
    assert listed == s["counts"][DIRECTION] + s["counts"][NOT_REPRODUCED] + s["counts"][OUT_OF_REGIME]


def test_every_verdict_has_a_ci_and_every_cause_its_evidence(all_quick: Path):
    for name in names():
        for c in json.loads((all_quick / name / "claims.json").read_text(encoding="utf-8")):
            if c["verdict"] in (DIRECTION, NOT_REPRODUCED, OUT_OF_REGIME):
                cause = c["cause"]
                assert cause["text"] and isinstance(cause["evidence"], dict), (name, c["id"])
            if c["verdict"] == "reproduced" and c.get("kind") not in ("check",):
                assert c.get("n") is None or c["n"] >= 2 or c.get("ci95") is not None, (name, c["id"])


def test_no_claim_is_reproduced_outside_its_tolerance(all_quick: Path):
    for name in names():
        for c in json.loads((all_quick / name / "claims.json").read_text(encoding="utf-8")):
            if c["verdict"] != "reproduced" or c.get("band") is None or c["measured"] is None:
                continue
            lo, hi = c["band"]
            # the mean itself inside the band (both rounded to 4 decimals in claims.json)
            assert lo - 1e-4 <= c["measured"] <= hi + 1e-4, (name, c["id"])
            if c.get("kind") == "ratio" and c["paper"] != 1:
                # its effect within 0.5-1.5x the paper's
                share = (c["measured"] - 1) / (c["paper"] - 1)
                assert 0.5 - 1e-3 <= share <= 1.5 + 1e-3, (name, c["id"], share)


def test_the_five_theses_are_in_the_summary(all_quick: Path):
    from microsched.reproduce.framework import THESIS_VERDICTS

    s = json.loads((all_quick / "summary.json").read_text(encoding="utf-8"))
    assert [t["paper"] for t in s["theses"]] == [p["paper"] for p in s["papers"]]
    assert {t["paper"] for t in s["theses"]} == PAPERS
    for p, t in zip(s["papers"], s["theses"]):
        th = p["thesis"]
        assert set(th) == {"statement", "source", "verdict", "evidence", "claims"}
        assert th["verdict"] in THESIS_VERDICTS and th["evidence"] and th["claims"]
        assert t == {"paper": p["paper"], "title": p["title"], "statement": th["statement"],
                     "verdict": th["verdict"], "evidence": th["evidence"]}


def test_report_of_the_five_papers_renders_in_a_browser(all_quick: Path, tmp_path: Path):
    html = all_quick / "report.html"
    assert html.is_file()
    dom = _browser(html, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = dom.stdout
    for title in ("CoreSync", "Protego", "Synergy", "HarvestContainers", "simulation study"):
        assert title in page
    assert 'id="counts"' in page and "Quick profile" in page
    s = json.loads((all_quick / "summary.json").read_text(encoding="utf-8"))
    assert re.search(rf"<b>{s['counts']['reproduced']}</b>", page)
    assert page.count('src="data:image/png;base64,') >= 5
    shot = tmp_path / "papers.png"
    res = _browser(html, f"--screenshot={shot}", "--window-size=1200,1600")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    import matplotlib.image as mpimg

    assert float(mpimg.imread(shot)[..., :3].std()) > 0.05, "the screenshot is blank"


@pytest.mark.parametrize("name", names())
def test_report_and_plot_work_on_every_reproduction(all_quick: Path, name: str, tmp_path: Path):
    d = all_quick / name
    r = run_cli("report", d, "--out", tmp_path / "r.html")
    assert r.code == 0, r.err
    text = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'id="claims"' in text and "Quick profile" in text
    r = run_cli("plot", d, "--out", tmp_path / "plots")
    assert r.code == 0, r.err
    assert list((tmp_path / "plots").glob("*.png"))


def test_every_extra_run_is_declared_before_the_sweep(all_quick: Path):
    """The reproductions that run more than their sweep (time series, traced runs, sub-sweeps,
    bisections) declare those runs before it: the analysis ran none beside them, so the progress
    knew every run from the start. Those with extra runs declare some."""
    declared = {}
    for name in names():
        meta = json.loads((all_quick / name / "meta.json").read_text(encoding="utf-8"))
        assert meta["extra_runs"]["undeclared"] == 0, (name, meta["extra_runs"])
        declared[name] = meta["extra_runs"]["declared"]
    assert all(declared[n] > 0 for n in ("coresync", "collapse", "protego", "synergy")), declared
    assert declared["allocators"] == declared["harvest"] == declared["load-shift"] == 0, declared
