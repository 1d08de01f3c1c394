//! A core allocator written in Python, as a [`CoreAllocator`].

use std::cell::Cell;

use microsched_core::alloc::{AllocAction, AllocView, CoreAllocator, CoreId, ParkMode, ParkRule, ParkVerdict};
use microsched_core::overload::CreditLink;
use microsched_core::time::us;
use microsched_core::{Nanos, ScenarioError};
use pyo3::prelude::*;

use super::view::{AllocViewPy, CreditsPy, Scoped};
use super::{fail, fail_exception, overrides};

pub(crate) struct PyAllocator {
    obj: Py<PyAny>,
    name: &'static str,
    interval: Option<Nanos>,
    rule: ParkRule,
    max_cores: u32,
    /// The last time the policy was called at, for its errors.
    now: Cell<Nanos>,
    /// Which of the optional methods the policy overrides (the others are not called: see
    /// [`overrides`]).
    calls_park_attempt: bool,
    calls_park_abort: bool,
    calls_signal: bool,
}

fn read_interval(obj: &Bound<'_, PyAny>, name: &str) -> Result<Option<Nanos>, ScenarioError> {
    let field = "policy.allocator";
    let v = obj.getattr("interval_us").and_then(|v| v.extract::<Option<f64>>());
    match v {
        Ok(None) => Ok(None),
        Ok(Some(x)) if x.is_finite() && x > 0.0 && x <= 1e9 => Ok(Some(us(x).max(1))),
        Ok(Some(x)) => Err(ScenarioError::new(field, format!("{name}.interval_us = {x} is not allowed: use a number of µs in (0, 1e9], or None"))),
        Err(e) => Err(ScenarioError::new(field, format!("{name}.interval_us: {e}"))),
    }
}

fn read_park_rule(obj: &Bound<'_, PyAny>, name: &str) -> Result<ParkRule, ScenarioError> {
    let field = "policy.allocator";
    let err = |m: String| ScenarioError::new(field, format!("{name}.park_rule(): {m}"));
    let r = obj.call_method0("park_rule").map_err(|e| err(e.to_string()))?;
    let mode: String = r.getattr("mode").and_then(|m| m.extract()).map_err(|e| err(e.to_string()))?;
    let mode = match mode.as_str() {
        "never" => ParkMode::Never,
        "after_poll" => ParkMode::AfterPoll,
        "only_last_core" => ParkMode::OnlyLastCore,
        other => return Err(err(format!("mode `{other}` is not allowed: use never, after_poll or only_last_core"))),
    };
    let poll: f64 = r.getattr("min_poll_us").and_then(|m| m.extract()).map_err(|e| err(e.to_string()))?;
    if !(poll.is_finite() && (0.0..=1e6).contains(&poll)) {
        return Err(err(format!("min_poll_us = {poll} is not allowed: use 0..=1e6")));
    }
    let passes: u32 = r.getattr("min_passes").and_then(|m| m.extract()).map_err(|e| err(e.to_string()))?;
    Ok(ParkRule { mode, min_poll_ns: us(poll), min_passes: passes })
}

impl PyAllocator {
    pub(crate) fn new(obj: Py<PyAny>, name: &'static str, max_cores: u32) -> Result<Self, ScenarioError> {
        let (interval, rule, [calls_park_attempt, calls_park_abort, calls_signal]) = Python::with_gil(|py| {
            let b = obj.bind(py);
            let calls = ["on_park_attempt", "on_park_abort", "signal"].map(|m| overrides(b, "Allocator", m));
            Ok::<_, ScenarioError>((read_interval(b, name)?, read_park_rule(b, name)?, calls))
        })?;
        Ok(Self { obj, name, interval, rule, max_cores, now: Cell::new(0), calls_park_attempt, calls_park_abort, calls_signal })
    }

