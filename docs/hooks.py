"""mkdocs hooks: the scenario reference is generated from the simulator's JSON Schema, and the
changelog is the repository's CHANGELOG.md, so neither can drift from what it documents."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def scenario_reference() -> str:
    """Every field of the schema, the policies' parameters per kind (microsched.schema_doc, the
    same rows as `microsched policies`)."""
    from microsched.schema_doc import reference_markdown

    return reference_markdown()


def on_pre_build(config) -> None:  # noqa: ANN001 - mkdocs' hook signature
    ref = ROOT / "docs" / "reference"
    ref.mkdir(exist_ok=True)
    text = scenario_reference()
    path = ref / "scenario.md"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    log = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    cl = ROOT / "docs" / "changelog.md"
    if not cl.is_file() or cl.read_text(encoding="utf-8") != log:
        cl.write_text(log, encoding="utf-8")
    copy_reproduction_figures()


# ---------------------------------------------------------------------------------------------
# The reproduction pages: each paper's figures and counts, generated like the report's.

# Where `scripts/run-main` writes `reproduce --all`; MICROSCHED_DOCS_RESULTS names another.
DEFAULT_RESULTS = ROOT / "out" / "papers"
FIGURES_DIR = ROOT / "docs" / "reproductions" / "figures"


def _results_dir() -> Path | None:
    import os

    d = Path(os.environ.get("MICROSCHED_DOCS_RESULTS") or DEFAULT_RESULTS)
    return d if (d / "summary.json").is_file() else None


def copy_reproduction_figures() -> None:
    """Copies the figures of a `reproduce --all` output into the docs (docs/reproductions/
    figures/NAME/, not committed), so the pages can show them; without an output, nothing."""
    import shutil

    d = _results_dir()
    if FIGURES_DIR.is_dir():
        shutil.rmtree(FIGURES_DIR)
    if d is None:
        return
    for png in d.glob("*/*.png"):
        target = FIGURES_DIR / png.parent.name / png.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, target)


def _readme_counts() -> dict[str, dict[str, str]]:
    """Each paper's counts (and thesis verdict, when the table has it) as the README's generated
    table states them (by title), read by the table's header so that a new column moves nothing."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    names = {"reproduced": "reproduced", "direction": "direction", "not reproduced": "not_reproduced",
             "out of regime": "out_of_regime", "model checks": "model_check", "thesis": "thesis"}
    out, header = {}, None
    for line in text.splitlines():
        if line.startswith("|---"):
            continue
        if not line.startswith("| "):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "paper":
            header = cells
        elif header and not line.startswith(("| **all**", "|---")) and len(cells) == len(header):
            out[cells[0]] = {names[h]: c for h, c in zip(header, cells) if h in names}
    return out


def reproduction_section(paper: str) -> str:
    """The generated part of a paper's page: the thesis and verdict (when the summary declares
    them), the counts by verdict, and every figure of its reproductions with its caption, the
    paper's numbers first, as the HTML report shows them."""
    import json

    from microsched.reproduce.framework import PAPER_OF, PAPERS, REGISTRY

    d = _results_dir()
    summary = json.loads((d / "summary.json").read_text(encoding="utf-8")) if d else {}
    entry = next((p for p in summary.get("papers", []) if p.get("paper") == paper), None)
    out = ["", "## Figures and verdicts", ""]
    if entry is not None:
        counts = {k: str(v) for k, v in entry.get("counts", {}).items()}
        source = f"the `reproduce --all` output in `{d.relative_to(ROOT) if d.is_relative_to(ROOT) else d}`"
    else:
        counts = _readme_counts().get(PAPERS[paper], {})
        source = "the README's table (a `reproduce --all` summary)"
    thesis = (entry or {}).get("thesis")
    if isinstance(thesis, dict) and thesis.get("statement"):
        verdict = str(thesis.get("verdict", "")).replace("_", " ")
        out += [f"**Thesis:** {thesis['statement']}  ", f"**Verdict:** {verdict}. {thesis.get('evidence', '')}", ""]
    if counts:
        out.append(f"Claims, from {source}: **{counts.get('reproduced', '?')} reproduced**, "
                   f"{counts.get('direction', '?')} direction only, {counts.get('not_reproduced', '?')} not reproduced, "
                   f"{counts.get('out_of_regime', '?')} out of regime; {counts.get('model_check', '?')} model checks.")
        out.append("")
    names = [n for n, p in PAPER_OF.items() if p == paper and n in REGISTRY]
    for name in names:
        repro = REGISTRY[name]
        drawn = sorted(p.name for p in (FIGURES_DIR / name).glob("*.png")) if (FIGURES_DIR / name).is_dir() else []
        declared = [f.file for f in repro.figures]
        listed = repro.figure_list(drawn) if drawn else repro.figure_list(["claims_vs_paper.png", *declared])
        out += [f"### `{name}`", ""]
        if not drawn:
            out += ["The figures below are drawn by `microsched reproduce " + name + "` (or `scripts/run-main`); "
                    "build the docs after a run to see them here.", ""]
        for f in listed:
            mark = "◆ " if f["paper_numbers"] else ""
            caption = f["caption"] or f"{f['file']} (no caption declared)"
            if drawn:
                out += [f"![{f['file']}](figures/{name}/{f['file']})", "", f"*{mark}{caption}*", ""]
            else:
                out.append(f"- `{f['file']}`: {mark}{caption}")
        out.append("")
    out.append("◆: the figure draws the paper's own numbers beside ours.")
    return "\n".join(out) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 - mkdocs' hook signature
    src = page.file.src_uri
    if src.startswith("reproductions/") and src.endswith(".md"):
        paper = src.removeprefix("reproductions/").removesuffix(".md")
        from microsched.reproduce.framework import PAPERS

        if paper in PAPERS:
            return markdown.rstrip() + "\n" + reproduction_section(paper)
    return markdown
