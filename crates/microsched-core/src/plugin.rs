//! Policies written outside this crate: `kind = "python"` in any of the three policy tables.
//!
//! This crate does not know Python. The Python extension (`microsched-py`) installs a
//! [`PythonBridge`] when it is imported; a scenario naming a Python policy is then validated and
//! built through it, and the object it returns is an ordinary [`CoreAllocator`],
//! [`CreditController`] or [`DynQueuePolicy`] that the drivers call like any built-in. Without
//! the bridge (a pure-Rust binary), such a scenario is refused at validation with an error
//! saying so.

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::alloc::CoreAllocator;
use crate::env::{AllocEnv, OverloadEnv, SchedEnv};
use crate::error::ScenarioError;
use crate::overload::CreditController;
use crate::sched::{Next, Place, Requeue, ServerView, Slack};
use crate::time::Nanos;

/// A policy written in Python: `{ kind = "python", class = "FILE.py:Class" (or
/// "package.module:Class"), params = { ... } }`. The class declares its parameters with their
/// defaults (a dataclass `Params`); `microsched validate` checks them and prints them filled in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PythonPolicy {
    /// The class: `path/to/file.py:ClassName` (a path relative to the scenario file's folder,
    /// else to the current directory, or absolute) or `package.module:ClassName` (importable on every worker).
    #[serde(rename = "class")]
    pub class_path: String,
    /// The class's parameters (its `Params` dataclass): unknown names are errors, missing ones
    /// take the class's defaults.
    #[serde(default)]
    pub params: serde_json::Map<String, serde_json::Value>,
}

impl PythonPolicy {
    /// A `FILE.py:Class` path relative to `base_dir` (the scenario file's folder; if the file is
    /// not there, the current directory, as for a `--set` typed at a shell) made absolute, so
    /// that the scenario means the same file wherever it is run from (a sweep's workers).
    pub fn resolve(&mut self, base_dir: &std::path::Path) {
        if let Some((file, class)) = self.class_path.rsplit_once(':') {
            let path = std::path::Path::new(file);
            if file.ends_with(".py") && path.is_relative() {
                let beside = base_dir.join(path);
                let abs = if beside.is_file() || !path.is_file() { beside } else { path.to_path_buf() };
                let abs = abs.canonicalize().unwrap_or(abs);
                self.class_path = format!("{}:{class}", abs.display());
            }
        }
    }
}

/// Which policy table a plugin fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    Allocator,
    Overload,
    Sched,
}

impl PolicyKind {
    /// The scenario table the policy sits in.
    pub fn field(self) -> &'static str {
        match self {
            PolicyKind::Allocator => "policy.allocator",
            PolicyKind::Overload => "policy.overload",
            PolicyKind::Sched => "policy.sched",
        }
    }
}

/// A queueing policy behind a view object rather than a generic one: what a policy from outside
/// the crate implements (its calls cost one virtual call per view read, which a policy in
/// Python does not notice). [`Dyn`] makes it a [`crate::sched::QueuePolicy`] for any driver.
pub trait DynQueuePolicy: Send {
    fn name(&self) -> &'static str;
    fn steer(&mut self, flow: u32, rtype: u16, view: &dyn ServerView) -> Place;
    fn notify(&mut self, place: Place, view: &dyn ServerView) -> Option<u16>;
    fn next(&mut self, core: u16, view: &dyn ServerView) -> Next;
    fn steal(&mut self, thief: u16, victim: u16, len: usize) -> usize;
    fn requeue(&mut self, core: u16, why: Requeue, view: &dyn ServerView) -> Place;
    fn preempt_at_quantum(&self, core: u16, view: &dyn ServerView) -> bool;
    fn clock(&mut self, now: Nanos);
    fn quantum(&mut self, core: u16, rtype: u16, service: Nanos, default: Nanos) -> Nanos;
    fn finished(&mut self, core: u16, service: Nanos);
}

/// A [`DynQueuePolicy`] as a [`crate::sched::QueuePolicy`] of any driver.
pub struct Dyn(pub Box<dyn DynQueuePolicy>);

