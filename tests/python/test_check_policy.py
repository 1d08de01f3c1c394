"""`microsched check-policy` (issue 43): the model's invariants on standard small scenarios.

* each planted faulty policy under tests/python/policies/ is flagged by the invariant its fault
  breaks, with the scenario and seed, and exit status 1: a leak of cores (keeps-up), a
  non-deterministic allocator (deterministic), a queueing policy that starves type 1
  (no-starvation), a controller that leaks credits (bounds);
* the Python port of Shenango, the tutorial's allocator and every built-in (named
  `builtin:KIND`, listed from the scenario schema) pass every invariant, exit status 0; the
  harvesting allocators on the harvest scenarios (one central run queue), on which harvest_cfs
  keeps up (on the per-core queues it fell to 1 core of 8 while 13-86 % of the requests were left
  waiting); the one exception, SEDA's start (Protego's artifact: nothing sent before 250 ms), is
  a known finding with its measured cause, exit status 3, never "holds";
* bad input (an unknown built-in, a class of no policy kind, a parameter it does not have) is
  one line and exit status 2.
"""

from __future__ import annotations

import json

import pytest

from conftest import REPO, run_cli

POLICIES = REPO / "tests" / "python" / "policies"
EXAMPLES = REPO / "examples" / "policies"


def check(target: str, *extra: str) -> tuple[int, dict, str]:
    r = run_cli("check-policy", target, "--json", *extra)
    report = json.loads(r.out) if r.out.strip() else {}
    return r.code, report, r.err


def failing(report: dict) -> set[str]:
    return {name for name, v in report["invariants"].items() if v["holds"] is False}


@pytest.mark.parametrize("target, invariant, also", [
    (f"{POLICIES / 'leaky.py'}:LeakCores", "keeps-up", set()),
    (f"{POLICIES / 'nondeterministic.py'}:CoinFlip", "deterministic", set()),
    (f"{POLICIES / 'leaky_credits.py'}:LeakCredits", "bounds", set()),
    # The starved type's requests also stay in flight: 10 % of the mix, over keeps-up's 2 %.
    (f"{POLICIES / 'starving.py'}:StarveType1", "no-starvation", {"keeps-up"}),
])
def test_each_planted_fault_is_flagged_by_its_invariant(target: str, invariant: str, also: set) -> None:
    code, report, err = check(target)
    assert code == 1, err
    assert not report["ok"]
    assert invariant in failing(report), report["invariants"]
    # The invariants the fault does not break hold.
    assert failing(report) == {invariant} | also, report["invariants"]
    fails = report["invariants"][invariant]["failures"]
    assert {f["seed"] for f in fails} == {1, 2}  # every seed shows it, each named
    assert all(f["scenario"] in report["scenarios"] and f["detail"] for f in fails)
    if invariant == "no-starvation":
        assert all(f["scenario"].endswith("-mix") and "`long`" in f["detail"] for f in fails)


def test_the_text_report_names_the_failing_scenario_and_seed() -> None:
    r = run_cli("check-policy", f"{POLICIES / 'starving.py'}:StarveType1")
    assert r.code == 1
    assert "FAILS   no-starvation" in r.out
    assert "sched-mix seed 1: type `long` completed no request" in r.out
    assert "sched-mix seed 2: type `long` completed no request" in r.out
    assert "holds   deterministic" in r.out and "some invariants do not hold" in r.out


# The Breakwater and d-FCFS ports land with their own branch; until then they are skipped, named.
PORTS = [pytest.param(f"{EXAMPLES / f}:{c}", k, marks=pytest.mark.skipif(not (EXAMPLES / f).is_file(),
                                                                        reason=f"examples/policies/{f} not here yet"))
         for f, c, k in (("breakwater.py", "Breakwater", "overload"), ("dfcfs.py", "DistributedFcfs", "sched"))]


def _builtins() -> list[str]:
    from microsched.cli.check_policy import _builtin_kinds

    return sorted(k for k in _builtin_kinds() if k != "python")


# What a built-in needs to run at all (documented in `check-policy --help`).
NEEDS = {"concord": ("--set", "server.dispatcher.cost_ns=100", "--set", "server.max_cores=9")}
# Built-ins whose own rule fails an invariant on the standard scenarios: the known finding's
# invariant and the words its measured cause must contain.
KNOWN = {"seda": ("no-starvation", "2-4 requests/s with an empty token bucket")}


@pytest.mark.parametrize("target, kind", [
    (f"{EXAMPLES / 'shenango.py'}:Shenango", "allocator"),
    *PORTS,
    (f"{EXAMPLES / 'delay_hysteresis.py'}:DelayHysteresis", "allocator"),
])
def test_ports_pass(target: str, kind: str) -> None:
    code, report, err = check(target)
    assert code == 0, (err, report)
    assert report["ok"] and report["kind"] == kind
    for name, v in report["invariants"].items():
        assert v["holds"] is True and v["checked"] > 0, name  # every invariant was judged, none skipped


def test_every_builtin_is_checked() -> None:
    # The list the test below runs is the schema's: a new built-in is checked without a line here.
    names = _builtins()
    assert {"shenango", "caladan", "harvest_cfs", "harvest_acbf", "breakwater", "seda", "queue", "concord"} <= set(names)
    assert "python" not in names


