"""Type stub of ``microsched._native``, the Rust extension behind the Python front (crate
``microsched-py``). Results cross as plain Python objects: JSON text for summaries, scenarios
and reports, lists for columns. Every error about the input is a ``ValueError`` whose message
starts with the dotted field at fault (``"server.max_cores: 0 is not allowed: use 1..=1024"``).

Use the typed front (:func:`microsched.run`, :func:`microsched.validate`, ...) rather than these
functions: it parses the JSON and builds DataFrames.
"""

from typing import Callable, Literal, Sequence, TypedDict

__all__ = ["PolicyFailed", "run", "validate", "estimate", "schema", "merge_histograms", "serve", "loadgen",
           "merge_real", "harvest"]


class PolicyFailed(RuntimeError):
    """A policy written in Python raised an exception or made a decision out of bounds during a
    run; the message names the policy, the call, the value and the simulated time."""

Format = Literal["toml", "json"]

class LatencyCdf(TypedDict):
    latency_us: list[float]
    fraction: list[float]

class RunOutput(TypedDict):
    """What :func:`run` returns."""

    #: The summary metrics as JSON text (the keys of ``microsched run --json``).
    summary: str
    #: One list per time-series column (``t_ms``, ``cores_allocated``, ``cores_busy``, ...).
    timeseries: dict[str, list[float]]
    latency_cdf: LatencyCdf
    #: One list per per-request column with ``metrics.record_requests``, else None.
    requests: dict[str, list[int]] | None
    #: The resolved scenario (every default filled in) as JSON text.
    scenario: str
    #: Runs that will produce nothing useful, a coarser time series than asked, ...
    warnings: list[str]

class MergedHistograms(TypedDict):
    """What :func:`merge_histograms` returns."""

    #: How many values the union holds.
    count: int
    #: The value at each quantile asked, in the histograms' unit (0 if empty).
    values: list[float]
    #: The union as HdrHistogram's compressed V2 text.
    histogram: str

class RealOutput(TypedDict):
    """What :func:`merge_real` returns."""

    #: JSON text: the keys of ``microsched run`` plus ``runtime``.
    summary: str
    timeseries: dict[str, list[float]]
    latency_cdf: LatencyCdf

def run(
    text: str,
    fmt: Format = "toml",
    base_dir: str = ".",
    overrides: Sequence[str] = ...,
    seed: int | None = None,
    force: bool = False,
    progress: Callable[[float, float], object] | None = None,
    keep_partial: bool = False,
    trace_path: str | None = None,
    trace_window: tuple[float, float] | None = None,
    trace_max_events: int = ...,
) -> RunOutput:
    """Runs one simulation of the scenario ``text`` (``--set``-style ``overrides`` applied,
    relative paths resolved against ``base_dir``). The GIL is released during the run; Ctrl-C
    raises ``KeyboardInterrupt`` or, with ``keep_partial``, ends the run and returns what was
    measured; ``progress(simulated_ms, total_ms)`` is called at most every 0.1 s."""

def validate(
    text: str,
    fmt: Format = "toml",
    base_dir: str = ".",
    overrides: Sequence[str] = ...,
    force: bool = False,
) -> str:
    """The scenario resolved (defaults filled in) as JSON text. Unless ``force``, a scenario whose
    cost estimate is over the machine's limits is an error too."""

def estimate(text: str, fmt: Format = "toml", base_dir: str = ".", overrides: Sequence[str] = ...) -> str:
    """What running the scenario costs (requests, events, memory, wall time, warnings), as JSON
    text."""

def schema() -> str:
    """The JSON Schema of a scenario, as JSON text."""

def merge_histograms(texts: Sequence[str], quantiles: Sequence[float] = ...) -> MergedHistograms:
    """Merges exported HDR histograms (``summary["histograms"]``) and reads the ``quantiles``
    (default 0.5, 0.99, 0.999) of their union. A text that is not a histogram is a ValueError."""

def serve(
    text: str,
    fmt: Format = "toml",
    base_dir: str = ".",
    overrides: Sequence[str] = ...,
    addr: str | None = None,
    duration_s: float | None = None,
    allow_remote: bool = False,
    once: bool = False,
    ready: Callable[[str], object] | None = None,
    stats: Callable[[str], object] | None = None,
    stats_every_s: float = 1.0,
    max_service_us: float | None = None,
    max_client_sessions: int | None = None,
    connect_rate: float | None = None,
    info: Callable[[str], object] | None = None,
    trace_path: str | None = None,
    trace_window: tuple[float, float] | None = None,
    trace_max_events: int = ...,
) -> str:
    """Runs the real server of the scenario until ``duration_s`` (or, with ``once``, until every
    client that connected has left; Ctrl-C stops it gracefully). Calls ``ready(addr)`` once it
    listens and ``stats(json_line)`` every ``stats_every_s`` with the live counters. Returns the
    server report as JSON text."""

def loadgen(
    text: str,
    fmt: Format = "toml",
    base_dir: str = ".",
    overrides: Sequence[str] = ...,
    addr: str | None = None,
    seed: int | None = None,
    allow_remote: bool = False,
    more_addrs: Sequence[str] = ...,
) -> str:
    """Runs the scenario's open-loop load against the server at ``addr``; returns the load
    generator's result as JSON text (summary, client counters, time series, latency CDF,
    measured window). ``more_addrs``: the other replicas (``server.replicas``), in order."""

def merge_real(loadgen_json: str, report_json: str) -> RealOutput:
    """Merges a load generator result and a server report (both JSON text) into what
    ``microsched real`` returns."""

def harvest(opts_json: str, log_path: str | None = None, ready: Callable[[str | None], object] | None = None) -> str:
    """Runs the harvesting agent with ``opts_json``, logging JSON lines to ``log_path`` (stderr if
    None); calls ``ready(listen_addr or None)`` once started. Returns the final report as JSON
    text (also the log's last line)."""
