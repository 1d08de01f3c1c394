//! Bindings of the real runtime (`microsched serve`, `loadgen`, `real`). Each blocking call
//! releases the GIL and checks for Ctrl-C every 50 ms; on an interrupt it stops what it started
//! and raises `KeyboardInterrupt`. Configuration errors raise `ValueError` with one clear line.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use microsched_runtime::loadgen::{run as run_loadgen, LoadgenOpts, LoadgenResult};
use microsched_runtime::{config, merge, ServeOpts, Server, ServerReport};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn err(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn default_addr(addr: Option<&str>, port: u16) -> String {
    addr.map(str::to_string).unwrap_or_else(|| format!("127.0.0.1:{port}"))
}

/// Runs a server until `duration_s` (or, with `once`, until every client that connected has
/// disconnected, or Ctrl-C, which stops it gracefully). Calls `info(json)` once it listens with
/// the limits it runs with (authentication, service-time cap, session sharing: the report's
/// `limits`), then `ready(addr)`. Returns the report as JSON. With `stats`, calls
/// `stats(json_line)` every `stats_every_s` with the live counters. `max_service_us`,
/// `max_client_sessions`, `connect_rate`: `None` for the defaults (see `ServeOpts`).
#[pyfunction]
#[pyo3(signature = (text, fmt="toml", base_dir=".", overrides=Vec::new(), addr=None, duration_s=None, allow_remote=false, once=false, ready=None, stats=None, stats_every_s=1.0, max_service_us=None, max_client_sessions=None, connect_rate=None, info=None, trace_path=None, trace_window=None, trace_max_events=microsched_core::trace::DEFAULT_MAX_EVENTS))]
#[allow(clippy::too_many_arguments)]
pub fn serve(
    py: Python<'_>,
    text: &str,
    fmt: &str,
    base_dir: &str,
    overrides: Vec<String>,
    addr: Option<&str>,
    duration_s: Option<f64>,
    allow_remote: bool,
    once: bool,
    ready: Option<PyObject>,
    stats: Option<PyObject>,
    stats_every_s: f64,
    max_service_us: Option<f64>,
    max_client_sessions: Option<u32>,
    connect_rate: Option<f64>,
    info: Option<PyObject>,
    trace_path: Option<std::path::PathBuf>,
    trace_window: Option<(f64, f64)>,
    trace_max_events: usize,
) -> PyResult<String> {
    let loaded = crate::load(text, fmt, base_dir, overrides)?;
    let addr = config::parse_addr(&default_addr(addr, loaded.scenario.runtime.port), "--addr").map_err(err)?;
    let duration = match duration_s {
        Some(d) if !(d.is_finite() && d > 0.0) => {
            return Err(err(format!("--duration: {d} is not allowed: use a number of seconds > 0")))
        }
        Some(d) => Some(Duration::from_secs_f64(d)),
        None => None,
    };
    let max_service_ns = match max_service_us {
        Some(us) if !(us.is_finite() && us >= 1.0 && us <= (config::MAX_SERVICE_NS / 1000) as f64) => {
            return Err(err(format!(
                "--max-service-us: {us} is not allowed: use 1..={} (µs)",
                config::MAX_SERVICE_NS / 1000
            )))
        }
        Some(us) => Some((us * 1e3).round() as u64),
        None => None,
    };
    let opts = ServeOpts { addr, allow_remote, duration, once, max_service_ns, max_client_sessions, connect_rate };
    let window = trace_path.as_ref().map(|_| trace_window_ns(duration, trace_window, trace_max_events)).transpose()?;
    let server = py.allow_threads(|| Server::start(&loaded, opts)).map_err(err)?;
    let sink = window.map(|w| server.trace(w, trace_max_events));
    let result = serve_until_stopped(py, server, &loaded, info, ready, stats, stats_every_s);
    if let (Some(sink), Some(path)) = (sink, &trace_path) {
        let mut meta = serde_json::Map::new();
        meta.insert("source".into(), "runtime".into());
        meta.insert("scenario".into(), loaded.scenario.name.clone().into());
        meta.insert("max_cores".into(), loaded.scenario.server.max_cores.into());
        meta.insert("clock".into(), "ns of run time since the server started".into());
        meta.insert("tracing_cost".into(), "each worker's state change takes a lock while traced: expect a few hundred ns more per request".into());
        let trace = sink.finish(u64::MAX);
        let stats = crate::write_trace(&trace, path, meta)?;
        let (a, b) = trace.window();
        eprintln!("trace: {} events of {}..{} ms written to {} (open it in https://ui.perfetto.dev)", stats.events, a as f64 / 1e6, b as f64 / 1e6, path.display());
        if let Some(t) = stats.truncated_at {
            eprintln!("trace: the size cap (--trace-max-events) cut the trace at {:.3} ms; narrow --trace-window or raise the cap to see the rest", t as f64 / 1e6);
        }
    }
    result
}

/// The window of `serve --trace` in ns of run time: the given one, or the whole run (`duration`,
/// else a day) up to the size cap: the server cannot know when a load generator will start
/// (`real` starts one only once the server listens, a second or more later on a busy machine).
fn trace_window_ns(duration: Option<Duration>, window: Option<(f64, f64)>, max_events: usize) -> PyResult<(u64, u64)> {
    if max_events == 0 {
        return Err(err("--trace-max-events: 0 is not allowed: use 1 or more"));
    }
    let whole = duration.map_or(86_400_000.0, |d| d.as_secs_f64() * 1e3);
    let (a, b) = window.unwrap_or((0.0, whole));
    if !(a.is_finite() && b.is_finite() && 0.0 <= a && a < b) {
        return Err(err(format!("--trace-window: {a}:{b} is not START_MS:END_MS with 0 <= START_MS < END_MS")));
    }
    Ok(((a * 1e6).round() as u64, (b * 1e6).round() as u64))
}

/// Reports the server's limits and address, then serves until its end, Ctrl-C or a failing
/// callback; returns its report as JSON.
fn serve_until_stopped(
    py: Python<'_>,
    server: Server,
    loaded: &microsched_sim::Loaded,
    info: Option<PyObject>,
    ready: Option<PyObject>,
    stats: Option<PyObject>,
    stats_every_s: f64,
) -> PyResult<String> {
    let mut last_stats = std::time::Instant::now();
    if let Some(cb) = info {
        let f = server.fairness();
        let limits = serde_json::json!({
            "authentication": server.authenticated(),
            "max_service_us": server.max_service_ns() as f64 / 1e3,
            "sessions": loaded.scenario.clients.sessions,
            "max_client_sessions": f.max_per_client,
            "connect_rate_per_s": f.connect_rate,
            "connect_burst": f.connect_burst,
            "evict_idle_ms": f.evict_idle_ns as f64 / 1e6,
        });
        if let Err(e) = cb.call1(py, (limits.to_string(),)) {
            let rep = py.allow_threads(move || server.stop_because("interrupted"));
            if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                return Ok(serde_json::to_string(&rep).expect("report serialises"));
            }
            return Err(e);
        }
    }
    if let Some(cb) = ready {
        if let Err(e) = cb.call1(py, (server.addr().to_string(),)) {
            // Ctrl-C may land while the callback runs: the same graceful stop as below.
            let interrupted = e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py);
            let rep = py.allow_threads(move || server.stop_because("interrupted"));
            if interrupted {
                return Ok(serde_json::to_string(&rep).expect("report serialises"));
            }
            return Err(e);
        }
    }
    loop {
        if server.finished().is_some() {
            let rep = py.allow_threads(move || server.wait(|| false));
            return Ok(serde_json::to_string(&rep).expect("report serialises"));
        }
        py.allow_threads(|| std::thread::sleep(Duration::from_millis(50)));
        if let Some(cb) = &stats {
            if last_stats.elapsed().as_secs_f64() >= stats_every_s {
                last_stats = std::time::Instant::now();
                if let Err(e) = cb.call1(py, (server.live().to_string(),)) {
                    let rep = py.allow_threads(move || server.stop_because("interrupted"));
                    if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                        return Ok(serde_json::to_string(&rep).expect("report serialises"));
                    }
                    return Err(e);
                }
            }
        }
        if py.check_signals().is_err() {
            // Ctrl-C (SIGINT) is how a server is stopped by hand: stop and report.
            let rep = py.allow_threads(move || server.stop_because("interrupted"));
            return Ok(serde_json::to_string(&rep).expect("report serialises"));
        }
    }
}

