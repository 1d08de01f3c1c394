"""Issue 28: bounded inputs, a server that one address cannot hog and that says how it is
protected, bounded server memory, and CLI messages that are never wrapped. Every server binds a
free loopback port and stops within seconds."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import microsched
from conftest import ENV_NO_SECRET as ENV, WIRE_VERSION, microsched_cli as cli, one_line_error

REPO = Path(__file__).resolve().parents[2]
SCEN = str(REPO / "experiments" / "real" / "overload-2x.toml")
SCEN_NONE = str(REPO / "experiments" / "real" / "overload-2x-none.toml")  # no credits needed
SHORT = ["--set", "duration_ms=500", "--set", "warmup_ms=100", "--set", "runtime.drain_ms=300"]


def scenario_with_csv(tmp_path: Path, csv: str) -> Path:
    p = tmp_path / "scen.toml"
    p.write_text(f"""
duration_ms = 5
[server]
max_cores = 2
[load]
rps = 1000
[[workload.types]]
name = "emp"
service = {{ dist = "empirical", csv = "{csv}" }}
""", encoding="utf-8")
    return p


# ---------------------------------------------------------------------------------------------
# input files: regular files only, bounded in size


@pytest.mark.parametrize("command", ["validate", "run"])
def test_an_empirical_csv_that_is_dev_zero_is_refused_at_once(tmp_path, command):
    """`/dev/zero` as the service-time CSV: `validate` ran for over a minute and `run` was
    OOM-killed at 24 GB. Now: one line naming the field, the file's kind and the limit."""
    scen = scenario_with_csv(tmp_path, "/dev/zero")
    t = time.monotonic()
    r = cli(command, str(scen), timeout=30)
    assert time.monotonic() - t < 20
    one_line_error(r, "workload.types[0].service.csv", "/dev/zero", "a character device, not a regular file",
                   "64 MiB")


def test_a_1_gb_sparse_csv_is_refused_from_its_size(tmp_path):
    big = tmp_path / "big.csv"
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # sparse: takes no disk, reads as 1 GB of NULs
    scen = scenario_with_csv(tmp_path, str(big))
    t = time.monotonic()
    r = cli("validate", str(scen), timeout=30)
    assert time.monotonic() - t < 20
    one_line_error(r, "workload.types[0].service.csv", "1 GiB", "larger than the limit of 64 MiB")
    # The Python API says the same (ValueError naming the field).
    with pytest.raises(ValueError, match=r"workload\.types\[0\]\.service\.csv: .*limit of 64 MiB"):
        microsched.validate(scen)


def test_a_scenario_that_is_a_device_a_fifo_or_too_large_is_refused(tmp_path):
    one_line_error(cli("validate", "/dev/zero", timeout=30), "scenario", "/dev/zero", "a character device",
                   "16 MiB")
    fifo = tmp_path / "scen.toml"
    os.mkfifo(fifo)
    # Opening a FIFO would block until a writer comes: refused before that.
    one_line_error(cli("run", str(fifo), timeout=30), "scenario", "a FIFO, not a regular file")
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:
        f.truncate(1 << 30)
    one_line_error(cli("validate", str(big), timeout=30), "scenario", "1 GiB", "larger than the limit of 16 MiB")
    spec = tmp_path / "spec.toml"
    os.mkfifo(spec)
    one_line_error(cli("sweep", str(spec), timeout=30), "sweep spec", "a FIFO")


def test_the_harvest_agents_files_are_bounded_too(tmp_path):
    """The agent's controller table and the pod list it is given are user files like a scenario."""
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(1 << 30)
    agent = ["harvest", "--primary", str(os.getpid()), "--primary-cores", "0", "--secondary-cores", "1",
             "--duration", "1"]
    one_line_error(cli(*agent, "--controller", "/dev/zero", timeout=30), "--controller", "a character device",
                   "16 MiB")
    one_line_error(cli(*agent, "--controller", str(big), timeout=30), "--controller", "1 GiB",
                   "larger than the limit of 16 MiB")
    one_line_error(cli("harvest-pods", "--pods", "/dev/zero", "--once", timeout=30), "--pods", "a character device")
    one_line_error(cli("harvest-pods", "--pods", str(big), "--once", timeout=30), "--pods", "1 GiB")


