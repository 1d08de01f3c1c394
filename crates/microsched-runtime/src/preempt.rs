//! Cooperative time-slice preemption, as Synergy's compiler interrupts do it: a timer thread
//! watches every worker's quantum deadline and, when the running request has exceeded it (and
//! the queueing policy agrees: Synergy's conditional preemption asks for new work in that
//! worker's own queue), writes the worker's preempt flag; the request's code polls the flag at
//! yield points about every [`PROBE_NS`] ([`Cx::compute`](crate::coro::Cx::compute): the
//! synthetic handler's spin is instrumented like a compiled loop's back-edges) and, when it is
//! set, suspends with [`Suspend::Preempt`](crate::coro::Suspend::Preempt). The worker then
//! hands the request to the queue the policy's `requeue(Preempted)` names (Synergy: the global
//! wait queue, the server's shared queue, so it resumes on whichever worker takes it) and goes
//! on with other work.
//!
//! Which requests are preemptible and with what quantum is the policy's `quantum` (Synergy:
//! long requests, `QUANTUM_FACTOR` × the worker's EMA of short service times; others: the
//! scenario's `server.preemption.quantum_us` for every request), exactly as the simulator asks
//! it. A preemptible request runs as a coroutine; one with quantum `Nanos::MAX` runs directly
//! on the worker's stack as before.
//!
//! The timer thread sleeps until the earliest armed deadline (or until a worker arms one while
//! it has none: the worker unparks it) instead of spinning on a core of its own as Synergy's
//! timer core does: on 2 CPUs a spinning timer would take one from the workers. The price is
//! the kernel's timer latency (≈ 15 µs on the VM this was written on): expiries are late by it,
//! counted in `preempt_late_ns`. Under `runtime.realtime` it runs as `SCHED_FIFO`, so a wake-up
//! interrupts a spinning worker at once, which is the interrupt's real cost on a shared core.
//!
//! A flag names the arming it preempts (the worker's arm count, `epoch`), so a flag written for
//! a request that has meanwhile left its worker never preempts the next one; the one race left
//! (the worker disarms and re-arms between the timer's two reads) preempts the new request
//! early, which is harmless: it is preemptible, and it is requeued like any other.

use std::cell::OnceCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use microsched_core::scenario::Scenario;
use microsched_core::sched::QueuePolicy;
use microsched_core::time::us;
use microsched_core::Nanos;
use parking_lot::Mutex;

use crate::clock::{realtime_priority, tight_timer_slack, Clock};
use crate::report::Counters;
use crate::sched::{RtView, Sched};
use crate::server::Shared;

/// How often instrumented code polls its preempt flag (compiler interrupts' probe interval).
pub const PROBE_NS: Nanos = 1_000;
/// The timer's sleep when no quantum is armed (a worker that arms one unparks it sooner).
const IDLE_SLEEP: Duration = Duration::from_millis(1);
/// A slot's deadline once its quantum expired with nothing queued at its worker, under a policy
/// that preempts only for work in the worker's own queue: the timer stops waking for it, and the
/// thread that queues work there re-arms it for the next quantum boundary (the simulator's lazy
/// expiries: the same decisions, one timer wake-up instead of one per quantum).
const LAZY: Nanos = Nanos::MAX - 1;

/// One worker's quantum: its deadline, the arming it belongs to, and the flag the timer writes.
#[derive(Debug)]
pub struct Slot {
    /// Absolute deadline (the server clock's ns); `Nanos::MAX`: nothing preemptible runs.
    deadline: AtomicU64,
    /// The armed quantum (for re-arming after an avoided preemption).
    quantum: AtomicU64,
    /// Armings so far (the worker's own count).
    epoch: AtomicU64,
    /// The epoch the timer asks to preempt (`u64::MAX`: none).
    flag: AtomicU64,
    /// While `LAZY`: the expired deadline the quantum boundaries count from.
    lazy_from: AtomicU64,
}

impl Slot {
    fn new() -> Self {
        Slot {
            deadline: AtomicU64::new(Nanos::MAX),
            quantum: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            flag: AtomicU64::new(u64::MAX),
            lazy_from: AtomicU64::new(0),
        }
    }

    #[inline]
    fn flagged(&self) -> bool {
        self.flag.load(Ordering::Relaxed) == self.epoch.load(Ordering::Relaxed)
    }
}

/// The server's preemption machinery.
pub struct Preempt {
    /// Whether any request can be preempted (the policy is per-request, or a quantum is set).
    pub enabled: bool,
    /// The scenario's quantum for every request (`Nanos::MAX`: none), the policies' `default`.
    pub default_quantum: Nanos,
    /// The policy preempts exactly when the worker's own queue holds work (Synergy's
    /// conditional preemption): expiries with nothing queued go `LAZY`.
    lazy: bool,
    slots: Arc<[Slot]>,
    /// The timer sleeps with nothing armed: the next arming wakes it.
    timer_idle: AtomicBool,
    timer: OnceLock<std::thread::Thread>,
    /// The dispatcher's event fd, when it watches the deadlines instead of a timer thread.
    wake_fd: OnceLock<i32>,
    /// One policy instance for every thread, for policies with per-request state that other
    /// workers read (Synergy: the EMAs, which workers run long requests, the soft-ring counts,
    /// the wait queue's counters). Per-thread instances, as d-FCFS has, would each see only
    /// their own worker's part of it.
    pub shared_policy: Option<Mutex<Box<dyn QueuePolicy<RtView>>>>,
}

