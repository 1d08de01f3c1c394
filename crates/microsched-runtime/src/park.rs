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
//! the simulator's core-time conservation. The controller reads the four totals while the worker
//! may be mid-transition: a sequence counter (a seqlock; the worker is its only writer, and the
//! controller's own grant runs on the reading thread) lets it detect that instead of counting an
//! interval twice (which showed as more cores allocated than exist in the time series).

use std::sync::atomic::{fence, AtomicU64, AtomicU8, Ordering};
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
    /// Odd while the worker updates `phase`, `since` and `acc`.
    seq: AtomicU64,
    thread: OnceLock<Thread>,
    /// Wake-up latencies (ns): from the controller's grant (`Parked` → `Waking`) until the
    /// worker runs again (its first transition out of `Waking`): the runtime's own core wake-up
    /// latency, which the simulator takes as `server.wake_latency`. Written by the worker only
    /// (uncontended), read at the report.
    wakes: parking_lot::Mutex<Option<hdrhistogram::Histogram<u64>>>,
    /// The timeline sink of a traced server, and this worker's number in it.
    pub trace: OnceLock<(std::sync::Arc<crate::trace::TraceSink>, usize)>,
}

impl Parker {
    pub fn new(initial: Phase) -> Self {
        Self {
            phase: AtomicU8::new(initial as u8),
            since: AtomicU64::new(0),
            acc: Default::default(),
            seq: AtomicU64::new(0),
            thread: OnceLock::new(),
            wakes: parking_lot::Mutex::new(None),
            trace: OnceLock::new(),
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
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        let since = self.since.load(Ordering::Relaxed);
        self.acc[from as usize].fetch_add(now.saturating_sub(since), Ordering::Relaxed);
        self.since.store(now, Ordering::Relaxed);
        self.phase.store(to as u8, Ordering::Release);
        self.seq.store(seq + 2, Ordering::Release);
        if from == Phase::Waking {
            self.record_wake(now.saturating_sub(since));
        }
        if let Some((t, me)) = self.trace.get() {
            t.phase(*me, now, to);
        }
    }

    #[cold]
    fn record_wake(&self, ns: Nanos) {
        let mut h = self.wakes.lock();
        // Bounded (1 ns to 60 s), so that an out-of-range value saturates instead of being lost.
        let h = h.get_or_insert_with(|| hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"));
        h.saturating_record(ns.max(1));
    }

    /// The wake-up latencies recorded so far (ns), if any.
    pub fn wake_latencies(&self) -> Option<hdrhistogram::Histogram<u64>> {
        self.wakes.lock().clone()
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
        // A parked worker is blocked and changes nothing until it sees `Waking`, so the
        // accounting is brought up to date first and the phase published last: a worker that
        // wakes (even spuriously) and sees `Waking` also sees the new `since`.
        if self.phase() != Phase::Parked {
            return false;
        }
        let since = self.since.load(Ordering::Acquire);
        self.acc[Phase::Parked as usize].fetch_add(now.saturating_sub(since), Ordering::Relaxed);
        self.since.store(now, Ordering::Relaxed);
        // Recorded before the worker can see `Waking` and move on, so that its slices stay in order.
        if let Some((t, me)) = self.trace.get() {
            t.phase(*me, now, Phase::Waking);
        }
        self.phase.store(Phase::Waking as u8, Ordering::Release);
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
    ///
    /// Never waits for the worker: the reader is the controller, which may run under
    /// `SCHED_FIFO` and may itself have preempted the worker in the middle of a transition (on
    /// 2 CPUs, spinning until the worker finished stalled the server for milliseconds). If no
    /// consistent read succeeds in a few tries, it returns the closed intervals only (the open
    /// one is counted at the next read): an undercount for one sample, never a double count.
    pub fn times(&self, now: Nanos) -> [Nanos; 4] {
        let closed = || {
            let mut t = [0; 4];
            for (i, a) in self.acc.iter().enumerate() {
                t[i] = a.load(Ordering::Relaxed);
            }
            t
        };
        for _ in 0..4 {
            let seq = self.seq.load(Ordering::Acquire);
            if seq % 2 == 1 {
                break;
            }
            let mut t = closed();
            let p = Phase::from_u8(self.phase.load(Ordering::Relaxed));
            let since = self.since.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == seq {
                t[p as usize] += now.saturating_sub(since);
                return t;
            }
        }
        closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_latency_is_grant_to_running() {
        let p = Parker::new(Phase::Search);
        p.set(100, Phase::Parked);
        assert!(p.wake_latencies().is_none());
        assert!(p.grant(1_000));
        p.set(8_000, Phase::Search);
        p.set(9_000, Phase::Busy);
        let h = p.wake_latencies().expect("one wake-up");
        assert_eq!(h.len(), 1);
        assert_eq!(h.max(), h.highest_equivalent(7_000));
    }
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// Reads during transitions never count an interval twice: the phases' totals as of `now`
    /// add up to at most `now` (the worker started at 0), and to exactly `now` whenever the read
    /// was consistent. A torn read (the closed interval already in `acc`
    /// and still counted as open) would exceed it.
    #[test]
    fn totals_read_during_transitions_never_exceed_the_elapsed_time() {
        let p = Arc::new(Parker::new(Phase::Search));
        let done = Arc::new(AtomicBool::new(false));
        let writer = {
            let (p, done) = (p.clone(), done.clone());
            std::thread::spawn(move || {
                for t in 1..2_000_000u64 {
                    p.set(t, if t % 2 == 0 { Phase::Busy } else { Phase::Search });
                    // Quiet moments by construction: a writer that never pauses can keep every
                    // read of a reader on the other CPU inconsistent (seen on a loaded 2-CPU VM).
                    if t % 100_000 == 0 {
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                }
                done.store(true, Ordering::Release);
            })
        };
        // Far beyond every timestamp the writer uses, so the open interval is never clamped.
        let now = 1u64 << 40;
        let (mut reads, mut exact) = (0u64, 0u64);
        while !done.load(Ordering::Acquire) {
            let total: u64 = p.times(now).iter().sum();
            assert!(total <= now, "torn read: {total} > {now}");
            exact += u64::from(total == now);
            reads += 1;
        }
        writer.join().unwrap();
        // The writer does little but transitions, so most reads meet one and fall back to the
        // closed intervals; those made while it pauses must be exact.
        assert!(exact > 0, "none of {reads} reads consistent");
        assert_eq!(p.times(now).iter().sum::<u64>(), now);
    }
}
