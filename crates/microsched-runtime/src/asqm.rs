//! Protego's latency-aware synchronization (ASQM) in the real runtime: `lock_if_uncongested`,
//! `is_congested` and queue-delay reads for handlers ([`Cx`] methods and the typed
//! [`AsqmMutex`]), each request's accumulated queueing delay carried through the coroutine
//! workers, failure replies sent at once, and `server.lock_control` for the program handler.
//!
//! The decision rule is `microsched_core::sched::asqm::LockControl::drops`, the very one the
//! simulator consults: this file only gathers its inputs on a real clock.
//!
//! * **Accumulated delay** (the artifact's `acc_qdel`, shared/reference/
//!   overload-control-and-core-allocation.md §2.4) lives in the request's [`Coro`]: seeded when
//!   it first runs (`seed = "signal"`: the server's congestion signal at that moment, computed
//!   from the queues' enqueue stamps, as the artifact's `set_acc_qdel(runtime_queue_us())`;
//!   `"measured"`: its own wait since admission), then every runqueue wait (from the moment the
//!   worker requeued it after a yield or a lock hand-over to its next resume) and every lock wait
//!   (from joining the mutex's FIFO to being handed it).
//! * **A lock's queueing delay** is its oldest waiter's age (the core `MutexTable` keeps
//!   enqueue times), as Caladan's `mutex_queue_tsc`.
//! * The coroutine asks ([`Ask`], one suspension); its worker answers, because only the worker
//!   holds the request's accounting and can park it in the mutex's FIFO. As in the artifact,
//!   the test and the acquisition are one step for the asker, but another request may take the
//!   lock in between on another worker: the rule reads a snapshot.
//! * **Drops**: a handler that was refused a lock unwinds (releasing what it holds), calls
//!   [`Cx::reply_dropped`] — the failure reply (wire status `LockDropped`) and the credit go back
//!   at once, counted by the credit controller as a drop (Protego's `out_cnt` counts only
//!   successes) — and may then clean up (a Memcached SET frees its chunk under the slab lock,
//!   with a plain `lock`: a cleanup may not be dropped) before it returns [`Outcome::Dropped`].

use std::cell::UnsafeCell;
use std::sync::atomic::Ordering;

use microsched_core::sched::asqm::{Config, LockControl, LockStats, Seed};
use microsched_core::summary::LockSummary;
use microsched_core::Nanos;
use parking_lot::Mutex;

use crate::clock::spin_for;
use crate::coro::{Coro, Cx};
use crate::handler::{run_program, Handler, Outcome, ProgramSteps, Request};
use crate::queue::Job;
use crate::report::Counters;
use crate::rpc::CreditMsg;
use crate::server::Shared;
use crate::wire::{encode, Msg, Status};

/// What a coroutine asks its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// Take mutex `id` (waiting in its FIFO) unless the rule drops the request: 1 taken, 0 not.
    LockIfUncongested(u32),
    /// Whether the rule would drop the request at mutex `id` now: 1 yes.
    IsCongested(u32),
    /// Mutex `id`'s queueing delay (its oldest waiter's age, ns).
    QueueDelay(u32),
    /// The request's accumulated queueing delay so far (ns).
    AccDelay,
    /// Send the request's failure reply now (it was dropped); the handler may clean up after.
    ReplyDropped,
    /// Whether the rule refuses a wait on condition variable `cv` now: 1 yes.
    CondvarIsCongested(u32),
    /// Condition variable `cv`'s queueing delay (its oldest waiter's age, ns).
    CondvarQueueDelay(u32),
    /// A request program's `wait` step, holding the condvar's mutex: take one of `cv`'s items
    /// if there is one: 1 taken, 0 none.
    CondvarTakeItem(u32),
    /// A request program's `signal` step, holding the condvar's mutex: add an item to `cv`.
    CondvarPutItem(u32),
}

