"""The real runtime: ``microsched serve``, ``microsched loadgen`` and ``microsched real``."""

from __future__ import annotations

import argparse
import copy
import json
import signal
import sys
from pathlib import Path
from typing import Any

from ..api import empty_window_warning, null_if_none_completed
from .args import Formatter, add_scenario, add_set, add_trace, duration, seed
from .errors import CliError, sigterm_as_ctrl_c, with_file
from .render import console, num, print_summary

SERVE_DESCRIPTION = """\
Run the real server of SCENARIO: a UDP socket on loopback, server.max_cores worker threads
("cores") with per-core queues and work stealing, parked and unparked by the scenario's core
allocator, requests admitted by its overload controller (credits, AQM), the synthetic handler
spinning for each request's service time, and optionally runtime.be_threads best-effort
threads at the lowest priority. Malformed or unauthorised datagrams are counted and dropped.

It prints `listening on ADDR` once bound (and, on stderr, whether authentication is on and the
limits below), then runs until --duration, until every client has disconnected (--once), or
until Ctrl-C or SIGTERM (both stop it the same way: the report is still written), and prints its report (JSON with --json: counters, cores, limits and a summary of
the time series; the series itself goes to --series FILE).

authentication: with MICROSCHED_SECRET set in the environment, a Connect must prove the secret
(HMAC) or gets no answer; unset, any client that reaches the address can connect. Set but empty
is an error.

limits: a request may ask for at most --max-service-us of service (else it is refused and
counted bad_request). Session slots (clients.sessions) are shared between clients (a loopback
client is its address and port; a remote one its /24, or /64 for IPv6): one client alone may
take every slot (at most --max-client-sessions); when every slot is taken, a new session takes
the slot of one idle for 1 s (nothing at the server, no request; a resent Connect does not
count): from a client that never sent a request (it only squats), or, for a client holding less
than its fair share (slots / clients), from the client holding the most. Each client may send
--connect-rate Connects per second (the rest get no answer). The time series keeps at most 8192
rows: at that size its rows are merged pairwise and its interval doubles, so memory stays
bounded however long the server runs.

examples:
  microsched serve experiments/real/overload-2x.toml --addr 127.0.0.1:7878 --duration 30
  microsched serve scen.toml --addr 127.0.0.1:0 --once --report server.json --series series.json
  MICROSCHED_SECRET=... microsched serve scen.toml --addr 0.0.0.0:7878 --allow-remote --max-client-sessions 32
"""

LOADGEN_DESCRIPTION = """\
Run SCENARIO's open-loop Poisson load (its load, workload and clients; the simulator's random
streams, so one seed gives the same requests) against a real server, with Breakwater's client
(credits, client queue, timeout) when the scenario names a credit controller. Latency counts from
each request's scheduled send time. Prints the summary (the schema of `microsched run`; the
server-side fields such as cores are filled in by `microsched real`).

examples:
  microsched loadgen experiments/real/overload-2x.toml --addr 127.0.0.1:7878 --json
"""

REAL_DESCRIPTION = """\
Run SCENARIO for real: `microsched serve` and `microsched loadgen` as two separate processes on
loopback (a free port), for the scenario's warm-up + duration (+ runtime.drain_ms), then merge
their results: the summary has the keys of `microsched run` (cores and core time from the
server, latency and throughput from the load generator) plus a `runtime` section (client and
server counters, best-effort throughput, controller tick). Everything started is stopped at the
end, on error, on Ctrl-C and on SIGTERM (exit status 130, as Ctrl-C); the two processes also die
with it if it is killed outright (SIGKILL: Linux PR_SET_PDEATHSIG, as a sweep's workers).

Note: both processes share this machine's CPUs; on a small machine the load generator and the
server compete, which the results include.

examples:
  microsched real experiments/real/overload-2x.toml
  microsched real experiments/real/overload-2x-none.toml --json | jq .latency_us.p99
  microsched real scen.toml --out out/real   # summary.json, timeseries.parquet, server_report.json, ...
  microsched real experiments/real/overload-2x.toml --compare-sim   # real vs simulated, side by side
  microsched real scen.toml --record rec.parquet   # one row per request (Parquet)
  microsched run scen.toml --set workload.replay=rec.parquet   # the simulator on exactly those requests
  microsched real scen.toml --compare-sim --replay   # real vs simulated, request by request
  microsched real experiments/real/dispatcher.toml --set 'policy.sched={kind="concord"}'   # with a dispatcher
  microsched real scen.toml --set server.replicas=2 --set server.max_cores=1 --set clients.retries=1
      # two `serve` processes, failures resent to the other (docs/runtime.md, "Replicas and retries")
"""


