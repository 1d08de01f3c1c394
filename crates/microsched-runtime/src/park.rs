//! Parking and unparking a worker ("core"), and the accounting of where its time goes.
//!
//! A worker is in one [`Phase`] at a time. Only the worker itself moves between `Busy`, `Search`
//! and `Parked`; only the controller moves a `Parked` worker to `Waking` (a core grant), with a
//! compare-and-swap, then unparks its thread. A parked worker blocks in
//! [`std::thread::park`] (a futex wait): no sleep loop, no CPU use. The permit semantics of
//! `park`/`unpark` make the race "the controller grants between the worker's state change and its
//! `park` call" harmless: `park` then returns at once.
//!
//! Time is accumulated per phase at every transition by the party that makes it, so that
//! `busy + search + parked + waking = time since the worker started`, the runtime's version of
//! the simulator's core-time conservation.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;

use microsched_core::alloc::CoreState;
use microsched_core::Nanos;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Running a request.
    Busy = 0,
    /// Allocated, looking for work (own queues, then stealing).
    Search = 1,
    /// Given back: blocked in `park`, its CPU free for the best-effort co-tenant.
    Parked = 2,
    /// Granted by the controller, not yet running again (the real core-allocation delay).
    Waking = 3,
}

impl Phase {
    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Busy,
            1 => Phase::Search,
            2 => Phase::Parked,
            _ => Phase::Waking,
        }
    }
    pub fn core_state(self) -> CoreState {
        match self {
            Phase::Busy | Phase::Search => CoreState::Active,
            Phase::Parked => CoreState::Parked,
            Phase::Waking => CoreState::Waking,
        }
    }
}

#[derive(Debug)]
pub struct Parker {
    phase: AtomicU8,
    since: AtomicU64,
    acc: [AtomicU64; 4],
    thread: OnceLock<Thread>,
}

impl Parker {
    pub fn new(initial: Phase) -> Self {
        Self {
            phase: AtomicU8::new(initial as u8),
            since: AtomicU64::new(0),
            acc: Default::default(),
            thread: OnceLock::new(),
        }
    }

    /// Called once by the worker thread itself, before anything can unpark it.
    pub fn register(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    #[inline]
    pub fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Acquire))
    }

    /// A worker-side transition (`Busy`, `Search`, `Parked`).
    #[inline]
    pub fn set(&self, now: Nanos, to: Phase) {
        let from = self.phase();
        if from == to {
            return;
        }
        let since = self.since.load(Ordering::Relaxed);
        self.acc[from as usize].fetch_add(now.saturating_sub(since), Ordering::Relaxed);
        self.since.store(now, Ordering::Relaxed);
        self.phase.store(to as u8, Ordering::Release);
    }

    /// The worker gives its core back and blocks until granted again (or `stopping()`).
    pub fn park(&self, now: Nanos, stopping: impl Fn() -> bool) {
        self.set(now, Phase::Parked);
        while self.phase() == Phase::Parked && !stopping() {
            std::thread::park();
        }
    }

    /// The controller grants this core: `Parked` → `Waking`, then wakes the thread. Returns
    /// false if the worker was not parked.
    pub fn grant(&self, now: Nanos) -> bool {
        let since = self.since.load(Ordering::Acquire);
        if self
            .phase
            .compare_exchange(Phase::Parked as u8, Phase::Waking as u8, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        self.acc[Phase::Parked as usize].fetch_add(now.saturating_sub(since), Ordering::Relaxed);
        self.since.store(now, Ordering::Release);
        self.wake();
        true
    }

    /// Unparks the thread whatever its phase (used at shutdown).
    pub fn wake(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Cumulative ns per phase (busy, search, parked, waking) as of `now`, the current phase's
    /// open interval included.
    pub fn times(&self, now: Nanos) -> [Nanos; 4] {
        let mut t = [0; 4];
        for (i, a) in self.acc.iter().enumerate() {
            t[i] = a.load(Ordering::Relaxed);
        }
        let p = self.phase();
        t[p as usize] += now.saturating_sub(self.since.load(Ordering::Relaxed));
        t
    }
}