impl Cx<'_> {
    /// Protego's `mutex_lock_if_uncongested`: takes mutex `id` (waiting off the worker if it is
    /// taken) unless this request's accumulated queueing delay plus the mutex's queueing delay
    /// exceeds the budget (`server.lock_control`; without it, always takes). Outside a
    /// coroutine: panics as [`Cx::lock`] does.
    pub fn lock_if_uncongested(&mut self, id: u32) -> bool {
        assert!(self.in_coroutine(), "Cx::lock_if_uncongested outside a coroutine: the handler must ask for one (Handler::coroutine)");
        self.ask(Ask::LockIfUncongested(id), 1) == 1
    }

    /// `mutex_lock_is_congested`: whether `lock_if_uncongested(id)` would drop the request now.
    pub fn is_congested(&mut self, id: u32) -> bool {
        self.ask(Ask::IsCongested(id), 0) == 1
    }

    /// Mutex `id`'s queueing delay: its oldest waiter's age (ns; 0 with no waiter).
    pub fn lock_queue_ns(&mut self, id: u32) -> Nanos {
        self.ask(Ask::QueueDelay(id), 0)
    }

    /// This request's accumulated queueing delay (ns): the artifact's `get_acc_qdel`.
    pub fn acc_qdel_ns(&mut self) -> Nanos {
        self.ask(Ask::AccDelay, 0)
    }

    /// `condvar_wait_if_uncongested`: waits on `cv` releasing `mutex` (held) as [`Cx::wait`]
    /// does, unless accumulated delay + the condvar's queueing delay exceeds the budget: then
    /// false, at once, still holding `mutex` (the caller unwinds and drops the request).
    pub fn wait_if_uncongested(&mut self, cv: u32, mutex: u32) -> bool {
        assert!(self.in_coroutine(), "Cx::wait_if_uncongested outside a coroutine: the handler must ask for one (Handler::coroutine)");
        if self.ask(Ask::CondvarIsCongested(cv), 0) == 1 {
            return false;
        }
        self.wait(cv, mutex);
        true
    }

    /// `condvar_is_congested`: whether `wait_if_uncongested(cv, _)` would refuse now.
    pub fn condvar_is_congested(&mut self, cv: u32) -> bool {
        self.ask(Ask::CondvarIsCongested(cv), 0) == 1
    }

    /// Condition variable `cv`'s queueing delay: its oldest waiter's age (ns; 0 with none).
    pub fn condvar_queue_ns(&mut self, cv: u32) -> Nanos {
        self.ask(Ask::CondvarQueueDelay(cv), 0)
    }

    /// A program's `wait` step (holding the condvar's mutex): takes an item of `cv` if any.
    pub(crate) fn condvar_take_item(&mut self, cv: u32) -> bool {
        self.ask(Ask::CondvarTakeItem(cv), 0) == 1
    }

    /// A program's `signal` step (holding the condvar's mutex): adds an item to `cv`.
    pub(crate) fn condvar_put_item(&mut self, cv: u32) {
        self.ask(Ask::CondvarPutItem(cv), 0);
    }

    /// Sends this request's failure reply now (once); the handler returns
    /// [`Outcome::Dropped`] when it is done cleaning up.
    pub fn reply_dropped(&mut self) {
        self.ask(Ask::ReplyDropped, 0);
    }
}

/// A value guarded by one of the runtime's blocking mutexes (mutex `id` of the scenario's
/// `workload.locks`), taken through a request's [`Cx`]: waiting suspends the request, not its
/// worker. The closure forms keep the guard from outliving the critical section.
pub struct AsqmMutex<T> {
    id: u32,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached inside `with`/`with_if_uncongested`, between the runtime
// mutex's acquisition and release, so one request at a time touches it.
unsafe impl<T: Send> Sync for AsqmMutex<T> {}

impl<T> std::fmt::Debug for AsqmMutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsqmMutex").field("id", &self.id).finish_non_exhaustive()
    }
}

impl<T> AsqmMutex<T> {
    pub fn new(id: u32, value: T) -> Self {
        Self { id, value: UnsafeCell::new(value) }
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    /// Runs `f` holding the mutex (a plain `mutex_lock`: never dropped).
    pub fn with<R>(&self, cx: &mut Cx, f: impl FnOnce(&mut T) -> R) -> R {
        cx.lock(self.id);
        // SAFETY: the runtime mutex is held (see the Sync impl).
        let r = f(unsafe { &mut *self.value.get() });
        cx.unlock(self.id);
        r
    }

    /// Runs `f` holding the mutex, unless ASQM drops the request (`None`, nothing taken).
    pub fn with_if_uncongested<R>(&self, cx: &mut Cx, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if !cx.lock_if_uncongested(self.id) {
            return None;
        }
        // SAFETY: as in `with`.
        let r = f(unsafe { &mut *self.value.get() });
        cx.unlock(self.id);
        Some(r)
    }

    pub fn is_congested(&self, cx: &mut Cx) -> bool {
        cx.is_congested(self.id)
    }

    pub fn queue_ns(&self, cx: &mut Cx) -> Nanos {
        cx.lock_queue_ns(self.id)
    }
}

/// A condition variable (any id: its FIFO is created on first use) over an [`AsqmMutex`]'s
/// value: the closure forms take the mutex, wait while the value is not ready (the mutex
/// released, the request off its worker) and run `f` holding it.
#[derive(Debug, Clone, Copy)]
pub struct AsqmCondvar {
    id: u32,
}

impl AsqmCondvar {
    pub fn new(id: u32) -> Self {
        Self { id }
    }

