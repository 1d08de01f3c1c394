//! The runtime's blocking mutexes: the core [`MutexTable`] (FIFO waiters with their enqueue
//! times, ownership handed to the first waiter on release, as Shenango's mutex), whose waiters
//! are suspended requests parked here, off every run queue, until the holder releases.
//!
//! One lock guards every mutex: a family may have a million members, and the critical sections
//! here are a few pointer moves; with a handful of workers a lock per mutex would buy nothing.

use microsched_core::sched::mutex::MutexTable;
use microsched_core::Nanos;
use parking_lot::Mutex;

use crate::queue::Job;

#[derive(Debug)]
pub struct Mutexes {
    inner: Mutex<Inner>,
    n: u32,
}

#[derive(Debug)]
struct Inner {
    /// Waiters are slots of `parked`.
    table: MutexTable<usize>,
    parked: Vec<Option<Job>>,
    free: Vec<usize>,
}

impl Mutexes {
    pub fn new(n: u32) -> Self {
        Self {
            inner: Mutex::new(Inner {
                table: MutexTable::new(n),
                parked: Vec::new(),
                free: Vec::new(),
            }),
            n,
        }
    }

    fn check(&self, id: u32) {
        assert!(
            id < self.n,
            "mutex {id} does not exist: the scenario's workload.locks declare {} (families counted lock by lock)",
            self.n
        );
    }

    /// A suspended request asks for mutex `id` at `now`: true if it holds it now (resume it);
    /// else `park` gives up the request, which waits in the mutex's FIFO. Deciding and parking
    /// under one lock is what keeps a release from slipping between them (a lost wake-up).
    pub fn acquire(&self, id: u32, now: Nanos, park: impl FnOnce() -> Job) -> bool {
        self.check(id);
        let mut g = self.inner.lock();
        let Inner {
            table,
            parked,
            free,
        } = &mut *g;
        let slot = free.pop().unwrap_or_else(|| {
            parked.push(None);
            parked.len() - 1
        });
        if table.acquire(id, slot, now) {
            free.push(slot);
            return true;
        }
        parked[slot] = Some(park());
        false
    }

    /// Releases mutex `id`; the waiter that now owns it, with when it began waiting.
    pub fn release(&self, id: u32) -> Option<(Job, Nanos)> {
        self.check(id);
        let mut g = self.inner.lock();
        let (slot, since) = g.table.release(id)?;
        g.free.push(slot);
        let job = g.parked[slot]
            .take()
            .expect("a waiter's slot holds its request");
        Some((job, since))
    }

    /// Whether mutex `id` is held (a snapshot: ASQM's `try_lock` mode reads it).
    pub fn is_held(&self, id: u32) -> bool {
        self.check(id);
        self.inner.lock().table.is_held(id)
    }

    /// Mutex `id`'s queueing delay at `now`: its oldest waiter's age (0 with none).
    pub fn oldest_wait(&self, id: u32, now: Nanos) -> Nanos {
        self.check(id);
        self.inner.lock().table.oldest_wait(id, now)
    }

    /// Requests waiting for a mutex.
    pub fn waiting(&self) -> usize {
        self.inner.lock().table.waiting()
    }

    /// Mutexes in all.
    pub fn len(&self) -> u32 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}