/// Runs the scenario's load against `addr`; returns the load generator's result as JSON text
/// (summary, client counters, time series, latency CDF, measured window). `more_addrs`: the
/// other replicas (`server.replicas`), in order.
#[pyfunction]
#[pyo3(signature = (text, fmt="toml", base_dir=".", overrides=Vec::new(), addr=None, seed=None, allow_remote=false, more_addrs=Vec::new()))]
#[allow(clippy::too_many_arguments)]
pub fn loadgen(
    py: Python<'_>,
    text: &str,
    fmt: &str,
    base_dir: &str,
    overrides: Vec<String>,
    addr: Option<&str>,
    seed: Option<u64>,
    allow_remote: bool,
    more_addrs: Vec<String>,
) -> PyResult<String> {
    let loaded = crate::load(text, fmt, base_dir, overrides)?;
    let addr = config::parse_addr(&default_addr(addr, loaded.scenario.runtime.port), "--addr").map_err(err)?;
    let more_addrs = more_addrs.iter().map(|a| config::parse_addr(a, "--addr")).collect::<Result<Vec<_>, _>>().map_err(err)?;
    let opts = LoadgenOpts { addr, more_addrs, allow_remote, seed };
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let rx = std::sync::Mutex::new(rx);
    let flag = stop.clone();
    let handle = std::thread::spawn(move || {
        let r = run_loadgen(&loaded, &opts, &|| flag.load(Ordering::Relaxed));
        let _ = tx.send(r);
    });
    let result = loop {
        match py.allow_threads(|| rx.lock().expect("receiver").recv_timeout(Duration::from_millis(50))) {
            Ok(r) => break r,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    stop.store(true, Ordering::Relaxed);
                    py.allow_threads(|| {
                        let _ = handle.join();
                    });
                    return Err(e);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(err("internal error: the load generator thread died")),
        }
    };
    let _ = handle.join();
    let r = result.map_err(err)?;
    Ok(serde_json::to_string(&r).expect("result serialises"))
}

