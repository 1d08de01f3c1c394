//! `microsched._native`: the Rust simulator behind the Python front. Results cross as plain
//! Python objects (JSON text for the summary, lists for columns); errors as `ValueError` whose
//! message starts with the dotted field at fault.

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

/// Validates a scenario and returns it, defaults filled in, as JSON text.
#[pyfunction]
#[pyo3(signature = (text, fmt="toml", base_dir=".", overrides=Vec::new()))]
fn validate(text: &str, fmt: &str, base_dir: &str, overrides: Vec<String>) -> PyResult<String> {
    let loaded = load(text, fmt, base_dir, overrides)?;
    Ok(serde_json::to_string(&loaded.scenario).expect("scenario serialises"))
}

/// Runs one simulation. Returns a dict: summary (JSON text), timeseries (column -> list),
/// latency_cdf (latency_us, fraction), requests (column -> list, or None), scenario (JSON text).
#[pyfunction]
#[pyo3(signature = (text, fmt="toml", base_dir=".", overrides=Vec::new(), seed=None))]
fn run<'py>(
    py: Python<'py>,
    text: &str,
    fmt: &str,
    base_dir: &str,
    overrides: Vec<String>,
    seed: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let loaded = load(text, fmt, base_dir, overrides)?;
    // The simulation holds no Python object: let other Python threads run meanwhile.
    let result = py
        .allow_threads(|| microsched_sim::run(&loaded, seed))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let out = PyDict::new(py);
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
    Ok(out)
}

/// The JSON Schema of a scenario.
#[pyfunction]
fn schema() -> String {
    json_schema()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::serve, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::loadgen, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::merge_real, m)?)?;
    Ok(())
}
