"""The ``microsched`` command line.

Every command's ``--help`` is its manual. Bad input of any kind (an invalid scenario, a
missing file, a malformed ``--set``, an unknown flag) prints exactly one line on stderr,
``microsched: error: <message>``, and exits with status 2; never a traceback. Set
``MICROSCHED_DEBUG=1`` to get the traceback of an unexpected internal error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn, Sequence

PROG = "microsched"
EXIT_USAGE = 2
EXIT_INTERNAL = 1


class CliError(Exception):
    """Bad input: reported as one line on stderr, exit status 2."""


def _one_line(msg: object) -> str:
    return " ".join(str(msg).split()) or "unknown error"


def _fail(msg: object, code: int = EXIT_USAGE) -> NoReturn:
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
    sys.stderr.write(f"{PROG}: error: {_one_line(msg)}\n")
    sys.stderr.flush()
    raise SystemExit(code)


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors reported as one line (``--help`` shows the usage)."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        _fail(f"{message} (see `{self.prog} --help`)")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=min(100, _term_width()))


def _term_width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 100


# ---------------------------------------------------------------------------------------------
# argument types


def _seed(text: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: use an integer in 0..2^64-1") from None
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: use an integer in 0..2^64-1")
    return v


def _override(text: str) -> str:
    key, sep, _ = text.partition("=")
    if not sep or not key.strip() or any(not p.strip() for p in key.split(".")):
        raise argparse.ArgumentTypeError(f"`{text}` is not of the form dotted.key=value")
    return text


def _positive(text: str) -> int:
    try:
        v = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: use a positive integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: use a positive integer")
    return v


# ---------------------------------------------------------------------------------------------
# parser


DESCRIPTION = """\
microsched: a deterministic discrete-event simulator of a microsecond-scale server
(cores, per-core or central queues, work stealing, network RTT, open-loop clients,
core allocators and overload controllers).

commands:
  run        simulate a scenario and print its summary (optionally save results and a plot)
  validate   check a scenario and print it with every default filled in
  schema     print the JSON Schema of the scenario format
  bench      measure simulator speed (simulated requests per wall-clock second)
  reproduce  regenerate a paper's figure and check its claims (`reproduce --list`)
  serve      run the real UDP server of a scenario (worker threads, parking, credits)
  loadgen    run the scenario's open-loop load against a real server
  real       run server and load generator as two processes on loopback, merge the results
  sweep      run a sweep spec (grid of overrides × seeds) on a local pool or on Ray
  plot       draw latency / throughput / Pareto / slowdown / time-series figures
  report     write a self-contained HTML report of a sweep, reproduction or run

Run `microsched COMMAND --help` for the manual of a command.
Bad input exits with status 2 and one line on stderr: `microsched: error: <message>`.
"""

RUN_DESCRIPTION = """\
Simulate SCENARIO and print a summary: offered load, throughput, goodput (within the SLO),
drop rate, end-to-end latency, server queueing delay and slowdown (mean, p50, p99, p99.9),
cores allocated and busy, CPU utilization, best-effort cores, request conservation
counters, per-type metrics and the simulator's own speed.

Statistics cover the measured window (after `warmup_ms`); the request counters cover the
whole run. Same scenario + same seed gives bit-identical results.

examples:
  microsched run experiments/validation/mmc.toml
  microsched run mmc.toml --seed 7 --set load.fraction=0.9 --set server.queue=per_core
  microsched run mmc.toml --set duration_ms=100 --json | jq .latency_us.p99
  microsched run mmc.toml --out out/mmc        # summary.json, timeseries.parquet, latency_cdf.png
