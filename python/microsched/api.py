"""Run a scenario and get its results: :func:`run` and :class:`RunResult`."""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

if TYPE_CHECKING:  # pandas is imported when a result is built: `microsched validate` starts faster
    import pandas as pd

from ._files import read_text
from ._native_loader import native
from .scenario import Scenario, _format_of, _parse, check_names, is_numpy, refuse_sweep_spec

ScenarioLike = str | os.PathLike | Mapping[str, Any] | Scenario

# Files RunResult.save writes (requests.parquet only when per-request records were kept).
SUMMARY_FILE = "summary.json"
SCENARIO_FILE = "scenario.json"
TIMESERIES_FILE = "timeseries.parquet"
REQUESTS_FILE = "requests.parquet"
CDF_DATA_FILE = "latency_cdf.parquet"
CDF_PLOT_FILE = "latency_cdf.png"


@dataclass
class RunResult:
    """The result of one simulation run.

    Attributes:
        summary: the summary metrics (the JSON that ``microsched run --json`` prints):
            ``offered_rps``, ``throughput_rps``, ``goodput_rps``, ``drop_rate``, ``latency_us``,
            ``queueing_delay_us``, ``slowdown``, ``cores``, ``cpu_utilization``,
            ``be_cores_mean``, ``requests``, ``core_time``, ``by_type``, ``sim``, ...
        timeseries: one row per sampling interval (``t_ms``, ``cores_allocated``,
            ``cores_busy``, ``queue_len``, ``oldest_delay_us``, ``arrivals``, ``completions``,
            ``drops``, ...).
        requests: one row per request (``metrics.record_requests = true``), else ``None``.
        scenario: the resolved scenario (every default filled in) that was run.
        latency_cdf: the end-to-end latency CDF of the measured window from the HDR histogram,
            columns ``latency_us`` and ``fraction``.
    """

    summary: dict
    timeseries: pd.DataFrame
    requests: pd.DataFrame | None
    scenario: dict
    latency_cdf: pd.DataFrame = field(default_factory=lambda: _empty_cdf())
    #: What ``trace=`` wrote (``path``, ``events``, ``window_ms``, ``truncated_at_ms``,
    #: ``requests_not_drawn``), else ``None``.
    trace: dict | None = None

    def _repr_html_(self) -> str:
        """The summary's headline figures as an HTML table (Jupyter shows it for a result)."""
        return summary_html(self.summary, len(self.timeseries))

    @classmethod
    def from_native(cls, raw: Mapping[str, Any]) -> "RunResult":
        """Builds a result from the dict that ``microsched._native.run`` returns."""
        import pandas as pd

        summary = _summary_of(raw)
        scen = raw.get("scenario") or {}
        scen = json.loads(scen) if isinstance(scen, str) else dict(scen)
        ts = pd.DataFrame(dict(raw.get("timeseries") or {}))
        req = raw.get("requests")
        req_df = pd.DataFrame(dict(req)) if req is not None else None
        cdf = raw.get("latency_cdf") or {}
        cdf_df = pd.DataFrame(
            {"latency_us": list(cdf.get("latency_us", [])), "fraction": list(cdf.get("fraction", []))},
            dtype="float64",
        )
        trace = raw.get("trace")
        return cls(summary=summary, timeseries=ts, requests=req_df, scenario=scen, latency_cdf=cdf_df,
                   trace=dict(trace) if trace is not None else None)

    def save(self, out_dir: str | os.PathLike) -> Path:
        """Writes the result to ``out_dir`` (created if needed) and returns its path:
        ``summary.json``, ``scenario.json`` (resolved), ``timeseries.parquet``,
        ``latency_cdf.parquet``, ``latency_cdf.png`` and, if per-request records were kept,
        ``requests.parquet``."""
        from .plots import plot_latency_cdf

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / SUMMARY_FILE).write_text(json.dumps(self.summary, indent=2) + "\n", encoding="utf-8")
        (out / SCENARIO_FILE).write_text(json.dumps(self.scenario, indent=2) + "\n", encoding="utf-8")
        self.timeseries.to_parquet(out / TIMESERIES_FILE, index=False)
        self.latency_cdf.to_parquet(out / CDF_DATA_FILE, index=False)
        if self.requests is not None:
            self.requests.to_parquet(out / REQUESTS_FILE, index=False)
        plot_latency_cdf(self, out / CDF_PLOT_FILE)
        return out


