"""Bad input never crashes the CLI: exit status 2 and exactly one line on stderr,
`microsched: error: <message>`, naming what is wrong. Never a traceback."""

from __future__ import annotations

import pytest

from conftest import SMALL, run_cli, small, to_toml


def assert_one_line_error(r, *fragments: str) -> str:
    assert r.code == 2, f"exit {r.code}, stderr: {r.err!r}"
    assert "Traceback" not in r.err and "panicked" not in r.err, r.err
    lines = r.err.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {lines!r}"
    line = lines[0]
    assert line.startswith("microsched: error: "), line
    for f in fragments:
        assert f in line, f"{f!r} not in {line!r}"
    assert r.out == "", f"nothing on stdout on error, got {r.out!r}"
    return line


def bimodal(p1: float, p2: float) -> dict:
    return small(**{"workload.types": [{"name": "bi", "service": {
        "dist": "bimodal", "modes": [{"value_us": 1.0, "prob": p1}, {"value_us": 100.0, "prob": p2}]}}]})


def empirical(csv: str) -> dict:
    return small(**{"workload.types": [{"name": "emp", "service": {"dist": "empirical", "csv": csv}}]})


BAD_SCENARIOS = {
    "unknown top-level field": (small(bogus_field=1), ["bogus_field"]),
    "unknown nested field": (small(**{"server.cores": 4}), ["server", "cores"]),
    "unknown distribution": (small(**{"workload.types": [{"name": "x", "service": {"dist": "pareto"}}]}), ["pareto"]),
    "zero max_cores": (small(**{"server.max_cores": 0}), ["server.max_cores"]),
    "negative duration": (small(duration_ms=-1.0), ["duration_ms"]),
    "zero duration": (small(duration_ms=0.0), ["duration_ms"]),
    "negative warmup": (small(warmup_ms=-5.0), ["warmup_ms"]),
    "zero sessions": (small(**{"clients.sessions": 0}), ["clients.sessions"]),
    "zero exponential mean": (small(**{"workload.types": [{"name": "e", "service": {
        "dist": "exponential", "mean_us": 0.0}}]}), ["mean_us"]),
    "negative rtt": (small(**{"network.rtt_us": -10.0}), ["network.rtt_us"]),
    "bimodal probabilities sum to 0.8": (bimodal(0.5, 0.3), ["modes", "sum"]),
    "bimodal probabilities sum to 1.2": (bimodal(0.9, 0.3), ["modes", "sum"]),
    "missing empirical csv": (empirical("does-not-exist.csv"), ["csv", "does-not-exist.csv"]),
    "both fraction and rps": (small(**{"load.rps": 1000.0}), ["load"]),
    "wrong type": (small(**{"server.max_cores": "many"}), ["server.max_cores"]),
}


@pytest.mark.parametrize("case", sorted(BAD_SCENARIOS))
@pytest.mark.parametrize("command", ["run", "validate"])
def test_bad_scenario_exits_2_with_one_line(case, command, write_scenario):
    scenario, fragments = BAD_SCENARIOS[case]
    path = write_scenario(scenario)
    assert_one_line_error(run_cli(command, path), *fragments)


@pytest.mark.parametrize("args", [
    ["run", "{dir}/nope.toml"],                          # missing file
    ["run", "{scenario}", "--set", "server.max_cores=0"],  # invalid value
    ["run", "{scenario}", "--set", "novalue"],           # bad --set syntax
    ["run", "{bad}"],                                    # unknown field
    ["frobnicate"],                                      # unknown command
])
def test_console_process_errors(args, write_scenario, tmp_path):
    """The same, through a real process: one stderr line, exit status 2, no traceback."""
    paths = {"dir": tmp_path, "scenario": write_scenario(SMALL), "bad": write_scenario(small(bogus=1), "bad.toml")}
    r = run_cli(*[a.format(**paths) for a in args], subprocess_=True)
    assert_one_line_error(r)


@pytest.mark.parametrize("content", [
    "service_us\n1.5\n2.0\nabc\n",   # a cell that is not a number
    "service_us\n1.5\n-3.0\n",       # a negative service time
    "service_us\n",                  # a header and no samples
])
def test_malformed_empirical_csv(content, write_scenario, tmp_path):
    (tmp_path / "samples.csv").write_text(content, encoding="utf-8")
    path = write_scenario(empirical("samples.csv"))
    assert_one_line_error(run_cli("run", path), "csv")