"""

SET_HELP = (
    "override one scenario field before validation, e.g. --set server.max_cores=8, "
    "--set load.fraction=0.9, --set server.queue=central (VALUE is a TOML literal, else "
    "taken as a string; missing tables are created). Repeat for several fields"
)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=DESCRIPTION, formatter_class=_Formatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                   help="print the version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    r = sub.add_parser("run", help="simulate a scenario and print its summary", description=RUN_DESCRIPTION,
                       formatter_class=_Formatter)
    r.add_argument("scenario", metavar="SCENARIO", help="scenario file: TOML (or JSON if the name ends in .json)")
    r.add_argument("--seed", type=_seed, metavar="N",
                   help="seed of every random stream (default: the scenario's `seed`, itself 1 by default)")
    r.add_argument("--set", dest="overrides", action="append", type=_override, default=[],
                   metavar="KEY=VALUE", help=SET_HELP)
    r.add_argument("--out", metavar="DIR",
                   help="write the results to DIR (created if needed): summary.json, scenario.json (resolved), "
                        "timeseries.parquet, latency_cdf.parquet, latency_cdf.png and, if "
                        "metrics.record_requests is true, requests.parquet")
    r.add_argument("--json", action="store_true",
                   help="print the summary as JSON on stdout (and nothing else) instead of tables")
    r.set_defaults(func=cmd_run)

    v = sub.add_parser("validate", help="check a scenario and print it resolved",
                       description="Validate SCENARIO against the schema and print it as JSON with every default "
                                   "filled in (what `run` would simulate). Errors name the field at fault and "
                                   "what is allowed.",
                       formatter_class=_Formatter)
    v.add_argument("scenario", metavar="SCENARIO", help="scenario file: TOML (or JSON if the name ends in .json)")
    v.add_argument("--set", dest="overrides", action="append", type=_override, default=[],
                   metavar="KEY=VALUE", help=SET_HELP)
    v.set_defaults(func=cmd_validate)

    s = sub.add_parser("schema", help="print the JSON Schema of the scenario format",
                       description="Print the JSON Schema of a scenario (generated from the Rust types that "
                                   "validate it: the one place the format is defined).",
                       formatter_class=_Formatter)
    s.set_defaults(func=cmd_schema)

    b = sub.add_parser("bench", help="measure simulated requests per wall-clock second",
                       description=BENCH_DESCRIPTION, formatter_class=_Formatter)
    b.add_argument("--quick", action="store_true",
                   help="short runs (mmc: 200 ms simulated; 32-core: 50 ms) for a smoke test; "
                        "the default runs are long enough for stable figures")
    b.add_argument("--seed", type=_seed, metavar="N", help="seed of both runs (default: 1)")
    b.add_argument("--json", action="store_true",
                   help="print the measurements as a JSON list on stdout instead of a table")
    b.set_defaults(func=cmd_bench)

    rp = sub.add_parser("reproduce", help="regenerate a paper's figure and check its claims",
                        description=REPRODUCE_DESCRIPTION, formatter_class=_Formatter)
    rp.add_argument("name", nargs="?", metavar="NAME", help="the reproduction to run (see --list)")
    rp.add_argument("--list", action="store_true", help="list the reproductions (name, paper, figure) and exit")
    rp.add_argument("--quick", action="store_true",
                    help="the spec's [quick] profile: fewer points, shorter runs, one seed (a smoke test for CI)")
    rp.add_argument("--out", metavar="DIR", help="output directory (default: results/NAME)")
    rp.add_argument("--jobs", type=_positive, metavar="N",
                    help="runs in parallel in worker processes (default: the number of CPUs)")
    rp.add_argument("--seeds", type=_positive, metavar="K",
                    help="run seeds 1..K of every point (default: the spec's seeds)")
    rp.set_defaults(func=cmd_reproduce)

    from .sweep.commands import add_commands  # sweep, plot, report

    add_commands(sub, _Formatter)
    _add_real_commands(sub)
    return p


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("microsched")
    except Exception:  # noqa: BLE001
        return "unknown"


# ---------------------------------------------------------------------------------------------
# commands


def _with_file(msg: object, path: str) -> str:
    return f"{_one_line(msg)} (in {path})"


def cmd_run(args: argparse.Namespace) -> int:
    from .api import run

    try:
        res = run(args.scenario, seed=args.seed, overrides=args.overrides)
    except ValueError as e:
        raise CliError(_with_file(e, args.scenario)) from None
    if args.json:
        sys.stdout.write(json.dumps(res.summary, indent=2) + "\n")
    else:
        print_summary(res.summary)
    if args.out:
        out = res.save(args.out)
        if not args.json:
            from .api import CDF_PLOT_FILE

            _console().print(f"results written to [bold]{out}/[/bold]; latency plot: [bold]{out / CDF_PLOT_FILE}[/bold]")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from .api import validate

    try:
        resolved = validate(args.scenario, overrides=args.overrides)
    except ValueError as e:
        raise CliError(_with_file(e, args.scenario)) from None
    sys.stdout.write(json.dumps(resolved, indent=2) + "\n")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from .api import schema

    sys.stdout.write(json.dumps(schema(), indent=2) + "\n")
    return 0


# ---------------------------------------------------------------------------------------------
# bench

BENCH_DESCRIPTION = """\
Measure how fast the simulator runs, in simulated requests per wall-clock second (the
simulator is single-threaded: this is the speed of one core), on two scenarios:

  mmc     experiments/validation/mmc.toml: 16 cores, central FCFS queue, exponential
          service with mean 10 us, load 0.8 (1.28 M requests/s)
  exp32   built in code: 32 cores, per-core queues with work stealing, exponential
          service with mean 1 us, load 0.5 (16 M requests/s)