    /// Calls `method` with a credit view (or None) that is valid only during the call.
    fn with_credits<R>(&self, py: Python<'_>, credits: Option<&mut dyn CreditLink>, f: impl FnOnce(Bound<'_, PyAny>) -> R) -> R {
        match credits {
            None => f(py.None().into_bound(py)),
            Some(link) => {
                // SAFETY: the pointer is cleared below, before `link`'s borrow ends.
                let ptr: *mut (dyn CreditLink + '_) = link;
                let ptr: *mut (dyn CreditLink + 'static) = unsafe { std::mem::transmute(ptr) };
                let obj = match Bound::new(py, CreditsPy { link: Cell::new(Some(ptr)) }) {
                    Ok(o) => o,
                    Err(_) => return f(py.None().into_bound(py)),
                };
                let r = f(obj.clone().into_any());
                obj.borrow().link.set(None);
                r
            }
        }
    }
}

impl CoreAllocator for PyAllocator {
    fn interval(&self) -> Option<Nanos> {
        self.interval
    }

    fn tick(&mut self, obs: &dyn AllocView) -> AllocAction {
        let now = obs.now();
        self.now.set(now);
        if microsched_core::plugin::failed() {
            return AllocAction::Nothing;
        }
        Python::with_gil(|py| {
            // SAFETY: the view is cleared below, before `obs`'s borrow ends.
            let view: &(dyn AllocView + 'static) = unsafe { std::mem::transmute::<&dyn AllocView, &'static dyn AllocView>(obs) };
            let v = match Bound::new(py, AllocViewPy { view: unsafe { Scoped::new(view) }, max_cores: self.max_cores }) {
                Ok(v) => v,
                Err(e) => {
                    fail_exception(py, self.name, "tick", Some(now), e);
                    return AllocAction::Nothing;
                }
            };
            let r = self.obj.call_method1(py, pyo3::intern!(py, "tick"), (v.clone(),));
            v.borrow().view.clear();
            let r = match r {
                Ok(r) => r.into_bound(py),
                Err(e) => {
                    fail_exception(py, self.name, "tick", Some(now), e);
                    return AllocAction::Nothing;
                }
            };
            if r.is_none() {
                return AllocAction::Nothing;
            }
            if let Ok(s) = r.extract::<String>() {
                if s == "grant" {
                    return AllocAction::Grant;
                }
            }
            match r.getattr("core").and_then(|c| c.extract::<i64>()) {
                Ok(c) if (0..self.max_cores as i64).contains(&c) => AllocAction::Yield(c as CoreId),
                Ok(c) => {
                    fail(self.name, "tick", Some(now), format!("returned Yield({c}), but the cores are 0..{}", self.max_cores));
                    AllocAction::Nothing
                }
                Err(_) => {
                    let shown = r.repr().map(|s| s.to_string()).unwrap_or_default();
                    fail(self.name, "tick", Some(now), format!("returned {shown}: use None, GRANT or Yield(core)"));
                    AllocAction::Nothing
                }
            }
        })
    }

    fn park_rule(&self) -> ParkRule {
        self.rule
    }

    fn on_park_attempt(&mut self, now: Nanos, core: CoreId, active: usize, credits: Option<&mut dyn CreditLink>) -> ParkVerdict {
        self.now.set(now);
        if microsched_core::plugin::failed() {
            return ParkVerdict::KeepPolling;
        }
        if !self.calls_park_attempt {
            return ParkVerdict::Park; // Allocator.on_park_attempt: True
        }
        Python::with_gil(|py| {
            let r = self.with_credits(py, credits, |c| self.obj.call_method1(py, "on_park_attempt", (now, core, active, c)));
            match r.and_then(|r| r.extract::<bool>(py)) {
                Ok(true) => ParkVerdict::Park,
                Ok(false) => ParkVerdict::KeepPolling,
                Err(e) => {
                    fail_exception(py, self.name, "on_park_attempt", Some(now), e);
                    ParkVerdict::KeepPolling
                }
            }
        })
    }

    fn on_park_abort(&mut self, now: Nanos, core: CoreId, credits: Option<&mut dyn CreditLink>) {
        self.now.set(now);
        if microsched_core::plugin::failed() || !self.calls_park_abort {
            return;
        }
        Python::with_gil(|py| {
            if let Err(e) = self.with_credits(py, credits, |c| self.obj.call_method1(py, "on_park_abort", (now, core, c))) {
                fail_exception(py, self.name, "on_park_abort", Some(now), e);
            }
        })
    }

    fn signal(&self) -> Option<f64> {
        if microsched_core::plugin::failed() || !self.calls_signal {
            return None; // Allocator.signal: None
        }
        Python::with_gil(|py| match self.obj.call_method0(py, "signal").and_then(|s| s.extract::<Option<f64>>(py)) {
            Ok(s) => s,
            Err(e) => {
                fail_exception(py, self.name, "signal", Some(self.now.get()), e);
                None
            }
        })
    }

    fn name(&self) -> &'static str {
        self.name
    }
}