# The summary sections that are statistics of completed requests.
COMPLETED_STATS = ("latency_us", "queueing_delay_us", "slowdown")


def window_completed(section: Mapping[str, Any]) -> int | None:
    """Requests of a summary section (the run, or one application) that completed inside the
    measured window: the sum over its request types (``by_type[].completed``, window counts),
    not ``requests.completed``, which counts the whole run, warm-up included. None if the
    section does not say."""
    types = section.get("by_type")
    if isinstance(types, list) and types and all(isinstance(t, dict) and isinstance(t.get("completed"), int) for t in types):
        return sum(int(t["completed"]) for t in types)
    tput, dur = section.get("throughput_rps"), section.get("duration_s")
    if isinstance(tput, (int, float)) and isinstance(dur, (int, float)):
        return round(tput * dur)
    return None


def _summary_of(raw: Mapping[str, Any]) -> dict:
    """The summary of the simulator's raw result, as :class:`RunResult` holds it."""
    summary = raw["summary"]
    return null_if_none_completed(json.loads(summary) if isinstance(summary, str) else dict(summary))


def null_if_none_completed(summary: dict) -> dict:
    """``summary`` (changed in place and returned) with the statistics of completed requests
    (``latency_us``, ``queueing_delay_us``, ``slowdown``: every percentile and the mean) as
    ``None`` where no request completed in the measured window, overall, per request type and
    per application: the engines report an empty histogram's percentiles as 0, which reads as a
    perfect latency. Requests that completed only during the warm-up do not count."""

    def fix(section: Any, completed: Any) -> None:
        if not isinstance(section, dict) or completed != 0:
            return
        for key in COMPLETED_STATS:
            stats = section.get(key)
            if isinstance(stats, dict) and all(v in (0, None) for v in stats.values()):
                section[key] = {k: None for k in stats}

    def fix_with_types(section: Any) -> None:
        if not isinstance(section, dict):
            return
        fix(section, window_completed(section))
        for t in section.get("by_type") or ():
            if isinstance(t, dict):
                fix(t, t.get("completed"))

    fix_with_types(summary)
    for app in summary.get("applications") or ():
        fix_with_types(app)
    return summary


def empty_window_warning(summary: Mapping[str, Any]) -> str | None:
    """Why a run's latency statistics are null: no request completed in its measured window
    (with the counts that say where the requests went), or None if some did."""
    if window_completed(summary) != 0:
        return None
    req = summary.get("requests") or {}
    gen, done, dropped, flying = (int(req.get(k) or 0) for k in ("generated", "completed", "dropped", "in_flight"))
    offered = summary.get("offered_rps") or 0.0
    dur = summary.get("duration_s") or 0.0
    in_window = round(float(offered) * float(dur)) if isinstance(offered, (int, float)) else 0
    if gen == 0:
        why = "no request was generated"
    elif done > 0:
        why = (f"the {done} requests that completed all did so outside the window (in the warm-up, or, in a real "
               f"run, in the drain after it)")
    elif flying > 0 and flying >= dropped:
        why = (f"{flying} of the {gen} requests were still in flight at the end: a service time, "
               f"network delay or queue longer than the run")
    else:
        why = f"{dropped} of the {gen} requests were dropped and none completed"
    return (f"no request completed in the measured window ({in_window} generated in it; over the whole run, {why}); latency, "
            f"queueing delay and slowdown are null, throughput and goodput 0")


def _empty_cdf() -> "pd.DataFrame":
    import pandas as pd

    return pd.DataFrame({"latency_us": [], "fraction": []})