Per-request records are off (metrics.record_requests = false). Reported: simulated
requests generated, simulated time, wall time, simulated requests per wall-clock second
(summary sim.requests_per_wall_s) and simulator events per wall-clock second.
"""


def _repo_file(rel: str) -> Path:
    """A repository file, looked up from the current directory, then from the source tree."""
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        p = base / rel
        if p.is_file():
            return p
    raise CliError(f"{rel} not found (run `microsched bench` from the repository root)")


def bench_scenarios(quick: bool) -> list[tuple[str, Any, list[str]]]:
    """(name, scenario, overrides) of the benchmark runs."""
    mmc = _repo_file("experiments/validation/mmc.toml")
    mmc_ovr = ["metrics.record_requests=false"]
    if quick:
        mmc_ovr += ["duration_ms=200", "warmup_ms=20"]
    exp32 = {
        "name": "exp32-load0.5",
        "duration_ms": 50.0 if quick else 500.0,
        "warmup_ms": 5.0 if quick else 50.0,
        "server": {"max_cores": 32, "queue": "per_core", "steal": True},
        "network": {"rtt_us": 10.0},
        "clients": {"sessions": 1000},
        "load": {"fraction": 0.5},
        "workload": {"types": [{"name": "exp1us", "service": {"dist": "exponential", "mean_us": 1.0}}]},
        "metrics": {"record_requests": False, "sample_interval_us": 1000.0},
    }
    return [("mmc", mmc, mmc_ovr), ("exp32", exp32, [])]


def cmd_bench(args: argparse.Namespace) -> int:
    from .api import run

    rows = []
    for name, scen, ovr in bench_scenarios(args.quick):
        try:
            res = run(scen, seed=args.seed, overrides=ovr)
        except ValueError as e:
            raise CliError(f"bench scenario {name}: {_one_line(e)}") from None
        s = res.summary
        sim = s.get("sim", {})
        wall = float(sim.get("wall_s", 0.0))
        events = int(sim.get("events", 0))
        req = s.get("requests", {})
        warm = float(res.scenario.get("warmup_ms", 0.0) or 0.0)
        rows.append({
            "name": name,
            "scenario": s.get("scenario", name),
            "cores": s.get("cores", {}).get("max"),
            "requests": int(req.get("generated", 0)),
            "sim_time_s": (float(res.scenario.get("duration_ms", 0.0)) + warm) / 1e3,
            "wall_s": wall,
            "events": events,
            "requests_per_wall_s": float(sim.get("requests_per_wall_s", 0.0)),
            "events_per_wall_s": events / wall if wall > 0 else 0.0,
        })
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    from rich.table import Table

    t = Table(title="microsched bench" + (" --quick" if args.quick else ""),
              caption="M requests/s, M events/s: simulated, per wall-clock second, on one core")
    for col, just in [("scenario", "left"), ("cores", "right"), ("requests", "right"), ("sim s", "right"),
                      ("wall s", "right"), ("M requests/s", "right"), ("M events/s", "right")]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        t.add_row(r["name"], str(r["cores"]), f"{r['requests']:,}", f"{r['sim_time_s']:.3f}", f"{r['wall_s']:.3f}",
                  f"{r['requests_per_wall_s'] / 1e6:.2f}", f"{r['events_per_wall_s'] / 1e6:.2f}")
    _console().print(t)
    return 0


# ---------------------------------------------------------------------------------------------
# reproduce

REPRODUCE_DESCRIPTION = """\
Regenerate a figure of a paper and check its claims on the simulator. A reproduction is a
sweep spec (experiments/NAME/sweep.toml: base scenario, grid, variants, seeds, a [quick]
profile) plus its claims. Points run in parallel on a local process pool.