impl std::fmt::Debug for Preempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preempt").field("enabled", &self.enabled).field("default_quantum", &self.default_quantum).finish()
    }
}

impl Preempt {
    pub(crate) fn new(sc: &Scenario, workers: usize) -> Self {
        let policy = microsched_core::sched::build::<RtView>(sc, sc.seed).expect("the scenario was validated, and the runtime refuses python queueing policies");
        let per_request = policy.per_request();
        let default_quantum = match sc.server.preemption.quantum_us {
            Some(q) if policy.preemptible() => us(q).max(1),
            _ => Nanos::MAX,
        };
        Preempt {
            enabled: per_request || default_quantum != Nanos::MAX,
            default_quantum,
            lazy: policy.preempts_only_for_own_queue(),
            slots: (0..workers).map(|_| Slot::new()).collect(),
            timer_idle: AtomicBool::new(false),
            timer: OnceLock::new(),
            wake_fd: OnceLock::new(),
            shared_policy: per_request.then(|| Mutex::new(policy)),
        }
    }

    /// Worker `me` starts or resumes a preemptible request at `now` with quantum `q`.
    pub(crate) fn arm(&self, me: usize, now: Nanos, q: Nanos) {
        let s = &self.slots[me];
        s.epoch.fetch_add(1, Ordering::Relaxed);
        s.quantum.store(q, Ordering::Relaxed);
        s.deadline.store(now.saturating_add(q), Ordering::SeqCst);
        if self.timer_idle.swap(false, Ordering::SeqCst) {
            self.wake_timer();
        }
    }

    /// The preemptible request left worker `me` (done, preempted, yielded, waiting).
    pub(crate) fn disarm(&self, me: usize) {
        let s = &self.slots[me];
        s.epoch.fetch_add(1, Ordering::Relaxed);
        s.deadline.store(Nanos::MAX, Ordering::SeqCst);
    }

    /// Work was queued at worker `core`'s own queue (now): a quantum that expired with
    /// nothing queued there is re-armed for its next boundary, where the timer preempts it.
    /// The boundaries passed meanwhile were avoided preemptions.
    #[inline]
    pub(crate) fn queued_at(&self, core: usize, clock: &Clock, c: &Counters) {
        let s = &self.slots[core];
        if !self.lazy || s.deadline.load(Ordering::Relaxed) != LAZY {
            return;
        }
        let now = clock.now();
        let from = s.lazy_from.load(Ordering::Relaxed);
        let q = s.quantum.load(Ordering::Relaxed).max(1);
        let passed = now.saturating_sub(from) / q;
        let next = from + (passed + 1) * q;
        if s.deadline.compare_exchange(LAZY, next, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
            c.quantum_expiries.fetch_add(passed, Ordering::Relaxed);
            c.avoided_preemptions.fetch_add(passed, Ordering::Relaxed);
            if self.timer_idle.swap(false, Ordering::SeqCst) {
                self.wake_timer();
            }
        }
    }

    /// Wakes whoever watches the deadlines: the timer thread, or the dispatcher blocked in its
    /// wait ([`crate::dispatcher`]: its event fd).
    fn wake_timer(&self) {
        if let Some(fd) = self.wake_fd.get() {
            crate::dispatcher::kick(*fd);
        } else if let Some(t) = self.timer.get() {
            t.unpark();
        }
    }

    /// The dispatcher watches the deadlines instead of a timer thread: it sleeps with
    /// [`Self::idle`] set and is woken through `fd` when a quantum is armed.
    pub(crate) fn watched_by(&self, fd: i32) {
        let _ = self.wake_fd.set(fd);
    }

    /// The watcher is about to sleep (`true`) or is awake (`false`): an arming while it sleeps
    /// wakes it.
    pub(crate) fn idle(&self, sleeping: bool) {
        self.timer_idle.store(sleeping, Ordering::SeqCst);
    }

    /// The calling worker thread polls slot `me` at its yield points from now on.
    pub(crate) fn bind(&self, me: usize) {
        SLOT.with(|s| {
            let _ = s.set((self.slots.clone(), me));
        });
    }
}

thread_local! {
    /// The worker's own slot (a request's yield points poll the slot of the worker running it).
    static SLOT: OnceCell<(Arc<[Slot]>, usize)> = const { OnceCell::new() };
}

