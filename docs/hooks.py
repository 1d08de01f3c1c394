"""mkdocs hooks: the scenario reference is generated from the simulator's JSON Schema, and the
changelog is the repository's CHANGELOG.md, so neither can drift from what it documents."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rows(props: dict, defs: dict, prefix: str, out: list[str], depth: int = 0) -> None:
    for name, p in props.items():
        if "$ref" in p:
            p = {**defs.get(p["$ref"].rsplit("/", 1)[-1], {}), **{k: v for k, v in p.items() if k != "$ref"}}
        key = f"{prefix}{name}"
        kind = p.get("type", "")
        if isinstance(kind, list):
            kind = " or ".join(kind)
        if "enum" in p:
            kind = " \\| ".join(f"`{e}`" for e in p["enum"])
        default = f"`{json.dumps(p['default'])}`" if "default" in p else ""
        desc = " ".join(str(p.get("description", "")).split()).replace("|", "\\|")
        out.append(f"| `{key}` | {kind} | {default} | {desc} |")
        if isinstance(p.get("properties"), dict) and depth < 4:
            _rows(p["properties"], defs, key + ".", out, depth + 1)
        items = p.get("items")
        if isinstance(items, dict):
            if "$ref" in items:
                items = defs.get(items["$ref"].rsplit("/", 1)[-1], {})
            if isinstance(items.get("properties"), dict) and depth < 4:
                _rows(items["properties"], defs, key + "[].", out, depth + 1)


def scenario_reference() -> str:
    import microsched

    schema = microsched.schema()
    defs = schema.get("definitions", {}) or schema.get("$defs", {})
    out = ["# Scenario reference", "",
           "Every field of a scenario file, generated from the simulator's JSON Schema "
           "(`microsched schema`). Dotted keys are what `--set KEY=VALUE` and sweep grids take.", "",
           "| key | type | default | description |", "|---|---|---|---|"]
    _rows(schema.get("properties", {}), defs, "", out)
    return "\n".join(out) + "\n"


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