@pytest.mark.parametrize("name", _builtins())
def test_every_builtin_passes_or_is_a_known_finding(name: str) -> None:
    code, report, err = check(f"builtin:{name}", *NEEDS.get(name, ()))
    if name in KNOWN:
        invariant, cause = KNOWN[name]
        # Reported, not passed: exit status 3, the invariant fails, each failure carries its cause.
        assert code == 3, (err, report)
        assert not report["ok"] and report["only_known"]
        assert failing(report) == {invariant}, report["invariants"]
        v = report["invariants"][invariant]
        assert v["holds"] is False and v["known"] is True
        assert {f["seed"] for f in v["failures"]} == {1, 2}
        assert all(cause in f["known"] for f in v["failures"]), v["failures"]
        others = {k: x for k, x in report["invariants"].items() if k != invariant}
    else:
        assert code == 0, (err, report)
        assert report["ok"] and not report["only_known"]
        others = report["invariants"]
    for inv, v in others.items():
        assert v["holds"] is True and v["checked"] > 0 and v["known"] is False, (inv, v)  # judged, none skipped
    harvest = name.startswith("harvest_")
    assert all(s.startswith("harvest-" if harvest else ("alloc-", "credits-", "sched-")) for s in report["scenarios"])


def test_harvest_allocators_are_checked_on_one_central_run_queue() -> None:
    from microsched.cli.check_policy import resolve, scenarios

    assert resolve("builtin:harvest_cfs").family == "harvest"
    assert resolve("builtin:shenango").family == "allocator"
    assert resolve(f"{EXAMPLES / 'shenango.py'}:Shenango").family == "allocator"
    harvest, generic = scenarios("harvest"), scenarios("allocator")
    # The same loads and mix, every invariant judged the same: only the run queue differs.
    assert [s["load"] for s, _ in harvest.values()] == [s["load"] for s, _ in generic.values()]
    assert [m for _, m in harvest.values()] == [m for _, m in generic.values()]
    assert all(s["server"]["queue"] == "central" for s, _ in harvest.values())
    assert all(s["server"]["queue"] == "per_core" for s, _ in generic.values())


def test_harvest_cfs_on_per_core_queues_is_what_the_harvest_scenarios_avoid() -> None:
    # The mechanism, measured: on per-core queues a core taken back from the Secondary searches
    # its empty queue first, harvest_cfs (lend at once) lends it back, and the Primary keeps 1
    # core while the work piles up; on the central run queue it keeps up.
    code, report, err = check("builtin:harvest_cfs", "--set", "server.queue=per_core", "--seeds", "1")
    assert code == 1 and failing(report) == {"keeps-up"}, (err, report["invariants"])
    assert all(f["known"] is None for f in report["invariants"]["keeps-up"]["failures"])


def test_a_known_finding_needs_its_measured_cause_and_the_standard_scenarios() -> None:
    from microsched.cli.check_policy import _seda_sends_nothing, check_starvation

    both = {"requests": {"generated": 10, "dropped": 10}, "by_type": [{"name": "short", "completed": 0},
                                                                      {"name": "long", "completed": 0}]}
    assert "2-4 requests/s" in _seda_sends_nothing(both)
    assert check_starvation(both) == "no type completed a request in the window (`short` 0, `long` 0)"
    # One type served, the other not: starvation proper, not SEDA's start.
    one = {"requests": {}, "by_type": [{"name": "short", "completed": 0}, {"name": "long", "completed": 5,
                                                                           "latency_us": {"p99": 80.0}}]}
    assert _seda_sends_nothing(one) is None
    assert check_starvation(one) == "type `short` completed no request in the window"
    # With --set the scenarios are not the standard ones: a failure is a failure.
    code, report, err = check("builtin:seda", "--set", "duration_ms=20", "--seeds", "1")
    assert code == 1 and not report["only_known"], (err, report)
    assert report["invariants"]["no-starvation"]["known"] is False
    # The simplified variant starts at the offered rate: every invariant holds.
    code, report, err = check("builtin:seda", "--param", 'variant="simplified"', "--seeds", "1")
    assert code == 0 and report["ok"], (err, report)
    # Given the time its artifact's start takes (a first token after 250-500 ms), the published
    # rule holds every invariant, both types served, on both seeds.
    code, report, err = check("builtin:seda", "--set", "warmup_ms=1000")
    assert code == 0 and report["ok"], (err, report)
    assert all(v["holds"] is True and v["checked"] > 0 for v in report["invariants"].values()), report["invariants"]


def test_set_changes_the_standard_scenarios() -> None:
    # Concord needs a dispatcher core (checked with it above, NEEDS); the bounds are the resolved
    # scenario's (9 cores there). Every scenario overloaded: keeps-up has nothing to judge, and
    # says so rather than passing.
    code, report, err = check("builtin:static", "--set", "load.fraction=1.2", "--seeds", "1")
    assert code == 0 and report["invariants"]["keeps-up"] == {"holds": None, "known": False, "checked": 0,
                                                              "failures": []}


@pytest.mark.parametrize("args, message", [
    (["builtin:nope"], "`nope` is not a built-in policy: use one of"),
    ([f"{REPO / 'python' / 'microsched' / 'policy.py'}:PolicyError"], "is not a subclass of microsched.policy"),
    ([f"{EXAMPLES / 'shenango.py'}:Missing"], "is not a subclass of microsched.policy"),
    ([f"{EXAMPLES / 'shenango.py'}:Shenango", "--param", "nope=1"], "policy.allocator.params.nope"),
    (["no-colon"], "use FILE.py:Class, module:Class or builtin:KIND"),
])
def test_bad_input_is_one_line(args: list[str], message: str) -> None:
    r = run_cli("check-policy", *args)
    assert r.code == 2, r.err
    assert message in r.err and len(r.err.strip().splitlines()) == 1, r.err
