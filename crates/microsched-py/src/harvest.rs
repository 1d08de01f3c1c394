//! Binding of the harvesting agent (`microsched harvest`). The agent runs on its own thread;
//! this one waits, checking for Python signals every 50 ms: Ctrl-C (and SIGTERM, which the CLI
//! turns into KeyboardInterrupt) stop it, and it restores every affinity before returning.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use microsched_harvest::{Agent, Opts};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Runs the agent with `opts_json` (see `microsched_harvest::opts`), logging JSON lines to
/// `log_path` (stderr if None). Calls `ready(listen_addr or None)` once started. Returns the
/// final report as JSON text (also the log's last line).
#[pyfunction]
#[pyo3(signature = (opts_json, log_path=None, ready=None))]
pub fn harvest(py: Python<'_>, opts_json: &str, log_path: Option<&str>, ready: Option<PyObject>) -> PyResult<String> {
    let opts = Opts::from_json(opts_json).map_err(PyValueError::new_err)?;
    let log: Box<dyn std::io::Write + Send> = match log_path {
        Some(p) => Box::new(std::fs::File::create(p).map_err(|e| PyValueError::new_err(format!("--log: {p}: {e}")))?),
        None => Box::new(std::io::stderr()),
    };
    let agent = py.allow_threads(|| Agent::new(opts, log)).map_err(PyValueError::new_err)?;
    let addr = agent.listen_addr().map(|a| a.to_string());
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("harvest-agent".into())
        .spawn(move || {
            let rep = agent.run(&|| flag.load(Ordering::Relaxed).then(|| "signal".to_string()));
            let _ = tx.send(rep);
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let rx = std::sync::Mutex::new(rx);
    let mut pending_ready = ready;
    loop {
        if let Some(cb) = pending_ready.take() {
            if cb.call1(py, (addr.clone(),)).is_err() {
                stop.store(true, Ordering::Relaxed);
            }
        }
        match py.allow_threads(|| rx.lock().expect("receiver").recv_timeout(Duration::from_millis(50))) {
            Ok(rep) => {
                let _ = handle.join();
                return Ok(serde_json::to_string(&rep).expect("report serialises"));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if py.check_signals().is_err() {
                    // Stop and restore; the report says it was a signal.
                    stop.store(true, Ordering::Relaxed);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = handle.join();
                return Err(PyValueError::new_err("internal error: the harvesting agent thread died"));
            }
        }
    }
}