def add_commands(sub: Any) -> None:
    sv = sub.add_parser("serve", help="run the real UDP server of a scenario", description=SERVE_DESCRIPTION,
                        formatter_class=Formatter)
    add_scenario(sv)
    sv.add_argument("--addr", metavar="HOST:PORT",
                    help="where to listen (default 127.0.0.1:<runtime.port>; port 0 picks a free port); "
                         "a non-loopback address is refused unless --allow-remote")
    sv.add_argument("--duration", type=duration, metavar="S", help="stop after S seconds (default: run until Ctrl-C)")
    sv.add_argument("--once", action="store_true", help="stop once every client that connected has disconnected")
    sv.add_argument("--allow-remote", action="store_true", help="allow binding a non-loopback address")
    sv.add_argument("--report", metavar="FILE", help="also write the report (JSON, as --json prints it) to FILE")
    sv.add_argument("--json", action="store_true",
                    help="print the report as JSON at the end (the time series summarised in timeseries_info; "
                         "--series writes its rows)")
    sv.add_argument("--series", metavar="FILE",
                    help="write the server's time series (JSON, one list per column; at most 8192 rows, "
                         "coarser the longer the run) to FILE at the end")
    sv.add_argument("--max-service-us", type=float, metavar="US",
                    help="largest service time a request may ask for, in µs (1..=100000); a request asking for "
                         "more is refused (bad_request). Default 100000 on loopback, 10000 with --allow-remote")
    sv.add_argument("--max-client-sessions", type=int, metavar="N",
                    help="most session slots one client may hold (a loopback client is its address and port, a "
                         "remote one its /24 or /64 network); default: every slot (clients.sessions)")
    sv.add_argument("--connect-rate", type=float, metavar="R",
                    help="Connects per second one client may send, in bursts of 2 x clients.sessions + 64; the "
                         "rest get no answer (default: max(100, clients.sessions))")
    sv.add_argument("--stats-every", type=float, metavar="S",
                    help="print the live counters as one JSON line on stderr every S seconds")
    sv.add_argument("--metrics-port", type=int, metavar="PORT",
                    help="serve the live counters on http://127.0.0.1:PORT/metrics (Prometheus text) and "
                         "/metrics.json, refreshed every --stats-every seconds (default 1); 0: any free port")
    add_set(sv)
    add_trace(sv, "the server's run time since it started", "the whole run, up to the size cap")
    sv.set_defaults(func=cmd_serve)

    lg = sub.add_parser("loadgen", help="run a scenario's load against a real server", description=LOADGEN_DESCRIPTION,
                        formatter_class=Formatter)
    add_scenario(lg)
    lg.add_argument("--addr", metavar="HOST:PORT", action="append",
                    help="the server (default 127.0.0.1:<runtime.port>); a non-loopback address is refused unless "
                         "--allow-remote. Given N times with server.replicas = N: the replicas, in order "
                         "(clients.replica_choice picks one per session; a failure is resent to the next, up to "
                         "clients.retries times)")
    lg.add_argument("--seed", type=seed, metavar="N", help="seed of every random stream (default: the scenario's)")
    lg.add_argument("--allow-remote", action="store_true", help="allow a non-loopback server address")
    lg.add_argument("--result", metavar="FILE", help="write the full result (JSON: summary, client counters, "
                                                     "time series, latency CDF) to FILE")
    lg.add_argument("--json", action="store_true", help="print the summary as JSON on stdout instead of tables")
    lg.add_argument("--record", metavar="FILE", help="write one row per request to FILE (Parquet; see `real --record`)")
    add_set(lg)
    lg.set_defaults(func=cmd_loadgen)

    rl = sub.add_parser("real", help="run server and load generator on loopback and merge the results",
                        description=REAL_DESCRIPTION, formatter_class=Formatter)
    add_scenario(rl)
    rl.add_argument("--seed", type=seed, metavar="N", help="seed of the load generator's random streams")
    rl.add_argument("--out", metavar="DIR", help="write the results to DIR: summary.json, scenario.json, "
                                                 "timeseries.parquet, latency_cdf.parquet, latency_cdf.png, "
                                                 "server_report.json")
    rl.add_argument("--json", action="store_true", help="print the merged summary as JSON on stdout")
    rl.add_argument("--compare-sim", action="store_true",
                    help="also simulate the same scenario (same overrides and seed: the same arrivals, sessions "
                         "and service times) and print the two side by side; with --json the simulator's summary "
                         "is added under the key `sim`, with --out it is written to DIR/sim_summary.json. A "
                         "second simulation charges this machine's stack costs and replays the CPU the run's load "
                         "generator and controller took from the workers (runtime.harness.sim_overrides): key "
                         "`sim_harness`, file DIR/sim_harness_summary.json")
    rl.add_argument("--record", metavar="FILE",
                    help="write one row per request (creation time, session, type, service time asked, replica, "
                         "tries, outcome, latency, the server's queueing delay) to FILE (Parquet); with --out also "
                         "DIR/requests.parquet. Replay it in the simulator with --set workload.replay=FILE")
    rl.add_argument("--replay", action="store_true",
                    help="with --compare-sim: also simulate exactly the requests of this run (workload.replay) and "
                         "report how the two differ request by request: the latency difference's distribution and "
                         "the requests that differ most, with where their time went (key `replay_divergence`, file "
                         "DIR/replay_divergence.json)")
    rl.add_argument("--oversubscribe", action="store_true",
                    help="run even if the server's spinning workers (server.max_cores) outnumber this machine's "
                         "CPUs (they would starve the load generator, the controller and everything else)")
    add_set(rl)
    add_trace(rl, "the server's run time since it started (the load generator starts once it listens, a second "
                  "or more later on a busy machine)", "the whole run, up to the size cap")
    rl.set_defaults(func=cmd_real)