    /// Takes `m`, waits until `ready(value)`, runs `f` holding `m` (never dropped).
    pub fn wait_until<T, R>(&self, cx: &mut Cx, m: &AsqmMutex<T>, mut ready: impl FnMut(&mut T) -> bool, f: impl FnOnce(&mut T) -> R) -> R {
        cx.lock(m.id);
        // SAFETY: `m` is held whenever the value is reached (see AsqmMutex's Sync impl).
        while !ready(unsafe { &mut *m.value.get() }) {
            cx.wait(self.id, m.id);
        }
        let r = f(unsafe { &mut *m.value.get() });
        cx.unlock(m.id);
        r
    }

    /// As `wait_until`, with `lock_if_uncongested` and `wait_if_uncongested`: `None` (nothing
    /// held) when ASQM refuses the lock or a wait.
    pub fn wait_until_if_uncongested<T, R>(
        &self,
        cx: &mut Cx,
        m: &AsqmMutex<T>,
        mut ready: impl FnMut(&mut T) -> bool,
        f: impl FnOnce(&mut T) -> R,
    ) -> Option<R> {
        if !cx.lock_if_uncongested(m.id) {
            return None;
        }
        // SAFETY: as in `wait_until`.
        while !ready(unsafe { &mut *m.value.get() }) {
            if !cx.wait_if_uncongested(self.id, m.id) {
                cx.unlock(m.id);
                return None;
            }
        }
        let r = f(unsafe { &mut *m.value.get() });
        cx.unlock(m.id);
        Some(r)
    }

    pub fn notify_one(&self, cx: &mut Cx) {
        cx.notify_one(self.id);
    }

    pub fn notify_all(&self, cx: &mut Cx) {
        cx.notify_all(self.id);
    }

    pub fn is_congested(&self, cx: &mut Cx) -> bool {
        cx.condvar_is_congested(self.id)
    }

    pub fn queue_ns(&self, cx: &mut Cx) -> Nanos {
        cx.condvar_queue_ns(self.id)
    }
}

/// The server's side: the rule and the per-lock statistics (whole run).
#[derive(Debug)]
pub struct Asqm {
    pub rule: LockControl,
    pub(crate) stats: Mutex<LockStats>,
}

impl Asqm {
    /// `families`: (name, members) in mutex-id order.
    pub fn new(cfg: &Config, families: &[(&str, u32)]) -> Self {
        let mut stats = LockStats::new(families.iter().copied());
        stats.start_window(0);
        Self { rule: cfg.build(), stats: Mutex::new(stats) }
    }

