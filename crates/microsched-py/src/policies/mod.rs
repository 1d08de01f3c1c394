//! Policies written in Python, behind the engine's policy traits.
//!
//! [`Bridge`] is the [`PythonBridge`] this extension installs when imported: it validates and
//! builds `kind = "python"` policies through `microsched.policy` (which imports the class and
//! fits its `Params`), and wraps the instance in an object of the kind's trait (one file per
//! kind). Every call into Python takes the GIL for its duration: the engine runs with the GIL
//! released, so a policy costs one GIL acquisition per call.
//!
//! Failures never unwind through the engine: an exception, or a decision out of bounds, is
//! recorded ([`microsched_core::plugin::record_failure`]) with the policy, the call, the value
//! and the simulated time, the call returns a neutral decision, and the driver stops at its next
//! check and raises it.

mod alloc;
mod overload;
mod sched;
mod view;

use std::collections::HashMap;
use std::sync::Mutex;

use microsched_core::env::{AllocEnv, OverloadEnv, SchedEnv};
use microsched_core::plugin::{DynQueuePolicy, PolicyKind, PythonBridge, PythonPolicy};
use microsched_core::{alloc::CoreAllocator, overload::CreditController, Nanos, ScenarioError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

pub fn install() {
    microsched_core::plugin::install_python_bridge(Box::new(Bridge));
}

struct Bridge;

fn kind_name(kind: PolicyKind) -> &'static str {
    match kind {
        PolicyKind::Allocator => "allocator",
        PolicyKind::Overload => "overload",
        PolicyKind::Sched => "sched",
    }
}

/// `policy.*.params` as a Python dict (through JSON: validation only, not a hot path).
fn params_dict<'py>(py: Python<'py>, params: &serde_json::Map<String, serde_json::Value>) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(params).expect("params serialise");
    py.import("json")?.call_method1("loads", (text,))
}

/// A Python error while loading or checking a policy, as the scenario error it is: the field
/// `microsched.policy.PolicyError` names, else the table's `class`.
fn scenario_error(py: Python<'_>, e: PyErr, field: &str) -> ScenarioError {
    let value = e.value(py);
    if let (Ok(f), Ok(m)) = (value.getattr("field").and_then(|f| f.extract::<String>()), value.getattr("message").and_then(|m| m.extract::<String>())) {
        return ScenarioError::new(f, m);
    }
    ScenarioError::new(format!("{field}.class"), format!("the policy raised {}", traceback(py, &e)))
}

/// The exception with its traceback, as Python prints it.
pub(crate) fn traceback(py: Python<'_>, e: &PyErr) -> String {
    let formatted = py
        .import("traceback")
        // The frames travel in the error, not always on the value's __traceback__ (Python
        // < 3.12 keeps them apart): hand both over, or the policy's own lines are lost.
        .and_then(|tb| tb.call_method1("format_exception", (e.get_type(py), e.value(py), e.traceback(py))))
        .and_then(|lines| lines.extract::<Vec<String>>());
    match formatted {
        Ok(lines) => lines.concat().trim_end().to_string(),
        Err(_) => e.to_string(),
    }
}

/// The policy's Python instance, built from its table and environment.
fn instantiate(kind: PolicyKind, cfg: &PythonPolicy, env: Bound<'_, PyAny>) -> Result<(Py<PyAny>, &'static str), ScenarioError> {
    let field = kind.field();
    Python::with_gil(|py| {
        let build = || -> PyResult<Bound<'_, PyAny>> {
            let m = py.import("microsched.policy")?;
            let obj = m.call_method1("build", (cfg.class_path.as_str(), kind_name(kind), params_dict(py, &cfg.params)?, field, env))?;
            Ok(obj)
        };
        let obj = build().map_err(|e| scenario_error(py, e, field))?;
        let name = py
            .import("microsched.policy")
            .and_then(|m| m.call_method1("policy_name", (&obj,)))
            .and_then(|n| n.extract::<String>())
            .map_err(|e| scenario_error(py, e, field))?;
        Ok((obj.unbind(), intern(name)))
    })
}