def cmd_serve(args: argparse.Namespace) -> int:
    from .. import real

    # `kill PID` (and `real` stopping it) stops the server as Ctrl-C does: it reports.
    sigterm_as_ctrl_c()

    def ready(addr: str) -> None:
        sys.stdout.write(f"{real.LISTENING}{addr}\n")
        sys.stdout.flush()

    endpoint = None
    if args.metrics_port is not None:
        from ..live import MetricsEndpoint

        try:
            endpoint = MetricsEndpoint(args.metrics_port)
        except OSError as e:
            raise CliError(f"--metrics-port: cannot listen on 127.0.0.1:{args.metrics_port}: {e.strerror}") from None
        sys.stderr.write(f"metrics on http://127.0.0.1:{endpoint.port}/metrics\n")
        sys.stderr.flush()

    def stats(snap: dict) -> None:
        if endpoint is not None:
            endpoint.update(snap)
        if args.stats_every:
            sys.stderr.write(json.dumps(snap) + "\n")
            sys.stderr.flush()

    def limits(lim: dict) -> None:
        sys.stderr.write(serve_limits_text(lim) + "\n")
        sys.stderr.flush()

    live = args.stats_every is not None or endpoint is not None
    try:
        rep = real.serve(args.scenario, addr=args.addr, duration_s=args.duration, overrides=args.overrides,
                         allow_remote=args.allow_remote, once=args.once, ready=ready,
                         stats=stats if live else None, stats_every_s=args.stats_every or 1.0,
                         max_service_us=args.max_service_us, max_client_sessions=args.max_client_sessions,
                         connect_rate=args.connect_rate, limits=limits, trace=args.trace,
                         trace_window=args.trace_window, trace_max_events=args.trace_max_events)
        # Stopped: a second SIGTERM must not cut the report short.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except ValueError as e:
        # A flag or the environment is at fault, not the scenario file.
        msg = str(e)
        raise CliError(msg if msg.startswith(("--", "MICROSCHED_SECRET")) else with_file(e, args.scenario)) from None
    finally:
        if endpoint is not None:
            endpoint.close()
    series = rep.pop("timeseries", None)
    if args.series:
        Path(args.series).write_text(json.dumps(series or {}) + "\n", encoding="utf-8")
    if args.report:
        Path(args.report).write_text(json.dumps(rep, indent=2) + "\n", encoding="utf-8")
    if args.json:
        sys.stdout.write(json.dumps(rep, indent=2) + "\n")
    else:
        c = rep.get("counters", {})
        sys.stdout.write(f"stopped ({rep.get('stop_reason')}) after {rep.get('duration_s', 0):.2f} s: "
                         f"{c.get('requests', 0)} requests, {c.get('completed', 0)} completed, "
                         f"{c.get('aqm_dropped', 0)} AQM drops, {c.get('rejected_no_credit', 0)} without credit, "
                         f"{rep.get('rejected_total', 0)} datagrams rejected; cores allocated "
                         f"{rep.get('cores', {}).get('allocated_mean', 0):.2f} of {rep.get('workers')}\n")
    return 0