    pub fn summaries(&self, now: Nanos) -> Vec<LockSummary> {
        let s = self.stats.lock();
        LockStats::summaries(&[&s], now, now)
    }
}

/// What the worker does with an ask.
pub(crate) enum Verdict {
    /// Resume with this answer.
    Answer(u64),
    /// Take the mutex as a plain lock step (the rule let the request through).
    Acquire(u32),
    /// Send the failure reply, then resume.
    Reply,
}

/// The server's congestion signal now: the oldest queued request's age over every queue
/// (the artifact's `runtime_queue_us()`).
fn signal(sh: &Shared, now: Nanos) -> Nanos {
    let mut oldest = sh.shared.stamps.oldest();
    for c in &sh.cores {
        if let Some(o) = c.oldest() {
            oldest = Some(oldest.map_or(o, |x| x.min(o)));
        }
    }
    oldest.map_or(0, |o| now.saturating_sub(o))
}

/// A request's accumulated delay when it first runs at `now`.
pub(crate) fn seed(sh: &Shared, job: &Job, now: Nanos) -> Nanos {
    match sh.asqm.as_ref().map(|a| a.rule.seed) {
        Some(Seed::Signal) => signal(sh, now),
        _ => now.saturating_sub(job.arrived),
    }
}

pub(crate) fn decide(sh: &Shared, coro: &Coro, ask: Ask) -> Verdict {
    let now = sh.clock.now();
    let drops = |id: u32| {
        sh.asqm.as_ref().is_some_and(|a| a.rule.drops(coro.acc_ns, sh.mutexes.is_held(id), sh.mutexes.oldest_wait(id, now)))
    };
    match ask {
        Ask::LockIfUncongested(id) => {
            if drops(id) {
                if let Some(a) = &sh.asqm {
                    a.stats.lock().dropped(id);
                }
                Counters::bump(&sh.counters.lock_drops);
                Verdict::Answer(0)
            } else {
                Verdict::Acquire(id)
            }
        }
        Ask::IsCongested(id) => Verdict::Answer(u64::from(drops(id))),
        Ask::QueueDelay(id) => Verdict::Answer(sh.mutexes.oldest_wait(id, now)),
        Ask::AccDelay => Verdict::Answer(coro.acc_ns),
        Ask::ReplyDropped => Verdict::Reply,
        Ask::CondvarIsCongested(cv) => {
            let refused = sh
                .asqm
                .as_ref()
                .is_some_and(|a| a.rule.condvar_drops(coro.acc_ns, sh.mutexes.condvar_oldest_wait(cv, now)));
            sh.counters.condvar_drops.fetch_add(u64::from(refused), Ordering::Relaxed);
            if refused {
                sh.condvar_stats.lock().dropped(cv);
            }
            Verdict::Answer(u64::from(refused))
        }
        Ask::CondvarQueueDelay(cv) => Verdict::Answer(sh.mutexes.condvar_oldest_wait(cv, now)),
        Ask::CondvarTakeItem(cv) => Verdict::Answer(u64::from(sh.mutexes.take_item(cv))),
        Ask::CondvarPutItem(cv) => {
            sh.mutexes.put_item(cv);
            sh.condvar_stats.lock().signal(cv);
            Verdict::Answer(0)
        }
    }
}

/// A lock step on `id` that `waits` (found it held), for the statistics.
pub(crate) fn acquired(sh: &Shared, id: u32, waits: bool) {
    if let Some(a) = &sh.asqm {
        a.stats.lock().acquire(id, waits, sh.clock.now());
    }
}

/// Waiter `job` was handed mutex `id` at `now`, having waited since `since`: the wait joins its
/// accumulated delay.
pub(crate) fn handed(sh: &Shared, job: &mut Job, id: u32, since: Nanos, now: Nanos) {
    let wait = now.saturating_sub(since);
    let Some(crate::coro::Task::Running { coro, .. }) = job.task.as_deref_mut() else { return };
    coro.acc_ns += wait;
    if let Some(a) = &sh.asqm {
        let over = coro.acc_ns > a.rule.budget_ns;
        sh.counters.waits_over_budget.fetch_add(u64::from(over), Ordering::Relaxed);
        a.stats.lock().handed(id, wait, now, over);
    }
}

/// Waiter `job` of a condition variable, waiting since `since`, was notified at `now`: the wait
/// joins its accumulated delay (the artifact's `condvar_signal`: `acc_qdel += now - enque_ts`).
pub(crate) fn signalled(job: &mut Job, since: Nanos, now: Nanos) {
    if let Some(crate::coro::Task::Running { coro, .. }) = job.task.as_deref_mut() {
        coro.acc_ns += now.saturating_sub(since);
    }
}

/// The failure reply of a request dropped at a lock: the credit goes back as a drop (Protego's
/// controller counts no success for it) and the client hears at once.
pub(crate) fn reply_dropped(sh: &Shared, job: &Job, started: Nanos, msgs: &mut Vec<CreditMsg>) {
    Counters::bump(&sh.counters.lock_dropped);
    reply_failure(sh, job, started, msgs, Status::LockDropped);
}

/// A failure reply sent at once for a request the server dropped after admitting it (at a lock,
/// or at worker start): its credit goes back as a drop and the client hears `status`.
pub(crate) fn reply_failure(sh: &Shared, job: &Job, started: Nanos, msgs: &mut Vec<CreditMsg>, status: Status) {
    let done = sh.clock.now();
    let credits = if sh.credit_based {
        let delay = sh.delay_ns.load(Ordering::Relaxed);
        let mut rpc = sh.rpc.lock();
        let c = rpc.complete_as(done, job.session, delay, true);
        rpc.wakeups(msgs);
        drop(rpc);
        for m in msgs.drain(..) {
            sh.send_credit(m);
        }
        c
    } else {
        0
    };
    let msg = Msg::Response { req_id: job.req_id, credits, status, qdelay_ns: started.saturating_sub(job.arrived), service_ns: done.saturating_sub(started) };
    sh.send(&encode(&msg), job.peer);
}

/// The synthetic handler under `server.lock_control`: runs request programs as
/// [`crate::handler::Synthetic`] does, but takes each lock with `lock_if_uncongested`. A
/// dropped request releases what it holds (innermost first), spends `drop_cost_ns` producing
/// its failure reply, sends it, and, if it had taken `cleanup_lock`, re-takes that lock with a
/// plain `lock` and holds it `cleanup_ns` (a dropped SET freeing its chunk under the slab lock):
/// the simulator's model of a dropped request, run for real.
#[derive(Debug, Clone)]
pub struct ProgramHandler {
    drop_cost_ns: Nanos,
    cleanup_ns: Nanos,
    /// Per mutex id: it is the cleanup lock.
    cleanup_lock: Vec<bool>,
}

impl ProgramHandler {
    pub fn new(cfg: &Config, families: &[(&str, u32)]) -> Self {
        let rule = cfg.build();
        let cleanup_lock = families
            .iter()
            .flat_map(|&(n, c)| std::iter::repeat_n(cfg.cleanup_lock.as_deref() == Some(n), c as usize))
            .collect();
        Self { drop_cost_ns: rule.drop_cost_ns, cleanup_ns: rule.cleanup_ns, cleanup_lock }
    }
}

impl Handler for ProgramHandler {
    fn handle(&self, req: &Request, cx: &mut Cx) -> Outcome {
        run_program(req, cx, &mut AsqmSteps { h: self, held: Vec::new(), cleanup: None })
    }
}

/// [`ProgramHandler`]'s steps for one request: plain spins (not preemptible), each lock taken
/// with `lock_if_uncongested` and each wait with `wait_if_uncongested`, with what a refused
/// request must unwind.
struct AsqmSteps<'a> {
    h: &'a ProgramHandler,
    /// Mutexes it holds, in the order taken.
    held: Vec<u32>,
    /// The cleanup lock it took, if any.
    cleanup: Option<u32>,
}

