//! `microsched._native`: the Rust simulator behind the Python front. Results cross as plain
//! Python objects (JSON text for the summary, lists for columns); errors as `ValueError` whose
//! message starts with the dotted field at fault.

mod harvest;
mod policies;
mod runtime;

use std::path::Path;

use microsched_core::scenario::{json_schema, Format, Loaded, Scenario};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn load(text: &str, fmt: &str, base_dir: &str, overrides: Vec<String>) -> PyResult<Loaded> {
    let format = match fmt {
        "toml" => Format::Toml,
        "json" => Format::Json,
        other => return Err(PyValueError::new_err(format!("fmt: `{other}` is not allowed: use toml or json"))),
    };
    Scenario::load(text, format, Path::new(base_dir), &overrides).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Validates a scenario and returns it, defaults filled in, as JSON text. Unless `force`, a
/// scenario whose cost estimate is over the machine's limits is an error too.
#[pyfunction]
#[pyo3(signature = (text, fmt="toml", base_dir=".", overrides=Vec::new(), force=false))]
fn validate(text: &str, fmt: &str, base_dir: &str, overrides: Vec<String>, force: bool) -> PyResult<String> {
    let loaded = load(text, fmt, base_dir, overrides)?;
    loaded.check_resources(force).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(serde_json::to_string(&loaded.scenario).expect("scenario serialises"))
}

/// What running a scenario costs (requests, events, memory, wall time, warnings), as JSON text.
#[pyfunction]
#[pyo3(signature = (text, fmt="toml", base_dir=".", overrides=Vec::new()))]
fn estimate(text: &str, fmt: &str, base_dir: &str, overrides: Vec<String>) -> PyResult<String> {
    let loaded = load(text, fmt, base_dir, overrides)?;
    let e = loaded.estimate().map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(serde_json::to_string(&e).expect("estimate serialises"))
}

/// Runs one simulation. Returns a dict: summary (JSON text), timeseries (column -> list),
/// latency_cdf (latency_us, fraction), requests (column -> list, or None), scenario (JSON text),
/// warnings (list of str).
///
/// The GIL is released during the run; every few milliseconds the engine takes it back
/// briefly to let Python handle signals (Ctrl-C raises KeyboardInterrupt, or, with
/// `keep_partial`, ends the run and returns what was measured so far) and, at most every 0.1 s,
/// to call `progress(simulated_ms, total_ms)`.
#[pyfunction]
#[pyo3(signature = (text, fmt="toml", base_dir=".", overrides=Vec::new(), seed=None, force=false, progress=None, keep_partial=false, trace_path=None, trace_window=None, trace_max_events=microsched_sim::DEFAULT_MAX_EVENTS))]
#[allow(clippy::too_many_arguments)]
fn run<'py>(
    py: Python<'py>,
    text: &str,
    fmt: &str,
    base_dir: &str,
    overrides: Vec<String>,
    seed: Option<u64>,
    force: bool,
    progress: Option<PyObject>,
    keep_partial: bool,
    trace_path: Option<std::path::PathBuf>,
    trace_window: Option<(f64, f64)>,
    trace_max_events: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let loaded = load(text, fmt, base_dir, overrides)?;
    let estimate = loaded.check_resources(force).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let trace_req = trace_path.as_ref().map(|_| microsched_sim::TraceRequest { window_ms: trace_window, max_events: trace_max_events });
    if let Some(t) = &trace_req {
        microsched_sim::trace_window(&loaded, t).map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    let mut failure: Option<PyErr> = None;
    let mut last_report = std::time::Instant::now();
    // A failure left by an earlier run (one that ended before its next check) is not this one's.
    let _ = microsched_core::plugin::take_failure();
    // The simulation holds no Python object: let other Python threads run meanwhile.
    let result = py
        .allow_threads(|| {
            let mut check = |now: u64, end: u64| {
                // A Python policy failed: stop here; its error is raised below.
                if microsched_core::plugin::failed() {
                    return false;
                }
                Python::with_gil(|py| {
                    if let Err(e) = py.check_signals() {
                        failure = Some(e);
                        return false;
                    }
                    if let Some(cb) = &progress {
                        if last_report.elapsed().as_secs_f64() >= 0.1 {
                            last_report = std::time::Instant::now();
                            if let Err(e) = cb.call1(py, (now as f64 / 1e6, end as f64 / 1e6)) {
                                failure = Some(e);
                                return false;
                            }
                        }
                    }
                    true
                })
            };
            microsched_sim::run_traced(&loaded, seed, force, &mut check, trace_req.as_ref())
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    if let Some(message) = microsched_core::plugin::take_failure() {
        return Err(PolicyFailed::new_err(message));
    }
    let (result, trace) = result;
    if let Some(e) = failure {
        if !(keep_partial && e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py)) {
            return Err(e);
        }
    }
    let out = PyDict::new(py);
    out.set_item("warnings", &estimate.warnings)?;
    out.set_item("summary", serde_json::to_string(&result.summary).expect("summary serialises"))?;
    let ts = PyDict::new(py);
    for (name, col) in result.timeseries.columns() {
        ts.set_item(name, col)?;
    }
    out.set_item("timeseries", ts)?;
    let cdf = PyDict::new(py);
    cdf.set_item("latency_us", &result.latency_cdf.0)?;
    cdf.set_item("fraction", &result.latency_cdf.1)?;
    out.set_item("latency_cdf", cdf)?;
    match &result.requests {
        Some(log) => {
            let reqs = PyDict::new(py);
            for (name, col) in log.columns() {
                reqs.set_item(name, col)?;
            }
            out.set_item("requests", reqs)?;
        }
        None => out.set_item("requests", py.None())?,
    }
    out.set_item("scenario", serde_json::to_string(&loaded.scenario).expect("scenario serialises"))?;
    match (trace, trace_path) {
        (Some(trace), Some(path)) => {
            let mut meta = serde_json::Map::new();
            meta.insert("source".into(), "simulator".into());
            meta.insert("scenario".into(), result.summary.scenario.clone().into());
            meta.insert("seed".into(), result.summary.seed.into());
            meta.insert("allocator".into(), result.summary.allocator.clone().into());
            meta.insert("overload".into(), result.summary.overload.clone().into());
            meta.insert("max_cores".into(), result.summary.cores.max.into());
            meta.insert("measured_from_ms".into(), loaded.scenario.warmup_ms.into());
            let stats = write_trace(&trace, &path, meta)?;
            out.set_item("trace", trace_stats(py, &path, &stats, trace.window())?)?;
        }
        _ => out.set_item("trace", py.None())?,
    }
    Ok(out)
}

/// Writes a trace file (trace-event JSON); an unwritable path is an `OSError` naming it.
fn write_trace(trace: &microsched_sim::Trace, path: &std::path::Path, meta: serde_json::Map<String, serde_json::Value>) -> PyResult<microsched_core::trace::TraceStats> {
    let fail = |e: std::io::Error| pyo3::exceptions::PyOSError::new_err(format!("--trace: cannot write {}: {e}", path.display()));
    let file = std::fs::File::create(path).map_err(fail)?;
    let mut w = std::io::BufWriter::new(file);
    let stats = trace.write_json(&mut w, meta).map_err(fail)?;
    std::io::Write::flush(&mut w).map_err(fail)?;
    Ok(stats)
}

/// What the caller reports of a written trace: path, events, window, and a cut if any.
fn trace_stats<'py>(py: Python<'py>, path: &std::path::Path, stats: &microsched_core::trace::TraceStats, window: (u64, u64)) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("path", path.display().to_string())?;
    d.set_item("events", stats.events)?;
    d.set_item("window_ms", (window.0 as f64 / 1e6, window.1 as f64 / 1e6))?;
    d.set_item("truncated_at_ms", stats.truncated_at.map(|t| t as f64 / 1e6))?;
    d.set_item("requests_not_drawn", stats.requests_not_drawn)?;
    Ok(d)
}