Written to OUT (default results/NAME):
  results.parquet    one row per run: its parameters (variant, grid keys, the keys the
                     variant sets, seed) and every summary metric, flattened with dots
                     (latency_us.p99, cores.allocated_mean, cpu_utilization, ...)
  aggregate.parquet  means over seeds per point, with M.ci95 (95 % CI half-width) and n
  claims.json        [{"id", "claim", "paper", "measured", "holds", ...extra keys}]
  *.png              the figures
  meta.json          the spec as run, paper, figure, jobs, wall time

The claims table is printed at the end. A claim that does not hold is reported (holds =
false), not an error: the exit status is 0 once the results are written.

examples:
  microsched reproduce --list
  microsched reproduce allocators --quick
  microsched reproduce allocators --jobs 8 --seeds 10 --out results/allocators-10seeds
"""


def cmd_reproduce(args: argparse.Namespace) -> int:
    from . import reproduce

    if args.list:
        if args.name:
            raise CliError("--list takes no NAME")
        _print_reproductions(reproduce)
        return 0
    if not args.name:
        raise CliError(f"a reproduction NAME is required: use one of {', '.join(reproduce.names())} "
                       f"(or --list)")
    try:
        reproduce.get(args.name)
    except KeyError as e:
        raise CliError(e.args[0]) from None

    con = _console()
    err_con = _err_console()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    progress = Progress(TextColumn(f"reproduce {args.name}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=err_con,
                        transient=True, disable=not err_con.is_terminal)
    with progress:
        task = progress.add_task("runs", total=None)

        def tick(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        try:
            outcome = reproduce.run_reproduction(args.name, out=args.out, quick=args.quick, jobs=args.jobs,
                                                 seeds=args.seeds, progress=tick)
        except reproduce.SpecError as e:
            raise CliError(e) from None
    repro = reproduce.get(args.name)
    reproduce.print_claims(outcome.claims, title=f"{args.name}: {repro.paper}, {repro.figure}"
                                                 + (" (--quick)" if args.quick else ""), console=con)
    figs = ", ".join(p.name for p in outcome.figures)
    con.print(f"{outcome.n_points} runs on {outcome.jobs} job(s) in {outcome.wall_s:.1f} s; results written to "
              f"[bold]{outcome.out}/[/bold]: results.parquet, aggregate.parquet, claims.json, meta.json, {figs}")
    return 0


def _print_reproductions(reproduce: Any) -> None:
    from rich.table import Table

    t = Table(title="reproductions (`microsched reproduce NAME [--quick]`)", title_justify="left")
    for col in ("name", "paper", "figure", "description", "sweep spec"):
        t.add_column(col, overflow="fold")
    for n in reproduce.names():
        r = reproduce.get(n)
        t.add_row(r.name, r.paper, r.figure, r.description, f"experiments/{r.spec}")
    _console().print(t)


def _err_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


# ---------------------------------------------------------------------------------------------
# real runtime: serve, loadgen, real

SERVE_DESCRIPTION = """\
Run the real server of SCENARIO: a UDP socket on loopback, server.max_cores worker threads
("cores") with per-core queues and work stealing, parked and unparked by the scenario's core
allocator, requests admitted by its overload controller (credits, AQM), the synthetic handler
spinning for each request's service time, and optionally runtime.be_threads best-effort
threads at the lowest priority. Malformed or unauthorised datagrams are counted and dropped.

It prints `listening on ADDR` once bound, then runs until --duration, until every client has
disconnected (--once), or until Ctrl-C, and prints its report (JSON with --json).

examples:
  microsched serve experiments/real/overload-2x.toml --addr 127.0.0.1:7878 --duration 30
  microsched serve scen.toml --addr 127.0.0.1:0 --once --report server.json
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
end, on error and on Ctrl-C.

Note: both processes share this machine's CPUs; on a small machine the load generator and the
server compete, which the results include.