impl ProgramSteps for AsqmSteps<'_> {
    fn compute(&mut self, _cx: &mut Cx, ns: Nanos) {
        spin_for(ns);
    }

    fn acquire(&mut self, cx: &mut Cx, id: u32) -> bool {
        if !cx.lock_if_uncongested(id) {
            return false;
        }
        self.held.push(id);
        if self.h.cleanup_lock.get(id as usize).copied().unwrap_or(false) {
            self.cleanup = Some(id);
        }
        true
    }

    fn release(&mut self, cx: &mut Cx, id: u32) {
        self.held.retain(|&h| h != id);
        cx.unlock(id);
    }

    /// `condvar_wait_if_uncongested`.
    fn wait(&mut self, cx: &mut Cx, cv: u32, mutex: u32) -> bool {
        cx.wait_if_uncongested(cv, mutex)
    }

    /// Releases what it holds (innermost first), spends the drop cost, sends the failure
    /// reply, cleans up.
    fn refused(&mut self, cx: &mut Cx) -> Outcome {
        for &h in self.held.iter().rev() {
            cx.unlock(h);
        }
        spin_for(self.h.drop_cost_ns);
        cx.reply_dropped();
        if let Some(m) = self.cleanup {
            cx.lock(m);
            spin_for(self.h.cleanup_ns);
            cx.unlock(m);
        }
        Outcome::Dropped
    }
}

/// A lock taken after the request's failure reply: its cleanup.
pub(crate) fn cleanup(sh: &Shared, id: u32) {
    if let Some(a) = &sh.asqm {
        a.stats.lock().cleanup(id);
    }
}