/// Merges HDR histograms exported by runs (`summary["histograms"]`: HdrHistogram's compressed V2
/// text) and reads quantiles of the union. Returns a dict: `count` (values recorded), `values`
/// (the value at each of `quantiles`, in the histograms' unit; 0 if empty) and `histogram` (the
/// merged histogram as text). A text that is not a histogram is a `ValueError`.
#[pyfunction]
#[pyo3(signature = (texts, quantiles=vec![0.5, 0.99, 0.999]))]
fn merge_histograms<'py>(py: Python<'py>, texts: Vec<String>, quantiles: Vec<f64>) -> PyResult<Bound<'py, PyDict>> {
    if let Some(q) = quantiles.iter().find(|q| !(0.0..=1.0).contains(*q)) {
        return Err(PyValueError::new_err(format!("quantiles: {q} is not allowed: use 0..=1")));
    }
    let merged = microsched_core::histograms::merge(texts.iter().map(String::as_str)).map_err(PyValueError::new_err)?;
    let out = PyDict::new(py);
    out.set_item("count", merged.len())?;
    out.set_item("values", microsched_core::histograms::quantiles(&merged, &quantiles))?;
    out.set_item("histogram", microsched_core::histograms::encode(&merged))?;
    Ok(out)
}

/// The JSON Schema of a scenario.
#[pyfunction]
fn schema() -> String {
    json_schema()
}

pyo3::create_exception!(microsched._native, PolicyFailed, pyo3::exceptions::PyRuntimeError, "A policy written in Python raised an exception or made a decision out of bounds during a run (the message names the policy, the call, the value and the simulated time).");

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    policies::install();
    m.add("PolicyFailed", m.py().get_type::<PolicyFailed>())?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(estimate, m)?)?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    m.add_function(wrap_pyfunction!(merge_histograms, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::serve, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::loadgen, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::merge_real, m)?)?;
    m.add_function(wrap_pyfunction!(harvest::harvest, m)?)?;
    Ok(())
}
