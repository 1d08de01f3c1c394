//! A core's queues: the packet inbox filled by whichever thread received the datagram (a worker
//! polling the socket, or the controller when no worker is searching; `crossbeam_deque::Injector`,
//! one per core, fed as the queueing policy steers: [`crate::sched`]) and the worker's run queue
//! (`crossbeam_deque::Worker`, FIFO, others steal from it through its `Stealer`).
//!
//! Both are FIFO for every taker (owner pops and steals all take the front), and each has one
//! pusher at a time (inbox pushers serialize on a per-core lock; the run queue's is its owner). So the k-th item taken is the k-th
//! pushed, and a ring of enqueue timestamps indexed by push count gives the enqueue time of the
//! oldest waiting item without a lock: Caladan's `oldest_tsc`, the signal of the core
//! allocators and Breakwater. Items move one at a time (no opaque batch moves) so that every
//! move is seen. If more than [`RING`] items wait in one queue the stamp of the oldest is
//! overwritten by a newer one and the delay is underestimated (by then it is huge anyway).

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use microsched_core::Nanos;

use crate::coro::Task;
use crate::park::{Parker, Phase};

/// Enqueue-time ring size per queue.
pub const RING: usize = 1 << 16;

/// A request waiting to run.
#[derive(Debug)]
pub struct Job {
    pub session: u32,
    pub req_id: u64,
    pub rtype: u16,
    pub service_ns: u64,
    /// When it was admitted (received and validated).
    pub arrived: Nanos,
    pub peer: std::net::SocketAddr,
    /// Its program, or its suspended coroutine; `None` for a request that only computes its
    /// service time (the common case stays a plain, allocation-free record).
    pub task: Option<Box<Task>>,
}

/// Enqueue stamps of one FIFO queue.
#[derive(Debug)]
pub struct Stamps {
    ring: Box<[AtomicU64]>,
    pushed: AtomicU64,
    taken: AtomicU64,
}

impl Stamps {
    fn new() -> Self {
        Self { ring: (0..RING).map(|_| AtomicU64::new(0)).collect(), pushed: AtomicU64::new(0), taken: AtomicU64::new(0) }
    }
    /// The (serialized) pusher records an item's enqueue time, before pushing it.
    #[inline]
    fn pushed(&self, at: Nanos) {
        let n = self.pushed.load(Ordering::Relaxed);
        self.ring[n as usize % RING].store(at, Ordering::Relaxed);
        self.pushed.store(n + 1, Ordering::Release);
    }
    /// Any taker, after taking an item.
    #[inline]
    fn took(&self) {
        self.taken.fetch_add(1, Ordering::AcqRel);
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Items ever pushed and ever taken: a queue's turnover, as Shenango's standing-queue test
    /// differences it.
    pub fn totals(&self) -> (u64, u64) {
        (self.pushed.load(Ordering::Acquire), self.taken.load(Ordering::Acquire))
    }
    pub fn len(&self) -> u64 {
        let taken = self.taken.load(Ordering::Acquire);
        self.pushed.load(Ordering::Acquire).saturating_sub(taken)
    }
    pub fn oldest(&self) -> Option<Nanos> {
        let taken = self.taken.load(Ordering::Acquire);
        if taken < self.pushed.load(Ordering::Acquire) {
            Some(self.ring[taken as usize % RING].load(Ordering::Relaxed))
        } else {
            None
        }
    }
}

/// What every thread shares about one core.
#[derive(Debug)]
pub struct CoreShared {
    pub inbox: Injector<Job>,
    pub inbox_stamps: Stamps,
    pub runq: Stealer<Job>,
    pub runq_stamps: Stamps,
    pub parker: Parker,
    /// Serializes the inbox's pushers (any worker that polled the socket, or the controller):
    /// the stamp ring relies on the k-th stamp being the k-th item pushed.
    deliver_lock: parking_lot::Mutex<()>,
    /// Set by the controller when the allocator asks this core to yield; the worker parks at its
    /// next idle point. Cleared by the controller at its next tick (a stale request is withdrawn).
    pub yield_requested: std::sync::atomic::AtomicBool,
    /// Requests that entered this core's queues (from the network, or stolen into them) and left
    /// them (started here, or stolen away): Shenango's "still queued since the last check".
    pub enqueued_total: AtomicU64,
    pub dequeued_total: AtomicU64,
    /// Requests this worker ran.
    pub completed: AtomicU64,
}

impl CoreShared {
    /// A core and the owner half of its run queue.
    pub fn new(initial: Phase) -> (Self, Worker<Job>) {
        let w = Worker::new_fifo();
        let s = Self {
            inbox: Injector::new(),
            inbox_stamps: Stamps::new(),
            runq: w.stealer(),
            runq_stamps: Stamps::new(),
            parker: Parker::new(initial),
            deliver_lock: parking_lot::Mutex::new(()),
            yield_requested: Default::default(),
            enqueued_total: AtomicU64::new(0),
            dequeued_total: AtomicU64::new(0),
            completed: AtomicU64::new(0),
        };
        (s, w)
    }

    /// The thread that received a request (a worker polling the socket, or the controller), or
    /// one requeueing a request here, hands it to this core, stamped `at`.
    pub fn deliver(&self, job: Job, at: Nanos) {
        let _g = self.deliver_lock.lock();
        self.inbox_stamps.pushed(at);
        self.enqueued_total.fetch_add(1, Ordering::Relaxed);
        self.inbox.push(job);
    }