/// Policy names live as long as the process (the traits return `&'static str`); one copy per
/// distinct name.
fn intern(name: String) -> &'static str {
    static NAMES: Mutex<Option<HashMap<String, &'static str>>> = Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let map = names.get_or_insert_with(HashMap::new);
    if let Some(s) = map.get(&name) {
        return s;
    }
    let s: &'static str = Box::leak(name.clone().into_boxed_str());
    map.insert(name, s);
    s
}

/// An environment object as Python sees it: a namespace with the fields and a `stream(name)`
/// method returning the policy's own seeded random stream.
fn env_object<'py>(py: Python<'py>, kw: Bound<'py, PyDict>, seed: u64, prefix: &'static str) -> PyResult<Bound<'py, PyAny>> {
    let ns = py.import("types")?.getattr("SimpleNamespace")?;
    kw.set_item("seed", seed)?;
    let obj = ns.call((), Some(&kw))?;
    obj.setattr("stream", Bound::new(py, view::StreamFactory { seed, prefix })?.getattr("stream")?)?;
    obj.setattr("legacy_stream", Bound::new(py, view::StreamFactory { seed, prefix: "" })?.getattr("stream")?)?;
    Ok(obj)
}

impl PythonBridge for Bridge {
    fn validate(&self, kind: PolicyKind, cfg: &PythonPolicy, field: &str) -> Result<serde_json::Map<String, serde_json::Value>, ScenarioError> {
        Python::with_gil(|py| {
            let check = || -> PyResult<String> {
                let m = py.import("microsched.policy")?;
                let filled = m.call_method1("check", (cfg.class_path.as_str(), kind_name(kind), params_dict(py, &cfg.params)?, field))?;
                py.import("json")?.call_method1("dumps", (filled,))?.extract()
            };
            let text = check().map_err(|e| scenario_error(py, e, field))?;
            Ok(serde_json::from_str(&text).unwrap_or_default())
        })
    }

    fn allocator(&self, cfg: &PythonPolicy, env: &AllocEnv) -> Result<Box<dyn CoreAllocator>, ScenarioError> {
        let env_obj = Python::with_gil(|py| {
            let kw = PyDict::new(py);
            kw.set_item("max_cores", env.max_cores)?;
            env_object(py, kw, env.seed, "policy.allocator.").map(Bound::unbind)
        })
        .map_err(|e| Python::with_gil(|py| scenario_error(py, e, "policy.allocator")))?;
        let (obj, name) = Python::with_gil(|py| instantiate(PolicyKind::Allocator, cfg, env_obj.into_bound(py)))?;
        Ok(Box::new(alloc::PyAllocator::new(obj, name, env.max_cores)?))
    }

    fn controller(&self, cfg: &PythonPolicy, env: &OverloadEnv) -> Result<Box<dyn CreditController>, ScenarioError> {
        let env_obj = Python::with_gil(|py| {
            let kw = PyDict::new(py);
            kw.set_item("sessions", env.sessions)?;
            kw.set_item("max_cores", env.max_cores)?;
            kw.set_item("rtt_ns", env.rtt_ns)?;
            env_object(py, kw, env.seed, "policy.overload.").map(Bound::unbind)
        })
        .map_err(|e| Python::with_gil(|py| scenario_error(py, e, "policy.overload")))?;
        let (obj, name) = Python::with_gil(|py| instantiate(PolicyKind::Overload, cfg, env_obj.into_bound(py)))?;
        Ok(Box::new(overload::PyController::new(obj, name)?))
    }

