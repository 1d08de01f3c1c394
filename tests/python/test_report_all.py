"""The report of `reproduce --all` (issue 45), on a summary fixture with the five papers' theses,
made in milliseconds (no run): its first screen in headless Chromium at 1400 × 900 names each
paper's thesis and verdict; every figure of a reproduction is on the page, captioned, the
paper's numbers first; claims are folded by verdict; badges are coloured by the share reproduced;
ids are unique; a summary without theses says so instead of failing."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from conftest import run_cli

PAPERS = {  # paper key: (title, reproductions, thesis verdict)
    "coresync": ("CoreSync (Pardeshi et al., ICNP'25)", ["allocators", "coresync"], "not_shown"),
    "study": ("Core allocation vs overload control (simulation study)", ["collapse", "load-shift"], "direction"),
    "protego": ("Protego (NSDI'23)", ["protego"], "shown"),
    "synergy": ("Synergy (IFIP Networking 2026)", ["synergy"], "direction"),
    "harvest": ("HarvestContainers (Hall et al., NSDI'26)", ["harvest"], "shown"),
}
STATEMENTS = {k: f"THESIS-{k}: the paper's central claim about {k}, in one sentence" for k in PAPERS}


def _claims(name: str) -> list[dict]:
    return [
        {"id": f"{name}-ok", "claim": "a number that reproduces", "paper": 2.0, "measured": 2.05, "ci95": 0.05,
         "verdict": "reproduced", "holds": True, "kind": "ratio", "band": [1.6, 2.5], "tolerance": "×/÷ 1.25"},
        {"id": f"{name}-miss", "claim": "a number that does not", "paper": 0.68, "measured": 1.13, "ci95": 0.02,
         "verdict": "not_reproduced", "holds": False, "kind": "ratio", "band": [0.544, 0.85],
         "cause": {"text": "no session ever drains, so credits never go back", "evidence": {"drained": 0}}},
        {"id": f"{name}-dir", "claim": "a direction only", "paper": 3.0, "measured": 1.4, "ci95": 0.1,
         "verdict": "direction", "holds": False, "kind": "ratio", "band": [2.4, 3.75],
         "cause": {"text": "no session ever drains, so credits never go back", "evidence": {}}},
        {"id": f"{name}-check", "claim": "a model check", "paper": 0.01, "measured": 0.001, "verdict": "model_check",
         "holds": True, "passed": True, "kind": "check"},
    ]


def _png(path: Path, wide: bool) -> None:
    """A plain grey PNG, as wide as a five-panel figure or as a one-panel one (written by hand:
    drawing them with matplotlib would cost the test seconds)."""
    import struct
    import zlib

    width, height = (2200, 300) if wide else (600, 400)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\xc8" * width for _ in range(height))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def all_dir(tmp_path_factory) -> Path:
    """A `reproduce --all` output as the report reads it: summary.json with theses (the contract
    of the verdict issue), each reproduction's claims.json, meta.json and figures."""
    d = tmp_path_factory.mktemp("all")
    papers = []
    for key, (title, repros, verdict) in PAPERS.items():
        for r in repros:
            rd = d / r
            rd.mkdir()
            (rd / "claims.json").write_text(json.dumps(_claims(r)), encoding="utf-8")
            (rd / "meta.json").write_text(json.dumps({"reproduction": r, "figure": "Fig. 1", "description": r}),
                                          encoding="utf-8")
        counts = {"reproduced": len(repros), "direction": len(repros), "not_reproduced": len(repros),
                  "out_of_regime": 0, "model_check": len(repros)}
        papers.append({"paper": key, "title": title, "reproductions": repros, "wall_s": 1.0, "counts": counts,
                       "errors": {}, "thesis": {"statement": STATEMENTS[key], "source": "§1", "verdict": verdict,
                                                "evidence": f"evidence of {key}",
                                                "claims": [f"{repros[0]}-ok", f"{repros[0]}-miss"]}})
    # Protego draws eight figures (more than the six the old report kept), one of them five panels wide.
    for i, name in enumerate(["protego_fig9_fig11", "protego_fig3", "protego_fig5", "protego_fig6", "protego_fig7",
                              "protego_fig10", "protego_fig12", "protego_fig13", "zz_undeclared"]):
        _png(d / "protego" / f"{name}.png", wide=i == 0)
    # The report draws a reproduction's claims figure from claims.json when the run predates it:
    # protego's is left to it; the others exist already (as a run now writes them), which keeps
    # this fixture fast.
    for key, (_t, repros, _v) in PAPERS.items():
        for r in repros:
            if r != "protego":
                _png(d / r / "claims_vs_paper.png", wide=False)
    _png(d / "synergy" / "maxload_vs_paper.png", wide=False)
    _png(d / "synergy" / "fig3_high.png", wide=False)
    summary = {"quick": True, "jobs": 2, "wall_s": 7.0, "papers": papers,
               "counts": {v: sum(p["counts"][v] for p in papers) for v in papers[0]["counts"]},
               "theses": [{"paper": p["paper"], "title": p["title"], "statement": p["thesis"]["statement"],
                           "verdict": p["thesis"]["verdict"], "evidence": p["thesis"]["evidence"]} for p in papers]}
    (d / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    r = run_cli("report", d)
    assert r.code == 0, r.err
    return d


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("chromium not found: apt-get install -y chromium (scripts/test installs it)")


# Injected into a copy of the report (the report itself has no script): writes, for every
# element of the theses table, whether it lies within the first screen, into the DOM that
# --dump-dom prints.
PROBE = """<script>
window.addEventListener('load', () => {
  const out = [];
  document.querySelectorAll('table.theses tbody tr').forEach(tr => {
    const r = tr.getBoundingClientRect();
    out.push({text: tr.innerText, bottom: r.bottom, top: r.top});
  });
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify({rows: out, h: window.innerHeight, w: window.innerWidth});
  document.body.appendChild(pre);
});
</script>"""


def test_first_screen_names_each_thesis_and_verdict(all_dir: Path, tmp_path: Path) -> None:
    page = (all_dir / "report.html").read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        r = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            "--disable-background-networking", "--disable-component-update", "--disable-sync",
                            f"--user-data-dir={profile}", "--window-size=1400,900", "--virtual-time-budget=3000",
                            "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r'<pre id="probe">(.*?)</pre>', r.stdout, flags=re.S)
    assert m, "the probe did not run"
    import html

    probe_data = json.loads(html.unescape(m.group(1)))
    # The viewport of a 1400 × 900 window (headless Chromium keeps some of its height for itself).
    assert probe_data["w"] == 1400 and 600 <= probe_data["h"] <= 900, probe_data
    rows = probe_data["rows"]
    assert len(rows) == 5
    labels = {"shown": "shown", "direction": "direction only", "not_shown": "not shown"}
    for key, (title, _repros, verdict) in PAPERS.items():
        row = next((x for x in rows if STATEMENTS[key] in x["text"]), None)
        assert row is not None, f"{key}'s thesis is not in the theses table"
        assert title in row["text"] and labels[verdict] in row["text"]
        assert row["bottom"] <= probe_data["h"], f"{key}'s thesis is below the first screen: {row}"


def test_every_figure_is_shown_captioned_with_the_paper_numbers_first(all_dir: Path) -> None:
    page = (all_dir / "report.html").read_text(encoding="utf-8")
    protego = page[page.index('id="paper-protego"'):page.index('id="paper-synergy"')]
    # the thesis's lead figure, then all nine PNGs of protego plus the claims figure drawn from
    # claims.json: none dropped
    assert protego.count("<figure") == 11
    assert "zz_undeclared.png (no caption declared by the reproduction)" in protego
    caps = re.findall(r"<figcaption>(.*?)</figcaption>", protego)
    assert caps[0].startswith("◆ The claims the thesis rests on")  # the paper's lead figure
    assert caps[1].startswith("◆ The paper&#x27;s numbers beside ours")  # the reproduction's claims figure
    assert caps[2].startswith("Fig. 9 and 11 (headline)")  # then the declared order
    assert '<figure class="wide"><a href="protego/protego_fig9_fig11.png"' in protego
    synergy = page[page.index('id="paper-synergy"'):page.index('id="paper-harvest"')]
    caps = re.findall(r"<figcaption>(.*?)</figcaption>", synergy)
    assert caps[1].startswith("◆ The paper") and caps[2].startswith("◆ Maximum load at the p99.9 slowdown SLO")
    assert (all_dir / "protego" / "claims_vs_paper.png").is_file()


def test_claims_folded_by_verdict_badges_by_share_unique_ids(all_dir: Path) -> None:
    page = (all_dir / "report.html").read_text(encoding="utf-8")
    ids = Counter(re.findall(r'\bid="([^"]+)"', page))
    assert ids and all(n == 1 for n in ids.values()), [i for i, n in ids.items() if n > 1]
    hrefs = set(re.findall(r'href="#([^"]+)"', page))
    assert hrefs <= set(ids), hrefs - set(ids)
    assert page.count('<details class="verdict">') == 7 * 4  # four verdicts in each of the seven reproductions
    assert "<summary><b>not reproduced</b> (1)</summary>" in page
    # 1 of 3 judged claims reproduced in each: amber; the theses' verdicts get their own colours
    assert '<span class="badge mid">1 of 3 reproduced</span>' in page
    assert '<span class="badge bad">not shown</span>' in page and '<span class="badge ok">shown</span>' in page
    why = re.findall(r'<p class="why">(.*?)</p>', page)
    assert len(why) == 5 and all("no session ever drains" in w for w in why)


def test_share_colours() -> None:
    from microsched.report import share_class

    assert share_class(15, 18) == "ok" and share_class(5, 12) == "mid" and share_class(2, 12) == "bad"
    assert share_class(0, 0) == "none"


def test_summary_without_theses_says_so(all_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "old"
    shutil.copytree(all_dir, d)
    summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
    for p in summary["papers"]:
        p.pop("thesis")
    summary.pop("theses")
    (d / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    r = run_cli("report", d)
    assert r.code == 0, r.err
    page = (d / "report.html").read_text(encoding="utf-8")
    assert page.count("thesis not declared") == 10  # the theses table and each paper's section


def test_docs_pages_show_the_same_figures_and_counts(all_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """The reproduction pages of the docs site end with the paper's thesis, counts and every
    figure of its reproductions, generated by docs/hooks.py from a `reproduce --all` output."""
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    monkeypatch.setattr(hooks, "FIGURES_DIR", tmp_path / "figures")
    monkeypatch.setenv("MICROSCHED_DOCS_RESULTS", str(all_dir))
    hooks.copy_reproduction_figures()
    text = hooks.reproduction_section("protego")
    assert f"**Thesis:** {STATEMENTS['protego']}" in text and "**Verdict:** shown." in text
    assert "**1 reproduced**, 1 direction only, 1 not reproduced" in text
    shown = re.findall(r"!\[[^]]*\]\(figures/protego/([^)]+)\)", text)
    assert set(shown) == {p.name for p in (all_dir / "protego").glob("*.png")}  # every figure, none dropped
    assert shown[0] == "claims_vs_paper.png"
    assert all((tmp_path / "figures" / "protego" / f).is_file() for f in shown)
    # without an output: the figure list with captions and the README table's counts
    monkeypatch.setenv("MICROSCHED_DOCS_RESULTS", str(tmp_path / "nothing"))
    hooks.copy_reproduction_figures()
    text = hooks.reproduction_section("synergy")
    assert "- `maxload_vs_paper.png`: ◆ Maximum load" in text and "reproduced**" in text


def test_theses_from_the_top_level_list(all_dir: Path, tmp_path: Path) -> None:
    """summary["theses"] alone (no per-paper thesis) is read too."""
    d = tmp_path / "top"
    shutil.copytree(all_dir, d)
    summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
    for p in summary["papers"]:
        p.pop("thesis")
    (d / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    assert run_cli("report", d).code == 0
    page = (d / "report.html").read_text(encoding="utf-8")
    import html

    assert "thesis not declared" not in page
    assert all(html.escape(t, quote=True) in page for t in STATEMENTS.values())


def test_each_reproduction_declares_the_figures_it_draws() -> None:
    """Every PNG name a reproduction's code saves is in its declared figure list (with a caption),
    so the report shows it captioned; a declared figure names a file the code saves."""
    import inspect

    from microsched.reproduce import framework
    from microsched.reproduce.paper_figure import FILENAME

    modules = {"allocators": ["allocators"], "coresync": ["coresync", "coresync_report", "coresync_timeseries"],
               "collapse": ["collapse"], "load-shift": ["loadshift"], "protego": ["protego"],
               "synergy": ["synergy"], "harvest": ["harvest"]}
    for name, mods in modules.items():
        repro = framework.get(name)
        source = "".join(inspect.getsource(__import__(f"microsched.reproduce.{m}", fromlist=["x"])) for m in mods)
        saved = set(re.findall(r'"([A-Za-z0-9_]+\.png)"', source))
        declared = {f.file for f in repro.figures}
        assert saved <= declared, (name, saved - declared)
        assert all(f.caption and not f.caption.endswith(".png") for f in repro.figures), name
        for f in declared - saved:  # built names (protego_{name}.png): their stem is in the code
            assert f.removesuffix(".png").split("_", 1)[-1] in source, (name, f)
        listed = repro.figure_list([FILENAME, *sorted(declared), "extra.png"])
        assert listed[0]["file"] == FILENAME and listed[-1] == {"file": "extra.png", "caption": "",
                                                                "paper_numbers": False}
        assert [f["paper_numbers"] for f in listed[:-1]] == sorted((f["paper_numbers"] for f in listed[:-1]),
                                                                   reverse=True)
