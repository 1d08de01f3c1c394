"""What a newcomer reads and runs: the README's first screenful, the docs site (built strictly),
the example notebook and the sweep spec to start from."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli


def test_readme_is_short_and_opens_with_the_commands_the_papers_and_the_recipe():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 400
    text = "\n".join(lines)
    assert lines.index("bash scripts/run-main   # install; reproduce the five papers (quick profiles, a few minutes); "
                       "write an HTML report") < 20
    # (3100: the reproduction table's thesis column, each paper's thesis verdict, takes a line's worth)
    assert text.index("## The five papers") < text.index("## Compare policies on your own workload") < 3100
    import re

    history = re.findall(r"\b(?:issue|session|stop) \d+|review mend", text, flags=re.I)
    assert not history, f"development history in the README: {history}"


def test_readme_table_is_generated_from_a_summary(tmp_path):
    from microsched.reproduce.framework import summary_markdown

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    begin, end = readme.index("<!-- reproductions:begin -->"), readme.index("<!-- reproductions:end -->")
    block = readme[begin:end]
    if "| **all** |" in block:  # filled in: it must be what the generator writes, not typed by hand
        table = block[block.index("| paper |"):].split("\n\n")[0]  # the theses' lines follow the table
        assert table.strip().splitlines()[-1].startswith("| **all** |")
        empty = {"papers": [], "counts": {v: 0 for v in (
            "reproduced", "direction", "not_reproduced", "out_of_regime", "model_check", "derived")}, "wall_s": 0}
        headers = {summary_markdown(empty).splitlines()[0], summary_markdown(empty, quick=empty).splitlines()[0]}
        rows = table.strip().splitlines()
        assert rows[0] in headers
        assert all(row.count("|") == rows[0].count("|") for row in rows)


def test_readme_opening_states_the_counts_of_its_own_table():
    """The first paragraph once said microsched "reproduces five papers" above a table of 110
    claims reproduced and 153 not: it now states the table's "all" row, and scripts/readme-table
    rewrites both together."""
    import re

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    opening = " ".join(readme.split("\n\n")[1].split())
    assert "reproduces five papers" not in opening
    m = re.search(r"Of the (\d+) claims judged, (\d+) reproduce the paper's number, (\d+) only its direction and "
                  r"(\d+) do not \(the table below, with the cause of each miss; (\d+) more fall outside", opening)
    assert m, opening
    judged, reproduced, direction, not_reproduced, out_of_regime = map(int, m.groups())
    lines = readme.splitlines()
    header = [c.strip() for c in next(line for line in lines if line.startswith("| paper |")).strip().strip("|").split("|")]
    row = next(line for line in lines if line.startswith("| **all** |"))
    cells = dict(zip(header, (c.strip().strip("*") for c in row.strip().strip("|").split("|"))))
    table = [int(cells[k]) for k in ("reproduced", "direction", "not reproduced", "out of regime")]
    assert [reproduced, direction, not_reproduced, out_of_regime] == table
    assert judged == reproduced + direction + not_reproduced


@pytest.mark.skipif(shutil.which("mkdocs") is None and not any(
    (Path(p) / "mkdocs").exists() for p in os.environ.get("PATH", "").split(":")), reason="mkdocs not installed")
def test_docs_site_builds_strictly(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=REPO, capture_output=True, text=True, timeout=300, env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    ref = (tmp_path / "site" / "reference" / "scenario" / "index.html").read_text(encoding="utf-8")
    assert "server.max_cores" in ref and "policy.allocator" in ref  # generated from the schema
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "ClaimSpec" in api and "compare" in api


def test_example_notebook_runs(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(REPO / "examples" / "compare.ipynb", as_version=4)
    env_before = dict(os.environ)
    os.environ.update(MICROSCHED_EXAMPLES=str(REPO / "examples"), MICROSCHED_EXAMPLE_MS="30")
    try:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                                ).execute()
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the notebook shows its figures"
    assert (tmp_path / "out" / "compare-notebook" / "compare_latency.png").is_file()


def test_policies_notebook_runs(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(REPO / "examples" / "policies.ipynb", as_version=4)
    env_before = dict(os.environ)
    os.environ.update(MICROSCHED_EXAMPLES=str(REPO / "examples"), MICROSCHED_EXAMPLE_MS="10")
    try:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                                ).execute()
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the notebook shows its figures"
    text = "".join(o.get("text", "") for o in outputs)
    assert "all invariants hold" in text  # the check ran and passed
    assert (tmp_path / "out" / "policies-notebook" / "compare_cores.png").is_file()


def test_policies_page_shows_the_tutorial_policy_as_it_is():
    # The page's listing is the file the notebook and the tests run, not a copy drifting from it.
    page = (REPO / "docs" / "policies.md").read_text(encoding="utf-8")
    assert (REPO / "examples" / "policies" / "delay_hysteresis.py").read_text(encoding="utf-8") in page


def test_example_sweep_spec_runs(tmp_path):
    r = run_cli("sweep", REPO / "examples" / "sweep.toml", "--quick", "--jobs", "1", "--out", tmp_path / "s")
    assert r.code == 0, r.err
    assert (tmp_path / "s" / "results.parquet").is_file()