    fn queue_policy(&self, cfg: &PythonPolicy, env: &SchedEnv) -> Result<Box<dyn DynQueuePolicy>, ScenarioError> {
        let env_obj = Python::with_gil(|py| {
            let types: Vec<PyObject> = env
                .types
                .iter()
                .map(|t| {
                    let ns = py.import("types")?.getattr("SimpleNamespace")?;
                    let kw = PyDict::new(py);
                    kw.set_item("name", &t.name)?;
                    kw.set_item("ratio", t.ratio)?;
                    kw.set_item("mean_us", t.mean_us)?;
                    Ok(ns.call((), Some(&kw))?.unbind())
                })
                .collect::<PyResult<_>>()?;
            let queue = match env.queue {
                microsched_core::scenario::QueueMode::Central => "central",
                microsched_core::scenario::QueueMode::PerCore => "per_core",
            };
            let steering = match env.steering {
                microsched_core::scenario::Steering::Rss => "rss",
                microsched_core::scenario::Steering::Random => "random",
            };
            let kw = PyDict::new(py);
            kw.set_item("workers", env.workers)?;
            kw.set_item("types", types)?;
            kw.set_item("quantum_ns", env.quantum)?;
            kw.set_item("dispatcher", env.dispatcher)?;
            kw.set_item("queue", queue)?;
            kw.set_item("steal", env.steal)?;
            kw.set_item("steering", steering)?;
            env_object(py, kw, env.seed, "policy.sched.").map(Bound::unbind)
        })
        .map_err(|e| Python::with_gil(|py| scenario_error(py, e, "policy.sched")))?;
        let (obj, name) = Python::with_gil(|py| instantiate(PolicyKind::Sched, cfg, env_obj.into_bound(py)))?;
        Ok(Box::new(sched::PyQueuePolicy::new(obj, name, env.workers)))
    }
}

/// Records a failure of policy `name` in `call` at simulated time `now` (if known): an
/// exception (with its traceback) or a decision out of bounds.
pub(crate) fn fail(name: &str, call: &str, now: Option<Nanos>, what: String) {
    let at = match now {
        Some(t) => format!(" at simulated time {:.6} ms", t as f64 / 1e6),
        None => String::new(),
    };
    microsched_core::plugin::record_failure(format!("policy {name}: {call}{at}: {what}"));
}

/// Whether the policy overrides `method` of its base class `microsched.policy.<base>`. The
/// bridge calls a method the policy leaves as the base class's only if it overrides it, and
/// otherwise gives the base class's answer itself (the same answer: no result changes): the
/// call costs a GIL acquisition and a Python call, per event for a queueing policy's `clock`,
/// `quantum` and `finished` (measured: 2/3 of the calls of the d-FCFS port on exp32). A method
/// set on the instance counts as overridden.
pub(crate) fn overrides(obj: &Bound<'_, PyAny>, base: &str, method: &str) -> bool {
    let default = || -> PyResult<bool> {
        let base_fn = obj.py().import("microsched.policy")?.getattr(base)?.getattr(method)?;
        let bound = obj.getattr(method)?;
        // A bound method of the base's function: not overridden. Anything else (the class's own
        // function, an instance attribute): overridden.
        Ok(match bound.getattr("__func__") {
            Ok(f) => f.is(&base_fn),
            Err(_) => false,
        })
    };
    // When in doubt, call it: the policy's method then decides, as before.
    !default().unwrap_or(false)
}

/// [`fail`] for an exception raised by the policy's code.
pub(crate) fn fail_exception(py: Python<'_>, name: &str, call: &str, now: Option<Nanos>, e: PyErr) {
    if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
        // Ctrl-C landed while the policy's code ran (its Python code runs on the main thread,
        // where the handler fires): not the policy's failure. Re-arm it, so that the driver's
        // next signal check stops the run as it stops any other (status 130, --keep-partial).
        // SAFETY: called with the GIL held; only sets the interpreter's "SIGINT tripped" flag.
        unsafe { pyo3::ffi::PyErr_SetInterrupt() };
        return;
    }
    fail(name, call, now, format!("raised an exception:\n{}", traceback(py, &e)));
}
