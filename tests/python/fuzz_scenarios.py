"""A seeded corpus of mutated scenarios, and what each does to both front doors.

``python fuzz_scenarios.py N SEED`` mutates N scenarios (one to three mutations each, from a
few small bases: an M/M/c, Breakwater + Caladan, request programs with locks and a quantum, two
applications, an empirical CSV) and feeds each to the loader twice: as a Python dict (JSON, the
API's door) and as TOML text (the CLI's door). A scenario that validates is then run as it is
when its cost estimate is small, with a wall-clock guard. One JSON line per scenario on
stdout; the last line sums them up. ``test_robust.py`` runs this in a child process, so that
an abort (a Rust out-of-memory, rc 134) or a hang shows as such instead of killing pytest.
"""

from __future__ import annotations

import copy
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from conftest import SMALL, to_toml  # noqa: E402

NASTY: list[Any] = [
    float("nan"), float("inf"), float("-inf"), 0, 0.0, -1, -1.5, 1e-9, 0.001, 1e9, 1e15, 1e300, -1e300,
    2**63 - 1, 2**64, "abc", "", True, [], {}, [1, 2], {"x": 1}, 0.5, 3, 1e6,
]


def bases(csv: Path) -> list[dict]:
    bw = copy.deepcopy(SMALL)
    bw["policy"] = {"allocator": {"kind": "caladan"}, "overload": {"kind": "breakwater"}}
    bw["load"] = {"fraction": 1.2, "schedule": [{"at_ms": 10.0, "fraction": 0.5}]}
    prog = copy.deepcopy(SMALL)
    prog["server"]["preemption"] = {"quantum_us": 5.0}
    prog["workload"]["locks"] = [{"name": "g"}]
    prog["workload"]["types"][0]["paths"] = [
        {"steps": [{"op": "compute", "share": 0.5}, {"op": "lock", "lock": "g", "share": 0.5}, {"op": "yield"}]}]
    apps = copy.deepcopy(SMALL)
    apps["applications"] = [{"name": "batch", "load": {"rps": 20000.0},
                             "workload": {"types": [{"name": "b", "service": {"dist": "constant", "value_us": 20.0}}]}}]
    emp = copy.deepcopy(SMALL)
    emp["workload"]["types"] = [
        {"name": "e", "service": {"dist": "empirical", "csv": str(csv)}},
        {"name": "l", "ratio": 0.5, "service": {"dist": "lognormal", "mean_us": 5.0, "sigma": 1.0}},
        {"name": "b", "ratio": 0.1, "service": {"dist": "bimodal", "modes": [
            {"value_us": 1.0, "prob": 0.9}, {"value_us": 50.0, "prob": 0.1}]}},
    ]
    out = [copy.deepcopy(SMALL), bw, prog, apps, emp]
    for b in out:
        b["duration_ms"], b["warmup_ms"] = 5.0, 1.0
    return out


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys and indices) in a tree, tables and lists included."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, prefix + (i,))
    return out


def get(tree: Any, path: tuple) -> Any:
    for p in path:
        tree = tree[p]
    return tree


def dotted(path: tuple) -> str:
    s = ""
    for p in path:
        s += f"[{p}]" if isinstance(p, int) else (f".{p}" if s else str(p))
    return s


def mutate(tree: dict, rng: random.Random) -> str:
    """One random mutation in place; returns what it did."""
    ps = paths(tree)
    path = rng.choice(ps)
    parent, key = get(tree, path[:-1]), path[-1]
    op = rng.random()
    node = get(tree, path)
    if op < 0.4 and isinstance(node, (int, float)) and not isinstance(node, bool):
        # A plausible change: most of these still validate, and are run.
        f = rng.choice([0.25, 0.5, 2.0, 3.0])
        parent[key] = type(node)(node * f) if isinstance(node, float) else max(1, int(node * f))
        return f"scale {dotted(path)}*{f:g}"
    if op < 0.55:
        v = rng.choice(NASTY)
        parent[key] = copy.deepcopy(v)
        return f"set {dotted(path)}={v!r}"
    if op < 0.7:
        if isinstance(parent, list):
            parent.pop(key)
        else:
            del parent[key]
        return f"delete {dotted(path)}"
    if op < 0.8:
        node = get(tree, path)
        target = node if isinstance(node, dict) else (parent if isinstance(parent, dict) else tree)
        target["bogus_key"] = 1
        return f"unknown key near {dotted(path)}"
    if op < 0.9:
        v = rng.choice(["static", "shenango", "caladan", "breakwater", "none", "coresync", "utilization_range",
                        "delay_range", "exponential", "constant", "bimodal", "lognormal", "empirical", "pareto",
                        "compute", "lock", "yield", "central", "per_core"])
        parent[key] = v
        return f"set {dotted(path)}={v!r}"
    # Scale a number by a large or tiny factor.
    node = get(tree, path)
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        f = rng.choice([1e-12, 1e-6, 1e3, 1e6, 1e12, -1])
        parent[key] = node * f
        return f"scale {dotted(path)}*{f:g}"
    parent[key] = None
    return f"null {dotted(path)}"


