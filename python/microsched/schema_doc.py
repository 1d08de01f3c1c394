"""The scenario format as rows a person reads: every field of the JSON Schema (``microsched
schema``) with its type, default, unit and description, following ``$ref``, ``allOf`` wrappers,
nullable ``anyOf`` and the tagged ``oneOf`` of the policies (one group of parameters per
``kind``). The docs' scenario reference (``docs/hooks.py``) and ``microsched policies`` are both
made from :func:`fields`, so they cannot disagree with each other or with the simulator.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator

# The policy families ``microsched policies KIND`` lists, by the scenario key they sit under.
POLICY_KINDS = {"allocator": "policy.allocator", "overload": "policy.overload", "sched": "policy.sched"}

# Units read off a field name's suffix: the scenario format spells every unit in its keys.
_UNIT_SUFFIXES = (("_us", "µs"), ("_ms", "ms"), ("_ns", "ns"), ("_s", "s"), ("_rps", "requests/s"),
                  ("_bytes", "bytes"), ("_pct", "%"), ("_hz", "Hz"))

# Rustdoc intra-doc links, which schemars copies verbatim from the doc comments:
# [`crate::topology`], [`Foo`](crate::bar::Foo), [crate::sched].
_RUSTDOC_LINK = re.compile(r"\[`([^`\]]+)`\](?:\([^)\s]*\))?|\[((?:crate|super|self)::[\w:]+)\]")


# The top-level keys in the order a scenario is written; co-tenant applications repeat them, so
# they come last and point back.
_ORDER = {n: i for i, n in enumerate((
    "name", "seed", "duration_ms", "warmup_ms", "slo_us", "workload", "load", "clients", "network", "server",
    "policy", "metrics", "runtime", "applications"))}


@dataclass(frozen=True)
class Field:
    """One documented field. ``key`` is dotted as ``--set`` takes it (``[]`` marks a list's
    items); ``variant`` is the tag value (``kind = "caladan"``) the field belongs to, if any."""

    key: str
    type: str
    default: str
    unit: str
    description: str
    variant: str = ""
    tag: str = ""  # the tag's field name ("kind", "dist") when ``variant`` is set
    family: str = ""  # the key of the tagged field this variant belongs to ("policy.allocator")

    @property
    def name(self) -> str:
        return self.key.rsplit(".", 1)[-1]


def plain(text: str) -> str:
    """A description without rustdoc links (``[`crate::topology`]`` becomes ``topology``) and
    with its lines joined."""

    def name(m: re.Match) -> str:
        target = m.group(1) or m.group(2)
        return "`" + target.rsplit("::", 1)[-1] + "`"

    return " ".join(_RUSTDOC_LINK.sub(name, text or "").split())


def unit_of(key: str) -> str:
    name = key.rsplit(".", 1)[-1].removesuffix("[]")
    for suffix, unit in _UNIT_SUFFIXES:
        if name.endswith(suffix):
            return unit
    return ""


class _Walker:
    def __init__(self, schema: dict) -> None:
        self.defs = schema.get("definitions") or schema.get("$defs") or {}
        # A definition used in several places (a distribution, a workload) is expanded where it
        # first appears; later uses point there instead of repeating every row.
        self.expanded: dict[str, str] = {}

    def resolve(self, p: dict) -> dict:
        """``p`` with ``$ref`` and single-element ``allOf`` merged in (the property's own
        description and default win) and a nullable ``anyOf`` [X, null] made X."""
        p = dict(p)
        for _ in range(8):
            if "$ref" in p:
                name = p.pop("$ref").rsplit("/", 1)[-1]
                target = self.defs.get(name, {})
                p = {**target, **p, "definition": name}  # the property's own description and default win
                continue
            if isinstance(p.get("allOf"), list) and len(p["allOf"]) == 1:
                inner = p.pop("allOf")[0]
                p = {**self.resolve(inner), **{k: v for k, v in p.items() if k in ("description", "default")}}
                continue
            any_of = p.get("anyOf")
            if isinstance(any_of, list) and len(any_of) == 2 and {"type": "null"} in any_of:
                inner = next(a for a in any_of if a != {"type": "null"})
                rest = {k: v for k, v in p.items() if k != "anyOf"}
                p = {**self.resolve(inner), **{k: v for k, v in rest.items() if k in ("description", "default")},
                     "nullable": True}
                continue
            break
        return p

    def type_of(self, p: dict) -> str:
        if "enum" in p:
            return " \\| ".join(f"`{e}`" for e in p["enum"])
        one = p.get("oneOf")
        if isinstance(one, list):
            tags = _tag_values(one)
            if tags:
                return "one of " + ", ".join(f"`{v}`" for v in tags[1])
            values = [v for o in one for v in (o.get("enum") or ([o["const"]] if "const" in o else []))]
            if values and len(values) == len(one):
                return " \\| ".join(f"`{v}`" for v in values)
        kind = p.get("type", "")
        if isinstance(kind, list):
            kind = " or ".join(k for k in kind if k != "null") + (" or null" if "null" in kind else "")
        if p.get("nullable") and kind and "null" not in kind:
            kind += " or null"
        if kind == "array":
            items = self.resolve(p.get("items") or {})
            inner = self.type_of(items) if items else ""
            return f"list of {inner}" if inner and inner != "object" else "list"
        if kind == "object" and isinstance(p.get("additionalProperties"), dict) and not p.get("properties"):
            return "table of " + (self.type_of(self.resolve(p["additionalProperties"])) or "values")
        return kind or "any"

    def description_of(self, p: dict) -> str:
        text = plain(str(p.get("description", "")))
        one = p.get("oneOf")
        if isinstance(one, list) and not _tag_values(one):
            # An enum whose values each carry a doc comment: list them with theirs.
            parts = []
            for o in one:
                values = o.get("enum") or ([o["const"]] if "const" in o else [])
                if len(values) == 1 and o.get("description"):
                    parts.append(f"`{values[0]}`: {plain(o['description'])}")
            if parts:
                text = (text + " " if text else "") + "; ".join(parts)
        return text

    def fields(self, props: dict, prefix: str, depth: int = 0, **variant: str) -> Iterator[Field]:
        for name in sorted(props, key=lambda n: (_ORDER.get(n, len(_ORDER)), n) if depth == 0 else (0, n)):
            p = self.resolve(props[name])
            key = f"{prefix}{name}"
            default = f"`{json.dumps(p['default'])}`" if "default" in p else ""
            tag_of = variant.get("tag")
            if tag_of and name == tag_of:
                continue  # the tag is the variant's own row
            description = self.description_of(p)
            items = self.resolve(p["items"]) if isinstance(p.get("items"), dict) else {}
            definition = p.get("definition") or items.get("definition")
            first = self.expanded.get(definition) if definition else None
            expandable = isinstance(p.get("properties"), dict) or isinstance(p.get("oneOf"), list) or \
                isinstance(items.get("properties"), dict) or isinstance(items.get("oneOf"), list)
            if first and expandable and not p.get("enum"):
                yield Field(key, self.type_of(p), default, unit_of(key),
                            (description + " " if description else "") + f"Same fields as `{first}`.", **variant)
                continue
            if definition and expandable:
                self.expanded[definition] = key + ("[]" if items.get("definition") == definition else "")
            yield Field(key, self.type_of(p), default, unit_of(key), description, **variant)
            if depth >= 6:
                continue
            if isinstance(p.get("properties"), dict):
                yield from self.fields(p["properties"], key + ".", depth + 1, **variant)
            one = p.get("oneOf")
            tags = _tag_values(one) if isinstance(one, list) else None
            if tags:
                tag, values = tags
                for v, o in zip(values, one):
                    o = self.resolve(o)
                    yield Field(f"{key}.{tag}", f"`{v}`", "", "", plain(str(o.get("description", ""))),
                                variant=v, tag=tag, family=key)
                    yield from self.fields(o.get("properties") or {}, key + ".", depth + 1,
                                           variant=v, tag=tag, family=key)
            items = p.get("items")
            if isinstance(items, dict):
                items = self.resolve(items)
                if isinstance(items.get("properties"), dict):
                    yield from self.fields(items["properties"], key + "[].", depth + 1, **variant)
                one = items.get("oneOf")
                tags = _tag_values(one) if isinstance(one, list) else None
                if tags:
                    tag, values = tags
                    for v, o in zip(values, one):
                        o = self.resolve(o)
                        yield Field(f"{key}[].{tag}", f"`{v}`", "", "", plain(str(o.get("description", ""))),
                                    variant=v, tag=tag, family=key + "[]")
                        yield from self.fields(o.get("properties") or {}, key + "[].", depth + 1,
                                               variant=v, tag=tag, family=key + "[]")


def _tag_values(one: list) -> tuple[str, list[str]] | None:
    """(tag field, values) when every alternative of a ``oneOf`` is an object told apart by one
    required single-valued field (serde's internally tagged enums: ``kind``, ``dist``)."""
    if not one or not all(isinstance(o, dict) and o.get("type") == "object" for o in one):
        return None
    for tag in one[0].get("required", []):
        values = []
        for o in one:
            t = (o.get("properties") or {}).get(tag, {})
            vals = t.get("enum") or ([t["const"]] if "const" in t else [])
            if len(vals) != 1:
                break
            values.append(str(vals[0]))
        else:
            return tag, values
    return None


def fields(schema: dict | None = None) -> list[Field]:
    """Every field of the scenario format, in the order of the reference."""
    if schema is None:
        from .api import schema as _schema

        schema = _schema()
    return list(_Walker(schema).fields(schema.get("properties", {}), ""))


def policy_fields(kind: str | None = None, schema: dict | None = None) -> dict[str, list[Field]]:
    """The policy families (``allocator``, ``overload``, ``sched``, or the one ``kind`` names):
    for each, its variants' rows (the ``kind = ...`` row first, then its parameters)."""
    if kind is not None and kind not in POLICY_KINDS:
        raise ValueError(f"unknown policy kind {kind!r}: use one of {', '.join(POLICY_KINDS)}")
    every = fields(schema)
    wanted = [kind] if kind else list(POLICY_KINDS)
    return {k: [f for f in every if f.family == POLICY_KINDS[k]] for k in wanted}


def _md(text: str) -> str:
    return text.replace("|", "\\|") if "\\|" not in text else text


def reference_markdown(schema: dict | None = None) -> str:
    """The docs' scenario reference page."""
    every = fields(schema)
    out = ["# Scenario reference", "",
           "Every field of a scenario file, generated from the simulator's JSON Schema "
           "(`microsched schema`). Dotted keys are what `--set KEY=VALUE` and sweep grids take; `[]` marks "
           "the items of a list. The policies (`policy.allocator`, `policy.overload`, `policy.sched`) and the "
           "other tagged fields list their parameters per `kind` below the main table; "
           "`microsched policies [allocator|overload|sched]` prints the same on the command line.", "",
           "| key | type | default | unit | description |", "|---|---|---|---|---|"]
    for f in every:
        if not f.variant:
            out.append(f"| `{f.key}` | {f.type} | {f.default} | {f.unit} | {_md(f.description)} |")
    families: dict[str, list[Field]] = {}
    for f in every:
        if f.variant:
            families.setdefault(f.family, []).append(f)
    for family, rows in families.items():
        out += ["", f"## `{family}`", ""]
        by_variant: dict[str, list[Field]] = {}
        for f in rows:
            by_variant.setdefault(f.variant, []).append(f)
        for v, vrows in by_variant.items():
            head, params = vrows[0], vrows[1:]
            out += [f"### `{head.tag} = \"{v}\"`", "", _md(head.description) or "", ""]
            if params:
                out += ["| key | type | default | unit | description |", "|---|---|---|---|---|"]
                out += [f"| `{f.key}` | {f.type} | {f.default} | {f.unit} | {_md(f.description)} |" for f in params]
            else:
                out.append("No parameters.")
            out.append("")
    return "\n".join(out).rstrip() + "\n"