def summary_html(s: Mapping[str, Any], ts_rows: int | None = None) -> str:
    """A run summary's headline figures as an HTML table."""
    import html

    def f(v: Any, fmt: str = ",.2f") -> str:
        try:
            return format(float(v), fmt)
        except (TypeError, ValueError):
            return "-" if v is None else html.escape(str(v))

    lat, q = s.get("latency_us", {}) or {}, s.get("queueing_delay_us", {}) or {}
    cores = s.get("cores", {}) or {}
    rows = [
        ("scenario", html.escape(str(s.get("scenario", ""))) + f" (seed {f(s.get('seed'), 'd')})"),
        ("policies", html.escape(f"allocator {s.get('allocator', '-')}, overload {s.get('overload', '-')}")),
        ("offered / throughput / goodput (req/s)",
         f"{f(s.get('offered_rps'), ',.0f')} / {f(s.get('throughput_rps'), ',.0f')} / {f(s.get('goodput_rps'), ',.0f')}"),
        ("drop rate", f(s.get("drop_rate"), ".4%")),
        ("latency µs: mean, p50, p99, p99.9",
         ", ".join(f(lat.get(k)) for k in ("mean", "p50", "p99", "p999"))),
        ("queueing delay µs: mean, p99", ", ".join(f(q.get(k)) for k in ("mean", "p99"))),
        ("cores allocated / busy (mean)", f"{f(cores.get('allocated_mean'))} / {f(cores.get('busy_mean'))}"),
    ]
    if (s.get("sim") or {}).get("interrupted_at_ms") is not None:
        rows.append(("interrupted at (ms)", f(s["sim"]["interrupted_at_ms"], ",.3f")))
    if ts_rows is not None:
        rows.append(("time-series rows", str(ts_rows)))
    body = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<table><caption>microsched run</caption>{body}</table>"


def _check_seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if is_numpy(seed) and getattr(seed, "ndim", 1) == 0:
        seed = seed.item()  # np.int64(3) is 3; np.float64(3.5), np.bool_ stay refused
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed: {seed!r} is not allowed: use an integer in 0..2^64-1")
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed: {seed} is not allowed: use an integer in 0..2^64-1")
    return seed


def _check_overrides(overrides: Iterable[str]) -> list[str]:
    if isinstance(overrides, str):
        overrides = [overrides]
    out = []
    for o in overrides:
        if not isinstance(o, str):
            raise ValueError(f"--set: {o!r} is not a string of the form dotted.key=value")
        out.append(o)
    return out


def _source(scenario: ScenarioLike) -> tuple[str, str, str]:
    """(text, format, base_dir) for the native loader."""
    if isinstance(scenario, Scenario):
        return scenario.to_json(), "json", str(scenario.base_dir)
    if isinstance(scenario, Mapping):
        return Scenario.from_dict(scenario).to_json(), "json", "."
    if isinstance(scenario, (str, os.PathLike)):
        p = Path(scenario)
        if not p.exists():
            raise FileNotFoundError(f"scenario file not found: {p}")
        if p.is_dir():
            raise IsADirectoryError(f"scenario path is a directory, not a file: {p}")
        text = read_text(p, "scenario")  # regular files only, at most 16 MiB
        if "base" in text:
            try:
                tree = _parse(text, _format_of(p))
            except ValueError:
                tree = None  # the simulator's own parser reports syntax errors
            refuse_sweep_spec(tree, p)
        return text, _format_of(p), str(p.parent)
    raise TypeError(f"scenario must be a path, a dict or a Scenario, not {type(scenario).__name__}")