def non_finite_paths(node: Any, prefix: tuple = ()) -> list[str]:
    if isinstance(node, float) and not math.isfinite(node):
        return [dotted(prefix)]
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in non_finite_paths(v, prefix + (k,))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in non_finite_paths(v, prefix + (i,))]
    return []


def has_none(node: Any) -> bool:
    if node is None:
        return True
    if isinstance(node, dict):
        return any(has_none(v) for v in node.values())
    if isinstance(node, list):
        return any(has_none(v) for v in node)
    return False


def names_a_field(field: str, tree: dict) -> bool:
    """The error's field is a key of the tree, or a missing key under an existing table."""
    parts: list[Any] = []
    for seg in field.replace("[", ".[").split("."):
        if seg:
            parts.append(int(seg[1:-1]) if seg.startswith("[") else seg)
    node: Any = tree
    for i, p in enumerate(parts):
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and isinstance(p, int) and p < len(node):
            node = node[p]
        else:
            # A key that is absent: fine if it is the last part (a required or defaulted key).
            return i == len(parts) - 1 and isinstance(node, dict)
    return True


def main(n: int, seed: int) -> int:
    sys.path.insert(0, str(HERE.parents[1] / "python"))
    import warnings

    from microsched.api import estimate, run, validate
    from microsched.scenario import Scenario

    warnings.simplefilter("ignore")
    tmp = Path(tempfile.mkdtemp(prefix="msfuzz"))
    csv = tmp / "svc.csv"
    csv.write_text("service_us\n5\n10\n20\n", encoding="utf-8")
    rng = random.Random(seed)
    base = bases(csv)
    totals = dict(scenarios=0, valid=0, errors=0, ran=0, crashes=0, hangs=0, non_finite_accepted=0,
                  error_without_field=0, doors_disagree=0, validated_but_run_failed=0, empty_windows=0,
                  empty_stats_printed=0)
    for i in range(n):
        tree = copy.deepcopy(rng.choice(base))
        what = [mutate(tree, rng) for _ in range(rng.randint(1, 3))]
        rec: dict[str, Any] = {"i": i, "mutations": what}
        totals["scenarios"] += 1
        try:
            validate(Scenario(tree, base_dir=tmp))
            rec["dict"] = "ok"
        except ValueError as e:
            rec["dict"] = str(e)
        except BaseException as e:  # noqa: BLE001 - a panic (pyo3 PanicException) is a crash
            rec["dict"] = f"CRASH {type(e).__name__}: {e}"
            totals["crashes"] += 1
        # The CLI's door: the same tree as TOML text (TOML has no null: skip those).
        if not has_none(tree):
            p = tmp / f"s{i}.toml"
            try:
                p.write_text(to_toml(tree), encoding="utf-8")
            except TypeError:
                p = None
            if p is not None:
                try:
                    validate(p)
                    rec["toml"] = "ok"
                except ValueError as e:
                    rec["toml"] = str(e)
                except BaseException as e:  # noqa: BLE001
                    rec["toml"] = f"CRASH {type(e).__name__}: {e}"
                    totals["crashes"] += 1
                # Big integers (beyond i64) are TOML syntax errors: the doors may differ there.
                if rec["toml"] != rec["dict"] and "invalid TOML" not in rec["toml"]:
                    totals["doors_disagree"] += 1
                    rec["disagree"] = True
        nf = non_finite_paths(tree)
        if rec["dict"] == "ok":
            totals["valid"] += 1
            if nf:
                totals["non_finite_accepted"] += 1
                rec["non_finite_accepted"] = nf
            try:
                cost = estimate(tree)
                if cost["events"] < 3e6:
                    t0 = time.monotonic()

                    def guard(done: float, total: float, t0: float = t0) -> None:
                        if time.monotonic() - t0 > 20:
                            raise TimeoutError(f"still running after 20 s ({done:.3f} of {total:.3f} ms)")

                    import warnings

                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        res = run(tree, progress=guard)
                    totals["ran"] += 1
                    # A window in which nothing completed must show no latency: its statistics
                    # are null, never the empty histogram's zeros.
                    s = res.summary
                    if sum(t["completed"] for t in s["by_type"]) == 0:
                        totals["empty_windows"] += 1
                        if any(v is not None for k in ("latency_us", "queueing_delay_us", "slowdown")
                               for v in s[k].values()):
                            totals["empty_stats_printed"] += 1
                            rec["run"] = "EMPTY_STATS printed for an empty window"

            except TimeoutError as e:
                totals["hangs"] += 1
                rec["run"] = f"HANG {e}"
            except ValueError as e:
                totals["validated_but_run_failed"] += 1
                rec["run"] = str(e)
            except BaseException as e:  # noqa: BLE001
                totals["crashes"] += 1
                rec["run"] = f"CRASH {type(e).__name__}: {e}"
        elif not rec["dict"].startswith("CRASH"):
            totals["errors"] += 1
            field = rec["dict"].split(": ", 1)[0]
            if nf and field not in nf:
                rec["non_finite_misnamed"] = (field, nf)
                totals["error_without_field"] += 1
            elif not names_a_field(field, tree):
                totals["error_without_field"] += 1
                rec["no_field"] = field
        print(json.dumps(rec, default=str), flush=True)
    print(json.dumps({"totals": totals}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]), int(sys.argv[2])))