    /// Requests waiting in this core's inbox and run queue.
    pub fn queued(&self) -> u64 {
        self.inbox_stamps.len() + self.runq_stamps.len()
    }

    /// Enqueue time of the oldest waiting request.
    pub fn oldest(&self) -> Option<Nanos> {
        match (self.inbox_stamps.oldest(), self.runq_stamps.oldest()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes one request from the inbox (any thread).
    #[inline]
    fn take_inbox(&self) -> Option<Job> {
        loop {
            match self.inbox.steal() {
                Steal::Success(j) => {
                    self.inbox_stamps.took();
                    return Some(j);
                }
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    /// Another worker takes one request from the run queue.
    #[inline]
    fn steal_runq(&self) -> Option<Job> {
        loop {
            match self.runq.steal() {
                Steal::Success(j) => {
                    self.runq_stamps.took();
                    return Some(j);
                }
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }
}

/// The owning worker's side of its core: pops, refills from its inbox, steals from a victim the
/// queueing policy chose.
pub struct LocalQueue {
    pub runq: Worker<Job>,
}

/// Packets moved from the inbox into the run queue per refill (Caladan's softirq batch).
pub const REFILL_BATCH: usize = 16;

impl LocalQueue {
    #[inline]
    fn push(&self, me: &CoreShared, job: Job) {
        me.runq_stamps.pushed(job.arrived);
        self.runq.push(job);
    }

    /// A request that ran here goes back to the tail of this run queue (a yield, a mutex handed
    /// to it, no coroutine stack free yet), stamped `now`: the delay signal counts its wait from
    /// when it became ready, as Caladan's runqueue delay does for a woken thread.
    pub fn requeue(&self, me: &CoreShared, job: Job, now: Nanos) {
        me.runq_stamps.pushed(now);
        me.enqueued_total.fetch_add(1, Ordering::Relaxed);
        self.runq.push(job);
    }

    /// Moves up to [`REFILL_BATCH`] requests from the inbox into the run queue. A yielding
    /// request calls it before going back to the tail: what arrived while it ran is ahead of it,
    /// else a run queue of yielders would never let the worker reach its inbox.
    pub fn refill(&self, me: &CoreShared) {
        for _ in 0..REFILL_BATCH {
            match me.take_inbox() {
                Some(j) => self.push(me, j),
                None => break,
            }
        }
    }

    /// Own run queue, then own inbox (moving a batch into the run queue).
    pub fn find_own(&self, cores: &[CoreShared], me_idx: usize) -> Option<Job> {
        let me = &cores[me_idx];
        if let Some(j) = self.runq.pop() {
            me.runq_stamps.took();
            me.dequeued_total.fetch_add(1, Ordering::Relaxed);
            return Some(j);
        }
        if let Some(first) = me.take_inbox() {
            for _ in 1..REFILL_BATCH {
                match me.take_inbox() {
                    Some(j) => self.push(me, j),
                    None => break,
                }
            }
            me.dequeued_total.fetch_add(1, Ordering::Relaxed);
            return Some(first);
        }
        None
    }

    /// Takes `amount(queued)` of core `v`'s waiting requests (run queue first, then inbox:
    /// oldest first, parked cores included); starts the first, queues the rest here. Counts the
    /// moves between cores. `None` when the victim had emptied meanwhile.
    pub fn steal_from(
        &self,
        cores: &[CoreShared],
        me_idx: usize,
        v: usize,
        amount: impl FnOnce(usize) -> usize,
    ) -> Option<Job> {
        let me = &cores[me_idx];
        let victim = &cores[v];
        let want = amount(victim.queued() as usize).max(1);
        let mut got: Option<Job> = None;
        let mut moved = 0u64;
        for _ in 0..want {
            let j = victim.steal_runq().or_else(|| victim.take_inbox());
            let Some(j) = j else { break };
            moved += 1;
            if got.is_none() {
                got = Some(j);
            } else {
                self.push(me, j);
            }
        }
        if moved > 0 {
            victim.dequeued_total.fetch_add(moved, Ordering::Relaxed);
            // The first is started at once: it enters and leaves this core.
            me.enqueued_total.fetch_add(moved, Ordering::Relaxed);
            me.dequeued_total.fetch_add(1, Ordering::Relaxed);
        }
        got
    }
}

/// The queue every worker serves (c-FCFS, `server.queue = "central"`; empty otherwise): an
/// `Injector`, FIFO for every taker. Its pushers are many (any worker that received a datagram
/// or requeues a request, or the controller), so they serialize on a lock for the stamp ring,
/// as a core's inbox pushers do: one central queue is a serialization point by design.
#[derive(Debug)]
pub struct SharedQueue {
    queue: Injector<Job>,
    pub stamps: Stamps,
    push_lock: parking_lot::Mutex<()>,
}

impl Default for SharedQueue {
    fn default() -> Self {
        Self { queue: Injector::new(), stamps: Stamps::new(), push_lock: parking_lot::Mutex::new(()) }
    }
}

impl SharedQueue {
    /// Appends `job`, stamped `at` (its arrival, or when it became ready again).
    pub fn push(&self, job: Job, at: Nanos) {
        let _g = self.push_lock.lock();
        self.stamps.pushed(at);
        self.queue.push(job);
    }

    pub fn take(&self) -> Option<Job> {
        loop {
            match self.queue.steal() {
                Steal::Success(j) => {
                    self.stamps.took();
                    return Some(j);
                }
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }
}