def run(scenario: ScenarioLike, seed: int | None = None, overrides: Iterable[str] = (), *,
        force: bool = False, progress: Callable[[float, float], Any] | None = None,
        keep_partial: bool = False, trace: str | os.PathLike | None = None,
        trace_window: tuple[float, float] | None = None,
        trace_max_events: int | None = None) -> RunResult:
    """Simulates a scenario and returns its :class:`RunResult`.

    Args:
        scenario: a path to a ``.toml`` (or ``.json``) scenario file, a scenario dict (the
            TOML structure; relative paths resolve against the current directory), or a
            :class:`Scenario`.
        seed: seed of every random stream; ``None`` keeps the scenario's ``seed``. The same
            scenario and seed give bit-identical results.
        overrides: ``"dotted.key=value"`` strings applied before validation, as ``--set`` on
            the command line (the value is a TOML literal, else a bare string).
        force: run even if the cost estimate (requests, events, memory; see :func:`estimate`)
            is over the machine's limits.
        progress: called as ``progress(simulated_ms, total_ms)`` at most every 0.1 s of
            wall-clock time while the simulation runs (the GIL is released in between).
        keep_partial: on Ctrl-C (KeyboardInterrupt), stop the run and return what it measured
            so far (``summary["sim"]["interrupted_at_ms"]`` says when it stopped) instead of
            raising.
        trace: write the run's timeline to this file (trace-event JSON, opens in Perfetto; see
            docs/timelines.md). The results are the same as untraced.
        trace_window: ``(start_ms, end_ms)`` of simulated time since the run's start (warm-up
            included) to record; default: the first 20 ms of the measured window.
        trace_max_events: the trace's size cap (default 500 000 events); a cut is reported on
            ``RunResult.trace["truncated_at_ms"]`` and in the file's metadata.

    Raises:
        ValueError: the scenario is invalid; the message starts with the field at fault
            (``"server.max_cores: 0 is not allowed: use 1..=1024"``).
        FileNotFoundError: the scenario file does not exist.
        microsched._native.PolicyFailed: a policy written in Python raised or made a decision
            out of bounds (a ``RuntimeError``; the message names the policy, the call, the
            simulated time and the value, followed by the traceback if it raised).
        KeyboardInterrupt: Ctrl-C during the run (unless ``keep_partial``).

    Warns:
        UserWarning: the run will produce nothing useful (an RTT longer than the run, no
            load, ...), or the time series is sampled more coarsely than asked.
    """
    raw = _simulate(scenario, seed, overrides, force, progress, keep_partial, trace, trace_window, trace_max_events)
    for w in raw.get("warnings") or ():
        warnings.warn(w, UserWarning, stacklevel=2)
    res = RunResult.from_native(raw)
    empty = empty_window_warning(res.summary)
    if empty:
        warnings.warn(empty, UserWarning, stacklevel=2)
    return res


def run_summary(scenario: ScenarioLike, seed: int | None = None, overrides: Iterable[str] = (), *,
                force: bool = False, trace: str | os.PathLike | None = None,
                trace_window: tuple[float, float] | None = None) -> dict:
    """The summary of :func:`run` alone (``run(...).summary``, with the same warnings), without
    building the time series, records and CDF tables: pandas is not imported, so that a sweep's
    worker, which keeps only the summary, does not pay for it. ``trace`` and ``trace_window``
    as :func:`run`'s (the timeline written to that file)."""
    return _warned_summary(_simulate(scenario, seed, overrides, force, None, False, trace, trace_window, None))


def _warned_summary(raw: Mapping[str, Any]) -> dict:
    """The summary of the simulator's raw result, issuing the warnings :func:`run` issues (the
    simulator's, then the empty window's) on behalf of the public function that called this one
    (stacklevel 3: the caller's caller), so that run_summary and run_summary_and_series warn alike."""
    for w in raw.get("warnings") or ():
        warnings.warn(w, UserWarning, stacklevel=3)
    summary = _summary_of(raw)
    empty = empty_window_warning(summary)
    if empty:
        warnings.warn(empty, UserWarning, stacklevel=3)
    return summary