def serve_limits_text(lim: dict) -> str:
    """What `serve` says at start: whether authentication is on, and its limits."""
    auth = ("authentication on: Connects must prove MICROSCHED_SECRET" if lim.get("authentication") else
            "authentication off (MICROSCHED_SECRET is unset): any client that reaches this address can connect")
    return (f"microsched serve: {auth}; requests up to {lim.get('max_service_us', 0):,.0f} µs of service; "
            f"{lim.get('sessions')} session slots, at most {lim.get('max_client_sessions')} per client, "
            f"{lim.get('connect_rate_per_s', 0):,.0f} Connects/s per client")


def cmd_loadgen(args: argparse.Namespace) -> int:
    from .. import real

    overrides = list(args.overrides or []) + (["metrics.record_requests=true"] if args.record else [])
    try:
        res = real.loadgen(args.scenario, addr=args.addr, overrides=overrides, seed=args.seed,
                           allow_remote=args.allow_remote)
    except ValueError as e:
        raise CliError(with_file(e, args.scenario)) from None
    if args.record:
        from ..records import records_frame, write_records

        df, cut_warning = records_frame(res)
        if cut_warning:
            sys.stderr.write(f"microsched: warning: {cut_warning}\n")
        if df is not None:
            write_records(df, args.record)
    if args.result:  # as the runtime wrote it: `real` merges it with the server's report
        Path(args.result).write_text(json.dumps(res) + "\n", encoding="utf-8")
    res.pop("records", None)  # in --result (for `real`), not in the summary
    summary = null_if_none_completed(copy.deepcopy(res["summary"]))
    empty = empty_window_warning(summary)
    if empty:
        sys.stderr.write(f"microsched: warning: {empty}\n")
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        # A `runtime` section marks the real runtime's summary (as `real`'s merged one has): its
        # `sim` counters are the load generator's datagrams, not a simulator's events.
        print_summary(dict(summary, runtime={"client": res.get("client") or {}}))
    return 0


