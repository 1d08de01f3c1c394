"""Console output of the commands: the consoles, and a run's summary as tables (run, loadgen, real)."""

from __future__ import annotations

from typing import Any


# The width a console gets when its stream is not a terminal (a pipe, a file, a test's capture):
# wide enough that no line a command prints is split, whatever COLUMNS says or a path's length.
UNWRAPPED_WIDTH = 10_000


def _console(stderr: bool):
    """A rich console that never wraps a message: ``soft_wrap`` leaves long lines whole (a
    terminal folds them itself, a copied path stays one line), and when the stream is not a
    terminal the width is :data:`UNWRAPPED_WIDTH` (rich would otherwise assume 80 columns, or
    COLUMNS, and split tables and messages there). Tables keep their natural width."""
    import sys

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=None if tty else UNWRAPPED_WIDTH)


def console():
    return _console(stderr=False)


def err_console():
    return _console(stderr=True)


def num(v: Any, fmt: str = ",.1f") -> str:
    if v is None:
        return "-"
    try:
        return format(float(v), fmt)
    except (TypeError, ValueError):
        return str(v)


def pct(v: Any) -> str:
    return "-" if v is None else f"{float(v) * 100:.3f} %"


def print_summary(s: dict) -> None:
    """Prints a summary dict as readable tables."""
    from rich.table import Table

    con = console()
    head = (f"[bold]{s.get('scenario') or 'scenario'}[/bold]  seed {s.get('seed', '-')}  "
            f"allocator {s.get('allocator', '-')}  overload {s.get('overload', '-')}  "
            f"measured {num(s.get('duration_s'), '.3f')} s  SLO {num(s.get('slo_us'))} µs")
    con.print(head)

    t = Table(title="rates, cores and requests", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    cores = s.get("cores", {}) or {}
    req = s.get("requests", {}) or {}
    real = "runtime" in s
    be = (s.get("runtime") or {}).get("be")
    # `cpu_utilization` is the share of the cores allocated to the latency-critical application
    # (allocated / max), not how busy they were: `busy` above says that. On the real runtime the
    # cores no application holds are parked; they are best-effort cores only with BE threads.
    if real and isinstance(be, dict) and not be.get("threads"):
        be_row = ("parked cores (mean; no best-effort threads)", num(s.get("be_cores_mean"), ".2f"))
    else:
        be_row = ("best-effort cores (mean)", num(s.get("be_cores_mean"), ".2f"))
    for k, v in [
        ("offered load", f"{num(s.get('offered_rps'), ',.0f')} req/s"),
        ("throughput", f"{num(s.get('throughput_rps'), ',.0f')} req/s"),
        ("goodput (latency ≤ SLO)", f"{num(s.get('goodput_rps'), ',.0f')} req/s"),
        ("drop rate", pct(s.get("drop_rate"))),
        ("cores: max / allocated / busy (mean)",
         f"{cores.get('max', '-')} / {num(cores.get('allocated_mean'), '.2f')} / {num(cores.get('busy_mean'), '.2f')}"),
        ("cores allocated to LC (share of max)", pct(s.get("cpu_utilization"))),
        be_row,
        ("requests generated", num(req.get("generated"), ",.0f")),
        ("  completed / dropped / in flight",
         f"{num(req.get('completed'), ',.0f')} / {num(req.get('dropped'), ',.0f')} / {num(req.get('in_flight'), ',.0f')}"),
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
        lt.add_row("latency", label, num(lat.get("mean")), num(lat.get("p50")), num(lat.get("p99")),
                   num(lat.get("p999")), num(thr, ",.0f"))
        lt.add_row("queueing delay", label, num(q.get("mean")), num(q.get("p50")), num(q.get("p99")),
                   num(q.get("p999")), "")
        lt.add_row("slowdown (×)", label, "", num(sd.get("p50"), ".2f"), num(sd.get("p99"), ".2f"),
                   num(sd.get("p999"), ".2f"), "")

    rows(s, "all", s.get("throughput_rps"))
    by_type = s.get("by_type") or []
    if len(by_type) > 1:
        for bt in by_type:
            lt.add_section()
            rows(bt, str(bt.get("name", "?")), bt.get("throughput_rps"))
    con.print(lt)

    apps = s.get("applications") or []
    nodes = s.get("nodes") or []
    if len(apps) > 1:
        at = Table(title="applications (the tables above are the first one's)", title_justify="left")
        for col in ("application", "offered req/s", "goodput req/s", "drop rate", "p50 µs", "p99 µs", "retries"):
            at.add_column(col, justify="left" if col == "application" else "right")
        for a in apps:
            lat = a.get("latency_us", {}) or {}
            at.add_row(str(a.get("name")), num(a.get("offered_rps"), ",.0f"), num(a.get("goodput_rps"), ",.0f"),
                       pct(a.get("drop_rate")), num(lat.get("p50")), num(lat.get("p99")), num(a.get("retries"), ",.0f"))
        con.print(at)
    if len(nodes) > 1:
        nt = Table(title="server nodes (the cores above are their totals)", title_justify="left")
        for col in ("node", "cores allocated", "busy", "preemptions", "lock waits"):
            nt.add_column(col, justify="right")
        for n in nodes:
            c, sc = n.get("cores", {}) or {}, n.get("sched", {}) or {}
            nt.add_row(str(n.get("node")), num(c.get("allocated_mean"), ".2f"), num(c.get("busy_mean"), ".2f"),
                       num(sc.get("preemptions"), ",.0f"), num(sc.get("lock_waits"), ",.0f"))
        con.print(nt)
    sched = s.get("sched") or {}
    if any(sched.get(k) for k in ("preemptions", "yields", "lock_acquisitions")):
        con.print(f"scheduling ({sched.get('queue_policy')}): {num(sched.get('preemptions'), ',.0f')} preemptions, "
                  f"{num(sched.get('yields'), ',.0f')} yields, {num(sched.get('lock_acquisitions'), ',.0f')} lock "
                  f"acquisitions of which {num(sched.get('lock_waits'), ',.0f')} waited "
                  f"(mean {num(sched.get('lock_wait_us_mean'), '.2f')} µs)")
    if sched.get("avoided_preemptions"):
        con.print(f"conditional preemption: {num(sched.get('avoided_preemptions'), ',.0f')} quantum expiries let the "
                  f"request run on")
    wu = sched.get("worker_utilization") or {}
    if wu.get("max"):
        con.print(f"worker utilization: mean {num(wu.get('mean'), '.3f')}, min {num(wu.get('min'), '.3f')}, "
                  f"max {num(wu.get('max'), '.3f')}")

    sim = s.get("sim", {}) or {}
    if "runtime" in s:  # the real runtime (`real`, `loadgen`): its `sim` counts the load generator's datagrams
        client = (s.get("runtime") or {}).get("client") or {}
        if "datagrams_out" in client and "datagrams_in" in client:
            traffic = (f"{num(client['datagrams_out'], ',.0f')} datagrams sent (requests, credit requests, "
                       f"connects) and {num(client['datagrams_in'], ',.0f')} received")
        else:
            traffic = f"{num(sim.get('events'), ',.0f')} datagrams sent and received together"
        con.print(f"load generator: {traffic} over the whole run (warm-up and drain included), "
                  f"{num(sim.get('wall_s'), '.3f')} s; {num(sim.get('requests_per_wall_s'), ',.0f')} requests generated / s")
    else:
        con.print(f"simulator: {num(sim.get('events'), ',.0f')} events, {num(sim.get('wall_s'), '.3f')} s wall, "
                  f"{num(sim.get('requests_per_wall_s'), ',.0f')} sim. requests / wall s")