def run_series(scenario: ScenarioLike, columns: Iterable[str], seed: int | None = None,
               overrides: Iterable[str] = ()) -> dict[str, Any]:
    """``columns`` of :func:`run`'s time series (those it has, in the order asked), as the
    simulator returns them; ``pd.DataFrame`` of it is ``run(...).timeseries[columns]``. Without
    pandas, for a worker process whose driver builds the frame. The run's warnings are not
    issued (the point's own run has said them)."""
    raw = _simulate(scenario, seed, overrides, False, None, False, None, None, None)
    ts = raw.get("timeseries") or {}
    return {c: ts[c] for c in columns if c in ts}


def run_summary_and_series(scenario: ScenarioLike, columns: Iterable[str], seed: int | None = None,
                           overrides: Iterable[str] = ()) -> tuple[dict, dict[str, Any]]:
    """:func:`run_summary` and :func:`run_series` of one simulation (with run_summary's
    warnings): for a sweep point whose time series its analysis needs too, run once."""
    raw = _simulate(scenario, seed, overrides, False, None, False, None, None, None)
    summary = _warned_summary(raw)
    ts = raw.get("timeseries") or {}
    return summary, {c: ts[c] for c in columns if c in ts}


def _simulate(scenario: ScenarioLike, seed: int | None, overrides: Iterable[str], force: bool,
              progress: Callable[[float, float], Any] | None, keep_partial: bool,
              trace: str | os.PathLike | None, trace_window: tuple[float, float] | None,
              trace_max_events: int | None) -> Mapping[str, Any]:
    """The simulator's raw result (the dict ``microsched._native.run`` returns)."""
    from .records import resolve_replay

    seed = _check_seed(seed)
    ovr = _check_overrides(overrides)
    text, fmt, base_dir = _source(scenario)
    # A Parquet record to replay (workload.replay) becomes the simulator's CSV for this run.
    ovr, tmp = resolve_replay(text, fmt, base_dir, ovr, None)
    try:
        # What the Rust schema does not check (distinct request type names), before anything runs.
        check_names(json.loads(native().validate(text, fmt, base_dir, ovr, bool(force))))
        if trace is None:
            raw = native().run(text, fmt, base_dir, ovr, seed, bool(force), progress, bool(keep_partial))
        else:
            from .trace import DEFAULT_MAX_EVENTS, check_window

            window = check_window(trace_window) if trace_window is not None else None
            cap = DEFAULT_MAX_EVENTS if trace_max_events is None else int(trace_max_events)
            if cap < 1:
                raise ValueError(f"trace_max_events: {cap} is not allowed: use 1 or more")
            raw = native().run(text, fmt, base_dir, ovr, seed, bool(force), progress, bool(keep_partial),
                               os.fspath(trace), window, cap)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return raw


def validate(scenario: ScenarioLike, overrides: Iterable[str] = (), *, force: bool = False) -> dict:
    """Validates a scenario (path, dict or Scenario) and returns it resolved, defaults filled
    in. Raises ``ValueError`` naming the field at fault, also when the run's cost estimate is
    over the machine's limits (unless ``force``)."""
    from .records import resolve_replay

    text, fmt, base_dir = _source(scenario)
    ovr, tmp = resolve_replay(text, fmt, base_dir, _check_overrides(overrides), None)
    try:
        return check_names(json.loads(native().validate(text, fmt, base_dir, ovr, bool(force))))
    finally:
        if tmp is not None:
            tmp.cleanup()


def estimate(scenario: ScenarioLike, overrides: Iterable[str] = ()) -> dict:
    """What running a scenario costs, estimated before it starts: ``sessions``, ``requests``
    (whole run), ``measured_requests``, ``events``, ``samples`` (time-series rows) and
    ``sample_interval_ns``, ``memory_bytes``, ``wall_s`` (at a typical engine speed) and
    ``warnings`` (runs that will produce nothing useful)."""
    text, fmt, base_dir = _source(scenario)
    return json.loads(native().estimate(text, fmt, base_dir, _check_overrides(overrides)))


def schema() -> dict:
    """The JSON Schema of a scenario (generated from the Rust types)."""
    return json.loads(native().schema())