def check_cpus(scenario: str, overrides: list[str], oversubscribe: bool) -> None:
    """Refuses a real run whose workers outnumber the CPUs, unless ``oversubscribe``.

    Workers spin while they search for work, so more workers than CPUs starve every other
    thread. The controller and the load generator sleep between events and are not counted
    (the shipped 2-worker scenarios run on 2 CPUs); a run with more workers than CPUs measures
    the kernel's scheduler, not the policies."""
    from ..api import validate
    from ..sweep.runner import default_jobs

    server = validate(scenario, overrides=overrides, force=True)["server"]
    replicas = int(server.get("replicas", 1))
    workers = int(server["max_cores"]) * replicas
    cpus = default_jobs()
    if workers > cpus and not oversubscribe:
        if replicas > 1:
            raise CliError(f"server.max_cores: {server['max_cores']} workers on each of server.replicas = {replicas} "
                           f"servers are {workers} spinning workers on {cpus} CPU(s): they would starve this machine "
                           f"(and the load generator and controller with it): use server.max_cores x server.replicas "
                           f"<= {cpus}, or --oversubscribe to run anyway")
        raise CliError(f"server.max_cores: {workers} spinning workers on {cpus} CPU(s) would starve this machine "
                       f"(and the load generator and controller with it): use --set server.max_cores={cpus} or "
                       f"less, or --oversubscribe to run anyway")


def cmd_real(args: argparse.Namespace) -> int:
    from .. import real

    # SIGTERM stops the run as Ctrl-C does: both processes are stopped before it exits.
    sigterm_as_ctrl_c()

    if args.replay and not args.compare_sim:
        raise CliError("--replay: it compares with the simulator: use it with --compare-sim")
    divergence = None
    try:
        check_cpus(args.scenario, args.overrides, args.oversubscribe)
        record = args.record or (True if args.replay else None)
        res = real.run_real(args.scenario, overrides=args.overrides, seed=args.seed, out=args.out, trace=args.trace,
                            trace_window=args.trace_window, trace_max_events=args.trace_max_events, record=record)
        sim = _simulate(args) if args.compare_sim else None
        sim_harness = _simulate_harness(args, res.summary) if args.compare_sim else None
        if args.replay:
            divergence = _replay_divergence(args, res)
    except ValueError as e:
        raise CliError(with_file(e, args.scenario)) from None
    except real.RealError as e:
        raise CliError(e) from None
    if sim is not None and args.out:
        (Path(args.out) / "sim_summary.json").write_text(json.dumps(sim, indent=2) + "\n", encoding="utf-8")
        if sim_harness is not None:
            (Path(args.out) / "sim_harness_summary.json").write_text(json.dumps(sim_harness, indent=2) + "\n",
                                                                      encoding="utf-8")
    if divergence is not None and args.out:
        (Path(args.out) / "replay_divergence.json").write_text(json.dumps(divergence, indent=2) + "\n", encoding="utf-8")
    if args.json:
        out = dict(res.summary, sim=sim, sim_harness=sim_harness) if sim is not None else res.summary
        if divergence is not None:
            out = dict(out, replay_divergence=divergence)
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        print_summary(res.summary)
        console().print(runtime_line(res.summary))
        if sim is not None:
            print_comparison(res.summary, sim, sim_harness)
        if divergence is not None:
            print_divergence(divergence)
        if args.out:
            console().print(f"results written to [bold]{args.out}/[/bold]")
    for warning in (_schedule_lag_warning(res.summary), _starvation_warning(res.summary, _cpus())):
        if warning:
            sys.stderr.write(f"microsched: warning: {warning}\n")
    return 0


def _cpus() -> int:
    from ..sweep.runner import default_jobs

    return default_jobs()


# CPUs' worth of demand beyond the machine's before `real` warns: the harness's own measurement
# varies by a few hundredths, and a warning that flickers would teach users to ignore it.
STARVATION_MARGIN_CPUS = 0.1


def _starvation_warning(summary: dict, cpus: int) -> str | None:
    """A warning when the workers' cores (they spin while allocated) and the load generator's and
    controller's CPU (``runtime.harness.measured.cpus``) add up to more than the machine's CPUs:
    then the harness ran on the workers' CPUs and stretched the requests they served, so the
    latencies measure the machine's contention as much as the policies."""
    measured = (((summary.get("runtime") or {}).get("harness") or {}).get("measured")) or {}
    harness = measured.get("cpus")
    allocated = (summary.get("cores") or {}).get("allocated_mean")
    if not isinstance(harness, (int, float)) or not isinstance(allocated, (int, float)) or cpus <= 0:
        return None
    if allocated + harness <= cpus + STARVATION_MARGIN_CPUS:
        return None
    return (f"the load generator and the controller used {harness:.2f} CPUs while the workers held "
            f"{allocated:.2f} cores on this {cpus}-CPU machine: they ran on the workers' CPUs and stretched the "
            f"requests served, so the latencies include that contention (`--compare-sim` replays it in the "
            f"sim+harness column; run `microsched loadgen --addr` from another machine to avoid it)")


