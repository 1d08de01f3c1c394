//! A credit controller written in Python, as a [`CreditController`].

use std::cell::Cell;

use microsched_core::overload::{Admission, CreditController, CreditLink, CreditStats, SessionId};
use microsched_core::time::us;
use microsched_core::{Nanos, ScenarioError};
use pyo3::prelude::*;

use super::{fail, fail_exception, overrides};

pub(crate) struct PyController {
    obj: Py<PyAny>,
    name: &'static str,
    timer: Option<Nanos>,
    /// The last time the controller was called at, for its errors.
    now: Cell<Nanos>,
    /// Which of the methods with a default the controller overrides (the others are not
    /// called: see [`overrides`]).
    calls_timer: bool,
    calls_request: bool,
    calls_wakeups: bool,
    calls_cores_changed: bool,
}

impl PyController {
    pub(crate) fn new(obj: Py<PyAny>, name: &'static str) -> Result<Self, ScenarioError> {
        let timer = Python::with_gil(|py| {
            let v = obj.bind(py).getattr("timer_interval_us").and_then(|v| v.extract::<Option<f64>>());
            match v {
                Ok(None) => Ok(None),
                Ok(Some(x)) if x.is_finite() && x > 0.0 && x <= 1e9 => Ok(Some(us(x).max(1))),
                Ok(Some(x)) => Err(ScenarioError::new("policy.overload", format!("{name}.timer_interval_us = {x} is not allowed: use a number of µs in (0, 1e9], or None"))),
                Err(e) => Err(ScenarioError::new("policy.overload", format!("{name}.timer_interval_us: {e}"))),
            }
        })?;
        let [calls_timer, calls_request, calls_wakeups, calls_cores_changed] =
            Python::with_gil(|py| ["on_timer", "on_request", "take_wakeups", "on_cores_changed"].map(|m| overrides(obj.bind(py), "Controller", m)));
        Ok(Self { obj, name, timer, now: Cell::new(0), calls_timer, calls_request, calls_wakeups, calls_cores_changed })
    }

    /// An integer attribute of the controller's state (pool, issued, ...).
    fn attr_i64(&self, attr: &str) -> i64 {
        if microsched_core::plugin::failed() {
            return 0;
        }
        Python::with_gil(|py| match self.obj.getattr(py, attr).and_then(|v| v.extract::<i64>(py)) {
            Ok(v) => v,
            Err(e) => {
                fail_exception(py, self.name, attr, Some(self.now.get()), e);
                0
            }
        })
    }

    /// A count the engine keeps as u32 (credits, sessions): out of range is the policy's error.
    fn credits(&self, call: &str, now: Nanos, v: i64) -> u32 {
        match u32::try_from(v) {
            Ok(c) => c,
            Err(_) => {
                fail(self.name, call, Some(now), format!("returned {v} credits: use a whole number in 0..=4294967295"));
                0
            }
        }
    }
}

impl CreditLink for PyController {
    fn pool(&self) -> i64 {
        self.attr_i64("pool")
    }
    fn set_pool(&mut self, credits: i64) {
        if microsched_core::plugin::failed() {
            return;
        }
        Python::with_gil(|py| {
            if let Err(e) = self.obj.call_method1(py, "set_pool", (credits,)) {
                fail_exception(py, self.name, "set_pool", Some(self.now.get()), e);
            }
        })
    }
    fn issued(&self) -> i64 {
        self.attr_i64("issued")
    }
    fn sessions(&self) -> u32 {
        self.attr_i64("sessions").clamp(0, u32::MAX as i64) as u32
    }
    fn drained(&self) -> u32 {
        self.attr_i64("drained").clamp(0, u32::MAX as i64) as u32
    }
}

impl CreditController for PyController {
    fn timer_interval(&self) -> Option<Nanos> {
        self.timer
    }

    fn on_timer(&mut self, now: Nanos, delay_ns: Nanos) {
        self.now.set(now);
        if microsched_core::plugin::failed() || !self.calls_timer {
            return;
        }
        Python::with_gil(|py| {
            if let Err(e) = self.obj.call_method1(py, "on_timer", (now, delay_ns)) {
                fail_exception(py, self.name, "on_timer", Some(now), e);
            }
        })
    }

