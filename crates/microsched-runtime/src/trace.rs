//! The runtime's timeline sink (`serve --trace`): the workers' phases and requests, the
//! controller's counters, parks, preemptions and steals, in the simulator's track layout
//! ([`microsched_core::trace`]), so that a real and a simulated run open side by side.
//!
//! Untraced servers never create one: the hooks are an `OnceLock` read that finds nothing.
//! Traced, each worker updates its own slot (an uncontended lock) at each change and appends
//! to the shared buffer only inside the window: tracing costs the workers a few hundred ns per
//! change, which the trace's metadata says.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use microsched_core::summary::{ParkGate, Parking};
use microsched_core::trace::{counter, instant, park_reason, veto_bit, veto_reason, Arg, CoreActivity, Trace};
use microsched_core::Nanos;

use crate::park::Phase;

/// The node number of the runtime's one server in the layout.
const NODE: u16 = 0;

pub struct TraceSink {
    trace: Mutex<Trace>,
    /// Per worker: what it does, for which request, since when.
    cores: Vec<Mutex<(CoreActivity, Option<u64>, Nanos)>>,
    /// Per worker: the park veto reasons recorded in its current idle stretch ([`veto_bit`]).
    vetoed: Vec<Mutex<u8>>,
    /// The controller's last counter values.
    last: Mutex<[f64; 6]>,
    closed: AtomicBool,
    window: (Nanos, Nanos),
}

impl std::fmt::Debug for TraceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceSink").field("window", &self.window).finish_non_exhaustive()
    }
}

impl TraceSink {
    pub fn new(cores: usize, window: (Nanos, Nanos), max_events: usize, initial: &[Phase]) -> Self {
        let mut trace = Trace::new(window.0, window.1, max_events);
        trace.add_node(NODE, cores, false);
        Self {
            trace: Mutex::new(trace),
            cores: initial.iter().map(|&p| Mutex::new((activity(p), None, 0))).collect(),
            vetoed: initial.iter().map(|_| Mutex::new(0)).collect(),
            last: Mutex::new([f64::NAN; 6]),
            closed: AtomicBool::new(false),
            window,
        }
    }

    #[inline]
    fn covers(&self, t: Nanos) -> bool {
        t >= self.window.0 && t < self.window.1
    }

    /// Worker `core` enters `what` (for request `req`) at `now`: the previous slice ends.
    fn switch(&self, core: usize, what: CoreActivity, req: Option<u64>, now: Nanos) {
        let mut slot = self.cores[core].lock();
        let (was, was_req, since) = *slot;
        if (was, was_req) == (what, req) {
            return;
        }
        *slot = (what, req, now);
        drop(slot);
        *self.vetoed[core].lock() = 0;
        if now > self.window.0 && since < self.window.1 && !self.closed.load(Ordering::Relaxed) {
            self.trace.lock().core_slice(NODE, core as u16, was, was_req, since, now);
        }
    }

    /// A phase change of worker `core` (the worker's own, or the controller's grant).
    pub fn phase(&self, core: usize, now: Nanos, to: Phase) {
        self.switch(core, activity(to), None, now);
        if to == Phase::Waking {
            self.instant(Some(core), instant::WAKE, now, None);
        }
    }

    /// Worker `core` starts (or resumes) request `id`.
    pub fn running(&self, core: usize, now: Nanos, id: u64) {
        self.switch(core, CoreActivity::Running, Some(id), now);
    }

    pub fn instant(&self, core: Option<usize>, name: &'static str, at: Nanos, arg: Option<(&'static str, Arg)>) {
        if self.covers(at) {
            self.trace.lock().instant(NODE, core.map(|c| c as u16), name, at, arg);
        }
    }

    /// A park attempt of worker `core`: the gate's counts before and after it tell why.
    pub fn park_attempt(&self, core: usize, at: Nanos, parked: bool, before: Option<ParkGate>, after: Option<ParkGate>) {
        if !self.covers(at) {
            return;
        }
        let d = match (before, after) {
            (Some(b), Some(a)) => {
                let p = |g| Parking { gate: Some(g), ..Parking::default() };
                p(a).since(&p(b)).gate
            }
            _ => None,
        };
        let g = d.unwrap_or_default();
        if parked {
            self.instant(Some(core), instant::PARK, at, Some(("reason", Arg::Str(park_reason(&g, d.is_some())))));
        } else if let Some(r) = veto_reason(&g) {
            // The first veto of each reason in an idle stretch.
            let mut seen = self.vetoed[core].lock();
            if *seen & veto_bit(r) == 0 {
                *seen |= veto_bit(r);
                drop(seen);
                self.instant(Some(core), instant::PARK_VETOED, at, Some(("reason", Arg::Str(r))));
            }
        }
        if g.cuts > 0 {
            self.instant(Some(core), instant::CREDIT_CUT, at, Some(("credits", Arg::Int(g.credits_cut))));
        }
    }

    /// Request `id` left the server at `done` (admitted at `arrived`).
    pub fn request(&self, core: usize, id: u64, arrived: Nanos, done: Nanos, dropped: bool) {
        if self.covers(done) {
            let mut t = self.trace.lock();
            t.request(NODE, id, arrived, done, dropped);
            if dropped {
                t.instant(NODE, Some(core as u16), instant::DROP, done, Some(("request", Arg::Int(id))));
            }
        }
    }

    /// The controller's view at `now`; a counter is recorded when it changes.
    pub fn counters(&self, now: Nanos, allocated: usize, busy: usize, queued: u64, max_delay: Nanos, credits: Option<(i64, i64)>) {
        if !self.covers(now) {
            return;
        }
        let names = [
            counter::CORES_ALLOCATED,
            counter::CORES_BUSY,
            counter::QUEUE_LENGTH,
            counter::OLDEST_DELAY_US,
            counter::CREDIT_POOL,
            counter::CREDITS_ISSUED,
        ];
        let values = [
            allocated as f64,
            busy as f64,
            queued as f64,
            (max_delay as f64 / 1e3).round(),
            credits.map_or(f64::NAN, |c| c.0 as f64),
            credits.map_or(f64::NAN, |c| c.1 as f64),
        ];
        let mut last = self.last.lock();
        let mut t = None;
        for k in 0..names.len() {
            if values[k] != last[k] && !(values[k].is_nan() && last[k].is_nan()) {
                last[k] = values[k];
                t.get_or_insert_with(|| self.trace.lock()).counter(NODE, names[k], now, values[k]);
            }
        }
    }

    /// At the server's stop (`now`): closes the open slices and returns the trace.
    pub fn finish(&self, now: Nanos) -> Trace {
        let mut t = self.trace.lock();
        if !self.closed.swap(true, Ordering::Relaxed) {
            for (c, slot) in self.cores.iter().enumerate() {
                let (what, req, since) = *slot.lock();
                t.core_slice(NODE, c as u16, what, req, since, now);
            }
        }
        t.clone()
    }
}

fn activity(p: Phase) -> CoreActivity {
    match p {
        // A worker's `Busy` names its request as soon as it knows it (`running`).
        Phase::Busy => CoreActivity::Busy,
        Phase::Search => CoreActivity::Searching,
        Phase::Parked => CoreActivity::Parked,
        Phase::Waking => CoreActivity::Waking,
    }
}
