"""The real runtime's CLI: `microsched real` (server and load generator as two processes on
loopback), `serve` and `loadgen`. Every run is short (≤ ~1 s of load) and bounded; the server
binds a free loopback port."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, WIRE_VERSION, microsched_cli as cli, one_line_error

SCEN = str(REPO / "experiments" / "real" / "overload-2x.toml")
SCEN_NONE = str(REPO / "experiments" / "real" / "overload-2x-none.toml")
SHORT = ["--set", "duration_ms=500", "--set", "warmup_ms=100", "--set", "runtime.drain_ms=300"]


def test_real_json_has_the_summary_keys_of_run_and_accounts_for_every_request():
    r = cli("real", SCEN, "--json", "--set", "load.rps=20000", *SHORT)
    assert r.returncode == 0, r.stderr
    real = json.loads(r.stdout)
    sim = json.loads(cli("run", SCEN, "--json", *SHORT).stdout)
    missing = set(sim) - set(real)
    assert not missing, f"keys of `microsched run` missing from `microsched real`: {missing}"
    assert real["overload"] == "breakwater" and real["cores"]["max"] == 2
    assert real["requests"]["generated"] > 5000
    rt = real["runtime"]
    assert rt["accounting"]["client_conserved"] is True
    assert rt["accounting"]["client_sent"] == rt["accounting"]["server_requests"], rt["accounting"]
    assert rt["accounting"]["agree"] is True, rt["accounting"]
    assert rt["server"]["rejected_total"] == 0
    req = real["requests"]
    assert req["generated"] == req["completed"] + req["dropped"] + req["in_flight"]
    # The harness's own CPU is measured, with the simulator settings that replay it.
    h = rt["harness"]
    assert h["measured"]["cpus"] > 0 and h["measured"]["client_wakeup_us"] > 0, h
    assert any(o.startswith("server.irq.steering=") for o in h["sim_overrides"]), h


def test_real_without_overload_control_writes_results(tmp_path):
    out = tmp_path / "out"
    r = cli("real", SCEN_NONE, "--out", str(out), "--set", "load.rps=10000", *SHORT)
    assert r.returncode == 0, r.stderr
    for f in ("summary.json", "scenario.json", "timeseries.parquet", "latency_cdf.parquet", "server_report.json"):
        assert (out / f).is_file(), f
    s = json.loads((out / "summary.json").read_text())
    assert s["overload"] == "none" and s["credits"] is None
    assert s["requests"]["completed"] == s["requests"]["generated"], s["requests"]
    import pandas as pd

    ts = pd.read_parquet(out / "timeseries.parquet")
    for col in ("t_ms", "cores_allocated", "throughput_rps", "queue_len", "be_ops_per_s"):
        assert col in ts.columns


def test_serve_refuses_a_non_loopback_address():
    one_line_error(cli("serve", SCEN, "--addr", "10.1.2.3:7878", "--duration", "1"),
                   "--addr", "not a loopback address", "--allow-remote")


def test_loadgen_refuses_a_non_loopback_target_and_a_silent_server():
    one_line_error(cli("loadgen", SCEN, "--addr", "192.168.0.1:7878"), "not a loopback address")
    t = time.monotonic()
    one_line_error(cli("loadgen", SCEN, "--addr", "127.0.0.1:9", *SHORT), "no answer")
    assert time.monotonic() - t < 15


def test_bad_runtime_configuration_is_refused():
    one_line_error(cli("real", SCEN, "--set", "runtime.tick_us=0"), "runtime.tick_us")
    one_line_error(cli("serve", SCEN, "--set", "runtime.bogus=1", "--duration", "1"), "runtime")
    one_line_error(cli("serve", SCEN, "--duration", "-3"), "duration")


def test_real_stops_the_server_when_the_load_generator_fails():
    # The load generator refuses this rate; `real` must report it and leave no server behind.
    r = cli("real", SCEN, "--set", "load.rps=1e9", timeout=60)
    one_line_error(r, "load generator failed", "at most")
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", "microsched serve " + SCEN], capture_output=True, text=True)
    assert left.stdout.strip() == "", f"server still running: {left.stdout}"


def test_serve_stops_on_ctrl_c_and_reports():
    p = subprocess.Popen([sys.executable, "-m", "microsched", "serve", SCEN, "--addr", "127.0.0.1:0", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:"), line
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
        assert p.returncode == 0, err
        rep = json.loads(out)
        assert rep["stop_reason"] == "interrupted" and rep["workers"] == 2
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_schedule_lag_warning_names_the_lag_and_the_slo():
    from microsched.cli import _schedule_lag_warning

    def summary(p99):
        return {"slo_us": 1500.0, "runtime": {"client": {"schedule_lag_us": {"p50": 1.0, "p99": p99}}}}

    # Below a tenth of the SLO the load generator kept up: no warning.
    assert _schedule_lag_warning(summary(149.0)) is None
    w = _schedule_lag_warning(summary(3836.0))
    assert w is not None and "3,836 µs" in w and "1,500 µs" in w and "schedule_lag_us" in w
    # Summaries without the field (older results, the simulator) give no warning.
    assert _schedule_lag_warning({"slo_us": 1500.0}) is None


def test_compare_sim_runs_the_same_workload_in_the_simulator(tmp_path):
    """`real --compare-sim`: the simulator runs the same scenario, overrides and seed, so it
    sees the very same arrivals (the load generator uses the simulator's random streams)."""
    out = tmp_path / "out"
    r = cli("real", SCEN_NONE, "--compare-sim", "--json", "--out", str(out), "--set", "load.rps=4000", *SHORT)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    sim = d["sim"]
    assert sim["requests"]["generated"] == d["requests"]["generated"] > 1000
    assert sim["offered_rps"] == d["offered_rps"]
    assert "runtime" not in sim and sim["overload"] == "none"
    assert json.loads((out / "sim_summary.json").read_text())["requests"] == sim["requests"]
    # The second simulation replays the run's harness (its CPU on the workers' machine) on the
    # same arrivals; its file is written beside the first.
    harnessed = d["sim_harness"]
    assert harnessed["requests"]["generated"] == sim["requests"]["generated"]
    assert harnessed["irq"]["steering"] == "idle_first" and harnessed["irq"]["in_service_ns"] > 0
    assert json.loads((out / "sim_harness_summary.json").read_text())["requests"] == harnessed["requests"]
    # Without --json: the summaries side by side.
    r = cli("real", SCEN_NONE, "--compare-sim", "--set", "load.rps=4000", *SHORT)
    assert r.returncode == 0, r.stderr
    assert "real runtime vs simulator" in r.stdout and "real / sim" in r.stdout and "sim+harness" in r.stdout


def test_real_refuses_a_modelled_interrupt_mechanism_by_name():
    # Time slicing itself runs (server.preemption.quantum_us); a cost model of the simulator does not.
    one_line_error(cli("real", SCEN, "--set", 'server.preemption.mechanism="uintr"', *SHORT),
                   "server.preemption.mechanism", "not supported by the real runtime")


YIELDING = 'workload.types.0.paths=[{steps=[{op="compute",share=0.5},{op="yield"},{op="compute",share=0.5}]}]'


@pytest.mark.parametrize("queue", ["per_core", "central"])
def test_real_requests_that_yield_are_accounted_for(queue):
    # Low load (a fifth of capacity) on the shipped set-up, without overload control: every request
    # completes, each yielding once halfway, under either queueing policy.
    r = cli("real", SCEN_NONE, "--json", "--set", "load.rps=3000", "--set", YIELDING,
            "--set", f'server.queue="{queue}"', *SHORT)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    acc = s["runtime"]["accounting"]
    assert acc["agree"] is True and acc["client_conserved"] is True, acc
    counters = s["runtime"]["server"]["counters"]
    assert counters["yields"] > 0 and counters["coroutines"] > 0, counters
    req = s["requests"]
    assert req["generated"] > 500 and req["completed"] == req["generated"], req


def test_run_real_passes_its_seed_to_the_server(monkeypatch):
    # The server draws request programs and steal victims from the seed: `run_real(seed=...)`
    # must not leave it at the scenario's. Checked on the command line it builds (nothing runs).
    import microsched.real as real

    launched: list[list[str]] = []

    class Launched(Exception):
        pass

    def fake_popen(args, **_kw):
        launched.append([str(a) for a in args])
        raise Launched

    monkeypatch.setattr(real.subprocess, "Popen", fake_popen)
    with pytest.raises(Launched):
        real.run_real(SCEN, seed=1234)
    server = launched[0]
    assert "serve" in server
    i = server.index("seed=1234")
    assert server[i - 1] == "--set", server


def _connect(cookie: int) -> bytes:
    return b"MS" + bytes([WIRE_VERSION, 1]) + cookie.to_bytes(4, "little") + (0).to_bytes(4, "little")


def _serve(*sets: str) -> tuple[subprocess.Popen, tuple[str, int]]:
    p = subprocess.Popen([sys.executable, "-m", "microsched", "serve", SCEN, "--addr", "127.0.0.1:0", "--json",
                          "--duration", "30", "--set", "clients.sessions=20", *sets],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.startswith("listening on 127.0.0.1:"), line
    host, port = line.split()[2].rsplit(":", 1)
    return p, (host, int(port))


def _flood(addr: tuple[str, int], n: int = 1000) -> tuple[int, int]:
    """n Connects from one socket; (ConnectAcks, Fulls) received."""
    import socket

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.5)
    for i in range(n):
        s.sendto(_connect(i), addr)
        if i % 50 == 0:
            time.sleep(0.001)  # keep within the socket buffers
    acks = fulls = 0
    try:
        while True:
            data, _ = s.recvfrom(2048)
            acks += data[3] == 2
            fulls += data[3] == 8
    except OSError:
        pass
    s.close()
    return acks, fulls


@pytest.mark.parametrize("idle_ms", [500, 60000])
def test_connect_flood_cannot_lock_the_server_out(idle_ms):
    """1000 Connects from one socket take every slot (the next ones, within the socket's
    Connect rate, are answered `Full`; the rest get no answer). A real load generator connects
    all the same: with a short idle expiry the slots come back; with a long one it takes them
    from the flood, which never sent a request (its sessions only squat) once they are idle
    for 1 s (it re-sends its Connects for 3 s)."""
    p, addr = _serve("--set", f"runtime.session_idle_ms={idle_ms}")
    try:
        acks, fulls = _flood(addr)
        # A burst of 2 × 20 + 64 Connects, then 100 a second: 84 or so `Full`s (loopback
        # buffers may drop some answers).
        assert acks == 20 and 50 <= fulls <= 200, (acks, fulls)
        r = cli("loadgen", SCEN, "--addr", f"{addr[0]}:{addr[1]}", "--set", "clients.sessions=20",
                "--set", "load={fraction=0.2}", *SHORT, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["requests"]["completed"] > 0
    finally:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    rep = json.loads(out)
    c = rep["counters"]
    assert c["no_slot"] >= fulls and c["connect_rate_limited"] >= 700, c
    # Every one of the flood's 20 sessions made way: expired, or evicted for the load generator.
    assert c["expired_sessions"] + c["evicted_sessions"] >= 20, c
    if idle_ms > 3000:
        assert c["evicted_sessions"] == 20 and c["expired_sessions"] == 0, c


def test_real_refuses_more_workers_than_cpus():
    import os

    cpus = len(os.sched_getaffinity(0))
    one_line_error(cli("real", SCEN, "--set", f"server.max_cores={cpus + 1}", *SHORT),
                   "server.max_cores", "spinning workers", "--oversubscribe")


def test_live_counters_read_during_a_run():
    """`serve --stats-every 0.2 --metrics-port 0`: JSON lines on stderr and a Prometheus scrape
    while a load generator runs, both showing requests arriving."""
    import urllib.request

    p = subprocess.Popen([sys.executable, "-m", "microsched", "serve", SCEN, "--addr", "127.0.0.1:0", "--json",
                          "--duration", "30", "--stats-every", "0.2", "--metrics-port", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        metrics = p.stderr.readline().split()[-1]
        assert metrics.startswith("http://127.0.0.1:"), metrics
        addr = p.stdout.readline().split()[2]
        r = cli("loadgen", SCEN, "--addr", addr, "--set", "load={fraction=0.3}", *SHORT, "--json")
        assert r.returncode == 0, r.stderr
        text = urllib.request.urlopen(metrics, timeout=5).read().decode()
        assert "# TYPE microsched_server_requests_total counter" in text
        served = [ln for ln in text.splitlines() if ln.startswith("microsched_server_requests_total ")]
        assert served and float(served[0].split()[1]) > 0, text
    finally:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    lines = [json.loads(ln) for ln in err.splitlines() if ln.startswith("{")]
    assert len(lines) >= 3 and max(ln["requests"] for ln in lines) > 0
    assert {"connected_sessions", "uptime_s", "no_slot", "expired_sessions"} <= set(lines[-1])


def test_shared_secret_keeps_unauthenticated_connects_out(monkeypatch):
    """With MICROSCHED_SECRET set on the server, a flood of plain Connects gets nothing (every
    slot stays free), a load generator holding the secret connects at once, and one without
    it is told to set the secret."""
    import os

    env = dict(os.environ, MICROSCHED_SECRET="correct horse battery staple")
    p = subprocess.Popen([sys.executable, "-m", "microsched", "serve", SCEN, "--addr", "127.0.0.1:0", "--json",
                          "--duration", "30", "--set", "clients.sessions=20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    try:
        line = p.stdout.readline()
        host, port = line.split()[2].rsplit(":", 1)
        acks, fulls = _flood((host, int(port)), 300)
        assert acks == 0 and fulls == 0
        args = [sys.executable, "-m", "microsched", "loadgen", SCEN, "--addr", f"{host}:{port}",
                "--set", "clients.sessions=20", "--set", "load={fraction=0.2}", *SHORT, "--json"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
        assert r.returncode == 0, r.stderr
        bad = dict(env, MICROSCHED_SECRET="wrong")
        r = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=REPO, env=bad)
        assert r.returncode == 2 and "MICROSCHED_SECRET" in r.stderr, r.stderr
    finally:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    c = json.loads(out)["counters"]
    assert c["unauthenticated"] >= 200 and c["bad_mac"] >= 1 and c["connects"] == 20, c


@pytest.mark.parametrize("variant", ["artifact", "simplified"])
def test_real_seda_sends_without_credits_and_accounts_for_client_drops(variant):
    """SEDA limits each session at its client: the load generator asks for no credits, sends
    what the buckets allow (the artifact's sessions start at 2-4 requests/s and let a request
    wait 100 µs for a token) and counts the rest as dropped at the client."""
    seda = f'policy.overload={{kind="seda",variant="{variant}",target_us=1000,timeout_us=10000,adj_i=1,adj_d=1.04}}'
    r = cli("real", SCEN_NONE, "--json", "--set", seda, "--set", "load.rps=5000", *SHORT)
    assert r.returncode == 0, r.stderr
    real = json.loads(r.stdout)
    c = real["runtime"]["client"]
    assert c["credit_requests"] == 0 and c["client_timeouts"] == 0, c
    assert c["sent"] > 0 and real["requests"]["completed"] > 0, c
    assert c["seda_rejected"] > 0, c
    req = real["requests"]
    assert req["generated"] == req["completed"] + req["dropped"] + req["in_flight"]
    assert c["sent"] + c["seda_rejected"] == req["generated"], c


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    try:
        for tid in Path(f"/proc/{pid}/task").iterdir():
            out |= {int(c) for c in (tid / "children").read_text().split()}
    except OSError:
        pass
    return out


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper that never comes, in a container, is dead)."""
    try:
        s = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return s[s.rfind(")") + 2] != "Z"


def test_serve_stops_on_sigterm_and_writes_its_report(tmp_path):
    report = tmp_path / "server.json"
    p = subprocess.Popen([sys.executable, "-m", "microsched", "serve", SCEN, "--addr", "127.0.0.1:0",
                          "--report", str(report)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:"), line
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
        assert p.returncode == 0, err
        assert "stopped (interrupted)" in out, out
        rep = json.loads(report.read_text())
        assert rep["stop_reason"] == "interrupted" and rep["workers"] == 2
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_real_stopped_by_a_signal_leaves_no_process(sig, tmp_path):
    # A long run (60 s of load), stopped once its server and load generator are both running.
    # Its temporary directory goes under tmp_path: SIGKILL leaves it (nothing can remove it),
    # SIGTERM must not.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    p = subprocess.Popen([sys.executable, "-m", "microsched", "real", SCEN, "--set", "duration_ms=60000"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    kids: set[int] = set()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(kids) < 2 and p.poll() is None:
            kids = _children(p.pid)
            time.sleep(0.05)
        assert len(kids) == 2, f"expected serve and loadgen running: {kids}, {p.poll()}"
        time.sleep(0.5)  # the load generator is past its start-up
        p.send_signal(sig)
        p.wait(20)
        if sig == signal.SIGTERM:
            assert p.returncode == 130 and "interrupted" in (p.stderr.read() if p.stderr else ""), p.returncode
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(k) for k in kids):
            time.sleep(0.05)
        left = [k for k in kids if _alive(k)]
        assert not left, subprocess.run(["ps", "-o", "pid,args", "-p", ",".join(map(str, left))],
                                        capture_output=True, text=True).stdout
        pg = subprocess.run(["pgrep", "-af", "microsched (serve|loadgen)"], capture_output=True, text=True).stdout
        assert not any(line.split()[0] in {str(k) for k in kids} for line in pg.splitlines()), pg
        if sig == signal.SIGTERM:
            assert not list(tmp_path.glob("microsched-real-*")), list(tmp_path.iterdir())
    finally:
        for k in kids:
            if _alive(k):
                try:
                    os.kill(k, signal.SIGKILL)
                except OSError:
                    pass
        if p.poll() is None:
            p.kill()
            p.wait()