impl<V: ServerView> crate::sched::QueuePolicy<V> for Dyn {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn steer(&mut self, flow: u32, view: &V) -> Place {
        self.0.steer(flow, 0, view)
    }
    fn steer_typed(&mut self, flow: u32, rtype: u16, view: &V) -> Place {
        self.0.steer(flow, rtype, view)
    }
    fn notify(&mut self, place: Place, view: &V) -> Option<u16> {
        self.0.notify(place, view)
    }
    fn next(&mut self, core: u16, view: &V) -> Next {
        self.0.next(core, view)
    }
    fn steal(&mut self, thief: u16, victim: u16, len: usize) -> usize {
        self.0.steal(thief, victim, len)
    }
    fn requeue(&mut self, core: u16, why: Requeue, view: &V) -> Place {
        self.0.requeue(core, why, view)
    }
    fn preempt_at_quantum(&self, core: u16, view: &V) -> bool {
        self.0.preempt_at_quantum(core, view)
    }
    // Every request is shown to the policy (its quantum, its end) and so is the clock: a policy
    // from outside decides per request if it wants to, and its errors carry the simulated time.
    fn per_request(&self) -> bool {
        true
    }
    fn clock(&mut self, now: Nanos) {
        self.0.clock(now)
    }
    fn quantum(&mut self, core: u16, rtype: u16, service: Nanos, default: Nanos) -> Nanos {
        self.0.quantum(core, rtype, service, default)
    }
    fn finished(&mut self, core: u16, service: Nanos) {
        self.0.finished(core, service)
    }
    fn dispatcher_slack(&mut self, _now: Nanos) -> Slack {
        Slack::Never
    }
}

/// What the Python extension provides: checking a Python policy's table and building it.
pub trait PythonBridge: Send + Sync {
    /// Imports the class, checks it is a policy of `kind` and that `cfg.params` fit its `Params`;
    /// returns the parameters with the defaults filled in. `field` is the table's dotted path.
    fn validate(&self, kind: PolicyKind, cfg: &PythonPolicy, field: &str) -> Result<serde_json::Map<String, serde_json::Value>, ScenarioError>;
    fn allocator(&self, cfg: &PythonPolicy, env: &AllocEnv) -> Result<Box<dyn CoreAllocator>, ScenarioError>;
    fn controller(&self, cfg: &PythonPolicy, env: &OverloadEnv) -> Result<Box<dyn CreditController>, ScenarioError>;
    fn queue_policy(&self, cfg: &PythonPolicy, env: &SchedEnv) -> Result<Box<dyn DynQueuePolicy>, ScenarioError>;
}

static BRIDGE: OnceLock<Box<dyn PythonBridge>> = OnceLock::new();

/// Installs the bridge (the Python extension does, once, at import).
pub fn install_python_bridge(bridge: Box<dyn PythonBridge>) {
    let _ = BRIDGE.set(bridge);
}

/// The installed bridge, or the error a scenario naming a Python policy gets without one.
pub fn python_bridge(field: &str) -> Result<&'static dyn PythonBridge, ScenarioError> {
    BRIDGE.get().map(|b| b.as_ref()).ok_or_else(|| {
        ScenarioError::new(
            format!("{field}.kind"),
            "\"python\" policies run only from the Python front (`microsched run`, `microsched.api`), which loads them; \
             this program has no Python: use a built-in kind",
        )
    })
}

/// A failure of a policy from outside during a run (an exception in its code, a decision out
/// of bounds): the policy returns a neutral decision and records the failure here; the driver
/// stops at its next check and reports this message instead of results. One slot per process:
/// a process runs one simulation or one server at a time.
static FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static FAILURE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Records a policy failure; the first one wins (what follows it is a consequence).
pub fn record_failure(message: String) {
    let mut slot = FAILURE.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_none() {
        *slot = Some(message);
        FAILED.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Whether a policy failed since the last [`take_failure`]: a cheap check for a driver's loop.
pub fn failed() -> bool {
    FAILED.load(std::sync::atomic::Ordering::Acquire)
}

/// The recorded failure, clearing it.
pub fn take_failure() -> Option<String> {
    let mut slot = FAILURE.lock().unwrap_or_else(|e| e.into_inner());
    FAILED.store(false, std::sync::atomic::Ordering::Release);
    slot.take()
}