examples:
  microsched real experiments/real/overload-2x.toml
  microsched real experiments/real/overload-2x-none.toml --json | jq .latency_us.p99
  microsched real scen.toml --out out/real   # summary.json, timeseries.parquet, server_report.json, ...
  microsched real experiments/real/overload-2x.toml --compare-sim   # real vs simulated, side by side
"""


def _duration(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: use a number of seconds > 0") from None
    if not (v > 0 and v < float("inf")):
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: use a number of seconds > 0")
    return v


def _add_real_commands(sub: Any) -> None:
    sv = sub.add_parser("serve", help="run the real UDP server of a scenario", description=SERVE_DESCRIPTION,
                        formatter_class=_Formatter)
    sv.add_argument("scenario", metavar="SCENARIO", help="scenario file: TOML (or JSON if the name ends in .json)")
    sv.add_argument("--addr", metavar="HOST:PORT",
                    help="where to listen (default 127.0.0.1:<runtime.port>; port 0 picks a free port); "
                         "a non-loopback address is refused unless --allow-remote")
    sv.add_argument("--duration", type=_duration, metavar="S", help="stop after S seconds (default: run until Ctrl-C)")
    sv.add_argument("--once", action="store_true", help="stop once every client that connected has disconnected")
    sv.add_argument("--allow-remote", action="store_true", help="allow binding a non-loopback address")
    sv.add_argument("--report", metavar="FILE", help="also write the report (JSON) to FILE")
    sv.add_argument("--json", action="store_true", help="print the report as JSON at the end")
    sv.add_argument("--set", dest="overrides", action="append", type=_override, default=[], metavar="KEY=VALUE",
                    help=SET_HELP)
    sv.set_defaults(func=cmd_serve)

    lg = sub.add_parser("loadgen", help="run a scenario's load against a real server", description=LOADGEN_DESCRIPTION,
                        formatter_class=_Formatter)
    lg.add_argument("scenario", metavar="SCENARIO", help="scenario file: TOML (or JSON if the name ends in .json)")
    lg.add_argument("--addr", metavar="HOST:PORT", help="the server (default 127.0.0.1:<runtime.port>); "
                                                        "a non-loopback address is refused unless --allow-remote")
    lg.add_argument("--seed", type=_seed, metavar="N", help="seed of every random stream (default: the scenario's)")
    lg.add_argument("--allow-remote", action="store_true", help="allow a non-loopback server address")
    lg.add_argument("--result", metavar="FILE", help="write the full result (JSON: summary, client counters, "
                                                     "time series, latency CDF) to FILE")
    lg.add_argument("--json", action="store_true", help="print the summary as JSON on stdout instead of tables")
    lg.add_argument("--set", dest="overrides", action="append", type=_override, default=[], metavar="KEY=VALUE",
                    help=SET_HELP)
    lg.set_defaults(func=cmd_loadgen)

    rl = sub.add_parser("real", help="run server and load generator on loopback and merge the results",
                        description=REAL_DESCRIPTION, formatter_class=_Formatter)
    rl.add_argument("scenario", metavar="SCENARIO", help="scenario file: TOML (or JSON if the name ends in .json)")
    rl.add_argument("--seed", type=_seed, metavar="N", help="seed of the load generator's random streams")
    rl.add_argument("--out", metavar="DIR", help="write the results to DIR: summary.json, scenario.json, "
                                                 "timeseries.parquet, latency_cdf.parquet, latency_cdf.png, "
                                                 "server_report.json")
    rl.add_argument("--json", action="store_true", help="print the merged summary as JSON on stdout")
    rl.add_argument("--compare-sim", action="store_true",
                    help="also simulate the same scenario (same overrides and seed: the same arrivals, sessions "
                         "and service times) and print the two side by side; with --json the simulator's summary "
                         "is added under the key `sim`, with --out it is written to DIR/sim_summary.json")
    rl.add_argument("--set", dest="overrides", action="append", type=_override, default=[], metavar="KEY=VALUE",
                    help=SET_HELP)
    rl.set_defaults(func=cmd_real)


def cmd_serve(args: argparse.Namespace) -> int:
    from . import real

    def ready(addr: str) -> None:
        sys.stdout.write(f"{real.LISTENING}{addr}\n")
        sys.stdout.flush()

    try:
        rep = real.serve(args.scenario, addr=args.addr, duration_s=args.duration, overrides=args.overrides,
                         allow_remote=args.allow_remote, once=args.once, ready=ready)
    except ValueError as e:
        raise CliError(_with_file(e, args.scenario)) from None
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


def cmd_loadgen(args: argparse.Namespace) -> int:
    from . import real

    try:
        res = real.loadgen(args.scenario, addr=args.addr, overrides=args.overrides, seed=args.seed,
                           allow_remote=args.allow_remote)
    except ValueError as e:
        raise CliError(_with_file(e, args.scenario)) from None
    if args.result:
        Path(args.result).write_text(json.dumps(res) + "\n", encoding="utf-8")
    if args.json:
        sys.stdout.write(json.dumps(res["summary"], indent=2) + "\n")
    else:
        print_summary(res["summary"])
    return 0


def cmd_real(args: argparse.Namespace) -> int:
    from . import real

    try:
        res = real.run_real(args.scenario, overrides=args.overrides, seed=args.seed, out=args.out)
        sim = _simulate(args) if args.compare_sim else None
    except ValueError as e:
        raise CliError(_with_file(e, args.scenario)) from None
    except real.RealError as e:
        raise CliError(e) from None
    if sim is not None and args.out:
        (Path(args.out) / "sim_summary.json").write_text(json.dumps(sim, indent=2) + "\n", encoding="utf-8")
    if args.json:
        out = dict(res.summary, sim=sim) if sim is not None else res.summary
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        print_summary(res.summary)
        rt = res.summary.get("runtime", {})
        acc = rt.get("accounting", {})
        be = rt.get("be", {})
        lag = (rt.get("client") or {}).get("schedule_lag_us") or {}
        _console().print(f"real runtime: client sent {acc.get('client_sent')}, server received "
                         f"{acc.get('server_requests')} (agree: {acc.get('agree')}); best-effort "
                         f"{_num(be.get('ops_per_s'), ',.0f')} sqrt/s; load generator's schedule lag p99 "
                         f"{_num(lag.get('p99'))} µs")
        if sim is not None:
            print_comparison(res.summary, sim)
        if args.out:
            _console().print(f"results written to [bold]{args.out}/[/bold]")
    lag_warning = _schedule_lag_warning(res.summary)
    if lag_warning:
        sys.stderr.write(f"microsched: warning: {lag_warning}\n")
    return 0


def _simulate(args: argparse.Namespace) -> dict:
    """The simulator's summary of the scenario `real` just ran (same overrides and seed)."""
    from .api import run

    return run(args.scenario, seed=args.seed, overrides=args.overrides).summary


