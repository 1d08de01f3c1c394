"""The scenario reference and `microsched policies` (issue 45): both are generated from the
schema (microsched.schema_doc), follow its oneOf so every allocator, overload controller and
queueing policy is listed with each parameter, default, unit and description, show no raw rustdoc
links, and every field of the schema has a description (a Rust doc comment on the config struct)."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from microsched import schema
from microsched.schema_doc import POLICY_KINDS, fields, plain, reference_markdown


@pytest.fixture(scope="module")
def every():
    return fields(schema())


def _kinds(family: str) -> list[str]:
    s = schema()
    defs = s["definitions"]
    name = {"allocator": "AllocatorCfg", "overload": "OverloadCfg", "sched": "SchedCfg"}[family]
    return [o["properties"]["kind"]["enum"][0] for o in defs[name]["oneOf"]]


def test_every_schema_field_has_a_description(every):
    missing = [f"{f.key}" + (f" (kind = {f.variant})" if f.variant else "") for f in every if not f.description]
    assert not missing, f"{len(missing)} fields of the schema have no description (add a doc comment on the Rust " \
                        f"config struct): {missing}"


def test_reference_lists_every_policy_with_its_parameters(every):
    text = reference_markdown()
    for key in ("network.rtt_us", "network.jitter_us", "clients.sessions", "load.fraction", "server.max_cores"):
        assert f"| `{key}` |" in text, key
    for family, key in POLICY_KINDS.items():
        assert f"## `{key}`" in text
        for kind in _kinds(family):
            assert f'### `kind = "{kind}"`' in text, (family, kind)
    # a parameter row carries its default and unit
    row = next(line for line in text.splitlines() if line.startswith("| `policy.allocator.delay_threshold_us` |"))
    assert "`5.0`" in row and "| µs |" in row
    import re

    links = re.findall(r"\[`[\w:]+`\]|crate::", text)  # an interval "[`a`, `b`]" is not a link
    assert not links, f"raw rustdoc links in the reference: {links}"
    assert "| `network.rtt_us` | number | `10.0` | µs | Round-trip time" in text


def test_rustdoc_links_become_plain_names():
    assert plain("see [`crate::topology`] and [`Foo`](crate::bar::Foo)") == "see `topology` and `Foo`"
    assert plain("see [crate::sched]") == "see `sched`"


def test_policies_command_prints_every_kind_and_parameter(every):
    r = run_cli("policies", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert set(data) == set(POLICY_KINDS)
    for family in POLICY_KINDS:
        kinds = {row["kind"] for row in data[family]}
        assert kinds == set(_kinds(family)), family
        assert all(row["description"] for row in data[family]), family
    r = run_cli("policies", "overload")
    assert r.code == 0, r.err
    for kind in _kinds("overload"):
        assert kind in r.out
    params = {f.name for f in every if f.family == "policy.overload" and not f.key.endswith(".kind")}
    for p in params:
        assert p in r.out, p
    r = run_cli("policies", "scheduler")
    assert r.code == 2 and "use one of allocator, overload, sched" in r.err