def test_well_formed_empirical_csv_resolves_against_scenario_dir(write_scenario, tmp_path):
    (tmp_path / "samples.csv").write_text("service_us\n5.0\n10.0\n15.0\n", encoding="utf-8")
    path = write_scenario(empirical("samples.csv"))
    # Run from another directory: the CSV path is relative to the scenario file.
    r = run_cli("validate", path, cwd=tmp_path.parent)
    assert r.code == 0, r.err


def test_invalid_toml_syntax(write_scenario):
    path = write_scenario(to_toml(SMALL) + "server = [unclosed\n")
    assert_one_line_error(run_cli("run", path))


def test_set_override_is_validated(write_scenario):
    path = write_scenario(SMALL)
    assert_one_line_error(run_cli("run", path, "--set", "server.max_cores=0"), "server.max_cores")
    assert_one_line_error(run_cli("run", path, "--set", "duration_ms=-1"), "duration_ms")
    assert_one_line_error(run_cli("run", path, "--set", "server.bogus=1"), "bogus")


@pytest.mark.parametrize("spec", ["server.max_cores", "=4", "server..max_cores=4", ".x=1", "x.=1"])
def test_bad_set_syntax(spec, write_scenario):
    path = write_scenario(SMALL)
    assert_one_line_error(run_cli("run", path, "--set", spec), "--set")


def test_missing_scenario_file(tmp_path):
    missing = tmp_path / "nope.toml"
    line = assert_one_line_error(run_cli("run", missing), "not found")
    assert str(missing) in line
    assert_one_line_error(run_cli("validate", missing), "not found")


def test_scenario_path_is_a_directory(tmp_path):
    assert_one_line_error(run_cli("run", tmp_path))


@pytest.mark.parametrize("seed", ["abc", "-1", "1.5", str(2**64)])
def test_bad_seed(seed, write_scenario):
    path = write_scenario(SMALL)
    assert_one_line_error(run_cli("run", path, "--seed", seed), "--seed")


@pytest.mark.parametrize("args", [[], ["frobnicate"], ["run"], ["run", "x.toml", "--bogus"], ["bench", "--slow"]])
def test_usage_errors(args):
    assert_one_line_error(run_cli(*args))


def test_unwritable_out_dir(write_scenario, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = run_cli("run", write_scenario(SMALL), "--json", "--out", blocker / "sub")
    assert r.code == 2
    assert "Traceback" not in r.err and len(r.err.splitlines()) == 1
    assert r.err.startswith("microsched: error: ")


def test_service_time_below_the_resolution_is_refused_not_rounded(write_scenario):
    # A constant of 1e-12 µs was rounded up to 1 ns silently; every distribution refuses it now.
    for svc, field in [({"dist": "constant", "value_us": 1e-12}, "service.value_us"),
                       ({"dist": "exponential", "mean_us": 1e-12}, "service.mean_us"),
                       ({"dist": "bimodal", "modes": [{"value_us": 1e-4, "prob": 0.5}, {"value_us": 1.0, "prob": 0.5}]},
                        "modes[0].value_us")]:
        path = write_scenario(small(**{"workload.types": [{"name": "t", "service": svc}]}))
        line = assert_one_line_error(run_cli("validate", path), field, "resolution of 1 ns")
        assert "clients.sessions" not in line
    # 1 ns itself is allowed.
    path = write_scenario(small(**{"workload.types": [{"name": "t", "service": {"dist": "constant", "value_us": 0.001}}]}))
    assert run_cli("validate", path).code == 0


def test_run_too_large_names_the_field_that_makes_it_so(write_scenario):
    # 2 ns requests at half the capacity for 5 s: the service time makes the run huge, not the
    # sessions (which it used to name).
    path = write_scenario(small(duration_ms=5000.0, **{"workload.types": [
        {"name": "t", "service": {"dist": "exponential", "mean_us": 0.002}}]}))
    line = assert_one_line_error(run_cli("validate", path), "this run is too large")
    assert line.startswith("microsched: error: workload.types:"), line
    # A long run of ordinary requests: the duration.
    path = write_scenario(small(duration_ms=1e9))
    line = assert_one_line_error(run_cli("validate", path), "this run is too large")
    assert line.startswith("microsched: error: duration_ms:"), line


def test_a_huge_set_value_is_echoed_clipped_with_control_characters_escaped(write_scenario):
    path = write_scenario(SMALL)
    huge = "\x1b[31m" + "x" * 100_000
    for setting in (f"duration_ms={huge}", f"{huge}=1", huge):
        r = run_cli("run", path, "--set", setting)
        line = assert_one_line_error(r)
        assert len(line) < 600, len(line)
        assert "\x1b" not in line and "characters)" in line, line