thread_local! {
    /// The end of the slice the dispatcher gives its own request (Concord's slack work): the
    /// request's yield points suspend it then, as a worker's do at its flag.
    static SLICE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// The calling thread (the dispatcher) runs a request for at most `ns` from now.
pub(crate) fn slice(ns: Nanos) {
    SLICE.with(|s| s.set(Some(Instant::now() + Duration::from_nanos(ns))));
}

/// The calling thread's slice is over.
pub(crate) fn slice_end() {
    SLICE.with(|s| s.set(None));
}

/// Whether the calling thread is a worker of a server with preemption, or the dispatcher
/// running a slice.
pub(crate) fn bound() -> bool {
    SLOT.with(|s| s.get().is_some()) || SLICE.with(|s| s.get().is_some())
}

/// Whether the timer asked the calling worker to give up its request (or the dispatcher's
/// slice is over).
#[inline]
fn flagged() -> bool {
    SLOT.with(|s| s.get().is_some_and(|(slots, me)| slots[*me].flagged()))
        || SLICE.with(|s| s.get().is_some_and(|end| Instant::now() >= end))
}

/// Spins for `ns` of the request's own run time, polling the preempt flag every [`PROBE_NS`];
/// `suspend` gives the worker up (and returns when the request resumes, perhaps on another
/// worker: the remaining time is then spun there).
pub(crate) fn spin_preemptible(ns: Nanos, mut suspend: impl FnMut()) {
    let probe = Duration::from_nanos(PROBE_NS);
    let mut left = ns;
    while left > 0 {
        let t0 = Instant::now();
        let stop = Duration::from_nanos(left);
        let mut next = probe;
        loop {
            let e = t0.elapsed();
            if e >= stop {
                left = 0;
                break;
            }
            if e >= next {
                next += probe;
                if flagged() {
                    left -= e.as_nanos() as Nanos;
                    suspend();
                    break;
                }
            }
            std::hint::spin_loop();
        }
    }
}

/// The timer thread: flags the workers whose quantum expired and whose policy agrees
/// (`preempt_at_quantum`), re-arms the others for another quantum (an avoided preemption).
pub(crate) fn run_timer(sh: Arc<Shared>, mut sched: Sched, realtime: bool) {
    tight_timer_slack();
    let _rt = if realtime { realtime_priority() } else { None };
    let p = &sh.preempt;
    let _ = p.timer.set(std::thread::current());
    while !sh.stop.load(Ordering::Relaxed) {
        let (earliest, _) = scan(&sh, &mut sched);
        if earliest == Nanos::MAX {
            p.timer_idle.store(true, Ordering::SeqCst);
            // An arming between the scan and the flag above is seen here; one after it unparks.
            if p.slots.iter().all(|s| s.deadline.load(Ordering::SeqCst) >= LAZY) {
                std::thread::park_timeout(IDLE_SLEEP);
            }
            p.timer_idle.store(false, Ordering::SeqCst);
        } else {
            let now = sh.clock.now();
            if earliest > now {
                std::thread::park_timeout(Duration::from_nanos(earliest - now));
            }
        }
    }
}

/// One pass over the workers' quantum deadlines (the timer thread's, or the dispatcher's when
/// the policy's dispatcher sends the preemptions, [`crate::dispatcher`]): flags the expired
/// ones the policy preempts, re-arms the others. Returns the earliest deadline still armed
/// (`Nanos::MAX`: none) and how many flags it wrote (preemption signals sent).
pub(crate) fn scan(sh: &Shared, sched: &mut Sched) -> (Nanos, u64) {
    let p = &sh.preempt;
    let c = &sh.counters;
    let now = sh.clock.now();
    let mut earliest = Nanos::MAX;
    let mut signals = 0;
    for (w, s) in p.slots.iter().enumerate() {
        let d = s.deadline.load(Ordering::SeqCst);
        if d == LAZY {
            continue;
        }
        if d > now {
            earliest = earliest.min(d);
            continue;
        }
        let e = s.epoch.load(Ordering::Relaxed);
        Counters::bump(&c.quantum_expiries);
        c.preempt_late_ns.fetch_add(now - d, Ordering::Relaxed);
        if sched.preempt_at_quantum(w) {
            s.flag.store(e, Ordering::Relaxed);
            signals += 1;
            let _ = s.deadline.compare_exchange(d, Nanos::MAX, Ordering::SeqCst, Ordering::Relaxed);
        } else {
            Counters::bump(&c.avoided_preemptions);
            if p.lazy {
                s.lazy_from.store(d, Ordering::Relaxed);
                if s.deadline.compare_exchange(d, LAZY, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
                    // Work queued between the check and the mark would wait for the next
                    // arrival: look once more.
                    if sched.preempt_at_quantum(w) {
                        p.queued_at(w, &sh.clock, c);
                        earliest = earliest.min(s.deadline.load(Ordering::SeqCst));
                    }
                }
                continue;
            }
            // Another quantum from the expiry, or from now if the timer woke later than that.
            let q = s.quantum.load(Ordering::Relaxed).max(1);
            let nd = if d + q > now { d + q } else { now + q };
            if s.deadline.compare_exchange(d, nd, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
                earliest = earliest.min(nd);
            }
        }
    }
    (earliest, signals)
}
