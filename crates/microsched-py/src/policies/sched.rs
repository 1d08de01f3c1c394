//! A queueing policy written in Python, as a [`DynQueuePolicy`].

use microsched_core::plugin::DynQueuePolicy;
use microsched_core::sched::{Next, Place, Requeue, ServerView};
use microsched_core::Nanos;
use pyo3::prelude::*;

use super::view::{place_to_py, Scoped, ServerViewPy};
use super::{fail, fail_exception, overrides};

pub(crate) struct PyQueuePolicy {
    obj: Py<PyAny>,
    name: &'static str,
    workers: u32,
    /// The driver's clock as last given (`clock`), for errors.
    now: Nanos,
    /// Which of the methods with a default the policy overrides (the others are not called:
    /// see [`overrides`]).
    calls: Calls,
}

struct Calls {
    notify: bool,
    steal: bool,
    requeue: bool,
    preempt_at_quantum: bool,
    clock: bool,
    quantum: bool,
    finished: bool,
}

impl PyQueuePolicy {
    pub(crate) fn new(obj: Py<PyAny>, name: &'static str, workers: u32) -> Self {
        let calls = Python::with_gil(|py| {
            let b = obj.bind(py);
            let o = |m| overrides(b, "QueuePolicy", m);
            Calls {
                notify: o("notify"),
                steal: o("steal"),
                requeue: o("requeue"),
                preempt_at_quantum: o("preempt_at_quantum"),
                clock: o("clock"),
                quantum: o("quantum"),
                finished: o("finished"),
            }
        });
        Self { obj, name, workers, now: 0, calls }
    }

    /// Calls `call(policy, view)` with a view valid only during the call.
    fn call_with_view<'py>(
        &self,
        py: Python<'py>,
        view: &dyn ServerView,
        call: impl FnOnce(&Bound<'py, PyAny>, Bound<'py, ServerViewPy>) -> PyResult<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: the view is cleared below, before `view`'s borrow ends.
        let v: &(dyn ServerView + 'static) = unsafe { std::mem::transmute::<&dyn ServerView, &'static dyn ServerView>(view) };
        let obj = Bound::new(py, ServerViewPy { view: unsafe { Scoped::new(v) } })?;
        let r = call(self.obj.bind(py), obj.clone());
        obj.borrow().view.clear();
        r
    }

    fn place(&self, py: Python<'_>, call: &str, r: PyResult<Bound<'_, PyAny>>, fallback: Place) -> Place {
        {
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    fail_exception(py, self.name, call, Some(self.now), e);
                    return fallback;
                }
            };
            match r.extract::<i64>().map_err(|e| e.to_string()).and_then(|p| place_from_py(p, self.workers as usize)) {
                Ok(p) => p,
                Err(m) => {
                    let shown = r.repr().map(|s| s.to_string()).unwrap_or_default();
                    fail(self.name, call, Some(self.now), format!("returned {shown}: {m}"));
                    fallback
                }
            }
        }
    }
}

/// A place as Python writes it (see [`place_to_py`]), checked against the cores.
pub(crate) fn place_from_py(p: i64, cores: usize) -> Result<Place, String> {
    match p {
        0.. if (p as usize) < cores => Ok(Place::Core(p as u16)),
        0.. => Err(format!("core {p} does not exist: the cores are 0..{cores}")),
        -1 => Ok(Place::Shared),
        -257..=-2 => Ok(Place::Class((-2 - p) as u8)),
        _ => Err("not a place: use a core number, SHARED (-1) or klass(k) for k in 0..=255".into()),
    }
}