/// Merges a load generator result and a server report (both JSON text) into what `microsched
/// real` returns: a dict with summary (JSON text; the keys of `microsched run` plus `runtime`),
/// timeseries (column -> list) and latency_cdf. `report_json`: one server's report, or a list of
/// the replicas' reports in `--addr` order (the time series' server columns are the first's).
#[pyfunction]
pub fn merge_real<'py>(py: Python<'py>, loadgen_json: &str, report_json: &str) -> PyResult<Bound<'py, PyDict>> {
    let lg: LoadgenResult = serde_json::from_str(loadgen_json).map_err(|e| err(format!("load generator result: {e}")))?;
    let reps: Vec<ServerReport> = if report_json.trim_start().starts_with('[') {
        serde_json::from_str(report_json).map_err(|e| err(format!("server reports: {e}")))?
    } else {
        vec![serde_json::from_str(report_json).map_err(|e| err(format!("server report: {e}")))?]
    };
    let Some(rep) = reps.first() else {
        return Err(err("server reports: an empty list: give one report per replica"));
    };
    let out = PyDict::new(py);
    out.set_item("summary", merge::merge_replicas(&lg, &reps).to_string())?;
    let ts = PyDict::new(py);
    for (name, col) in merge::merged_series(&lg, rep) {
        ts.set_item(name, col)?;
    }
    out.set_item("timeseries", ts)?;
    let cdf = PyDict::new(py);
    cdf.set_item("latency_us", &lg.latency_cdf.0)?;
    cdf.set_item("fraction", &lg.latency_cdf.1)?;
    out.set_item("latency_cdf", cdf)?;
    Ok(out)
}