def runtime_line(summary: dict) -> str:
    """The real runtime's own line: request accounting, best-effort work, the load generator's
    lag. Best-effort threads compute square roots; their rate is named as such, and a run
    without them says so rather than printing a rate of 0."""
    rt = summary.get("runtime", {}) or {}
    acc = rt.get("accounting", {}) or {}
    be = rt.get("be", {}) or {}
    lag = (rt.get("client") or {}).get("schedule_lag_us") or {}
    if be.get("threads"):
        best_effort = (f"best-effort work {num(be.get('ops_per_s'), ',.0f')} square roots/s on "
                       f"{be.get('threads')} thread(s)")
    else:
        best_effort = "no best-effort threads (runtime.be_threads = 0)"
    return (f"real runtime: requests the client sent {acc.get('client_sent')}, the server received "
            f"{acc.get('server_requests')} (agree: {acc.get('agree')}); {best_effort}; load generator's "
            f"schedule lag p99 {num(lag.get('p99'))} µs")


def _simulate(args: argparse.Namespace, extra: list[str] | None = None) -> dict:
    """The simulator's summary of the scenario `real` just ran (same overrides and seed)."""
    from ..api import run

    return run(args.scenario, seed=args.seed, overrides=list(args.overrides or []) + (extra or [])).summary


def _replay_divergence(args: argparse.Namespace, res: Any) -> dict:
    """The simulator on exactly the requests of the real run `res` (workload.replay), compared
    request by request."""
    import tempfile

    from ..api import run
    from ..records import divergence, write_records

    if res.requests is None or res.requests.empty:
        raise CliError("--replay: the real run recorded no request")
    with tempfile.TemporaryDirectory(prefix="microsched-replay-") as tmp:
        rec = write_records(res.requests, Path(tmp) / "record.parquet")
        ovr = list(args.overrides or []) + [f'workload.replay="{rec}"', "metrics.record_requests=true"]
        sim = run(args.scenario, seed=args.seed, overrides=ovr)
    if sim.requests is None:
        raise CliError("--replay: the simulator kept no per-request rows")
    return divergence(res.requests, sim.requests)


def print_divergence(d: dict) -> None:
    """The replay's request-by-request comparison: the distribution of real − sim latency and
    the requests that differ most."""
    from rich.table import Table

    console().print(f"replay: {d['matched']:,} requests matched (real completed {d['real_completed']:,}, "
                     f"simulator {d['sim_completed']:,})")
    q = d.get("diff_us")
    if not q:
        return
    console().print("latency real − sim (µs): " + ", ".join(f"{k} {num(q[k], ',.1f')}" for k in
                                                            ["p1", "p10", "p50", "p90", "p99", "mean", "abs_mean"]))
    t = Table(title="requests that differ most (µs): where their time went", title_justify="left")
    for col in ["id", "type", "service", "real", "sim", "real − sim", "real queue", "sim queue", "real at server",
                "sim at server", "real rest", "sim rest"]:
        t.add_column(col, justify="right")
    for r in d["top"]:
        t.add_row(str(r["id"]), str(r["type"]), num(r["service_us"], ",.1f"), num(r["latency_real_us"], ",.1f"),
                  num(r["latency_sim_us"], ",.1f"), num(r["diff_us"], ",.1f"), num(r["real_queue_us"], ",.1f"),
                  num(r["sim_queue_us"], ",.1f"), num(r["real_service_us"], ",.1f"), num(r["sim_service_us"], ",.1f"),
                  num(r["real_rest_us"], ",.1f"), num(r["sim_rest_us"], ",.1f"))
    console().print(t)