    fn on_request(&mut self, now: Nanos, session: SessionId, demand: u32, delay_ns: Nanos) -> Admission {
        self.now.set(now);
        if microsched_core::plugin::failed() || !self.calls_request {
            return Admission::Admit; // Controller.on_request: True
        }
        Python::with_gil(|py| match self.obj.call_method1(py, pyo3::intern!(py, "on_request"), (now, session, demand, delay_ns)).and_then(|r| r.extract::<bool>(py)) {
            Ok(true) => Admission::Admit,
            Ok(false) => Admission::Drop,
            Err(e) => {
                fail_exception(py, self.name, "on_request", Some(now), e);
                Admission::Admit
            }
        })
    }

    fn on_response(&mut self, now: Nanos, session: SessionId, dropped: bool, delay_ns: Nanos) -> u32 {
        self.now.set(now);
        if microsched_core::plugin::failed() {
            return 0;
        }
        let r = Python::with_gil(|py| match self.obj.call_method1(py, pyo3::intern!(py, "on_response"), (now, session, dropped, delay_ns)).and_then(|r| r.extract::<i64>(py)) {
            Ok(v) => Some(v),
            Err(e) => {
                fail_exception(py, self.name, "on_response", Some(now), e);
                None
            }
        });
        r.map_or(0, |v| self.credits("on_response", now, v))
    }

    fn on_credit_request(&mut self, now: Nanos, session: SessionId, demand: u32) -> Option<u32> {
        self.now.set(now);
        if microsched_core::plugin::failed() {
            return None;
        }
        let r = Python::with_gil(|py| {
            match self.obj.call_method1(py, "on_credit_request", (now, session, demand)).and_then(|r| r.extract::<Option<i64>>(py)) {
                Ok(v) => v,
                Err(e) => {
                    fail_exception(py, self.name, "on_credit_request", Some(now), e);
                    None
                }
            }
        });
        r.map(|v| self.credits("on_credit_request", now, v))
    }

    fn take_wakeups(&mut self, out: &mut Vec<(SessionId, u32)>) {
        if microsched_core::plugin::failed() || !self.calls_wakeups {
            return; // Controller.take_wakeups: []
        }
        let now = self.now.get();
        let r = Python::with_gil(|py| match self.obj.call_method0(py, pyo3::intern!(py, "take_wakeups")).and_then(|r| r.extract::<Vec<(i64, i64)>>(py)) {
            Ok(v) => v,
            Err(e) => {
                fail_exception(py, self.name, "take_wakeups", Some(now), e);
                Vec::new()
            }
        });
        if r.is_empty() {
            return; // the common case: no need to read the session count
        }
        let sessions = self.sessions() as i64;
        for (s, c) in r {
            if !(0..sessions).contains(&s) {
                fail(self.name, "take_wakeups", Some(now), format!("woke session {s}, but the sessions are 0..{sessions}"));
                return;
            }
            let c = self.credits("take_wakeups", now, c);
            out.push((s as SessionId, c));
        }
    }

    fn on_cores_changed(&mut self, now: Nanos, active: u32) {
        self.now.set(now);
        if microsched_core::plugin::failed() || !self.calls_cores_changed {
            return;
        }
        Python::with_gil(|py| {
            if let Err(e) = self.obj.call_method1(py, "on_cores_changed", (now, active)) {
                fail_exception(py, self.name, "on_cores_changed", Some(now), e);
            }
        })
    }

    fn stats(&self) -> CreditStats {
        CreditStats { pool: self.pool(), issued: self.issued(), drained: self.drained(), aqm_drops: self.attr_i64("aqm_drops").max(0) as u64 }
    }

    fn pool_bounds(&self) -> Option<(i64, i64)> {
        if microsched_core::plugin::failed() {
            return None;
        }
        Python::with_gil(|py| match self.obj.call_method0(py, "pool_bounds").and_then(|r| r.extract::<Option<(i64, i64)>>(py)) {
            Ok(b) => b,
            Err(e) => {
                fail_exception(py, self.name, "pool_bounds", Some(self.now.get()), e);
                None
            }
        })
    }

    fn name(&self) -> &'static str {
        self.name
    }
}