def print_comparison(real_summary: dict, sim_summary: dict) -> None:
    """Real vs simulated key metrics, side by side, with the real/sim ratio."""
    from rich.table import Table

    def get(s: dict, path: str) -> Any:
        for k in path.split("."):
            s = (s or {}).get(k) if isinstance(s, dict) else None
        return s

    t = Table(title="real runtime vs simulator (same scenario, overrides and seed)", title_justify="left")
    for col, just in (("metric", "left"), ("real", "right"), ("sim", "right"), ("real / sim", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
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
    ]:
        r, m = get(real_summary, path), get(sim_summary, path)
        if r is None and m is None:
            continue
        ratio = f"{float(r) / float(m):.2f}" if isinstance(r, (int, float)) and isinstance(m, (int, float)) and m else "-"
        t.add_row(label, _num(r, fmt), _num(m, fmt), ratio)
    _console().print(t)


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


# ---------------------------------------------------------------------------------------------
# summary rendering


def _console():
    from rich.console import Console

    return Console(highlight=False)


def _num(v: Any, fmt: str = ",.1f") -> str:
    if v is None:
        return "-"
    try:
        return format(float(v), fmt)
    except (TypeError, ValueError):
        return str(v)


def _pct(v: Any) -> str:
    return "-" if v is None else f"{float(v) * 100:.3f} %"


def print_summary(s: dict) -> None:
    """Prints a summary dict as readable tables."""
    from rich.table import Table

    con = _console()
    head = (f"[bold]{s.get('scenario') or 'scenario'}[/bold]  seed {s.get('seed', '-')}  "
            f"allocator {s.get('allocator', '-')}  overload {s.get('overload', '-')}  "
            f"measured {_num(s.get('duration_s'), '.3f')} s  SLO {_num(s.get('slo_us'))} µs")
    con.print(head)

    t = Table(title="rates, cores and requests", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    cores = s.get("cores", {}) or {}
    req = s.get("requests", {}) or {}
    for k, v in [
        ("offered load", f"{_num(s.get('offered_rps'), ',.0f')} req/s"),
        ("throughput", f"{_num(s.get('throughput_rps'), ',.0f')} req/s"),
        ("goodput (latency ≤ SLO)", f"{_num(s.get('goodput_rps'), ',.0f')} req/s"),
        ("drop rate", _pct(s.get("drop_rate"))),
        ("cores: max / allocated / busy (mean)",
         f"{cores.get('max', '-')} / {_num(cores.get('allocated_mean'), '.2f')} / {_num(cores.get('busy_mean'), '.2f')}"),
        ("CPU utilization (LC share)", _pct(s.get("cpu_utilization"))),
        ("best-effort cores (mean)", _num(s.get("be_cores_mean"), ".2f")),
        ("requests generated", _num(req.get("generated"), ",.0f")),
        ("  completed / dropped / in flight",
         f"{_num(req.get('completed'), ',.0f')} / {_num(req.get('dropped'), ',.0f')} / {_num(req.get('in_flight'), ',.0f')}"),
    ]:
        t.add_row(k, v)
    con.print(t)

    lt = Table(title="end-to-end latency and server queueing delay (µs); slowdown = latency / service time",
               title_justify="left")
    lt.add_column("metric")
    lt.add_column("type")
    for col in ("mean", "p50", "p99", "p99.9"):
        lt.add_column(col, justify="right")
    lt.add_column("req/s", justify="right")

    def rows(src: dict, label: str, thr: Any) -> None:
        lat = src.get("latency_us", {}) or {}
        q = src.get("queueing_delay_us", {}) or {}
        sd = src.get("slowdown", {}) or {}
        lt.add_row("latency", label, _num(lat.get("mean")), _num(lat.get("p50")), _num(lat.get("p99")),
                   _num(lat.get("p999")), _num(thr, ",.0f"))
        lt.add_row("queueing delay", label, _num(q.get("mean")), _num(q.get("p50")), _num(q.get("p99")),
                   _num(q.get("p999")), "")
        lt.add_row("slowdown (×)", label, "", _num(sd.get("p50"), ".2f"), _num(sd.get("p99"), ".2f"),
                   _num(sd.get("p999"), ".2f"), "")

    rows(s, "all", s.get("throughput_rps"))
    by_type = s.get("by_type") or []
    if len(by_type) > 1:
        for bt in by_type:
            lt.add_section()
            rows(bt, str(bt.get("name", "?")), bt.get("throughput_rps"))
    con.print(lt)

    sim = s.get("sim", {}) or {}
    con.print(f"simulator: {_num(sim.get('events'), ',.0f')} events, {_num(sim.get('wall_s'), '.3f')} s wall, "
              f"{_num(sim.get('requests_per_wall_s'), ',.0f')} sim. requests / wall s")


# ---------------------------------------------------------------------------------------------
# entry point


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``microsched`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        _fail("a command is required: run, validate, schema, bench, reproduce, sweep, plot, report, serve, "
              "loadgen or real "
              f"(see `{PROG} --help`)")
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        _fail(e)
    except (ValueError, OSError) as e:
        if isinstance(e, BrokenPipeError):  # stdout closed early (`| head`): not an error
            try:
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115
            except OSError:
                pass
            return 0
        msg = e.strerror + (f": {e.filename}" if e.filename else "") if isinstance(e, OSError) and e.strerror else e
        _fail(msg)
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except BaseException as e:  # a panic in the native code (pyo3 PanicException) or a bug
        if isinstance(e, (SystemExit, GeneratorExit)):
            raise
        if os.environ.get("MICROSCHED_DEBUG"):
            raise
        _fail(f"internal error ({type(e).__name__}): {e}; please report it "
              f"(set MICROSCHED_DEBUG=1 for a traceback)", EXIT_INTERNAL)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