def _simulate_harness(args: argparse.Namespace, real_summary: dict) -> dict | None:
    """The same, charging this machine's stack costs and replaying the CPU the real run's load
    generator and controller took from the workers (None if the run reported none)."""
    replay = (((real_summary.get("runtime") or {}).get("harness") or {}).get("sim_overrides")) or []
    if not replay:
        return None
    return _simulate(args, ['server.stack.profile="this-machine"', *replay])


def print_comparison(real_summary: dict, sim_summary: dict, harness_summary: dict | None = None) -> None:
    """Real vs simulated key metrics, side by side, with the real/sim ratio (and the simulator
    with this machine's stack and the run's harness replayed, when given)."""
    from rich.table import Table

    def get(s: Any, path: str) -> Any:
        for k in path.split("."):
            if isinstance(s, list) and k.isdigit():
                s = s[int(k)] if int(k) < len(s) else None
            else:
                s = (s or {}).get(k) if isinstance(s, dict) else None
        return s

    t = Table(title="real runtime vs simulator (same scenario, overrides and seed)", title_justify="left")
    cols = [("metric", "left"), ("real", "right"), ("sim", "right"), ("real / sim", "right")]
    if harness_summary is not None:
        cols += [("sim+harness", "right"), ("real / sim+harness", "right")]
    for col, just in cols:
        t.add_column(col, justify=just)  # type: ignore[arg-type]

    def ratio(r: Any, m: Any) -> str:
        return f"{float(r) / float(m):.2f}" if isinstance(r, (int, float)) and isinstance(m, (int, float)) and m else "-"

    for label, path, fmt in [
        ("throughput (req/s)", "throughput_rps", ",.0f"),
        ("goodput (req/s)", "goodput_rps", ",.0f"),
        ("drop rate", "drop_rate", ".4f"),
        ("latency p50 (µs)", "latency_us.p50", ",.1f"),
        ("latency p99 (µs)", "latency_us.p99", ",.1f"),
        ("latency p99.9 (µs)", "latency_us.p999", ",.1f"),
        ("queueing delay p99 (µs)", "queueing_delay_us.p99", ",.1f"),
        ("cores allocated (mean)", "cores.allocated_mean", ".2f"),
        ("cores busy (mean)", "cores.busy_mean", ".2f"),
        ("credit pool (mean)", "credits.pool_mean", ",.1f"),
        ("lock_control drops", "lock_control.drops", ",.0f"),
        # The first condvar's woken waits (the real server's whole run, the simulator's window).
        ("condvar wait p50 (µs)", "condvars.0.wait_us.p50", ",.1f"),
        ("condvar wait p99 (µs)", "condvars.0.wait_us.p99", ",.1f"),
    ]:
        r, m = get(real_summary, path), get(sim_summary, path)
        if r is None and m is None:
            continue
        row = [label, num(r, fmt), num(m, fmt), ratio(r, m)]
        if harness_summary is not None:
            h = get(harness_summary, path)
            row += [num(h, fmt), ratio(r, h)]
        t.add_row(*row)
    console().print(t)


def _schedule_lag_warning(summary: dict) -> str | None:
    """A warning when the load generator fell behind its own schedule by a tenth of the SLO or
    more at the 99th percentile: that lag is in every latency it measured, so the client, not
    the server, shaped the tail (on a small machine: try `runtime.realtime = true`, fewer
    workers, or longer requests)."""
    lag = ((summary.get("runtime") or {}).get("client") or {}).get("schedule_lag_us") or {}
    p99, slo = lag.get("p99"), summary.get("slo_us")
    if p99 is None or not slo or p99 < 0.1 * slo:
        return None
    return (f"the load generator processed arrivals up to {p99:,.0f} µs late (p99 of "
            f"runtime.client.schedule_lag_us; SLO {slo:,.0f} µs): that lag is part of every latency "
            f"measured, so the load generator, not the server, shaped the tail")