# ---------------------------------------------------------------------------------------------
# the server: authentication said, empty secret refused, service time capped


def _start_serve(*args: str, env: dict | None = None, scen: str = SCEN) -> tuple[subprocess.Popen, str, str]:
    """`serve` on a free loopback port; (process, address, its first stderr line)."""
    p = subprocess.Popen([sys.executable, "-m", "microsched", "serve", scen, "--addr", "127.0.0.1:0", "--duration",
                          "30", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                         env=env or ENV)
    assert p.stdout is not None and p.stderr is not None
    info = p.stderr.readline()
    line = p.stdout.readline()
    assert line.startswith("listening on 127.0.0.1:"), (line, info, p.poll())
    return p, line.split()[2], info


def _stop(p: subprocess.Popen) -> tuple[str, str]:
    p.send_signal(signal.SIGINT)
    return p.communicate(timeout=30)


def test_serve_says_whether_authentication_is_on():
    p, _, info = _start_serve("--json")
    out, _ = _stop(p)
    assert info.startswith("microsched serve: authentication off (MICROSCHED_SECRET is unset)"), info
    assert "requests up to 100,000 µs of service" in info and "20 session slots" in info, info
    assert json.loads(out)["limits"]["authentication"] is False
    p, _, info = _start_serve("--json", env=dict(ENV, MICROSCHED_SECRET="s3cret"))
    out, _ = _stop(p)
    assert info.startswith("microsched serve: authentication on: Connects must prove MICROSCHED_SECRET"), info
    assert json.loads(out)["limits"]["authentication"] is True


def test_an_empty_secret_is_an_error_not_authentication_off():
    env = dict(ENV, MICROSCHED_SECRET="")
    for args in (["serve", SCEN, "--addr", "127.0.0.1:0", "--duration", "5"],
                 ["loadgen", SCEN, "--addr", "127.0.0.1:9", *SHORT]):
        one_line_error(cli(*args, env=env), "MICROSCHED_SECRET: set but empty", "unset it")


def _connect(cookie: int) -> bytes:
    return b"MS" + bytes([WIRE_VERSION, 1]) + cookie.to_bytes(4, "little") + (0).to_bytes(4, "little")


def _request(token: int, req_id: int, service_ns: int) -> bytes:
    return (b"MS" + bytes([WIRE_VERSION, 3]) + token.to_bytes(8, "little") + req_id.to_bytes(8, "little")
            + (0).to_bytes(4, "little") + service_ns.to_bytes(8, "little") + (0).to_bytes(2, "little"))


def test_service_time_cap_defaults_far_below_100_ms_when_remote_and_is_a_flag():
    # --allow-remote on a loopback address: the remote default, measured without leaving 127.0.0.1.
    p, _, info = _start_serve("--allow-remote", "--json")
    _stop(p)
    assert "requests up to 10,000 µs of service" in info, info
    p, addr, info = _start_serve("--max-service-us", "500", "--json", scen=SCEN_NONE)
    try:
        assert "requests up to 500 µs of service" in info, info
        host, port = addr.rsplit(":", 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(5)
        s.sendto(_connect(1), (host, int(port)))
        data, _ = s.recvfrom(2048)
        assert data[3] == 2, data  # ConnectAck
        token = int.from_bytes(data[8:16], "little")
        s.sendto(_request(token, 1, 1_000_000_000 // 1000 * 5), (host, int(port)))  # 5 ms: over the cap
        s.sendto(_request(token, 2, 100_000), (host, int(port)))  # 100 µs
        data, _ = s.recvfrom(2048)
        # Only #2 is answered, served (status 0).
        assert data[3] == 4 and int.from_bytes(data[4:12], "little") == 2 and data[16] == 0, data
        s.close()
    finally:
        out, _ = _stop(p)
    rep = json.loads(out)
    assert rep["counters"]["bad_request"] == 1 and rep["counters"]["completed"] == 1, rep["counters"]
    for bad in ("0", "200000", "nan"):
        one_line_error(cli("serve", SCEN, "--addr", "127.0.0.1:0", "--duration", "1", "--max-service-us", bad),
                       "--max-service-us", "1..=100000")
    one_line_error(cli("serve", SCEN, "--addr", "127.0.0.1:0", "--duration", "1", "--max-client-sessions", "0"),
                   "--max-client-sessions")


# ---------------------------------------------------------------------------------------------
# fair session slots


def test_one_socket_resending_connects_cannot_keep_a_load_generator_out():
    """The issue's hog: one socket re-sends its 20 Connects (here every 0.2 s, more often than
    the ~5 s seen) and so held every slot forever (each Connect refreshed the idle timer); a
    real load generator got "server is full" indefinitely. Now a resent Connect is not
    activity, and a client that never sends a request only squats: `microsched loadgen` takes
    the slots it needs from it (4 sessions, then all 20) while the hog keeps going."""
    p, addr, _ = _start_serve("--json", "--set", "clients.sessions=20", "--set", "runtime.session_idle_ms=60000",
                              "--connect-rate", "1000")
    host, port = addr.rsplit(":", 1)
    stop = threading.Event()
    acked: set[int] = set()

    def hog() -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(0.01)
        while not stop.is_set():
            for cookie in range(20):
                s.sendto(_connect(cookie), (host, int(port)))
            until = time.monotonic() + 0.2
            while time.monotonic() < until:
                try:
                    data, _ = s.recvfrom(2048)
                except OSError:
                    continue
                if data[3] == 2:
                    acked.add(int.from_bytes(data[4:8], "little"))
        s.close()

    t = threading.Thread(target=hog, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while len(acked) < 20:
            assert time.monotonic() < deadline, f"the hog got only {len(acked)} sessions"
            time.sleep(0.05)
        time.sleep(1.2)  # its sessions are now older than the eviction time (1 s)
        r = cli("loadgen", SCEN, "--addr", addr, "--set", "clients.sessions=4", "--set", "load={fraction=0.1}",
                *SHORT, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["requests"]["completed"] > 0
        # The hog took the 4 freed slots back; once they are 1 s old too, every slot can be had.
        time.sleep(1.2)
        r = cli("loadgen", SCEN, "--addr", addr, "--set", "clients.sessions=20", "--set", "load={fraction=0.1}",
                *SHORT, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["requests"]["completed"] > 0
    finally:
        stop.set()
        t.join(5)
        out, _ = _stop(p)
    c = json.loads(out)["counters"]
    assert c["evicted_sessions"] == 24 and c["no_slot"] > 0, c


# ---------------------------------------------------------------------------------------------
# bounded memory: the time series


def test_serve_json_reports_a_series_summary_and_series_writes_the_rows(tmp_path):
    series = tmp_path / "series.json"
    r = cli("serve", SCEN, "--addr", "127.0.0.1:0", "--duration", "1.5", "--json", "--series", str(series),
            "--set", "server.max_cores=1", "--set", 'policy.allocator={kind="caladan"}')
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout[r.stdout.index("{"):])
    assert "timeseries" not in rep
    info = rep["timeseries_info"]
    assert info["max_rows"] == 8192 and info["interval_ms"] == 1.0 and info["halvings"] == 0, info
    assert 500 <= info["rows"] <= 1600, info
    rows = json.loads(series.read_text())
    assert len(rows["t_ms"]) == len(rows["unix_ns"]) == len(rows["cores_busy"]) == info["rows"]


# ---------------------------------------------------------------------------------------------
# CLI messages are never wrapped


def test_console_messages_are_not_wrapped_whatever_the_width_or_path():
    """`reproduce`'s interrupt message was split by rich at 80 columns when stderr was not a
    terminal (the tmp path's length and COLUMNS decided where)."""
    path = "/tmp/" + "x" * 150 + "/cut/parts"
    code = ("from microsched.cli.render import console, err_console\n"
            f"err_console().print('interrupted: the finished runs are saved in {path}; continue with --resume')\n"
            f"console().print('results written to [bold]{path}/[/bold]')\n")
    for columns in ("40", "80", "200"):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env=dict(ENV, COLUMNS=columns))
        assert r.returncode == 0, r.stderr
        assert r.stderr == f"interrupted: the finished runs are saved in {path}; continue with --resume\n", r.stderr
        assert r.stdout == f"results written to {path}/\n", r.stdout