impl DynQueuePolicy for PyQueuePolicy {
    fn name(&self) -> &'static str {
        self.name
    }

    fn steer(&mut self, flow: u32, rtype: u16, view: &dyn ServerView) -> Place {
        if microsched_core::plugin::failed() {
            return Place::Shared;
        }
        Python::with_gil(|py| {
            let r = self.call_with_view(py, view, |p, v| p.call_method1(pyo3::intern!(py, "steer"), (flow, rtype, v)));
            self.place(py, "steer", r, Place::Shared)
        })
    }

    fn notify(&mut self, place: Place, view: &dyn ServerView) -> Option<u16> {
        if microsched_core::plugin::failed() || !self.calls.notify {
            return None; // QueuePolicy.notify: None
        }
        Python::with_gil(|py| {
            let r = self.call_with_view(py, view, |p, v| p.call_method1(pyo3::intern!(py, "notify"), (place_to_py(place), v)));
            match r.and_then(|r| r.extract::<Option<i64>>()) {
                Ok(None) => None,
                Ok(Some(c)) if (0..self.workers as i64).contains(&c) => Some(c as u16),
                Ok(Some(c)) => {
                    fail(self.name, "notify", Some(self.now), format!("returned core {c}, but the cores are 0..{}", self.workers));
                    None
                }
                Err(e) => {
                    fail_exception(py, self.name, "notify", Some(self.now), e);
                    None
                }
            }
        })
    }

    fn next(&mut self, core: u16, view: &dyn ServerView) -> Next {
        if microsched_core::plugin::failed() {
            return Next::Idle;
        }
        Python::with_gil(|py| {
            let r = match self.call_with_view(py, view, |p, v| p.call_method1(pyo3::intern!(py, "next"), (core, v))) {
                Ok(r) => r,
                Err(e) => {
                    fail_exception(py, self.name, "next", Some(self.now), e);
                    return Next::Idle;
                }
            };
            if r.is_none() {
                return Next::Idle;
            }
            // The word borrowed from the Python string, not copied: this runs per request.
            let decoded = r.extract::<(Bound<'_, pyo3::types::PyString>, i64)>().map_err(|e| e.to_string()).and_then(|(what, arg)| match what.to_str().unwrap_or("") {
                "run" => place_from_py(arg, self.workers as usize).map(Next::Run),
                "steal" if (0..self.workers as i64).contains(&arg) && arg != core as i64 => Ok(Next::Steal(arg as u16)),
                "steal" => Err(format!("core {core} cannot steal from {arg}: use another core in 0..{}", self.workers)),
                other => Err(format!("`{other}` is not an answer: use run(place), steal(core) or IDLE")),
            });
            match decoded {
                Ok(n) => n,
                Err(m) => {
                    let shown = r.repr().map(|s| s.to_string()).unwrap_or_default();
                    fail(self.name, "next", Some(self.now), format!("returned {shown}: {m}"));
                    Next::Idle
                }
            }
        })
    }

    fn steal(&mut self, thief: u16, victim: u16, len: usize) -> usize {
        if microsched_core::plugin::failed() || !self.calls.steal {
            return len.div_ceil(2).max(1); // QueuePolicy.steal: (n + 1) // 2
        }
        Python::with_gil(|py| match self.obj.call_method1(py, "steal", (thief, victim, len)).and_then(|r| r.extract::<i64>(py)) {
            Ok(n) if n >= 1 && n as usize <= len => n as usize,
            Ok(n) => {
                fail(self.name, "steal", Some(self.now), format!("returned {n}: a thief takes 1..={len} of the {len} queued"));
                len.div_ceil(2).max(1)
            }
            Err(e) => {
                fail_exception(py, self.name, "steal", Some(self.now), e);
                len.div_ceil(2).max(1)
            }
        })
    }

    fn requeue(&mut self, core: u16, why: Requeue, view: &dyn ServerView) -> Place {
        if microsched_core::plugin::failed() || !self.calls.requeue {
            return Place::Core(core); // QueuePolicy.requeue: core
        }
        let why = match why {
            Requeue::Preempted => "preempted",
            Requeue::Yielded => "yielded",
            Requeue::Woken => "woken",
        };
        Python::with_gil(|py| {
            let r = self.call_with_view(py, view, |p, v| p.call_method1("requeue", (core, why, v)));
            self.place(py, "requeue", r, Place::Core(core))
        })
    }

    fn preempt_at_quantum(&self, core: u16, view: &dyn ServerView) -> bool {
        if microsched_core::plugin::failed() || !self.calls.preempt_at_quantum {
            return true; // QueuePolicy.preempt_at_quantum: True
        }
        Python::with_gil(|py| match self.call_with_view(py, view, |p, v| p.call_method1("preempt_at_quantum", (core, v))).and_then(|r| r.extract::<bool>()) {
            Ok(b) => b,
            Err(e) => {
                fail_exception(py, self.name, "preempt_at_quantum", Some(self.now), e);
                true
            }
        })
    }

    fn clock(&mut self, now: Nanos) {
        self.now = now;
        if microsched_core::plugin::failed() || !self.calls.clock {
            return;
        }
        Python::with_gil(|py| {
            if let Err(e) = self.obj.call_method1(py, "clock", (now,)) {
                fail_exception(py, self.name, "clock", Some(now), e);
            }
        })
    }

    fn quantum(&mut self, core: u16, rtype: u16, service: Nanos, default: Nanos) -> Nanos {
        if microsched_core::plugin::failed() || !self.calls.quantum {
            return default; // QueuePolicy.quantum: default_ns
        }
        Python::with_gil(|py| match self.obj.call_method1(py, "quantum", (core, rtype, service, default)).and_then(|r| r.extract::<u64>(py)) {
            Ok(q) if q >= 1 => q as Nanos,
            Ok(q) => {
                fail(self.name, "quantum", Some(self.now), format!("returned {q} ns: a quantum is at least 1 ns"));
                default
            }
            Err(e) => {
                fail_exception(py, self.name, "quantum", Some(self.now), e);
                default
            }
        })
    }

    fn finished(&mut self, core: u16, service: Nanos) {
        if microsched_core::plugin::failed() || !self.calls.finished {
            return;
        }
        Python::with_gil(|py| {
            if let Err(e) = self.obj.call_method1(py, "finished", (core, service)) {
                fail_exception(py, self.name, "finished", Some(self.now), e);
            }
        })
    }
}
